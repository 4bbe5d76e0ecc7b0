"""The guest kernel's files: sysfs, debugfs, procfs, cgroupfs (stdlib only).

Every read and write of a kernel file in this project goes through
``read`` and ``write``; both raise :class:`KernelError` (an ``OSError``
with the errno kept) whose text names the file. On top of them, one
function per job: scheduler features, schedstats, /proc/schedstat
snapshots, CPU lists and caches, hotplug, parking, cgroups.

Shell scripts in the guest use the same functions::

    python3 -m schedsteal.guest.kernel feature NO_STEAL [NAME...]
    python3 -m schedsteal.guest.kernel schedstats
    python3 -m schedsteal.guest.kernel cgroup NAME 'QUOTA PERIOD'   # prints its path
    python3 -m schedsteal.guest.kernel cpu-mode all | park LIST | offline LIST
"""
from __future__ import annotations

import argparse
import errno
import glob
import os
import re
import subprocess
import sys
import time

from ..cpulist import parse_cpulist

DEBUGFS = "/sys/kernel/debug"
FEATURES = f"{DEBUGFS}/sched/features"
SCHED_DEBUG = f"{DEBUGFS}/sched/debug"
PROC_SYS = "/proc/sys"
SCHEDSTAT = "/proc/schedstat"
STAT = "/proc/stat"
CPU_SYSFS = "/sys/devices/system/cpu"
NODE_SYSFS = "/sys/devices/system/node"
PARKED = f"{CPU_SYSFS}/parked"
PREFERRED = f"{CPU_SYSFS}/preferred"
CGROUP = "/sys/fs/cgroup"


class KernelError(OSError):
    """A kernel file that cannot be read or written; errno is kept."""

    def __init__(self, err: int | None, message: str):
        super().__init__(err, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def read(path: str) -> str:
    """The file's text."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise KernelError(e.errno, f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise KernelError(None, f"cannot read {path}: {e}") from None


def write(path: str, text: str) -> None:
    """Write text in one write(2) (sysfs takes one value per write); the
    file must exist: a kernel file is never created."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    except OSError as e:
        hint = " (refused: unknown name or bad value?)" if e.errno == errno.EINVAL else ""
        raise KernelError(e.errno, f"cannot write {text.strip()!r} to {path}: "
                          f"{e.strerror or e}{hint}") from None


# --- scheduler features and schedstats ----------------------------------------

def ensure_debugfs(features_path: str = FEATURES) -> None:
    """Mount debugfs when the default features file is not there yet."""
    if (features_path != FEATURES or os.path.exists(features_path)
            or not os.path.isdir(DEBUGFS) or os.path.ismount(DEBUGFS)):
        return
    proc = subprocess.run(["mount", "-t", "debugfs", "debugfs", DEBUGFS],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise KernelError(None, f"cannot mount debugfs on {DEBUGFS}: "
                          f"{proc.stderr.strip()}")


def features(path: str = FEATURES) -> list[str]:
    """The sched_features as the kernel lists them (NO_X when X is off)."""
    ensure_debugfs(path)
    return read(path).split()


def set_feature(name: str, path: str = FEATURES) -> None:
    """Turn a sched_feature on (NAME) or off (NO_NAME)."""
    ensure_debugfs(path)
    write(path, name)


def enable_schedstats(proc_sys: str = PROC_SYS) -> bool:
    """Turn kernel.sched_schedstats on (the counters stand still without
    it); True when it was off. A kernel without the sysctl has no
    schedstats to turn on: False."""
    path = f"{proc_sys}/kernel/sched_schedstats"
    try:
        state = read(path).strip()
    except KernelError:
        return False
    if state != "0":
        return False
    write(path, "1\n")
    return True


def read_schedstat(path: str = SCHEDSTAT) -> str:
    try:
        return read(path)
    except KernelError as e:
        raise KernelError(e.errno, f"{e} (kernel without CONFIG_SCHEDSTATS?)") from None


def schedstat_snapshot(schedstat_path: str = SCHEDSTAT, stat_path: str = STAT) -> dict:
    """One raw sample: {"time": monotonic seconds, "schedstat": text, "stat": text}."""
    t = time.monotonic()
    return {"time": t, "schedstat": read_schedstat(schedstat_path),
            "stat": read(stat_path)}


# --- CPUs ----------------------------------------------------------------------

def online_cpus(cpu_sysfs: str = CPU_SYSFS) -> list[int]:
    return parse_cpulist(read(f"{cpu_sysfs}/online"))


def topology(cpu_sysfs: str = CPU_SYSFS, node_sysfs: str = NODE_SYSFS) -> dict:
    """cpus, smt_groups, llc_groups, numa_nodes: the CPU topology as
    sysfs shows it."""
    return {
        "cpus": online_cpus(cpu_sysfs),
        "smt_groups": cpu_groups(f"{cpu_sysfs}/cpu*/topology/thread_siblings_list"),
        "llc_groups": sorted(set(llc_of_cpus(cpu_sysfs).values())),
        "numa_nodes": cpu_groups(f"{node_sysfs}/node*/cpulist"),
    }


def _first_line(path: str) -> str | None:
    """The file's first line, stripped; None when it cannot be read."""
    try:
        return read(path).strip().split("\n")[0]
    except KernelError:
        return None


def machine(proc: str = "/proc", cpu_sysfs: str = CPU_SYSFS,
            node_sysfs: str = NODE_SYSFS) -> dict:
    """What a result depends on besides the settings, under the names the
    kernel gives it: the CPU's "model name" (/proc/cpuinfo), the
    ``online`` CPU list, counts of SMT groups, LLCs and NUMA nodes, each
    distinct ``scaling_governor`` (["none"] without cpufreq), SMT
    ``control`` and ``active``, the kernel ``release`` and ``cmdline``.
    A field the machine does not have is None."""
    model = None
    try:
        m = re.search(r"^model name\s*:\s*(.*)$", read(f"{proc}/cpuinfo"), re.M)
        model = m[1].strip() if m else None
    except KernelError:
        pass
    try:
        topo = topology(cpu_sysfs, node_sysfs)
        counts = {k: len(topo[k]) for k in ("smt_groups", "llc_groups", "numa_nodes")}
    except (KernelError, ValueError):
        counts = None
    governors = sorted({g for g in (_first_line(p) for p in glob.glob(
        f"{cpu_sysfs}/cpu[0-9]*/cpufreq/scaling_governor")) if g})
    smt_active = _first_line(f"{cpu_sysfs}/smt/active")
    return {
        "model_name": model,
        "online": _first_line(f"{cpu_sysfs}/online"),
        "topology": counts,
        "scaling_governor": governors or ["none"],
        "smt_control": _first_line(f"{cpu_sysfs}/smt/control"),
        "smt_active": int(smt_active) if smt_active and smt_active.isdigit() else None,
        "release": os.uname().release,
        "cmdline": _first_line(f"{proc}/cmdline"),
    }


def rq_field(cpu: int, field: str, path: str = SCHED_DEBUG) -> int:
    """A field of cpu#N's block in the scheduler's debugfs file (for
    example cfs_overloaded, sis_idle: the CPU's element of its LLC's sets)."""
    return rq_fields(cpu, (field,), path)[field]


def rq_fields(cpu: int, fields, path: str = SCHED_DEBUG) -> dict[str, int]:
    """Several fields of cpu#N's block from one read of the file, so that
    they describe the same moment (as near as the kernel prints them)."""
    text = read(path)
    block = re.search(rf"^cpu#{cpu}\b.*?(?=^cpu#|\Z)", text, re.M | re.S)
    if not block:
        raise KernelError(None, f"no cpu#{cpu} in {path}")
    out = {}
    for field in fields:
        m = re.search(rf"^\s+\.{re.escape(field)}\s*: (-?\d+)", block[0], re.M)
        if not m:
            raise KernelError(None, f"no .{field} for cpu#{cpu} in {path}")
        out[field] = int(m[1])
    return out


ROOT_CFS_RQ_RE = re.compile(r"^cfs_rq\[(\d+)\]:/?$")


def root_cfs_rq_field(cpu: int, field: str, path: str = SCHED_DEBUG) -> int | None:
    """A field of the root cfs_rq of a CPU in the scheduler's debugfs file
    (h_nr_runnable, util_avg, ...); None when that cfs_rq is not listed
    (a fully decayed one leaves the list) or has no such field."""
    block = False
    for line in read(path).splitlines():
        m = ROOT_CFS_RQ_RE.match(line)
        if m:
            block = int(m[1]) == cpu
        elif block and line.strip().startswith(f".{field} "):
            return int(line.split(":")[1])
        elif block and not line.strip():
            block = False
    return None


def task_cpu(pid: int) -> int:
    """The CPU the task runs on, or last ran on (/proc/PID/stat)."""
    return int(read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[36])


IRQ_DIR = "/proc/irq"


def steer_irqs(cpus: str, irq_dir: str = IRQ_DIR) -> dict[str, str]:
    """Send every device interrupt that may move to the CPUs of a cpulist;
    return {irq: its old smp_affinity_list} for restore_irqs(). Interrupts
    the kernel does not let move (per-CPU, managed: EIO) stay."""
    saved = {}
    for irq in sorted(glob.glob(os.path.join(irq_dir, "[0-9]*"))):
        path = os.path.join(irq, "smp_affinity_list")
        try:
            old = read(path).strip()
            write(path, cpus + "\n")
        except (OSError, KernelError):
            continue
        saved[path] = old
    return saved


def restore_irqs(saved: dict[str, str]) -> None:
    for path, old in saved.items():
        try:
            write(path, old + "\n")
        except KernelError:
            pass  # the interrupt went away meanwhile


def task_ticks(pid: int) -> int:
    """Clock ticks of CPU time the task has used (utime + stime)."""
    fields = read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def task_state(pid: int) -> str:
    """The task's state letter (R, S, D, ...) from /proc/PID/stat."""
    stat = read(f"/proc/{pid}/stat")
    return stat[stat.rindex(")") + 2]


def task_blocked(pid: int, proc: str = "/proc") -> bool:
    """Whether the task sleeps off its runqueue: /proc/PID/wchan names the
    function it sleeps in only then (get_wchan() checks !p->on_rq; needs
    CONFIG_KALLSYMS, else it always reads 0). A task preempted on its way
    to sleep, or kept queued by delayed dequeue, shows state S but reads
    0 here: its wakeup requeues it where it is, with no placement."""
    return read(f"{proc}/{pid}/wchan").strip() not in ("", "0")


def cpu_groups(pattern: str) -> list[tuple[int, ...]]:
    """Distinct CPU sets in the cpulist files matching pattern, sorted."""
    return sorted({tuple(parse_cpulist(read(p))) for p in glob.glob(pattern)})


def llc_of_cpus(cpu_sysfs: str = CPU_SYSFS) -> dict[int, tuple[int, ...]]:
    """Online cpu -> the CPUs sharing its last-level (highest) cache; a CPU
    without cache information is left out."""
    out = {}
    for cpu in online_cpus(cpu_sysfs):
        indexes = glob.glob(f"{cpu_sysfs}/cpu{cpu}/cache/index*")
        if indexes:
            last = max(indexes, key=lambda d: int(read(f"{d}/level")))
            out[cpu] = tuple(parse_cpulist(read(f"{last}/shared_cpu_list")))
    return out


def set_online(cpu: int, on: bool) -> None:
    """Hotplug: the kernel takes a write of the state a CPU is already in."""
    write(f"{CPU_SYSFS}/cpu{cpu}/online", "1" if on else "0")


def online_all() -> None:
    for path in glob.glob(f"{CPU_SYSFS}/cpu[0-9]*/online"):
        set_online(int(path.split("/")[-2][3:]), True)


def parked() -> str:
    return read(PARKED).strip()


def preferred() -> str:
    """The read-only view upstream's tools read: active and not parked."""
    return read(PREFERRED).strip()


def hotplug_state(name: str) -> int:
    """The number of a CPU hotplug state, by its name in hotplug/states."""
    for line in read(f"{CPU_SYSFS}/hotplug/states").splitlines():
        num, _, state = line.partition(":")
        if state.strip() == name:
            return int(num)
    raise KernelError(None, f"no CPU hotplug state named {name}")


def set_hotplug_fail(cpu: int, state: int) -> None:
    """Make the CPU's next transition through `state` fail with EAGAIN
    (the file is there with CONFIG_HOTPLUG_CPU alone): the transition
    then rolls back."""
    write(f"{CPU_SYSFS}/cpu{cpu}/hotplug/fail", str(state))


def set_hotplug_target(cpu: int, state: int) -> None:
    """Move the CPU to a hotplug state and stop there (an intermediate one
    needs CONFIG_CPU_HOTPLUG_STATE_CONTROL); the hotplug lock is released
    in between."""
    write(f"{CPU_SYSFS}/cpu{cpu}/hotplug/target", str(state))


def set_parked(cpus: str) -> None:
    """Park the CPUs of a cpulist ("" unparks every CPU)."""
    write(PARKED, cpus + "\n")


def cpu_mode(mode: str, cpus: str = "") -> None:
    """The CPU modes the parking benchmarks compare, idempotent (it is an
    abbench setting): all CPUs in use, `cpus` parked, `cpus` offline."""
    if mode == "offline":
        set_parked("")
    online_all()
    if mode == "offline":
        for cpu in parse_cpulist(cpus):
            set_online(cpu, False)
    else:
        set_parked(cpus if mode == "park" else "")


# --- cgroups ---------------------------------------------------------------

def cgroup_group(name: str, controller: str) -> str:
    """cgroup v2 mounted, `controller` enabled below its root, and the
    group `name` made there; its path."""
    if not os.path.ismount(CGROUP):
        subprocess.run(["mount", "-t", "cgroup2", "none", CGROUP], check=True)
    write(f"{CGROUP}/cgroup.subtree_control", f"+{controller}")
    path = f"{CGROUP}/{name}"
    os.makedirs(path, exist_ok=True)
    return path


def make_cgroup(name: str, cpu_max: str) -> str:
    """A cgroup v2 group with that cpu.max ("QUOTA PERIOD"); its path."""
    path = cgroup_group(name, "cpu")
    write(f"{path}/cpu.max", cpu_max)
    return path


def make_partition(name: str, cpus: str) -> str:
    """A cgroup v2 cpuset partition root on `cpus` (a root domain of its
    own); its path."""
    path = cgroup_group(name, "cpuset")
    write(f"{path}/cpuset.cpus", cpus)
    write(f"{path}/cpuset.cpus.partition", "root")
    return path


def remove_partition(path: str) -> None:
    if os.path.isdir(path):
        write(f"{path}/cpuset.cpus.partition", "member")
        os.rmdir(path)


def joins_cgroup(path: str | None):
    """For subprocess.Popen(preexec_fn=...): the child joins the group
    `path` before it execs (None: stays where it is)."""
    if path is None:
        return None

    def join():
        with open(f"{path}/cgroup.procs", "w") as f:
            f.write("0")
    return join


def cgroup_stat(path: str) -> dict[str, int]:
    return {k: int(v) for k, v in (ln.split() for ln in read(f"{path}/cpu.stat").splitlines())}


# --- command line (for the guest's shell scripts) -----------------------------

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m schedsteal.guest.kernel",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    f = sub.add_parser("feature", help="set sched_features (NAME or NO_NAME)")
    f.add_argument("names", nargs="+", metavar="NAME")
    sub.add_parser("schedstats", help="turn kernel.sched_schedstats on")
    c = sub.add_parser("cgroup", help="make a cgroup with a cpu.max; print its path")
    c.add_argument("name")
    c.add_argument("cpu_max", metavar="'QUOTA PERIOD'")
    m = sub.add_parser("cpu-mode", help="all | park LIST | offline LIST")
    m.add_argument("mode", choices=("all", "park", "offline"))
    m.add_argument("cpus", nargs="?", default="", metavar="LIST")
    args = p.parse_args(argv)
    if args.action == "cpu-mode" and args.mode != "all" and not args.cpus:
        p.error(f"cpu-mode {args.mode} needs a CPU LIST")
    try:
        if args.action == "feature":
            for name in args.names:
                set_feature(name)
        elif args.action == "schedstats":
            enable_schedstats()
        elif args.action == "cgroup":
            print(make_cgroup(args.name, args.cpu_max))
        else:
            cpu_mode(args.mode, args.cpus)
    except KernelError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
