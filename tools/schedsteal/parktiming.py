"""Summarize how fast parking takes effect, against CPU hotplug.

Reads the JSON lines that ``guest/park_probe.py evacuate`` and
``guest/park_probe.py hotplug`` print (a guest log holding both is fine;
other lines are skipped) and prints one table::

    python3 -m schedsteal.parktiming out/park-timing/guest.log
    python3 -m schedsteal.parktiming out/park-timing/guest.log --json

Rows: the sysfs write that parks the CPUs and the one that unparks them
(``write_ns``, ``unpark_write_ns``), how long workload tasks stayed on the
parked CPUs after the write began (the largest ``stay_s`` over the CPUs of
each run, and the same in that CPU's ticks, also counted from when the
write returned), and the time to take the same CPUs
offline and back online. Columns: runs, median, min, max, in ms (ticks
for the tick row).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys


def load(lines):
    """(evacuate results, hotplug results) from an iterable of lines."""
    evac, hot = [], []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "cpus" in obj and "write_ns" in obj:
            evac.append(obj)
        elif "offline_ns" in obj:
            hot.append(obj)
    return evac, hot


def summarize(evac, hot):
    """{row name: {n, median, min, max}} (ms, or ticks for stay_ticks)."""
    rows = {
        "park write (ms)": [e["write_ns"] / 1e6 for e in evac],
        "unpark write (ms)": [e["unpark_write_ns"] / 1e6 for e in evac],
        "tasks stay after write (ms)": [
            max(c["stay_s"] for c in e["cpus"].values()) * 1e3 for e in evac],
        "tasks stay after write (ticks)": [
            max(c["stay_ticks"] for c in e["cpus"].values()) for e in evac],
        "... after it returned (ticks)": [
            max(c.get("stay_ticks_after_write", 0) for c in e["cpus"].values())
            for e in evac],
        "hot-unplug (ms)": [ns / 1e6 for h in hot for ns in h["offline_ns"]],
        "hot-plug back (ms)": [ns / 1e6 for h in hot for ns in h["online_ns"]],
    }
    return {name: ({"n": len(v), "median": statistics.median(v), "min": min(v),
                    "max": max(v)} if v else {"n": 0})
            for name, v in rows.items()}


def format_table(summary):
    out = [f"{'':32} {'runs':>4} {'median':>9} {'min':>9} {'max':>9}"]
    for name, s in summary.items():
        if not s["n"]:
            out.append(f"{name:32} {0:>4} {'-':>9} {'-':>9} {'-':>9}")
            continue
        out.append(f"{name:32} {s['n']:>4} {s['median']:>9.2f} {s['min']:>9.2f} "
                   f"{s['max']:>9.2f}")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(prog="parktiming", description=__doc__.split("\n\n")[0])
    p.add_argument("log", help="guest log with park_probe JSON lines")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    try:
        with open(args.log) as f:
            evac, hot = load(f)
    except OSError as e:
        print(f"parktiming: {e}", file=sys.stderr)
        return 2
    if not evac and not hot:
        print(f"parktiming: no park_probe results in {args.log}", file=sys.stderr)
        return 1
    summary = summarize(evac, hot)
    print(json.dumps(summary, indent=2) if args.json else format_table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
