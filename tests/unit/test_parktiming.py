"""schedsteal.parktiming: summary of park_probe evacuate/hotplug results."""
import json

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
