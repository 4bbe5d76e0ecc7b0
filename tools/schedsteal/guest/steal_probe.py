"""Idle task stealing probe (guest side): ``python3 guest/sched_probe.py``.

Runs inside a test guest and prints one JSON object on stdout, which the
host-side tests assert on.

    sched_probe.py run [--feature F]... [--trace] [--cgroup-max "Q P"] -- CMD
        Set sched_features, turn schedstats on, snapshot /proc/schedstat,
        run CMD (in a cgroup with that cpu.max if asked), snapshot again.
        With --trace, record sched_migrate_task events with a kernel stack
        for each, and classify the migrations done by idle task stealing
        (all of them, those between LLCs, those between nodes).
    sched_probe.py kunit
        Parse the KTAP results the built-in KUnit suites left in dmesg.
    sched_probe.py pinned [--feature F]... [--then-feature F]... [--cpu N] [--hogs 3]
        Pin CPU hogs to CPU N, make the other CPUs enter idle again and
        again, and report whether CPU N is still in its LLC's overloaded
        set (rq->cfs_overloaded in /sys/kernel/debug/sched/debug); then
        widen one hog's affinity and report whether it left CPU N.
"""
import argparse
import os
import re
import subprocess

from .. import schedstat
from . import kernel, print_result, start_running, stop_hogs, trace, until

MIGRATE = "sched/sched_migrate_task"
# A migration is a steal when set_task_cpu() was called from the steal
# code. The compiler may inline steal_from()/steal_task() into
# sched_balance_newidle(); newidle balance's own migrations go through
# sched_balance_rq() and its detach helpers instead.
STEAL_CALLERS = ("steal_from", "steal_task", "sched_balance_newidle",
                 "steal_from_domain", "steal_beyond_llc")


EVENT_RE = re.compile(r"\[(?P<cpu>\d+)\].*sched_migrate_task: comm=(?P<comm>.*?) "
                      r"pid=(?P<pid>\d+) prio=\d+ orig_cpu=(?P<orig>\d+) "
                      r"dest_cpu=(?P<dest>\d+)")
STACK_RE = re.compile(r"\[(?P<cpu>\d+)\].*<stack trace>")


def parse_trace(text):
    """Migrations with their kernel stacks, from the trace file.

    The trace file merges the per-CPU buffers by timestamp, so another
    CPU's event can come between an event and its stack. Each stack is
    therefore matched to the last event recorded on the same CPU, never
    to the previous line.
    """
    events, last_on_cpu, cur = [], {}, None
    for line in text.splitlines():
        m = EVENT_RE.search(line)
        if m:
            ev = {"cpu": int(m["cpu"]), "comm": m["comm"], "pid": int(m["pid"]),
                  "orig": int(m["orig"]), "dest": int(m["dest"]), "stack": []}
            events.append(ev)
            last_on_cpu[ev["cpu"]] = ev
            cur = None
            continue
        m = STACK_RE.search(line)
        if m:
            # A stack belongs to at most one event.
            cur = last_on_cpu.pop(int(m["cpu"]), None)
        elif cur is not None and line.strip().startswith("=>"):
            cur["stack"].append(line.strip()[2:].strip().split("+")[0])
        elif line.strip() and not line.startswith("#"):
            cur = None
    for e in events:
        # The stack starts in the tracepoint: the caller we want is the
        # frame right after set_task_cpu.
        stack = e["stack"]
        i = stack.index("set_task_cpu") + 1 if "set_task_cpu" in stack else len(stack)
        e["caller"] = stack[i] if i < len(stack) else None
        e["steal"] = e["caller"] in STEAL_CALLERS
    return events


def cmd_run(args):
    for f in args.feature:
        kernel.set_feature(f)
    kernel.enable_schedstats()
    cg = kernel.make_cgroup("probe", args.cgroup_max) if args.cgroup_max else None
    if args.trace:
        trace.start([MIGRATE], 16384, stacktrace=[MIGRATE])
    before = kernel.read_schedstat()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    preexec = None
    if cg:
        def preexec():
            kernel.write(f"{cg}/cgroup.procs", str(os.getpid()))
    proc = subprocess.run(["/bin/sh", "-c", " ".join(cmd)], capture_output=True,
                          text=True, preexec_fn=preexec)
    after = kernel.read_schedstat()
    result = {"status": proc.returncode, "stdout": proc.stdout[-4000:],
              "stderr": proc.stderr[-4000:]}
    if args.trace:
        text, result["trace_lost"] = trace.stop(stacktrace=[MIGRATE])
        events = parse_trace(text)
        topo = kernel.topology()
        llc = {c: g for g in topo["llc_groups"] for c in g}
        node = {c: g for g in topo["numa_nodes"] for c in g}
        steals = [e for e in events if e["steal"]]
        result["migrations"] = len(events)
        # Newidle balance's own pulls: under sched_balance_newidle(), not
        # by the steal code.
        result["newidle_pulls"] = sum(1 for e in events if not e["steal"]
                                      and "sched_balance_newidle" in e["stack"])
        result["steals"] = [{k: e[k] for k in ("comm", "pid", "orig", "dest", "caller")}
                            for e in steals]
        result["cross_llc_steals"] = [e for e in steals
                                      if e["dest"] not in llc.get(e["orig"], ())]
        result["cross_node_steals"] = [e for e in steals
                                       if e["dest"] not in node.get(e["orig"], ())]
    delta = schedstat.text_deltas(before, after)
    result.update({"schedstat_version": delta["version"], "total": delta["total"],
                   "per_cpu": delta["per_cpu"], "schedstat_warnings": delta["warnings"],
                   "features": kernel.features()})
    if cg:
        result["cgroup"] = kernel.cgroup_stat(cg)
    return print_result(result)


def cmd_pinned(args):
    for f in args.feature:
        kernel.set_feature(f)
    kernel.enable_schedstats()
    others = [c for c in kernel.online_cpus() if c != args.cpu]
    # The probe itself stays off CPU N: its own wakeups there would be
    # enqueues, which update CPU N's element of the set.
    os.sched_setaffinity(0, others)
    # taskset execs the looping shell: pinned from birth. Each hog is
    # started only once the one before it runs its loop.
    hogs = []
    result = {"features": None, "cpu": args.cpu}
    try:
        for _ in range(args.hogs):
            hogs.append(start_running(["taskset", "-c", str(args.cpu)]))
        # Runnable, not merely queued: rq->nr_running also counts a task
        # that sleeps while delayed dequeue keeps it queued (a shell that
        # still faults its text in over 9p), and the overloaded set is
        # kept from h_nr_runnable.
        result["hogs_queued"] = until(lambda: hogs_runnable(args.cpu, hogs))
        # Features switched once the hogs run: STEAL switched on now must
        # find CPU N overloaded although nothing is enqueued there.
        if args.then_feature:
            result["runnable_at_switch"] = kernel.root_cfs_rq_field(args.cpu, "h_nr_runnable")
        for f in args.then_feature:
            kernel.set_feature(f)
        if args.then_feature:
            result["overloaded_at_switch"] = kernel.rq_field(args.cpu, "cfs_overloaded")
        before = kernel.read_schedstat()
        # Idle entries on every other CPU: each short task that exits
        # leaves its CPU idle, and an idle CPU tries to steal. CPU N's
        # element is read after every round: a back-off lasts only until
        # the next enqueue on CPU N (a per-CPU kworker's wakeup, say), so
        # one read alone may catch it just back in the set.
        result["overloaded_reads"] = []
        for _ in range(args.rounds):
            for c in others:
                subprocess.run(["taskset", "-c", str(c), "true"], check=True)
            result["overloaded_reads"].append(kernel.rq_field(args.cpu, "cfs_overloaded"))
        after = kernel.read_schedstat()
        result["cfs_overloaded"] = kernel.rq_field(args.cpu, "cfs_overloaded")
        result["nr_running"] = kernel.rq_field(args.cpu, "nr_running")
        delta = schedstat.text_deltas(before, after)
        result["total"] = delta["total"]
        # A task that may move after all must still be taken: widen one
        # hog's affinity (dequeue and enqueue on CPU N: back in the set).
        subprocess.run(["taskset", "-pc", ",".join(map(str, [args.cpu] + others)),
                        str(hogs[0].pid)], check=True, capture_output=True)
        result["widened_left"] = until(lambda: kernel.task_cpu(hogs[0].pid) != args.cpu)
        result["pinned_stayed"] = all(kernel.task_cpu(h.pid) == args.cpu for h in hogs[1:])
    finally:
        stop_hogs(hogs)
    result["features"] = kernel.features()
    return print_result(result)


def hogs_runnable(cpu, hogs):
    """Every hog is runnable (state R) on cpu, each has run its loop for
    a few ticks (its code is in memory: no more faults that sleep), and
    the CPU's root cfs_rq counts them all as runnable."""
    for h in hogs:
        if kernel.task_state(h.pid) != "R" or kernel.task_cpu(h.pid) != cpu:
            return False
        if kernel.task_ticks(h.pid) < HOG_WARM_TICKS:
            return False
    return (kernel.root_cfs_rq_field(cpu, "h_nr_runnable") or 0) >= len(hogs)


# Ticks of CPU time a hog has used before it counts as settled in its loop.
HOG_WARM_TICKS = 3


KTAP_RE = re.compile(r"^\s*(not ok|ok) (\d+) (\S+)")


def cmd_kunit(args):
    """Top-level KTAP results: 'ok N suite' lines at indentation 0."""
    log = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    suites, cases = {}, {}
    for line in log.splitlines():
        body = re.sub(r"^\[[^\]]*\]\s?", "", line)
        m = KTAP_RE.match(body)
        if not m:
            continue
        indented = body[:1] in (" ", "\t")
        (cases if indented else suites)[m[3]] = m[1] == "ok"
    return print_result({"suites": suites, "cases": cases})


def main(argv=None):
    p = argparse.ArgumentParser(prog="sched_probe.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run")
    r.add_argument("--feature", action="append", default=[])
    r.add_argument("--trace", action="store_true")
    r.add_argument("--cgroup-max", metavar="'QUOTA PERIOD'")
    r.add_argument("cmd", nargs=argparse.REMAINDER)
    sub.add_parser("kunit")
    pn = sub.add_parser("pinned")
    pn.add_argument("--feature", action="append", default=[])
    pn.add_argument("--cpu", type=int, default=0)
    pn.add_argument("--hogs", type=int, default=3)
    pn.add_argument("--then-feature", action="append", default=[],
                    help="set once the hogs are queued, before the idle rounds")
    pn.add_argument("--rounds", type=int, default=20)
    args = p.parse_args(argv)
    return {"run": cmd_run, "kunit": cmd_kunit, "pinned": cmd_pinned}[args.action](args)
