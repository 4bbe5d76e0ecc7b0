"""Kernel A against kernel B: boots alternate, runs inside each boot.

The ``kernelab`` command, the two-kernel counterpart of ``abbench`` (which
compares two settings inside one boot). ``run`` boots kernel A and kernel
B in turn on one topology preset, in ABBA order over the boots (A B, B A,
A B ...), and runs the same workload ``--runs`` times per boot with
``abbench run`` in the guest (one side only). ``report`` leads with the
verdict: Welch's t-test on the boot means (one mean per boot), the honest
one when boots differ more than runs do; then one line per boot, the
spread of the boot means against the runs', and last abbench's table over
all runs pooled (labelled as such, not the verdict; the paired test pairs
run j of A's boot k with run j of B's boot k). ``--json`` names the
verdict and its test in ``verdict``.

Usage::

    kernelab run --a-kernel stock/bzImage --a-name stock \\
        --b-kernel series/bzImage --b-name series --b-setting feat:NO_STEAL \\
        --preset smp2 --boots 3 --runs 5 --workload hackbench-process-pipe \\
        --param 2 --loops 500 --out out/kab
    kernelab report out/kab/kab.json [--json]

``run`` keeps each boot's files in OUT/boot-N-SIDE/ (abbench's ab.json,
the guest's dmesg and output) and rewrites OUT/kab.json, an abbench
results file with A and B standing for the kernels, after every boot: a
boot that fails (the command, a splat, a timeout) stops the run with
status 1 and leaves the boots done so far (``"complete": false``). Exit
status: 0 done, 1 a boot failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

from . import abbench, lab, plots, stats, vm
from .cli import ToolParser, run_subcommand
from .guest import workloads as wl
from .guest.runner import FORMAT, FORMAT_VERSION, SIDES, parse_params, write_json
from .guest.settings import AbbenchError
from .table import format_table

ORDER_NOTE = "boots in ABBA order"


class KernelabError(Exception):
    pass


def boot_order(boots: int) -> list[tuple[int, str]]:
    """(pair, side) of each boot: pairs alternate AB and BA, so a drift of
    the host adds as much to A as to B over two pairs."""
    return [(k, side) for k in range(boots) for side in ("AB" if k % 2 == 0 else "BA")]


def guest_command(args: argparse.Namespace, side: str) -> str:
    """The abbench command one boot runs: the side's setting alone."""
    setting = getattr(args, f"{side.lower()}_setting")
    name = getattr(args, f"{side.lower()}_name")
    cmd = ["python3", "-m", "schedsteal.abbench", "run", "--a", setting,
           "--a-name", name, "--workload", args.workload,
           "--runs", str(args.runs), "--warmup", str(args.warmup),
           "--timeout", str(args.run_timeout)]
    for p in args.param:
        cmd += ["--param", p]
    if args.loops is not None:
        cmd += ["--loops", str(args.loops)]
    if args.no_schedstat:
        cmd.append("--no-schedstat")
    # $SCHEDSTEAL_OUT is the guest's name for the kept directory.
    return shlex.join(cmd) + ' --out "$SCHEDSTEAL_OUT/ab.json"'


def merge(boots: list[dict], names: dict, kernels: dict, runs_per_boot: int,
          complete: bool) -> dict:
    """One abbench results document from the boots' documents, A and B
    standing for the kernels. ``boots``: {"pair", "setting", "doc", "dir"}
    in the order they ran. Run j of pair k gets index k * runs + j, which
    pairs it with the other kernel's run j of the same pair."""
    if not boots:
        raise KernelabError("no boot finished")
    first = boots[0]["doc"]
    out = {key: first.get(key) for key in (
        "workload", "description", "unit", "higher_is_better", "mean_kind",
        "param_key", "param_title", "options", "commands", "params", "topology")}
    out.update(format=FORMAT, format_version=FORMAT_VERSION, complete=complete,
               kind="kernelab", order=ORDER_NOTE, seed=None,
               settings={s: {"name": names[s], "spec": None,
                             "kernel": kernels[s]["path"],
                             "setting": kernels[s]["setting"]} for s in SIDES},
               runs_per_boot=runs_per_boot,
               boots=[], runs=[], warmup=[])
    try:
        out["lab"] = lab.check_same_clock([b["doc"].get("lab") for b in boots], "the boots")
    except lab.LabError as exc:
        raise KernelabError(str(exc)) from None
    for pos, b in enumerate(boots):
        doc = b["doc"]
        for key in ("workload", "unit", "higher_is_better", "params"):
            if doc.get(key) != out[key]:
                raise KernelabError(f"boot {pos + 1} ran another {key}: "
                                    f"{doc.get(key)!r}, not {out[key]!r}")
        host = doc.get("host") or {}
        out["boots"].append({"position": pos, "pair": b["pair"], "setting": b["setting"],
                             "dir": b["dir"], "release": host.get("release"),
                             "complete": doc.get("complete", False),
                             "lab": doc.get("lab")})
        for run in doc.get("runs", []):
            if run.get("setting") != "A":
                continue
            out["runs"].append({**run, "setting": b["setting"], "boot": pos,
                                "index": b["pair"] * runs_per_boot + run["index"]})
    return out


def check_boots(doc: dict) -> str | None:
    """What is wrong with a kernelab file's boots and the runs' boot
    numbers, or None (abbench.load_results checked the rest): the report
    must fail with a message, not a traceback or a wrong table."""
    if doc.get("runs_per_boot") is not None and not abbench._is_int(doc["runs_per_boot"]):
        return "'runs_per_boot' must be an integer"
    for n, b in enumerate(doc["boots"]):
        where = f"boot {n + 1}"
        if not isinstance(b, dict):
            return f"{where}: not an object"
        if b.get("lab") is not None and not isinstance(b["lab"], dict):
            return f"{where}: 'lab' must be an object"
        if not abbench._is_int(b.get("position")) or b["position"] != n:
            return f"{where}: 'position' must be {n} (the boots in the order they ran)"
        if b.get("setting") not in SIDES:
            return f"{where}: 'setting' must be A or B, not {b.get('setting')!r}"
        if not abbench._is_int(b.get("pair")):
            return f"{where}: 'pair' must be an integer"
    try:
        lab.check_same_clock([b.get("lab") for b in doc["boots"]], "the boots")
    except lab.LabError as exc:
        return str(exc)
    for n, run in enumerate(doc["runs"], 1):
        boot = run.get("boot")
        if not abbench._is_int(boot) or not 0 <= boot < len(doc["boots"]):
            return f"run {n}: 'boot' must name a boot, not {boot!r}"
        if doc["boots"][boot]["setting"] != run["setting"]:
            return (f"run {n}: it is an {run['setting']} run, but boot {boot + 1} "
                    f"booted {doc['boots'][boot]['setting']}")
    return None


def boot_means(doc: dict) -> list[dict]:
    """Per param, per boot: its runs' values, n, their mean (Amean) and
    spread."""
    rows = []
    for param in doc["params"]:
        for b in doc["boots"]:
            vals = [float(r["value"]) for r in doc["runs"]
                    if r["param"] == param and r["boot"] == b["position"]
                    and r.get("value") is not None and not r.get("error")]
            row = {"param": param, "boot": b["position"], "pair": b["pair"],
                   "setting": b["setting"], "release": b.get("release"), "n": len(vals),
                   "values": vals, "mean": None, "stddev": None, "min": None, "max": None}
            if vals:
                row.update(mean=stats.amean(vals), min=min(vals), max=max(vals),
                           stddev=stats.stddev(vals) if len(vals) > 1 else None)
            rows.append(row)
    return rows


def between_boots(doc: dict, rows: list[dict], alpha: float) -> list[dict]:
    """Per param: Welch's t-test on the boot means (n = boots per side),
    and how the spread of the boot means compares with the spread of the
    runs inside a boot."""
    out = []
    hib = bool(doc["higher_is_better"])
    for param in doc["params"]:
        means = {s: [r["mean"] for r in rows if r["param"] == param
                     and r["setting"] == s and r["mean"] is not None] for s in SIDES}
        inside = [r["stddev"] for r in rows if r["param"] == param
                  and r["stddev"] is not None]
        test = stats.welch_ttest(means["A"], means["B"])
        entry = {"param": param, "boots": {s: len(means[s]) for s in SIDES},
                 "mean": {s: stats.amean(means[s]) if means[s] else None for s in SIDES},
                 "p_value": test.p, "significant": test.significant(alpha),
                 "pct_change": None,
                 "stddev_of_boot_means": {s: (stats.stddev(means[s]) if len(means[s]) > 1
                                              else None) for s in SIDES},
                 "mean_stddev_inside_boots": stats.amean(inside) if inside else None}
        if means["A"] and means["B"]:
            entry["pct_change"] = stats.pct_improvement(entry["mean"]["A"],
                                                        entry["mean"]["B"], hib)
        # abbench's rule, on the boot means
        entry["verdict"] = ("not enough boots (need 2+ per kernel)" if test.p is None
                            else abbench._verdict(entry, test.p, alpha))
        out.append(entry)
    return out


VERDICT_TEST = "Welch's t-test on the boot means (one mean per boot, n = boots per kernel)"
POOLED_NOTE = ("pooled runs (within-boot): every run of every boot in one sample, as "
               "abbench would; not the verdict: the runs of one boot share its noise, "
               "so these p-values are too small when boots differ")


def analyze(doc: dict, alpha: float = 0.05, base_dir: str | None = None) -> dict:
    """abbench's analysis over the pooled runs (``params``), plus the
    boots and the verdict from the boot means (``verdict``)."""
    rep = abbench.analyze(doc, alpha, base_dir)
    rows = boot_means(doc)
    bb = between_boots(doc, rows, alpha)
    rep.update(kind="kernelab", boots=doc["boots"], runs_per_boot=doc.get("runs_per_boot"),
               verdict={"test": VERDICT_TEST, "source": "between_boots", "alpha": alpha,
                        "params": [{k: e[k] for k in ("param", "pct_change", "p_value",
                                                      "significant", "verdict")}
                                   for e in bb],
                        "pooled_note": POOLED_NOTE},
               per_boot=rows, between_boots=bb)
    return abbench._clean(rep)


def _num(x, fmt="{:.4f}"):
    return "-" if x is None else fmt.format(x)


def _verdict_lines(rep: dict) -> list[str]:
    """The report's head: the verdict from the boot means, one row per param."""
    key = rep["param_key"]
    labels = {s: rep["settings"][s]["name"] for s in SIDES}
    boots = {s: sum(1 for b in rep["boots"] if b["setting"] == s) for s in SIDES}
    direction = "higher" if rep["higher_is_better"] else "lower"
    lines = [f"{rep['workload']} ({rep['unit'] or 'no unit'}, {direction} is better): "
             f"A = {labels['A']}, B = {labels['B']}; {boots['A']} + {boots['B']} boots "
             f"in ABBA order, {rep.get('runs_per_boot')} runs each",
             f"verdict (read this one): {VERDICT_TEST}",
             f"%chg: + = B better than A ({labels['A']}), on the Amean of the boot means; "
             f"*x%* = p(boots) < {rep['alpha']:g}, (x%) = not significant"]
    if not rep.get("complete", True):
        lines.append("WARNING: the run did not complete; partial results")
    rows = [(key, "boots A", "boots B", "mean A", "mean B", "%chg", "p(boots)", "verdict")]
    for e in rep["between_boots"]:
        rows.append((f"{key}={e['param']}", str(e["boots"]["A"]), str(e["boots"]["B"]),
                     _num(e["mean"]["A"]), _num(e["mean"]["B"]),
                     abbench._fmt_pct(e["pct_change"], e["significant"]),
                     _num(e["p_value"]), e["verdict"]))
    return lines + format_table(rows, left=(0, 7))


def format_report(rep: dict) -> str:
    """The verdict from the boot means first, then each boot, the spread
    of boots against runs, and last abbench's table over the pooled runs."""
    lines = _verdict_lines(rep)
    lines += [f"clock: {abbench.clock_line(rep.get('lab'))}", ""]
    key = rep["param_key"]
    labels = {s: rep["settings"][s]["name"] for s in SIDES}
    lines.append(f"per boot ({rep.get('runs_per_boot')} runs each; Amean, spread of the runs)")
    rows = [(key, "boot", "kernel", "release", "n", "mean", "stddev", "min", "max")]
    for r in rep["per_boot"]:
        rows.append((str(r["param"]), str(r["boot"] + 1), labels[r["setting"]],
                     r.get("release") or "-", str(r["n"]), _num(r["mean"]),
                     _num(r["stddev"]), _num(r["min"]), _num(r["max"])))
    lines += format_table(rows, left=(0, 2, 3))
    lines += ["", "between boots: sd(boots) is the spread of the boot means, sd(runs) "
              "the mean spread of the runs inside a boot (boots differ when sd(boots) is larger)"]
    rows = [(key, "sd(boots) A", "sd(boots) B", "sd(runs)")]
    for e in rep["between_boots"]:
        rows.append((f"{key}={e['param']}", _num(e["stddev_of_boot_means"]["A"]),
                     _num(e["stddev_of_boot_means"]["B"]),
                     _num(e["mean_stddev_inside_boots"])))
    lines += format_table(rows)
    lines += ["", *POOLED_NOTE.split("; ", 1),
              abbench.format_report(rep, pooled=True).rstrip("\n")]
    return "\n".join(lines) + "\n"


def plot(rep: dict, path: str) -> None:
    """Write a plot: per param, every run's value over the boots in the
    order they ran, one colour per kernel, each boot's mean as a bar. Runs
    that scatter less than the bars move show boot-to-boot noise."""
    plt = plots.pyplot()
    colors = abbench.COLORS
    labels = {s: rep["settings"][s]["name"] for s in SIDES}
    entries = rep["between_boots"]
    fig, axes = plt.subplots(len(entries), 1, squeeze=False,
                             figsize=(8, 2.8 * max(1, len(entries))))
    for ax, entry in zip(axes[:, 0], entries):
        param = entry["param"]
        seen = set()
        for row in rep["per_boot"]:
            if row["param"] != param:
                continue
            side, x, vals = row["setting"], row["boot"] + 1, row["values"]
            ax.plot([x] * len(vals), vals, "o", color=colors[side], alpha=0.6,
                    label=None if side in seen else f"{side}: {labels[side]}")
            seen.add(side)
            if row["mean"] is not None:
                ax.hlines(row["mean"], x - 0.3, x + 0.3, color=colors[side], linewidth=2)
        title = f"{rep['param_key']}={param}"
        if entry["pct_change"] is not None:
            title += f": B {entry['pct_change']:+.2f}% (positive = better)"
        if entry["p_value"] is not None:
            title += f", p(boot means)={entry['p_value']:.3g}"
        title += f", {entry['verdict']}"
        ax.set_title(title, fontsize=9)
        n = max([r["boot"] + 1 for r in rep["per_boot"]] + [1])
        ax.set_xticks(range(1, n + 1))
        ax.set_xlim(0.5, n + 0.5)
        ax.set_xlabel("boot, in the order they ran")
        ax.set_ylabel(rep["unit"] or "value")
        ax.legend(fontsize=8)
    fig.suptitle(f"{rep['workload']} ({'higher' if rep['higher_is_better'] else 'lower'}"
                 " is better; bar = the boot's mean)", fontsize=10)
    fig.tight_layout()
    plots.save(plt, fig, path)


# --- run ---------------------------------------------------------------------

def check_same_tcg_mode(args: argparse.Namespace) -> None:
    """A jump-label kernel boots under single-threaded TCG (vm.py), the
    others multi-threaded: one vCPU at a time against all at once, which
    would be most of any difference measured. Both kernels must boot the
    same way: refuse, unless --qemu-opts choose the accelerator for both."""
    single = {s: vm.needs_single_thread_tcg(getattr(args, f"{s.lower()}_kernel"))
              for s in SIDES}
    opts = " ".join(args.qemu_opts or [])
    if (single["A"] == single["B"] or "-accel" in opts or "-icount" in opts
            or getattr(args, "clock", None) in ("icount", "parallel")):
        return
    jl, other = ("A", "B") if single["A"] else ("B", "A")
    raise KernelabError(
        f"--{jl.lower()}-kernel has jump labels and boots under single-threaded TCG, "
        f"--{other.lower()}-kernel does not: their times would not be comparable. "
        f"Boot both one way with --qemu-opts='{vm.SINGLE_THREAD_TCG}'")


def check_run_args(args: argparse.Namespace) -> None:
    """Everything checked before the first boot."""
    for side in SIDES:
        path = getattr(args, f"{side.lower()}_kernel")
        if not os.path.isfile(path):
            raise KernelabError(f"--{side.lower()}-kernel: no kernel image at {path}")
    if args.a_name == args.b_name:
        raise KernelabError("--a-name and --b-name must differ")
    check_same_tcg_mode(args)
    for flag, value, low in (("--boots", args.boots, 1), ("--runs", args.runs, 1),
                             ("--warmup", args.warmup, 0)):
        if value < low:
            raise KernelabError(f"{flag} must be at least {low}")
    if args.loops is not None and args.loops < 1:
        raise KernelabError("--loops must be at least 1")
    vm.get_preset(args.preset)
    vm.check_timeout(args.timeout)
    parse_params(args.param)


def cmd_run(args: argparse.Namespace, boot=vm.run) -> int:
    """The ``run`` subcommand; ``boot`` is vm.run (a stub in the tests)."""
    try:
        check_run_args(args)
        labrec, qemu = vm.lab_from_args(args)
    except (vm.VMError, wl.WorkloadError) as exc:
        raise KernelabError(str(exc)) from None
    os.makedirs(args.out, exist_ok=True)
    result = os.path.join(args.out, "kab.json")
    names = {"A": args.a_name, "B": args.b_name}
    kernels = {s: {"path": os.path.abspath(getattr(args, f"{s.lower()}_kernel")),
                   "setting": getattr(args, f"{s.lower()}_setting")} for s in SIDES}
    done = []
    order = boot_order(args.boots)
    for pos, (pair, side) in enumerate(order):
        bdir = os.path.join(args.out, f"boot-{pos + 1}-{side}")
        print(f"[boot {pos + 1}/{len(order)}] {side} ({names[side]}) on {args.preset}: "
              f"{args.runs} runs", file=sys.stderr, flush=True)
        start = time.monotonic()
        res = boot(kernels[side]["path"], args.preset, guest_command(args, side),
                   timeout=args.timeout, keep=bdir, qemu_opts=qemu or None, lab=labrec)
        with open(os.path.join(bdir, "guest.log"), "w") as f:
            f.write(res.output)
        problem = None
        if not res.ok:
            problem = (f"timed out after {args.timeout:g} s" if res.timed_out else
                       f"{len(res.splats)} splat(s) in its kernel log" if res.splats else
                       "the guest stopped early" if res.died else
                       f"the command exited with status {res.status}")
        try:
            with open(os.path.join(bdir, "ab.json")) as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            doc = None
            problem = problem or f"no results: {exc}"
        if doc is not None:
            done.append({"pair": pair, "setting": side, "doc": doc,
                         "dir": os.path.basename(bdir)})
        complete = problem is None and pos == len(order) - 1
        if done:
            write_json(result, merge(done, names, kernels, args.runs, complete))
        if problem:
            print(f"kernelab: boot {pos + 1} ({names[side]}) failed: {problem}; "
                  f"its files are in {bdir}", file=sys.stderr)
            return 1
        print(f"[boot {pos + 1}/{len(order)}] done in {time.monotonic() - start:.0f} s",
              file=sys.stderr, flush=True)
    print(f"kernelab: results in {result}", file=sys.stderr)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    if not 0 < args.alpha < 1:
        raise KernelabError("--alpha must be between 0 and 1")
    if args.plot:
        plots.plot_format(args.plot)
    doc = abbench.load_results(args.file)
    if doc.get("kind") != "kernelab" or not isinstance(doc.get("boots"), list):
        raise KernelabError(f"{args.file}: not a kernelab results file "
                            "(abbench report reads one-boot comparisons)")
    problem = check_boots(doc)
    if problem:
        raise KernelabError(f"{args.file}: {problem}")
    rep = analyze(doc, args.alpha, os.path.dirname(os.path.abspath(args.file)))
    if args.plot:
        plot(rep, args.plot)
    if args.json:
        json.dump(rep, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(rep))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = ToolParser(prog="kernelab", description=__doc__.split("\n\n")[0],
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="boot two kernels in turn and run a workload")
    for side, what in (("a", "baseline"), ("b", "compared")):
        run.add_argument(f"--{side}-kernel", required=True, metavar="BZIMAGE",
                         help=f"the {what} kernel")
        run.add_argument(f"--{side}-name", default=side.upper(),
                         help=f"its label (default: {side.upper()})")
        run.add_argument(f"--{side}-setting", default="none", metavar="SETTING",
                         help="abbench setting applied in its boots, e.g. "
                         "feat:NO_STEAL (default: none)")
    run.add_argument("--preset", default="smp2", help="topology (default: %(default)s)")
    run.add_argument("--boots", type=int, default=3,
                     help="boots per kernel (default: %(default)s)")
    run.add_argument("--runs", type=int, default=5,
                     help="measured runs per boot (default: %(default)s)")
    run.add_argument("--warmup", type=int, default=1,
                     help="discarded runs per boot and param (default: %(default)s)")
    run.add_argument("--workload", default="hackbench-process-pipe", choices=wl.names(),
                     metavar="NAME", help="one of: " + ", ".join(wl.names()))
    run.add_argument("--param", action="append", required=True,
                     help="parameter values, e.g. 1,2,4 (repeatable)")
    run.add_argument("--loops", type=int, help="hackbench/perf-messaging loops")
    run.add_argument("--no-schedstat", action="store_true",
                     help="leave kernel.sched_schedstats off (its default): the "
                     "cost of the counters themselves stays out of the times")
    run.add_argument("--qemu-opts", action="append", default=[],
                     help="extra QEMU arguments, e.g. '-icount shift=0,sleep=off' "
                     "(repeatable)")
    vm.add_lab_arguments(run)
    run.add_argument("--timeout", type=float, default=3000.0,
                     help="seconds per boot (default: %(default)g)")
    run.add_argument("--run-timeout", type=float, default=600.0,
                     help="seconds per workload run (default: %(default)g)")
    run.add_argument("--out", required=True, metavar="DIR")
    run.set_defaults(func=cmd_run)
    rep = sub.add_parser("report", help="compare the kernels from OUT/kab.json")
    rep.add_argument("file", metavar="KAB.json")
    rep.add_argument("--json", action="store_true", help="print JSON")
    rep.add_argument("--alpha", type=float, default=0.05,
                     help="significance level (default: %(default)s)")
    rep.add_argument("--plot", metavar="OUT.png",
                     help="plot each run per boot, the boot means as bars; the "
                     "suffix names the format: " + ", ".join(plots.FORMATS))
    rep.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_subcommand(build_parser(), argv, (KernelabError, AbbenchError))


if __name__ == "__main__":
    sys.exit(main())
