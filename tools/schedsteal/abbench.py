"""A/B benchmark runner and report: two scheduler settings, one boot.

The ``abbench`` command. ``run`` executes inside the test guest and lives in
the guest half (``schedsteal.guest.runner``, settings in
``schedsteal.guest.settings``).  ``report`` (this module, host side, any
Python) prints an mmtests
compare-kernels style table with Welch t-tests and paired t-tests (over the
rounds: B minus A), the mean schedstat figures per setting, and optionally
plots the runs.

Usage::

    python3 -m schedsteal.abbench run --a feat:NO_STEAL --b feat:STEAL \\
        --workload hackbench-process-pipe --param 1,2,4 --loops 500 \\
        --runs 10 --out /tmp/steal.json
    python3 -m schedsteal.abbench run --a none --b sysctl:kernel.foo=1 \\
        --workload-cmd 'my-bench -n {param}' --metric-regex 'Time: ([0-9.]+)' \\
        --lower-is-better --unit s --param 8 --out /tmp/custom.json
    python3 -m schedsteal.abbench run --a none --b feat:STEAL --order random \\
        --seed 42 --workload hackbench-process-pipe --param 2 --out /tmp/r.json
    python3 -m schedsteal.abbench report /tmp/steal.json
    python3 -m schedsteal.abbench report /tmp/steal.json --json
    python3 -m schedsteal.abbench report /tmp/steal.json --plot steal.png
    python3 -m schedsteal.abbench report /tmp/steal.json --json-out rep.json

Settings (``--a``/``--b``):

* ``feat:NAME[,NAME...]`` writes each NAME (``STEAL``, ``NO_STEAL`` ...) to
  /sys/kernel/debug/sched/features (debugfs is mounted if needed); names
  the kernel does not list are rejected before anything runs;
* ``sysctl:key=value[,key=value...]`` writes /proc/sys/<key, dots as slashes>;
* ``sh:COMMAND`` runs COMMAND with /bin/sh; a non-zero exit is an error;
* ``none`` does nothing.

``--help`` spells out exactly what each form accepts.  Both settings are
applied once up front (A, then B) so a typo fails at once.  Exit status of
``run``: 0 when every run succeeded, 1 when some workload run failed
(non-zero exit, unparsable output, timeout; the JSON is still written), 2
for bad usage or settings.  The JSON is rewritten after every
run, so a guest crash leaves the runs done so far (``"complete": false``).

Percent changes in the report (%chg) are signed so that positive means B
is better than A, as in mmtests: (A-B)/A for lower-is-better metrics,
(B-A)/A for higher-is-better ones.  ``*x%*`` marks p < alpha (Welch's
t-test), ``(x%)`` a difference that is not significant.  Higher-is-better
metrics are compared by their harmonic mean (Hmean) unless a value of either
side is <= 0; then both sides use the arithmetic mean (Amean), and the row
and a note say so.

Schedstat: ``run`` records with ``guest.kernel.schedstat_snapshot`` and
``schedstat.make_recording``; ``report`` summarizes each recording with
``schedstat.compute_report(recording)["summary"]``.  Unless
``--no-schedstat`` is given, ``run`` turns on ``kernel.sched_schedstats``
(the counters stand still without it) and sets it back after the run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys

from . import lab, plots, schedstat, schedtrace, stats
from .guest import runner
from .guest.runner import FORMAT, FORMAT_VERSION, SIDES
from .guest.settings import SETTING_HELP, AbbenchError
from .cli import ToolParser, read_json, run_subcommand
from .table import format_table

REPORT_FORMAT = "schedsteal-abbench-report"
# Trace figures (schedtrace summaries of traced runs), with column titles.
TRACE_COLUMNS = (("idle_pct", "%idle", "{:.1f}"),
                 ("wasted_llc_pct", "%wasted_llc", "{:.2f}"),
                 ("wasted_machine_pct", "%wasted_mach", "{:.2f}"),
                 ("delay_mean_us", "delay_us", "{:.0f}"),
                 ("delay_p99_us", "p99_us", "{:.0f}"),
                 ("migrations", "moves", "{:.0f}"),
                 ("queued_moves", "queued", "{:.0f}"),
                 ("cross_llc_moves", "x_llc", "{:.0f}"),
                 ("cross_node_moves", "x_node", "{:.0f}"),
                 ("moved_back", "back", "{:.0f}"),
                 ("moves_per_task", "moves/task", "{:.1f}"))
# Summary keys shown in the schedstat table, with their column titles.
SCHEDSTAT_COLUMNS = (("time", "time", "{:.2f}"), ("busy_pct", "%busy", "{:.1f}"),
                     ("slice_ms", "slice", "{:.2f}"), ("sched", "sched", "{:.1f}"),
                     ("idle", "idle", "{:.1f}"), ("wake", "wake", "{:.1f}"),
                     ("find_pct", "%find", "{:.1f}"), ("steal", "steal", "{:.1f}"),
                     ("steal_far", "far", "{:.1f}"), ("found_pct", "%found", "{:.1f}"))


# --- report ----------------------------------------------------------------

def load_results(path: str) -> dict:
    """Read and sanity-check a results file written by ``run``."""
    doc = read_json(path, AbbenchError)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise AbbenchError(f"{path}: not an abbench results file")
    version = doc.get("format_version")
    if not _is_int(version) or version != FORMAT_VERSION:   # True == 1
        raise AbbenchError(f"{path}: unsupported format_version {version!r}")
    for key in ("workload", "unit", "higher_is_better", "settings", "params", "runs"):
        if key not in doc:
            raise AbbenchError(f"{path}: missing {key!r}")
    if doc.get("topology") is not None and not isinstance(doc["topology"], dict):
        raise AbbenchError(f"{path}: 'topology' must be an object")
    if doc.get("lab") is not None and not isinstance(doc["lab"], dict):
        raise AbbenchError(f"{path}: 'lab' must be an object")
    if doc.get("machine") is not None and not isinstance(doc["machine"], dict):
        raise AbbenchError(f"{path}: 'machine' must be an object")
    boots = doc.get("boots")
    labs = [b.get("lab") for b in boots if isinstance(b, dict)] if isinstance(boots, list) else []
    if all(x is None or isinstance(x, dict) for x in labs):
        # A kernelab file: its boots must share one clock to be compared
        # (kernelab.check_boots says what else is wrong with its boots).
        try:
            lab.check_same_clock(labs, "the boots")
        except lab.LabError as exc:
            raise AbbenchError(f"{path}: {exc}") from None
    problem = _check_results(doc)
    if problem:
        raise AbbenchError(f"{path}: {problem}")
    return doc


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_value(x) -> bool:
    """A measured value: a finite number (JSON may hold NaN/Infinity)."""
    return (isinstance(x, (int, float)) and not isinstance(x, bool)
            and math.isfinite(x))


def _check_results(doc: dict) -> str | None:
    """What is wrong with the shape of a results document, or None: the
    report must fail with a message, not a traceback or a wrong table."""
    for key in ("workload", "unit", "param_key", "param_title"):
        if key in doc and not isinstance(doc[key], str):
            return f"{key!r} must be a string"
    if not isinstance(doc["higher_is_better"], bool):
        return "'higher_is_better' must be true or false"
    settings = doc["settings"]
    if not isinstance(settings, dict) or set(settings) != set(SIDES):
        return "settings must be A and B"
    for side in SIDES:
        if (not isinstance(settings[side], dict)
                or not isinstance(settings[side].get("name"), str)):
            return f"settings: {side} must be an object with a string 'name'"
    if (not isinstance(doc["params"], list) or not doc["params"]
            or not all(_is_int(p) for p in doc["params"])):
        return "'params' must be a list of integers (one at least)"
    if not isinstance(doc["runs"], list):
        return "'runs' must be a list"
    key = doc.get("param_key", "p")
    rounds = set()
    for n, run in enumerate(doc["runs"], 1):
        where = f"run {n}"
        if not isinstance(run, dict):
            return f"{where}: not an object"
        if not _is_int(run.get("param")):
            return f"{where}: 'param' must be an integer"
        if run.get("setting") not in SIDES:
            return f"{where}: 'setting' must be A or B, not {run.get('setting')!r}"
        if run.get("value") is not None and not _is_value(run["value"]):
            return (f"{where}: 'value' must be a finite number or null, "
                    f"not {run['value']!r}")
        if run.get("error") is not None and not isinstance(run["error"], str):
            return f"{where}: 'error' must be a string"
        if run.get("trace") is not None and not isinstance(run["trace"], str):
            return f"{where}: 'trace' must be a file name"
        index = run.get("index")
        if index is not None:
            if not _is_int(index):
                return f"{where}: 'index' must be an integer"
            # the round pairs A with B for the paired t-test
            this = (run["param"], run["setting"], index)
            if this in rounds:
                return (f"{where}: {run['setting']} {key}={run['param']} round "
                        f"{index} appears twice")
            rounds.add(this)
    return None


def _finite(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _schedstat_means(runs: list[dict]) -> tuple[dict | None, str | None]:
    recordings = [r["recording"] for r in runs if r.get("recording")]
    if not recordings:
        return None, None
    summaries = []
    for rec in recordings:
        try:
            # time, busy_pct, slice_ms, sched, idle, wake [, find_pct, steal]
            summaries.append(schedstat.compute_report(rec)["summary"])
        except Exception as exc:  # noqa: BLE001 -- a bad recording must not kill the report
            return None, f"schedstat summaries unavailable: {exc}"
    keys = []
    for s in summaries:
        keys += [k for k, v in s.items() if k not in keys and _is_number(v)]
    return _amean_by_key(summaries, keys), None


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _amean_by_key(rows: list[dict], keys) -> dict:
    """{key: Amean of the rows' numbers for key (None when no row has
    one)}, plus n, the number of rows."""
    means = {}
    for k in keys:
        vals = [r[k] for r in rows if _is_number(r.get(k))]
        means[k] = stats.amean(vals) if vals else None
    means["n"] = len(rows)
    return means


def _trace_summary(run: dict, topo, base_dir: str | None) -> dict:
    """schedtrace's summary of a run's trace, cached beside the trace
    (TRACE.summary.json, rewritten when older than the trace)."""
    path = run["trace"]
    if not os.path.isabs(path):
        path = os.path.join(base_dir or ".", path)
    cache = path + ".summary.json"
    try:
        if os.path.getmtime(cache) >= os.path.getmtime(path):
            with open(cache, encoding="utf-8") as f:
                summary = json.load(f)
            if isinstance(summary, dict) and summary.get("format") == schedtrace.FORMAT:
                return summary
    except (OSError, ValueError):   # JSONDecodeError and UnicodeDecodeError
        pass
    summary = schedtrace.analyze_file(path, topo)
    try:
        with open(cache, "w") as f:
            json.dump(summary, f)
    except OSError:
        pass    # a read-only results directory: recompute next time
    return summary


def _trace_means(runs: list[dict], doc: dict, base_dir: str | None):
    """(Amean of the trace figures over the traced runs, or None; a note)."""
    traced = [r for r in runs if r.get("trace")]
    if not traced:
        return None, None
    topo_doc = doc.get("topology")
    if not topo_doc:
        return None, "trace figures unavailable: the results have no topology"
    rows, lost, cut = [], 0, 0
    try:
        topo = schedtrace.Topology.from_json(topo_doc)
        summaries = [_trace_summary(r, topo, base_dir) for r in traced]
    except schedtrace.TraceError as exc:
        return None, f"trace figures unavailable: {exc}"
    for r, s in zip(traced, summaries):
        lost += r.get("trace_lost") or s.get("entries_lost") or 0
        cut += bool(s.get("truncated"))
        rows.append({"idle_pct": s["idle_pct"], "wasted_llc_pct": s["wasted_llc_pct"],
                     "wasted_machine_pct": s["wasted_machine_pct"],
                     "delay_mean_us": s["run_delay"]["all"]["mean_us"],
                     "delay_p99_us": s["run_delay"]["all"]["p99_us"],
                     "migrations": s["migrations"]["total"],
                     "queued_moves": s["migrations"]["queued"],
                     "cross_llc_moves": s["migrations"]["cross_llc"],
                     "cross_node_moves": s["migrations"]["cross_node"],
                     "moved_back": s["migrations"]["moved_back"],
                     "moves_per_task": s["migrations"]["per_task"]})
    means = _amean_by_key(rows, rows[0])
    notes = []
    if lost:
        notes.append(f"{lost} trace events were lost: the trace figures are wrong")
    if cut:
        notes.append(f"{cut} trace{' was' if cut == 1 else 's were'} cut short (a truncated "
                     ".gz): the trace figures cover only the part read")
    return means, "; ".join(notes) or None


def analyze(doc: dict, alpha: float = 0.05, base_dir: str | None = None) -> dict:
    """The report as a dict (what ``report --json`` prints)."""
    hib = bool(doc["higher_is_better"])
    key = doc.get("param_key", "p")
    out = {
        "format": REPORT_FORMAT, "format_version": FORMAT_VERSION,
        "workload": doc["workload"], "unit": doc["unit"],
        "higher_is_better": hib, "mean_kind": "Hmean" if hib else "Amean",
        "param_key": key,
        "param_title": doc.get("param_title", "param"),
        "alpha": alpha, "complete": doc.get("complete", True),
        "order": doc.get("order"), "seed": doc.get("seed"),
        "settings": doc["settings"], "params": [], "notes": [],
        "lab": doc.get("lab"), "machine": doc.get("machine"),
    }
    for param in doc["params"]:
        entry = {"param": param}
        runs, ok, values = {}, {}, {}
        for side in SIDES:
            runs[side] = [r for r in doc["runs"]
                          if r["param"] == param and r["setting"] == side]
            ok[side] = [r for r in runs[side]
                        if r.get("value") is not None and not r.get("error")]
            values[side] = [float(r["value"]) for r in ok[side]]
        # One kind of mean for both sides: Hmean only if every value of
        # either side is > 0, else Amean for both (never Hmean vs Amean).
        every = values["A"] + values["B"]
        use_hmean = hib and bool(every) and min(every) > 0
        entry["mean_kind"] = "Hmean" if use_hmean else "Amean"
        if hib and every and not use_hmean:
            out["notes"].append(f"{key}={param}: Amean used for A and B "
                                "(Hmean needs every value > 0)")
        for side in SIDES:
            vals = values[side]
            cell = {"n": len(vals), "failed": len(runs[side]) - len(vals),
                    "values": vals, "indices": [r.get("index") for r in ok[side]]}
            if vals:
                d = stats.describe(vals, use_hmean)
                cell.update(mean=d["mean"], mean_kind=d["mean_kind"],
                            amean=d["amean"], stddev=d["stddev"],
                            coeffvar=d["coeffvar"], min=d["min"], max=d["max"],
                            median=d["median"], ci95=d["ci95"])
            else:
                cell.update(mean=None, mean_kind=entry["mean_kind"], amean=None,
                            stddev=None, coeffvar=None, min=None, max=None,
                            median=None, ci95=None)
            cell["schedstat"], note = _schedstat_means(ok[side])
            if note and note not in out["notes"]:
                out["notes"].append(note)
            cell["trace"], note = _trace_means(ok[side], doc, base_dir)
            if note and note not in out["notes"]:
                out["notes"].append(note)
            entry[side] = cell
        a, b = entry["A"], entry["B"]
        test = stats.welch_ttest(values["A"], values["B"])

        def pct(field, better_high, a=a, b=b):
            if a[field] is None or b[field] is None:
                return None
            return stats.pct_improvement(a[field], b[field], better_high)

        b["pct_change"] = pct("mean", hib)
        b["pct_changes"] = {"mean": b["pct_change"],
                            "stddev": pct("stddev", False),
                            "coeffvar": pct("coeffvar", False),
                            "min": pct("min", hib), "max": pct("max", hib)}
        b["p_value"] = test.p
        b["t"] = test.t
        b["significant"] = test.significant(alpha)
        a["pct_change"] = 0.0 if a["mean"] is not None else None
        a["pct_changes"] = {k: (0.0 if a[k] is not None else None)
                            for k in ("mean", "stddev", "coeffvar", "min", "max")}
        a["p_value"] = None
        a["t"] = None
        a["significant"] = False
        entry["paired"] = _paired(ok, alpha)
        entry["verdict"] = _verdict(b, test.p, alpha)
        out["params"].append(entry)
    return _clean(out)


def _paired(ok: dict, alpha: float) -> dict:
    """Paired t-test over the rounds (same ``index``) where both A and B
    succeeded; diff_mean is the mean of B - A."""
    by_round = {side: {r["index"]: float(r["value"]) for r in ok[side]
                       if r.get("index") is not None} for side in SIDES}
    rounds = sorted(set(by_round["A"]) & set(by_round["B"]))
    a = [by_round["A"][i] for i in rounds]
    b = [by_round["B"][i] for i in rounds]
    test = stats.paired_ttest(a, b)
    return {"pairs": len(rounds),
            "diff_mean": stats.amean([y - x for x, y in zip(a, b)]) if rounds else None,
            "t": test.t, "df": test.df, "p_value": test.p,
            "significant": test.significant(alpha)}


def _verdict(b: dict, p: float | None, alpha: float) -> str:
    if p is None:
        return "not enough runs (need 2+ per setting)"
    if math.isnan(p):   # NaN >= alpha is False: it would read as significant
        return "n/a (no p-value)"
    if p >= alpha:
        return "not significant"
    change = b.get("pct_change")
    if change is None or change == 0:
        return "different (significant)"
    return "B better (significant)" if change > 0 else "B worse (significant)"


def _clean(obj):
    """NaN/inf -> None, recursively, so the JSON is standard."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return _finite(obj)


def _fmt_pct(pct: float | None, star: bool) -> str:
    body = "n/a" if pct is None else f"{pct:.2f}%"
    return f"*{body:>8}*" if star else f"({body:>8})"


def clock_line(rec: dict | None) -> str:
    """What a results file says of its QEMU and clock (docs/lab.md)."""
    if not rec:
        return "not recorded (a real machine, or a run from before the lab)"
    text = f"{rec.get('clock', '?')} on {rec.get('qemu', '?')} QEMU"
    if rec.get("quantum_ns"):
        text += f", quantum {rec['quantum_ns']} ns"
    if rec.get("steal_time"):
        text += ", steal time shown"
    return text


def machine_line(rec: dict) -> str:
    """One line of what a results file's ``machine`` record says (runs
    from before it have none); a field it lacks reads "?"."""
    def get(d, key):
        v = d.get(key) if isinstance(d, dict) else None
        return "?" if v is None or v == "" else v
    topo = rec.get("topology")
    gov = rec.get("scaling_governor")
    return (f"{get(rec, 'model_name')}; CPUs {get(rec, 'online')} "
            f"({get(topo, 'smt_groups')} SMT groups, {get(topo, 'llc_groups')} LLCs, "
            f"{get(topo, 'numa_nodes')} nodes); governor "
            f"{','.join(map(str, gov)) if isinstance(gov, list) else '?'}; "
            f"SMT {get(rec, 'smt_control')}, active {get(rec, 'smt_active')}; "
            f"kernel {get(rec, 'release')}")


def format_report(rep: dict, pooled: bool = False) -> str:
    """mmtests compare-kernels style text for an ``analyze`` result.
    ``pooled``: the runs come from several boots (kernelab), which this
    table pools: it then has no title line of its own and names its test
    "pooled result", not "verdict"."""
    key = rep["param_key"]
    labels = [rep["settings"][s]["name"] for s in SIDES]
    direction = "higher" if rep["higher_is_better"] else "lower"
    order = f"; run order {rep['order']}" if rep.get("order") else ""
    if rep.get("seed") is not None:
        order += f", seed {rep['seed']}"
    on = " on the pooled runs" if pooled else ""
    lines = [] if pooled else [
        f"{rep['workload']} ({rep['unit'] or 'no unit'}, {direction} is better{order})"]
    lines.append(f"%chg: + = better than base A ({labels[0]}); *x%* = p < {rep['alpha']:g} "
                 f"(Welch t-test{on}), (x%) = not significant")
    if not pooled:
        lines.append(f"clock: {clock_line(rep.get('lab'))}")
        if rep.get("machine"):
            lines.append(f"machine: {machine_line(rep['machine'])}")
    if not rep.get("complete", True):
        lines.append("WARNING: the run did not complete; partial results")
    rows = []
    stat_rows = ((None, "mean", True), ("Stddev", "stddev", False),
                 ("CoeffVar", "coeffvar", False), ("Min", "min", False),
                 ("Max", "max", False))
    for fixed_title, field, testable in stat_rows:
        for entry in rep["params"]:
            # the mean row says which mean it is, per param
            title = fixed_title or entry.get("mean_kind", rep["mean_kind"])
            cells = []
            for side in SIDES:
                cell = entry[side]
                value = cell[field]
                vtext = "n/a" if value is None else f"{value:.4f}"
                star = testable and side == "B" and cell["significant"]
                cells.append((vtext, _fmt_pct(cell["pct_changes"][field], star)))
            rows.append((f"{title:<9}{key}={entry['param']}", cells))
    head_w = max([len(r[0]) for r in rows] + [10]) + 1  # a space before wide values
    val_w = max([len(c[0]) for r in rows for c in r[1]] + [8])
    col_w = max([val_w + 2 + 10] + [len(lbl) + 1 for lbl in labels])
    lines.append(" " * head_w + "".join(f"{lbl:>{col_w}}" for lbl in labels))
    for head, cells in rows:
        lines.append(f"{head:<{head_w}}" + "".join(
            f"{v:>{col_w - 11}} {p}" for v, p in cells))

    verdict = "pooled result" if pooled else "verdict"
    lines += ["", f"Significance (two-sided, alpha {rep['alpha']:g}): p(Welch) and the "
              f"{verdict}: Welch's t-test on all runs{' of all boots' if pooled else ''};",
              "p(paired): paired t-test on each round's B-A difference"]
    p_rows = [("", "n(A)", "n(B)", "fail(A)", "fail(B)", "p(Welch)", "pairs",
               "p(paired)", verdict)]
    for entry in rep["params"]:
        p = entry["B"]["p_value"]
        paired = entry.get("paired") or {"pairs": 0, "p_value": None}
        pp = paired["p_value"]
        p_rows.append((f"{key}={entry['param']}", str(entry["A"]["n"]),
                       str(entry["B"]["n"]), str(entry["A"]["failed"]),
                       str(entry["B"]["failed"]),
                       "n/a" if p is None else f"{p:.4f}", str(paired["pairs"]),
                       "n/a" if pp is None else f"{pp:.4f}", entry["verdict"]))
    lines += format_table(p_rows, left=(0, 8))

    sched_rows = _schedstat_rows(rep, labels)
    if sched_rows:
        lines += ["", "schedstat (per-CPU deltas per run, Amean over runs)"]
        lines += format_table(sched_rows, left=(0, 1))
    trace_rows = _trace_rows(rep, labels)
    if trace_rows:
        lines += ["", "trace (schedtrace, % of CPU time, Amean over traced runs)"]
        lines += format_table(trace_rows, left=(0, 1))
    for note in rep.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"


def _trace_rows(rep: dict, labels: list[str]) -> list[tuple]:
    if not any(e[s].get("trace") for e in rep["params"] for s in SIDES):
        return []
    rows = [(rep["param_title"], "setting", "n") + tuple(c[1] for c in TRACE_COLUMNS)]
    for entry in rep["params"]:
        for side, label in zip(SIDES, labels):
            means = entry[side].get("trace") or {}
            rows.append((str(entry["param"]), label, str(means.get("n", 0))) + tuple(
                "-" if means.get(k) is None else fmt.format(means[k])
                for k, _, fmt in TRACE_COLUMNS))
    return rows


def _schedstat_rows(rep: dict, labels: list[str]) -> list[tuple]:
    present = [c for c in SCHEDSTAT_COLUMNS
               if any((e[s]["schedstat"] or {}).get(c[0]) is not None
                      for e in rep["params"] for s in SIDES)]
    if not present:
        return []
    rows = [(rep["param_title"], "setting") + tuple(c[1] for c in present)]
    for entry in rep["params"]:
        for side, label in zip(SIDES, labels):
            means = entry[side]["schedstat"] or {}
            rows.append((str(entry["param"]), label) + tuple(
                "-" if means.get(k) is None else fmt.format(means[k])
                for k, _, fmt in present))
    return rows


COLORS = {"A": "tab:blue", "B": "tab:orange"}


def _runs_and_ci(ax, x: float, cell: dict, color: str, label: str) -> None:
    """One setting's column: each run a point (spread sideways, in run
    order, so equal values stay apart), and beside them the Amean with its
    95% confidence interval (none for a single run)."""
    vals = cell["values"]
    n = len(vals)
    xs = [x - 0.15 + (0.3 * i / (n - 1) if n > 1 else 0.15) for i in range(n)]
    ax.plot(xs, vals, "o", linestyle="None", color=color, alpha=0.6)
    if cell["amean"] is not None:
        ax.errorbar([x + 0.3], [cell["amean"]], yerr=cell["ci95"], fmt="D", color=color,
                    capsize=5, label=f"{label}: Amean and 95% CI")


def figure(rep: dict):
    """The plot of an ``analyze`` result: per param, each setting's runs
    and their mean with its 95% confidence interval."""
    plt = plots.pyplot()
    entries = rep["params"]
    fig, axes = plt.subplots(1, len(entries), squeeze=False,
                             figsize=(1.5 + 3.2 * max(1, len(entries)), 4.5))
    names = [f"{s}: {rep['settings'][s]['name']}" for s in SIDES]
    for ax, entry in zip(axes[0], entries):
        for x, side in enumerate(SIDES):
            _runs_and_ci(ax, x, entry[side], COLORS[side], side)
        p = entry["B"]["p_value"]
        pct = entry["B"]["pct_change"]
        title = f"{rep['param_key']}={entry['param']}"
        if pct is not None:
            title += f": B {pct:+.2f}%\non {entry['mean_kind']} (+ = better)"
        if p is not None:
            sig = "significant" if entry["B"]["significant"] else "not significant"
            title += f"\np={p:.3g} ({sig})"
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(len(SIDES)), names, fontsize=8)
        ax.set_xlim(-0.5, len(SIDES) - 0.3)
        ax.set_ylabel(rep["unit"] or "value")
    fig.suptitle(f"{rep['workload']} ({'higher' if rep['higher_is_better'] else 'lower'}"
                 " is better)\npoint = a run; diamond and bar = Amean and its 95% "
                 "confidence interval", fontsize=10)
    fig.tight_layout()
    return fig


def plot(rep: dict, path: str) -> None:
    """Write the plot of an ``analyze`` result to path."""
    plt = plots.pyplot()
    plots.save(plt, figure(rep), path)


def cmd_report(args: argparse.Namespace) -> int:
    """The ``report`` subcommand."""
    if not 0 < args.alpha < 1:
        raise AbbenchError("--alpha must be between 0 and 1")
    if args.plot:
        plots.plot_format(args.plot)
    doc = load_results(args.file)
    rep = analyze(doc, args.alpha, os.path.dirname(os.path.abspath(args.file)))
    if doc.get("kind") == "kernelab":
        # Its runs come from several boots: pooled, they make p too small.
        note = (f"{args.file} is a kernelab file: this table pools the runs of all "
                "boots; the verdict from the boot means is "
                f"`kernelab report {shlex.quote(args.file)}`")
        print(f"abbench: warning: {note}", file=sys.stderr)
        rep["notes"].append(note)
    if args.plot:
        plot(rep, args.plot)
    if args.json_out:
        try:
            with open(args.json_out, "w") as f:
                json.dump(rep, f, indent=1)
                f.write("\n")
        except OSError as exc:
            raise AbbenchError(f"cannot write {args.json_out}: {exc.strerror or exc}") from None
    if args.json:
        json.dump(rep, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(rep))
    return 0


# --- command line ------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = ToolParser(prog="abbench", description=__doc__.split("\n\n")[0],
                     epilog=SETTING_HELP,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    runner.add_run_parser(sub)
    rep = sub.add_parser("report", help="compare A and B from a results file")
    rep.add_argument("file", metavar="FILE.json")
    rep.add_argument("--json", action="store_true", help="print JSON")
    rep.add_argument("--plot", metavar="OUT.png",
                     help="plot each setting's runs, mean and 95%% confidence interval; "
                     "the suffix names the format: " + ", ".join(plots.FORMATS))
    rep.add_argument("--json-out", metavar="OUT.json",
                     help="also write the JSON report to OUT.json (one analysis "
                          "for both: traces are read once)")
    rep.add_argument("--alpha", type=float, default=0.05,
                     help="significance level (default: %(default)s)")
    rep.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_subcommand(build_parser(), argv, (AbbenchError,))


if __name__ == "__main__":
    sys.exit(main())
