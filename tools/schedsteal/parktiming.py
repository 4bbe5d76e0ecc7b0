"""Summarize how fast parking takes effect, against CPU hotplug.

Reads the JSON lines that ``guest/park_probe.py evacuate`` and
``guest/park_probe.py hotplug`` print (``vm.json_objects``) (a guest log holding both is fine;
other lines are skipped) and prints one table::

    python3 -m schedsteal.parktiming out/park-timing/guest.log
    python3 -m schedsteal.parktiming out/park-timing/guest.log --json

Rows: the sysfs write that parks the CPUs and the one that unparks them
(``write_ns``, ``unpark_write_ns``), how long workload tasks stayed on the
parked CPUs after the write began (the largest ``stay_s`` over the CPUs of
each run, and the same in that CPU's ticks, also counted from when the
write returned), and the time to take the same CPUs
offline and back online. Columns: runs, median, min, max, in ms (ticks
for the tick row). A row counts the runs that have its figure; with none
(older probes lack ``stay_ticks_after_write``) it reads "-", null in
``--json``.

Exit status: 0, 1 when the log holds no results, 2 (``parktiming: error:
...``) when it cannot be read, is not text, or a result lacks a field.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys

from .table import format_table
from .vm import json_objects


class ParkTimingError(Exception):
    """Input that cannot be summarized: ``parktiming: error: ...``, exit 2."""


def _is_number(value):
    # json.loads takes NaN and Infinity; neither is a timing.
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _number(obj, key, where):
    if not _is_number(obj.get(key)):
        raise ParkTimingError(f"{where}: {key!r} missing or not a finite number")


def _check_evac(obj, where):
    _number(obj, "write_ns", where)
    _number(obj, "unpark_write_ns", where)
    cpus = obj.get("cpus")
    if not isinstance(cpus, dict) or not cpus:
        raise ParkTimingError(f"{where}: 'cpus' missing or empty")
    for cpu, c in cpus.items():
        if not isinstance(c, dict):
            raise ParkTimingError(f"{where}: 'cpus' entry {cpu!r} is not an object")
        _number(c, "stay_s", f"{where}: cpu {cpu}")
        _number(c, "stay_ticks", f"{where}: cpu {cpu}")
        if "stay_ticks_after_write" in c:   # older probes lack it
            _number(c, "stay_ticks_after_write", f"{where}: cpu {cpu}")


def _check_hot(obj, where):
    for key in ("offline_ns", "online_ns"):
        values = obj.get(key)
        if not isinstance(values, list) or not all(_is_number(v) for v in values):
            raise ParkTimingError(f"{where}: {key!r} missing or not a list of "
                                  "finite numbers")


def load(lines, source="log"):
    """(evacuate results, hotplug results) from an iterable of lines.

    Lines that are not JSON objects are skipped (the rest of the guest log);
    an evacuate or hotplug result with a missing or mistyped field raises
    ParkTimingError naming the line."""
    evac, hot = [], []
    for lineno, obj in json_objects(lines):
        where = f"{source}:{lineno}"
        # write_ns is only in `evacuate` results, *_ns lists only in `hotplug`.
        if "write_ns" in obj:
            _check_evac(obj, where)
            evac.append(obj)
        elif "offline_ns" in obj or "online_ns" in obj:
            _check_hot(obj, where)
            hot.append(obj)
    return evac, hot


def read_log(path):
    """The log's lines; ParkTimingError when unreadable or not text."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ParkTimingError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        # vm.py writes guest logs decoded with errors="replace": always UTF-8.
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise ParkTimingError(f"{path}: not a text log (byte {e.start} is not "
                              "UTF-8)") from None


def _worst(e, key):
    """The largest `key` over a run's CPUs; None when a CPU lacks it (a
    field older probes do not print): that run has no figure."""
    values = [c.get(key) for c in e["cpus"].values()]
    return None if None in values else max(values)


def summarize(evac, hot):
    """{row name: {n, median, min, max}} (ms, or ticks for stay_ticks);
    n counts the runs with the figure, and with none the rest are None."""
    rows = {
        "park write (ms)": [e["write_ns"] / 1e6 for e in evac],
        "unpark write (ms)": [e["unpark_write_ns"] / 1e6 for e in evac],
        "tasks stay after write (ms)": [
            max(c["stay_s"] for c in e["cpus"].values()) * 1e3 for e in evac],
        "tasks stay after write (ticks)": [
            max(c["stay_ticks"] for c in e["cpus"].values()) for e in evac],
        "... after it returned (ticks)": [
            v for e in evac if (v := _worst(e, "stay_ticks_after_write")) is not None],
        "hot-unplug (ms)": [ns / 1e6 for h in hot for ns in h["offline_ns"]],
        "hot-plug back (ms)": [ns / 1e6 for h in hot for ns in h["online_ns"]],
    }
    return {name: ({"n": len(v), "median": statistics.median(v), "min": min(v),
                    "max": max(v)} if v else {"n": 0, "median": None, "min": None,
                                              "max": None})
            for name, v in rows.items()}


def render(summary):
    rows = [("", "runs", "median", "min", "max")]
    for name, s in summary.items():
        rows.append((name, s["n"]) + tuple(f"{s[k]:.2f}" if s["n"] else "-"
                                           for k in ("median", "min", "max")))
    return "\n".join(format_table(rows))


def main(argv=None):
    p = argparse.ArgumentParser(prog="parktiming", description=__doc__.split("\n\n")[0])
    p.add_argument("log", help="guest log with park_probe JSON lines")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    try:
        evac, hot = load(read_log(args.log), args.log)
    except ParkTimingError as e:
        print(f"parktiming: error: {e}", file=sys.stderr)
        return 2
    if not evac and not hot:
        print(f"parktiming: no park_probe results in {args.log}", file=sys.stderr)
        return 1
    summary = summarize(evac, hot)
    print(json.dumps(summary, indent=2) if args.json else render(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
