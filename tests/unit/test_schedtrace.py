"""schedtrace: wasted idle, run delay and migrations from a trace.

handmade.txt is small enough to work out by hand (4 CPUs, LLCs 0-1 and
2-3, 1.0 s): the expected figures below are derived in the comments.
The recorded traces are real guest traces (llc2x4, hackbench pipe).
"""
import gzip
import json
import zlib
from pathlib import Path

import pytest

from schedsteal import schedtrace as st

FIX = Path(__file__).parent / "fixtures" / "schedtrace"
LLC2 = st.Topology.from_groups([[0, 1], [2, 3]])


def handmade(topo=LLC2, back_ms=10.0):
    return st.analyze_file(str(FIX / "handmade.txt"), topo, back_ms)


def test_wasted_idle_by_hand():
    s = handmade()
    # CPU 0 runs a with b waiting from 1.1 to 1.3: CPU 1 (same LLC) idle
    # 0.2 s; CPU 1 runs c with b waiting 1.6-1.7: CPU 0 idle 0.1 s.
    assert s["wasted_llc_s"] == pytest.approx(0.3)
    # Machine-wide: CPUs 1, 2, 3 during the first (0.6 s), 0, 2, 3 during
    # the second (0.3 s). CPU 2 is first seen at 2.0 and counts from 1.0.
    assert s["wasted_machine_s"] == pytest.approx(0.9)
    assert s["duration_s"] == pytest.approx(1.0)
    assert s["cpus"] == [0, 1, 2, 3]
    # CPU 0 idle 1.5-2.0, CPU 1 1.0-1.30001, CPUs 2 and 3 all along.
    assert s["idle_s"] == pytest.approx(0.5 + 0.30001 + 2.0)
    assert s["wasted_llc_pct"] == pytest.approx(0.3 / 4 * 100)
    assert s["wasted_llc_idle_pct"] == pytest.approx(0.3 / s["idle_s"] * 100)
    assert s["per_cpu"]["1"]["wasted_llc_s"] == pytest.approx(0.2)
    assert s["per_cpu"]["0"]["wasted_llc_s"] == pytest.approx(0.1)
    assert s["entries_lost"] == 0


def test_run_delay_by_hand():
    d = handmade()["run_delay"]
    # b woken at 1.1, runs at 1.30001; c woken and run at 1.6
    assert d["wakeup"]["count"] == 2
    assert d["wakeup"]["max_us"] == pytest.approx(200010)
    assert d["wakeup"]["total_s"] == pytest.approx(0.20001)
    # b preempted by c at 1.6, runs again at 1.7
    assert d["preempt"]["count"] == 1
    assert d["preempt"]["mean_us"] == pytest.approx(100000)
    assert d["all"]["count"] == 3


def test_migrations_by_hand():
    m = handmade()["migrations"]
    # b queued 0->1 (same LLC); c asleep 3->1, a asleep 0->2 then 2->0
    assert (m["total"], m["queued"], m["wakeup"], m["running"]) == (4, 1, 3, 0)
    assert m["cross_llc"] == 3
    assert m["queued_cross_llc"] == 0
    assert m["cross_node"] == 0
    assert m["moved_back"] == 1          # a: 2->0 undoes 0->2 within 5 ms
    assert m["moved_back_by"] == {"wakeup>wakeup": 1}
    assert m["per_task"] == pytest.approx(4 / 3)
    assert handmade(back_ms=1.0)["migrations"]["moved_back"] == 0


def test_one_llc_per_cpu_has_no_llc_waste():
    alone = st.Topology.from_groups([[0], [1], [2], [3]])
    s = handmade(alone)
    assert s["wasted_llc_s"] == 0
    assert s["wasted_machine_s"] == pytest.approx(0.9)
    assert s["migrations"]["cross_llc"] == 4


def test_nodes_count_cross_node_moves():
    topo = st.Topology.from_groups([[0, 1], [2, 3]], [[0, 1], [2, 3]])
    assert handmade(topo)["migrations"]["cross_node"] == 3


def test_missing_wakeup_new_is_reported():
    assert handmade()["events_missing"] == ["sched_wakeup_new"]


def line(ts, cpu, task, event, rest):
    return f"{task:>16} [{cpu:03d}] d..2. {ts:12.6f}: {event}: {rest}\n"


def switch(ts, cpu, prev, pid, state, nxt, npid):
    return line(ts, cpu, f"{prev}-{pid}", "sched_switch",
                f"prev_comm={prev} prev_pid={pid} prev_prio=120 prev_state={state} "
                f"==> next_comm={nxt} next_pid={npid} next_prio=120")


def test_percpu_kthreads_do_not_overload():
    # ksoftirqd/0 waits behind a on CPU 0 while CPU 1 idles: it could not
    # move, so no waste; a movable task waiting the same way is waste.
    for comm, waste in (("ksoftirqd/0", 0.0), ("kworker/0:1H", 0.0),
                        ("kworker/u8:3", 0.5), ("my worker", 0.5)):
        lines = [switch(1.0, 0, "swapper/0", 0, "R", "a", 10),
                 line(1.0, 1, "<idle>-0", "hrtimer_expire_entry", "x"),
                 line(1.0, 0, "a-10", "sched_wakeup",
                      f"comm={comm} pid=20 prio=120 target_cpu=000"),
                 switch(1.5, 0, "a", 10, "S", comm, 20)]
        s = st.analyze_lines(lines, st.Topology.from_groups([[0, 1]]))
        assert s["wasted_llc_s"] == pytest.approx(waste), comm


def test_an_idle_cpu_with_one_waiting_task_is_not_overloaded():
    # The task woken onto idle CPU 0 runs there next: nothing for CPU 1.
    lines = [line(1.0, 0, "<idle>-0", "sched_wakeup",
                  "comm=a pid=10 prio=120 target_cpu=000"),
             line(1.0, 1, "<idle>-0", "hrtimer_expire_entry", "x"),
             switch(1.2, 0, "swapper/0", 0, "R", "a", 10)]
    s = st.analyze_lines(lines, st.Topology.from_groups([[0, 1]]))
    assert s["wasted_llc_s"] == 0
    assert s["run_delay"]["wakeup"]["max_us"] == pytest.approx(200000)


def test_no_switch_events_is_an_error():
    with pytest.raises(st.TraceError, match="no sched_switch"):
        st.analyze_lines([line(1.0, 0, "<idle>-0", "sched_wakeup",
                               "comm=a pid=10 prio=120 target_cpu=000")], LLC2)


def test_lost_events_from_header(tmp_path):
    text = (FIX / "handmade.txt").read_text().replace("13/13", "13/20")
    (tmp_path / "t.txt").write_text(text)
    assert st.analyze_file(str(tmp_path / "t.txt"), LLC2)["entries_lost"] == 7
    assert st.main(["report", str(tmp_path / "t.txt"), "--llc", "0-1",
                    "--llc", "2-3"]) == 1


def test_gzip_trace(tmp_path):
    gz = tmp_path / "t.txt.gz"
    gz.write_bytes(gzip.compress((FIX / "handmade.txt").read_bytes()))
    assert st.analyze_file(str(gz), LLC2)["wasted_llc_s"] == pytest.approx(0.3)


def truncated_gzip(tmp_path, keep):
    """The recorded trace gzipped, cut after `keep` compressed bytes; and
    the complete lines that a decompressor gets from what is left."""
    data = (FIX / "llc2x4-pipe-g2-nosteal.txt.gz").read_bytes()
    gz = tmp_path / "cut.txt.gz"
    gz.write_bytes(data[:keep])
    text = zlib.decompressobj(wbits=31).decompress(data[:keep]).decode()
    return gz, text[:text.rindex("\n") + 1].splitlines(keepends=True) if "\n" in text else []


def test_truncated_gzip_uses_the_complete_lines_and_warns(capsys, tmp_path):
    gz, lines = truncated_gzip(tmp_path, 100_000)
    assert 1000 < len(lines) < 23954
    want = st.analyze_lines(lines, RECORDED_TOPO)
    got = st.analyze_file(str(gz), RECORDED_TOPO)
    assert got["truncated"] is True and got["lines_read"] == len(lines)
    assert got["events"] == want["events"]
    assert got["wasted_llc_s"] == pytest.approx(want["wasted_llc_s"])

    llc = ["--llc", "0-3", "--llc", "4-7"]
    assert st.main(["report", str(gz), *llc]) == 0
    out, err = capsys.readouterr()
    assert err == (f"schedtrace: warning: {gz}: truncated (the gzip stream ends early): "
                   f"analyzed the {len(lines)} complete lines read\n")
    assert f"WARNING: truncated: only the first {len(lines)} lines" in out
    assert st.main(["report", str(gz), *llc, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["truncated"] is True and doc["lines_read"] == len(lines)


def test_gzip_cut_before_any_event_is_a_clear_error(capsys, tmp_path):
    gz, _lines = truncated_gzip(tmp_path, 40)
    assert st.main(["report", str(gz), "--llc", "0-3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"schedtrace: error: {gz}: truncated") and err.count("\n") == 1
    assert "no sched_switch events" in err


def test_corrupt_gzip_is_a_clear_error(capsys, tmp_path):
    data = bytearray((FIX / "llc2x4-pipe-g2-nosteal.txt.gz").read_bytes())
    data[400:408] = bytes(b ^ 0xFF for b in data[400:408])   # an invalid deflate block
    gz = tmp_path / "bad.txt.gz"
    gz.write_bytes(bytes(data))
    assert st.main(["report", str(gz), "--llc", "0-3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"schedtrace: error: cannot read {gz}: corrupt gzip data")
    assert err.count("\n") == 1


def test_cli_table_and_json(capsys, tmp_path):
    trace = str(FIX / "handmade.txt")
    assert st.main(["report", trace, "--llc", "0-1", "--llc", "2-3"]) == 0
    out = capsys.readouterr().out
    assert "wasted_llc" in out and "moved_back(10ms)" in out
    topo = tmp_path / "topo.json"
    topo.write_text(json.dumps({"llc_groups": [[0, 1], [2, 3]],
                                "numa_nodes": [[0, 1, 2, 3]]}))
    assert st.main(["report", trace, "--topology", str(topo), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "schedsteal-schedtrace"
    assert doc["wasted_llc_s"] == pytest.approx(0.3)


@pytest.mark.parametrize("argv, message", [
    (["--llc", "0-x"], "not a CPU list"),
    (["--llc", "3-1"], "runs backwards"),
    (["--llc", "0-2", "--llc", "2-3"], "CPU 2 is in two --llc groups"),
    ([], "which CPUs share an LLC"),
    (["--llc", "0-3", "--back-ms", "0"], "--back-ms must be > 0"),
    (["--llc", "0-3", "--topology", "x.json"], "exclude each other"),
])
def test_bad_input_is_a_clear_error(capsys, argv, message):
    assert st.main(["report", str(FIX / "handmade.txt"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("schedtrace: error: ") and message in err


@pytest.mark.parametrize("content, message", [
    (b"\xff\xfe\x00\x01binary", "not JSON (not UTF-8 text)"),
    (b"", "not JSON"),
    (b"[]", "topology: expected an object with llc_groups"),
    (b"null", "topology: expected an object with llc_groups"),
    (b'{"numa_nodes": [[0]]}', "topology: 'llc_groups' must be a list of CPU lists"),
    (b'{"llc_groups": "0-3"}', "topology: 'llc_groups' must be a list of CPU lists"),
    (b'{"llc_groups": [["a"]]}', "topology: 'llc_groups' must be a list of CPU lists"),
    (b'{"llc_groups": [[0, -1]]}', "topology: 'llc_groups' must be a list of CPU lists"),
    (b'{"llc_groups": [[0, 1]], "numa_nodes": 5}',
     "topology: 'numa_nodes' must be a list of CPU lists"),
    (b'{"llc_groups": [[0, 1]], "cpus": 4}', "topology: 'cpus' must be a list of CPUs"),
])
def test_bad_topology_file_is_a_clear_error(capsys, tmp_path, content, message):
    topo = tmp_path / "topo.json"
    topo.write_bytes(content)
    assert st.main(["report", str(FIX / "handmade.txt"), "--topology", str(topo)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("schedtrace: error: ") and message in err, err


def test_missing_file_is_a_clear_error(capsys):
    assert st.main(["report", "/nonexistent/trace.txt", "--llc", "0-3"]) == 2
    assert "cannot read /nonexistent/trace.txt" in capsys.readouterr().err


# --- recorded guest traces -------------------------------------------------------

RECORDED = json.loads((FIX / "recorded.json").read_text())
RECORDED_TOPO = st.Topology.from_json(RECORDED["topology"])


@pytest.mark.parametrize("name", sorted(RECORDED["runs"]))
def test_recorded_trace_adds_up(name):
    s = st.analyze_file(str(FIX / name), RECORDED_TOPO)
    assert s["entries_lost"] == 0 and s["events_missing"] == []
    assert s["cpus"] == list(range(8))
    # every CPU is idle or busy at every moment of the window
    assert s["idle_s"] + s["busy_s"] == pytest.approx(8 * s["duration_s"])
    for c in s["per_cpu"].values():
        assert c["wasted_llc_s"] <= c["wasted_machine_s"] <= c["idle_s"] + 1e-9
    m = s["migrations"]
    assert m["total"] == m["wakeup"] + m["queued"] + m["running"]
    assert m["cross_node"] == 0                  # one node
    d = s["run_delay"]
    assert d["all"]["count"] == d["wakeup"]["count"] + d["preempt"]["count"] > 1000
    # the run took hackbench's time plus start-up: the window covers it
    assert s["duration_s"] >= RECORDED["runs"][name]["hackbench_s"]


def test_recorded_steals_are_queued_moves_inside_the_llc():
    """Each steal (schedstat) is a move of a waiting task within an LLC
    (trace): the trace must see at least as many."""
    for name, meta in RECORDED["runs"].items():
        m = st.analyze_file(str(FIX / name), RECORDED_TOPO)["migrations"]
        assert m["queued"] - m["queued_cross_llc"] >= meta["steal"], name


def test_recorded_steal_cuts_wasted_llc_idle():
    # what the two recordings show (1 run each: an example, not a benchmark)
    s = {meta["setting"]: st.analyze_file(str(FIX / name), RECORDED_TOPO)
         for name, meta in RECORDED["runs"].items()}
    off, on = s["feat:NO_STEAL"], s["feat:STEAL"]
    assert off["wasted_llc_s"] == pytest.approx(1.068639, abs=1e-6)
    assert on["wasted_llc_s"] == pytest.approx(0.469630, abs=1e-6)
    assert on["migrations"]["queued"] == 551 and off["migrations"]["queued"] == 266
