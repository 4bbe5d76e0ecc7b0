"""The steal governor on real steal time (issue 29): boot, summary, plot.

The ``schedsteal-governor`` command. ``run`` boots overcommit8 on the lab
QEMU (multi-threaded TCG: 8 vCPUs on the host's cores, steal time from
each vCPU thread's run delay) with the governor of park/0010 built in,
and runs guest/governor_probe.py: a quiet guest, a busy loop per vCPU,
QEMU confined to one host core and given the cores back, the loops
stopped, then CPUs parked by hand (which it must leave alone). It prints
one row per phase; ``report`` reads a saved result.

    schedsteal-governor run --kernel bzImage [--qemu PATH] [--preset overcommit8|numa2]
        [--interval-ms 200] [--hackbench GROUPS,LOOPS | --stress-ng WORKERS[,SECONDS]]
        [--hold-s S] [--no-static]
        [--out DIR] [--json] [--plot FILE.png]
    schedsteal-governor report RESULT.json [--json] [--plot FILE.png]
    schedsteal-governor compare RESULT.json RESULT.json... [--json]

Columns (one row per phase, over the samples after the phase reached
its state, or all of it when it never did): reached (s after the phase
began, "-" never or no state to reach), pref (preferred CPUs: median,
min-max), changes/s (changes of the count per second), steal% (the
guest's steal time as a share of its online CPUs' time, the governor's
own ratio), rounds/s (the busy loops' rounds per second, all loops: the
workload's throughput; higher is better). No A/B: no sign convention.

With ``--stress-ng WORKERS`` (no run length) the guest runs one stress-ng
at a time and interrupts it at each phase's start and when the phase
reaches its state; a phase's rounds/s is then the bogo-ops over the real
time that stress-ng itself reported for those windows (bogo-ops/s, no
whole-run rounding). ``--stress-ng WORKERS,SECONDS`` runs SECONDS-long
runs back to back and counts the finished runs' bogo-ops (whole runs:
a window's rate is off by up to one run).

Before the governor's busy phase, `run` holds static sets (the first K
CPUs preferred, the governor off: static8, static4, ...) with the same
loops; the line under the table compares the governor's converged
throughput with the best of them (+ = the governor's higher).

``compare`` reads several runs (boots) and sets the governor's converged
throughput beside each static set's, boot by boot: per set, the boots,
the mean and standard deviation of rounds/s, and the governor against
the set (%chg of the means, + = the governor's higher; p of a paired
t-test over the boots). The best static set is the one with the highest
mean over the boots; the last lines say how far the governor is from it,
and from the best set of each boot (a boot's maximum, which favours the
static sets: noise lifts the maximum of four).

Both compare, and `run`/`report` under their table, also give what the
sizes the governor held cost, apart from the noise of a 20-30 s window:
the share of the converged busy phase it held each preferred count, and
the throughput the static sets measured at those counts, weighted by
those shares, against the best set (%, + = the governor's higher, at
most 0; compare pools the boots' time and uses the sets' means). It
covers only the counts that have a static set, and says how much of the
time that is; it leaves out what a change of the set costs beyond the
rate of the size changed to (tasks moving, caches).

The plot: each CPU's steal (% of that CPU's time), the preferred count,
and the throughput, against time, the phases marked.

Exit status: 0 the run (or the file) gave its table, 1 the guest
failed, 2 bad usage.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile

from . import lab, labcheck, plots, stats, vm
from .cli import ToolParser
from .guest.governor_probe import PARAMS
from .guest.settings import AbbenchError
from .table import format_table

PRESET = "overcommit8"
# Per preset, the states the probe's phases wait for (governor_probe.py):
# overcommit8 has one CPU per core, so the set can shrink to the 2 (busy)
# and the 1 (confined) host cores behind it; numa2's cores have two
# threads, the first core is never parked: 2 CPUs at least.
TARGETS = {"overcommit8": "--busy-to 3 --confine-to 1 --restore-to 3 --others 5-7",
           "numa2": "--busy-to 2 --confine-to 2 --restore-to 4 --others 6-7"}
# The static sets `run` compares the governor with (preferred-CPU counts).
STATIC = {"overcommit8": "8,4,3,2", "numa2": "8,4,2"}


class GovernorError(Exception):
    pass


def run(kernel: str, qemu: str, interval_ms: int = 200, keep: str | None = None,
        preset: str = PRESET, append: list[str] | None = None,
        static: str | None = None, hackbench: str | None = None,
        hold_s: float | None = None, stress_ng: str | None = None) -> tuple[dict, vm.RunResult]:
    """Boot and probe; the probe's result (governor_probe.py run), with
    the preset's name added, and the run. The probe switches the governor
    on (vm.py boots every guest with it off). static: the static sets to
    hold first ("8,4,3,2"), or None for none."""
    monitor = lab.StealMonitor({"confine": lab.ConfineQemu({0})})
    cmd = f"python3 guest/governor_probe.py run --workdir /tmp {TARGETS[preset]}"
    if static:
        cmd += f" --static {static}"
    if hackbench:
        cmd += f" --hackbench {hackbench}"
    if stress_ng:
        cmd += f" --stress-ng {stress_ng}"
    if hold_s:
        cmd += f" --hold-s {hold_s:g}"
    res = labcheck.lab_boot(kernel, qemu, preset, cmd, monitor=monitor, keep=keep,
                            append=[f"steal_governor.interval_ms={interval_ms}",
                                    *(append or [])])
    result = labcheck.probes(res, 1)[0]
    result["preset"] = preset
    return result, res


def samples(result: dict) -> list[dict]:
    """The probe's samples as dicts: t (s), phase, preferred (count), cpu0
    (CPU 0 preferred), steal (ticks per CPU so far), rounds (all loops)."""
    keys = ("t", "phase", "preferred", "cpu0", "steal", "rounds")
    return [dict(zip(keys, s)) for s in result["samples"]]


def _rate(a: dict, b: dict, hz: int, ncpu: int) -> tuple[float, float]:
    dt = b["t"] - a["t"]
    if dt <= 0:
        return 0.0, 0.0
    steal = 100.0 * sum(y - x for x, y in zip(a["steal"], b["steal"])) / hz / dt / ncpu
    return steal, (b["rounds"] - a["rounds"]) / dt


def phases(result: dict) -> list[str]:
    """The phases in the order the probe ran them."""
    seen = []
    for s in result["samples"]:
        if s[1] not in seen:
            seen.append(s[1])
    return seen


def segment_rate(result: dict, phase: str, settled: bool) -> float | None:
    """bogo-ops/s of a phase's stress-ng windows (--stress-ng WORKERS):
    those after the phase reached its state when `settled`, else all;
    None when the result has no windows for the phase."""
    segs = [s for s in result.get("segments", []) if s[0] == phase]
    chosen = [s for s in segs if s[1]] if settled else segs
    real = sum(s[5] for s in chosen)
    return sum(s[4] for s in chosen) / real if real > 0 else None


def summary(result: dict) -> list[dict]:
    """One row per phase (see the module's docstring)."""
    rows, got = [], samples(result)
    hz, ncpu = result["user_hz"], result["online"]
    starts = result.get("phase_start", {})
    for phase in phases(result):
        ph = [s for s in got if s["phase"] == phase]
        reached = result["reached"].get(phase)
        settled = [s for s in ph if reached is None or s["t"] >= reached] or ph
        counts = [s["preferred"] for s in settled]
        span = settled[-1]["t"] - settled[0]["t"]
        changes = sum(a != b for a, b in zip(counts, counts[1:]))
        steal, rounds = _rate(settled[0], settled[-1], hz, ncpu)
        cut = segment_rate(result, phase, reached is not None)
        if cut is not None:
            rounds = cut
        rows.append({"phase": phase,
                     "reached": None if reached is None else reached - starts.get(phase, 0.0),
                     "samples": len(settled),
                     "pref_median": statistics.median(counts), "pref_min": min(counts),
                     "pref_max": max(counts),
                     "changes_per_s": changes / span if span > 0 else 0.0,
                     "steal_pct": steal, "rounds_per_s": rounds})
    return rows


def against_static(result: dict) -> dict | None:
    """The governor's throughput once converged (busy phase) against the
    best static set's: {"best": phase, "pct": %} (+ = the governor's
    higher), or None without static phases."""
    rows = {r["phase"]: r for r in summary(result)}
    static = [r for p, r in rows.items() if p.startswith("static")]
    if not static or "busy" not in rows:
        return None
    best = max(static, key=lambda r: r["rounds_per_s"])
    if best["rounds_per_s"] <= 0:
        return None
    return {"best": best["phase"],
            "pct": 100.0 * (rows["busy"]["rounds_per_s"] / best["rounds_per_s"] - 1)}


def held_sizes(result: dict, phase: str = "busy") -> dict[int, float]:
    """Seconds the governor held each preferred count in `phase`, from the
    samples after the phase reached its state (each sample's count held
    until the next sample)."""
    got = [s for s in samples(result) if s["phase"] == phase]
    reached = result["reached"].get(phase)
    got = [s for s in got if reached is None or s["t"] >= reached] or got
    held: dict[int, float] = {}
    for a, b in zip(got, got[1:]):
        held[a["preferred"]] = held.get(a["preferred"], 0.0) + b["t"] - a["t"]
    return held


def by_sizes(held: dict[int, float], rates: dict[int, float]) -> dict | None:
    """What the sizes the governor held cost, apart from noise: the
    throughput the static sets give at those sizes, weighted by the time
    held at each, against the best static set's (%, + = the governor's
    higher; at most 0). `rates`: rounds/s per static size. "covered": the
    share of the time held at sizes with a static rate (the estimate uses
    only those). None when no size held has a static rate."""
    if not rates or max(rates.values()) <= 0:
        return None
    known = {k: t for k, t in held.items() if k in rates}
    total, covered = sum(held.values()), sum(known.values())
    if covered <= 0:
        return None
    mean = sum(t * rates[k] for k, t in known.items()) / covered
    return {"pct": 100.0 * (mean / max(rates.values()) - 1),
            "covered": covered / total,
            "share": {k: t / total for k, t in sorted(held.items())}}


def static_rates(result: dict) -> dict[int, float]:
    """rounds/s of each static set of a run, by its size."""
    return {int(r["phase"][len("static"):]): r["rounds_per_s"] for r in summary(result)
            if r["phase"].startswith("static")}


def compare(results: list[dict]) -> dict:
    """Static sets against the governor over several runs (see the
    module's docstring): {"rows": [...], "best": phase, "vs_best": row,
    "vs_boot_best_pct": mean %}."""
    # Every knob the probe reads but the run-time switch.
    knobs = tuple(p for p in PARAMS if p != "enabled")
    seen = {tuple(r.get("params", {}).get(k) for k in knobs) for r in results}
    if len(seen) > 1:
        raise GovernorError("the runs must all have the same governor settings ("
                            + ", ".join(knobs) + "): found "
                            + "; ".join(str(dict(zip(knobs, x))) for x in sorted(seen, key=str)))
    per = []
    for r in results:
        rows = {x["phase"]: x["rounds_per_s"] for x in summary(r)}
        if "busy" not in rows:
            raise GovernorError("a run without its busy phase")
        per.append(rows)
    sets = [p for p in per[0] if p.startswith("static")]
    if not sets or any(set(p for p in x if p.startswith("static")) != set(sets) for x in per):
        raise GovernorError("the runs must all hold the same static sets")
    sets.sort(key=lambda p: -int(p[len("static"):]))
    gov = [x["busy"] for x in per]
    rows = []
    for phase in sets + ["busy"]:
        vals = [x[phase] for x in per]
        row = {"phase": phase, "n": len(vals), "mean": stats.amean(vals),
               "sd": stats.stddev(vals) if len(vals) > 1 else None}
        if phase != "busy":
            row["gov_pct"] = stats.pct_improvement(row["mean"], stats.amean(gov), True)
            row["p"] = stats.paired_ttest(gov, vals).p
        rows.append(row)
    best = max((r for r in rows if r["phase"] != "busy"), key=lambda r: r["mean"])
    boot_best = [100.0 * (x["busy"] / max(x[p] for p in sets) - 1) for x in per
                 if max(x[p] for p in sets) > 0]
    # The sizes held, pooled over the boots, at the static sets' mean rates.
    held: dict[int, float] = {}
    for r in results:
        for k, t in held_sizes(r).items():
            held[k] = held.get(k, 0.0) + t
    sizes = by_sizes(held, {int(r["phase"][len("static"):]): r["mean"] for r in rows
                            if r["phase"] != "busy"})
    return {"rows": rows, "best": best["phase"], "vs_best": best,
            "vs_boot_best_pct": stats.amean(boot_best) if boot_best else None,
            "by_sizes": sizes,
            "params": {k: v for k, v in zip(knobs, next(iter(seen))) if v is not None}}


def format_compare(c: dict) -> str:
    out = ["The governor (busy phase, converged) against static sets, boot by boot; "
           "%chg = governor against the set (+ = the governor's higher), p: paired t-test."]
    if c.get("params"):
        out.append("governor: " + ", ".join(f"{k} {v}" for k, v in c["params"].items()))
    out.append("")
    rows = [("set", "boots", "rounds/s", "sd", "%chg", "p")]
    for r in c["rows"]:
        name = "governor" if r["phase"] == "busy" else r["phase"]
        rows.append((name, r["n"], f"{r['mean']:.4g}",
                     "-" if r["sd"] is None else f"{r['sd']:.3g}",
                     "" if r["phase"] == "busy" or r["gov_pct"] is None
                     else f"{r['gov_pct']:+.1f}",
                     "" if r["phase"] == "busy" or r.get("p") is None else f"{r['p']:.3f}"))
    out += format_table(rows)
    b = c["vs_best"]
    out += ["", f"best static set (highest mean): {c['best']}; the governor against it: "
            + ("-" if b["gov_pct"] is None else f"{b['gov_pct']:+.1f}%")
            + ("" if b.get("p") is None else f" (p {b['p']:.3f})")]
    if c["vs_boot_best_pct"] is not None:
        out.append(f"against each boot's best static set: {c['vs_boot_best_pct']:+.1f}% (mean)")
    if c.get("by_sizes"):
        out.append(format_by_sizes(c["by_sizes"], "the sets' means"))
    return "\n".join(out) + "\n"


def format_by_sizes(z: dict, rates: str) -> str:
    held = ", ".join(f"{k}: {100 * v:.0f}%" for k, v in z["share"].items())
    return (f"from the sizes it held ({held} of the time), at {rates}: {z['pct']:+.1f}% "
            f"against the best set (+ = the governor's higher; covers "
            f"{100 * z['covered']:.0f}% of the time)")


def governor_append(args) -> list[str] | None:
    """The kernel command line's settings for the knobs `run` was given."""
    append = [f"steal_governor.{name}={value}"
              for name, value in (("unpark_backoff", args.unpark_backoff),
                                  ("park_confirm", args.park_confirm)) if value is not None]
    return append or None


def format_summary(result: dict) -> str:
    p = result["params"]
    out = [f"steal governor on {result.get('preset', PRESET)} "
           f"({result.get('workload', 'loops')}): interval_ms {p['interval_ms']}, "
           f"high_threshold {p['high_threshold']}, low_threshold {p['low_threshold']}"
           + (f", unpark_backoff {p['unpark_backoff']}" if "unpark_backoff" in p else "")
           + (f", park_confirm {p['park_confirm']}" if "park_confirm" in p else ""),
           ""]
    rows = [("phase", "reached", "pref", "changes/s", "steal%", "rounds/s")]
    for r in summary(result):
        rows.append((r["phase"], "-" if r["reached"] is None else f"{r['reached']:.1f}",
                     f"{r['pref_median']:g} ({r['pref_min']}-{r['pref_max']})",
                     f"{r['changes_per_s']:.1f}", f"{r['steal_pct']:.1f}",
                     f"{r['rounds_per_s']:.3g}"))
    out += format_table(rows)
    vs = against_static(result)
    if vs:
        out += ["", f"governor (busy, converged) against the best static set ({vs['best']}): "
                f"{vs['pct']:+.1f}% rounds/s (+ = the governor's higher)"]
        z = by_sizes(held_sizes(result), static_rates(result))
        if z:
            out.append(format_by_sizes(z, "this boot's static rates"))
    o = result["others"]
    out += ["", f"parked by hand: {o['written']}; still parked with the governor on: "
            f"{o['parked_after'] or '(none)'}; once it was off: "
            f"{o['parked_when_off'] or '(none)'}"]
    return "\n".join(out) + "\n"


def plot(result: dict, path: str) -> None:
    """Steal per CPU, the preferred count and the throughput against time."""
    plots.plot_format(path)
    plt = plots.pyplot()
    got = samples(result)
    hz = result["user_hz"]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, sharex=True, figsize=(9, 8))
    mid = [(a["t"] + b["t"]) / 2 for a, b in zip(got, got[1:])]
    # Steal over a window of ~0.5 s, per CPU: ticks are 1/HZ coarse.
    w = max(1, int(round(0.5 / result["poll_s"])))
    for i, cpu in enumerate(result["cpus"]):
        xs, ys = [], []
        for a, b in zip(got, got[w:]):
            dt = b["t"] - a["t"]
            if dt > 0:
                xs.append((a["t"] + b["t"]) / 2)
                ys.append(100.0 * (b["steal"][i] - a["steal"][i]) / hz / dt)
        ax1.plot(xs, ys, lw=0.8, label=f"CPU {cpu}")
    ax1.set_ylabel("steal, % of the CPU")
    ax1.legend(ncol=4, fontsize=7)
    ax2.step([s["t"] for s in got], [s["preferred"] for s in got], where="post")
    ax2.set_ylabel("preferred CPUs")
    ax2.set_ylim(0, result["online"] + 0.5)
    # A hackbench or stress-ng run lasts about a second: its rate over 5 s.
    if result.get("workload") in ("hackbench", "stress-ng"):
        w = max(1, int(round(5.0 / result["poll_s"])))
        mid = [(a["t"] + b["t"]) / 2 for a, b in zip(got, got[w:])]
    if result.get("segments"):
        # One level per stress-ng window, as stress-ng reported it.
        for seg in result["segments"]:
            if seg[5] > 0:
                ax3.hlines(seg[4] / seg[5], seg[2], seg[3], lw=1.5)
    else:
        rate = [_rate(a, b, hz, result["online"])[1] for a, b in zip(got, got[w:])]
        ax3.plot(mid[:len(rate)], rate, lw=0.8)
    ax3.set_ylabel({"hackbench": "hackbench runs/s",
                    "stress-ng": "stress-ng bogo-ops/s"}.get(result.get("workload"),
                                                            "loop rounds/s (all)"))
    ax3.set_xlabel("s since the governor was switched on")
    for phase in phases(result)[1:]:
        start = next((s["t"] for s in got if s["phase"] == phase), None)
        if start is not None:
            for ax in (ax1, ax2, ax3):
                ax.axvline(start, color="grey", lw=0.5, ls="--")
            ax1.text(start, ax1.get_ylim()[1], phase, fontsize=7, va="top")
    p = result["params"]
    fig.suptitle(f"steal governor, {result.get('preset', PRESET)} on 2 host cores (interval {p['interval_ms']} ms)")
    plots.save(plt, fig, path)


class _Parser(ToolParser):
    tool = "schedsteal-governor"


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="schedsteal-governor", description=__doc__.split("\n\n")[0],
                epilog=__doc__.split("\n\n", 1)[1].split("Exit status")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run", help="boot and run the governor's phases")
    labcheck.add_lab_args(r)
    r.add_argument("--preset", choices=sorted(TARGETS), default=PRESET,
                   help="the guest's shape (default overcommit8)")
    r.add_argument("--interval-ms", type=int, default=200,
                   help="the governor's interval_ms (100-100000; default 200)")
    r.add_argument("--unpark-backoff", type=int, metavar="N",
                   help="the governor's unpark_backoff (0-8; default: the kernel's, 4; "
                        "0 is upstream's policy)")
    r.add_argument("--park-confirm", type=int, metavar="N",
                   help="the governor's park_confirm (1-8; default: the kernel's, 2; "
                        "1 is upstream's policy)")
    r.add_argument("--hackbench", metavar="GROUPS,LOOPS",
                   help="the load: hackbench -P -p -g GROUPS -l LOOPS back to back "
                        "(rounds/s = finished runs per second) instead of a busy loop per CPU")
    r.add_argument("--stress-ng", metavar="WORKERS[,SECONDS]",
                   help="the load: stress-ng --cpu WORKERS --cpu-method matrixprod "
                        "(bench-park's mix), one run cut at each phase's windows "
                        "(rounds/s = the windows' bogo-ops per real second, as stress-ng "
                        "reports them), or SECONDS-long runs back to back (rounds/s = "
                        "bogo-ops of the finished runs per second)")
    r.add_argument("--hold-s", type=float, help="seconds each phase holds its state "
                   "(and each static set runs; default 4)")
    r.add_argument("--no-static", action="store_true",
                   help="skip the static sets the governor is compared with")
    r.add_argument("--static", metavar="K,...",
                   help="the static sets to hold, in this order (preferred-CPU counts, "
                        "1 to the preset's CPUs; default 8,4,3,2 on overcommit8, "
                        "8,4,2 on numa2)")
    r.add_argument("--out", metavar="DIR", help="keep the boot's files and result.json here")
    c = sub.add_parser("compare", help="the governor against the static sets over several runs")
    c.add_argument("results", nargs="+", metavar="RESULT.json", help="result.json of runs")
    c.add_argument("--json", action="store_true", help="print JSON instead of a table")
    for q in (r, sub.add_parser("report", help="the table (and plot) of a saved result")):
        if q is not r:
            q.add_argument("result", help="result.json of a run")
        q.add_argument("--json", action="store_true", help="print JSON instead of a table")
        q.add_argument("--plot", metavar="FILE", help="write the plot (png, svg, pdf, jpg)")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = make_parser().parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    err = f"{make_parser().prog}: error:"
    if args.action == "compare":
        try:
            results = []
            for path in args.results:
                try:
                    with open(path) as f:
                        results.append(json.load(f))
                    summary(results[-1])
                except OSError as e:
                    raise GovernorError(f"cannot read {path}: {e.strerror}") from None
                except (ValueError, KeyError, TypeError, IndexError) as e:
                    raise GovernorError(f"{path}: not a governor result ({e})") from None
            c = compare(results)
        except GovernorError as e:
            print(f"{err} {e}", file=sys.stderr)
            return 2
        print(json.dumps(c) if args.json else format_compare(c), end="\n" if args.json else "")
        return 0
    try:
        if args.plot:
            plots.plot_format(args.plot)
        if args.action == "report":
            try:
                with open(args.result) as f:
                    result = json.load(f)
                summary(result)
            except OSError as e:
                raise GovernorError(f"cannot read {args.result}: {e.strerror}") from None
            except (ValueError, KeyError, TypeError, IndexError) as e:
                raise GovernorError(f"{args.result}: not a governor result ({e})") from None
        else:
            if not 100 <= args.interval_ms <= 100000:
                raise GovernorError(f"--interval-ms {args.interval_ms}: the governor "
                                    "takes 100 to 100000")
            if args.hackbench and not re.fullmatch(r"[1-9][0-9]*,[1-9][0-9]*", args.hackbench):
                raise GovernorError(f"--hackbench {args.hackbench}: expected GROUPS,LOOPS "
                                    "(two positive integers)")
            if args.stress_ng and not re.fullmatch(r"[1-9][0-9]*(,[1-9][0-9]*)?",
                                                   args.stress_ng):
                raise GovernorError(f"--stress-ng {args.stress_ng}: expected WORKERS or "
                                    "WORKERS,SECONDS (positive integers)")
            if args.hackbench and args.stress_ng:
                raise GovernorError("--hackbench and --stress-ng: one load at a time")
            if args.static is not None:
                ncpu = max(int(k) for k in STATIC[args.preset].split(","))
                ks = args.static.split(",")
                if args.no_static or not all(re.fullmatch(r"[1-9][0-9]*", k) and
                                             int(k) <= ncpu for k in ks) \
                        or len(set(ks)) != len(ks):
                    raise GovernorError(f"--static {args.static}: expected distinct counts "
                                        f"from 1 to {ncpu}, and no --no-static")
            if args.unpark_backoff is not None and not 0 <= args.unpark_backoff <= 8:
                raise GovernorError(f"--unpark-backoff {args.unpark_backoff}: the governor "
                                    "takes 0 to 8")
            if args.park_confirm is not None and not 1 <= args.park_confirm <= 8:
                raise GovernorError(f"--park-confirm {args.park_confirm}: the governor "
                                    "takes 1 to 8")
            if args.hold_s is not None and not 0 < args.hold_s <= 600:
                raise GovernorError(f"--hold-s {args.hold_s:g}: expected 0 < s <= 600")
            try:
                qemu = labcheck.resolve(args.kernel, args.qemu)
            except labcheck.LabCheckError as e:
                raise GovernorError(str(e)) from None
            out = args.out or tempfile.mkdtemp(prefix="schedsteal-governor.")
            os.makedirs(out, exist_ok=True)
            print(f"schedsteal-governor: booting {args.preset} on {qemu.binary} ...",
                  file=sys.stderr, flush=True)
            try:
                result, _ = run(args.kernel, qemu.binary, args.interval_ms,
                                keep=os.path.join(out, "boot"), preset=args.preset,
                                static=None if args.no_static else
                                (args.static or STATIC[args.preset]),
                                hackbench=args.hackbench,
                                hold_s=args.hold_s, stress_ng=args.stress_ng,
                                append=governor_append(args))
            except (labcheck.LabCheckError, vm.VMError, lab.LabError) as e:
                print(f"schedsteal-governor: FAIL: {e}", file=sys.stderr)
                return 1
            with open(os.path.join(out, "result.json"), "w") as f:
                json.dump(result, f)
            print(f"schedsteal-governor: result in {out}/result.json", file=sys.stderr)
        if args.plot:
            plot(result, args.plot)
    except (GovernorError, AbbenchError) as e:
        print(f"{err} {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"params": result["params"], "reached": result["reached"],
                          "summary": summary(result), "against_static": against_static(result),
                          "by_sizes": by_sizes(held_sizes(result), static_rates(result)),
                          "others": result["others"],
                          "off": result["off"]}))
    else:
        print(format_summary(result), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
