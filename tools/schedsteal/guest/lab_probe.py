"""The lab's validation probe (guest side): ``python3 guest/lab_probe.py``.

Checks the instrument, not the kernel (docs/lab.md). Prints one JSON
object on stdout.

    lab_probe.py loops --busyloop PATH --iterations N --series 1,2,4 [--pinned CPU]
        For each n of the series, start n copies of busyloop (a loop of a
        fixed instruction count), each pinned to its own CPU 0..n-1 (or
        all to CPU --pinned), let them go at once and report the batch's
        time (first start to last end, CLOCK_MONOTONIC) and each loop's.
    lab_probe.py steal --label NAME --seconds S [--busy]
        A measurement window of S seconds (with a busy loop pinned to each
        CPU if --busy): /proc/stat of every CPU before and after, and the
        marks $SCHEDSTEAL_OUT/mark-NAME-start and mark-NAME-end written
        at the two snapshots, for the host to sample its side at the
        same moments (lab.StealMonitor).
"""
import argparse
import os
import subprocess
import time

from .. import schedstat
from . import kernel, print_result, start_running, stop_hogs


def run_batch(busyloop: str, iterations: int, cpus: list[int]) -> dict:
    """One copy of busyloop per entry of cpus (pinned there), released
    together by closing their standard input once every copy says it is
    ready (loaded and waiting: loading from 9p takes a while)."""
    procs = []
    try:
        for cpu in cpus:
            procs.append(subprocess.Popen(
                ["taskset", "-c", str(cpu), busyloop, str(iterations)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for p in procs:
            line = p.stdout.readline()
            if line != "ready\n":
                raise RuntimeError(f"busyloop did not start ({line!r})")
        for p in procs:
            p.stdin.close()
        times = []
        for p in procs:
            out = p.stdout.read()
            p.stdout.close()
            if p.wait() != 0:
                raise RuntimeError(f"busyloop exited with status {p.returncode}")
            start, end = (int(x) for x in out.split())
            times.append((start, end))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return {"n": len(cpus), "cpus": sorted(set(cpus)),
            "batch_ns": max(e for _, e in times) - min(s for s, _ in times),
            "loop_ns": [e - s for s, e in times]}


def cmd_loops(args) -> int:
    series = [int(x) for x in args.series.split(",")]
    online = kernel.online_cpus()
    if max(series) > len(online) and args.pinned is None:
        raise SystemExit(f"lab_probe: --series asks for {max(series)} CPUs, "
                         f"the guest has {len(online)}")
    # The probe itself out of the way of the loops: on the last CPU.
    os.sched_setaffinity(0, {online[-1]})
    batches = []
    for n in series:
        cpus = [args.pinned] * n if args.pinned is not None else online[:n]
        batches.append(run_batch(args.busyloop, args.iterations, cpus))
    return print_result({"iterations": args.iterations, "pinned": args.pinned,
                         "batches": batches})


def write_mark(name: str) -> None:
    path = os.path.join(os.environ["SCHEDSTEAL_OUT"], f"mark-{name}")
    with open(path, "w") as f:
        f.write(f"{time.monotonic_ns()}\n")


def cmd_steal(args) -> int:
    cpus = kernel.online_cpus()
    hogs = []
    try:
        if args.busy:
            hogs = [start_running(["taskset", "-c", str(c)]) for c in cpus]
        # The window runs from one /proc/stat snapshot to the other; each
        # mark follows its snapshot at once, and the host samples its side
        # when it sees the mark: both ends lag alike.
        t0 = time.monotonic()
        before = schedstat.parse_proc_stat(kernel.read(kernel.STAT))
        write_mark(f"{args.label}-start")
        # The window itself: its length is what is measured, nothing
        # waits on it.
        time.sleep(args.seconds)
        window = time.monotonic() - t0
        after = schedstat.parse_proc_stat(kernel.read(kernel.STAT))
        write_mark(f"{args.label}-end")
    finally:
        stop_hogs(hogs)
    per_cpu = {}
    for c in cpus:
        d = {k: after[f"cpu{c}"][k] - before[f"cpu{c}"][k] for k in schedstat.PROC_STAT_COLUMNS}
        per_cpu[str(c)] = d
    return print_result({"label": args.label, "busy": args.busy, "window_s": window,
                         "user_hz": os.sysconf("SC_CLK_TCK"), "per_cpu": per_cpu})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="lab_probe.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    lo = sub.add_parser("loops")
    lo.add_argument("--busyloop", required=True)
    lo.add_argument("--iterations", type=int, required=True)
    lo.add_argument("--series", required=True, help="loop counts, e.g. 1,2,4,8")
    lo.add_argument("--pinned", type=int, help="pin every loop to this CPU")
    st = sub.add_parser("steal")
    st.add_argument("--label", required=True)
    st.add_argument("--seconds", type=float, required=True)
    st.add_argument("--busy", action="store_true")
    args = p.parse_args(argv)
    return {"loops": cmd_loops, "steal": cmd_steal}[args.action](args)
