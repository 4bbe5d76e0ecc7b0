"""Reports on real recordings taken in guests of the series' kernels
(fixtures/guest/README.md says how): the parsers and the report must
read what the kernel really writes, not only the hand-made fixtures.
A missing fixture fails; nothing here skips."""
import json
from pathlib import Path

import pytest

from schedsteal import abbench, schedstat

GUEST = Path(__file__).parent / "fixtures" / "guest"
PARK_FIELDS = ("park_push", "park_evac", "park_pinned")
STEAL_FIELDS = ("steal_attempt", "steal", "steal_fail", "find_time", "recent_used_hit")


def load(name):
    return json.loads((GUEST / name).read_text())


@pytest.mark.parametrize("version", [116, 117, 118])
def test_schedstat_report_on_a_real_recording(capsys, version):
    rc = schedstat.main(["report", str(GUEST / f"recording_v{version}.json"), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["version"] == version
    fields = rep["cpu_fields"]
    for f in STEAL_FIELDS:
        assert f in fields, f
    # Parking's counters came with v117, stealing beyond the LLC's with v118.
    assert all((f in fields) == (version >= 117) for f in PARK_FIELDS)
    assert all((f in fields) == (version >= 118) for f in schedstat.FAR_STEAL_CPU_FIELDS)
    # The workload ran: the counters moved.
    assert fields["sched_count"]["total"] > 0 and fields["ttwu_count"]["total"] > 0
    assert fields["find_time"]["total"] > 0
    assert rep["summary"]["time"] > 0 and 0 < rep["summary"]["busy_pct"] <= 100
    assert rep["warnings"] == []


def schedstat_means(capsys, name):
    """A and B's schedstat means in abbench's report on a real 2+2-run
    results file, after checking the ABBA order and a clean report."""
    doc = load(name)
    assert [r["setting"] for r in doc["runs"]] == ["A", "B", "B", "A"]
    rc = abbench.main(["report", str(GUEST / name), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["notes"] == []
    (param,) = rep["params"]
    return param["A"]["schedstat"], param["B"]["schedstat"]


@pytest.mark.parametrize("version", [116, 117])
def test_abbench_report_on_a_real_run(capsys, version):
    """NO_STEAL vs STEAL, 2+2 runs in ABBA order, schedstats on: the
    report gives per-setting schedstat means, and only STEAL steals."""
    a, b = schedstat_means(capsys, f"results_v{version}.json")
    assert a["n"] == b["n"] == 2
    assert a["steal"] == 0 and b["steal"] > 0
    assert a["sched"] > 0 and b["sched"] > 0


def test_abbench_report_on_a_real_run_beyond_the_llc(capsys):
    """llc2x4, STEAL (LLC only) vs STEAL + STEAL_NODE, 2+2 runs: only B
    steals from the other LLC, and what it steals there is in steal."""
    a, b = schedstat_means(capsys, "results_v118.json")
    assert a["steal"] > 0 and b["steal"] > 0
    assert a["steal_far"] == 0
    assert 0 < b["steal_far"] <= b["steal"]
