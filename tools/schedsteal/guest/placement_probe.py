"""Placement probe for the two merged changes the series builds on (guest
side): ``python3 guest/placement_probe.py``. Prints one JSON object for
tests/vm/test_placement.py.

    placement_probe.py recent-used [--waker 0 --recent 1 --prev 2] [--rounds 5] [--park]
        select_idle_sibling()'s recent_used_cpu (v4.16, seed 001). Each
        round builds the state the shortcut is for: a sleeping task whose
        previous CPU (--prev) is busy and whose CPU before that (--recent)
        is idle, woken from --waker. The task must wake on --recent and
        recent_used_hit must count it. With --park, --recent is parked
        before the wakeup: the task must wake elsewhere, counted as
        recent_used_miss.
    placement_probe.py numa --tasks pair|N [--rounds 300]
        The NUMA imbalance allowance (v5.12, seed 003; imb_numa_nr today).
        Start a ping-pong pair (pipes) or N busy loops on node 0, widen
        them to every CPU, then sample where they run: report how many
        samples found a task on another node.
"""
import argparse
import os
import subprocess
import time

from .. import schedstat
from ..cpulist import format_cpulist
from . import kernel, print_result, start_running, until

# The wakee: says it is up, then for each byte on stdin prints the CPU it
# runs on. Blocked in read() between wakeups, so each byte is one wakeup.
# (Python 3.11 has no os.sched_getcpu(): libc's.)
WAKEE = ("import ctypes, os\n"
         "getcpu = ctypes.CDLL(None).sched_getcpu\n"
         "print('up', flush=True)\n"
         "while os.read(0, 1):\n"
         "    print(getcpu(), flush=True)\n")


def wake(proc) -> int:
    """One wakeup of the wakee (a pipe write from this CPU: a sync wakeup);
    the CPU it ran on."""
    proc.stdin.write("x")
    proc.stdin.flush()
    return int(proc.stdout.readline())


def asleep(proc) -> bool:
    return until(lambda: kernel.task_state(proc.pid) == "S", tries=1000)


def recent_used_round(args, all_cpus):
    """One round; returns what it saw. The schedstat delta covers the last
    wakeup only."""
    out = {}
    wakee = subprocess.Popen(["taskset", "-c", str(args.recent), "python3", "-c", WAKEE],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    hogs = []
    try:
        assert wakee.stdout.readline().strip() == "up"
        out["asleep_on_recent"] = asleep(wakee) and kernel.task_cpu(wakee.pid) == args.recent
        # recent busy, the wakee allowed on recent and prev: the waker's
        # CPU is not allowed, so the search starts at recent, which is
        # busy; select_idle_sibling() records recent as recent_used_cpu
        # and finds prev idle.
        os.sched_setaffinity(wakee.pid, {args.recent, args.prev})
        hogs.append(start_running(["taskset", "-c", str(args.recent)]))
        out["first_cpu"] = wake(wakee)
        out["asleep_on_prev"] = asleep(wakee) and kernel.task_cpu(wakee.pid) == args.prev
        # Now prev busy, recent idle, every CPU allowed.
        os.sched_setaffinity(wakee.pid, set(all_cpus))
        idle = hogs.pop()
        idle.kill()
        idle.wait()
        hogs.append(start_running(["taskset", "-c", str(args.prev)]))
        if args.park:
            out["park_errno"] = 0
            try:
                kernel.set_parked(str(args.recent))
            except OSError as e:
                out["park_errno"] = e.errno
        before = kernel.read_schedstat()
        out["cpu"] = wake(wakee)
        delta = schedstat.text_deltas(before, kernel.read_schedstat())
        out["recent_used_hit"] = delta["total"]["recent_used_hit"]
        out["recent_used_miss"] = delta["total"]["recent_used_miss"]
    finally:
        if args.park:
            kernel.set_parked("")
        for h in hogs:
            h.kill()
            h.wait()
        wakee.kill()
        wakee.wait()
    return out


def cmd_recent_used(args):
    kernel.enable_schedstats()
    all_cpus = kernel.online_cpus()
    # The waker: this process, on --waker only.
    os.sched_setaffinity(0, {args.waker})
    rounds = [recent_used_round(args, all_cpus) for _ in range(args.rounds)]
    return print_result({"waker": args.waker, "recent": args.recent, "prev": args.prev,
                         "park": args.park, "rounds": rounds})


# A ping-pong pair: the parent forks, prints the child's pid, then both
# pass one byte back and forth for ever.
PAIR = ("import os\n"
        "a_r, a_w = os.pipe()\n"
        "b_r, b_w = os.pipe()\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    while True:\n"
        "        os.read(a_r, 1)\n"
        "        os.write(b_w, b'x')\n"
        "print(child, flush=True)\n"
        "while True:\n"
        "    os.write(a_w, b'x')\n"
        "    os.read(b_r, 1)\n")


def cmd_numa(args):
    nodes = kernel.topology()["numa_nodes"]
    if len(nodes) < 2:
        raise kernel.KernelError(f"needs two NUMA nodes, the guest has {nodes}")
    home, other = set(nodes[0]), set(c for n in nodes[1:] for c in n)
    everything = home | other
    # The sampler sleeps between samples, on the last CPU of another node.
    os.sched_setaffinity(0, {max(other)})
    procs, pids = [], []
    home_list = format_cpulist(sorted(home))
    try:
        if args.tasks == "pair":
            pair = subprocess.Popen(["taskset", "-c", home_list, "python3", "-c", PAIR],
                                    stdout=subprocess.PIPE, text=True)
            procs.append(pair)
            pids = [pair.pid, int(pair.stdout.readline())]
        else:
            procs = [start_running(["taskset", "-c", home_list]) for _ in range(int(args.tasks))]
            pids = [p.pid for p in procs]
        started_home = all(kernel.task_cpu(pid) in home for pid in pids)
        for pid in pids:
            os.sched_setaffinity(pid, everything)
        samples = on_other = most_on_other = 0
        first_on_other = None
        for i in range(args.rounds):
            n = sum(kernel.task_cpu(pid) in other for pid in pids)
            samples += len(pids)
            on_other += n
            most_on_other = max(most_on_other, n)
            if n and first_on_other is None:
                first_on_other = i
            time.sleep(0.01)        # the sampling interval
        final = {pid: kernel.task_cpu(pid) for pid in pids}
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()
    return print_result({"tasks": args.tasks, "home": sorted(home), "other": sorted(other),
                         "started_home": started_home, "samples": samples,
                         "on_other": on_other, "most_on_other": most_on_other,
                         "first_on_other_round": first_on_other,
                         "final_cpus": list(final.values())})


def main(argv=None):
    p = argparse.ArgumentParser(prog="placement_probe.py",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("recent-used")
    r.add_argument("--waker", type=int, default=0)
    r.add_argument("--recent", type=int, default=1)
    r.add_argument("--prev", type=int, default=2)
    r.add_argument("--rounds", type=int, default=5)
    r.add_argument("--park", action="store_true")
    n = sub.add_parser("numa")
    n.add_argument("--tasks", default="pair", help="'pair' or a number of busy loops")
    n.add_argument("--rounds", type=int, default=300)
    args = p.parse_args(argv)
    return {"recent-used": cmd_recent_used, "numa": cmd_numa}[args.action](args)
