"""The kernel series' topics (patches/topics): which patches a TOPICS
selection gives, in which order, and the errors for a bad one. lib.sh is
run from a copy of the repository whose patches/ the tests write. The
real table against the real patches is tests/series/test_series.py's."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TOPICS = """\
# comment
prep   1  -          prep        the base
steal  2  prep       submission  stealing
park   1  prep,steal submission  parking

nirelax 1 prep       tool        a tool
"""
SERIES = ["prep/0001-a.patch", "steal/0001-b.patch", "steal/0002-c.patch",
          "park/0001-d.patch", "nirelax/0001-e.patch"]


@pytest.fixture
def repo(tmp_path):
    dst = tmp_path / "repo"
    shutil.copytree(REPO / "scripts", dst / "scripts")
    shutil.copy(REPO / "BASE_VERSION", dst)
    patches = dst / "patches"
    patches.mkdir()
    (patches / "topics").write_text(TOPICS)
    for name in SERIES:
        (patches / name).parent.mkdir(exist_ok=True)
        (patches / name).write_text(f"patch {name}\n")
    (patches / "series").write_text("\n".join(SERIES) + "\n")
    return dst


def lib(repo, body, topics=None, tmp=None):
    env = dict(os.environ, SCHEDSTEAL_CACHE=str(repo / "cache"))
    env.pop("TOPICS", None)
    if topics is not None:
        env["TOPICS"] = topics
    return subprocess.run(["bash", "-c", f". {repo}/scripts/lib.sh\n{body}"], env=env,
                          text=True, capture_output=True, timeout=60)


def files(p, repo):
    return [str(Path(f).relative_to(repo / "patches")) for f in p.stdout.split()
            if f.startswith("/")]


@pytest.mark.parametrize("topics", [None, "", "all"])
def test_no_selection_gives_every_patch_in_order(repo, topics):
    p = lib(repo, "series_files; topics_name", topics)
    assert p.returncode == 0, p.stderr
    assert files(p, repo) == SERIES and p.stdout.split()[-1] == "all"


@pytest.mark.parametrize("topics", ["prep,steal", "steal prep", "steal,prep"])
def test_selection_keeps_the_table_order(repo, topics):
    p = lib(repo, "series_files; topics_name", topics)
    assert p.returncode == 0, p.stderr
    assert files(p, repo) == SERIES[:3]
    assert p.stdout.split()[-1] == "prep+steal"


def test_a_topic_without_the_ones_it_comes_after_is_refused(repo):
    p = lib(repo, "series_files", "prep,park")
    assert p.returncode != 0 and p.stdout == ""
    assert "topic 'park' must be applied after 'steal'" in p.stderr


def test_an_unknown_topic_is_refused(repo):
    p = lib(repo, "series_files", "prep,bogus")
    assert p.returncode != 0 and p.stdout == ""
    assert "unknown topic 'bogus'" in p.stderr and "prep steal park nirelax" in p.stderr


def test_a_bad_selection_stops_a_script_that_reads_the_series_unseen(repo):
    """A process substitution hides its failure: lib.sh checks TOPICS when
    it is sourced, so the script never reaches its loop."""
    p = lib(repo, "n=0; while read -r f; do n=$((n+1)); done < <(series_files); echo read $n",
            "park")
    assert p.returncode != 0 and "read" not in p.stdout


def test_a_series_entry_outside_every_topic_is_an_error_not_a_skip(repo):
    with open(repo / "patches" / "series", "a") as f:
        f.write("0001-flat.patch\n")
    (repo / "patches" / "0001-flat.patch").write_text("x\n")
    p = lib(repo, "series_files", "prep")
    assert p.returncode != 0
    assert "'0001-flat.patch', which is in no topic" in p.stderr


def test_a_tool_topic_needs_only_what_it_names(repo):
    p = lib(repo, "series_files", "prep,nirelax")
    assert p.returncode == 0, p.stderr
    assert files(p, repo) == ["prep/0001-a.patch", "nirelax/0001-e.patch"]


@pytest.mark.parametrize("line,message", [
    ("steal 2 prep", "expected: NAME PATCHES AFTER KIND"),
    ("Steal 2 prep submission", 'bad topic name "Steal"'),
    ("covers 2 prep submission", 'bad topic name "covers"'),
    ("prep 2 - prep", 'topic "prep" twice'),
    ("steal two prep submission", 'bad patch count "two"'),
    ("steal 2 prep maybe", 'bad kind "maybe"'),
    ("steal 2 later submission", '"steal" comes after "later", which is not an earlier topic'),
])
def test_a_malformed_topics_table_is_refused(repo, line, message):
    (repo / "patches" / "topics").write_text("prep 1 - prep\n" + line + "\n")
    p = lib(repo, "series_files")
    assert p.returncode != 0 and p.stdout == ""
    assert message in p.stderr, p.stderr


@pytest.mark.parametrize("topics", [",", " ", ", ,"])
def test_a_selection_of_no_topic_is_refused(repo, topics):
    p = lib(repo, "series_files", topics)
    assert p.returncode != 0 and "names no topic" in p.stderr


def test_topic_names_are_not_globbed(repo, tmp_path):
    (repo / "steal").write_text("")        # a file named like a topic in the cwd
    p = subprocess.run(["bash", "-c", f". {repo}/scripts/lib.sh\nseries_files"], cwd=repo,
                       env=dict(os.environ, SCHEDSTEAL_CACHE=str(repo / "cache"), TOPICS="prep,s*"),
                       text=True, capture_output=True, timeout=60)
    assert p.returncode != 0 and "unknown topic 's*'" in p.stderr


@pytest.mark.parametrize("value,want", [
    (None, None), ("", None), ("all", None), (" all ", None),
    ("prep,park", {"prep", "park"}), ("prep park", {"prep", "park"}),
    ("prep, steal", {"prep", "steal"}),
])
def test_kernel_topics_reads_the_selection(value, want):
    from schedsteal import vm
    env = {} if value is None else {"SCHEDSTEAL_TOPICS": value}
    assert vm.kernel_topics(env) == want


def test_missing_topics_are_those_the_kernel_lacks():
    from schedsteal import vm
    assert vm.missing_topics(["steal", "parksteal"], {"prep", "park"}) == ["parksteal", "steal"]
    assert vm.missing_topics(["park"], {"prep", "park"}) == []
    assert vm.missing_topics([], {"prep"}) == []
    # The whole series has every topic.
    assert vm.missing_topics(["steal", "far"], None) == []
