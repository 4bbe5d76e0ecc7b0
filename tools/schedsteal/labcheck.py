"""Validate the lab (docs/lab.md): does it measure what it claims?

The ``schedsteal-lab`` command. ``validate`` boots the lab QEMU and
prints one table per check, the same checks tests/vm/test_lab.py asserts:

  steal-overcommit  overcommit8, a busy loop on each of 8 vCPUs for a
                    window: each vCPU's steal in the guest's /proc/stat
                    against its thread's run delay on the host (both as
                    % of the window; + = the guest shows more)
  steal-smp2        smp2: a quiet window, then one with vCPU k's thread
                    pinned to host CPU k and a busy loop pinned to host
                    CPU 0 beside vCPU 0
  clock             llc32 under the parallel clock: N copies of a fixed
                    loop on N vCPUs (time / one loop's) and on one vCPU
                    (time / N loops'), N = 1..32; hackbench repeated
                    (coefficient of variation)
  memory-map        overcommit8 with two pci-testdev devices: one
                    vCPU switches the first one's memory decoding off
                    and on while the other 7 read a fixed byte of the
                    second one's BAR; every read must return it (QEMU
                    7.2's TCG sent some to another region, or crashed)
  direction         smp2, NO_STEAL (A) against STEAL (B), hackbench,
                    under the host clock (multi-threaded TCG on the 2 real
                    cores) and under the parallel clock: does B's %chg
                    point the same way where the host clock's is
                    significant? (abbench's tables: + = B better)

    schedsteal-lab validate --kernel bzImage [--check NAME]... [--json]
        [--out DIR] [--qemu PATH]

Exit status: 0 every check ran (the tables are the result), 1 a guest
failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from . import abbench, lab, stats, vm
from .cli import ToolParser
from .table import format_table

REPO = Path(__file__).resolve().parents[2]
CHECKS = ("steal-overcommit", "steal-smp2", "clock", "memory-map", "direction")
# A loop of 2e7 iterations (3 instructions each): 60 ms of the parallel
# clock, long against a quantum (4 us) and a tick (4 ms).
LOOP_ITERATIONS = 20_000_000
LOOP_SERIES = (1, 2, 4, 8, 16, 32)
# hackbench's "Time:" has 1 ms resolution: runs of ~0.2 s keep it small.
HACKBENCH = ("--workload hackbench-process-pipe --param 4 --loops 1000 "
             "--runs 8 --warmup 1 --no-schedstat")
DIRECTION = ("--a feat:NO_STEAL --a-name NO_STEAL --b feat:STEAL --b-name STEAL "
             "--workload hackbench-process-pipe --param 1,2,4 --loops 2000 --runs 8 "
             "--warmup 1 --no-schedstat")


class LabCheckError(Exception):
    pass


def lab_boot(kernel: str, qemu: str, preset: str, cmd: str, clock: str = "host",
             monitor=None, keep: str | None = None, steal_time: bool | None = None,
             timeout: float = 1800, append: list[str] | None = None,
             qemu_opts: list[str] | None = None) -> vm.RunResult:
    """Boot on the lab QEMU under `clock` (steal time on by default on the
    host clock); LabCheckError unless the guest ran clean. A boot that
    QEMU itself ended before user space is tried once more
    (vm.run_past_host_crash)."""
    if steal_time is None:
        steal_time = clock == "host"
    labrec, opts = vm.resolve_lab(qemu, clock, steal_time=steal_time)
    res = vm.run_past_host_crash(kernel, preset, cmd, timeout=timeout,
                                 qemu_opts=opts + list(qemu_opts or []),
                                 lab=labrec, monitor=monitor, keep=keep, append=append)
    if not res.ok:
        why = ("timed out" if res.timed_out else f"{len(res.splats)} splat(s)"
               if res.splats else "died" if res.died else f"status {res.status}")
        raise LabCheckError(f"{preset} ({clock} clock): the guest {why}:\n"
                            f"{vm.tail(res.output)}\n{vm.tail(res.console, 10)}")
    return res


def probes(res: vm.RunResult, n: int) -> list[dict]:
    got = [obj for _, obj in vm.json_objects(res.output.splitlines())]
    if len(got) != n:
        raise LabCheckError(f"expected {n} probe results, got {len(got)}:\n"
                            f"{vm.tail(res.output)}")
    return got


def steal_rows(res: vm.RunResult, probe: dict) -> list[dict]:
    """One window of lab_probe.py steal: per vCPU, the guest's steal and
    its thread's run delay, both as % of the window."""
    g = lab.guest_steal(probe)
    h = lab.host_steal(res.monitor, probe["label"])
    top = lab.guest_steal_share(probe)
    if sorted(g) != sorted(h):
        raise LabCheckError(f"guest CPUs {sorted(g)} but vCPU threads {sorted(h)}")
    return [{"cpu": c, "guest": g[c], "host": h[c], "diff": g[c] - h[c], "top": top[c]}
            for c in sorted(g)]


def steal_command(windows: list[tuple[str, float]]) -> str:
    return " && ".join(f"python3 guest/lab_probe.py steal --label {label} "
                       f"--seconds {seconds:g} --busy" for label, seconds in windows)


def check_steal_overcommit(kernel: str, qemu: str, seconds: float = 15) -> dict:
    res = lab_boot(kernel, qemu, "overcommit8", steal_command([("busy", seconds)]),
                   monitor=lab.StealMonitor())
    return {"busy": steal_rows(res, probes(res, 1)[0])}


def check_steal_smp2(kernel: str, qemu: str, seconds: float = 10) -> dict:
    monitor = lab.StealMonitor({"hog": [lab.PinVcpus({0: 0, 1: 1}), lab.HostHog(0)]})
    res = lab_boot(kernel, qemu, "smp2",
                   steal_command([("quiet", seconds), ("hog", seconds)]), monitor=monitor)
    quiet, hog = probes(res, 2)
    return {"quiet": steal_rows(res, quiet), "hog": steal_rows(res, hog)}


def build_busyloop(outdir: str) -> str:
    """guest/busyloop.c, built on the host (the guest sees the host's files)."""
    out = os.path.join(outdir, "busyloop")
    subprocess.run(["gcc", "-O2", "-Wall", "-o", out, str(REPO / "guest" / "busyloop.c")],
                   check=True)
    return out


def check_clock(kernel: str, qemu: str, workdir: str) -> dict:
    busyloop = build_busyloop(workdir)
    series = ",".join(map(str, LOOP_SERIES))
    loops = (f"python3 guest/lab_probe.py loops --busyloop {busyloop} "
             f"--iterations {LOOP_ITERATIONS} --series {series}")
    keep = os.path.join(workdir, "clock")
    res = lab_boot(kernel, qemu, "llc32", " && ".join([
        loops, loops + " --pinned 1",
        f"python3 -m schedsteal.abbench run --a none {HACKBENCH} "
        '--out "$SCHEDSTEAL_OUT/ab.json" >&2']), clock="parallel", keep=keep)
    par, pinned = probes(res, 2)
    one = par["batches"][0]["batch_ns"]
    rows = []
    for p, q in zip(par["batches"], pinned["batches"]):
        rows.append({"n": p["n"], "parallel_ms": p["batch_ns"] / 1e6,
                     "parallel_ratio": p["batch_ns"] / one,
                     "pinned_ms": q["batch_ns"] / 1e6,
                     "pinned_ratio": q["batch_ns"] / (q["n"] * one)})
    with open(os.path.join(keep, "ab.json")) as f:
        doc = json.load(f)
    values = [r["value"] for r in doc["runs"] if r.get("value") is not None]
    return {"loops": rows, "hackbench": {"values": values, "lab": doc.get("lab"),
                                         "cv_pct": stats.coeffvar(values) if values else None}}


def check_memory_map(kernel: str, qemu: str, seconds: float = 15) -> dict:
    """lab_probe.py mmio on overcommit8 (no steal time: it is beside the
    point). The misreads are the accesses that a change of the memory map
    sent elsewhere; 0 is the only right answer."""
    res = lab_boot(kernel, qemu, "overcommit8", f"python3 guest/lab_probe.py mmio "
                   f"--seconds {seconds:g}", steal_time=False,
                   qemu_opts=["-device pci-testdev", "-device pci-testdev"])
    return probes(res, 1)[0]


def check_direction(kernel: str, qemu: str, workdir: str) -> dict:
    """abbench's analysis of NO_STEAL against STEAL under each clock."""
    out = {}
    for clock in ("host", "parallel"):
        keep = os.path.join(workdir, f"direction-{clock}")
        lab_boot(kernel, qemu, "smp2",
                 f"python3 -m schedsteal.abbench run {DIRECTION} "
                 '--out "$SCHEDSTEAL_OUT/ab.json" >&2',
                 clock=clock, keep=keep, steal_time=False)
        with open(os.path.join(keep, "ab.json")) as f:
            out[clock] = abbench.analyze(json.load(f))
    out["agreement"] = direction_agreement(out["host"], out["parallel"])
    return out


def direction_agreement(host: dict, parallel: dict) -> list[dict]:
    """Per param: B's %chg under each clock, whether the host clock's is
    significant, and whether the two point the same way."""
    rows = []
    for h, p in zip(host["params"], parallel["params"]):
        hc, pc = h["B"]["pct_changes"]["mean"], p["B"]["pct_changes"]["mean"]
        rows.append({"param": h["param"], "host_pct": hc, "host_p": h["B"]["p_value"],
                     "host_significant": h["B"]["significant"], "parallel_pct": pc,
                     "parallel_p": p["B"]["p_value"],
                     "parallel_significant": p["B"]["significant"],
                     "same_sign": hc is not None and pc is not None and (hc > 0) == (pc > 0)})
    return rows


def _f(x, fmt="{:.1f}"):
    return "-" if x is None else fmt.format(x)


def format_results(results: dict) -> str:
    out = []
    for name in ("steal-overcommit", "steal-smp2"):
        for window, rows in results.get(name, {}).items():
            out.append(f"{name}, window {window}: steal as % of the window "
                       "(diff = guest - host, + = the guest shows more; top = % of the "
                       "time /proc/stat accounted)")
            table = [("cpu", "guest %", "host %", "diff", "top %st")]
            table += [(r["cpu"], _f(r["guest"]), _f(r["host"]), _f(r["diff"], "{:+.1f}"),
                       _f(r["top"])) for r in rows]
            out += format_table(table) + [""]
    if "clock" in results:
        c = results["clock"]
        out.append("clock (parallel): N loops of a fixed length on N vCPUs, time / one loop's; "
                   "the same N loops on CPU 1, time / (N x one loop's); 1.000 = exact")
        table = [("N", "on N vCPUs ms", "ratio", "on CPU 1 ms", "ratio")]
        table += [(r["n"], _f(r["parallel_ms"], "{:.2f}"), _f(r["parallel_ratio"], "{:.3f}"),
                   _f(r["pinned_ms"], "{:.2f}"), _f(r["pinned_ratio"], "{:.3f}"))
                  for r in c["loops"]]
        out += format_table(table)
        hb = c["hackbench"]
        out += [f"hackbench (-g 4 -l 1000, {len(hb['values'])} runs in one boot): "
                f"CoeffVar {_f(hb['cv_pct'], '{:.2f}')}%", ""]
    if "memory-map" in results:
        m = results["memory-map"]
        out.append("memory-map (overcommit8): memory-map changes against MMIO reads of a "
                   "fixed byte on the other vCPUs; misread = a read that returned another "
                   "value (must be 0)")
        table = [("seconds", "switches", "reads", "misread")]
        table.append((_f(m["seconds"], "{:g}"), m["switches"], m["reads"], m["misread"]))
        out += format_table(table) + [""]
    if "direction" in results:
        d = results["direction"]
        for clock in ("host", "parallel"):
            out.append(f"direction, {clock} clock:")
            out.append(abbench.format_report(d[clock]).rstrip("\n"))
            out.append("")
        out.append("direction: B (STEAL) against A (NO_STEAL), %chg + = B better")
        table = [("g", "host %chg", "p", "parallel %chg", "p", "same sign")]
        table += [(r["param"], _f(r["host_pct"], "{:+.2f}"), _f(r["host_p"], "{:.3f}"),
                   _f(r["parallel_pct"], "{:+.2f}"), _f(r["parallel_p"], "{:.3f}"),
                   "yes" if r["same_sign"] else "no") for r in d["agreement"]]
        out += format_table(table)
    return "\n".join(out) + "\n"


def add_lab_args(parser: argparse.ArgumentParser) -> None:
    """--kernel and --qemu, as every command that boots the lab takes them."""
    parser.add_argument("--kernel", required=True, help="bzImage to boot (the test config)")
    parser.add_argument("--qemu", default="lab", help="the lab QEMU (default: `make qemu`'s)")


def resolve(kernel: str, qemu: str) -> lab.Lab:
    """The lab QEMU that --qemu names, once --kernel is known to exist;
    LabCheckError (one line) otherwise."""
    if not Path(kernel).is_file():
        raise LabCheckError(f"no kernel image at {kernel}")
    try:
        return vm.resolve_lab(qemu)[0]
    except vm.VMError as e:
        raise LabCheckError(str(e)) from None


class _Parser(ToolParser):
    tool = "schedsteal-lab"


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="schedsteal-lab", description=__doc__.split("\n\n")[0],
                epilog=__doc__.split("\n\n", 1)[1].split("Exit status")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    v = sub.add_parser("validate", help="run the lab's checks and print their tables")
    add_lab_args(v)
    v.add_argument("--check", action="append", choices=CHECKS,
                   help="run only this check (repeatable; default: all)")
    v.add_argument("--out", metavar="DIR", help="keep the boots' files and results.json here")
    v.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = make_parser().parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    try:
        qemu = resolve(args.kernel, args.qemu)
    except LabCheckError as e:
        print(f"schedsteal-lab: error: {e}", file=sys.stderr)
        return 2
    workdir = args.out or tempfile.mkdtemp(prefix="schedsteal-lab.")
    os.makedirs(workdir, exist_ok=True)
    results = {}
    steps = {"steal-overcommit": lambda: check_steal_overcommit(args.kernel, qemu.binary),
             "steal-smp2": lambda: check_steal_smp2(args.kernel, qemu.binary),
             "clock": lambda: check_clock(args.kernel, qemu.binary, workdir),
             "memory-map": lambda: check_memory_map(args.kernel, qemu.binary),
             "direction": lambda: check_direction(args.kernel, qemu.binary, workdir)}
    try:
        for name in args.check or CHECKS:
            print(f"schedsteal-lab: {name} ...", file=sys.stderr, flush=True)
            results[name] = steps[name]()
    except (LabCheckError, vm.VMError, lab.LabError) as e:
        print(f"schedsteal-lab: FAIL: {e}", file=sys.stderr)
        return 1
    finally:
        with open(os.path.join(workdir, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
    print(json.dumps(results) if args.json else format_results(results), end="" if not args.json
          else "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
