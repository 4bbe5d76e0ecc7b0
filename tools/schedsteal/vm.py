"""Boot a built kernel on a named CPU topology and run a command in it.

The guest is started with virtme-ng under QEMU TCG (KVM does not work on
the build machines), over a read-only view of the host's root filesystem.
After every run the guest's kernel log is scanned for the kernel's own
reports (WARNING: CPU: ..., BUG:, Oops, panic, lockdep, RCU stall, hung
task, lockup, UBSAN, KASAN, list corruption, a failed KUnit test): one
fails the run even when
the command itself succeeded. Lines that programs write to the kernel log
("virtme-ng-init: WARNING: ...") are not kernel reports.

Usage::

    schedsteal-vm presets
    schedsteal-vm run --kernel bzImage --preset smt4 -- hackbench -g 1
    schedsteal-vm scan guest-dmesg.txt

(or ``python3 -m schedsteal.vm ...``). ``run`` prints the guest's output
and exits with:

    0    the command exited 0 and the kernel log is clean
    1    the command failed (its status is on stderr:
         "vm: guest command exited with status N")
    2    usage or setup error, before any guest booted ("vm: error: ...")
    3    the kernel log has splats (whatever the command's status)
    4    the guest stopped before the command finished (a panic, say), or
         no kernel log came back
    124  the guest timed out

When several apply, the first of 124, 4, 3, 1 wins. ``--status-file
FILE`` writes the command's own status there (124 on a timeout), for
scripts that need it. ``scan`` exits 0 (clean), 3 (splats) or 2 (not a
kernel log: empty, binary, missing). ``--keep DIR`` keeps the guest's
kernel log and any files the command wrote to ``$SCHEDSTEAL_OUT`` (the
host directory shared read-write with the guest).

The kernel console is captured too (QEMU's serial port, kept apart from
the command's output): when the guest dies before the command finishes, a
panic at boot say, that is the only kernel log there is, and it is what
gets scanned and shown. What the console printed outside the time the
guest's copy of the log spans (lost to the ring buffer, or at shutdown)
is added to that copy and scanned too.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

from . import lab as labmod
from .cli import ToolParser
from .guest.trace import SCHED_EVENTS
from .table import format_table

REPO = Path(__file__).resolve().parents[2]
GUEST_INIT = REPO / "guest" / "vm-init.sh"
# vng hands --exec to the guest on the kernel command line, which the
# kernel cuts at 2048 bytes (x86): a longer command left the guest with a
# truncated init path and a panic. Longer commands go in a file instead.
GUEST_CMD_INLINE_MAX = 512
GUEST_CMD_FILE = "guest-cmd.sh"
TRACE_EVENTS = (*(f"sched:{e}" for e in SCHED_EVENTS), "timer:hrtimer_expire_entry")
# A tracefs instance made at boot with the sched events on, so each has a
# second probe from boot (guest/vm-init.sh switches the instance off).
# abbench run's own instance then adds a third, and only a tracepoint's
# first and second probes patch code (guest/trace.py).
BOOT_INSTANCE = "schedsteal-boot"


@dataclasses.dataclass(frozen=True)
class Preset:
    """A guest topology and what the guest must see of it."""

    name: str
    description: str
    sockets: int
    cores: int  # per socket
    threads: int  # per core
    numa_nodes: int = 1
    memory_mb: int = 1024

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores * self.threads

    def smp(self) -> str:
        return (f"{self.cpus},sockets={self.sockets},cores={self.cores},"
                f"threads={self.threads}")

    def numa_args(self) -> list[str]:
        if self.numa_nodes == 1:
            return []
        per = self.cpus // self.numa_nodes
        mem = self.memory_mb // self.numa_nodes
        args = []
        for n in range(self.numa_nodes):
            args += ["--numa", f"{mem}M,cpus={n * per}-{(n + 1) * per - 1}"]
        return args

    def expected(self) -> dict:
        """Topology the guest must report (cpu ids are QEMU's order:
        threads of a core are adjacent, then cores, then sockets; QEMU's
        L3 is per socket)."""
        cpus = list(range(self.cpus))
        t = self.threads
        per_socket = self.cores * self.threads
        per_node = self.cpus // self.numa_nodes
        return {
            "cpus": self.cpus,
            "smt_groups": [cpus[i:i + t] for i in range(0, self.cpus, t)],
            "llc_groups": [cpus[i:i + per_socket]
                           for i in range(0, self.cpus, per_socket)],
            "numa_nodes": [cpus[i:i + per_node]
                           for i in range(0, self.cpus, per_node)],
        }


PRESETS = {p.name: p for p in [
    Preset("smp2", "2 CPUs, one LLC", 1, 2, 1),
    Preset("smt4", "1 socket, 2 cores x 2 threads", 1, 2, 2),
    Preset("llc2x4", "two LLCs of 4 CPUs (like the arm64 board in the "
           "steal thread)", 2, 4, 1),
    Preset("numa2", "2 nodes x 2 cores x 2 threads", 2, 2, 2, numa_nodes=2),
    Preset("overcommit8", "8 vCPUs on one LLC: more than the host has",
           1, 8, 1),
    # Behaviour, not timing: 8x and 16x the host's cores.
    Preset("big16", "16 vCPUs: 4 LLCs of 4 CPUs on 2 nodes", 4, 4, 1,
           numa_nodes=2, memory_mb=2048),
    Preset("big32", "32 vCPUs: 4 LLCs of 4 cores x 2 threads on 2 nodes",
           4, 4, 2, numa_nodes=2, memory_mb=3072),
    # The wakeup search's worst case: SIS_UTIL's budget and SIS_SPARSE's
    # set matter when one LLC has many CPUs.
    Preset("llc32", "32 vCPUs in one LLC: 16 cores x 2 threads", 1, 16, 2,
           memory_mb=3072),
    # The machines of the design's tables (issue 27), for the parallel
    # clock: one socket of 10 or 22 cores x 2 threads, two of 10 x 2.
    Preset("llc20", "20 vCPUs in one LLC: 10 cores x 2 threads (the design's "
           "1-socket 20-CPU machine)", 1, 10, 2, memory_mb=2048),
    Preset("llc44", "44 vCPUs in one LLC: 22 cores x 2 threads (the design's "
           "1-socket 44-CPU machine)", 1, 22, 2, memory_mb=4096),
    Preset("numa40", "40 vCPUs: 2 nodes, each one LLC of 10 cores x 2 threads "
           "(the design's 2-socket 40-CPU machine)", 2, 10, 2, numa_nodes=2,
           memory_mb=4096),
]}


class VMError(Exception):
    pass


# What may come before the kernel's own text on a line: the level as
# dmesg -r ("<4>") or dmesg -x ("kern  :warn  : ") print it, the time, the
# caller (CONFIG_PRINTK_CALLER). Only facility 0 is the kernel: a program
# writing to /dev/kmsg is "user" (<8> and up), so those lines never match.
LINE_PREFIX = re.compile(r"(?:<[0-7]>)?(?:kern\s*:\s*[a-z]+\s*:\s*)?"
                         r"(?:\[\s*\d+\.\d+\])?(?:\[\s*[TC]\d+\])?\s*")
TIMESTAMP = re.compile(r"^(?:<\d+>)?(?:[a-z]+\s*:\s*[a-z]+\s*:\s*)?"
                       r"\[\s*(\d+\.\d+)\]")

# The kernel's report headers, matched at the start of the kernel's text:
# a program's line has its own name first ("virtme-ng-init: WARNING: ..."),
# so a word like WARNING or BUG elsewhere in a line is never enough.
# First match wins: the specific shapes come before the generic BUG.
_LOCKDEP = "|".join([
    "possible circular locking dependency detected",
    "possible recursive locking detected",
    "inconsistent lock state",
    "suspicious RCU usage",
    "bad unlock balance detected!",
    "lock held when returning to user space!",
    "possible irq lock inversion dependency detected",
    r"\S+-safe -> \S+-unsafe lock order detected",
    "held lock freed!",
    r"\S+/\d+ still has locks held!",
    "Nested lock was not taken",
    "bad contention detected!",
    "chain_key collision",
    "trying to register non-static key",
])
SPLAT_PATTERNS = [(re.compile(rx), kind) for rx, kind in [
    (r"WARNING: CPU: \d+ PID: \d+ at ", "WARNING"),
    (rf"(?:WARNING|INFO): (?:{_LOCKDEP})", "lockdep"),
    (r"BUG: KASAN: ", "KASAN"),
    (r"watchdog: BUG: soft lockup - CPU#\d+ stuck", "lockup"),
    (r"(?:(?:NMI )?watchdog: )?(?:CPU\d+: )?Watchdog detected hard LOCKUP",
     "lockup"),
    (r"BUG: ", "BUG"),
    (r"[Kk]ernel BUG at ", "BUG"),
    (r"Oops: ", "Oops"),
    (r"Kernel panic - not syncing", "panic"),
    (r"(?:rcu: )?INFO: \S+ (?:detected (?:expedited )?stall|self-detected stall)",
     "RCU stall"),
    (r"INFO: task .+:\d+ blocked for more than \d+ seconds", "hung task"),
    (r"UBSAN: ", "UBSAN"),
    (r"list_(?:add|del) corruption|list_add double add", "list corruption"),
    # KTAP from the built-in KUnit suites, run at every boot (a skipped
    # test is "ok N name # SKIP").
    (r"not ok \d+ \S", "KUnit"),
]]
CUT_HERE = re.compile(r"-+\[ cut here \]-+\s*$")
# A "cut here" announces a report a few lines on (WARN() prints its own
# message in between); alone, it is a report we do not know by name.
CUT_HERE_REACH = 8


@dataclasses.dataclass
class Splat:
    kind: str
    line: str
    lineno: int


def kernel_text(line: str) -> str:
    """The kernel's own message in a log line, without level and time."""
    return line[LINE_PREFIX.match(line).end():]


def scan_dmesg(text: str) -> list[Splat]:
    """Return every line of a kernel log that starts a kernel report."""
    found, cut = [], None
    for n, line in enumerate(text.splitlines(), 1):
        msg = kernel_text(line)
        kind = next((k for rx, k in SPLAT_PATTERNS if rx.match(msg)), None)
        if cut and (kind or CUT_HERE.match(msg) or n - cut.lineno > CUT_HERE_REACH):
            if not kind:
                found.append(cut)
            cut = None
        if kind:
            found.append(Splat(kind, line.rstrip(), n))
        elif CUT_HERE.match(msg):
            cut = Splat("cut here", line.rstrip(), n)
    if cut:
        found.append(cut)
    return found


def is_kernel_log(text: str) -> bool:
    """Whether some line has the kernel log's time stamp or banner."""
    return any(TIMESTAMP.match(ln) or "Linux version " in ln
               for ln in text.splitlines())


def read_kernel_log(path: str) -> str:
    """A kernel log file's text; VMError when there is no kernel log in it."""
    data = Path(path).read_bytes()
    if not data.strip():
        raise VMError(f"{path} is empty: no kernel log to scan")
    text = data.decode(errors="replace")
    # dmesg escapes what it cannot print, so a real log has no NUL and
    # next to no bytes that are not UTF-8.
    if b"\0" in data or text.count("\ufffd") * 100 > len(text):
        raise VMError(f"{path} is binary, not a kernel log")
    if not is_kernel_log(text):
        raise VMError(f"{path} has no kernel log line (no [ time ] stamp, "
                      "no Linux version banner)")
    return text


def splat_context(text: str, splats: list[Splat], after: int = 12) -> str:
    """The splat lines with some of what followed (the stack trace)."""
    lines = text.splitlines()
    shown, out = set(), []
    for s in splats:
        for i in range(s.lineno - 1, min(len(lines), s.lineno + after)):
            if i not in shown:
                shown.add(i)
                out.append(lines[i])
        out.append("---")
    return "\n".join(out)


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def json_objects(lines):
    """(line number, object) for every line of a guest's output that is a
    JSON object: what the guest probes print; other lines are skipped."""
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            yield n, obj


def guest_json(output: str) -> dict:
    """The first JSON object a guest command printed (a probe's result)."""
    for _, obj in json_objects(output.splitlines()):
        return obj
    raise VMError(f"no JSON object in the guest's output:\n{tail(output)}")


def kernel_topics(env=None) -> set[str] | None:
    """The series' topics (patches/topics) in the kernels under test:
    $SCHEDSTEAL_TOPICS, comma- or space-separated (`make test-topics
    TOPICS=...` sets it), or None for the whole series (unset, empty or
    "all")."""
    value = (os.environ if env is None else env).get("SCHEDSTEAL_TOPICS", "")
    names = value.replace(",", " ").split()
    return None if not names or names == ["all"] else set(names)


def missing_topics(need, have: set[str] | None) -> list[str]:
    """The topics of `need` that `have` (kernel_topics()) lacks, sorted;
    none when the kernels have the whole series."""
    return [] if have is None else sorted(set(need) - have)


def cache_dir() -> Path:
    """The project's cache directory, as scripts/lib.sh (its one
    definition) says."""
    out = subprocess.run([str(REPO / "scripts" / "lib.sh"), "--cache-dir"],
                         capture_output=True, text=True, check=True).stdout
    return Path(out.strip())


def find_vng() -> str:
    """This interpreter's virtme-ng (the project's virtualenv, when run as
    a console script), else the project's virtualenv, else PATH."""
    cands = [Path(sys.prefix) / "bin" / "vng"]
    try:
        cands.append(cache_dir() / "venv" / "bin" / "vng")
    except (OSError, subprocess.CalledProcessError):
        pass
    for cand in cands:
        if cand.exists():
            return str(cand)
    found = shutil.which("vng")
    if not found:
        raise VMError("vng (virtme-ng) not found: run scripts/setup-host.sh")
    return found


# Kernels with run-time code patching (CONFIG_JUMP_LABEL) boot under
# single-threaded TCG: QEMU's multi-threaded TCG can run a stale int3 that
# text_poke_bp() on another vCPU has already removed ("Oops: int3").
SINGLE_THREAD_TCG = "-accel tcg,thread=single"


def kernel_config(kernel: str) -> str | None:
    """The .config `kernel` was built with, when it sits where a build
    leaves it: the build directory of .../arch/<arch>/boot/bzImage, or
    config-VERSION beside a packaged vmlinuz-VERSION. None otherwise."""
    k = Path(kernel).resolve()  # /boot/vmlinuz is often a link to vmlinuz-VERSION
    candidates = []
    if len(k.parents) >= 4 and k.parent.name == "boot" and k.parents[2].name == "arch":
        candidates.append(k.parents[3] / ".config")
    if k.name.startswith("vmlinuz-"):
        candidates.append(k.with_name("config-" + k.name[len("vmlinuz-"):]))
    for c in candidates:
        try:
            return c.read_text(errors="replace")
        except OSError:
            continue
    return None


def needs_single_thread_tcg(kernel: str) -> bool:
    cfg = kernel_config(kernel)
    return cfg is not None and re.search(r"^CONFIG_JUMP_LABEL=y$", cfg, re.M) is not None


def vng_command(kernel: str, preset: Preset, outdir: str, guest_cmd: str,
                append: list[str] | None = None, vng: str | None = None,
                qemu_opts: list[str] | None = None,
                qemu: str | None = None) -> list[str]:
    """The virtme-ng command line that boots `kernel` on `preset`.
    A jump-label kernel gets single-threaded TCG; if qemu_opts choose an
    accelerator themselves, they are kept, with a warning on stderr unless
    they ask for thread=single or -icount (which implies it). `qemu`: the
    QEMU binary (None: the one on PATH)."""
    qemu_opts = list(qemu_opts or [])
    if needs_single_thread_tcg(kernel):
        if not any("accel" in o for o in qemu_opts):
            qemu_opts.insert(0, SINGLE_THREAD_TCG)
        elif not any("thread=single" in o or "-icount" in o for o in qemu_opts):
            print(f"vm: warning: {kernel} has jump labels; without thread=single "
                  "the guest may die with \"Oops: int3\"", file=sys.stderr)
    init = f"{shlex.quote(str(GUEST_INIT))} {shlex.quote(outdir)} {shlex.quote(guest_cmd)}"
    cmd = [vng or find_vng(), "--run", kernel, "--disable-kvm",
           "--disable-microvm", "--force-9p", "--cpus", preset.smp(),
           "--memory", f"{preset.memory_mb}M", *preset.numa_args(),
           # Kernel console on vng's stderr, which run() keeps apart.
           "--verbose",
           "--rwdir", outdir, "--cwd", str(REPO),
           # 9p root needs a device name to mount; vng leaves it empty.
           "--append", "root=/dev/root",
           # The events the probes trace, enabled while only the boot CPU
           # runs: turning a tracepoint on later patches its static call
           # with text_poke_bp(), which QEMU's multi-threaded TCG can get
           # wrong ("Oops: int3"). The probes only switch tracing_on.
           "--append", f"trace_event={','.join(TRACE_EVENTS)}",
           "--append", f"trace_instance={BOOT_INSTANCE},"
           + ",".join(f"sched:{e}" for e in SCHED_EVENTS),
           # The steal governor (park/0010) is built into the test kernels and
           # would park CPUs under any experiment that shows steal time;
           # off unless asked (--append steal_governor.enabled=1: the
           # later value wins).
           "--append", "steal_governor.enabled=0"]
    for a in append or []:
        cmd += ["--append", a]
    if qemu:
        cmd += ["--qemu", qemu]
    # "=": vng would take "-accel ..." for its own -a (--append) and stop.
    # vng hands the words to a shell: quote each one.
    cmd += [f"--qemu-opts={shlex.join(shlex.split(o))}" for o in qemu_opts]
    return cmd + ["--exec", init]


@dataclasses.dataclass
class RunResult:
    status: int          # command's status, or 124 on timeout
    output: str          # the guest's stdout and stderr
    dmesg: str
    splats: list[Splat]
    timed_out: bool
    console: str = ""    # the kernel console, as QEMU's serial port saw it
    died: bool = False   # the guest stopped before the command finished
    lab: dict | None = None  # the QEMU and clock it ran under (lab.py)
    monitor: object = None   # what run()'s monitor returned

    @property
    def host_crash(self) -> bool:
        """QEMU itself went away during the boot: the guest died before
        the command printed anything, and the console ends without any
        kernel report or restart. Seen as a QEMU 7.2 TCG segfault in the
        host's log, about 1 boot in 20 in one test run and never in the
        runs before; in CI after stop 46, twice in one run, once in each
        binary (stock and lab), both a NULL MemoryRegion in
        memory_region_dispatch_write() while the guest set up its PCI
        BARs. A kernel that dies this way every time still fails on a
        second boot."""
        if not self.died or self.output.strip() or self.splats:
            return False
        return not re.search(r"Kernel panic|Oops|Call Trace|Restarting system|"
                             r"reboot: |Run /.* as init process", self.console)

    @property
    def lost_timer(self) -> bool:
        """The only reports are RCU stalls, and RCU says why: its
        grace-period kthread slept on a timer that never fired ("timer
        wakeup didn't happen ... Possible timer handling issue on cpu=N"),
        and every CPU the stall detector's NMIs looked at, CPU N among
        them, was idle in halt with interrupts on (swapper at a halt
        instruction, EFLAGS.IF set), and no reader is reported blocked.
        Seen once, in CI after stop 38, on a 16-vCPU TCG guest: one vCPU
        halted at 13.8 s and took no timer interrupt for 190 s (its clock
        stood still) while the CPUs around it ticked. A timer that does not fire on an idle
        CPU is the emulated hardware's or the timer code's failure; a CPU
        that spins with interrupts off (a scheduler lockup) shows its
        spinning code in the backtrace, and a task the scheduler never
        runs is "starved" without the timer line, so neither counts."""
        if not self.splats or any(s.kind != "RCU stall" for s in self.splats):
            return False
        # A preempted reader the scheduler never ran again is its business.
        if "Tasks blocked on level-" in self.dmesg:
            return False
        cpus = re.findall(r"kthread timer wakeup didn't happen.*\n.*"
                          r"Possible timer handling issue on cpu=(\d+)", self.dmesg)
        if not cpus:
            return False
        lines = self.dmesg.splitlines()
        # Every CPU the detector looked at, not only the timer's, must have
        # been idle in halt with interrupts on (EFLAGS.IF): a CPU spinning
        # in the scheduler, or halted with interrupts off, is a real bug.
        looks = [(i, m[1]) for i, ln in enumerate(lines)
                 if (m := re.search(r"NMI backtrace for cpu (\d+)", ln))]
        if not set(cpus) <= {cpu for _, cpu in looks}:
            return False
        for i, cpu in looks:
            if "skipped: idling at" in lines[i]:
                continue
            nxt = lines[i + 1:i + 8]
            flags = [int(m[1], 16) for ln in nxt if (m := re.search(r"EFLAGS: ([0-9a-f]+)", ln))]
            if not (any(re.search(rf"Comm: swapper/{cpu}\b", ln) for ln in nxt)
                    and any(re.search(r"RIP: [0-9a-f]+:\S*(?:safe_halt|native_halt|"
                                      r"default_idle)\+", ln) for ln in nxt)
                    and flags and all(f & 0x200 for f in flags)):
                return False
        return True

    @property
    def ok(self) -> bool:
        # No kernel log is no evidence of a clean kernel.
        return (self.status == 0 and not self.splats and not self.timed_out
                and not self.died and bool(self.dmesg.strip()))


def exit_code(res: RunResult) -> int:
    """The CLI's exit code for a run (see the module docstring)."""
    if res.timed_out:
        return 124
    if res.died or not res.dmesg.strip():
        return 4
    if res.splats:
        return 3
    return 1 if res.status else 0


def get_preset(preset: str | Preset) -> Preset:
    if isinstance(preset, Preset):
        return preset
    if preset not in PRESETS:
        raise VMError(f"unknown preset {preset!r} (known: {', '.join(PRESETS)})")
    return PRESETS[preset]


def check_timeout(timeout: float) -> float:
    # communicate() takes 0 or less as "already late" and chokes on nan
    # and inf: each would look like a guest that timed out or crashed.
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout)
            and timeout > 0):
        raise VMError(f"timeout must be a positive number of seconds, "
                      f"not {timeout!r}")
    return float(timeout)


def _stamp(line: str) -> float | None:
    m = TIMESTAMP.match(line)
    return float(m[1]) if m else None


def with_console_ends(dmesg: str, console: str) -> str:
    """The guest's copy of the kernel log, with the console lines from
    outside the time it spans: what the ring buffer had already lost when
    the copy was taken, and what was printed after it (at shutdown)."""
    stamps = [t for t in map(_stamp, dmesg.splitlines()) if t is not None]
    if not stamps:
        return dmesg
    first, last = stamps[0], stamps[-1]
    before, after, now = [], [], None
    for line in console.splitlines():
        stamp = _stamp(line)
        now = stamp if stamp is not None else now  # a continued line
        if now is not None and now < first:
            before.append(line)
        elif now is not None and now > last:
            after.append(line)
    if not before and not after:
        return dmesg
    return "".join(ln + "\n" for ln in before) + dmesg + \
        ("" if dmesg.endswith("\n") else "\n") + "".join(ln + "\n" for ln in after)


def _regular_or_link(src: str, names: list[str]) -> list[str]:
    """copytree's ignore: skip what is no file, link or directory (shutil
    refuses a FIFO, and one the guest left would fail the whole copy)."""
    skip = []
    for n in names:
        p = Path(src, n)
        if not (p.is_symlink() or p.is_dir() or p.is_file()):
            skip.append(n)
    return skip


def guest_cmd_inline(guest_cmd: str, outdir: str) -> str:
    """The command to put on the kernel command line: `guest_cmd` itself
    when short, else one that runs it from outdir/guest-cmd.sh (outdir is
    shared with the guest; the file is kept with the guest's files)."""
    if len(guest_cmd.encode()) <= GUEST_CMD_INLINE_MAX:
        return guest_cmd
    path = Path(outdir) / GUEST_CMD_FILE
    path.write_text(guest_cmd + "\n")
    path.chmod(0o644)
    return f"exec /bin/sh {shlex.quote(str(path))}"


def keep_files(src: Path, dest: Path) -> None:
    """Copy the guest's output directory into `dest`, subdirectories too.
    Links are copied as links: the guest's view of the host's files is
    not the host's to copy."""
    for f in src.iterdir():
        target = dest / f.name
        if f.is_symlink():
            target.unlink(missing_ok=True)
            target.symlink_to(os.readlink(f))
        elif f.is_dir():
            shutil.copytree(f, target, symlinks=True, dirs_exist_ok=True,
                            ignore=_regular_or_link)
        elif f.is_file():
            shutil.copy2(f, target)


def resolve_lab(qemu: str = "stock", clock: str | None = None,
                quantum_ns: int | None = None, steal_time: bool | None = None,
                qemu_opts: list[str] | None = None) -> tuple[labmod.Lab, list[str]]:
    """The QEMU and clock a boot runs under, and the QEMU options they
    add (lab.resolve); VMError for a choice that cannot work."""
    try:
        cache = cache_dir() if qemu != "stock" else None
        if cache and qemu != "lab" and Path(qemu).resolve() == labmod.lab_binary(cache).resolve():
            qemu = "lab"  # the same binary, by its name
        return labmod.resolve(qemu, clock, quantum_ns, steal_time, qemu_opts, cache)
    except labmod.LabError as e:
        raise VMError(str(e)) from None


def run(kernel: str, preset: str | Preset, guest_cmd: str, timeout: float = 600,
        append: list[str] | None = None, keep: str | None = None,
        echo: bool = False, vng: str | None = None,
        qemu_opts: list[str] | None = None,
        lab: labmod.Lab | None = None, monitor=None) -> RunResult:
    """Boot `kernel` on `preset`, run `guest_cmd` in /bin/sh, scan dmesg.
    `lab` (resolve_lab): the QEMU and clock, whose options must already
    be in `qemu_opts`; None: stock QEMU, the clock `qemu_opts` select.
    `monitor`: called in a thread of its own while the guest runs, as
    monitor(session, outdir, stop): `session` is the session id of the
    guest's processes (QEMU among them), `outdir` the directory shared
    with the guest, `stop` a threading.Event set when the guest is gone;
    what it returns is the result's .monitor (an exception it raises
    fails the run with VMError).

    Every argument is checked before the guest boots (VMError)."""
    preset = get_preset(preset)
    timeout = check_timeout(timeout)
    if lab is None:
        lab, extra = resolve_lab(qemu_opts=qemu_opts, steal_time=False)
        qemu_opts = list(qemu_opts or []) + extra
    if not Path(kernel).is_file():
        raise VMError(f"kernel image {kernel} not found (run `make kernel`)")
    if keep:
        try:
            Path(keep).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise VMError(f"cannot keep files in {keep}: {e}") from e
    outdir = tempfile.mkdtemp(prefix="schedsteal-vm.")
    try:
        os.chmod(outdir, 0o777)
        # The guest's tools (abbench) copy this into their results.
        (Path(outdir) / labmod.LAB_FILE).write_text(json.dumps(lab.record()) + "\n")
        guest_cmd = guest_cmd_inline(guest_cmd, outdir)
        res = _boot(kernel, preset, guest_cmd, timeout, append, echo, vng, outdir,
                    qemu_opts, lab.binary, monitor)
        res.lab = lab.record()
        if keep:
            keep_files(Path(outdir), Path(keep))
        return res
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def run_past_host_crash(kernel: str, preset: str | Preset, guest_cmd: str,
                        **kwargs) -> RunResult:
    """run(), and once more when QEMU itself ended the first boot before
    the kernel reached user space (RunResult.host_crash: Debian's QEMU
    7.2 segfaults in memory_region_dispatch_write() now and then under
    multi-threaded TCG, as the lab's did before qemu/patches/0005). The
    second boot's result is returned whatever it is: a kernel that dies
    this way every time still fails. A warning carries the first
    console's end."""
    res = run(kernel, preset, guest_cmd, **kwargs)
    if res.host_crash:
        name = preset.name if isinstance(preset, Preset) else preset
        warnings.warn(f"{name}: QEMU ended the boot early, no kernel report; "
                      f"booting again. Console:\n{tail(res.console, 5)}", stacklevel=2)
        res = run(kernel, preset, guest_cmd, **kwargs)
    return res


def _boot(kernel: str, preset: Preset, guest_cmd: str, timeout: float,
          append: list[str] | None, echo: bool, vng: str | None,
          outdir: str, qemu_opts: list[str] | None = None,
          qemu: str | None = None, monitor=None) -> RunResult:
    cmd = vng_command(kernel, preset, outdir, guest_cmd, append, vng, qemu_opts, qemu)
    watch = _Monitor(monitor, outdir)
    timed_out = False
    # vng runs virtme-run from PATH: put its virtualenv first.
    env = dict(os.environ)
    env["PATH"] = f"{Path(cmd[0]).parent}{os.pathsep}{env.get('PATH', '')}"
    with tempfile.TemporaryFile() as console:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=console,
                                start_new_session=True, env=env)
        watch.start(proc.pid)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        finally:
            # The guest runs in its own session: never leave it behind when
            # we are interrupted (Ctrl-C, or a test runner timing out).
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            watch.stop()
        console.seek(0)
        console_text = console.read().decode(errors="replace")
    output = out.decode(errors="replace")
    if echo:
        sys.stdout.write(output)
        sys.stdout.flush()
    out_path = Path(outdir)
    dmesg_file = out_path / "dmesg.txt"
    if not dmesg_file.exists():
        dmesg_file = out_path / "dmesg.stream"
    dmesg = dmesg_file.read_text(errors="replace") if dmesg_file.exists() else ""
    rc_file = out_path / "rc"
    status = None
    if rc_file.exists():
        try:
            status = int(rc_file.read_text().strip())
        except ValueError:
            pass  # cut short while written: the guest did not finish
    died = False
    if timed_out:
        status = 124
    elif status is None:
        # The guest died before the command finished (panic, crash): the
        # console has the kernel log up to the end, the guest's copy not.
        died = True
        status = proc.returncode or 1
    if died or timed_out or not dmesg.strip():
        dmesg = console_text
    else:
        dmesg = with_console_ends(dmesg, console_text)
    return RunResult(status, output, dmesg, scan_dmesg(dmesg), timed_out,
                     console_text, died, monitor=watch.result())


class _Monitor:
    """run()'s monitor in its thread: started with the guest, stopped
    and joined when the guest is gone, its exception passed on."""

    def __init__(self, fn, outdir: str):
        self.fn, self.outdir = fn, outdir
        self.done = threading.Event()
        self.thread = None
        self.value = self.error = None

    def start(self, session: int) -> None:
        if self.fn is None:
            return

        def body():
            try:
                self.value = self.fn(session, self.outdir, self.done)
            except Exception as e:  # noqa: BLE001 - handed to the caller
                self.error = e
        self.thread = threading.Thread(target=body, name="vm-monitor", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        if self.thread:
            self.thread.join()

    def result(self):
        if self.error is not None:
            raise VMError(f"the run's monitor failed: {self.error}") from self.error
        return self.value


class _Parser(ToolParser):
    tool = "vm"


def _seconds(text: str) -> float:
    try:
        return check_timeout(float(text))
    except (ValueError, VMError):
        raise argparse.ArgumentTypeError(
            f"must be a positive number of seconds, not {text!r}") from None


def presets_table() -> str:
    rows = [("preset", "cpus", "-smp", "description")]
    for pr in PRESETS.values():
        numa = f", {pr.numa_nodes} nodes" if pr.numa_nodes > 1 else ""
        rows.append((pr.name, pr.cpus, pr.smp(), pr.description + numa))
    return "\n".join(format_table(rows, left=(0, 2, 3)))


def _quantum(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of ns, not {text!r}") from None


def add_lab_arguments(p: argparse.ArgumentParser) -> None:
    """--qemu, --clock, --quantum, --steal-time (docs/lab.md)."""
    g = p.add_argument_group("QEMU and clock (docs/lab.md)")
    g.add_argument("--qemu", default="stock", metavar="stock|lab|PATH",
                   help="Debian's QEMU (default), the lab QEMU (`make qemu`), or a binary")
    g.add_argument("--clock", choices=labmod.CLOCKS,
                   help="host: multi-threaded TCG, the host's time; icount: one "
                   "instruction per ns, the sum of all vCPUs' work; parallel (lab "
                   "QEMU): one instruction per ns on each vCPU as if each had a "
                   "CPU (default: host, or what --qemu-opts' -icount says)")
    g.add_argument("--quantum", type=_quantum, metavar="NS",
                   help=f"the parallel clock's turn (default {labmod.DEFAULT_QUANTUM_NS})")
    g.add_argument("--steal-time", action=argparse.BooleanOptionalAction, default=None,
                   help="KVM steal time for the guest (lab QEMU, host clock; "
                   "default: on there, off elsewhere)")


def lab_from_args(args: argparse.Namespace) -> tuple[labmod.Lab, list[str]]:
    """resolve_lab() from the options of add_lab_arguments(); the QEMU
    options returned include args.qemu_opts."""
    lab, extra = resolve_lab(args.qemu, args.clock, args.quantum, args.steal_time,
                             args.qemu_opts)
    return lab, list(args.qemu_opts) + extra


RUN_EPILOG = """\
exit codes (when several apply, the first of 124, 4, 3, 1):
  0    the command exited 0 and the kernel log is clean
  1    the command failed; stderr says "vm: guest command exited with
       status N" (--status-file has N)
  2    usage or setup error, before any guest booted ("vm: error: ...")
  3    the kernel log has splats, whatever the command's status
  4    the guest stopped before the command finished (a panic, say), or
       no kernel log came back
  124  the guest timed out
"""


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="schedsteal-vm", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    sub.add_parser("presets", help="list the topology presets")
    r = sub.add_parser(
        "run", help="boot a kernel and run a command in it",
        description="Boot a kernel on a topology preset, run a command in "
        "it, scan the guest's kernel log.",
        epilog="presets:\n" + "\n".join(
            "  " + ln for ln in presets_table().splitlines()) + "\n\n" + RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--kernel", required=True, help="bzImage to boot")
    r.add_argument("--preset", default="smp2", choices=list(PRESETS), metavar="NAME",
                   help="topology preset, one of those below (default: %(default)s)")
    r.add_argument("--timeout", type=_seconds, default=600.0, metavar="SECONDS",
                   help="seconds before the guest is killed (default: %(default)g)")
    r.add_argument("--append", action="append", default=[], metavar="OPTION",
                   help="extra kernel command-line option (repeatable)")
    r.add_argument("--qemu-opts", action="append", default=[], metavar="OPTS",
                   help="extra QEMU arguments, e.g. '-icount shift=0,sleep=off' "
                   "(repeatable; see docs/steal.md on icount)")
    add_lab_arguments(r)
    r.add_argument("--keep", metavar="DIR",
                   help="copy the guest's dmesg and $SCHEDSTEAL_OUT files here")
    r.add_argument("--status-file", metavar="FILE",
                   help="write the guest command's own status here "
                   "(124 on a timeout)")
    r.add_argument("--dry-run", action="store_true",
                   help="print the virtme-ng command and exit")
    r.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD",
                   help="the command for the guest's /bin/sh")
    s = sub.add_parser("scan", help="scan a kernel log for splats "
                       "(exit 0 clean, 3 splats, 2 not a kernel log)")
    s.add_argument("file")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = make_parser().parse_args(argv)
    except SystemExit as e:  # --help, or a usage error already printed
        return e.code if isinstance(e.code, int) else 2
    status_file = getattr(args, "status_file", None)
    try:
        if args.action == "presets":
            print(presets_table())
            return 0
        if args.action == "scan":
            splats = scan_dmesg(read_kernel_log(args.file))
            for s in splats:
                print(f"{args.file}:{s.lineno}: {s.kind}: {s.line}")
            return 3 if splats else 0
        if status_file:
            # A status left from an earlier run must not pass for this one.
            Path(status_file).unlink(missing_ok=True)
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not cmd:
            raise VMError("no guest command given (schedsteal-vm run ... -- CMD)")
        guest_cmd = cmd[0] if len(cmd) == 1 else shlex.join(cmd)
        lab, qemu_opts = lab_from_args(args)
        if args.dry_run:
            print(shlex.join(vng_command(args.kernel, PRESETS[args.preset],
                                         "OUTDIR", guest_cmd, args.append,
                                         qemu_opts=qemu_opts, qemu=lab.binary)))
            return 0
        if status_file:
            Path(status_file).touch()  # fail now, not after the run
        print(f"vm: booting {args.kernel} on {args.preset} ({lab.qemu} QEMU, "
              f"{lab.clock} clock{', steal time' if lab.steal_time else ''})",
              file=sys.stderr)
        try:
            res = run(args.kernel, args.preset, guest_cmd, args.timeout,
                      args.append, args.keep, echo=True, qemu_opts=qemu_opts, lab=lab)
        except BaseException:
            if status_file:
                Path(status_file).unlink(missing_ok=True)
            raise
        if status_file:
            Path(status_file).write_text(f"{res.status}\n")
    except (VMError, OSError) as e:
        print(f"vm: error: {e}", file=sys.stderr)
        return 2
    if res.timed_out:
        print(f"vm: guest timed out after {args.timeout:g} s", file=sys.stderr)
    elif res.died:
        print("vm: FAIL: the guest stopped before the command finished; "
              "its console ended with:", file=sys.stderr)
        print(tail(res.console), file=sys.stderr)
    elif res.status:
        print(f"vm: guest command exited with status {res.status}", file=sys.stderr)
    if res.splats:
        print(f"vm: FAIL: {len(res.splats)} splat(s) in the guest's kernel log:",
              file=sys.stderr)
        print(splat_context(res.dmesg, res.splats), file=sys.stderr)
    if not res.dmesg.strip():
        print("vm: FAIL: no kernel log came back from the guest", file=sys.stderr)
    return exit_code(res)


if __name__ == "__main__":
    sys.exit(main())
