"""The KCSAN kernel under the storm (`make test-kcsan`; not in CI: one
boot of the storm under KCSAN and TCG is too slow for CI's budget).

guest/stress.sh rewrites the parked set in a loop, toggles STEAL and
SIS_SPARSE at every hotplug step, unplugs and replugs CPUs, throttles a
cgroup and runs two SCHED_DEADLINE tasks, with hackbench throughout. The
scheduler is instrumented (kernel/sched/Makefile turns KCSAN off there;
build-kernel.sh turns it back on for fair.o, build_policy.o and
build_utility.o). The kernel log's KCSAN reports are sorted by
tools/schedsteal/kcsan.py by source line: a report with an access on a
line the series wrote (git blame in the tree the kernel was built from)
fails the test; the base kernel's own reports are printed and kept in
$CACHE/kcsan/ (dmesg.txt, reports.txt) for the record, not failed on.
"""
import re
from pathlib import Path

import pytest

from conftest import boot_raw
from schedsteal import kcsan, vm

pytestmark = pytest.mark.kcsan

STORM = "guest/stress.sh 3 park"


@pytest.fixture(scope="module")
def kcsan_run(kcsan_kernel):
    # A bigger log buffer: every report is some 30 lines.
    res = boot_raw(kcsan_kernel, "smt4", STORM, timeout=2400, append=["log_buf_len=16M"])
    out = vm.cache_dir() / "kcsan"
    out.mkdir(parents=True, exist_ok=True)
    (out / "dmesg.txt").write_text(res.dmesg)
    # By source line: the vmlinux beside the bzImage, the tree it came from.
    lines = kcsan.LineOwner(Path(kcsan_kernel).parents[3] / "vmlinux", vm.cache_dir() / "linux")
    rows = kcsan.classify(kcsan.parse_reports(res.dmesg), kcsan.series_functions(), lines=lines)
    (out / "reports.txt").write_text(kcsan.render(rows) + "\n")
    print(kcsan.render(rows))
    return res, rows


def test_kcsan_storm_runs_to_the_end(kcsan_run):
    res, _ = kcsan_run
    assert not res.timed_out, res.output[-3000:]
    assert not res.died, vm.tail(res.console)
    assert res.status == 0, res.output[-3000:]
    assert "root: 6 runs ok" in res.output
    assert "hotplug: 3 rounds over 3 CPUs ok" in res.output
    assert "deadline: 2 tasks ok" in res.output
    # KCSAN was on and works: its boot self-test passed.
    assert re.search(r"kcsan: selftest: (\d+)/\1 tests passed", res.dmesg), res.dmesg[:3000]


def test_no_other_report_than_kcsan(kcsan_run):
    res, _ = kcsan_run
    others = [s for s in res.splats if "KCSAN" not in s.line]
    assert not others, vm.splat_context(res.dmesg, others)


def test_no_kcsan_report_in_the_series(kcsan_run):
    _, rows = kcsan_run
    assert not [r for r in rows if r["owner"] == "series"], kcsan.render(rows)
