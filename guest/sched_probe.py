#!/usr/bin/env python3
"""Guest-side probes for the scheduler tests (standard library only).

Runs inside a test guest and prints one JSON object on stdout, which the
host-side tests assert on.

    sched_probe.py run [--feature F]... [--trace] [--cgroup-max "Q P"] -- CMD
        Set sched_features, turn schedstats on, snapshot /proc/schedstat,
        run CMD (in a cgroup with that cpu.max if asked), snapshot again.
        With --trace, record sched_migrate_task events with a kernel stack
        for each, and classify the migrations done by idle task stealing.
    sched_probe.py kunit
        Parse the KTAP results the built-in KUnit suites left in dmesg.
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from schedsteal import schedstat  # noqa: E402
from schedsteal.schedstat import parse_cpulist  # noqa: E402

FEATURES = "/sys/kernel/debug/sched/features"
TRACING = "/sys/kernel/tracing"
CGROUP = "/sys/fs/cgroup"
# A migration is a steal when set_task_cpu() was called from the steal
# code. The compiler may inline steal_from()/steal_task() into
# sched_balance_newidle(); newidle balance's own migrations go through
# sched_balance_rq() and its detach helpers instead.
STEAL_CALLERS = ("steal_from", "steal_task", "sched_balance_newidle")


def write(path, value):
    with open(path, "w") as f:
        f.write(value)


def read(path):
    with open(path) as f:
        return f.read()


def llc_of_each_cpu():
    """cpu -> frozenset of the CPUs sharing its last-level cache."""
    out = {}
    for cpu in parse_cpulist(read("/sys/devices/system/cpu/online")):
        base = f"/sys/devices/system/cpu/cpu{cpu}/cache"
        idx = max((d for d in os.listdir(base) if d.startswith("index")),
                  key=lambda d: int(read(f"{base}/{d}/level")))
        out[cpu] = frozenset(parse_cpulist(read(f"{base}/{idx}/shared_cpu_list")))
    return out


def trace_start():
    write(f"{TRACING}/tracing_on", "0")
    write(f"{TRACING}/buffer_size_kb", "16384")
    write(f"{TRACING}/trace", "")
    ev = f"{TRACING}/events/sched/sched_migrate_task"
    write(f"{ev}/trigger", "stacktrace")
    write(f"{ev}/enable", "1")
    write(f"{TRACING}/tracing_on", "1")


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


def trace_stop():
    # The event stays enabled: disabling it would patch code (see vm.py).
    write(f"{TRACING}/tracing_on", "0")
    ev = f"{TRACING}/events/sched/sched_migrate_task"
    write(f"{ev}/trigger", "!stacktrace")
    text = read(f"{TRACING}/trace")
    return parse_trace(text), trace_lost(text)


class TraceError(Exception):
    pass


# Only a comment line is the header: an event's text may quote anything.
LOST_RE = re.compile(r"^#\s*entries-in-buffer/entries-written: (\d+)/(\d+)", re.M)


def trace_lost(text):
    """Events the ring buffer dropped, from the trace file's header.

    Without the header nothing says whether events were lost, and a
    silent 0 would pass every "trace_lost == 0" check: TraceError."""
    m = LOST_RE.search(text)
    if not m:
        raise TraceError("trace has no entries-in-buffer/entries-written "
                         "header: cannot tell how many events were lost")
    return int(m[2]) - int(m[1])


def cpu_fields_delta(before, after):
    a = schedstat.parse_schedstat(before)
    b = schedstat.parse_schedstat(after)
    total, per_cpu = {}, {}
    for cpu, st in b.cpus.items():
        if cpu not in a.cpus:
            continue
        d = {k: v - a.cpus[cpu].fields.get(k, 0) for k, v in st.fields.items()}
        per_cpu[cpu] = d
        for k, v in d.items():
            total[k] = total.get(k, 0) + v
    return b.version, total, per_cpu


def make_cgroup(name, cpu_max):
    if not os.path.ismount(CGROUP):
        subprocess.run(["mount", "-t", "cgroup2", "none", CGROUP], check=True)
    write(f"{CGROUP}/cgroup.subtree_control", "+cpu")
    path = f"{CGROUP}/{name}"
    os.makedirs(path, exist_ok=True)
    write(f"{path}/cpu.max", cpu_max)
    return path


def cgroup_stat(path):
    return {k: int(v) for k, v in (ln.split() for ln in read(f"{path}/cpu.stat").splitlines())}


def cmd_run(args):
    for f in args.feature:
        write(FEATURES, f)
    write("/proc/sys/kernel/sched_schedstats", "1")
    cg = make_cgroup("probe", args.cgroup_max) if args.cgroup_max else None
    if args.trace:
        trace_start()
    before = read("/proc/schedstat")
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    preexec = None
    if cg:
        def preexec():
            write(f"{cg}/cgroup.procs", str(os.getpid()))
    proc = subprocess.run(["/bin/sh", "-c", " ".join(cmd)], capture_output=True,
                          text=True, preexec_fn=preexec)
    after = read("/proc/schedstat")
    result = {"status": proc.returncode, "stdout": proc.stdout[-4000:],
              "stderr": proc.stderr[-4000:]}
    if args.trace:
        events, lost = trace_stop()
        llc = llc_of_each_cpu()
        steals = [e for e in events if e["steal"]]
        result["migrations"] = len(events)
        result["trace_lost"] = lost
        result["steals"] = [{k: e[k] for k in ("comm", "pid", "orig", "dest", "caller")}
                            for e in steals]
        result["cross_llc_steals"] = [e for e in steals
                                      if e["dest"] not in llc.get(e["orig"], ())]
    version, total, per_cpu = cpu_fields_delta(before, after)
    result.update({"schedstat_version": version, "total": total, "per_cpu": per_cpu,
                   "features": read(FEATURES).split()})
    if cg:
        result["cgroup"] = cgroup_stat(cg)
    json.dump(result, sys.stdout)
    print()
    return 0


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
    json.dump({"suites": suites, "cases": cases}, sys.stdout)
    print()
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="sched_probe", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run")
    r.add_argument("--feature", action="append", default=[])
    r.add_argument("--trace", action="store_true")
    r.add_argument("--cgroup-max", metavar="'QUOTA PERIOD'")
    r.add_argument("cmd", nargs=argparse.REMAINDER)
    sub.add_parser("kunit")
    args = p.parse_args(argv)
    return cmd_run(args) if args.action == "run" else cmd_kunit(args)


if __name__ == "__main__":
    sys.exit(main())
