"""Boot the test kernel on every preset: the guest must see the preset's
topology (sysfs and schedstat domain lines) and run hackbench; a planted
WARNING must fail a run."""
import pytest

from schedsteal import vm

from conftest import run_json


def domain_chain(expected, cpu):
    """Spans the scheduler domains of `cpu` must have, lowest first:
    the SMT siblings (when there is SMT), the LLC, the NUMA node (when it
    is more than the LLC), then the whole machine."""
    chain = []
    for key in ("smt_groups", "llc_groups", "numa_nodes"):
        group = next(g for g in expected[key] if cpu in g)
        if len(group) > 1 and group not in chain:
            chain.append(group)
    everything = list(range(expected["cpus"]))
    if chain[-1:] != [everything]:
        chain.append(everything)
    return chain


# big32 boots in 80 s and has big16's shape with SMT added, llc32 is
# smt4's shape made wide: both left out to keep CI under an hour (their
# topology was checked by hand, docs/results.md).
# make test boots smp2; the other presets are in the full tier.
@pytest.mark.parametrize("preset", [
    p if p == "smp2" else pytest.param(p, marks=pytest.mark.full)
    for p in vm.PRESETS if p not in ("big32", "llc32")])
def test_boot_topology_and_hackbench(test_kernel, preset):
    got, res = run_json(test_kernel, preset,
                        "python3 guest/topology.py && hackbench -p -P -g 1 -l 50")
    exp = vm.PRESETS[preset].expected()
    assert got["cpus"] == list(range(exp["cpus"]))
    assert got["smt_groups"] == exp["smt_groups"]
    assert got["llc_groups"] == exp["llc_groups"]
    assert got["numa_nodes"] == exp["numa_nodes"]
    for cpu in range(exp["cpus"]):
        assert got["domains"][str(cpu)] == domain_chain(exp, cpu), f"cpu{cpu}"
    assert "Time:" in res.output
    assert res.status == 0


def test_planted_warning_fails_the_run(test_kernel):
    # The shape of a kernel WARN (the scanner ignores a bare "WARNING:").
    res = vm.run_past_host_crash(test_kernel, "smp2",
                                 "echo 'WARNING: CPU: 0 PID: 1 at kernel/sched/fair.c:1 "
                                 "planted_by_the_test+0x0/0x10' >/dev/kmsg")
    assert res.status == 0
    assert [s.kind for s in res.splats] == ["WARNING"]
    assert not res.ok


@pytest.mark.full
def test_guest_status_is_passed_through(test_kernel):
    res = vm.run_past_host_crash(test_kernel, "smp2", "exit 7")
    assert res.status == 7 and not res.splats and not res.ok
