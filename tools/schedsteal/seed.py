"""The design's tables beside ours (issue 27): ``schedsteal-seed``.

The design document's case for stealing (the cover letter of "steal tasks
to improve CPU utilization", v4, 2018) is a set of hackbench tables taken
on real machines, and the reply measured on an arm64 board. ``make
bench-seed`` (scripts/bench-seed.sh) runs the same comparison on presets of
the same shapes under the lab's parallel clock; this command reads its
results directories (``out/seed-SHAPE``: abbench results files) and prints,
per shape, the design's speed-up beside ours.

Sign convention: the design's: ``%speedup = 100 * (time A / time B - 1)``
with A the left-hand setting (NO_STEAL in the design), B the right-hand
one; + = B faster. (abbench's %chg, ``(A - B) / A``, has the same sign and
a smaller size.) p is Welch's t-test over the runs, paired the paired
t-test over ABBA rounds. %busy, %find and steal are schedstat's (as in the
design's own tables); traced rounds add %wasted_llc, moves and moves undone
within 10 ms (schedtrace), and the break-even cost per move:

    break-even = (time A - time B) * CPUs / (moves B - moves A)

the cost one move (a task started on another CPU: its caches refilled) may
have before the time gained vanishes, when the moves' cost spreads evenly
over the CPUs; none (``-``) when B gained nothing or moved no more. The parallel clock has no caches: this is what real
hardware's moves may cost at most for the gain to survive.

Usage::

    schedsteal-seed out/seed-llc20 out/seed-numa40 out/seed-llc2x4
    schedsteal-seed out/seed-* --json
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys

from . import abbench
from .cli import ToolParser, run_subcommand
from .table import format_table

FORMAT = "schedsteal-seed"
FORMAT_VERSION = 1


def _speedups(base: list[float], new: list[float]) -> dict[int, float]:
    return {g: round(100 * (b / n - 1), 1) for g, b, n in
            zip((1, 2, 3, 4, 8), base, new)}


# The design's figures: hackbench <g> process 100000 (sockets, 40 tasks a
# group), 10 runs, NO_STEAL -> STEAL, its %speedup as printed. The arm64
# board: 12 runs of hackbench -g N -P -l 2000, times as printed, the
# speed-up computed here the same way (negative: STEAL slower).
DESIGN = {
    "llc20": {"machine": "X6-2, 1 socket x 10 cores x 2 threads (20 CPUs)",
              "speedup": {1: 35.6, 2: 20.7, 3: 15.1, 4: 11.8, 8: 7.3}},
    "llc44": {"machine": "X6-2, 1 socket x 22 cores x 2 threads (44 CPUs)",
              "speedup": {1: -0.3, 2: 33.2, 3: 25.9, 4: 18.3, 8: 9.3, 16: 4.8}},
    "numa40": {"machine": "X6-2, 2 sockets x 10 cores x 2 threads (40 CPUs)",
               "speedup": {1: 10.0, 2: 26.2, 3: 21.4, 4: 14.4, 8: 7.0}},
    "numa88": {"machine": "X6-2, 2 sockets x 22 cores x 2 threads (88 CPUs)",
               "speedup": {1: -0.3, 2: -18.4, 3: 8.1, 4: 11.7, 8: 3.3, 16: 4.9}},
    "llc2x4": {"machine": "hikey arm64, 2 clusters of 4 CPUs (8 CPUs)",
               "speedup": _speedups([1.217, 1.973, 2.855, 3.932, 7.674],
                                    [1.396, 2.699, 3.617, 4.498, 7.721])},
}
# The pair the design measured: its figures go beside ours only there.
DESIGN_PAIR = ("none", "steal", "hackbench-process-sockets")


class SeedError(Exception):
    pass


def shape_of(path: str) -> str:
    """The shape a results directory holds: out/seed-SHAPE."""
    name = os.path.basename(os.path.normpath(path))
    if not name.startswith("seed-") or len(name) == 5:
        raise SeedError(f"{path}: not a bench-seed results directory (seed-SHAPE)")
    return name[5:]


def _fmt(x, spec=".1f", none="-"):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return none
    return format(x, spec)


def _ab(pair, spec=".1f") -> str:
    """An A -> B cell."""
    return " -> ".join(_fmt(x, spec) for x in pair)


def _cpus(doc: dict) -> int | None:
    topo = doc.get("topology") or {}
    cpus = topo.get("cpus")
    if isinstance(cpus, list):
        return len(cpus)
    return cpus if isinstance(cpus, int) else None


def pair_rows(path: str, shape: str) -> list[dict]:
    """One row per param of one abbench results file."""
    doc = abbench.load_results(path)
    if doc.get("higher_is_better"):
        raise SeedError(f"{path}: not a time (lower is better) benchmark")
    rep = abbench.analyze(doc, base_dir=os.path.dirname(os.path.abspath(path)))
    names = {s: (doc["settings"].get(s) or {}).get("name", s) for s in ("A", "B")}
    design = DESIGN.get(shape, {}).get("speedup", {})
    is_design_pair = (names["A"], names["B"], doc["workload"]) == DESIGN_PAIR
    cpus = _cpus(doc)
    rows = []
    for e in rep["params"]:
        a, b = e["A"], e["B"]
        if not a["n"] and not b["n"]:
            continue    # a group count the run never reached (cut short)
        ta, tb = a.get("amean"), b.get("amean")
        row = {
            "shape": shape, "file": os.path.basename(path),
            "a": names["A"], "b": names["B"], "workload": doc["workload"],
            "groups": e["param"], "n": [a["n"], b["n"]],
            "time": [ta, tb],
            "speedup": (100 * (ta / tb - 1)) if ta and tb else None,
            "design": design.get(e["param"]) if is_design_pair else None,
            "p": b.get("p_value"), "p_paired": e["paired"].get("p_value"),
            "cpus": cpus, "lab": doc.get("lab"),
        }
        for key in ("busy_pct", "find_pct", "steal"):
            row[key] = [(c.get("schedstat") or {}).get(key) for c in (a, b)]
        traces = [c.get("trace") for c in (a, b)]
        if all(traces):
            for key in ("wasted_llc_pct", "migrations", "cross_llc_moves",
                        "cross_node_moves", "moved_back"):
                row[key] = [t.get(key) for t in traces]
            extra = traces[1]["migrations"] - traces[0]["migrations"]
            gain = (ta - tb) if ta and tb else None
            # Only a gain can vanish: no figure when B was not faster or
            # did not move more.
            row["break_even_us"] = (gain * cpus / extra * 1e6
                                    if gain is not None and gain > 0 and cpus
                                    and extra > 0 else None)
        rows.append(row)
    return rows


def collect(dirs: list[str]) -> list[dict]:
    rows = []
    for d in dirs:
        if not os.path.isdir(d):
            raise SeedError(f"{d}: no such directory")
        shape = shape_of(d)
        # Not the boot's lab.json nor abbench report's .report.json.
        files = sorted(f for f in glob.glob(os.path.join(d, "*.json"))
                       if not f.endswith(".report.json")
                       and os.path.basename(f) != "lab.json")
        if not files:
            raise SeedError(f"{d}: no abbench results files")
        for f in files:
            rows += pair_rows(f, shape)
    return rows


def _pair(r):
    return f"{r['a']} -> {r['b']}"


def format_rows(rows: list[dict]) -> str:
    out = ["Sign: %speedup = 100 * (time A / time B - 1), + = B (right) faster; "
           "design = the design's figure for the same shape and g (NO_STEAL -> "
           "STEAL, sockets); p = Welch, paired = over ABBA rounds; busy, find, "
           "steal: schedstat, A -> B."]
    by_shape: dict[str, list[dict]] = {}
    for r in rows:
        by_shape.setdefault(r["shape"], []).append(r)
    for shape, rs in by_shape.items():
        machine = DESIGN.get(shape, {}).get("machine", "no design figures")
        lab = rs[0].get("lab") or {}
        out += ["", f"{shape} ({rs[0]['cpus']} vCPUs; design: {machine}); "
                    f"clock: {lab.get('clock', '?')}"]
        table = [["pair", "workload", "g", "n", "time A", "time B", "%speedup",
                  "design", "p", "paired", "%busy", "%find", "steal"]]
        # A pair's cells in group order, also when two boots ran them
        # (out/seed-SHAPE keeps the files of several: bench-seed's PAIRS).
        for r in sorted(rs, key=lambda r: (_pair(r), r["workload"], r["groups"])):
            if "wasted_llc_pct" in r:
                continue
            table.append([_pair(r), r["workload"].replace("hackbench-process-", ""),
                          r["groups"], f"{r['n'][0]}+{r['n'][1]}",
                          _fmt(r["time"][0], ".4f"), _fmt(r["time"][1], ".4f"),
                          _fmt(r["speedup"], "+.1f"), _fmt(r["design"], "+.1f"),
                          _fmt(r["p"], ".3f"), _fmt(r["p_paired"], ".3f"),
                          _ab(r["busy_pct"]),
                          _ab(r["find_pct"], ".2f"),
                          _ab(r["steal"], ".0f")])
        if len(table) > 1:
            out += format_table(table, left=(0, 1), indent="  ")
        traced = [r for r in rs if "wasted_llc_pct" in r]
        if traced:
            out += ["", "  traced rounds (one run a side): moves = migrations per run, "
                        "x_llc across LLCs, back = undone within 10 ms; break-even = "
                        "cost per move at which the gain vanishes"]
            table = [["pair", "workload", "g", "%speedup", "%wasted_llc", "moves",
                      "x_llc", "x_node", "back", "break-even"]]
            for r in traced:
                table.append([_pair(r), r["workload"].replace("hackbench-process-", ""),
                              r["groups"], _fmt(r["speedup"], "+.1f"),
                              _ab(r["wasted_llc_pct"]),
                              _ab(r["migrations"], ".0f"),
                              _ab(r["cross_llc_moves"], ".0f"),
                              _ab(r["cross_node_moves"], ".0f"),
                              _ab(r["moved_back"], ".0f"),
                              _fmt(r.get("break_even_us"), ".1f") + (
                                  " us" if r.get("break_even_us") is not None else "")])
            out += format_table(table, left=(0, 1), indent="  ")
    return "\n".join(out) + "\n"


def cmd_report(args: argparse.Namespace) -> int:
    rows = collect(args.dirs)
    if args.json:
        json.dump({"format": FORMAT, "format_version": FORMAT_VERSION,
                   "design": DESIGN, "rows": rows}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_rows(rows))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = ToolParser(prog="schedsteal-seed", description=__doc__.split("\n\n")[0],
                   epilog="Sign convention and columns: see the module's documentation "
                          "(python3 -m pydoc schedsteal.seed).")
    p.add_argument("dirs", nargs="+", metavar="DIR",
                   help="bench-seed results directories (out/seed-SHAPE)")
    p.add_argument("--json", action="store_true", help="the rows as JSON")
    p.set_defaults(func=cmd_report)
    return p


def main(argv=None) -> int:
    return run_subcommand(build_parser(), argv, (SeedError, abbench.AbbenchError))


if __name__ == "__main__":
    sys.exit(main())
