"""Which QEMU and which clock a guest runs under (docs/lab.md).

Every boot records this in its results (``lab.json`` in the guest's
shared directory, copied into abbench's and kernelab's results), so that
no table mixes clocks: times under different clocks measure different
things and are never compared.

- QEMU: ``stock`` (Debian's qemu-system-x86_64 on PATH, the default),
  ``lab`` (the project's build, ``make qemu``: steal time under TCG and the
  parallel clock), or a path to another binary.
- clock:
  ``host``      multi-threaded TCG, the host's time (a jump-label kernel's
                single-threaded TCG too); with the lab QEMU the guest sees
                its vCPU threads' run delay as steal time;
  ``icount``    ``-icount shift=0,sleep=off``: one instruction per ns,
                all vCPUs on one clock, so time is the sum of their work;
  ``parallel``  the lab QEMU's parallel clock: one instruction per ns on
                each vCPU as if each had a CPU of its own, in turns of
                ``quantum_ns`` of virtual time.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

CLOCKS = ("host", "icount", "parallel")
QEMU_KINDS = ("stock", "lab")
DEFAULT_QUANTUM_NS = 4000
# The lab QEMU refuses more (icount.c): a turn that long is no longer
# "fine round-robin".
MAX_QUANTUM_NS = 10_000_000
ICOUNT_OPTS = "shift=0,sleep=off"
STEAL_TIME_CPU = "-cpu max,kvm-steal-time=on"
# Names the vCPU threads "CPU N/TCG", for the host side of the steal-time
# checks (StealMonitor); merged with virtme-ng's own -name.
THREAD_NAMES = "-name virtme-ng,debug-threads=on"
LAB_FILE = "lab.json"
# virtme-ng puts each of its 6 virtserialports on a virtio-serial device
# of its own, with the default 31 ports each: 389 eventfds that QEMU's
# main loop polls at every wakeup (500 a second for a busy smp2 guest's
# ticks), 14% of a host core on this machine, taken from the vCPU threads
# as steal. Two ports a device (the console's and one) are all it uses:
# the main loop then takes 2%. The lab QEMU always boots this way.
LEAN_DEVICES = "-global virtio-serial-pci.max_ports=2"


class LabError(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class Lab:
    """What a boot runs under. ``qemu``: stock, lab or a path;
    ``binary``: the QEMU binary (None: the one on PATH)."""

    qemu: str = "stock"
    binary: str | None = None
    clock: str = "host"
    quantum_ns: int | None = None
    steal_time: bool = False

    def qemu_opts(self) -> list[str]:
        """The QEMU arguments that select this clock and steal time."""
        opts = [LEAN_DEVICES] if self.qemu != "stock" else []
        if self.clock == "icount":
            opts.append(f"-icount {ICOUNT_OPTS}")
        elif self.clock == "parallel":
            q = f",quantum={self.quantum_ns}" if self.quantum_ns else ""
            opts.append(f"-icount {ICOUNT_OPTS},parallel=on{q}")
        if self.steal_time:
            opts += [STEAL_TIME_CPU, THREAD_NAMES]
        return opts

    def record(self) -> dict:
        """What goes into results files (``lab`` key)."""
        return {"qemu": self.qemu, "qemu_binary": self.binary, "clock": self.clock,
                "lean_devices": self.qemu != "stock",
                "quantum_ns": (self.quantum_ns or DEFAULT_QUANTUM_NS)
                if self.clock == "parallel" else None,
                "steal_time": self.steal_time}


def lab_binary(cache: Path) -> Path:
    """Where `make qemu` (scripts/build-qemu.sh) leaves the lab QEMU."""
    return cache / "qemu" / "build" / "qemu-system-x86_64"


def clock_of(qemu_opts: list[str]) -> str:
    """The clock that raw QEMU arguments select (the last -icount wins, as
    in QEMU)."""
    clock = "host"
    for word_list in (shlex.split(o) for o in qemu_opts):
        for i, w in enumerate(word_list):
            if w == "-icount":
                arg = word_list[i + 1] if i + 1 < len(word_list) else ""
                clock = "parallel" if re.search(r"(^|,)parallel=on(,|$)", arg) else "icount"
    return clock


def resolve(qemu: str = "stock", clock: str | None = None, quantum_ns: int | None = None,
            steal_time: bool | None = None, qemu_opts: list[str] | None = None,
            cache: Path | None = None) -> tuple[Lab, list[str]]:
    """The Lab for these choices and the QEMU arguments to add; LabError
    for a combination that cannot work, before anything boots.

    ``clock`` None: whatever ``qemu_opts`` select (host without -icount).
    ``steal_time`` None: on with the lab QEMU and the host clock (as a KVM
    guest sees it), off otherwise."""
    qemu_opts = list(qemu_opts or [])
    explicit = clock is not None
    if clock is None:
        clock = clock_of(qemu_opts)
    elif clock not in CLOCKS:
        raise LabError(f"unknown clock {clock!r} (expected one of {', '.join(CLOCKS)})")
    elif any("-icount" in o for o in qemu_opts):
        raise LabError("choose the clock with --clock or with -icount in the QEMU "
                       "options, not both")
    if quantum_ns is not None:
        if clock != "parallel":
            raise LabError("--quantum needs --clock parallel")
        if not 1 <= quantum_ns <= MAX_QUANTUM_NS:
            raise LabError(f"--quantum must be 1 to {MAX_QUANTUM_NS} ns, not {quantum_ns}")
    binary = None
    if qemu == "lab":
        if cache is None:
            raise LabError("the lab QEMU needs the cache directory")
        binary = str(lab_binary(cache))
        if not Path(binary).is_file():
            raise LabError(f"the lab QEMU is not built ({binary}): run `make qemu`")
    elif qemu != "stock":
        if not Path(qemu).is_file():
            raise LabError(f"QEMU binary {qemu} not found")
        binary = qemu
    if clock == "parallel" and qemu == "stock":
        raise LabError("the parallel clock needs the lab QEMU (--qemu lab; `make qemu`)")
    if steal_time is None:
        steal_time = qemu == "lab" and clock == "host"
    if steal_time and qemu == "stock":
        raise LabError("stock QEMU shows a TCG guest no steal time: use --qemu lab")
    if steal_time and clock != "host":
        raise LabError("steal time comes from the vCPU threads' run delay, which "
                       "only the host clock has (multi-threaded TCG)")
    if steal_time and any(re.match(r"\s*-cpu\b", o) for o in qemu_opts):
        raise LabError("steal time sets -cpu itself; drop -cpu from the QEMU options")
    lab = Lab(qemu, binary, clock, quantum_ns if clock == "parallel" else None,
              steal_time)
    if explicit:
        return lab, lab.qemu_opts()
    # The clock came with the QEMU options: add only the rest.
    extra = [LEAN_DEVICES] if qemu != "stock" else []
    return lab, extra + ([STEAL_TIME_CPU, THREAD_NAMES] if steal_time else [])


def read_record(outdir: str | Path) -> dict | None:
    """The lab record a boot left in its shared directory, or None."""
    try:
        return json.loads((Path(outdir) / LAB_FILE).read_text())
    except (OSError, ValueError):
        return None


def check_same_clock(records: list[dict | None], what: str = "runs") -> dict | None:
    """The one clock record a set of runs shares; LabError when they were
    taken under different clocks or QEMUs (a record that is None stands
    for the host clock of a run made before records existed)."""
    seen = {}
    for r in records:
        r = r or {"clock": "host", "qemu": "stock"}
        key = (r.get("clock", "host"), r.get("qemu", "stock"), r.get("quantum_ns"),
               bool(r.get("steal_time")))
        seen.setdefault(key, r)
    if len(seen) > 1:
        desc = "; ".join(f"clock {k[0]} on {k[1]} QEMU"
                         + (f" (quantum {k[2]} ns)" if k[2] else "")
                         + (", steal time" if k[3] else "") for k in seen)
        raise LabError(f"{what} were taken under different clocks or QEMUs ({desc}): "
                       "times under different clocks cannot be compared")
    return next(iter(seen.values()), None)


# ------------------------------------------------ steal time, host side --
#
# The host's view of a guest's steal time: the run delay of each vCPU
# thread of its QEMU (the second field of /proc/PID/task/TID/schedstat,
# what the lab QEMU reports to the guest), sampled when the guest's probe
# writes a mark (lab_probe.py steal) into the shared directory.

VCPU_THREAD_RE = re.compile(r"^CPU (\d+)/TCG$")
MARK_PREFIX = "mark-"


def session_processes(session: int, comm_prefix: str, proc: str = "/proc") -> list[int]:
    """Pids of the processes of a session whose name starts with comm_prefix."""
    found = []
    for d in Path(proc).iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == session and comm.startswith(comm_prefix):
            found.append(int(d.name))
    return sorted(found)


def vcpu_threads(pid: int, proc: str = "/proc") -> dict[int, int]:
    """{vCPU index: thread id} of a QEMU with a thread per vCPU
    (multi-threaded TCG names them "CPU N/TCG")."""
    threads = {}
    for t in Path(proc, str(pid), "task").iterdir():
        try:
            m = VCPU_THREAD_RE.match((t / "comm").read_text().strip())
        except OSError:
            continue
        if m:
            threads[int(m[1])] = int(t.name)
    return threads


def thread_schedstat(pid: int, tid: int, proc: str = "/proc") -> tuple[int, int]:
    """(time on a CPU, time runnable but waiting), ns, of a thread."""
    run, wait, _ = Path(proc, str(pid), "task", str(tid), "schedstat").read_text().split()
    return int(run), int(wait)


class HostHog:
    """A busy loop on the host, pinned to host CPU `core`, for as long as
    a guest's window lasts (StealMonitor action)."""

    def __init__(self, core: int):
        self.core, self.proc = core, None

    def start(self, qemu_pid: int, threads: dict[int, int]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        os.sched_setaffinity(self.proc.pid, {self.core})

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class PinVcpus:
    """Pin vCPU thread k to host CPU mapping[k] (StealMonitor action), so
    that which vCPU shares a host CPU with what is known."""

    def __init__(self, mapping: dict[int, int]):
        self.mapping = mapping

    def start(self, qemu_pid: int, threads: dict[int, int]) -> None:
        for vcpu, core in self.mapping.items():
            os.sched_setaffinity(threads[vcpu], {core})

    def stop(self) -> None:
        pass  # they stay pinned: the next window may rely on it


class ConfineQemu:
    """Confine every thread of the QEMU process to host CPUs `cores` for
    as long as a guest's window lasts (StealMonitor action): the host's
    capacity for the guest shrinks, then comes back at the window's end
    (each thread gets the affinity it had)."""

    def __init__(self, cores: set[int], proc: str = "/proc"):
        self.cores, self.proc, self.saved = set(cores), proc, {}

    def _threads(self, qemu_pid: int) -> list[int]:
        return [int(t) for t in os.listdir(f"{self.proc}/{qemu_pid}/task")]

    def start(self, qemu_pid: int, threads: dict[int, int]) -> None:
        for tid in self._threads(qemu_pid):
            try:
                self.saved[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, self.cores)
            except ProcessLookupError:
                self.saved.pop(tid, None)

    def stop(self) -> None:
        for tid, cpus in self.saved.items():
            try:
                os.sched_setaffinity(tid, cpus)
            except ProcessLookupError:
                pass
        self.saved = {}


class StealMonitor:
    """vm.run(monitor=...) for the steal-time validation: samples every
    vCPU thread's schedstat each time the guest writes a mark (within
    `poll` s of it), and starts actions[label] (one or a list) at mark
    LABEL-start, stops them at LABEL-end. Returns {"threads": {vcpu: tid}, "marks": [{"mark",
    "t_ns", "threads": {vcpu: [run_ns, wait_ns]}}]}."""

    def __init__(self, actions: dict | None = None, poll: float = 0.02,
                 proc: str = "/proc"):
        self.actions, self.poll, self.proc = actions or {}, poll, proc

    def _qemu(self, session: int) -> tuple[int, dict[int, int]] | None:
        for pid in session_processes(session, "qemu-system", self.proc):
            threads = vcpu_threads(pid, self.proc)
            if threads:
                return pid, threads
        return None

    def __call__(self, session: int, outdir: str, stop) -> dict:
        marks, seen, qemu, running = [], set(), None, []
        try:
            while not stop.is_set():
                new = sorted(n for n in os.listdir(outdir)
                             if n.startswith(MARK_PREFIX) and n not in seen)
                for name in new:
                    qemu = qemu or self._qemu(session)
                    if qemu is None:
                        raise LabError("a mark came but no QEMU with vCPU threads runs "
                                       "(multi-threaded TCG needed)")
                    pid, threads = qemu
                    t = time.monotonic_ns()
                    sample = {v: list(thread_schedstat(pid, tid, self.proc))
                              for v, tid in threads.items()}
                    seen.add(name)
                    label = name[len(MARK_PREFIX):]
                    marks.append({"mark": label, "t_ns": t, "threads": sample})
                    base, _, edge = label.rpartition("-")
                    todo = self.actions.get(base, [])
                    for action in todo if isinstance(todo, list) else [todo]:
                        if edge == "start":
                            action.start(pid, threads)
                            running.append(action)
                        elif edge == "end" and action in running:
                            action.stop()
                            running.remove(action)
                stop.wait(self.poll)
        finally:
            for action in running:
                action.stop()
        return {"threads": qemu[1] if qemu else {}, "marks": marks}


def host_steal(monitor: dict, label: str) -> dict[int, float]:
    """{vCPU: % of the window its thread was runnable but not running},
    between the marks LABEL-start and LABEL-end."""
    by_name = {m["mark"]: m for m in monitor["marks"]}
    try:
        a, b = by_name[f"{label}-start"], by_name[f"{label}-end"]
    except KeyError as e:
        raise LabError(f"no host sample for mark {e.args[0]}") from None
    span = b["t_ns"] - a["t_ns"]
    if span <= 0:
        raise LabError(f"window {label}: host samples out of order")
    return {int(v): 100.0 * (b["threads"][v][1] - a["threads"][v][1]) / span
            for v in a["threads"]}


def guest_steal(probe: dict) -> dict[int, float]:
    """{CPU: steal as % of the window} from lab_probe.py steal's result:
    the steal /proc/stat accumulated (the record's nanoseconds, in clock
    ticks) over the window's length, the host's measure's terms."""
    ticks = probe["window_s"] * probe["user_hz"]
    return {int(cpu): 100.0 * d["steal"] / ticks for cpu, d in probe["per_cpu"].items()}


def guest_steal_share(probe: dict) -> dict[int, float]:
    """{CPU: steal as % of the time /proc/stat accounted to the CPU} (what
    top shows as %st). Above guest_steal() when a vCPU waits long: a tick
    that finds a tick's worth of steal or more accounts only steal, so the
    run time around it goes unaccounted."""
    out = {}
    for cpu, d in probe["per_cpu"].items():
        total = sum(d[k] for k in ("user", "nice", "system", "idle", "iowait", "irq",
                                   "softirq", "steal"))
        out[int(cpu)] = 100.0 * d["steal"] / total if total else 0.0
    return out
