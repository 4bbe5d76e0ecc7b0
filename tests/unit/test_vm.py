"""VM runner: presets, virtme-ng command line, dmesg scanner."""
import pytest

from schedsteal import vm

CLEAN_BOOT = """\
[    0.000000] Linux version 6.12.117-sched-steal (gcc) #1 SMP PREEMPT_DYNAMIC
[    0.010000] ACPI: Early table checksum verification disabled
[    0.500000] smpboot: Total of 4 processors activated (20766.84 BogoMIPS)
[    1.100000] Warning: unable to open an initial console.
[    1.200000] 9pnet: Installing 9P2000 support
[    2.000000] virtme-ng-init: script exited with code 0
"""


def test_clean_boot_has_no_splat():
    assert vm.scan_dmesg(CLEAN_BOOT) == []


@pytest.mark.parametrize("line,kind", [
    ("[ 3.1] WARNING: CPU: 1 PID: 7 at kernel/sched/fair.c:123 foo+0x1/0x2", "WARNING"),
    ("[ 3.1] BUG: sleeping function called from invalid context at x.c:1", "BUG"),
    ("[ 3.1] BUG: using smp_processor_id() in preemptible [00000000] code", "BUG"),
    ("[ 3.1] Oops: general protection fault, probably for non-canonical address", "Oops"),
    ("[ 3.1] Kernel panic - not syncing: Fatal exception", "panic"),
    ("[ 3.1] WARNING: possible circular locking dependency detected", "WARNING"),
    ("[ 3.1] WARNING: suspicious RCU usage", "WARNING"),
    ("[ 3.1] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", "RCU stall"),
    ("[ 3.1] INFO: task hackbench:123 blocked for more than 60 seconds.", "hung task"),
    ("[ 3.1] watchdog: BUG: soft lockup - CPU#1 stuck for 22s!", "BUG"),
    ("[ 3.1] kernel BUG at kernel/sched/core.c:42!", "BUG"),
])
def test_planted_splat_is_found(line, kind):
    splats = vm.scan_dmesg(CLEAN_BOOT + line + "\n")
    assert len(splats) == 1
    assert splats[0].kind == kind
    assert splats[0].lineno == CLEAN_BOOT.count("\n") + 1


def test_splat_context_shows_the_trace():
    text = CLEAN_BOOT + "WARNING: at x\nCall Trace:\n foo+0x1\nend\n"
    ctx = vm.splat_context(text, vm.scan_dmesg(text), after=2)
    assert "WARNING: at x" in ctx and "Call Trace:" in ctx and "end" not in ctx


def test_scan_cli_exit_status(tmp_path, capsys):
    clean = tmp_path / "clean.txt"
    clean.write_text(CLEAN_BOOT)
    dirty = tmp_path / "dirty.txt"
    dirty.write_text(CLEAN_BOOT + "[ 9.0] WARNING: planted\n")
    assert vm.main(["scan", str(clean)]) == 0
    assert vm.main(["scan", str(dirty)]) == 1
    assert "dirty.txt:7: WARNING" in capsys.readouterr().out


@pytest.mark.parametrize("name,cpus,smt,llc,nodes", [
    ("smp2", 2, 2, 1, 1),
    ("smt4", 4, 2, 1, 1),
    ("llc2x4", 8, 8, 2, 1),
    ("numa2", 8, 4, 2, 2),
    ("overcommit8", 8, 8, 1, 1),
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
echo "[    0.000000] Linux version 6.12.0" >&2
case "$FAKE_VNG_MODE" in
ok)
    echo "[    0.000000] Linux version 6.12.0" >"$out/dmesg.txt"
    echo 0 >"$out/rc"
    echo "guest says hello"
    exit 0 ;;
die)
    echo "[    2.578545] Oops: int3: 0000 [#1] PREEMPT SMP" >&2
    echo "[    2.583783] Kernel panic - not syncing: Fatal exception" >&2
    exit 255 ;;
esac
"""


@pytest.fixture
def fake_vng(tmp_path):
    vng = tmp_path / "vng"
    vng.write_text(FAKE_VNG)
    vng.chmod(0o755)
    kernel = tmp_path / "bzImage"
    kernel.write_text("")
    return str(vng), str(kernel)


def test_run_keeps_console_apart_from_output(fake_vng, monkeypatch):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "ok")
    res = vm.run(kernel, "smp2", "true", timeout=60, vng=vng)
    assert (res.status, res.died, res.splats) == (0, False, [])
    assert res.output == "guest says hello\n"
    assert "Linux version" in res.console and "Linux version" in res.dmesg


def test_guest_that_dies_is_reported_with_its_console(fake_vng, monkeypatch):
    vng, kernel = fake_vng
    monkeypatch.setenv("FAKE_VNG_MODE", "die")
    res = vm.run(kernel, "overcommit8", "true", timeout=60, vng=vng)
    assert res.died and res.status == 255 and not res.ok
    assert res.dmesg == res.console
    assert [s.kind for s in res.splats] == ["Oops", "panic"]
    assert "Fatal exception" in vm.tail(res.console, 1)


def test_vng_command_asks_for_the_console():
    cmd = vm.vng_command("/k/bzImage", vm.PRESETS["smp2"], "/o", "true", vng="vng")
    assert "--verbose" in cmd


def test_traced_events_are_enabled_at_boot():
    cmd = vm.vng_command("/k/bzImage", vm.PRESETS["smp2"], "/o", "true", vng="vng")
    appended = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--append"]
    assert ("trace_event=sched:sched_switch,sched:sched_migrate_task,"
            "timer:hrtimer_expire_entry") in appended
