"""The lab's validation (docs/lab.md): checks of the instrument, not of the
kernel. Its ratios are what the lab claims to measure, so they are
asserted: steal time in the guest against the run delay the host keeps
for each vCPU thread, and the parallel clock's time for N loops on N
vCPUs against one loop on one, and that a change of the memory map
sends no access elsewhere. Four boots (schedsteal.labcheck, which
`schedsteal-lab validate` runs too), all on the lab QEMU (`make qemu`;
$SCHEDSTEAL_QEMU_LAB names a binary built elsewhere).

The steal checks need a host that runs nothing else (CI runs tests one
at a time): on a busy host the quiet window is not quiet.
"""
import subprocess

import pytest

from schedsteal import labcheck

pytestmark = pytest.mark.full

# The host's measure and the guest's must agree this closely, in points
# of the window (issue 24).
STEAL_AGREEMENT = 5.0
# With nothing contending, the guest must not invent steal: within this
# many points of what the host measured for the same thread and window.
QUIET_AGREEMENT = 1.0
# The quiet window is quiet: QEMU's own threads and the host's background
# take a few points (1.3-3.1% measured on 2 cores); a hog takes 70.
QUIET_CEILING = 10.0
# The parallel clock: N loops on N vCPUs against one loop, N loops on one
# vCPU against N loops' worth, and hackbench's spread: within 3%.
CLOCK_TOLERANCE = 0.03


def assert_agree(rows):
    for r in rows:
        assert abs(r["diff"]) <= STEAL_AGREEMENT, rows


def test_overcommit8_guest_steal_matches_each_vcpu_threads_run_delay(test_kernel, lab_qemu):
    """8 busy vCPUs on the 2 host cores: each thread waits about 3/4 of
    the time, and the guest's /proc/stat says so, vCPU by vCPU."""
    rows = labcheck.check_steal_overcommit(test_kernel, lab_qemu)["busy"]
    assert len(rows) == 8
    assert_agree(rows)
    # The overcommit is there to be seen: 8 threads want 8 CPUs of 2.
    assert min(r["host"] for r in rows) > 50.0, rows


def test_smp2_steal_is_quiet_then_follows_a_host_hog(test_kernel, lab_qemu):
    """smp2: on a quiet host the guest sees only the little steal the
    host measured (no phantom steal); then, vCPU k's thread pinned to
    host CPU k and a busy loop pinned to host CPU 0, vCPU 0 waits half
    the time or more and the guest sees it, vCPU 1 far less.

    The quiet window's level is the host's, not the instrument's (CI
    once measured 3.0% on vCPU 1, guest and host within 0.12 point), so
    it is bounded loosely and the agreement tightly."""
    got = labcheck.check_steal_smp2(test_kernel, lab_qemu)
    assert_agree(got["quiet"])
    assert_agree(got["hog"])
    assert all(abs(r["diff"]) <= QUIET_AGREEMENT for r in got["quiet"]), got["quiet"]
    assert all(r["guest"] < QUIET_CEILING for r in got["quiet"]), got["quiet"]
    vcpu0, vcpu1 = got["hog"]
    assert vcpu0["guest"] > 40.0, got["hog"]
    assert vcpu0["guest"] - vcpu1["guest"] > 30.0, got["hog"]


def test_memory_map_changes_send_no_access_of_another_vcpu_elsewhere(test_kernel, lab_qemu):
    """One vCPU switches a PCI device's memory decoding off and on, the 7
    others read a fixed byte of another device's BAR: every read returns
    it. QEMU 7.2 changed each vCPU's view of the memory map from the
    thread that changed the map, while the vCPU held TLB entries filled
    from the old one: 6 to 17 of about 25 million reads in 20 s came back
    wrong (stock and lab binary alike; qemu/patches/0005), and one such
    access crashed a CI boot."""
    got = labcheck.check_memory_map(test_kernel, lab_qemu)
    assert got["cpus"] == 8 and got["switches"] > 100 and got["reads"] > 1_000_000, got
    assert got["misread"] == 0, got


@pytest.fixture(scope="module")
def parallel_clock(test_kernel, lab_qemu, tmp_path_factory):
    """llc32 under the parallel clock: the loops on 1..32 vCPUs, the same
    loops all on CPU 1, and hackbench repeated."""
    return labcheck.check_clock(test_kernel, lab_qemu, str(tmp_path_factory.mktemp("clock")))


def test_parallel_clock_n_loops_on_n_vcpus_take_one_loops_time(parallel_clock):
    rows = parallel_clock["loops"]
    assert [r["n"] for r in rows] == list(labcheck.LOOP_SERIES)
    for r in rows:
        assert abs(r["parallel_ratio"] - 1) <= CLOCK_TOLERANCE, rows


def test_parallel_clock_n_loops_on_one_vcpu_take_n_times_as_long(parallel_clock):
    for r in parallel_clock["loops"]:
        assert abs(r["pinned_ratio"] - 1) <= CLOCK_TOLERANCE, parallel_clock["loops"]


def test_parallel_clock_repeats_hackbench(parallel_clock):
    hb = parallel_clock["hackbench"]
    assert hb["lab"]["clock"] == "parallel"
    assert len(hb["values"]) == 8
    assert hb["cv_pct"] <= 100 * CLOCK_TOLERANCE, hb["values"]


@pytest.mark.parametrize("icount,message", [
    # Without a shift, icount is off and parallel=on was silently dropped.
    ("parallel=on", "parallel=on needs a fixed shift"),
    ("quantum=4000", "quantum needs parallel=on"),
    # The quantum is decimal nanoseconds: 0x10 was read as 16.
    ("shift=0,parallel=on,quantum=0x10", "invalid quantum"),
    ("shift=0,parallel=on,quantum=0", "invalid quantum"),
    ("shift=0,parallel=on,quantum=-18446744073709551615", "invalid quantum"),
    ("shift=auto,parallel=on", "parallel=on needs a fixed shift"),
])
def test_lab_qemu_refuses_bad_parallel_clock_options(lab_qemu, icount, message):
    """Bad -icount options for the parallel clock: QEMU exits at once with
    a message naming the problem (before the fix the first and third
    started a machine that ran without the clock asked for, or with
    another quantum)."""
    proc = subprocess.run([lab_qemu, "-machine", "none", "-nodefaults", "-display", "none",
                           "-accel", "tcg", "-icount", icount],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and message in proc.stderr, (proc.returncode, proc.stderr)
