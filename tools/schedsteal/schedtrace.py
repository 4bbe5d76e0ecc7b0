"""What the guest's scheduler decided, from a trace of its events.

The ``schedtrace`` command (host side, standard library only). Input: the
text of /sys/kernel/tracing/trace with the events sched_switch,
sched_wakeup, sched_wakeup_new and sched_migrate_task (what
``abbench run --trace-dir`` records). Output, per trace:

``wasted_llc``
    CPU time during which a CPU was idle while another CPU of its LLC was
    overloaded: it had a task waiting behind the running one (or two
    waiting, if idle). That is the time idle task stealing exists to
    remove. ``wasted_machine`` is the same with "another CPU of the
    machine". Both in seconds, and as a percentage of all CPU time
    (``wasted_llc_pct``) and of idle time (``wasted_llc_idle_pct``).
``run_delay``
    How long tasks waited to run: from wakeup (``wakeup``, including the
    first run of a new task) and from preemption (``preempt``) to the
    next time they ran: count, mean, p50, p95, p99, max (microseconds),
    and the total (seconds).
``migrations``
    sched_migrate_task events, split into ``wakeup`` (the task was asleep:
    placement at wakeup) and ``queued`` (it was waiting on a run queue:
    load balancing, stealing, parking), and by distance (``cross_llc``,
    ``cross_node``); ``moved_back`` counts moves that undo the same task's
    previous move within ``--back-ms`` (a ping-pong; ``moved_back_by``
    splits them by the kinds of the two moves, "queued>wakeup": a queued
    task moved, then moved back when it next woke), ``queued_cross_llc``
    the queued moves between LLCs, ``per_task`` is
    moves per task that moved at all.

Only waiting tasks that could move count towards "overloaded": per-CPU
kernel threads (``ksoftirqd/3``, ``kworker/3:1``, ``migration/3`` ...)
are left out. Affinity is not in the trace: a task pinned by the
workload still counts, so compare settings on the same workload.

The window starts at the first event. A CPU's state before its first
event is the task its first line shows running; a task's state before
its first event is unknown and it counts for nothing until then (start
the trace before the workload, and its tasks are all seen).

A ``.gz`` trace cut short (a copy that stopped) is analyzed up to its
last complete line, with a warning naming how many lines that was
(``truncated``, ``lines_read`` in ``--json``); corrupt gzip data is an
error.

Usage::

    schedtrace report trace.txt --llc 0-3 --llc 4-7
    schedtrace report trace.txt --topology topo.json --json
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import zlib
from dataclasses import dataclass

from . import stats
from .cpulist import parse_cpulist
from .cli import ToolParser, read_json
from .guest.trace import SCHED_EVENTS
from .table import format_table

FORMAT = "schedsteal-schedtrace"
FORMAT_VERSION = 1
REQUIRED_EVENTS = SCHED_EVENTS

# "  <comm>-<pid>  [cpu] flags  ts: event: fields"; the flags column and a
# "(tgid)" column are optional trace options.
LINE_RE = re.compile(r"^\s*(?P<task>.*?)-(?P<pid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?"
                     r"\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<ts>\d+\.\d+): "
                     r"(?P<event>\w+): (?P<rest>.*)$")
SWITCH_RE = re.compile(r"prev_comm=(?P<prev_comm>.*) prev_pid=(?P<prev_pid>\d+) "
                       r"prev_prio=-?\d+ prev_state=(?P<prev_state>\S+) ==> "
                       r"next_comm=(?P<next_comm>.*) next_pid=(?P<next_pid>\d+) ")
WAKEUP_RE = re.compile(r"comm=(?P<comm>.*) pid=(?P<pid>\d+) prio=-?\d+ "
                       r"(?:success=\d+ )?target_cpu=(?P<cpu>\d+)")
MIGRATE_RE = re.compile(r"comm=(?P<comm>.*) pid=(?P<pid>\d+) prio=-?\d+ "
                        r"orig_cpu=(?P<orig>\d+) dest_cpu=(?P<dest>\d+)")
# Per-CPU kernel threads: "name/N" or "kworker/N:M[H]" (unbound workers are
# "kworker/uN:M" and can move).
PERCPU_RE = re.compile(r"/\d+(?::\d+H?)?$")
HEADER_RE = re.compile(r"^#\s*entries-in-buffer/entries-written: (\d+)/(\d+)", re.M)

SLEEP, WAIT, RUN = 0, 1, 2
USEC = 1e6


class TraceError(Exception):
    pass


@dataclass
class Topology:
    """CPU -> LLC index and NUMA node index."""

    llc: dict
    node: dict

    @classmethod
    def from_groups(cls, llc_groups, node_groups=None, cpus=None):
        llc = {c: i for i, g in enumerate(llc_groups) for c in g}
        node = {c: i for i, g in enumerate(node_groups or []) for c in g}
        for c in list(llc) + list(cpus or []):
            node.setdefault(c, 0)
            llc.setdefault(c, -1 - c)   # a CPU in no group: an LLC of its own
        return cls(llc, node)

    @classmethod
    def from_json(cls, doc: dict):
        """From guest/topology.py's output (llc_groups, numa_nodes, cpus)."""
        if not isinstance(doc, dict):
            raise TraceError("topology: expected an object with llc_groups "
                             f"(guest/topology.py's output), not {type(doc).__name__}")
        for key, optional in (("llc_groups", False), ("numa_nodes", True)):
            groups = doc.get(key)
            if not (optional and groups is None) and not (
                    isinstance(groups, list) and all(map(_is_cpus, groups))):
                raise TraceError(f"topology: {key!r} must be a list of CPU lists "
                                 "like [[0, 1], [2, 3]]")
        if doc.get("cpus") is not None and not _is_cpus(doc["cpus"]):
            raise TraceError("topology: 'cpus' must be a list of CPUs like [0, 1, 2, 3]")
        return cls.from_groups(doc["llc_groups"], doc.get("numa_nodes"), doc.get("cpus"))

    def llc_of(self, cpu: int) -> int:
        if cpu not in self.llc:     # a CPU the topology did not name
            self.llc[cpu] = -1 - cpu
            self.node.setdefault(cpu, 0)
        return self.llc[cpu]


def _is_cpus(x) -> bool:
    """A list of CPU numbers (non-negative integers)."""
    return isinstance(x, list) and all(
        isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in x)


def entries_lost(text: str) -> int | None:
    """Events the ring buffer dropped (None: no header to tell)."""
    m = HEADER_RE.search(text)
    return None if m is None else int(m[2]) - int(m[1])


def _delay_stats(vals: list) -> dict:
    vals = sorted(vals)
    if not vals:
        return {"count": 0, "mean_us": None, "p50_us": None, "p95_us": None,
                "p99_us": None, "max_us": None, "total_s": 0.0}
    return {"count": len(vals), "mean_us": sum(vals) / len(vals) * USEC,
            "p50_us": stats.percentile(vals, 50) * USEC, "p95_us": stats.percentile(vals, 95) * USEC,
            "p99_us": stats.percentile(vals, 99) * USEC, "max_us": vals[-1] * USEC,
            "total_s": sum(vals)}


class Analyzer:
    """Replays the events in time order and accumulates the figures."""

    def __init__(self, topo: Topology, back_s: float = 0.010):
        self.topo = topo
        self.back_s = back_s
        self.t0 = None
        self.now = None
        self.curr = {}          # cpu -> pid running (0 = idle)
        self.nwait = {}         # cpu -> movable tasks waiting
        self.task = {}          # pid -> (state, cpu, since, kind)
        self.percpu = {}        # pid -> is a per-CPU kthread
        self.ov = {}            # cpu -> overloaded now
        self.ov_llc = {}        # llc -> overloaded CPUs in it
        self.ov_all = 0
        self.flag = {}          # cpu -> (idle, wasted_llc, wasted_machine)
        self.since = {}         # cpu -> when flag last changed
        self.idle_s = {}
        self.busy_s = {}
        self.wasted_llc_s = {}
        self.wasted_machine_s = {}
        self.delays = {"wakeup": [], "preempt": []}
        self.mig = {"total": 0, "wakeup": 0, "queued": 0, "running": 0,
                    "cross_llc": 0, "cross_node": 0, "queued_cross_llc": 0,
                    "moved_back": 0}
        self.last_move = {}     # pid -> (ts, orig, dest, kind)
        self.back_by = {}       # "first>second" kinds -> moves undone
        self.moves = {}         # pid -> moves
        self.events = 0

    # --- CPU state --------------------------------------------------------

    def _cpu(self, cpu: int, running_pid: int) -> None:
        """First sight of a CPU: it has been running running_pid since t0."""
        if cpu in self.curr:
            return
        self.topo.llc_of(cpu)
        self.curr[cpu] = running_pid
        self.nwait[cpu] = 0
        self.ov[cpu] = False
        for d in (self.idle_s, self.busy_s, self.wasted_llc_s, self.wasted_machine_s):
            d[cpu] = 0.0
        self.flag[cpu] = (running_pid == 0, False, False)
        self.since[cpu] = self.t0
        self._refresh(cpu, self.t0)

    def _overloaded(self, cpu: int) -> bool:
        running = 1 if self.curr[cpu] else 0
        return self.nwait[cpu] >= 1 and running + self.nwait[cpu] >= 2

    def _refresh(self, cpu: int, now: float) -> None:
        idle = self.curr[cpu] == 0
        llc = self.topo.llc[cpu]
        mine = 1 if self.ov[cpu] else 0
        new = (idle, idle and self.ov_llc.get(llc, 0) - mine > 0,
               idle and self.ov_all - mine > 0)
        old = self.flag[cpu]
        if new == old:
            return
        self._close(cpu, now)
        self.flag[cpu] = new

    def _close(self, cpu: int, now: float) -> None:
        dt = now - self.since[cpu]
        idle, wl, wm = self.flag[cpu]
        (self.idle_s if idle else self.busy_s)[cpu] += dt
        if wl:
            self.wasted_llc_s[cpu] += dt
        if wm:
            self.wasted_machine_s[cpu] += dt
        self.since[cpu] = now

    def _changed(self, cpus, now: float) -> None:
        """Re-evaluate after CPUs' run queues changed."""
        moved = False
        for cpu in cpus:
            ov = self._overloaded(cpu)
            if ov != self.ov[cpu]:
                self.ov[cpu] = ov
                delta = 1 if ov else -1
                llc = self.topo.llc[cpu]
                self.ov_llc[llc] = self.ov_llc.get(llc, 0) + delta
                self.ov_all += delta
                moved = True
        targets = self.curr if moved else cpus
        for cpu in targets:
            self._refresh(cpu, now)

    # --- task state -------------------------------------------------------

    def _is_percpu(self, pid: int, comm: str) -> bool:
        if pid not in self.percpu:
            self.percpu[pid] = bool(PERCPU_RE.search(comm))
        return self.percpu[pid]

    def _wait(self, pid: int, comm: str, cpu: int, now: float, kind: str) -> None:
        self._cpu(cpu, 0)
        self.task[pid] = (WAIT, cpu, now, kind)
        if not self._is_percpu(pid, comm):
            self.nwait[cpu] += 1

    def _unwait(self, pid: int) -> tuple | None:
        st = self.task.get(pid)
        if st is None or st[0] != WAIT:
            return None
        if not self.percpu.get(pid):
            self.nwait[st[1]] -= 1
        return st

    # --- events -----------------------------------------------------------

    def feed(self, ts: float, cpu: int, line_pid: int, event: str, rest: str) -> None:
        if self.t0 is None:
            self.t0 = ts
        self.now = ts
        self.events += 1
        if event == "sched_switch":
            m = SWITCH_RE.match(rest)
            if m:
                self._switch(ts, cpu, m)
            return
        self._cpu(cpu, line_pid)
        if event in ("sched_wakeup", "sched_wakeup_new"):
            m = WAKEUP_RE.match(rest)
            if m:
                self._wakeup(ts, m)
        elif event == "sched_migrate_task":
            m = MIGRATE_RE.match(rest)
            if m:
                self._migrate(ts, m)

    def _switch(self, ts: float, cpu: int, m) -> None:
        prev, nxt = int(m["prev_pid"]), int(m["next_pid"])
        self._cpu(cpu, prev)
        touched = {cpu}
        if prev:
            # "R" or "R+": preempted, still runnable here
            if m["prev_state"].startswith("R"):
                self._wait(prev, m["prev_comm"], cpu, ts, "preempt")
            else:
                self.task[prev] = (SLEEP, cpu, ts, None)
        if nxt:
            st = self._unwait(nxt)
            if st is not None:
                self.delays[st[3]].append(ts - st[2])
                touched.add(st[1])      # (it waited here, unless migrated unseen)
            self.task[nxt] = (RUN, cpu, ts, None)
            self._is_percpu(nxt, m["next_comm"])
        self.curr[cpu] = nxt
        self._changed(touched, ts)

    def _wakeup(self, ts: float, m) -> None:
        pid, cpu = int(m["pid"]), int(m["cpu"])
        st = self.task.get(pid)
        if st is not None and st[0] in (WAIT, RUN):
            return          # already runnable (a wakeup that found it so)
        self._wait(pid, m["comm"], cpu, ts, "wakeup")
        self._changed({cpu}, ts)

    def _migrate(self, ts: float, m) -> None:
        pid, orig, dest = int(m["pid"]), int(m["orig"]), int(m["dest"])
        self._cpu(orig, 0)
        self._cpu(dest, 0)
        mig = self.mig
        mig["total"] += 1
        self.moves[pid] = self.moves.get(pid, 0) + 1
        if self.topo.llc[orig] != self.topo.llc[dest]:
            mig["cross_llc"] += 1
        if self.topo.node[orig] != self.topo.node[dest]:
            mig["cross_node"] += 1
        st = self.task.get(pid)
        kind = ("queued" if st is not None and st[0] == WAIT else
                "running" if st is not None and st[0] == RUN else "wakeup")
        last = self.last_move.get(pid)
        if last and last[1] == dest and last[2] == orig and ts - last[0] <= self.back_s:
            mig["moved_back"] += 1
            key = f"{last[3]}>{kind}"
            self.back_by[key] = self.back_by.get(key, 0) + 1
        self.last_move[pid] = (ts, orig, dest, kind)
        if st is not None and st[0] == WAIT:
            mig["queued"] += 1
            if self.topo.llc[orig] != self.topo.llc[dest]:
                mig["queued_cross_llc"] += 1
            self._unwait(pid)
            self.task[pid] = (WAIT, dest, st[2], st[3])
            if not self.percpu.get(pid):
                self.nwait[dest] += 1
            self._changed({orig, dest}, ts)
        elif st is not None and st[0] == RUN:
            mig["running"] += 1     # e.g. a stopper push: switched out next
        else:
            mig["wakeup"] += 1

    def summary(self) -> dict:
        end = self.now if self.now is not None else 0.0
        for cpu in self.curr:
            self._close(cpu, end)
        duration = 0.0 if self.t0 is None else end - self.t0
        cpus = sorted(self.curr)
        total = duration * len(cpus)
        idle = sum(self.idle_s.values())
        wl = sum(self.wasted_llc_s.values())
        wm = sum(self.wasted_machine_s.values())

        def pct(x, of):
            return 100.0 * x / of if of > 0 else None

        all_delays = self.delays["wakeup"] + self.delays["preempt"]
        moved = [n for n in self.moves.values() if n]
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION,
            "events": self.events, "duration_s": duration, "cpus": cpus,
            "idle_s": idle, "busy_s": sum(self.busy_s.values()),
            "idle_pct": pct(idle, total),
            "wasted_llc_s": wl, "wasted_machine_s": wm,
            "wasted_llc_pct": pct(wl, total), "wasted_machine_pct": pct(wm, total),
            "wasted_llc_idle_pct": pct(wl, idle),
            "wasted_machine_idle_pct": pct(wm, idle),
            "per_cpu": {str(c): {"idle_s": self.idle_s[c], "busy_s": self.busy_s[c],
                                 "wasted_llc_s": self.wasted_llc_s[c],
                                 "wasted_machine_s": self.wasted_machine_s[c]}
                        for c in cpus},
            "run_delay": {"wakeup": _delay_stats(self.delays["wakeup"]),
                          "preempt": _delay_stats(self.delays["preempt"]),
                          "all": _delay_stats(all_delays)},
            "migrations": dict(self.mig, tasks_moved=len(moved),
                               moved_back_by=dict(sorted(self.back_by.items())),
                               per_task=(sum(moved) / len(moved)) if moved else 0.0,
                               back_ms=self.back_s * 1000),
            "tasks": len(self.task),
        }


def analyze_lines(lines, topo: Topology, back_ms: float = 10.0) -> dict:
    """The summary of the trace lines `lines` (an iterable of str)."""
    events = []
    for line in lines:
        if line.startswith("#"):
            continue
        m = LINE_RE.match(line)
        if m:
            events.append((float(m["ts"]), int(m["cpu"]), int(m["pid"]),
                           m["event"], m["rest"]))
    seen = {e[3] for e in events}
    missing = [e for e in REQUIRED_EVENTS if e not in seen]
    if "sched_switch" in missing:
        raise TraceError("no sched_switch events in the trace: nothing to analyze")
    # Each CPU runs, from the start, what its first line shows: a CPU
    # first seen late (idle and quiet) still counts from the start.
    first = {}
    for ts, cpu, pid, event, rest in events:
        if cpu not in first:
            m = SWITCH_RE.match(rest) if event == "sched_switch" else None
            first[cpu] = int(m["prev_pid"]) if m else pid
    an = Analyzer(topo, back_ms / 1000.0)
    an.t0 = events[0][0]
    for cpu, pid in sorted(first.items()):
        an._cpu(cpu, pid)
    for ts, cpu, pid, event, rest in events:
        an.feed(ts, cpu, pid, event, rest)
    out = an.summary()
    out["events_missing"] = missing
    return out


class _Reader:
    """The lines of an open trace file, counted, with its header ("#"
    lines) kept. A gzip stream that ends early ends them: ``truncated``
    is set and the line it cut is dropped, as it may have lost digits."""

    def __init__(self, f):
        self.f = f
        self.lines = 0
        self.truncated = False
        self.header = []

    def __iter__(self):
        pending = None
        try:
            for line in self.f:
                if pending is not None:
                    yield pending
                pending = line
                self.lines += 1
                if line.startswith("#"):
                    self.header.append(line)
        except EOFError:
            self.truncated = True
            if pending is not None and not pending.endswith("\n"):
                pending = None
                self.lines -= 1
        if pending is not None:
            yield pending


def analyze_file(path: str, topo: Topology, back_ms: float = 10.0) -> dict:
    """A trace file's summary, with ``entries_lost`` from its header,
    ``lines_read``, and ``truncated``: a .gz cut short, of which the
    complete lines were analyzed."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", errors="replace") as f:
            reader = _Reader(f)
            out = analyze_lines(reader, topo, back_ms)
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None
    except zlib.error as exc:
        raise TraceError(f"cannot read {path}: corrupt gzip data ({exc})") from None
    except TraceError as exc:
        if not reader.truncated:
            raise
        raise TraceError(f"{path}: truncated (the gzip stream ends early) after "
                         f"{reader.lines} complete lines: {exc}") from None
    out.update(entries_lost=entries_lost("".join(reader.header)),
               lines_read=reader.lines, truncated=reader.truncated)
    return out


# --- command line ------------------------------------------------------------

def topology_from_args(args) -> Topology:
    if args.topology and args.llc:
        raise TraceError("--topology and --llc exclude each other")
    if args.topology:
        return Topology.from_json(read_json(args.topology, TraceError))
    if not args.llc:
        raise TraceError("which CPUs share an LLC? give --topology FILE.json "
                         "or --llc CPULIST per LLC")
    groups = {}
    for flag, values in (("--llc", args.llc), ("--node", args.node or [])):
        groups[flag] = [_cpulist(flag, v) for v in values]
        seen = set()
        for group in groups[flag]:
            if seen & set(group):
                raise TraceError(f"CPU {min(seen & set(group))} is in two {flag} groups")
            seen |= set(group)
    return Topology.from_groups(groups["--llc"], groups["--node"])


CPULIST_RE = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")


def _cpulist(flag: str, text: str) -> list:
    """A strict cpulist: "0-3,8"; TraceError on anything else."""
    if not CPULIST_RE.match(text):
        raise TraceError(f"{flag} {text!r}: not a CPU list like 0-3,8")
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if hi and int(hi) < int(lo):
            raise TraceError(f"{flag} {text!r}: range {part} runs backwards")
    return parse_cpulist(text)


def _f(x, fmt="{:.2f}"):
    return "-" if x is None else fmt.format(x)


def format_summary(name: str, s: dict) -> str:
    lines = [f"{name}: {s['events']} events, {s['duration_s']:.3f} s on "
             f"{len(s['cpus'])} CPUs"]
    if s.get("truncated"):
        lines.append(f"WARNING: truncated: only the first {s['lines_read']} lines "
                     "of the trace are in these figures")
    if s.get("entries_lost"):
        lines.append(f"WARNING: the ring buffer dropped {s['entries_lost']} events: "
                     "the figures are wrong")
    if s.get("events_missing"):
        lines.append("note: no " + ", ".join(s["events_missing"]) + " events seen")
    lines += format_table([
        ("", "seconds", "% of CPU time", "% of idle"),
        ("idle", _f(s["idle_s"], "{:.4f}"), _f(s["idle_pct"]), ""),
        ("wasted_llc", _f(s["wasted_llc_s"], "{:.4f}"), _f(s["wasted_llc_pct"]),
         _f(s["wasted_llc_idle_pct"])),
        ("wasted_machine", _f(s["wasted_machine_s"], "{:.4f}"),
         _f(s["wasted_machine_pct"]), _f(s["wasted_machine_idle_pct"])),
    ], left=(0,))
    rows = [("run_delay", "count", "mean_us", "p50_us", "p95_us", "p99_us",
             "max_us", "total_s")]
    for kind in ("wakeup", "preempt", "all"):
        d = s["run_delay"][kind]
        rows.append((kind, str(d["count"]), _f(d["mean_us"], "{:.1f}"),
                     _f(d["p50_us"], "{:.1f}"), _f(d["p95_us"], "{:.1f}"),
                     _f(d["p99_us"], "{:.1f}"), _f(d["max_us"], "{:.1f}"),
                     _f(d["total_s"], "{:.4f}")))
    lines += [""] + format_table(rows, left=(0,))
    m = s["migrations"]
    lines += [""] + format_table([
        ("migrations", "total", "wakeup", "queued", "running", "cross_llc",
         "cross_node", f"moved_back({m['back_ms']:g}ms)", "per_task"),
        ("", str(m["total"]), str(m["wakeup"]), str(m["queued"]), str(m["running"]),
         str(m["cross_llc"]), str(m["cross_node"]), str(m["moved_back"]),
         _f(m["per_task"])),
    ], left=(0,))
    if m.get("moved_back_by"):
        lines.append("moved_back by kinds (first>second): " + ", ".join(
            f"{k} {v}" for k, v in m["moved_back_by"].items()))
    return "\n".join(lines) + "\n"


def cmd_report(args) -> int:
    topo = topology_from_args(args)
    if args.back_ms <= 0:
        raise TraceError("--back-ms must be > 0")
    results = {}
    for n, path in enumerate(args.trace, 1):
        if len(args.trace) > 1:
            print(f"schedtrace: [{n}/{len(args.trace)}] {path}", file=sys.stderr)
        results[path] = analyze_file(path, topo, args.back_ms)
        if results[path]["truncated"]:
            print(f"schedtrace: warning: {path}: truncated (the gzip stream ends early): "
                  f"analyzed the {results[path]['lines_read']} complete lines read",
                  file=sys.stderr)
    if args.json:
        json.dump(results if len(results) > 1 else results[args.trace[0]],
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n".join(format_summary(p, s) for p, s in results.items()))
    lost = any(s.get("entries_lost") for s in results.values())
    return 1 if lost else 0


def build_parser() -> argparse.ArgumentParser:
    p = ToolParser(prog="schedtrace", description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=ToolParser)
    rep = sub.add_parser("report", help="wasted idle, run delay and migrations of traces")
    rep.add_argument("trace", nargs="+",
                     help="text of /sys/kernel/tracing/trace (.gz: compressed)")
    rep.add_argument("--topology", metavar="FILE.json",
                     help="guest/topology.py output (llc_groups, numa_nodes)")
    rep.add_argument("--llc", action="append", metavar="CPULIST",
                     help="CPUs of one LLC (repeat per LLC)")
    rep.add_argument("--node", action="append", metavar="CPULIST",
                     help="CPUs of one NUMA node (repeat per node; default: one node)")
    rep.add_argument("--back-ms", type=float, default=10.0,
                     help="a move undone within this many ms is moved_back "
                     "(default: %(default)s)")
    rep.add_argument("--json", action="store_true", help="print JSON")
    rep.set_defaults(func=cmd_report)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except TraceError as exc:
        print(f"schedtrace: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
