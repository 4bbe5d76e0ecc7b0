"""The host scripts on the paths a fresh machine takes, without touching
the machine: dpkg-query, apt-cache, apt-get and sudo are replaced by
stand-ins on PATH, and the cache directory is a temporary one."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
BASE = (REPO / "BASE_VERSION").read_text().strip()
GIT_ID = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid",
          "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t.invalid"}


def run(cmd, env, cwd=REPO):
    return subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=120)


@pytest.fixture
def host(tmp_path):
    """A fake package manager on PATH and an empty cache directory.

    host.installed: the linux-source-6.12 version dpkg reports (None: not
    installed); host.archive: the versions apt-cache madison lists;
    host.calls(): the apt-get command lines run so far."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    state = tmp_path / "state"
    state.mkdir()

    class Host:
        cache = tmp_path / "cache"
        env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}",
                   SCHEDSTEAL_CACHE=str(tmp_path / "cache"), **GIT_ID)

        def set(self, installed=None, archive=()):
            (state / "installed").write_text(installed or "")
            (state / "archive").write_text("".join(f"{v}\n" for v in archive))

        def calls(self):
            log = state / "apt-get.log"
            return log.read_text().splitlines() if log.exists() else []

    def tool(name, body):
        p = bindir / name
        p.write_text(f"#!/bin/sh\n{body}\n")
        p.chmod(0o755)

    tool("dpkg-query", f'v=$(cat {state}/installed); [ -n "$v" ] || exit 1\n'
                       'echo "install ok installed $v"')
    tool("apt-cache", f'[ "$1" = madison ] || exit 1\n'
                      f'while read -r v; do echo " linux-source-6.12 | $v | http://x bookworm/main"; '
                      f'done <{state}/archive')
    # "download PKG=VER" hands out the package prepared in state/debs.
    tool("apt-get", f'echo "$*" >>{state}/apt-get.log\n'
                    f'if [ "$1" = download ] || [ "$2" = download ]; then\n'
                    f'  for a; do v=${{a#*=}}; done\n'
                    f'  cp {state}/debs/$v.deb ./linux-source-6.12_${{v}}_all.deb\nfi')
    tool("sudo", 'exec "$@"')
    h = Host()
    h.state = state
    h.set()
    return h


def fake_tree(cache, version):
    """A stand-in kernel tree whose base commit names `version`."""
    tree = cache / "linux"
    tree.mkdir(parents=True)
    env = dict(os.environ, **GIT_ID)
    for cmd in (["git", "init", "-q", "-b", "series"],
                ["git", "commit", "-q", "--allow-empty", "-m", f"base: linux-source-6.12 {version}"],
                ["git", "tag", "base"]):
        subprocess.run(cmd, cwd=tree, env=env, check=True)
    return tree


def test_a_failing_command_names_itself(tmp_path):
    script = tmp_path / "fails.sh"
    script.write_text(f". {SCRIPTS}/lib.sh\necho before\nx=$(false)\necho after\n")
    p = run(["bash", str(script)], dict(os.environ))
    assert p.returncode != 0
    assert p.stdout == "before\n"
    assert "fails.sh: error: fails.sh:3: `x=$(false)` failed (status 1)" in p.stderr


def test_cache_directory_has_one_definition(tmp_path):
    env = dict(os.environ, SCHEDSTEAL_CACHE=str(tmp_path / "c"))
    assert run([str(SCRIPTS / "lib.sh"), "--cache-dir"], env).stdout == f"{tmp_path}/c\n"
    env = {k: v for k, v in os.environ.items() if k != "SCHEDSTEAL_CACHE"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    assert run([str(SCRIPTS / "lib.sh"), "--cache-dir"], env).stdout == f"{tmp_path}/xdg/sched-steal\n"
    p = run(["make", "-s", "-f", str(REPO / "Makefile"), "-p", "-q", "help"], env)
    assert f"SCHEDSTEAL_CACHE := {tmp_path}/xdg/sched-steal" in p.stdout


def test_source_package_not_installed_yet_gets_installed(host):
    """A fresh machine: dpkg-query fails for a package never installed.
    That must lead to the install, not to a silent exit."""
    host.set(installed=None, archive=[BASE])
    p = run([str(SCRIPTS / "get-source.sh")], host.env)
    assert f"installing linux-source-6.12={BASE}" in p.stderr, p.stderr
    assert any(c.endswith(f"linux-source-6.12={BASE}") and "install" in c for c in host.calls())
    # The stand-in dpkg still says "not installed": a named error, not silence.
    assert p.returncode != 0 and "linux-source-6.12 is not installed" in p.stderr


def test_missing_security_archive_is_named(host):
    host.set(installed=None, archive=[])
    p = run([str(SCRIPTS / "get-source.sh")], host.env)
    assert p.returncode != 0 and "bookworm-security" in p.stderr, p.stderr


def test_fallback_version_does_not_update_apt_on_every_build(host):
    other = "6.12.999-1~deb12u1"
    host.set(installed=other, archive=[other])
    fake_tree(host.cache, other)
    for _ in range(3):
        p = run([str(SCRIPTS / "get-source.sh")], host.env)
        assert p.returncode == 0, p.stderr
        assert "falling back" in p.stderr
    assert [c for c in host.calls() if "update" in c] == ["update -qq"]


def test_tree_with_unexported_worktree_commits_is_never_replaced(host):
    host.set(installed=BASE, archive=[BASE])
    tree = fake_tree(host.cache, "6.12.1-1")           # another version: replace it
    work = host.cache / "work" / "linux"
    run(["git", "worktree", "add", "-q", "-b", "dev", str(work), "base"], host.env, cwd=tree)
    (work / "fair.c").write_text("a change\n")
    run(["git", "add", "fair.c"], host.env, cwd=work)
    run(["git", "commit", "-q", "-m", "sched: unexported work"], host.env, cwd=work)
    p = run([str(SCRIPTS / "get-source.sh")], host.env)
    assert p.returncode != 0
    assert "not exported" in p.stderr, p.stderr
    assert (work / "fair.c").read_text() == "a change\n"
    assert (tree / ".git").is_dir()


def test_makefile_stops_when_the_kernel_build_fails(tmp_path):
    """`k=$(build ...)` must not go on with an empty kernel path."""
    repo = tmp_path / "repo"
    shutil.copytree(SCRIPTS, repo / "scripts")
    shutil.copy(REPO / "Makefile", repo / "Makefile")
    shutil.copy(REPO / "BASE_VERSION", repo / "BASE_VERSION")
    (repo / "scripts" / "setup-host.sh").write_text("#!/bin/sh\nexit 0\n")
    (repo / "scripts" / "build-kernel.sh").write_text("#!/bin/sh\necho 'build failed' >&2\nexit 1\n")
    cache = tmp_path / "cache"
    (cache / "venv" / "bin").mkdir(parents=True)
    for name in ("schedsteal-vm", "python"):       # whichever the Makefile runs
        vm = cache / "venv" / "bin" / name
        vm.write_text(f"#!/bin/sh\ntouch {tmp_path}/vm-ran\n")
        vm.chmod(0o755)
    env = dict(os.environ, SCHEDSTEAL_CACHE=str(cache))
    p = run(["make", "-s", "vm", "CMD=true"], env, cwd=repo)
    assert p.returncode != 0
    assert not (tmp_path / "vm-ran").exists(), "vm was started without a kernel"


def fake_source_deb(host, version, text):
    """A linux-source-6.12 package whose tree holds kernel/sched/x.c."""
    root = host.state / "pkg" / version
    src = root / "src" / "linux-source-6.12" / "kernel" / "sched"
    src.mkdir(parents=True)
    (src / "x.c").write_text(text)
    usr = root / "deb" / "usr" / "src"
    usr.mkdir(parents=True)
    subprocess.run(["tar", "-cJf", str(usr / "linux-source-6.12.tar.xz"), "-C",
                    str(root / "src"), "linux-source-6.12"], check=True)
    (root / "deb" / "DEBIAN").mkdir()
    (root / "deb" / "DEBIAN" / "control").write_text(
        f"Package: linux-source-6.12\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: t <t@t.invalid>\nDescription: test\n")
    (host.state / "debs").mkdir(exist_ok=True)
    subprocess.run(["dpkg-deb", "-Zgzip", "--build", str(root / "deb"),
                    str(host.state / "debs" / f"{version}.deb")], check=True, capture_output=True)


@pytest.fixture
def one_patch_repo(tmp_path):
    """A copy of the scripts with a one-patch series on kernel/sched/x.c."""
    repo = tmp_path / "repo"
    shutil.copytree(SCRIPTS, repo / "scripts")
    (repo / "patches").mkdir()
    (repo / "patches" / "0001-sched-x.patch").write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: t <t@t.invalid>\nSubject: [PATCH] sched: x\n\nWhy.\n---\n"
        "diff --git a/kernel/sched/x.c b/kernel/sched/x.c\n"
        "--- a/kernel/sched/x.c\n+++ b/kernel/sched/x.c\n"
        "@@ -3,3 +3,3 @@\n one\n-two\n+TWO\n three\n")
    (repo / "patches" / "series").write_text("0001-sched-x.patch\n")
    return repo


def test_rebase_check_reports_each_version(host, one_patch_repo):
    fake_source_deb(host, "6.12.1-1", "a\nb\none\ntwo\nthree\nc\n")
    fake_source_deb(host, "6.12.2-1", "a\nb\none\nzwei\nthree\nc\n")
    host.set(installed="6.12.1-1", archive=["6.12.1-1", "6.12.2-1"])
    (one_patch_repo / "BASE_VERSION").write_text("6.12.1-1\n")
    p = run([str(one_patch_repo / "scripts" / "rebase-check.sh")], host.env)
    rows = [" ".join(ln.split()) for ln in p.stdout.splitlines()[1:]]
    assert rows == ["6.12.1-1 pinned applies (1 patches)",
                    "6.12.2-1 newest patch 0001-sched-x.patch: kernel/sched/x.c"], p.stdout
    assert p.returncode != 0, "the newest version does not take the series"
    assert "superseded by 6.12.2-1" in p.stderr
    # Nothing moved without --bump, and never to a version that conflicts.
    p = run([str(one_patch_repo / "scripts" / "rebase-check.sh"), "--bump"], host.env)
    assert (one_patch_repo / "BASE_VERSION").read_text() == "6.12.1-1\n"


def test_rebase_check_bump_moves_to_the_newest(host, one_patch_repo):
    fake_source_deb(host, "6.12.1-1", "a\nb\none\ntwo\nthree\nc\n")
    fake_source_deb(host, "6.12.3-1", "a\nnew\nb\none\ntwo\nthree\nc\n")
    host.set(installed="6.12.1-1", archive=["6.12.1-1", "6.12.3-1"])
    (one_patch_repo / "BASE_VERSION").write_text("6.12.1-1\n")
    p = run([str(one_patch_repo / "scripts" / "rebase-check.sh"), "--bump"], host.env)
    assert p.returncode == 0, p.stderr
    assert "6.12.3-1 newest applies (1 patches)" in [" ".join(ln.split()) for ln in p.stdout.splitlines()]
    assert (one_patch_repo / "BASE_VERSION").read_text() == "6.12.3-1\n"


def test_rebase_check_build_builds_each_version_that_applies(host, one_patch_repo):
    # 6.12.2-1 takes the patch but does not build; 6.12.3-1 does not take it.
    fake_source_deb(host, "6.12.1-1", "a\nb\none\ntwo\nthree\nc\n")
    fake_source_deb(host, "6.12.2-1", "a\nbroken\nb\none\ntwo\nthree\nc\n")
    fake_source_deb(host, "6.12.3-1", "a\nb\none\nzwei\nthree\nc\n")
    host.set(installed="6.12.1-1", archive=["6.12.1-1", "6.12.2-1", "6.12.3-1"])
    (one_patch_repo / "BASE_VERSION").write_text("6.12.1-1\n")
    (one_patch_repo / "configs").mkdir()
    (one_patch_repo / "configs" / "test.config").write_text("CONFIG_SMP=y\n")
    built = host.state / "built"
    # A build that fails on "broken" and sees the series applied (TWO).
    (one_patch_repo / "scripts" / "build-kernel.sh").write_text(
        "#!/bin/sh\nf=$2/kernel/sched/x.c\n"
        f"grep -q TWO $f && echo \"$1 $2\" >>{built}\n"
        "if grep -q broken $f; then echo 'x.c:2: error: broken' >&2; exit 1; fi\n"
        "echo /b/bzImage\n")
    p = run([str(one_patch_repo / "scripts" / "rebase-check.sh"), "--build"], host.env)
    rows = [" ".join(ln.split()) for ln in p.stdout.splitlines()]
    assert rows[0] == "version result test build"
    assert rows[1].startswith("6.12.1-1 pinned applies (1 patches) builds ("), rows
    assert rows[2] == "6.12.2-1 applies (1 patches) fails: x.c:2: error: broken", rows
    assert rows[3] == "6.12.3-1 newest patch 0001-sched-x.patch: kernel/sched/x.c -", rows
    assert p.returncode != 0, "the newest version does not take the series"
    # Only the two that applied were built, each with the series in.
    assert len(built.read_text().splitlines()) == 2
    assert all(ln.startswith("test ") for ln in built.read_text().splitlines())
    # A success is kept, a failure is tried again: one more build.
    run([str(one_patch_repo / "scripts" / "rebase-check.sh"), "--build"], host.env)
    assert len(built.read_text().splitlines()) == 3


def test_rebase_check_bump_with_build_needs_the_newest_to_build(host, one_patch_repo):
    fake_source_deb(host, "6.12.1-1", "a\nb\none\ntwo\nthree\nc\n")
    fake_source_deb(host, "6.12.2-1", "a\nbroken\nb\none\ntwo\nthree\nc\n")
    host.set(installed="6.12.1-1", archive=["6.12.1-1", "6.12.2-1"])
    (one_patch_repo / "BASE_VERSION").write_text("6.12.1-1\n")
    (one_patch_repo / "configs").mkdir()
    (one_patch_repo / "configs" / "test.config").write_text("CONFIG_SMP=y\n")
    (one_patch_repo / "scripts" / "build-kernel.sh").write_text(
        "#!/bin/sh\nif grep -q broken $2/kernel/sched/x.c; then exit 1; fi\necho /b/bzImage\n")
    p = run([str(one_patch_repo / "scripts" / "rebase-check.sh"), "--bump", "--build"], host.env)
    assert p.returncode != 0
    assert (one_patch_repo / "BASE_VERSION").read_text() == "6.12.1-1\n"


# scripts/build-qemu.sh: the lab QEMU (docs/lab.md).

def test_build_qemu_path_and_bad_usage(host):
    p = run([str(SCRIPTS / "build-qemu.sh"), "--path"], host.env)
    assert p.returncode == 0
    assert p.stdout == f"{host.cache}/qemu/build/qemu-system-x86_64\n"
    p = run([str(SCRIPTS / "build-qemu.sh"), "--bogus"], host.env)
    assert p.returncode == 2 and "usage: build-qemu.sh" in p.stderr
    assert not (host.cache / "qemu").exists()


def test_build_qemu_without_qemu_installed_says_what_to_run(host):
    """No qemu-system-x86 (the fake dpkg-query knows no package): a clear
    error before anything is fetched."""
    p = run([str(SCRIPTS / "build-qemu.sh")], host.env)
    assert p.returncode != 0
    assert "qemu-system-x86 is not installed (run scripts/setup-host.sh)" in p.stderr
    assert host.calls() == []


def test_build_qemu_patches_apply_to_the_pinned_source(tmp_path):
    """qemu/patches/series names only files that exist and are not empty,
    and every patch says what it changes and signs off."""
    env = dict(os.environ, SCHEDSTEAL_CACHE=str(tmp_path / "c"))
    script = tmp_path / "list.sh"
    script.write_text(f". {SCRIPTS}/lib.sh\nseries_files {REPO}/qemu/patches\n")
    p = run(["bash", str(script)], env)
    assert p.returncode == 0, p.stderr
    files = p.stdout.split()
    assert len(files) >= 3
    for f in files:
        text = Path(f).read_text()
        assert text.startswith("From ") and "\nSubject: [PATCH] " in text
        assert "Signed-off-by: " in text
    assert (REPO / "qemu" / "BASE_VERSION").read_text().strip().startswith("1:7.2+dfsg")


@pytest.mark.parametrize("env, message", [
    ({"PAIRS": "none:steal"}, "PAIRS: bad cell 'none:steal'"),
    ({"PAIRS": "none:steal pipe 4,8;none:fast pipe 1"}, "PAIRS: bad cell 'none:fast pipe 1'"),
    ({"PAIRS": "none:steal pipe 0"}, "PAIRS: bad cell 'none:steal pipe 0'"),
    ({"PAIRS": "none:steal tcp 1"}, "PAIRS: bad cell 'none:steal tcp 1'"),
    ({"SHAPES": "llc20 llc99"}, "SHAPES: no pairs for shape 'llc99'"),
    ({"TRACED": "yes"}, "TRACED: 0 or 1, not 'yes'"),
])
def test_bench_seed_refuses_bad_cells_before_building(tmp_path, env, message):
    # Nothing is built, booted or written: the cache and out/ stay untouched.
    cache = tmp_path / "cache"
    p = run(["bash", str(SCRIPTS / "bench-seed.sh")],
            dict(os.environ, SCHEDSTEAL_CACHE=str(cache), **env))
    assert p.returncode == 1
    assert f"bench-seed.sh: error: {message}" in p.stderr
    assert "build-kernel" not in p.stderr and not cache.exists()
