"""The patch series: applies to the pristine base, is checkpatch-clean,
and round-trips through the developer workflow without noise.

These tests use a scratch git worktree of the kernel tree in the cache
directory, so they never disturb the build tree's timestamps.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(subprocess.run([str(REPO / "scripts" / "lib.sh"), "--cache-dir"], check=True,
                            capture_output=True, text=True).stdout.strip())
SCRATCH = CACHE / "test-tree" / "linux"


def sh(*cmd, cwd=REPO, check=True):
    p = subprocess.run(cmd, cwd=cwd, text=True, capture_output=True)
    if check and p.returncode:
        raise AssertionError(f"{cmd} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def series():
    names = []
    for line in (REPO / "patches" / "series").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.append(line)
    return names


def copy_repo(tmp_path):
    """A copy of the scripts and patches that tests may break freely."""
    dst = tmp_path / "repo"
    for d in ("scripts", "patches"):
        shutil.copytree(REPO / d, dst / d)
    shutil.copy(REPO / "BASE_VERSION", dst)
    return dst


def test_every_listed_patch_exists_and_every_patch_is_listed():
    listed = series()
    patches = REPO / "patches"
    on_disk = sorted(str(p.relative_to(patches)) for p in patches.rglob("*.patch")
                     if p.name != "0000-cover-letter.patch")
    assert sorted(listed) == on_disk
    assert len(set(listed)) == len(listed)


def test_every_topic_has_a_cover_letter_with_its_patches():
    """make export-patches writes each topic's cover letter from
    patches/covers/TOPIC.txt: a real subject and text, the topic's own
    shortlog."""
    for name, count, _ in topics():
        cover = (REPO / "patches" / name / "0000-cover-letter.patch").read_text()
        assert "*** SUBJECT HERE ***" not in cover and "*** BLURB HERE ***" not in cover
        subject = (REPO / "patches" / "covers" / f"{name}.txt").read_text().splitlines()[0]
        assert re.search(rf"^Subject: \[(RFC )?PATCH 0+/{count}\] {re.escape(subject)}$", cover, re.M), name
        assert re.search(rf"^sched-steal developers \({count}\):$", cover, re.M), name
        assert "\nWhat: " in cover and "Applies on: " in cover, name


def topics():
    """(name, patches, after) of every topic in patches/topics, in order."""
    rows = []
    for line in (REPO / "patches" / "topics").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, count, after = line.split()[:3]
            rows.append((name, int(count), [] if after == "-" else after.split(",")))
    return rows


def test_the_topics_table_matches_patches_and_series():
    """Each topic's count in patches/topics covers exactly its directory's
    patches, numbered from 1, in patches/series' order; "after" names
    earlier topics only."""
    rows = topics()
    listed = series()
    assert sum(c for _, c, _ in rows) == len(listed)
    at = 0
    seen = []
    for name, count, after in rows:
        mine = listed[at:at + count]
        assert all(s.startswith(name + "/") for s in mine), (name, mine)
        on_disk = sorted(p.name for p in (REPO / "patches" / name).glob("*.patch")
                         if p.name != "0000-cover-letter.patch")
        assert on_disk == sorted(s.split("/", 1)[1] for s in mine)
        assert [s.split("/", 1)[1][:4] for s in mine] == [f"{i:04d}" for i in range(1, count + 1)]
        assert all(a in seen for a in after), (name, after)
        seen.append(name)
        at += count


@pytest.mark.parametrize("topic", [t[0] for t in topics()])
def test_each_topic_applies_after_only_the_topics_it_names(topic, tmp_path):
    """A topic applied with only the topics patches/topics says it comes
    after. Where those are all the topics before it, the whole series'
    application shows it; the others are applied here."""
    rows = topics()
    names = [r[0] for r in rows]
    after = dict((r[0], r[2]) for r in rows)[topic]
    if after == names[:names.index(topic)]:
        return
    env = dict(os.environ, TOPICS=",".join(after + [topic]))
    p = subprocess.run([str(REPO / "scripts" / "apply-series.sh"), str(SCRATCH)], cwd=REPO,
                       env=env, text=True, capture_output=True)
    assert p.returncode == 0, p.stderr
    n = sh("git", "rev-list", "--count", "base..HEAD", cwd=SCRATCH).stdout.strip()
    assert int(n) == sum(r[1] for r in rows if r[0] in after + [topic])


def test_series_applies_to_pristine_base():
    sh(str(REPO / "scripts" / "apply-series.sh"), str(SCRATCH))
    base = sh("git", "rev-parse", "base", cwd=SCRATCH).stdout.strip()
    log = sh("git", "log", "--format=%s", f"{base}..HEAD", cwd=SCRATCH).stdout.split("\n")
    subjects = [s for s in log if s]
    assert len(subjects) == len(series())
    assert sh("git", "status", "--porcelain", "--untracked-files=no", cwd=SCRATCH).stdout == ""


def test_new_worktree_gets_the_series_when_the_build_tree_has_it():
    """A worktree made after the build tree got the series starts at base
    and must get the series too (its state is its own, not shared)."""
    sh(str(REPO / "scripts" / "apply-series.sh"))          # the build tree
    ktree = CACHE / "linux"
    fresh = CACHE / "test-tree" / "fresh" / "linux"
    sh("git", "worktree", "remove", "--force", str(fresh), cwd=ktree, check=False)
    shutil.rmtree(fresh, ignore_errors=True)
    try:
        sh(str(REPO / "scripts" / "apply-series.sh"), str(fresh))
        n = sh("git", "rev-list", "--count", "base..HEAD", cwd=fresh).stdout.strip()
        assert int(n) == len(series())
    finally:
        sh("git", "worktree", "remove", "--force", str(fresh), cwd=ktree, check=False)


def test_each_patch_is_one_commit_with_a_message():
    # A commit message body says why; a subject alone is not enough.
    sh(str(REPO / "scripts" / "apply-series.sh"), str(SCRATCH))
    revs = sh("git", "rev-list", "--reverse", "base..HEAD", cwd=SCRATCH).stdout.split()
    for rev in revs:
        body = sh("git", "log", "-1", "--format=%b", rev, cwd=SCRATCH).stdout
        subject = sh("git", "log", "-1", "--format=%s", rev, cwd=SCRATCH).stdout.strip()
        assert "Signed-off-by:" in body, subject
        text = body.split("Signed-off-by:")[0].strip()
        assert len(text.split()) >= 15, f"{subject}: commit message too short"


def test_checkpatch_strict_is_clean():
    p = sh(str(REPO / "scripts" / "checkpatch.sh"), check=False)
    assert p.returncode == 0, p.stdout + p.stderr


def test_export_round_trip_has_no_noise(tmp_path):
    repo = copy_repo(tmp_path)
    sh(str(REPO / "scripts" / "apply-series.sh"), str(SCRATCH))
    sh(str(repo / "scripts" / "export-patches.sh"), str(SCRATCH))
    diff = sh("diff", "-r", str(REPO / "patches"), str(repo / "patches"), check=False)
    assert diff.returncode == 0, diff.stdout


def test_missing_patch_is_an_error_not_a_skip(tmp_path):
    repo = copy_repo(tmp_path)
    with open(repo / "patches" / "series", "a") as f:
        f.write("nirelax/9999-sched-does-not-exist.patch\n")
    p = sh(str(repo / "scripts" / "apply-series.sh"), str(SCRATCH), check=False)
    assert p.returncode != 0
    assert "9999-sched-does-not-exist.patch" in p.stderr and "missing" in p.stderr


def test_patch_that_does_not_apply_fails_clearly(tmp_path):
    repo = copy_repo(tmp_path)
    bad = repo / "patches" / "nirelax" / "9999-bogus.patch"
    bad.write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Test <test@example.com>\nDate: Sat, 1 Jan 2000 00:00:00 +0000\n"
        "Subject: [PATCH] bogus\n\nContext that is not in the base.\n\n"
        "Signed-off-by: Test <test@example.com>\n---\n"
        "diff --git a/Makefile b/Makefile\n--- a/Makefile\n+++ b/Makefile\n"
        "@@ -1,3 +1,3 @@\n no such line\n-in the kernel\n+Makefile at all\n context\n")
    with open(repo / "patches" / "series", "a") as f:
        f.write("nirelax/9999-bogus.patch\n")
    p = sh(str(repo / "scripts" / "apply-series.sh"), str(SCRATCH), check=False)
    assert p.returncode != 0
    assert "does not apply" in p.stderr and "9999-bogus.patch" in p.stderr
    # The scratch tree is left clean, not half-applied.
    ra = sh("git", "rev-parse", "--git-path", "rebase-apply", cwd=SCRATCH).stdout.strip()
    assert not (SCRATCH / ra).exists()
    assert sh("git", "status", "--porcelain", "--untracked-files=no", cwd=SCRATCH).stdout == ""


# What a fragment line may be: blank, a comment, an option set, or an
# option unset in Kconfig's exact words. A comment that starts like an
# option ("# CONFIG_X is nto set") is a typo that merge_config ignores.
FRAGMENT_LINE = re.compile(r"""
    \s*$
  | \#\ CONFIG_[A-Za-z0-9_]+\ is\ not\ set$
  | \#(?!\ ?CONFIG_).*$
  | CONFIG_[A-Za-z0-9_]+=(y|m|n|-?\d+|0x[0-9a-fA-F]+|"[^"]*")$
""", re.X)


def fragment_errors(text):
    return [(n, line) for n, line in enumerate(text.splitlines(), 1)
            if not FRAGMENT_LINE.match(line)]


@pytest.mark.parametrize("frag", ["test.config", "debug.config"])
def test_config_fragments_are_well_formed(frag):
    assert fragment_errors((REPO / "configs" / frag).read_text()) == []


@pytest.mark.parametrize("line", ["# CONFIG_X is nto set", "# CONFIG_X is not set ",
                                  "CONFIG_X", "CONFIG_X=", "CONFIG_X=yes please",
                                  "#CONFIG_X is not set", "config_x=y"])
def test_fragment_check_rejects_malformed_lines(line):
    assert fragment_errors(f"## ok\nCONFIG_A=y\n{line}\n") == [(3, line)]
