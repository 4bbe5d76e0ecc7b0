"""Stress on the debug kernel (lockdep, atomic-sleep, preempt and list
checks, hung-task detector): hackbench in the root cgroup and in a
throttled one while CPUs are unplugged and replugged, STEAL is toggled
and, in the second run, the parked set is rewritten in a loop while two
SCHED_DEADLINE tasks run.
Every hackbench run must complete and the kernel log must stay clean;
lockdep must still be running at the end (it switches itself off after
its first report)."""
import re

import pytest

from conftest import boot, run_json

LOCKDEP_ON = "grep -E '^ *debug_locks:' /proc/lockdep_stats"


def debug_locks(output):
    m = re.search(r"debug_locks:\s+(\d+)", output)
    assert m, "no lockdep statistics: is this the debug kernel?"
    return int(m[1])


def test_debug_kernel_kunit_and_lockdep(debug_kernel):
    got, res = run_json(debug_kernel, "smt4", f"python3 guest/sched_probe.py kunit && {LOCKDEP_ON}")
    assert got["suites"].get("sched_sparsemask") is True, got
    assert debug_locks(res.output) == 1


@pytest.mark.parametrize("args,rounds", [("4", 4), ("3 park", 3)],
                         ids=["hotplug-steal-throttle", "plus-park-storm"])
def test_stress(debug_kernel, args, rounds):
    res = boot(debug_kernel, "smt4", f"guest/stress.sh {args} && {LOCKDEP_ON}", timeout=900)
    assert res.status == 0, res.output[-3000:]
    assert "root: 6 runs ok" in res.output
    assert "throttled: 4 runs ok" in res.output
    assert f"hotplug: {rounds} rounds over 3 CPUs ok" in res.output
    # The throttled group must really have been throttled.
    m = re.search(r"^throttled periods: nr_throttled (\d+)$", res.output, re.M)
    assert m and int(m[1]) > 0, res.output[-2000:]
    if "park" in args:
        assert re.search(r"park: [1-9]\d* writes ok", res.output), res.output[-2000:]
        assert "deadline: 2 tasks ok" in res.output, res.output[-2000:]
    assert debug_locks(res.output) == 1
