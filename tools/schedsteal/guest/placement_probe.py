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
    placement_probe.py numa --tasks pair|N [--rounds 300] [--trials 1]
        The NUMA imbalance allowance (v5.12, seed 003; imb_numa_nr today).
        Start a ping-pong pair (pipes) or N busy loops on node 0, widen
        them to every CPU, then sample where they run: report how many
        samples found a task on another node. kept_home: fewer than a
        quarter of the samples on another node and never two tasks there
        at once. With --trials N, fresh tasks are started again, up to N
        trials, until one keeps home; every trial is reported.
    placement_probe.py idle-set [--idle 3] [--waker 0] [--prev 1] [--rounds 5] [--park]
        SIS_SPARSE, the LLC's set of idle CPUs for wakeups (issue 10).
        Every CPU of --idle's LLC but --idle runs a pinned busy loop. Each
        round: with NO_SIS_SPARSE a task runs on --idle and ends, so
        --idle must be out of the set (rq->sis_idle 0); switching
        SIS_SPARSE on must put it in at once (it stays in the idle loop,
        never passing the idle class); then a task that last ran on the
        busy --prev, woken from the busy --waker, must be found --idle by
        the set's walk. With --park, --idle is parked first: it must stay
        out of the set and the task must wake elsewhere; unparking it with
        SIS_SPARSE on must put it in at once. SIS_UTIL is off during the
        rounds: with 3 of 4 CPUs busy its overloaded exit (nr_idle_scan 0)
        returns before either search once the loops' utilisation has
        ramped up (after 2-3 rounds), so the rounds would show SIS_UTIL.

A wakee counts as asleep once it is off its runqueue (kernel.task_blocked):
state S alone also holds while it is preempted on its way to sleep or
kept queued by delayed dequeue, and then its wakeup requeues it on its
CPU without any search (seen: 1 round in 30).
"""
import argparse
import os
import signal
import subprocess
import time

from .. import schedstat
from ..cpulist import format_cpulist
from . import kernel, print_result, start_running, stop_hogs, until

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
    """Whether the wakee came to sleep off its runqueue within 10 s, so
    that its next wakeup is placed (see the module's docstring)."""
    return until(lambda: kernel.task_state(proc.pid) == "S"
                 and kernel.task_blocked(proc.pid), tries=1000)


def start_wakee(cpu: int) -> subprocess.Popen:
    """The wakee, pinned to cpu; returns once it is up (and about to block)."""
    wakee = subprocess.Popen(["taskset", "-c", str(cpu), "python3", "-c", WAKEE],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if wakee.stdout.readline().strip() != "up":
        stop_hogs([wakee])
        raise RuntimeError("the wakee did not start")
    return wakee


# Wakeups the recent-used setup may take to reach prev (recent_used_round).
SETUP_TRIES = 5


def recent_used_round(args, all_cpus):
    """One round; returns what it saw. The schedstat delta covers the last
    wakeup only."""
    out = {}
    wakee = start_wakee(args.recent)
    hogs = []
    try:
        out["asleep_on_recent"] = asleep(wakee) and kernel.task_cpu(wakee.pid) == args.recent
        # recent busy, the wakee allowed on recent and prev: the waker's
        # CPU is not allowed, so the search starts at recent, which is
        # busy; select_idle_sibling() records recent as recent_used_cpu
        # and finds prev idle.
        os.sched_setaffinity(wakee.pid, {args.recent, args.prev})
        hogs.append(start_running(["taskset", "-c", str(args.recent)]))
        # The setup's wakeup must find prev idle; a kthread or softirq
        # there at that instant keeps the wakee on the busy recent CPU
        # (seen: 1 round in 20 in a CI run). Woken again from the same
        # state until it reaches prev: the wakeup under test is the next.
        for out["setup_tries"] in range(1, SETUP_TRIES + 1):
            out["prev_nr_running"] = kernel.rq_field(args.prev, "nr_running")
            out["first_cpu"] = wake(wakee)
            if not asleep(wakee) or out["first_cpu"] == args.prev:
                break
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
        stop_hogs([wakee, *hogs])
    return out


def cmd_recent_used(args):
    kernel.enable_schedstats()
    all_cpus = kernel.online_cpus()
    # The waker: this process, on --waker only.
    os.sched_setaffinity(0, {args.waker})
    # Device interrupts go to the waker's CPU for the rounds, as in
    # cmd_idle_set: one on prev at the first wakeup made it busy, and the
    # wakee stayed on the busy recent CPU (1 round in 5, in a CI run with
    # a build beside it).
    # The setup's first wakeup must reach prev through the LLC scan, which
    # SIS_UTIL may cut short when the LLC looks busy; the shortcut under
    # test comes before that scan either way.
    irqs = kernel.steer_irqs(str(args.waker))
    kernel.set_feature("NO_SIS_UTIL")
    try:
        rounds = [recent_used_round(args, all_cpus) for _ in range(args.rounds)]
    finally:
        kernel.set_feature("SIS_UTIL")
        kernel.restore_irqs(irqs)
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


def numa_trial(args, home, other) -> dict:
    """One trial: start the tasks on node 0, widen them to every CPU,
    sample where they run."""
    everything = home | other
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
        stop_hogs(procs)
        if args.tasks == "pair" and len(pids) == 2:
            # The pair's child holds both pipes' ends: no EOF ever wakes it.
            try:
                os.kill(pids[1], signal.SIGKILL)
            except ProcessLookupError:
                pass
    return {"started_home": started_home, "samples": samples,
            "on_other": on_other, "most_on_other": most_on_other,
            "first_on_other_round": first_on_other,
            "final_cpus": list(final.values()),
            "kept_home": on_other < samples // 4 and most_on_other <= 1}


def cmd_numa(args):
    nodes = kernel.topology()["numa_nodes"]
    if len(nodes) < 2:
        raise kernel.KernelError(None, f"needs two NUMA nodes, the guest has {nodes}")
    if args.trials < 1:
        raise kernel.KernelError(None, f"--trials must be at least 1, not {args.trials}")
    home, other = set(nodes[0]), set(c for n in nodes[1:] for c in n)
    # The sampler sleeps between samples, on the last CPU of another node.
    os.sched_setaffinity(0, {max(other)})
    trials = []
    for _ in range(args.trials):
        trials.append(numa_trial(args, home, other))
        if trials[-1]["kept_home"]:
            break
    # The last trial's figures at the top, every trial's under "trials".
    return print_result({"tasks": args.tasks, "home": sorted(home), "other": sorted(other),
                         **trials[-1], "trials": trials})


def idle_set_round(args, llc):
    """One round; returns what it saw. Features are left NO_SIS_SPARSE."""
    out = {}
    kernel.set_feature("NO_SIS_SPARSE")
    subprocess.run(["taskset", "-c", str(args.idle), "true"], check=True)
    out["sis_idle_off"] = kernel.rq_field(args.idle, "sis_idle")
    kernel.set_feature("SIS_SPARSE")
    out["sis_idle_on"] = kernel.rq_field(args.idle, "sis_idle")
    wakee = start_wakee(args.prev)
    try:
        out["asleep_on_prev"] = asleep(wakee) and kernel.task_cpu(wakee.pid) == args.prev
        os.sched_setaffinity(wakee.pid, set(llc))
        before = kernel.read_schedstat()
        out["idle_nr_running"] = kernel.rq_field(args.idle, "nr_running")
        out["idle_curr"] = kernel.rq_field(args.idle, "curr->pid")
        out["idle_in_set"] = kernel.rq_field(args.idle, "sis_idle")
        out["cpu"] = wake(wakee)
        delta = schedstat.text_deltas(before, kernel.read_schedstat())["total"]
        for f in ("found_idle_cpu_easy", "found_idle_cpu", "found_idle_core",
                  "nofound_idle_cpu"):
            out[f] = delta[f]
    finally:
        stop_hogs([wakee])
        kernel.set_feature("NO_SIS_SPARSE")
    return out


# Reads of the debug file while the just-unparked CPU runs something
# else (a kworker, a stopper: under TCG the vCPU may not get a host CPU for
# a while), before giving up.
UNPARK_READS = 200


def unparked_in_set(cpu):
    """(sis_idle, busy reads) of a CPU just unparked, read at a moment its
    current task is the idle task: then it must be in the set, whether the
    unpark put it there or its last idle entry did. None when every read
    found it busy."""
    for n in range(UNPARK_READS):
        got = kernel.rq_fields(cpu, ("curr->pid", "sis_idle"))
        if got["curr->pid"] == 0:
            return got["sis_idle"], n
    return None, UNPARK_READS


def cmd_idle_set(args):
    kernel.enable_schedstats()
    llc = kernel.llc_of_cpus()[args.idle]
    busy = [c for c in llc if c != args.idle]
    if args.waker not in busy or args.prev not in busy:
        raise kernel.KernelError(None, f"--waker and --prev must be CPUs of {list(llc)} "
                                       f"other than --idle {args.idle}")
    # The waker: this process, on a busy CPU.
    os.sched_setaffinity(0, {args.waker})
    hogs = []
    kernel.set_feature("NO_SIS_UTIL")
    # The idle CPU must stay idle: the 9p root's interrupts (every file
    # this probe and its tasks read) landed on CPU 3 in an smt4 boot, and
    # a wakeup that came while it handled one found no idle CPU (3 rounds
    # in 30). They go to the waker's CPU for the rounds.
    irqs = kernel.steer_irqs(str(args.waker))
    try:
        hogs = [start_running(["taskset", "-c", str(c)]) for c in busy]
        if args.park:
            kernel.set_parked(str(args.idle))
        rounds = [idle_set_round(args, llc) for _ in range(args.rounds)]
        if args.park:
            kernel.set_feature("SIS_SPARSE")
            kernel.set_parked("")
            unparked, busy_reads = unparked_in_set(args.idle)
            kernel.set_feature("NO_SIS_SPARSE")
    finally:
        if args.park:
            kernel.set_parked("")
        stop_hogs(hogs)
        kernel.set_feature("SIS_UTIL")
        kernel.restore_irqs(irqs)
    result = {"idle": args.idle, "waker": args.waker, "prev": args.prev,
              "llc": list(llc), "park": args.park, "rounds": rounds}
    if args.park:
        result["sis_idle_after_unpark"] = unparked
        result["unpark_busy_reads"] = busy_reads
    return print_result(result)


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
    n.add_argument("--trials", type=int, default=1,
                   help="run again with fresh tasks, up to this many times, until one "
                        "trial keeps the tasks home (kept_home)")
    i = sub.add_parser("idle-set")
    i.add_argument("--idle", type=int, default=3)
    i.add_argument("--waker", type=int, default=0)
    i.add_argument("--prev", type=int, default=1)
    i.add_argument("--rounds", type=int, default=5)
    i.add_argument("--park", action="store_true")
    args = p.parse_args(argv)
    return {"recent-used": cmd_recent_used, "numa": cmd_numa,
            "idle-set": cmd_idle_set}[args.action](args)
