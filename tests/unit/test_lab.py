"""schedsteal.lab and its wiring into schedsteal-vm: which QEMU and clock
a boot runs under, the options they add, the refusals, the record."""
import json

import pytest

from schedsteal import lab, vm


@pytest.fixture
def lab_cache(tmp_path):
    """A cache directory with a (fake) lab QEMU built in it."""
    b = lab.lab_binary(tmp_path)
    b.parent.mkdir(parents=True)
    b.write_text("#!/bin/sh\n")
    return tmp_path


@pytest.mark.parametrize("opts,clock", [
    ([], "host"),
    (["-accel tcg,thread=single"], "host"),
    (["-icount shift=0,sleep=off"], "icount"),
    (["-icount shift=0,sleep=off,parallel=on,quantum=2000"], "parallel"),
    (["-icount shift=0,parallel=off"], "icount"),
    (["-icount shift=0,sleep=off,parallel=on", "-icount shift=0"], "icount"),
])
def test_clock_of_reads_the_last_icount(opts, clock):
    assert lab.clock_of(opts) == clock


def test_default_is_stock_qemu_and_the_host_clock():
    got, extra = lab.resolve()
    assert (got.qemu, got.binary, got.clock, got.steal_time) == ("stock", None, "host", False)
    assert extra == []
    assert got.record() == {"qemu": "stock", "qemu_binary": None, "clock": "host",
                            "lean_devices": False, "quantum_ns": None, "steal_time": False}


def test_lab_qemu_on_the_host_clock_shows_steal_time(lab_cache):
    got, extra = lab.resolve("lab", cache=lab_cache)
    assert got.binary == str(lab.lab_binary(lab_cache))
    assert got.clock == "host" and got.steal_time
    assert extra == [lab.LEAN_DEVICES, lab.STEAL_TIME_CPU, lab.THREAD_NAMES]


def test_parallel_clock_options_and_record(lab_cache):
    got, extra = lab.resolve("lab", "parallel", quantum_ns=2000, cache=lab_cache)
    assert extra == [lab.LEAN_DEVICES, "-icount shift=0,sleep=off,parallel=on,quantum=2000"]
    assert not got.steal_time
    rec = got.record()
    assert rec["clock"] == "parallel" and rec["quantum_ns"] == 2000
    # The default quantum is recorded as a number too.
    rec = lab.resolve("lab", "parallel", cache=lab_cache)[0].record()
    assert rec["quantum_ns"] == lab.DEFAULT_QUANTUM_NS


def test_icount_clock_works_with_stock_qemu():
    got, extra = lab.resolve("stock", "icount")
    assert extra == ["-icount shift=0,sleep=off"] and got.clock == "icount"


def test_clock_given_by_raw_options_adds_nothing_but_steal_time(lab_cache):
    got, extra = lab.resolve("lab", None, qemu_opts=["-icount shift=0,sleep=off,parallel=on"],
                             cache=lab_cache)
    assert got.clock == "parallel" and extra == [lab.LEAN_DEVICES]


@pytest.mark.parametrize("kwargs,message", [
    (dict(clock="parallel"), "needs the lab QEMU"),
    (dict(qemu_opts=["-icount shift=0,sleep=off,parallel=on"]), "needs the lab QEMU"),
    (dict(clock="wall"), "unknown clock"),
    (dict(clock="icount", qemu_opts=["-icount shift=0"]), "not both"),
    (dict(clock="icount", quantum_ns=100), "--quantum needs --clock parallel"),
    (dict(steal_time=True), "no steal time"),
    (dict(qemu="/nonexistent/qemu"), "not found"),
])
def test_combinations_that_cannot_work_are_refused(kwargs, message):
    with pytest.raises(lab.LabError, match=message):
        lab.resolve(**kwargs)


@pytest.mark.parametrize("kwargs,message", [
    (dict(clock="parallel", quantum_ns=0), "1 to"),
    (dict(clock="parallel", quantum_ns=lab.MAX_QUANTUM_NS + 1), "1 to"),
    (dict(clock="icount", steal_time=True), "only the host clock"),
    (dict(qemu_opts=["-cpu qemu64"]), "drop -cpu"),
])
def test_lab_refusals(lab_cache, kwargs, message):
    with pytest.raises(lab.LabError, match=message):
        lab.resolve("lab", cache=lab_cache, **kwargs)


def test_lab_qemu_not_built_is_named(tmp_path):
    with pytest.raises(lab.LabError, match="make qemu"):
        lab.resolve("lab", cache=tmp_path)


def test_runs_under_one_clock_pass():
    rec = {"clock": "parallel", "qemu": "lab", "quantum_ns": 4000, "steal_time": False}
    assert lab.check_same_clock([rec, dict(rec)]) == rec
    # Runs recorded before the lab existed count as the host clock.
    assert lab.check_same_clock([None, {"clock": "host", "qemu": "stock"}])["clock"] == "host"


@pytest.mark.parametrize("other", [
    {"clock": "icount", "qemu": "lab", "quantum_ns": None, "steal_time": False},
    {"clock": "parallel", "qemu": "lab", "quantum_ns": 2000, "steal_time": False},
    None,
])
def test_runs_under_different_clocks_are_refused(other):
    rec = {"clock": "parallel", "qemu": "lab", "quantum_ns": 4000, "steal_time": False}
    with pytest.raises(lab.LabError, match="different clocks"):
        lab.check_same_clock([rec, other], "boots")


def test_read_record(tmp_path):
    assert lab.read_record(tmp_path) is None
    (tmp_path / lab.LAB_FILE).write_text(json.dumps({"clock": "icount"}))
    assert lab.read_record(tmp_path) == {"clock": "icount"}


# The wiring into schedsteal-vm.

def test_vm_dry_run_passes_the_lab_qemu_and_its_options(lab_cache, monkeypatch, capsys):
    monkeypatch.setattr(vm, "cache_dir", lambda: lab_cache)
    rc = vm.main(["run", "--kernel", "bzImage", "--preset", "smp2", "--qemu", "lab",
                  "--clock", "parallel", "--quantum", "3000", "--dry-run", "--", "true"])
    assert rc == 0
    out = capsys.readouterr().out
    assert f"--qemu {lab.lab_binary(lab_cache)}" in out
    assert "'--qemu-opts=-icount shift=0,sleep=off,parallel=on,quantum=3000'" in out


def test_vm_dry_run_with_lab_qemu_adds_steal_time(lab_cache, monkeypatch, capsys):
    monkeypatch.setattr(vm, "cache_dir", lambda: lab_cache)
    assert vm.main(["run", "--kernel", "k", "--qemu", "lab", "--dry-run", "--", "true"]) == 0
    assert "'--qemu-opts=-cpu max,kvm-steal-time=on'" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["--clock", "parallel"], "needs the lab QEMU"),
    (["--quantum", "x"], "whole number"),
    (["--clock", "sundial"], "invalid choice"),
    (["--steal-time"], "no steal time"),
])
def test_vm_refuses_bad_lab_choices_with_status_2(argv, message, capsys):
    rc = vm.main(["run", "--kernel", "k", *argv, "--dry-run", "--", "true"])
    assert rc == 2
    assert message in capsys.readouterr().err


def test_run_records_the_lab_for_the_guest(tmp_path, monkeypatch):
    """vm.run writes lab.json where the guest (and --keep) find it, and
    returns the record with the result."""
    seen = {}

    def fake_boot(kernel, preset, guest_cmd, timeout, append, echo, vng, outdir,
                  qemu_opts, qemu, monitor):
        seen["record"] = lab.read_record(outdir)
        seen["opts"], seen["qemu"] = qemu_opts, qemu
        return vm.RunResult(0, "", "[ 0.0] Linux version", [], False)

    kernel = tmp_path / "bzImage"
    kernel.write_text("")
    monkeypatch.setattr(vm, "_boot", fake_boot)
    res = vm.run(str(kernel), "smp2", "true", qemu_opts=["-icount shift=0,sleep=off"],
                 keep=str(tmp_path / "keep"))
    assert seen["record"]["clock"] == "icount" and seen["qemu"] is None
    assert res.lab == seen["record"]
    assert lab.read_record(tmp_path / "keep")["clock"] == "icount"


def test_lab_boot_boots_again_after_a_host_crash(lab_cache, monkeypatch):
    """CI after stop 46: the lab QEMU segfaulted during one boot's PCI set-up
    (memory_region_dispatch_write), and every test of that boot failed."""
    from schedsteal import labcheck
    console = "[    1.6] pci 0000:00:09.0: BAR 1 [mem 0xfebfe000-0xfebfefff]\n"
    crash = vm.RunResult(status=255, output="", dmesg=console, splats=[], timed_out=False,
                         console=console, died=True)
    ok = vm.RunResult(status=0, output="{}", dmesg=console, splats=[], timed_out=False)
    results = [crash, ok]
    monkeypatch.setattr(vm, "run", lambda *a, **k: results.pop(0))
    monkeypatch.setenv("SCHEDSTEAL_CACHE", str(lab_cache))
    with pytest.warns(UserWarning, match="overcommit8: QEMU ended the boot early"):
        assert labcheck.lab_boot("bz", "lab", "overcommit8", "true") is ok
    assert results == []
    results[:] = [crash, crash]
    with pytest.warns(UserWarning), pytest.raises(labcheck.LabCheckError, match="died"):
        labcheck.lab_boot("bz", "lab", "overcommit8", "true")


def test_lab_probe_finds_the_testdevs_and_switches_memory_decoding(tmp_path):
    from schedsteal.guest import lab_probe
    for name, ids in [("0000:00:01.0", ("0x8086", "0x1237")), ("0000:00:05.0", lab_probe.TESTDEV),
                      ("0000:00:04.0", lab_probe.TESTDEV)]:
        d = tmp_path / name
        d.mkdir()
        (d / "vendor").write_text(ids[0] + "\n")
        (d / "device").write_text(ids[1] + "\n")
        (d / "config").write_bytes(bytes([0x36, 0x1b, 5, 0, 0x03, 0x01]) + bytes(58))
    devs = lab_probe.testdevs(str(tmp_path))
    assert devs == [str(tmp_path / "0000:00:04.0"), str(tmp_path / "0000:00:05.0")]
    assert lab_probe.pci_command(devs[0]) == 0x0103
    assert lab_probe.pci_command(devs[0], 0x0101) == 0x0101
    raw = (tmp_path / "0000:00:04.0" / "config").read_bytes()
    assert raw[:6] == bytes([0x36, 0x1b, 5, 0, 0x01, 0x01]) and len(raw) == 64


def test_memory_map_check_boots_with_two_testdevs_and_its_table(monkeypatch):
    from schedsteal import labcheck
    seen = {}

    def fake_boot(kernel, qemu, preset, cmd, **kw):
        seen.update(kw, preset=preset, cmd=cmd)
        return vm.RunResult(status=0, output='{"seconds": 15, "cpus": 8, "value": 109, '
                            '"switches": 3000, "reads": 27000000, "misread": 0}\n',
                            dmesg="x", splats=[], timed_out=False)

    monkeypatch.setattr(labcheck, "lab_boot", fake_boot)
    got = labcheck.check_memory_map("bz", "q")
    assert seen["preset"] == "overcommit8" and "lab_probe.py mmio --seconds 15" in seen["cmd"]
    assert seen["qemu_opts"] == ["-device pci-testdev", "-device pci-testdev"]
    assert seen["steal_time"] is False
    text = labcheck.format_results({"memory-map": got})
    assert "misread" in text and "27000000" in text.splitlines()[-2]


def test_lab_boot_adds_the_callers_qemu_options(lab_cache, monkeypatch):
    from schedsteal import labcheck
    calls = []
    ok = vm.RunResult(status=0, output="{}", dmesg="x", splats=[], timed_out=False)
    monkeypatch.setattr(vm, "run", lambda *a, **k: calls.append(k) or ok)
    monkeypatch.setenv("SCHEDSTEAL_CACHE", str(lab_cache))
    labcheck.lab_boot("bz", "lab", "smp2", "true", steal_time=False, qemu_opts=["-device x"])
    assert calls[0]["qemu_opts"][-1] == "-device x"
