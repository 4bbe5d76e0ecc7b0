"""The packaged kernel: `make deb`'s linux-image, extracted with its modules
(scripts/deb-kernel.sh series, nothing installed on the host), boots
Debian's configuration with the series and passes the stealing and
parking smoke checks, all in one boot.

Skipped unless $SCHEDSTEAL_KERNEL_DEB names that vmlinuz: `make test-deb`
builds the packages (hours on the 2-core machine, so not in `make test`),
extracts them and sets it. Debian's config has jump labels, so the guest
runs under single-threaded TCG (vm.py reads config-VERSION beside it)."""
import os
import re

import pytest

from schedsteal import vm

from conftest import boot, json_results
from test_park import PARK, PARKED, check_bad_input, check_evacuation

DEB = os.environ.get("SCHEDSTEAL_KERNEL_DEB")
pytestmark = pytest.mark.skipif(not DEB, reason="no packaged kernel: run make test-deb")

HACKBENCH = "hackbench -P -g 4 -l 200"
# The scheduler features as the kernel set them at boot, before any probe.
FEATURES_AT_BOOT = ("python3 -c \"from schedsteal.guest import kernel; kernel.ensure_debugfs(); "
                    "print('features at boot:', kernel.read(kernel.FEATURES).strip())\"")


def features_at_boot(output: str) -> list[str]:
    m = re.search(r"^features at boot: (.*)$", output, re.M)
    assert m, output[:2000]
    return m[1].split()



def test_packaged_kernel_steals_parks_and_refuses_bad_input():
    assert vm.needs_single_thread_tcg(DEB), f"{DEB}: no config-VERSION beside it?"
    # Stealing's default is the build's choice (configs/deb.config: off).
    assert re.search(r"^# CONFIG_SCHED_STEAL is not set$", vm.kernel_config(DEB), re.M)
    res = boot(DEB, "overcommit8", " && ".join([
        "uname -r",
        FEATURES_AT_BOOT,
        f"python3 guest/sched_probe.py run --feature STEAL --trace -- {HACKBENCH}",
        f"python3 guest/sched_probe.py run --feature NO_STEAL -- {HACKBENCH}",
        f"python3 guest/park_probe.py evacuate --park {PARK}",
        "python3 guest/park_probe.py badinput"]), timeout=1500)
    # The packaged kernel itself: its release is in the vmlinuz's name.
    release = os.path.basename(DEB).removeprefix("vmlinuz-")
    assert "-sched-steal-" in release, DEB
    assert re.search(rf"^{re.escape(release)}$", res.output, re.M), res.output[:2000]
    assert "NO_STEAL" in features_at_boot(res.output)
    on, off, park, bad = json_results(res, 4)

    # Stealing: counted, seen in the trace, and off at run time.
    assert on["status"] == 0 and off["status"] == 0
    assert on["schedstat_version"] == 118
    assert "STEAL" in on["features"] and "NO_STEAL" in off["features"]
    assert on["total"]["steal"] > 0, on["total"]
    assert on["trace_lost"] == 0 and len(on["steals"]) > 0
    assert off["total"]["steal"] == 0 and off["total"]["steal_attempt"] == 0

    # Parking: the CPUs empty, push counters move, unparking refills them.
    check_evacuation(park)
    st = {int(c): v for c, v in park["schedstat_parked"].items()}
    assert sum(st[c]["park_push"] + st[c]["park_evac"] for c in PARKED) > 0

    # Bad writes are refused and change nothing; offlines that fail roll
    # back to the same set (cpuN/hotplug/fail is there in every config).
    check_bad_input(bad, stopped_midway=False)


def test_packaged_kernels_stealing_default_is_overridden_at_boot():
    """Issue 26: the Kconfig default (off in the package) is overridden on
    the command line: sched_steal=1 turns stealing on from the first task."""
    res = boot(DEB, "overcommit8", FEATURES_AT_BOOT, append=["sched_steal=1"])
    features = features_at_boot(res.output)
    assert "STEAL" in features and "NO_STEAL" not in features, features
