"""Record, report and compare /proc/schedstat deltas (a small `perf sched stats`).

Usage::

    # snapshot /proc/schedstat and /proc/stat around a command; exits with its code
    python3 -m schedsteal.schedstat record -o base.json -- hackbench 4 process 10000
    # per-CPU averaged summary + every raw field; optionally domains and per-CPU rows
    python3 -m schedsteal.schedstat report base.json --domains --per-cpu
    python3 -m schedsteal.schedstat report base.json --json
    # compare a baseline recording (A) against a patched-kernel recording (B);
    # %delta = (B-A)/A, + = B higher (a counter is not better or worse, unlike
    # abbench's %chg where + = B better)
    python3 -m schedsteal.schedstat diff base.json new.json
    # print one raw snapshot as a table
    python3 -m schedsteal.schedstat show /proc/schedstat

From Python (the A/B bench runner)::

    from schedsteal import schedstat as ss
    from schedsteal.guest import kernel
    before = kernel.schedstat_snapshot()   # {"time", "schedstat", "stat"}
    rc = run_the_workload()
    after = kernel.schedstat_snapshot()
    rec = ss.make_recording(before, after, cmd, rc)
    rep = ss.compute_report(rec)           # the dict `report --json` prints

Field layout (verified against Documentation/scheduler/sched-stats.rst and
kernel/sched/stats.c show_schedstat() of Linux 6.6 (v15), 6.12 (v16) and
7.3.4 (v17); v17 also against a real /proc/schedstat of Debian's 7.3.4, see
tests/unit/fixtures/schedstat/README.md).  Which kernels print which
version is said where each is registered (``kernels=``) and in
``schedstat --help``: upstream 15 up to 6.9, 16 in 6.10-6.13 (the
enum cpu_idle_type reorder, merged for 6.10), 17 from 6.14 (domain names
and the split lb_imbalance, merged for 6.14); 116-118 are this series'.

* ``cpuN`` lines, all versions: yld_count array_exp sched_count sched_goidle
  ttwu_count ttwu_local rq_cpu_time run_delay pcount.  array_exp is the legacy
  O(1) field, always 0; rq_cpu_time and run_delay are nanoseconds.
* ``domainN [name] <cpumask> ...``: three load-balance blocks, one per idle
  type, then alb_count alb_failed alb_pushed sbe_count sbe_balanced sbe_pushed
  sbf_count sbf_balanced sbf_pushed ttwu_wake_remote ttwu_move_affine
  ttwu_move_balance.  Block fields are named ``<field>_<idletype>`` with idle
  types ``idle``, ``busy`` and ``newidle``, e.g. ``lb_count_busy``.

  ======= ===================== =========================================== =====
  version block order           block fields                                name
  ======= ===================== =========================================== =====
  15      idle, busy, newidle   lb_count lb_balanced lb_failed lb_imbalance no
                                lb_gained lb_hot_gained lb_nobusyq
                                lb_nobusyg (8)
  16      busy, idle, newidle   same 8 (enum cpu_idle_type reordered)       no
  17      busy, idle, newidle   lb_imbalance split into lb_imbalance_load,  yes
                                _util, _task, _misfit (11)
  116     busy, idle, newidle   as 16; cpu lines add the sched-steal         no
                                fields (STEAL_CPU_FIELDS)
  117     busy, idle, newidle   as 116; cpu lines add the parked-CPU        no
                                fields (PARK_CPU_FIELDS)
  118     busy, idle, newidle   as 117; cpu lines add stealing beyond the   no
                                LLC (FAR_STEAL_CPU_FIELDS)
  ======= ===================== =========================================== =====

A new layout is one call (later patches add cpu fields and bump the version)::

    register_version(18, CPU_FIELDS + ["steal", "steal_fail", "find_time"],
                     domain_fields(LB_FIELDS_V17, IDLE_ORDER_V16), domain_has_name=True,
                     kernels="which kernels print it, for --help")

Numbers beyond the table are kept as ``cpu_extra<N>`` / ``domain_extra<N>``,
N being the 1-based position of the number on the line as sched-stats.rst
counts it (the cpumask and name are not counted), with one warning.

Report summary columns follow the seed tables of the "steal tasks to improve
CPU utilization" cover letter, all per-CPU averages of the deltas:
time (elapsed s), %busy (/proc/stat: 100 * (total - idle - iowait) / total,
guest time excluded from total as it is already in user/nice), slice (ms of
CPU per timeslice: rq_cpu_time / pcount; the cover letter's 0.10 ms equals
time * %busy / (sched - idle), which is this ratio), sched (sched_count),
idle (sched_goidle), wake (ttwu_count), and, only when the cpu lines carry
``find_time`` (ns) and ``steal``: %find = 100 * find_time / (elapsed_ns *
ncpus) and steal; and, when they carry select_idle_sibling()'s outcomes
(version 116): %found = 100 * (found_idle_cpu + found_idle_core) /
(the same + nofound_idle_cpu), the share of wakeups that searched the LLC
and came back with an idle CPU (the target, previous and recently used
CPU taken without a search are not counted); and, from version 118, far =
steal_node + steal_numa, the tasks stolen from beyond the LLC.  Malformed input raises SchedstatError; the CLI prints
``schedstat: error: ...`` and exits 2; so do recordings with a non-list
``cmd``, a bad ``format_version`` or ``exit_code``, or an after time earlier
than the before time.

``report --json`` / compute_report() keys: version, ncpus, cpus, excluded_cpus,
cmd, exit_code, uname, summary {time, busy_pct, slice_ms, sched, idle, wake
[, find_pct, steal, found_pct]} (None where undefined), cpu_fields {field: {total, avg}},
domain_fields {label: {field: {total, avg}}} (label = v17 name, else domainN;
avg over the cpus having that domain), domains {label: {levels, ncpus, cpus}},
per_cpu {cpu: {field: delta}}, warnings [str].
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

from .cpulist import format_cpulist
from .guest import kernel
from .table import format_table

PROG = "schedstat"
RECORDING_FORMAT = "schedsteal-schedstat-recording"
RECORDING_FORMAT_VERSION = 1
DEFAULT_SCHEDSTAT = kernel.SCHEDSTAT
DEFAULT_STAT = kernel.STAT
DEFAULT_OUTPUT = "schedstat.json"


class SchedstatError(Exception):
    """Malformed or unusable schedstat/stat/recording input."""


# ---------------------------------------------------------------- layouts --

CPU_FIELDS = ["yld_count", "array_exp", "sched_count", "sched_goidle", "ttwu_count",
              "ttwu_local", "rq_cpu_time", "run_delay", "pcount"]
IDLE_ORDER_V15 = ("idle", "busy", "newidle")    # enum: CPU_IDLE, __CPU_NOT_IDLE, ...
IDLE_ORDER_V16 = ("busy", "idle", "newidle")    # enum: __CPU_NOT_IDLE = 0, CPU_IDLE, ...
LB_FIELDS_V15 = ["lb_count", "lb_balanced", "lb_failed", "lb_imbalance", "lb_gained",
                 "lb_hot_gained", "lb_nobusyq", "lb_nobusyg"]
LB_FIELDS_V17 = ["lb_count", "lb_balanced", "lb_failed", "lb_imbalance_load",
                 "lb_imbalance_util", "lb_imbalance_task", "lb_imbalance_misfit",
                 "lb_gained", "lb_hot_gained", "lb_nobusyq", "lb_nobusyg"]
DOMAIN_TAIL_FIELDS = ["alb_count", "alb_failed", "alb_pushed", "sbe_count", "sbe_balanced",
                      "sbe_pushed", "sbf_count", "sbf_balanced", "sbf_pushed",
                      "ttwu_wake_remote", "ttwu_move_affine", "ttwu_move_balance"]


def domain_fields(lb_fields, idle_order) -> list[str]:
    """Domain field names: one lb block per idle type (in kernel order), then the tail."""
    return [f"{name}_{itype}" for itype in idle_order for name in lb_fields] + DOMAIN_TAIL_FIELDS


@dataclass(frozen=True)
class VersionLayout:
    version: int
    cpu_fields: tuple
    domain_fields: tuple
    domain_has_name: bool
    kernels: str = ""          # which kernels print this version, for --help


_LAYOUTS: dict[int, VersionLayout] = {}


def register_version(version: int, cpu_fields, domain_fields, domain_has_name: bool = False,
                     replace: bool = False, kernels: str = "") -> VersionLayout:
    """Teach the parser a /proc/schedstat version (replace=True overrides a known one);
    kernels says which kernels print it (shown by --help)."""
    if version in _LAYOUTS and not replace:
        raise ValueError(f"schedstat version {version} already registered")
    for kind, names in (("cpu", cpu_fields), ("domain", domain_fields)):
        if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"version {version}: {kind} field names must be unique strings")
    layout = VersionLayout(version, tuple(cpu_fields), tuple(domain_fields), domain_has_name,
                           kernels)
    _LAYOUTS[version] = layout
    return layout


def supported_versions() -> list[int]:
    return sorted(_LAYOUTS)


def get_layout(version: int) -> VersionLayout:
    try:
        return _LAYOUTS[version]
    except KeyError:
        known = ", ".join(str(v) for v in supported_versions())
        raise SchedstatError(f"unsupported schedstat version {version} (supported: {known}; "
                             f"add one with register_version())") from None


register_version(15, CPU_FIELDS, domain_fields(LB_FIELDS_V15, IDLE_ORDER_V15),
                 kernels="Linux up to 6.9 (6.1 and 6.6 among them)")
register_version(16, CPU_FIELDS, domain_fields(LB_FIELDS_V15, IDLE_ORDER_V16),
                 kernels="Linux 6.10 to 6.13 (6.12, this series' base)")
register_version(17, CPU_FIELDS, domain_fields(LB_FIELDS_V17, IDLE_ORDER_V16), domain_has_name=True,
                 kernels="Linux 6.14 and later (checked on Debian's 7.3.4)")

# The sched-steal series (patches/): version 16 plus cpu-line fields, out
# of mainline's sequence on purpose (mainline's 17 changed the domain
# lines); see Documentation/scheduler/sched-stats.rst in the series. Since
# stop 38 the series writes one layout, 118, whatever topics are applied;
# 116 and 117 were written by its builds before, and are still read.
STEAL_CPU_FIELDS = ["found_idle_cpu_easy", "found_idle_cpu", "found_idle_core",
                    "nofound_idle_cpu", "recent_used_hit", "recent_used_miss",
                    "find_time", "steal_attempt", "steal", "steal_fail"]
register_version(116, CPU_FIELDS + STEAL_CPU_FIELDS,
                 domain_fields(LB_FIELDS_V15, IDLE_ORDER_V16),
                 kernels="6.12 + sched-steal, stop 37 patches 0006-0018: 16 and 10 cpu fields")
# The parking patches add three: pushes run by a parked CPU, tasks moved
# off it (by any path), tasks found that may run on parked CPUs only.
PARK_CPU_FIELDS = ["park_push", "park_evac", "park_pinned"]
register_version(117, CPU_FIELDS + STEAL_CPU_FIELDS + PARK_CPU_FIELDS,
                 domain_fields(LB_FIELDS_V15, IDLE_ORDER_V16),
                 kernels="6.12 + sched-steal, stop 37 patches 0019-0032: 116 and 3 parked-CPU fields")
# STEAL_NODE and STEAL_NUMA add three: searches that went beyond the LLC,
# tasks stolen from another LLC of the node, from another node (both also
# counted in steal).
FAR_STEAL_CPU_FIELDS = ["steal_beyond", "steal_node", "steal_numa"]
register_version(118, CPU_FIELDS + STEAL_CPU_FIELDS + PARK_CPU_FIELDS + FAR_STEAL_CPU_FIELDS,
                 domain_fields(LB_FIELDS_V15, IDLE_ORDER_V16),
                 kernels="6.12 + sched-steal: stop 37 patch 0033 on; every topic from stop 38 (prep/0003)")


# ------------------------------------------------------------- data model --

@dataclass
class DomainStats:
    level: int
    name: str | None
    span: str                      # hex cpumask as printed, e.g. "00000000,000000ff"
    fields: dict[str, int]

    @property
    def label(self) -> str:
        # v17 names are stable across CPUs; levels are not once CPUs go offline.
        return self.name or f"domain{self.level}"

    def cpus(self) -> list[int]:
        return cpumask_to_list(self.span)


@dataclass
class CpuStats:
    cpu: int
    fields: dict[str, int]
    domains: list[DomainStats] = field(default_factory=list)


@dataclass
class Snapshot:
    version: int
    timestamp: int
    cpus: dict[int, CpuStats]
    warnings: list[str] = field(default_factory=list, compare=False)


_MASK_RE = re.compile(r"[0-9a-f]+(?:,[0-9a-f]+)*")
_CPU_RE = re.compile(r"cpu(\d+)")
_DOMAIN_RE = re.compile(r"domain(\d+)")
_NUM_RE = re.compile(r"[0-9]+")


def cpumask_to_list(mask: str) -> list[int]:
    """'00000000,000000f1' -> [0, 4, 5, 6, 7] (kernel %*pb format)."""
    if not _MASK_RE.fullmatch(mask):
        raise SchedstatError(f"bad cpumask {mask!r}")
    bits = int(mask.replace(",", ""), 16)
    return [i for i in range(bits.bit_length()) if bits >> i & 1]


# ---------------------------------------------------------------- parsing --

def _ints(tokens, where: str) -> list[int]:
    for i, tok in enumerate(tokens):
        if not _NUM_RE.fullmatch(tok):   # also rejects '-1', '1e3', unicode digits
            raise SchedstatError(f"{where}: non-numeric value {tok!r} (number {i + 1})")
    return [int(t) for t in tokens]


def _name_values(values, names, prefix: str, where: str, version: int):
    """Zip values with names; keep surplus as <prefix>_extra<N>. Returns (dict, extra count)."""
    if len(values) < len(names):
        raise SchedstatError(f"{where}: {len(values)} numbers, version {version} needs "
                             f"{len(names)} (truncated line?)")
    out = dict(zip(names, values))
    for pos in range(len(names), len(values)):
        out[f"{prefix}_extra{pos + 1}"] = values[pos]
    return out, len(values) - len(names)


def parse_schedstat(text: str, source: str = "schedstat") -> Snapshot:
    """Parse /proc/schedstat text; raises SchedstatError naming source:line on bad input."""
    entries = [(n, line.split()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not entries:
        raise SchedstatError(f"{source}: empty input (expected a 'version N' line)")
    lineno, toks = entries[0]
    if toks[0] != "version" or len(toks) != 2:
        raise SchedstatError(f"{source}:{lineno}: expected 'version N' as first line, "
                             f"got {' '.join(toks)[:40]!r}")
    version = _ints(toks[1:], f"{source}:{lineno}")[0]
    try:
        layout = get_layout(version)
    except SchedstatError as e:
        raise SchedstatError(f"{source}:{lineno}: {e}") from None
    if len(entries) < 2 or entries[1][1][0] != "timestamp" or len(entries[1][1]) != 2:
        raise SchedstatError(f"{source}:{entries[1][0] if len(entries) > 1 else lineno + 1}: "
                             f"expected 'timestamp J' after the version line")
    timestamp = _ints(entries[1][1][1:], f"{source}:{entries[1][0]}")[0]

    snap = Snapshot(version, timestamp, {})
    extra = {"cpu": 0, "domain": 0}
    current: CpuStats | None = None
    for lineno, toks in entries[2:]:
        where = f"{source}:{lineno}"
        head = toks[0]
        m = _CPU_RE.fullmatch(head)
        if m:
            cpu = int(m.group(1))
            if cpu in snap.cpus:
                raise SchedstatError(f"{where}: cpu{cpu} appears twice")
            values, n = _name_values(_ints(toks[1:], where), layout.cpu_fields, "cpu", where, version)
            extra["cpu"] = max(extra["cpu"], n)
            current = snap.cpus[cpu] = CpuStats(cpu, values)
            continue
        m = _DOMAIN_RE.fullmatch(head)
        if not m:
            raise SchedstatError(f"{where}: unrecognized line starting with {head!r}")
        if current is None:
            raise SchedstatError(f"{where}: {head} line before any cpu line")
        rest, name = toks[1:], None
        if rest and not _MASK_RE.fullmatch(rest[0]):
            if not layout.domain_has_name:
                raise SchedstatError(f"{where}: expected a cpumask after {head}, got {rest[0]!r} "
                                     f"(version {version} domain lines carry no name)")
            name, rest = rest[0], rest[1:]
        if not rest or not _MASK_RE.fullmatch(rest[0]):
            raise SchedstatError(f"{where}: {head} has no cpumask")
        level = int(m.group(1))
        if any(d.level == level for d in current.domains):
            raise SchedstatError(f"{where}: cpu{current.cpu} has {head} twice")
        values, n = _name_values(_ints(rest[1:], where), layout.domain_fields, "domain",
                                 where, version)
        extra["domain"] = max(extra["domain"], n)
        current.domains.append(DomainStats(level, name, rest[0], values))
    if not snap.cpus:
        raise SchedstatError(f"{source}: no cpu lines")
    for kind, n in extra.items():
        if n:   # one warning per snapshot and kind, not per line
            names = getattr(layout, f"{kind}_fields")
            snap.warnings.append(
                f"{kind} lines carry up to {n} more numbers than version {version} "
                f"names; kept as {kind}_extra{len(names) + 1}.. (see register_version())")
    return snap


PROC_STAT_COLUMNS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
                     "guest", "guest_nice")


def parse_proc_stat(text: str, source: str = "stat") -> dict[str, dict[str, int]]:
    """The 'cpu' and 'cpuN' lines of /proc/stat -> {'cpu': {...}, 'cpu0': {...}}.

    Older kernels print fewer columns; missing ones read as 0.
    """
    out: dict[str, dict[str, int]] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        toks = line.split()
        if not toks or not (toks[0] == "cpu" or _CPU_RE.fullmatch(toks[0])):
            continue
        values = _ints(toks[1:], f"{source}:{lineno}")
        if len(values) < 4:
            raise SchedstatError(f"{source}:{lineno}: {toks[0]} has {len(values)} columns, "
                                 f"need at least 4")
        values = (values + [0] * len(PROC_STAT_COLUMNS))[:len(PROC_STAT_COLUMNS)]
        out[toks[0]] = dict(zip(PROC_STAT_COLUMNS, values))
    return out


def busy_total(cols: dict[str, int]) -> tuple[int, int]:
    """(busy, total) jiffies; guest/guest_nice are already counted in user/nice."""
    total = sum(cols[c] for c in PROC_STAT_COLUMNS[:8])
    return total - cols["idle"] - cols["iowait"], total


# -------------------------------------------------------------- recording --

def _read(path: str) -> str:
    """A recording or a raw schedstat file named on the command line."""
    try:
        return kernel.read(path)
    except kernel.KernelError as e:
        raise SchedstatError(str(e)) from None


def make_recording(before: dict, after: dict, cmd, exit_code: int) -> dict:
    return {"format": RECORDING_FORMAT, "format_version": RECORDING_FORMAT_VERSION,
            "cmd": list(cmd), "exit_code": exit_code, "before": before, "after": after,
            "uname": platform.release()}


def _is_number(value) -> bool:
    # bool is an int to Python and json.loads takes NaN/Infinity: none is a time.
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def validate_recording(rec, source: str = "recording") -> dict:
    if not isinstance(rec, dict) or rec.get("format") != RECORDING_FORMAT:
        raise SchedstatError(f"{source}: not a {RECORDING_FORMAT} file")
    fv = rec.get("format_version")
    if (not isinstance(fv, int) or isinstance(fv, bool)
            or not 1 <= fv <= RECORDING_FORMAT_VERSION):
        raise SchedstatError(f"{source}: unsupported format_version {fv!r}")
    for side in ("before", "after"):
        snap = rec.get(side)
        if (not isinstance(snap, dict) or not _is_number(snap.get("time"))
                or not isinstance(snap.get("schedstat"), str)
                or not isinstance(snap.get("stat"), str)):
            raise SchedstatError(f"{source}: '{side}' needs time, schedstat and stat")
    if rec["after"]["time"] < rec["before"]["time"]:
        raise SchedstatError(f"{source}: after.time is before before.time "
                             f"({rec['after']['time']} < {rec['before']['time']})")
    # A string is iterable too: shlex.join("ls") would print "l s".
    cmd = rec.get("cmd")
    if cmd is not None and (not isinstance(cmd, list)
                            or not all(isinstance(a, str) for a in cmd)):
        raise SchedstatError(f"{source}: 'cmd' must be a list of strings, got {cmd!r}")
    code = rec.get("exit_code")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        raise SchedstatError(f"{source}: 'exit_code' must be an integer, got {code!r}")
    return rec


def load_recording(path: str) -> dict:
    text = _read(path)
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as e:
        hint = " (raw /proc/schedstat text? use 'show')" if text.startswith("version ") else ""
        raise SchedstatError(f"{path}:{e.lineno}: invalid JSON: {e.msg}{hint}") from None
    return validate_recording(rec, path)


# --------------------------------------------------------------- analysis --

def _delta(before: dict, after: dict, where: str, warnings: list) -> dict[str, int]:
    out = {}
    for name, value in after.items():
        if name in before:
            d = value - before[name]
            if d < 0:   # u32 counters wrap; a reset also shows up here -- flag, don't hide
                warnings.append(f"{where} {name} went backwards ({before[name]} -> {value}): "
                                f"counter wrap or reset, negative delta reported as-is")
            out[name] = d
    return out


def cpu_deltas(before: Snapshot, after: Snapshot, warnings: list) -> dict[int, dict[str, int]]:
    """Per-CPU field deltas of the CPUs in both snapshots; a counter that
    went backwards is kept negative and warned about."""
    return {c: _delta(before.cpus[c].fields, after.cpus[c].fields, f"cpu{c}", warnings)
            for c in sorted(set(before.cpus) & set(after.cpus))}


def text_deltas(before_text: str, after_text: str) -> dict:
    """Deltas between two raw /proc/schedstat texts (the guest probes):
    {version, total {field: n}, per_cpu {cpu: {field: n}}, warnings}."""
    before = parse_schedstat(before_text, "before schedstat")
    after = parse_schedstat(after_text, "after schedstat")
    if before.version != after.version:
        raise SchedstatError(f"schedstat version changed ({before.version} -> "
                             f"{after.version})")
    warnings: list[str] = []
    per_cpu = cpu_deltas(before, after, warnings)
    totals = _totals(list(per_cpu.values()), max(len(per_cpu), 1))
    return {"version": after.version, "total": {k: v["total"] for k, v in totals.items()},
            "per_cpu": per_cpu, "warnings": warnings}


def _totals(per: list[dict[str, int]], n: int) -> dict[str, dict]:
    totals: dict[str, int] = {}
    for deltas in per:
        for name, d in deltas.items():
            totals[name] = totals.get(name, 0) + d
    return {name: {"total": t, "avg": t / n} for name, t in totals.items()}


def _busy_pct(before_text: str, after_text: str, cpus) -> float | None:
    b, a = parse_proc_stat(before_text, "before stat"), parse_proc_stat(after_text, "after stat")
    keys = ["cpu"] if "cpu" in a and "cpu" in b else [f"cpu{c}" for c in cpus
                                                       if f"cpu{c}" in a and f"cpu{c}" in b]
    busy = total = 0
    for k in keys:
        (bb, bt), (ab, at) = busy_total(b[k]), busy_total(a[k])
        busy, total = busy + ab - bb, total + at - bt
    return 100.0 * busy / total if total > 0 else None


def compute_report(recording: dict) -> dict:
    """Deltas after-before of a recording; the object `report --json` prints."""
    rec = validate_recording(recording)
    before = parse_schedstat(rec["before"]["schedstat"], "before schedstat")
    after = parse_schedstat(rec["after"]["schedstat"], "after schedstat")
    if before.version != after.version:
        raise SchedstatError(f"schedstat version changed during the recording "
                             f"({before.version} -> {after.version})")
    warnings = list(dict.fromkeys(before.warnings + after.warnings))   # same text: warn once
    cpus = sorted(set(before.cpus) & set(after.cpus))
    odd = sorted(set(before.cpus) ^ set(after.cpus))
    if odd:
        warnings.append(f"cpus {format_cpulist(odd)} present in only one snapshot "
                        f"(hotplug?): excluded")
    if not cpus:
        raise SchedstatError("no cpu is present in both snapshots")
    n = len(cpus)
    per_cpu = cpu_deltas(before, after, warnings)
    cpu_fields = _totals(list(per_cpu.values()), n)

    dom_deltas: dict[str, list] = {}
    domains: dict[str, dict] = {}
    for c in cpus:
        old = {(d.level, d.name): d for d in before.cpus[c].domains}
        for d in after.cpus[c].domains:
            if (d.level, d.name) not in old:
                warnings.append(f"cpu{c} {d.label} missing from the before snapshot "
                                f"(domains rebuilt?): skipped")
                continue
            delta = _delta(old[(d.level, d.name)].fields, d.fields, f"cpu{c} {d.label}", warnings)
            dom_deltas.setdefault(d.label, []).append(delta)
            # a v17 name can sit at different levels on different cpus (offline siblings)
            info = domains.setdefault(d.label, {"levels": set(), "ncpus": 0, "cpus": set()})
            info["levels"].add(d.level)
            info["ncpus"] += 1
            info["cpus"].update(d.cpus())
    for info in domains.values():
        info["levels"], info["cpus"] = sorted(info["levels"]), format_cpulist(info["cpus"])
    domain_fields = {label: _totals(ds, len(ds)) for label, ds in dom_deltas.items()}

    elapsed = rec["after"]["time"] - rec["before"]["time"]

    def total(name):
        return cpu_fields[name]["total"] if name in cpu_fields else None

    def avg(name):   # None when a registered layout lacks the field
        return cpu_fields[name]["avg"] if name in cpu_fields else None

    pcount, cpu_time = total("pcount"), total("rq_cpu_time")
    summary = {"time": elapsed,
               "busy_pct": _busy_pct(rec["before"]["stat"], rec["after"]["stat"], cpus),
               "slice_ms": cpu_time / pcount / 1e6 if pcount and cpu_time is not None else None,
               "sched": avg("sched_count"), "idle": avg("sched_goidle"), "wake": avg("ttwu_count")}
    if "find_time" in cpu_fields:
        summary["find_pct"] = (100.0 * total("find_time") / (elapsed * 1e9 * n)
                               if elapsed > 0 else None)
    if "steal" in cpu_fields:
        summary["steal"] = avg("steal")
    if "steal_node" in cpu_fields:
        summary["steal_far"] = avg("steal_node") + avg("steal_numa")
    if "nofound_idle_cpu" in cpu_fields:
        found = total("found_idle_cpu") + total("found_idle_core")
        searches = found + total("nofound_idle_cpu")
        summary["found_pct"] = 100.0 * found / searches if searches else None
    if elapsed > 0 and total("sched_count") == 0 and total("ttwu_count") == 0:
        warnings.append("schedule()/wakeup counters did not move: schedstats are probably "
                        "disabled (sysctl kernel.sched_schedstats=1)")
    return {"version": after.version, "ncpus": n, "cpus": format_cpulist(cpus),
            "excluded_cpus": format_cpulist(odd), "cmd": rec.get("cmd"),
            "exit_code": rec.get("exit_code"), "uname": rec.get("uname"),
            "summary": summary, "cpu_fields": cpu_fields, "domain_fields": domain_fields,
            "domains": domains, "per_cpu": per_cpu, "warnings": warnings}


SUMMARY_COLUMNS = [  # (key, header, decimals)
    ("time", "time", 3), ("busy_pct", "%busy", 2), ("slice_ms", "slice", 3),
    ("sched", "sched", 0), ("idle", "idle", 0), ("wake", "wake", 0),
    ("find_pct", "%find", 2), ("steal", "steal", 0), ("steal_far", "far", 0),
    ("found_pct", "%found", 1)]

# What each summary column is, unit first (the report's footer and --help).
SUMMARY_LEGEND = {
    "time": "s, elapsed between the two snapshots",
    "busy_pct": "% of CPU time not idle or iowait, from /proc/stat",
    "slice_ms": "ms of CPU per timeslice: rq_cpu_time / pcount",
    "sched": "count, schedule() calls (sched_count)",
    "idle": "count, switches to the idle task (sched_goidle)",
    "wake": "count, wakeups (ttwu_count)",
    "find_pct": "% of CPU time spent searching: find_time (ns in select_idle_sibling() "
                "and in looking for a task to steal) / (elapsed ns x cpus)",
    "steal": "count, tasks stolen by a CPU about to go idle (steal)",
    "steal_far": "count, the steals from beyond the LLC: steal_node + steal_numa",
    "found_pct": "% of the wakeups' searches of the LLC that found an idle CPU: "
                 "(found_idle_cpu + found_idle_core) / (the same + nofound_idle_cpu)",
}
NS_FIELDS = ("rq_cpu_time", "run_delay", "find_time")
NS_NOTE = "cpu fields are counts; rq_cpu_time, run_delay and find_time are in ns"


def legend(keys=None) -> list[str]:
    """Lines saying what the summary columns (those in keys, default all)
    are, and the unit of the cpu fields."""
    return (["summary columns:"]
            + [f"  {head:<7} {SUMMARY_LEGEND[k]}" for k, head, _ in SUMMARY_COLUMNS
               if keys is None or k in keys]
            + [NS_NOTE])


def field_unit(name: str) -> str:
    """A cpu field's unit: ns, count, or "-" for numbers no layout names."""
    return "ns" if name in NS_FIELDS else "-" if "_extra" in name else "count"


# abbench's %chg means "+ = B better"; schedstat counters are neither better
# nor worse, so diff shows a plain relative delta under a different name.
DELTA_CONVENTION = ("%delta = (B-A)/A, + = B higher "
                    "(not better or worse; for time lower is better)")


def _pct_delta(a, b):
    if a is None or b is None or a == 0:
        return None
    return (b - a) / abs(a) * 100.0


def diff_reports(a: dict, b: dict) -> dict:
    """Compare two compute_report() results; A is the baseline.

    pct_delta is (B-A)/|A| in percent: + = B higher (see DELTA_CONVENTION).
    ``warnings``: what makes the two hard to compare (CPU counts)."""
    def rows(av: dict, bv: dict) -> dict:
        keys = list(dict.fromkeys(list(av) + list(bv)))
        return {k: {"a": av.get(k), "b": bv.get(k),
                    "pct_delta": _pct_delta(av.get(k), bv.get(k))} for k in keys}
    order = [k for k, _, _ in SUMMARY_COLUMNS]
    sa = {k: a["summary"][k] for k in order if k in a["summary"]}
    sb = {k: b["summary"][k] for k in order if k in b["summary"]}
    warnings = []
    if a["ncpus"] != b["ncpus"]:
        warnings.append(f"A has {a['ncpus']} cpus, B has {b['ncpus']}: the per-CPU "
                        "averages come from machines of different sizes")
    return {"a": {"version": a["version"], "ncpus": a["ncpus"], "cmd": a.get("cmd")},
            "b": {"version": b["version"], "ncpus": b["ncpus"], "cmd": b.get("cmd")},
            "summary": rows(sa, sb),
            "cpu_fields": rows({k: v["avg"] for k, v in a["cpu_fields"].items()},
                               {k: v["avg"] for k, v in b["cpu_fields"].items()}),
            "warnings": warnings}


# -------------------------------------------------------------- rendering --

def _fmt(value, decimals: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{decimals}f}"


def _table(headers, rows, left_first: bool = True) -> str:
    return "\n".join(format_table([headers] + list(rows), left=(0,) if left_first else (),
                                  indent="  "))


def render_report(rep: dict, per_cpu: bool = False, domains: bool = False) -> str:
    cmd = shlex.join(rep["cmd"]) if rep.get("cmd") else "?"
    out = [(f"schedstat report: {cmd}  (exit {rep.get('exit_code')}, kernel {rep.get('uname')}, "
            f"schedstat v{rep['version']}, {rep['ncpus']} cpus: {rep['cpus']})"), "",
           "per-CPU average of deltas (units and meanings at the end)"]
    cols = [c for c in SUMMARY_COLUMNS if c[0] in rep["summary"]]
    out.append(_table([h for _, h, _ in cols],
                      [[_fmt(rep["summary"][k], d) for k, _, d in cols]], left_first=False))
    out += ["", "cpu fields (delta)",
            _table(["field", "total", "avg/cpu", "unit"],
                   [[k, v["total"], _fmt(v["avg"]), field_unit(k)]
                    for k, v in rep["cpu_fields"].items()])]
    if domains and rep["domain_fields"]:
        labels = list(rep["domain_fields"])
        names = list(dict.fromkeys(n for lab in labels for n in rep["domain_fields"][lab]))
        out += ["", "domain fields (delta summed over cpus)"]
        for lab in labels:
            info = rep["domains"][lab]
            out.append(f"  {lab}: level {'/'.join(map(str, info['levels']))}, "
                       f"{info['ncpus']} cpus, span {info['cpus']}")
        out.append(_table(["field"] + labels,
                          [[n] + [_fmt(rep["domain_fields"][lab].get(n, {}).get("total"))
                                  for lab in labels] for n in names]))
    if per_cpu:
        names = list(rep["cpu_fields"])
        out += ["", "per-cpu deltas",
                _table(["cpu"] + names, [[f"cpu{c}"] + [_fmt(d.get(n)) for n in names]
                                         for c, d in rep["per_cpu"].items()])]
    return "\n".join(out + [""] + legend(rep["summary"]))


def render_diff(d: dict, a_name: str = "A", b_name: str = "B") -> str:
    dec = {k: n for k, _, n in SUMMARY_COLUMNS}
    head = {k: h for k, h, _ in SUMMARY_COLUMNS}

    def rows(section, label_of, decimals_of):
        return [[label_of(k), _fmt(r["a"], decimals_of(k)), _fmt(r["b"], decimals_of(k)),
                 "" if r["pct_delta"] is None else f"({r['pct_delta']:.2f}%)"]
                for k, r in d[section].items()]
    return "\n".join([
        (f"schedstat diff: A={a_name} (v{d['a']['version']}, {d['a']['ncpus']} cpus)  "
         f"B={b_name} (v{d['b']['version']}, {d['b']['ncpus']} cpus)"), "",
        "summary", f"  {DELTA_CONVENTION}",
        _table(["metric", "A", "B", "%delta"],
               rows("summary", lambda k: head.get(k, k), lambda k: dec.get(k, 1))), "",
        "cpu fields (per-cpu average delta)", f"  {DELTA_CONVENTION}",
        _table(["field", "A", "B", "%delta"], rows("cpu_fields", str, lambda k: 1))])


def render_snapshot(snap: Snapshot, domains: bool = False) -> str:
    names = list(dict.fromkeys(n for c in snap.cpus.values() for n in c.fields))
    out = [f"schedstat v{snap.version}, timestamp {snap.timestamp}, {len(snap.cpus)} cpus",
           _table(["cpu"] + names, [[f"cpu{c.cpu}"] + [_fmt(c.fields.get(n)) for n in names]
                                    for c in snap.cpus.values()])]
    if domains:
        rows = [(c.cpu, d) for c in snap.cpus.values() for d in c.domains]
        if rows:
            dnames = list(dict.fromkeys(n for _, d in rows for n in d.fields))
            out += ["", "domain fields (one column per cpu/domain)",
                    _table(["field"] + [f"cpu{c}/{d.label}" for c, d in rows],
                           [["span"] + [d.span for _, d in rows]] +
                           [[n] + [_fmt(d.fields.get(n)) for _, d in rows] for n in dnames])]
    return "\n".join(out)


# -------------------------------------------------------------------- CLI --

def _say(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr)


def _warn_all(warnings, prefix: str = "") -> None:
    for w in warnings:
        _say(f"warning: {prefix}{w}")


def _run(cmd) -> int:
    try:
        proc = subprocess.Popen(cmd)
    except OSError as e:
        raise SchedstatError(f"cannot run {shlex.join(cmd)}: {e.strerror or e}") from None
    interrupted = False
    while True:
        try:
            rc = proc.wait()
            break
        except KeyboardInterrupt:
            # The child got the SIGINT too: wait for it so the after-snapshot is taken;
            # a second ^C kills it.
            if interrupted:
                proc.kill()
            interrupted = True
    return 128 - rc if rc < 0 else rc    # killed by signal N -> 128+N, like a shell


def cmd_record(args) -> int:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise SchedstatError("record: no command given (usage: record [-o FILE] -- CMD...)")
    before = kernel.schedstat_snapshot(args.schedstat_path, args.stat_path)
    parse_schedstat(before["schedstat"], args.schedstat_path)   # fail before a long run
    _say(f"recording {shlex.join(cmd)} ...")
    rc = _run(cmd)
    after = kernel.schedstat_snapshot(args.schedstat_path, args.stat_path)
    rec = make_recording(before, after, cmd, rc)
    tmp = f"{args.output}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(rec, f, indent=1)
            f.write("\n")
        os.replace(tmp, args.output)   # never leave a half-written recording behind
    except OSError as e:
        raise SchedstatError(f"cannot write {args.output}: {e}") from None
    _say(f"wrote {args.output}")
    return rc


def cmd_report(args) -> int:
    rep = compute_report(load_recording(args.file))
    _warn_all(rep["warnings"])
    print(json.dumps(rep, indent=2) if args.json
          else render_report(rep, per_cpu=args.per_cpu, domains=args.domains))
    return 0


def cmd_diff(args) -> int:
    a, b = compute_report(load_recording(args.a)), compute_report(load_recording(args.b))
    _warn_all(a["warnings"], f"{args.a}: ")
    _warn_all(b["warnings"], f"{args.b}: ")
    d = diff_reports(a, b)
    _warn_all(d["warnings"])
    print(json.dumps(d, indent=2) if args.json else render_diff(d, args.a, args.b))
    return 0


def cmd_show(args) -> int:
    snap = parse_schedstat(_read(args.file), args.file)
    _warn_all(snap.warnings, f"{args.file}: ")
    print(json.dumps(dataclasses.asdict(snap), indent=2) if args.json
          else render_snapshot(snap, domains=args.domains))
    return 0


def versions_help() -> str:
    """The --help epilog: each registered layout and the kernels that print it."""
    rows = [["version", "kernels"]] + [[v, get_layout(v).kernels or "(not stated)"]
                                       for v in supported_versions()]
    return "\n".join(["/proc/schedstat layouts read (the file's first line is 'version N'):"]
                     + format_table(rows, left=(0, 1), indent="  ")
                     + ["A version missing here is refused; register_version() adds one."])


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="perf-sched-stats style /proc/schedstat "
                                "recorder and reporter", epilog=versions_help(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="{record,report,diff,show}")
    r = sub.add_parser("record", help="snapshot schedstat around a command")
    r.add_argument("-o", "--output", default=DEFAULT_OUTPUT, help="recording file (%(default)s)")
    r.add_argument("--schedstat-path", default=DEFAULT_SCHEDSTAT, help=argparse.SUPPRESS)
    r.add_argument("--stat-path", default=DEFAULT_STAT, help=argparse.SUPPRESS)
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="command to run (after --)")
    r.set_defaults(func=cmd_record)
    columns = dict(epilog="\n".join(legend()),
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    r = sub.add_parser("report", help="summarize a recording", **columns)
    r.add_argument("file", nargs="?", default=DEFAULT_OUTPUT)
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument("--per-cpu", action="store_true", help="add per-cpu rows")
    r.add_argument("--domains", action="store_true", help="add domain fields per domain")
    r.set_defaults(func=cmd_report)
    r = sub.add_parser("diff", help="compare recording B against baseline A", **columns)
    r.add_argument("a")
    r.add_argument("b")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_diff)
    r = sub.add_parser("show", help="print one raw /proc/schedstat as a table")
    r.add_argument("file", nargs="?", default=DEFAULT_SCHEDSTAT)
    r.add_argument("--domains", action="store_true")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_show)
    return p


def main(argv=None) -> int:
    try:
        args = make_parser().parse_args(argv)
    except SystemExit as e:          # usage errors / --help: return instead of exiting
        return 0 if e.code is None else e.code if isinstance(e.code, int) else 2
    try:
        return args.func(args)
    except (SchedstatError, kernel.KernelError) as e:
        _say(f"error: {e}")
        return 2
    except BrokenPipeError:          # `report | head`: quiet exit, no flush error at shutdown
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
