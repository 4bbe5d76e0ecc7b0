"""Idle task stealing: it happens with STEAL and not with NO_STEAL, crosses
an LLC only with STEAL_NODE or STEAL_NUMA, never takes a pinned task, and survives hotplug, feature
toggling and CFS bandwidth throttling (on the debug kernel: test_stress.py).

Each test boots a guest and runs guest/sched_probe.py, which prints the
schedstat deltas and, with --trace, every migration with its kernel stack
(steals are the migrations whose stack holds steal_task/steal_from)."""
import re
import shlex

import pytest

from conftest import boot, json_results, run_json

pytestmark = pytest.mark.topics("steal")

HACKBENCH = "hackbench -P -g 4 -l 200"
# Stealing on from boot (0047): a value that is no bool, ignored with a
# warning, then one that counts.
BOOT_STEAL = "sched_steal=maybe sched_steal=1"


def probe(kernel, preset, args, append=None):
    return run_json(kernel, preset, f"python3 guest/sched_probe.py {args}", append=append)


def probes(kernel, preset, *args):
    """Several probe runs in one boot (boots are what CI time goes on):
    their JSON objects, in order."""
    res = boot(kernel, preset, " && ".join(f"python3 guest/sched_probe.py {a}" for a in args))
    return json_results(res, len(args))


# smt4 runs the jump-label kernel: there each feature switch patches code.
# The test and debug kernels steal on llc2x4 and numa2 in
# test_steal_crosses_an_llc_only_at_the_level_asked.
@pytest.mark.full
@pytest.mark.topics("nirelax")
@pytest.mark.parametrize("preset,config", [("smt4", "jumplabel")])
def test_steal_counter_moves_only_with_steal(request, preset, config):
    kernel = request.getfixturevalue(f"{config}_kernel")
    # NI_RANDOM sits past the 32nd feature bit: on by default, and
    # switchable (a 32-bit mask lost it once the series added features).
    # All runs in one boot: each run sets every feature it names. The
    # first sets none and runs nothing: it reads the defaults.
    default, on, off, relax = probes(
        kernel, preset, "run -- true",
        f"run --feature STEAL --feature NI_RANDOM --trace -- {HACKBENCH}",
        f"run --feature NO_STEAL --feature NO_NI_RANDOM --trace -- {HACKBENCH}",
        f"run --feature NO_STEAL --feature NI_RANDOM --feature NI_RELAX --trace -- {HACKBENCH}")
    assert on["status"] == 0 and off["status"] == 0
    # Stealing and NI_RELAX are off by default (0035, 0034); NI_RANDOM on.
    assert {"NO_STEAL", "NO_NI_RELAX", "NI_RANDOM"} <= set(default["features"])
    assert default["total"]["steal_attempt"] == 0
    assert on["schedstat_version"] == 118
    assert on["total"]["steal"] > 0, on["total"]
    assert on["total"]["steal_attempt"] == on["total"]["steal"] + on["total"]["steal_fail"]
    assert on["total"]["find_time"] > 0
    assert "STEAL" in on["features"] and "NO_STEAL" in off["features"]
    assert "NI_RANDOM" in on["features"] and "NO_NI_RANDOM" in off["features"]
    assert off["total"]["steal"] == 0 and off["total"]["steal_attempt"] == 0
    # The trace sees the steals too.
    assert on["trace_lost"] == 0
    assert len(on["steals"]) > 0
    assert off["steals"] == []
    # NI_RELAX (off by default): newidle balance without its gates inside
    # the LLC pulls tasks, and stealing stays off.
    assert relax["status"] == 0 and relax["trace_lost"] == 0
    assert "NI_RELAX" in relax["features"] and "NO_NI_RELAX" in on["features"]
    assert relax["total"]["steal_attempt"] == 0 and relax["steals"] == []
    assert relax["newidle_pulls"] > 0, relax["total"]


# llc2x4: two LLCs in one node; numa2: one LLC per node, on the debug
# kernel (lockdep sees the remote rq locks taken across nodes).
@pytest.mark.topics("far")
@pytest.mark.parametrize("preset,level,other,config",
                         [pytest.param("llc2x4", "STEAL_NODE", "STEAL_NUMA", "test",
                                       marks=pytest.mark.full),
                          ("numa2", "STEAL_NUMA", "STEAL_NODE", "debug")])
def test_steal_crosses_an_llc_only_at_the_level_asked(request, preset, level, other, config):
    kernel = request.getfixturevalue(f"{config}_kernel")
    # One boot: the default (inside the LLC only), then the level on.
    # Fewer loops: the debug kernel is several times slower.
    work = HACKBENCH if config == "test" else "hackbench -P -g 4 -l 100"
    # Stealing on from the command line (0047), not from a feature write:
    # the first run names no STEAL. The first value is no bool: a warning,
    # and the second one counts.
    res = boot(kernel, preset,
               f"python3 guest/sched_probe.py run --feature NO_{level} --trace -- {work} && "
               f"python3 guest/sched_probe.py run --feature STEAL --feature {level} --trace -- {work}",
               append=BOOT_STEAL.split())
    off, on = json_results(res, 2)
    assert "STEAL" in off["features"], off["features"]
    assert re.findall(r"sched_steal=\S*: expected 0 or 1, ignored", res.dmesg) == \
        ["sched_steal=maybe: expected 0 or 1, ignored"]
    assert off["status"] == 0 and on["status"] == 0
    assert off["trace_lost"] == 0 and on["trace_lost"] == 0
    assert on["schedstat_version"] == 118
    # Off: stealing works and never leaves the LLC.
    assert off["total"]["steal"] > 0
    assert off["total"]["steal_attempt"] == off["total"]["steal"] + off["total"]["steal_fail"]
    assert off["total"]["find_time"] > 0
    assert len(off["steals"]) > 0
    assert [(e["orig"], e["dest"], e["stack"][:4]) for e in off["cross_llc_steals"]] == []
    assert off["total"]["steal_beyond"] == 0
    assert off["total"]["steal_node"] == off["total"]["steal_numa"] == 0
    # On: the LLC had nothing at some idle entries, the search went on,
    # and found tasks at this level only; the counter and the trace agree.
    count = "steal_node" if level == "STEAL_NODE" else "steal_numa"
    not_count = "steal_numa" if level == "STEAL_NODE" else "steal_node"
    assert level in on["features"] and f"NO_{other}" in on["features"]
    assert on["total"]["steal_beyond"] > 0
    assert on["total"][count] > 0, on["total"]
    assert on["total"][not_count] == 0
    assert on["total"][count] <= on["total"]["steal"]
    assert len(on["cross_llc_steals"]) == on["total"][count]
    cross_node = len(on["cross_node_steals"])
    assert cross_node == (on["total"][count] if level == "STEAL_NUMA" else 0)


# The test kernel only: the debug kernel's run took 6 min of CI's 70
# (stop 38), and what it adds, lockdep over the steal path with pinned
# waiters, is the steal path the quick tier's debug boots already take
# (test_stress.py toggles STEAL under hackbench, the numa2 steal test steals
# with STEAL_BACKOFF on); the back-off clears its element under the lock
# steal_from() already holds.
@pytest.mark.parametrize("any_kernel", ["test"], indirect=True)
def test_pinned_task_is_never_stolen(any_kernel):
    # Three hogs pinned to CPU 1 keep it overloaded while hackbench, on the
    # other CPUs, makes them go idle and look for work: they must try CPU 1
    # (steal_fail moves) and must not take a hog.
    # The hogs are forked by a shell that is already pinned, so they are
    # pinned from birth (taskset would leave them movable until it execs).
    script = ("taskset -c 1 sh -c 'for i in 1 2 3; do while :; do :; done & echo $!; done' "
              ">/tmp/hogs; taskset -c 0,2,3 hackbench -P -g 2 -l 200; rc=$?; "
              "echo hogs $(cat /tmp/hogs) >&2; kill $(cat /tmp/hogs); exit $rc")
    # Same boot: the STEAL_BACKOFF probe, without and then with it.
    cmd = (f"python3 guest/sched_probe.py run --feature STEAL --feature NO_STEAL_BACKOFF "
           f"--trace -- {shlex.quote(script)} && "
           "python3 guest/sched_probe.py pinned --cpu 1 --feature NO_STEAL_BACKOFF && "
           "python3 guest/sched_probe.py pinned --cpu 1 --feature STEAL_BACKOFF && "
           # STEAL switched on while the hogs already run: nothing is
           # enqueued on CPU 1 after that, yet it must be in the set.
           "python3 guest/sched_probe.py pinned --cpu 1 --feature NO_STEAL "
           "--feature NO_STEAL_BACKOFF --then-feature STEAL")
    res = boot(any_kernel, "smt4", cmd)
    got, off, on, late = json_results(res, 4)
    assert got["status"] == 0, got["stderr"]
    hogs = {int(p) for p in got["stderr"].split("hogs", 1)[1].split()}
    assert len(hogs) == 3
    assert got["total"]["steal_fail"] > 0
    assert [s for s in got["steals"] if s["pid"] in hogs] == []

    # Only pinned hogs wait on CPU 1: without the back-off it stays in the
    # overloaded set, and every idle entry of the other CPUs locks it.
    assert "NO_STEAL_BACKOFF" in off["features"] and "STEAL_BACKOFF" in on["features"]
    for r in (off, on):
        assert r["hogs_queued"] and r["nr_running"] >= 3
        assert r["pinned_stayed"]               # a pinned hog is never taken
        assert r["widened_left"], "a hog allowed elsewhere again must move"
    # Without the back-off CPU 1 never leaves the set; with it, it leaves
    # after idle entries find only pinned hogs, until its next enqueue
    # (a kworker woken there) puts it back: it must read 0 after some
    # round, not necessarily after the last.
    assert set(off["overloaded_reads"]) == {1}, off["overloaded_reads"]
    assert 0 in on["overloaded_reads"], on["overloaded_reads"]
    # Switched on late (0036 seeds the set): CPU 1 is in it, and the idle
    # CPUs find it there.
    assert "STEAL" in late["features"] and "NO_STEAL_BACKOFF" in late["features"]
    assert late["hogs_queued"] and late["nr_running"] >= 3
    # The switch came once all three hogs were runnable (not merely
    # queued under delayed dequeue), so 0036's seed must find CPU 1
    # overloaded; without 0036 nothing sets it before an enqueue.
    assert late["runnable_at_switch"] >= 3, late
    assert late["overloaded_at_switch"] == 1  # at once, not at an enqueue
    assert set(late["overloaded_reads"]) == {1}, late["overloaded_reads"]
    assert late["total"]["steal_fail"] > 0, late["total"]
    assert late["pinned_stayed"] and late["widened_left"]


@pytest.mark.full
def test_node_limit_disables_stealing(test_kernel):
    got, res = probe(test_kernel, "numa2", f"run --feature STEAL -- {HACKBENCH}",
                     append=["sched_steal_node_limit=1"])
    assert got["status"] == 0
    assert "task stealing disabled: 2 NUMA nodes" in res.dmesg
    assert got["total"]["steal_attempt"] == 0


# On the debug kernel: test_stress.py's boot.
@pytest.mark.full
def test_throttled_cgroup_with_stealing(test_kernel):
    got, _ = probe(test_kernel, "smt4",
                   f"run --feature STEAL --trace --cgroup-max '20000 100000' -- {HACKBENCH}")
    assert got["status"] == 0
    assert got["cgroup"]["nr_throttled"] > 0, got["cgroup"]
    assert got["total"]["steal"] > 0


@pytest.mark.full
def test_trace_metrics_see_the_steals(test_kernel, tmp_path):
    """abbench --trace-dir on llc2x4, one NO_STEAL and one STEAL run: the
    traces are whole, the trace's CPU time adds up, and every steal the
    schedstat counters report is a move of a waiting task inside an LLC
    in the trace (newidle balance adds more), none with NO_STEAL."""
    from schedsteal import abbench, schedstat, schedtrace

    cmd = ("python3 -m schedsteal.abbench run --a feat:NO_STEAL --b feat:STEAL "
           "--workload hackbench-process-pipe --param 2 --loops 100 --runs 1 "
           "--warmup 0 --trace-dir \"$SCHEDSTEAL_OUT/traces\" "
           "--out \"$SCHEDSTEAL_OUT/ab.json\"")
    boot(test_kernel, "llc2x4", cmd, keep=str(tmp_path))
    doc = abbench.load_results(str(tmp_path / "ab.json"))
    topo = schedtrace.Topology.from_json(doc["topology"])
    assert doc["topology"]["llc_groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    seen = {}
    for run in doc["runs"]:
        assert run["trace_lost"] == 0
        s = schedtrace.analyze_file(str(tmp_path / run["trace"]), topo)
        assert s["events_missing"] == []
        assert s["cpus"] == list(range(8))
        assert s["idle_s"] + s["busy_s"] == pytest.approx(s["duration_s"] * 8)
        assert s["run_delay"]["wakeup"]["count"] > 0
        assert s["wasted_llc_s"] <= s["wasted_machine_s"] <= s["idle_s"]
        rep = schedstat.compute_report(run["recording"])
        steals = rep["cpu_fields"]["steal"]["total"]
        inside_llc = s["migrations"]["queued"] - s["migrations"]["queued_cross_llc"]
        seen[run["setting"]] = (steals, inside_llc)
    steals_off, _ = seen["A"]
    steals_on, moves_on = seen["B"]
    assert steals_off == 0
    assert steals_on > 0
    assert moves_on >= steals_on, seen
