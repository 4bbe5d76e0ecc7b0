"""VM runner: presets, virtme-ng command line, dmesg scanner, CLI."""
import math
import os
import tempfile
from pathlib import Path

import pytest

from schedsteal import vm

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dmesg"


def fixture(name):
    return (FIXTURES / name).read_text()


CLEAN_BOOT = """\
[    0.000000] Linux version 6.12.117-sched-steal (gcc) #1 SMP PREEMPT_DYNAMIC
[    0.010000] ACPI: Early table checksum verification disabled
[    0.500000] smpboot: Total of 4 processors activated (20766.84 BogoMIPS)
[    1.100000] Warning: unable to open an initial console.
[    1.200000] 9pnet: Installing 9P2000 support
[    2.000000] virtme-ng-init: script exited with code 0
"""

WARN_LINE = ("[   14.203412] WARNING: CPU: 2 PID: 311 at kernel/sched/fair.c:5412 "
             "steal_from+0x1c7/0x2b0")


def test_clean_boot_has_no_splat():
    assert vm.scan_dmesg(CLEAN_BOOT) == []


def test_clean_boot_fixture_has_no_splat():
    # virtme-ng-init's "WARNING: failed to run" lines, firmware and ACPI
    # warnings, KTAP output: none of them is a kernel report.
    assert vm.scan_dmesg(fixture("clean-boot.txt")) == []


# Each report kind, as 6.12 prints it on x86_64, and every splat line the
# scanner must name in it (a "cut here" line only counts when nothing it
# announces follows).
REPORTS = [
    ("warning.txt", ["WARNING"]),
    ("warning-with-message.txt", ["WARNING"]),
    ("cut-here-truncated.txt", ["cut here"]),
    ("null-deref.txt", ["BUG", "Oops"]),
    ("kernel-bug.txt", ["BUG", "Oops", "panic"]),
    ("panic.txt", ["panic"]),
    ("lockdep-circular.txt", ["lockdep"]),
    ("lockdep-recursive.txt", ["lockdep"]),
    ("lockdep-inconsistent.txt", ["lockdep"]),
    ("suspicious-rcu.txt", ["lockdep"]),
    ("bad-unlock-balance.txt", ["lockdep"]),
    ("lock-held-returning.txt", ["lockdep"]),
    ("irq-lock-inversion.txt", ["lockdep"]),
    ("rcu-stall.txt", ["RCU stall"]),
    ("rcu-self-stall.txt", ["RCU stall"]),
    ("rcu-lost-timer.txt", ["RCU stall"] * 4),
    ("hung-task.txt", ["hung task"]),
    ("soft-lockup.txt", ["lockup"]),
    ("hard-lockup.txt", ["lockup"]),
    ("sleeping-in-atomic.txt", ["BUG"]),
    ("scheduling-while-atomic.txt", ["BUG"]),
    ("ubsan.txt", ["UBSAN"]),
    ("kasan.txt", ["KASAN"]),
    ("list-add-corruption.txt", ["list corruption", "WARNING"]),
    ("list-del-corruption.txt", ["list corruption", "BUG", "Oops", "panic"]),
]


@pytest.mark.parametrize("name,kinds", REPORTS)
def test_report_fixture_is_found(name, kinds):
    clean = fixture("clean-boot.txt")
    report = fixture(name)
    splats = vm.scan_dmesg(clean + report)
    assert [s.kind for s in splats] == kinds
    offset = clean.count("\n")
    lines = report.splitlines()
    for s in splats:
        assert s.lineno > offset and lines[s.lineno - offset - 1] == s.line


def test_every_fixture_is_tested():
    names = {p.name for p in FIXTURES.glob("*.txt")}
    assert names == {"clean-boot.txt"} | {name for name, _ in REPORTS}


@pytest.mark.parametrize("line", [
    '[    0.601733] virtme-ng-init: WARNING: failed to run: "systemd-tmpfiles" '
    '"--create" "--boot" (error: No such file or directory (os error 2))',
    '[    0.624451] virtme-ng-init: WARNING: failed to run: "ip" link set dev lo up',
    "[    0.005312] ACPI BIOS Warning (bug): 32/64X length mismatch in FADT/Gpe0Block",
    "[    0.500318] Warning: unable to open an initial console.",
    "[    0.006012] [Firmware Bug]: TSC doesn't count with P0 frequency!",
    "[    3.100000] systemd[1]: WARNING: CPU: 0 PID: 1 at nothing",
    "[    3.100000] myscript: BUG: not the kernel's",
    # The trailer of a panic, printed after its header: one panic, one splat.
    "[   47.822418] ---[ end Kernel panic - not syncing: Fatal exception ]---",
    "[   44.118330] INFO: lockdep is turned off.",
    # A bare WARNING is not the shape of a kernel warning.
    "[    9.000000] WARNING: planted by the test",
    "[    1.2] ok 1 sched_sparsemask",
    "[    1.2]     ok 2 sparsemask_test_empty # SKIP not on this config",
    # Written to /dev/kmsg by a program: dmesg -x and -r say so.
    "user  :warn  : [   14.203412] WARNING: CPU: 2 PID: 311 at x+0x1/0x2",
    "<12>[   14.203412] BUG: scheduling while atomic: x/1/0x00000002",
])
def test_userspace_lines_are_not_splats(line):
    assert vm.scan_dmesg(CLEAN_BOOT + line + "\n") == []


@pytest.mark.parametrize("line,kind", [
    (WARN_LINE, "WARNING"),
    ("[   14.2] WARNING: CPU: 1 PID: 7 at foo+0x1/0x2", "WARNING"),
    # dmesg -r, dmesg -x, CONFIG_PRINTK_CALLER, dmesg -t
    ("<4>" + WARN_LINE, "WARNING"),
    ("kern  :warn  : " + WARN_LINE, "WARNING"),
    ("[   14.203412][  T311] WARNING: CPU: 2 PID: 311 at x+0x1/0x2", "WARNING"),
    ("WARNING: CPU: 2 PID: 311 at kernel/sched/fair.c:5412 x+0x1/0x2", "WARNING"),
    ("kern  :err   : [ 3.1] BUG: scheduling while atomic: hackbench/388/0x00000002",
     "BUG"),
    ("[ 3.1] BUG: using smp_processor_id() in preemptible [00000000] code: x/1", "BUG"),
    ("[ 3.1] BUG: MAX_LOCKDEP_KEYS too low!", "BUG"),
    ("[ 3.1] Kernel BUG at sched_tick+0x1a/0x30 [verbose debug info unavailable]", "BUG"),
    ("[ 3.1] INFO: possible irq lock inversion dependency detected", "lockdep"),
    ("[ 3.1] WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected", "lockdep"),
    ("[ 3.1] WARNING: held lock freed!", "lockdep"),
    ("[ 3.1] WARNING: kworker/0:1/12 still has locks held!", "lockdep"),
    ("[ 3.1] INFO: trying to register non-static key.", "lockdep"),
    ("[ 3.1] rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: {", "RCU stall"),
    ("[ 3.1] INFO: rcu_tasks detected stalls on tasks:", "RCU stall"),
    ("[ 3.1] CPU1: Watchdog detected hard LOCKUP on cpu 2", "lockup"),
    ("[ 3.1] list_add double add: new=ffff8880, prev=ffff8880, next=ffff8880.", "list corruption"),
    ("[ 3.1] BUG: KASAN: invalid-access", "KASAN"),
    ("[ 1.2] not ok 1 sched_sparsemask", "KUnit"),
    ("[ 1.2]     not ok 3 sparsemask_test_next_wraps", "KUnit"),
])
def test_planted_splat_is_found(line, kind):
    splats = vm.scan_dmesg(CLEAN_BOOT + line + "\n")
    assert [s.kind for s in splats] == [kind]
    assert splats[0].lineno == CLEAN_BOOT.count("\n") + 1


def test_cut_here_without_a_report_after_it_counts():
    cut = "[ 5.0] ------------[ cut here ]------------\n"
    filler = "".join(f"[ 5.{i}] eth0: link up\n" for i in range(1, 30))
    splats = vm.scan_dmesg(cut + filler + WARN_LINE + "\n")
    assert [(s.kind, s.lineno) for s in splats] == [("cut here", 1), ("WARNING", 31)]


def test_splat_context_shows_the_trace():
    text = CLEAN_BOOT + WARN_LINE + "\nCall Trace:\n foo+0x1\nend\n"
    ctx = vm.splat_context(text, vm.scan_dmesg(text), after=2)
    assert WARN_LINE in ctx and "Call Trace:" in ctx and "end" not in ctx


def test_scan_cli_exit_status(tmp_path, capsys):
    clean = tmp_path / "clean.txt"
    clean.write_text(CLEAN_BOOT)
    dirty = tmp_path / "dirty.txt"
    dirty.write_text(CLEAN_BOOT + WARN_LINE + "\n")
    assert vm.main(["scan", str(clean)]) == 0
    assert vm.main(["scan", str(dirty)]) == 3
    assert "dirty.txt:7: WARNING" in capsys.readouterr().out


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b"\x7fELF\x02\x01\x01\x00\x00\x00",
                                     bytes(range(256)) * 4,
                                     b"hello from the guest\nno kernel here\n"])
def test_scan_cli_rejects_what_is_not_a_kernel_log(tmp_path, capsys, content):
    f = tmp_path / "log.txt"
    f.write_bytes(content)
    assert vm.main(["scan", str(f)]) == 2
    assert "vm: error:" in capsys.readouterr().err


def test_scan_cli_rejects_devnull_and_missing_files(tmp_path, capsys):
    assert vm.main(["scan", os.devnull]) == 2
    assert vm.main(["scan", str(tmp_path / "nosuch")]) == 2
    assert vm.main(["scan", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("vm: error:") == 3


@pytest.mark.parametrize("name,cpus,smt,llc,nodes", [
    ("smp2", 2, 2, 1, 1),
    ("smt4", 4, 2, 1, 1),
    ("llc2x4", 8, 8, 2, 1),
    ("numa2", 8, 4, 2, 2),
    ("overcommit8", 8, 8, 1, 1),
    # The design's machines (issue 27): 10 x 2 in one LLC, 22 x 2, and
    # two nodes of 10 x 2, each node one LLC.
    ("llc20", 20, 10, 1, 1),
    ("llc44", 44, 22, 1, 1),
    ("numa40", 40, 20, 2, 2),
])
def test_presets(name, cpus, smt, llc, nodes):
    p = vm.PRESETS[name]
    exp = p.expected()
    assert exp["cpus"] == cpus
    assert len(exp["smt_groups"]) == smt
    assert len(exp["llc_groups"]) == llc
    assert len(exp["numa_nodes"]) == nodes
    assert sorted(c for g in exp["llc_groups"] for c in g) == list(range(cpus))


def test_vng_command_topology():
    cmd = vm.vng_command("/k/bzImage", vm.PRESETS["numa2"], "/o", "true", vng="vng")
    assert cmd[cmd.index("--cpus") + 1] == "8,sockets=2,cores=2,threads=2"
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--numa"] == \
        ["512M,cpus=0-3", "512M,cpus=4-7"]
    assert "--disable-kvm" in cmd and "--rwdir" in cmd
    assert cmd[-2] == "--exec" and cmd[-1].endswith("/o true")


def qemu_opts_of(cmd):
    # Always joined by "=": vng would parse "-accel ..." as its -a option.
    return [a.split("=", 1)[1] for a in cmd if a.startswith("--qemu-opts")]


def build_tree_kernel(tmp_path, config):
    boot = tmp_path / "build" / "arch" / "x86" / "boot"
    boot.mkdir(parents=True)
    (tmp_path / "build" / ".config").write_text(config)
    (boot / "bzImage").write_bytes(b"")
    return str(boot / "bzImage")


@pytest.mark.parametrize("config,opts", [
    ("CONFIG_SMP=y\nCONFIG_JUMP_LABEL=y\n", [vm.SINGLE_THREAD_TCG]),
    ("CONFIG_SMP=y\n# CONFIG_JUMP_LABEL is not set\n", []),
])
def test_jump_label_kernel_from_a_build_tree_gets_single_thread_tcg(tmp_path, config, opts):
    k = build_tree_kernel(tmp_path, config)
    assert qemu_opts_of(vm.vng_command(k, vm.PRESETS["smt4"], "/o", "true", vng="vng")) == opts


def test_packaged_jump_label_kernel_gets_single_thread_tcg(tmp_path):
    (tmp_path / "config-6.12.117-sched-steal").write_text("CONFIG_JUMP_LABEL=y\n")
    (tmp_path / "vmlinuz-6.12.117-sched-steal").write_bytes(b"")
    cmd = vm.vng_command(str(tmp_path / "vmlinuz-6.12.117-sched-steal"), vm.PRESETS["smp2"],
                         "/o", "true", vng="vng")
    assert qemu_opts_of(cmd) == [vm.SINGLE_THREAD_TCG]


def test_kernel_without_a_config_beside_it_runs_as_asked(tmp_path):
    (tmp_path / "bzImage").write_bytes(b"")
    assert vm.kernel_config(str(tmp_path / "bzImage")) is None
    cmd = vm.vng_command(str(tmp_path / "bzImage"), vm.PRESETS["smp2"], "/o", "true",
                         vng="vng", qemu_opts=["-icount shift=0"])
    assert qemu_opts_of(cmd) == ["-icount shift=0"]


def test_an_accelerator_the_caller_chose_is_kept_with_a_warning(tmp_path, capsys):
    k = build_tree_kernel(tmp_path, "CONFIG_JUMP_LABEL=y\n")
    cmd = vm.vng_command(k, vm.PRESETS["smt4"], "/o", "true", vng="vng",
                         qemu_opts=["-accel tcg,thread=multi"])
    assert qemu_opts_of(cmd) == ["-accel tcg,thread=multi"]
    assert "has jump labels" in capsys.readouterr().err
    vm.vng_command(k, vm.PRESETS["smt4"], "/o", "true", vng="vng",
                   qemu_opts=["-accel tcg,thread=single -icount shift=0"])
    assert capsys.readouterr().err == ""


def test_a_link_to_a_packaged_kernel_finds_its_config(tmp_path):
    (tmp_path / "config-6.12.117-1").write_text("CONFIG_JUMP_LABEL=y\n")
    (tmp_path / "vmlinuz-6.12.117-1").write_bytes(b"")
    (tmp_path / "vmlinuz").symlink_to("vmlinuz-6.12.117-1")
    assert vm.needs_single_thread_tcg(str(tmp_path / "vmlinuz"))


def test_qemu_options_reach_the_shell_quoted(tmp_path):
    (tmp_path / "bzImage").write_bytes(b"")
    cmd = vm.vng_command(str(tmp_path / "bzImage"), vm.PRESETS["smp2"], "/o", "true",
                         vng="vng", qemu_opts=["-name 'a b'"])
    assert qemu_opts_of(cmd) == ["-name 'a b'"]


def test_run_rejects_unknown_preset_and_missing_kernel(tmp_path):
    with pytest.raises(vm.VMError, match="unknown preset"):
        vm.run(str(tmp_path / "bzImage"), "nosuch", "true")
    with pytest.raises(vm.VMError, match="not found"):
        vm.run(str(tmp_path / "bzImage"), "smp2", "true")


def test_cli_errors_are_clean(capsys):
    assert vm.main(["run", "--kernel", "/nonexistent", "--", "true"]) == 2
    assert "vm: error:" in capsys.readouterr().err
    assert vm.main(["run", "--kernel", "/k", "--dry-run", "--preset", "smp9", "--", "x"]) == 2


FAKE_VNG = """#!/bin/sh
# Stands in for vng: finds the shared directory and plays one outcome.
while [ $# -gt 0 ]; do
    [ "$1" = --rwdir ] && out=$2
    shift
done
[ -n "$FAKE_VNG_RAN" ] && echo "$out" >>"$FAKE_VNG_RAN"
log="[    0.000000] Linux version 6.12.0"
warn="[    5.000000] WARNING: CPU: 0 PID: 1 at kernel/sched/fair.c:1 f+0x1/0x2"
case "$FAKE_VNG_MODE" in
ok|status*)
    rc=${FAKE_VNG_MODE#status}; [ "$rc" = ok ] && rc=0
    echo "$log" >&2
    echo "$log" >"$out/dmesg.txt"
    echo "$rc" >"$out/rc"
    echo "guest says hello"
    exit "$rc" ;;
splat)
    echo "$log" >&2
    printf '%s\\n%s\\n' "$log" "$warn" >"$out/dmesg.txt"
    echo "${FAKE_VNG_RC:-0}" >"$out/rc"
    exit 0 ;;
late-splat)
    # The guest's copy of the log is clean; the console saw a splat after it.
    printf '%s\\n%s\\n' "$log" "$warn" >&2
    echo "$log" >"$out/dmesg.txt"
    echo 0 >"$out/rc"
    exit 0 ;;
subdir)
    echo "$log" >&2
    echo "$log" >"$out/dmesg.txt"
    mkdir -p "$out/results/deep"
    echo '{"a": 1}' >"$out/results/a.json"
    echo deep >"$out/results/deep/b.txt"
    ln -s /etc/hostname "$out/link"
    mkfifo "$out/fifo" "$out/results/fifo"
    echo 0 >"$out/rc"
    exit 0 ;;
nolog)
    echo 0 >"$out/rc"
    exit 0 ;;
badrc)
    echo "$log" >&2
    echo "$log" >"$out/dmesg.txt"
    echo "garbage" >"$out/rc"
    exit 0 ;;
hang)
    echo "$log" >&2
    sleep 30 ;;
die)
    echo "$log" >&2
    echo "[    2.578545] Oops: int3: 0000 [#1] PREEMPT SMP" >&2
    echo "[    2.583783] Kernel panic - not syncing: Fatal exception" >&2
    exit 255 ;;
esac
"""


@pytest.fixture
def fake_vng(tmp_path, monkeypatch):
    vng = tmp_path / "vng"
    vng.write_text(FAKE_VNG)
    vng.chmod(0o755)
    kernel = tmp_path / "bzImage"
    kernel.write_text("")
    # Never a real guest: the CLI finds this vng.
    monkeypatch.setattr(vm, "find_vng", lambda: str(vng))
    monkeypatch.setenv("FAKE_VNG_RAN", str(tmp_path / "ran"))
    # Temporary directories go here, to see that none is left behind.
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    return str(vng), str(kernel)


def booted(tmp_path):
    return (tmp_path / "ran").exists()


def test_run_keeps_console_apart_from_output(fake_vng, monkeypatch):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "ok")
    res = vm.run(kernel, "smp2", "true", timeout=60, vng=vng)
    assert (res.status, res.died, res.splats) == (0, False, [])
    assert res.output == "guest says hello\n"
    assert "Linux version" in res.console and "Linux version" in res.dmesg
    assert res.ok


def test_guest_that_dies_is_reported_with_its_console(fake_vng, monkeypatch):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "die")
    res = vm.run(kernel, "overcommit8", "true", timeout=60, vng=vng)
    assert res.died and res.status == 255 and not res.ok
    assert res.dmesg == res.console
    assert [s.kind for s in res.splats] == ["Oops", "panic"]
    assert "Fatal exception" in vm.tail(res.console, 1)


def test_no_kernel_log_is_not_ok(fake_vng, monkeypatch):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "nolog")
    res = vm.run(kernel, "smp2", "true", timeout=60, vng=vng)
    assert res.status == 0 and res.dmesg == "" and not res.ok


def test_unreadable_status_means_the_guest_died(fake_vng, monkeypatch):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "badrc")
    res = vm.run(kernel, "smp2", "true", timeout=60, vng=vng)
    assert res.died and res.status != 0 and not res.ok


def test_splat_the_console_saw_after_the_guests_copy(fake_vng, monkeypatch):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "late-splat")
    res = vm.run(kernel, "smp2", "true", timeout=60, vng=vng)
    assert [s.kind for s in res.splats] == ["WARNING"]
    assert res.dmesg.splitlines()[res.splats[0].lineno - 1] == res.splats[0].line


def test_keep_copies_subdirectories_and_cleans_up(fake_vng, monkeypatch, tmp_path):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "subdir")
    keep = tmp_path / "keep"
    (keep / "results").mkdir(parents=True)
    (keep / "results" / "old.txt").write_text("from before\n")
    res = vm.run(kernel, "smp2", "true", timeout=60, keep=str(keep), vng=vng)
    assert res.status == 0 and res.ok
    assert (keep / "results" / "a.json").read_text() == '{"a": 1}\n'
    assert (keep / "results" / "deep" / "b.txt").read_text() == "deep\n"
    assert (keep / "results" / "old.txt").exists()
    assert (keep / "dmesg.txt").exists() and (keep / "rc").exists()
    # A link the guest made is kept as a link, not followed on the host.
    assert os.readlink(keep / "link") == "/etc/hostname"
    # A FIFO cannot be copied: it is left out, the rest is kept.
    assert not (keep / "fifo").exists() and not (keep / "results" / "fifo").exists()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_temp_dir_is_removed_when_the_boot_fails(fake_vng, tmp_path):
    vng, kernel = fake_vng
    os.chmod(vng, 0o644)
    with pytest.raises(OSError):
        vm.run(kernel, "smp2", "true", timeout=60, vng=vng)
    assert list((tmp_path / "tmp").iterdir()) == []


def test_keep_that_cannot_be_a_directory_fails_before_boot(fake_vng, monkeypatch,
                                                           tmp_path, capsys):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "ok")
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert vm.main(["run", "--kernel", kernel, "--keep", str(blocker), "--", "true"]) == 2
    assert "vm: error:" in capsys.readouterr().err
    assert not booted(tmp_path)


@pytest.mark.parametrize("timeout", ["-5", "0", "nan", "inf", "-inf", "soon"])
def test_bad_timeout_is_a_usage_error(fake_vng, monkeypatch, tmp_path, capsys, timeout):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "ok")
    argv = ["run", "--kernel", kernel, "--timeout", timeout, "--", "true"]
    assert vm.main(argv) == 2
    assert vm.main(argv[:3] + ["--dry-run"] + argv[3:]) == 2
    err = capsys.readouterr().err
    assert err.count("vm: error:") == 2 and "--timeout" in err
    assert not booted(tmp_path)


@pytest.mark.parametrize("timeout", [-5, 0, math.nan, math.inf])
def test_run_rejects_a_bad_timeout(fake_vng, tmp_path, timeout):
    vng, kernel = fake_vng
    with pytest.raises(vm.VMError, match="timeout"):
        vm.run(kernel, "smp2", "true", timeout=timeout, vng=vng)
    assert not booted(tmp_path)


def test_setup_errors_come_before_the_boot(fake_vng, monkeypatch, tmp_path, capsys):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "ok")
    assert vm.main(["run", "--kernel", kernel, "--preset", "smp9", "--", "true"]) == 2
    assert vm.main(["run", "--kernel", str(tmp_path / "nosuch"), "--", "true"]) == 2
    assert vm.main(["run", "--kernel", str(tmp_path), "--", "true"]) == 2
    assert vm.main(["run", "--kernel", kernel]) == 2
    assert capsys.readouterr().err.count("vm: error:") == 4
    assert not booted(tmp_path)


def test_help_names_the_tool_presets_defaults_and_exit_codes(capsys):
    assert vm.main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: schedsteal-vm ")
    assert vm.main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: schedsteal-vm run ")
    for name in vm.PRESETS:
        assert name in out
    assert "default: smp2" in out and "default: 600" in out
    for code in ("0 ", "1 ", "2 ", "3 ", "4 ", "124 "):
        assert f"\n  {code}" in out, code
    assert "--status-file" in out


def test_module_docstring_documents_the_exit_codes():
    for code in ("124", "status-file", "schedsteal-vm"):
        assert code in vm.__doc__


@pytest.mark.parametrize("mode,env,code,status,msg", [
    ("ok", {}, 0, 0, None),
    # A guest command's own 2 and 124 must not read as usage error or timeout.
    ("status2", {}, 1, 2, "vm: guest command exited with status 2"),
    ("status124", {}, 1, 124, "vm: guest command exited with status 124"),
    ("status7", {}, 1, 7, "vm: guest command exited with status 7"),
    ("splat", {}, 3, 0, "splat"),
    ("splat", {"FAKE_VNG_RC": "5"}, 3, 5, "vm: guest command exited with status 5"),
    ("die", {}, 4, 255, "stopped before the command finished"),
    ("nolog", {}, 4, 0, "no kernel log"),
    ("badrc", {}, 4, 1, "stopped before the command finished"),
])
def test_cli_exit_codes(fake_vng, monkeypatch, tmp_path, capsys, mode, env, code,
                        status, msg):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", mode)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    sf = tmp_path / "status"
    sf.write_text("stale\n")
    assert vm.main(["run", "--kernel", kernel, "--status-file", str(sf),
                    "--", "true"]) == code
    err = capsys.readouterr().err
    if msg:
        assert msg in err
    else:
        assert "FAIL" not in err and "exited with status" not in err
    assert sf.read_text() == f"{status}\n"


def test_cli_timeout_exit_code(fake_vng, monkeypatch, tmp_path, capsys):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "hang")
    sf = tmp_path / "status"
    assert vm.main(["run", "--kernel", kernel, "--timeout", "0.5",
                    "--status-file", str(sf), "--", "true"]) == 124
    assert "timed out" in capsys.readouterr().err
    assert sf.read_text() == "124\n"


def test_status_file_is_not_left_stale_by_a_usage_error(fake_vng, tmp_path):
    vng, kernel = fake_vng
    sf = tmp_path / "status"
    sf.write_text("0\n")
    assert vm.main(["run", "--kernel", str(tmp_path / "nosuch"),
                    "--status-file", str(sf), "--", "true"]) == 2
    assert not sf.exists()


def test_vng_command_asks_for_the_console():
    cmd = vm.vng_command("/k/bzImage", vm.PRESETS["smp2"], "/o", "true", vng="vng")
    assert "--verbose" in cmd


def test_traced_events_are_enabled_at_boot():
    cmd = vm.vng_command("/k/bzImage", vm.PRESETS["smp2"], "/o", "true", vng="vng")
    appended = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--append"]
    assert ("trace_event=sched:sched_switch,sched:sched_migrate_task,"
            "sched:sched_wakeup,sched:sched_wakeup_new,"
            "timer:hrtimer_expire_entry") in appended
    # a second probe on each sched event from boot: abbench's own instance
    # is then a third, and adding it patches no code
    assert ("trace_instance=schedsteal-boot,sched:sched_switch,sched:sched_migrate_task,"
            "sched:sched_wakeup,sched:sched_wakeup_new") in appended


def test_guest_json_reads_the_first_json_object_line():
    out = "vm: booting\nnoise {\n{\"a\": 1}\n[1]\n{\"b\": 2}\n"
    assert vm.guest_json(out) == {"a": 1}
    assert [n for n, _ in vm.json_objects(out.splitlines())] == [3, 5]
    with pytest.raises(vm.VMError, match="no JSON object"):
        vm.guest_json("Time: 1.0\n")


BOOT_CONSOLE = ("[    0.000000] Linux version 6.12.117-sched-steal\n"
                "[    1.920801] pci 0000:00:06.0: BAR 4 [mem 0xfebe4000-0xfebe7fff 64bit pref]\n")


@pytest.mark.parametrize("console, output, died, crash", [
    (BOOT_CONSOLE, "", True, True),                          # QEMU went away mid-boot
    (BOOT_CONSOLE, "", False, False),                        # it did not die
    (BOOT_CONSOLE, "probe output\n", True, False),           # the command had started
    (BOOT_CONSOLE + "[    1.9] Kernel panic - not syncing: x\n", "", True, False),
    (BOOT_CONSOLE + "[    1.9] Oops: 0003 [#1] SMP\n", "", True, False),
    (BOOT_CONSOLE + "[    1.5] Run /sbin/init as init process\n", "", True, False),
])
def test_host_crash_is_only_a_silent_death_during_boot(console, output, died, crash):
    res = vm.RunResult(status=255, output=output, dmesg=console, splats=vm.scan_dmesg(console),
                       timed_out=False, console=console, died=died)
    assert res.host_crash is crash


@pytest.mark.parametrize("first_crashes", [True, False])
def test_run_past_host_crash_boots_again_only_after_a_host_crash(monkeypatch, first_crashes):
    crash = vm.RunResult(status=255, output="", dmesg=BOOT_CONSOLE, splats=[],
                         timed_out=False, console=BOOT_CONSOLE, died=True)
    ok = vm.RunResult(status=0, output="{}", dmesg=BOOT_CONSOLE, splats=[], timed_out=False)
    calls = []

    def fake_run(kernel, preset, cmd, **kwargs):
        calls.append((kernel, preset, cmd, kwargs))
        return crash if first_crashes and len(calls) == 1 else ok

    monkeypatch.setattr(vm, "run", fake_run)
    if first_crashes:
        with pytest.warns(UserWarning, match="smp2: QEMU ended the boot early"):
            res = vm.run_past_host_crash("bz", "smp2", "true", timeout=5, keep="k")
    else:
        res = vm.run_past_host_crash("bz", "smp2", "true", timeout=5, keep="k")
    assert res is ok
    assert calls == [("bz", "smp2", "true", {"timeout": 5, "keep": "k"})] * (2 if first_crashes else 1)


def test_run_past_host_crash_returns_a_second_crash(monkeypatch):
    crash = vm.RunResult(status=255, output="", dmesg=BOOT_CONSOLE, splats=[],
                         timed_out=False, console=BOOT_CONSOLE, died=True)
    calls = []
    monkeypatch.setattr(vm, "run", lambda *a, **k: calls.append(a) or crash)
    with pytest.warns(UserWarning):
        res = vm.run_past_host_crash("bz", "smp2", "true")
    assert res.died and len(calls) == 2


def _stalled(text):
    log = fixture("clean-boot.txt") + text
    return vm.RunResult(status=0, output="{}", dmesg=log, splats=vm.scan_dmesg(log),
                        timed_out=False)


def test_lost_timer_is_an_idle_cpu_whose_timer_never_fired():
    """CI's 16-vCPU boot: the kthread's timer sat on CPU 10, which every
    NMI found halted."""
    assert _stalled(fixture("rcu-lost-timer.txt")).lost_timer


@pytest.mark.parametrize("change", [
    # a CPU spinning in the scheduler with interrupts off also stops the
    # kthread's timer: the backtrace shows where it spins
    lambda t: t.replace("[  140.476830] RIP: 0010:pv_native_safe_halt+0x17/0x20",
                        "[  140.476830] RIP: 0010:steal_from+0x88/0x2b0"),
    lambda t: t.replace("Comm: swapper/10 Tainted: G                 N 6.12.117-sched-steal+ #24 \n"
                        "[   33.078012]",
                        "Comm: hackbench Tainted: G                 N 6.12.117-sched-steal+ #24 \n"
                        "[   33.078012]"),
    # RCU did not say the timer failed to fire
    lambda t: t.replace("kthread timer wakeup didn't happen", "kthread timer wakeup late"),
    lambda t: t.replace("Possible timer handling issue on cpu=10", "Possible issue on cpu=10"),
    # no NMI ever looked at the timer's CPU
    lambda t: t.replace("on cpu=10 timer-softirq", "on cpu=11 timer-softirq"),
    # halted with interrupts off
    lambda t: t.replace("[   33.078012] RSP: 0018:ffa00000003ffee8 EFLAGS: 00000246",
                        "[   33.078012] RSP: 0018:ffa00000003ffee8 EFLAGS: 00000046"),
    # another CPU the detector looked at was busy in the scheduler
    lambda t: t.replace("[  119.152380] RIP: 0010:pv_native_safe_halt+0x17/0x20\n",
                        "[  119.152380] RIP: 0010:steal_from+0x88/0x2b0\n"),
    # a second timer report names a CPU no NMI looked at
    lambda t: t + ("[  210.000000] rcu: rcu_preempt kthread timer wakeup didn't happen for 9 jiffies!\n"
                   "[  210.000001] rcu: \tPossible timer handling issue on cpu=5 timer-softirq=3\n"),
    # a reader blocked: the scheduler's business
    lambda t: t + "[  211.000000] rcu: \tTasks blocked on level-0 rcu_node (CPUs 0-15): P120\n",
    # another report beside the stalls
    lambda t: t + "[  204.000000] WARNING: CPU: 3 PID: 1 at kernel/sched/fair.c:100 f+0x1/0x2\n",
])
def test_lost_timer_needs_every_sign(change):
    text = fixture("rcu-lost-timer.txt")
    changed = change(text)
    assert changed != text
    assert not _stalled(changed).lost_timer


def test_scheduler_stall_fixtures_are_not_lost_timers():
    """The recorded stall in steal_from() (interrupts off, the kthread's
    timer stuck behind it) and the self-detected stall must still fail."""
    assert not _stalled(fixture("rcu-stall.txt")).lost_timer
    assert not _stalled(fixture("rcu-self-stall.txt")).lost_timer
    assert not _stalled("").lost_timer


def test_short_guest_command_stays_on_the_kernel_command_line(tmp_path):
    assert vm.guest_cmd_inline("hackbench -g 1", str(tmp_path)) == "hackbench -g 1"
    assert list(tmp_path.iterdir()) == []


def test_long_guest_command_goes_in_a_file(tmp_path):
    """The kernel cuts its command line at 2048 bytes: a long command
    (three abbench runs) is run from a file in the shared directory."""
    cmd = "set -e\n" + "\n".join(f"python3 -m schedsteal.abbench run --a feat:STEAL "
                                   f"--out \"$SCHEDSTEAL_OUT/{i}.json\" # {'x' * 200}"
                                   for i in range(3))
    assert len(cmd) > vm.GUEST_CMD_INLINE_MAX
    inline = vm.guest_cmd_inline(cmd, str(tmp_path))
    f = tmp_path / vm.GUEST_CMD_FILE
    assert inline == f"exec /bin/sh {f}"
    assert f.read_text() == cmd + "\n"
    assert len(inline) < vm.GUEST_CMD_INLINE_MAX


def test_steal_governor_is_off_unless_a_boot_asks_for_it():
    """Built into the test kernels, the governor would park CPUs under any
    experiment with steal time: off by default, and a caller's own value
    comes later on the command line, where the kernel takes the last."""
    def appended(append=None):
        cmd = vm.vng_command("/k/bzImage", vm.PRESETS["smp2"], "/o", "true",
                             append=append, vng="vng")
        return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--append"]
    assert "steal_governor.enabled=0" in appended()
    got = appended(["steal_governor.enabled=1"])
    assert got.index("steal_governor.enabled=1") > got.index("steal_governor.enabled=0")
