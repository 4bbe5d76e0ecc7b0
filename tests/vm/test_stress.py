"""Stress on the debug kernel (lockdep, atomic-sleep, preempt and list
checks, hung-task detector): hackbench in the root cgroup and in a
throttled one while CPUs are unplugged and replugged, STEAL is toggled
and the parked set is rewritten in a loop while two SCHED_DEADLINE tasks
run. All in one boot, after the sparsemask KUnit suite (the test kernel
runs the same code; the debug kernel checks more).
Every hackbench run must complete and the kernel log must stay clean;
lockdep must still be running at the end (it switches itself off after
its first report)."""
import re

import pytest

from conftest import boot, json_results

LOCKDEP_ON = "grep -E '^ *debug_locks:' /proc/lockdep_stats"


def debug_locks(output):
    m = re.search(r"debug_locks:\s+(\d+)", output)
    assert m, "no lockdep statistics: is this the debug kernel?"
    return int(m[1])


# Small: throttled to 20% of a CPU, the debug kernel needed about ten
# minutes for test_steal.py's hackbench -g 4 -l 200.
THROTTLED_STEAL = ("python3 guest/sched_probe.py run --feature STEAL "
                   "--cgroup-max '20000 100000' -- hackbench -P -g 2 -l 50")


@pytest.fixture(scope="module")
def stress_boot(debug_kernel):
    """One debug boot: the sparsemask KUnit suite, the stress run with the
    park storm (which also unplugs, toggles STEAL and throttles), stealing
    in a throttled cgroup, then lockdep's state. The stress run without
    parking is a subset of it."""
    return boot(debug_kernel, "smt4",
                f"python3 guest/sched_probe.py kunit && guest/stress.sh 3 park && "
                f"{THROTTLED_STEAL} && {LOCKDEP_ON}", timeout=900)


def test_debug_kernel_steals_in_a_throttled_cgroup(stress_boot):
    got = json_results(stress_boot, 2)[1]
    assert got["status"] == 0
    assert got["cgroup"]["nr_throttled"] > 0, got["cgroup"]
    assert got["total"]["steal"] > 0


def test_debug_kernel_kunit_and_lockdep(stress_boot):
    got = json_results(stress_boot, 2)[0]
    assert got["suites"].get("sched_sparsemask") is True, got
    assert all(got["cases"].values()), got["cases"]
    assert debug_locks(stress_boot.output) == 1


def test_stress_with_park_storm(stress_boot):
    res = stress_boot
    assert res.status == 0, res.output[-3000:]
    assert "root: 6 runs ok" in res.output
    assert "throttled: 4 runs ok" in res.output
    assert "hotplug: 3 rounds over 3 CPUs ok" in res.output
    # The throttled group must really have been throttled.
    m = re.search(r"^throttled periods: nr_throttled (\d+)$", res.output, re.M)
    assert m and int(m[1]) > 0, res.output[-2000:]
    assert re.search(r"park: [1-9]\d* writes ok", res.output), res.output[-2000:]
    assert "deadline: 2 tasks ok" in res.output, res.output[-2000:]
    assert debug_locks(res.output) == 1
