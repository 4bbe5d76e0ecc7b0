"""schedsteal-governor's host side: the summary of a probe's result, its
table, report's errors, the plot. No guest (tests/vm/test_governor.py)."""
import json
import os
import sys
from pathlib import Path

import pytest

from schedsteal import governor, lab

ROOT = Path(__file__).resolve().parents[2]


def result():
    """A made-up run: 2 CPUs, HZ 100, samples every 0.5 s."""
    s = []
    t = 0.0
    steal = [0, 0]
    rounds = 0
    for phase, pref, dsteal, drounds, n in (("quiet", 2, 0, 0, 4), ("busy", 2, 20, 1000, 4),
                                             ("busy", 1, 0, 1000, 4), ("idle", 2, 0, 0, 3)):
        for _ in range(n):
            s.append([t, phase, pref, True, list(steal), rounds])
            t += 0.5
            steal = [x + dsteal for x in steal]
            rounds += drounds
    return {"online": 2, "cpus": [0, 1], "user_hz": 100, "poll_s": 0.5,
            "params": {"enabled": "Y", "interval_ms": "200", "high_threshold": "500",
                       "low_threshold": "200"},
            "reached": {"quiet": None, "busy": 3.0, "idle": 6.0}, "samples": s,
            "others": {"written": "1", "parked_after": "1", "parked_when_off": "1"},
            "off": {"enabled": "N", "preferred": "0", "preferred_cleared": "0-1"}}


def test_summary_reads_each_phase_after_it_settled():
    rows = {r["phase"]: r for r in governor.summary(result())}
    assert list(rows) == ["quiet", "busy", "idle"]
    assert rows["quiet"]["reached"] is None and rows["quiet"]["samples"] == 4
    busy = rows["busy"]
    # from t=3.0 (reached) on: two samples at 2 CPUs, then four at 1
    assert busy["samples"] == 6 and busy["pref_min"] == 1 and busy["pref_max"] == 2
    assert busy["changes_per_s"] == pytest.approx(1 / 2.5)
    # 20 ticks per CPU at each of the two steps at 2 CPUs: 80 ticks of
    # HZ 100 over 2.5 s on 2 CPUs
    assert busy["steal_pct"] == pytest.approx(100.0 * 80 / 100 / 2.5 / 2)
    assert busy["rounds_per_s"] == pytest.approx(2000.0)


def test_table_names_its_columns_and_the_switch_off(capsys, tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps(result()))
    assert governor.main(["report", str(f)]) == 0
    out = capsys.readouterr().out
    assert "interval_ms 200" in out
    assert "phase" in out and "changes/s" in out and "rounds/s" in out
    assert ("parked by hand: 1; still parked with the governor on: 1; "
            "once it was off: 1") in out


def test_report_json(capsys, tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps(result()))
    assert governor.main(["report", str(f), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [r["phase"] for r in got["summary"]] == ["quiet", "busy", "idle"]


@pytest.mark.parametrize("content,msg", [(None, "cannot read"), ("{}", "not a governor result"),
                                         ("nope", "not a governor result")])
def test_report_bad_file_is_one_clear_line(capsys, tmp_path, content, msg):
    f = tmp_path / "r.json"
    if content is not None:
        f.write_text(content)
    assert governor.main(["report", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("schedsteal-governor: error:") and msg in err


def test_run_refuses_bad_input_before_booting(capsys, tmp_path):
    k = tmp_path / "bzImage"
    assert governor.main(["run", "--kernel", str(k)]) == 2
    assert "no kernel image" in capsys.readouterr().err
    k.write_text("")
    assert governor.main(["run", "--kernel", str(k), "--interval-ms", "50"]) == 2
    assert "100 to 100000" in capsys.readouterr().err
    assert governor.main(["run", "--kernel", str(k), "--plot", "x.txt"]) == 2
    assert "--plot" in capsys.readouterr().err


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    f = tmp_path / "r.json"
    f.write_text(json.dumps(result()))
    png = tmp_path / "g.png"
    assert governor.main(["report", str(f), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_confine_qemu_confines_every_thread_and_gives_back(tmp_path, monkeypatch):
    tasks = tmp_path / "42" / "task"
    for t in ("42", "43"):
        (tasks / t).mkdir(parents=True)
    aff = {42: {0, 1}, 43: {1}}
    monkeypatch.setattr(lab.os, "sched_getaffinity", lambda tid: set(aff[tid]))
    monkeypatch.setattr(lab.os, "sched_setaffinity", lambda tid, c: aff.__setitem__(tid, set(c)))
    c = lab.ConfineQemu({0}, proc=str(tmp_path))
    c.start(42, {})
    assert aff == {42: {0}, 43: {0}}
    c.stop()
    assert aff == {42: {0, 1}, 43: {1}}


def test_governor_is_compared_with_the_best_static_set(capsys, tmp_path):
    r = result()
    # a static phase before busy: 1 CPU preferred, 500 rounds/s
    t = r["samples"][-1][0]
    for i in range(3):
        r["samples"].append([t + 0.5 * (i + 1), "static1", 1, True, [0, 0], 100000 + 250 * i])
    r["phase_start"] = {"busy": 2.0}
    vs = governor.against_static(r)
    assert vs["best"] == "static1"
    assert vs["pct"] == pytest.approx(100.0 * (2000.0 / 500.0 - 1))
    rows = {x["phase"]: x for x in governor.summary(r)}
    assert rows["busy"]["reached"] == pytest.approx(1.0)  # 3.0 - the phase's start
    f = tmp_path / "r.json"
    f.write_text(json.dumps(r))
    assert governor.main(["report", str(f)]) == 0
    assert "(static1): +300.0% rounds/s (+ = the governor's higher)" in capsys.readouterr().out


@pytest.mark.parametrize("args,msg", [(["--hackbench", "4"], "GROUPS,LOOPS"),
                                      (["--hackbench", "0,5"], "GROUPS,LOOPS"),
                                      (["--stress-ng", "0"], "WORKERS or WORKERS,SECONDS"),
                                      (["--stress-ng", "8,0"], "WORKERS or WORKERS,SECONDS"),
                                      (["--stress-ng", "8,1,2"], "WORKERS or WORKERS,SECONDS"),
                                      (["--stress-ng", "8,1", "--hackbench", "4,10"],
                                       "one load at a time"),
                                      (["--hold-s", "0"], "--hold-s"),
                                      (["--static", "2,9"], "from 1 to 8"),
                                      (["--static", "2,2"], "distinct"),
                                      (["--static", "x"], "distinct"),
                                      (["--static", "2", "--no-static"], "no --no-static"),
                                      (["--unpark-backoff", "9"], "0 to 8"),
                                      (["--park-confirm", "0"], "1 to 8"),
                                      (["--park-confirm", "9"], "1 to 8")])
def test_run_refuses_bad_workload_options(capsys, tmp_path, args, msg):
    k = tmp_path / "bzImage"
    k.write_text("")
    assert governor.main(["run", "--kernel", str(k), *args]) == 2
    assert msg in capsys.readouterr().err


def test_probe_counts_stress_ng_ops_and_refuses_two_loads(tmp_path, capsys):
    """The stress-ng loop's counter file (bogo-ops of the finished runs,
    rewritten in place) is read as a count, beside a hackbench run file."""
    from schedsteal.guest import governor_probe
    ops = tmp_path / "stress-ng.ops"
    ops.write_bytes(b"%020d" % 12345)
    runs = tmp_path / "hackbench.runs"
    runs.write_bytes(b"xxx")
    assert governor_probe.loop_rounds([str(ops), str(runs), str(tmp_path / "absent")]) == 12348
    with pytest.raises(SystemExit) as e:
        governor_probe.main(["run", "--stress-ng", "8,1", "--hackbench", "4,10"])
    assert e.value.code == 2
    assert "one load at a time" in capsys.readouterr().err


def test_stress_loop_counts_each_runs_ops(tmp_path, monkeypatch):
    """STRESS_LOOP adds each finished run's bogo-ops to the counter (a fake
    stress-ng that writes the YAML and fails on its third run stops it)."""
    import subprocess
    import sys
    from schedsteal.guest import governor_probe
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "stress-ng"
    fake.write_text("#!/bin/sh\n"
                    "n=$(cat %s/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > %s/n\n"
                    "[ $n -ge 3 ] && exit 1\n"
                    "yaml=; while [ $# -gt 0 ]; do [ \"$1\" = --yaml ] && yaml=$2; shift; done\n"
                    "printf 'metrics:\\n    - stressor: cpu\\n      bogo-ops: 100%%s\\n"
                    "      bogo-ops-per-second-real-time: 5.0\\n' $n > $yaml\n"
                    % (tmp_path, tmp_path))
    fake.chmod(0o755)
    counter = tmp_path / "stress-ng.ops"
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}",
               PYTHONPATH=str(ROOT / "tools"))
    r = subprocess.run([sys.executable, "-c", governor_probe.STRESS_LOOP, str(counter),
                        "8", "1", str(tmp_path)], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and r.stdout == "running\n"
    assert governor_probe.loop_rounds([str(counter)]) == 1001 + 1002


def test_stress_windows_replace_whole_run_counts():
    """With --stress-ng WORKERS a phase's rounds/s is its windows' bogo-ops
    over the real time stress-ng reported: after the state was reached
    (busy), or every window of a phase that has no state (static1)."""
    r = result()
    r["samples"] = [[0.0, "static1", 1, True, [0, 0], 0], [1.0, "static1", 1, True, [0, 0], 0]] \
        + r["samples"]
    r["reached"]["static1"] = None
    # [phase, settled, t start, t end, bogo-ops, real s]
    r["segments"] = [["start", False, 0.0, 0.1, 7, 0.1],
                     ["static1", False, 0.1, 1.0, 90, 0.9],
                     ["busy", False, 1.0, 3.0, 400, 2.0],
                     ["busy", True, 3.0, 5.0, 300, 1.5],
                     ["busy", True, 5.0, 6.0, 100, 0.5]]
    rows = {x["phase"]: x for x in governor.summary(r)}
    assert rows["busy"]["rounds_per_s"] == pytest.approx(400 / 2.0)
    assert rows["static1"]["rounds_per_s"] == pytest.approx(100.0)
    assert rows["quiet"]["rounds_per_s"] == 0  # no window: the samples' count
    assert governor.against_static(r)["pct"] == pytest.approx(100.0)
    assert governor.segment_rate(r, "idle", True) is None


def fake_stress_ng(start: bytes, at_sigint: bytes, status: int = 0) -> str:
    """A fake stress-ng: writes `start`, waits for SIGINT, writes
    `at_sigint` and exits with `status`. SIGINT is blocked before `start`
    and taken with sigwait(); each output is one write() (atomic under
    PIPE_BUF), no buffered file (see the test below for why)."""
    return (f"#!{sys.executable}\n"
            "import os, signal\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
            f"os.write(1, {start!r})\n"
            "signal.sigwait({signal.SIGINT})\n"
            f"os.write(1, {at_sigint!r})\n"
            f"os._exit({status})\n")


def test_stress_cuts_keep_what_stress_ng_reported(tmp_path, monkeypatch):
    """StressCuts interrupts the run (SIGINT) and keeps stress-ng's own
    report of it: a fake stress-ng that reports 500 bogo-ops in 2.00 s
    when interrupted. A report already in the pipe when the start line is
    read is kept; a run that dies without a report, and one that says
    nothing of its workers, are errors."""
    from schedsteal.guest import governor_probe
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "stress-ng"
    # Python, not sh: a shell polling `sleep` in a loop once missed its
    # INT trap and hung the cut for its 120 s (1 unit run in many). No
    # Python handler either. Where stdout is buffered (CI: no
    # PYTHONUNBUFFERED), the interpreter runs the handler inside its flush
    # of the start line, holding the stdout buffer: the handler's print()
    # raised RuntimeError (reentrant call) and the fake died without its
    # report (CI, once: 500 of 1000). And a signal that lands between the
    # interpreter's last check and pause() hangs the cut for 120 s. Hence
    # fake_stress_ng(). The start line's second line is there to be read
    # with it.
    fake.write_text(fake_stress_ng(
        b"stress-ng: info:  [1] dispatching hogs: 2 cpu\n"
        b"stress-ng: info:  [1] cpu: a line before the cut\n",
        b"stress-ng: metrc: [1] cpu  500  2.00  2.00  0.00  250.00  250.00\n"))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    cuts = governor_probe.StressCuts([0], 2, str(tmp_path), 0.0)
    try:
        cuts.cut(("start", False))
        cuts.cut(("busy", True))
        cuts.cut(None)
        cuts.cut(("idle", False))   # stopped for good: no new run
    finally:
        cuts.stop()
    assert cuts.p is None and cuts.total == 1000
    assert [s[:2] for s in cuts.segments] == [["start", False], ["busy", True]]
    assert all(s[4] == 500 and s[5] == pytest.approx(2.0) for s in cuts.segments)
    assert all(s[2] <= s[3] for s in cuts.segments)
    # A report already in the pipe when the start line is read (a run that
    # ended at once) is kept: the old reader lost it (0, not 300).
    fake.write_text(fake_stress_ng(
        b"stress-ng: info:  [1] dispatching hogs: 2 cpu\n"
        b"stress-ng: metrc: [1] cpu  300  1.00  1.00  0.00  300.00  300.00\n", b""))
    early = governor_probe.StressCuts([0], 2, str(tmp_path), 0.0)
    try:
        early.cut(("start", False))
        early.cut(None)
    finally:
        early.stop()
    assert early.total == 300 and early.segments[0][5] == pytest.approx(1.0)
    # A run that dies without a report is an error, not "nothing done"
    # (which is what CI's lost report was counted as).
    fake.write_text(fake_stress_ng(b"stress-ng: info:  [1] dispatching hogs: 2 cpu\n",
                                   b"Traceback: it broke\n", status=1))
    broken = governor_probe.StressCuts([0], 2, str(tmp_path), 0.0)
    try:
        broken.cut(("start", False))
        with pytest.raises(RuntimeError, match=r"status 1\) without a report:.*it broke"):
            broken.cut(None)
    finally:
        broken.stop()
    assert broken.total == 0 and broken.segments == []
    fake.write_text("#!/bin/sh\necho 'stress-ng: error: no workers'\n")
    with pytest.raises(RuntimeError, match="did not start its workers: .*no workers"):
        governor_probe.StressCuts([0], 2, str(tmp_path), 0.0).cut(("start", False))


def _boot(rates: dict) -> dict:
    """A made-up run whose phases have the given rounds/s (one window each)."""
    r = result()
    s, t = [], 0.0
    for phase, rate in rates.items():
        s += [[t, phase, 2, True, [0, 0], 0], [t + 1.0, phase, 2, True, [0, 0], 0]]
        t += 2.0
    r["samples"] = s
    r["reached"] = {p: None for p in rates}
    r["segments"] = [[p, False, 0.0, 1.0, rate, 1.0] for p, rate in rates.items()]
    return r


def test_compare_sets_the_governor_beside_each_static_set(tmp_path, capsys):
    boots = [_boot({"static8": 50.0, "static2": 40.0, "busy": 48.0}),
             _boot({"static8": 60.0, "static2": 44.0, "busy": 57.0}),
             _boot({"static2": 42.0, "static8": 55.0, "busy": 53.0})]
    c = governor.compare(boots)
    rows = {r["phase"]: r for r in c["rows"]}
    assert [r["phase"] for r in c["rows"]] == ["static8", "static2", "busy"]
    assert rows["static8"]["mean"] == pytest.approx(55.0)
    assert rows["busy"]["mean"] == pytest.approx(158.0 / 3)
    assert c["best"] == "static8"
    assert rows["static8"]["gov_pct"] == pytest.approx(100.0 * (158.0 / 3 / 55.0 - 1))
    assert rows["static2"]["gov_pct"] > 0 and rows["static2"]["p"] < 0.05
    assert c["vs_boot_best_pct"] == pytest.approx(
        100.0 * ((48 / 50 + 57 / 60 + 53 / 55) / 3 - 1))
    paths = []
    for i, b in enumerate(boots):
        f = tmp_path / f"r{i}.json"
        f.write_text(json.dumps(b))
        paths.append(str(f))
    assert governor.main(["compare", *paths]) == 0
    out = capsys.readouterr().out
    assert "best static set (highest mean): static8; the governor against it: -4.2% (p 0.020)" in out
    assert "+ = the governor's higher" in out


def test_compare_refuses_runs_that_do_not_match(tmp_path, capsys):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(_boot({"static8": 50.0, "busy": 48.0})))
    b = tmp_path / "b.json"
    b.write_text(json.dumps(_boot({"static4": 50.0, "busy": 48.0})))
    assert governor.main(["compare", str(a), str(b)]) == 2
    assert "the same static sets" in capsys.readouterr().err
    assert governor.main(["compare", str(a), str(tmp_path / "none.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    c = tmp_path / "c.json"
    other = _boot({"static8": 50.0, "busy": 48.0})
    other["params"] = dict(other["params"], park_confirm="1")
    c.write_text(json.dumps(other))
    assert governor.main(["compare", str(a), str(c)]) == 2
    assert "the same governor settings" in capsys.readouterr().err


def test_module_probe_reads_insmods_error_and_the_modules_presence(tmp_path, monkeypatch):
    """insmod()/rmmod() of governor_probe.py module: the exit status, the
    last line insmod printed, and whether /sys/module/steal_governor is
    there afterwards (fakes on PATH; the module directory a temp dir)."""
    from schedsteal.guest import governor_probe
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mod = tmp_path / "steal_governor"
    (bin_dir / "insmod").write_text(
        "#!/bin/sh\n"
        "case \"$2\" in low_threshold=*) echo 'insmod: ERROR: could not insert "
        "module x.ko: Invalid parameters' >&2; exit 1;; esac\n"
        f"mkdir -p {mod}\n")
    (bin_dir / "rmmod").write_text(f"#!/bin/sh\nrmdir {mod}\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(governor_probe, "MODULE", str(mod))
    assert governor_probe.insmod("x.ko", "low_threshold=600") == {
        "rc": 1, "error": "insmod: ERROR: could not insert module x.ko: Invalid parameters",
        "loaded": False}
    assert governor_probe.insmod("x.ko", "interval_ms=100") == {
        "rc": 0, "error": "", "loaded": True}
    assert governor_probe.rmmod() == {"rc": 0, "error": "", "loaded": False}


def test_module_probe_needs_the_module_file(capsys):
    from schedsteal.guest import governor_probe
    with pytest.raises(SystemExit):
        governor_probe.main(["module"])
    assert "--ko" in capsys.readouterr().err


def test_run_passes_the_knobs_it_was_given_on_the_command_line():
    import argparse
    ns = argparse.Namespace(unpark_backoff=None, park_confirm=None)
    assert governor.governor_append(ns) is None
    ns = argparse.Namespace(unpark_backoff=0, park_confirm=1)
    assert governor.governor_append(ns) == ["steal_governor.unpark_backoff=0",
                                            "steal_governor.park_confirm=1"]


def test_by_sizes_weights_each_static_rate_by_the_time_held():
    # 75% of the time at 2 CPUs (rate 2.0, the best), 25% at 3 (rate 1.5):
    # 0.75 * 2.0 + 0.25 * 1.5 = 1.875, -6.25% against 2.0.
    z = governor.by_sizes({2: 3.0, 3: 1.0}, {8: 0.7, 3: 1.5, 2: 2.0})
    assert z["pct"] == pytest.approx(-6.25)
    assert z["covered"] == pytest.approx(1.0)
    assert z["share"] == {2: 0.75, 3: 0.25}
    # A size without a static set is left out of the estimate and reported.
    z = governor.by_sizes({2: 3.0, 5: 1.0}, {3: 1.5, 2: 2.0})
    assert z["pct"] == pytest.approx(0.0) and z["covered"] == pytest.approx(0.75)
    assert governor.by_sizes({5: 1.0}, {2: 2.0}) is None
    assert governor.by_sizes({2: 1.0}, {}) is None


def test_held_sizes_counts_from_the_converged_samples():
    r = result()
    r["samples"] = [[0.0, "busy", 8, True, [0, 0], 0], [1.0, "busy", 3, True, [0, 0], 0],
                    [1.5, "busy", 2, True, [0, 0], 0], [2.5, "busy", 3, True, [0, 0], 0],
                    [3.0, "busy", 2, True, [0, 0], 0]]
    r["reached"] = {"busy": 1.0}
    assert governor.held_sizes(r) == {3: 1.0, 2: 1.0}


def test_compare_and_report_give_the_cost_of_the_sizes_held(tmp_path, capsys):
    boots = [_boot({"static3": 30.0, "static2": 40.0, "busy": 38.0}),
             _boot({"static3": 30.0, "static2": 40.0, "busy": 36.0})]
    c = governor.compare(boots)
    # _boot holds 2 CPUs throughout: the sizes cost nothing.
    assert c["by_sizes"]["pct"] == pytest.approx(0.0)
    assert "from the sizes it held (2: 100% of the time), at the sets' means: +0.0%" \
        in governor.format_compare(c)
    f = tmp_path / "r.json"
    f.write_text(json.dumps(boots[0]))
    assert governor.main(["report", str(f), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["by_sizes"]["covered"] == pytest.approx(1.0)
