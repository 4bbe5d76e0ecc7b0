"""schedsteal.parktiming: summary of park_probe evacuate/hotplug results."""
import json

import pytest

from schedsteal import parktiming as pt

EVAC = {"write_ns": 2_000_000, "unpark_write_ns": 1_000_000,
        "cpus": {"2": {"stay_s": 0.004, "stay_ticks": 1},
                 "3": {"stay_s": 0.010, "stay_ticks": 2}}}
EVAC2 = dict(EVAC, write_ns=4_000_000)
HOT = {"offline_ns": [300_000_000, 500_000_000], "online_ns": [100_000_000]}


def lines():
    return ["vm: booting", json.dumps(EVAC), "noise {", json.dumps(EVAC2), json.dumps(HOT)]


def test_load_sorts_results_and_skips_other_lines():
    evac, hot = pt.load(lines())
    assert evac == [EVAC, EVAC2] and hot == [HOT]


def test_summary_figures():
    s = pt.summarize(*pt.load(lines()))
    assert s["park write (ms)"] == {"n": 2, "median": 3.0, "min": 2.0, "max": 4.0}
    assert s["tasks stay after write (ms)"]["max"] == 10.0
    assert s["tasks stay after write (ticks)"]["median"] == 2
    assert s["hot-unplug (ms)"]["median"] == 400.0


def test_cli_table_json_and_errors(tmp_path, capsys):
    log = tmp_path / "guest.log"
    log.write_text("\n".join(lines()))
    assert pt.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "park write (ms)" in out and "hot-unplug (ms)" in out
    assert pt.main([str(log), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hot-plug back (ms)"]["n"] == 1
    empty = tmp_path / "empty.log"
    empty.write_text("nothing\n")
    assert pt.main([str(empty)]) == 1
    assert pt.main([str(tmp_path / "missing")]) == 2
    assert "parktiming:" in capsys.readouterr().err


AFTER = "... after it returned (ticks)"


def test_a_field_older_probes_lack_is_missing_not_zero(tmp_path, capsys):
    """EVAC and EVAC2 lack stay_ticks_after_write (older probes): its row
    has no runs, "-" in the table and null in --json, never 0.00."""
    log = tmp_path / "guest.log"
    log.write_text("\n".join(lines()))
    assert pt.main([str(log)]) == 0
    [row] = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(AFTER)]
    assert row[len(AFTER):].split() == ["0", "-", "-", "-"]
    assert pt.main([str(log), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc[AFTER] == {"n": 0, "median": None, "min": None, "max": None}
    assert doc["park write (ms)"]["n"] == 2


def test_a_field_some_runs_lack_counts_only_the_runs_that_have_it():
    newer = dict(EVAC, cpus={"2": {"stay_s": 0.004, "stay_ticks": 1,
                                   "stay_ticks_after_write": 3},
                             "3": {"stay_s": 0.010, "stay_ticks": 2,
                                   "stay_ticks_after_write": 1}})
    s = pt.summarize([newer, EVAC2], [])
    assert s[AFTER] == {"n": 1, "median": 3, "min": 3, "max": 3}
    assert s["park write (ms)"]["n"] == 2
    assert s["hot-unplug (ms)"] == {"n": 0, "median": None, "min": None, "max": None}


def bad_cases():
    no_unpark = {k: v for k, v in EVAC.items() if k != "unpark_write_ns"}
    no_stay = dict(EVAC, cpus={"2": {"stay_ticks": 1}})
    nan_stay = dict(EVAC, cpus={"2": {"stay_s": float("nan"), "stay_ticks": 1}})
    return [
        ("binary", b"\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x00" * 8, "not a text log"),
        ("no unpark_write_ns", json.dumps(no_unpark).encode(), "'unpark_write_ns'"),
        ("no stay_s", json.dumps(no_stay).encode(), "'stay_s'"),
        ("no cpus", json.dumps(dict(EVAC, cpus={})).encode(), "'cpus'"),
        ("string write_ns", json.dumps(dict(EVAC, write_ns="2ms")).encode(), "'write_ns'"),
        ("hotplug without online_ns", json.dumps({"offline_ns": [1]}).encode(),
         "'online_ns'"),
        ("NaN stay_s", json.dumps(nan_stay).encode(), "'stay_s'"),
        ("hotplug list of strings",
         json.dumps({"offline_ns": ["1"], "online_ns": []}).encode(), "'offline_ns'"),
    ]


@pytest.mark.parametrize("what, data, message", bad_cases(), ids=[c[0] for c in bad_cases()])
def test_bad_input_is_an_error(tmp_path, capsys, what, data, message):
    log = tmp_path / "guest.log"
    log.write_bytes(b"vm: booting\n" + data + b"\n")
    for extra in ([], ["--json"]):
        assert pt.main([str(log), *extra]) == 2
        out, err = capsys.readouterr()
        assert out == "" and "Traceback" not in err
        assert err.startswith("parktiming: error: ") and message in err


def test_unreadable_log_is_an_error(tmp_path, capsys):
    assert pt.main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("parktiming: error: ")
