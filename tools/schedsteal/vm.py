"""Boot a built kernel on a named CPU topology and run a command in it.

The guest is started with virtme-ng under QEMU TCG (KVM does not work on
the build machines), over a read-only view of the host's root filesystem.
After every run the guest's kernel log is scanned: a WARNING, BUG, Oops,
lockdep report, RCU stall or hung-task report fails the run even when the
command itself succeeded.

Usage::

    python3 -m schedsteal.vm presets
    python3 -m schedsteal.vm run --kernel bzImage --preset smt4 -- hackbench -g 1
    python3 -m schedsteal.vm scan guest-dmesg.txt

``run`` prints the guest's output and exits with the command's status, or
with 1 when the command succeeded but the kernel log has a splat (124 on a
timeout). ``--keep DIR`` keeps the guest's kernel log and any files the
command wrote to ``$SCHEDSTEAL_OUT`` (the host directory shared read-write
with the guest).

The kernel console is captured too (QEMU's serial port, kept apart from
the command's output): when the guest dies before the command finishes, a
panic at boot say, that is the only kernel log there is, and it is what
gets scanned and shown.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GUEST_INIT = REPO / "guest" / "vm-init.sh"
TRACE_EVENTS = ("sched:sched_switch", "sched:sched_migrate_task",
                "timer:hrtimer_expire_entry")


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
]}

# Kernel log lines that fail a run. Kept narrow enough that ordinary boot
# chatter ("Warning: ..." from firmware tables, say) does not match.
SPLAT_PATTERNS = [
    (re.compile(r"\bWARNING:"), "WARNING"),
    (re.compile(r"\bBUG:"), "BUG"),
    (re.compile(r"\bOops\b"), "Oops"),
    (re.compile(r"Kernel panic"), "panic"),
    (re.compile(r"possible circular locking dependency|"
                r"possible recursive locking|inconsistent lock state|"
                r"suspicious RCU usage|lock held when returning|"
                r"INFO: possible irq lock inversion|"
                r"WARNING: bad unlock balance"), "lockdep"),
    (re.compile(r"rcu: INFO: .* detected stalls|rcu_.* self-detected stall"),
     "RCU stall"),
    (re.compile(r"INFO: task .* blocked for more than"), "hung task"),
    (re.compile(r"watchdog: BUG: soft lockup|hard LOCKUP"), "lockup"),
    (re.compile(r"UBSAN:|KASAN:|kernel BUG at"), "BUG"),
]


@dataclasses.dataclass
class Splat:
    kind: str
    line: str
    lineno: int


def scan_dmesg(text: str) -> list[Splat]:
    """Return every line of a kernel log that reports a splat."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for rx, kind in SPLAT_PATTERNS:
            if rx.search(line):
                found.append(Splat(kind, line.rstrip(), n))
                break
    return found


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


class VMError(Exception):
    pass


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def find_vng() -> str:
    venv = Path(os.environ.get("SCHED_STEAL_CACHE",
                               Path.home() / ".cache" / "sched-steal"))
    for cand in (Path(sys.prefix) / "bin" / "vng", venv / "venv" / "bin" / "vng"):
        if cand.exists():
            return str(cand)
    found = shutil.which("vng")
    if not found:
        raise VMError("vng (virtme-ng) not found: run scripts/setup-host.sh")
    return found


def vng_command(kernel: str, preset: Preset, outdir: str, guest_cmd: str,
                append: list[str] | None = None, vng: str | None = None) -> list[str]:
    """The virtme-ng command line that boots `kernel` on `preset`."""
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
           "--append", f"trace_event={','.join(TRACE_EVENTS)}"]
    for a in append or []:
        cmd += ["--append", a]
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

    @property
    def ok(self) -> bool:
        return self.status == 0 and not self.splats and not self.timed_out


def run(kernel: str, preset: str | Preset, guest_cmd: str, timeout: float = 600,
        append: list[str] | None = None, keep: str | None = None,
        echo: bool = False, vng: str | None = None) -> RunResult:
    """Boot `kernel` on `preset`, run `guest_cmd` in /bin/sh, scan dmesg."""
    if isinstance(preset, str):
        if preset not in PRESETS:
            raise VMError(f"unknown preset {preset!r} "
                          f"(known: {', '.join(PRESETS)})")
        preset = PRESETS[preset]
    if not Path(kernel).is_file():
        raise VMError(f"kernel image {kernel} not found (run `make kernel`)")
    outdir = tempfile.mkdtemp(prefix="schedsteal-vm.")
    os.chmod(outdir, 0o777)
    console = tempfile.TemporaryFile()
    cmd = vng_command(kernel, preset, outdir, guest_cmd, append, vng)
    timed_out = False
    chunks = []
    # vng runs virtme-run from PATH: put its virtualenv first.
    env = dict(os.environ)
    env["PATH"] = f"{Path(cmd[0]).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=console, start_new_session=True, env=env)
    try:
        out, _ = proc.communicate(timeout=timeout)
        chunks.append(out)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        chunks.append(out)
    finally:
        # The guest runs in its own session: never leave it behind when
        # we are interrupted (Ctrl-C, or a test runner timing out).
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = b"".join(chunks).decode(errors="replace")
    console.seek(0)
    console_text = console.read().decode(errors="replace")
    console.close()
    if echo:
        sys.stdout.write(output)
        sys.stdout.flush()
    out_path = Path(outdir)
    dmesg_file = out_path / "dmesg.txt"
    if not dmesg_file.exists():
        dmesg_file = out_path / "dmesg.stream"
    dmesg = dmesg_file.read_text(errors="replace") if dmesg_file.exists() else ""
    rc_file = out_path / "rc"
    died = False
    if timed_out:
        status = 124
    elif rc_file.exists():
        status = int(rc_file.read_text().strip() or 1)
    else:
        # The guest died before the command finished (panic, crash): the
        # console has the kernel log up to the end, the guest's copy not.
        died = True
        status = proc.returncode or 1
    if died or timed_out or not dmesg:
        dmesg = console_text
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for f in out_path.iterdir():
            shutil.copy(f, Path(keep) / f.name)
    shutil.rmtree(outdir, ignore_errors=True)
    return RunResult(status, output, dmesg, scan_dmesg(dmesg), timed_out,
                     console_text, died)


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vm", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    sub.add_parser("presets", help="list the topology presets")
    r = sub.add_parser("run", help="boot a kernel and run a command in it")
    r.add_argument("--kernel", required=True, help="bzImage to boot")
    r.add_argument("--preset", default="smp2", help="topology preset")
    r.add_argument("--timeout", type=float, default=600,
                   help="seconds before the guest is killed (default 600)")
    r.add_argument("--append", action="append", default=[],
                   help="extra kernel command-line option (repeatable)")
    r.add_argument("--keep", metavar="DIR",
                   help="copy the guest's dmesg and $SCHEDSTEAL_OUT files here")
    r.add_argument("--dry-run", action="store_true",
                   help="print the virtme-ng command and exit")
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="-- command for the guest")
    s = sub.add_parser("scan", help="scan a kernel log for splats")
    s.add_argument("file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        if args.action == "presets":
            print(f"{'preset':<12} {'cpus':>4} {'-smp':<28} description")
            for pr in PRESETS.values():
                numa = f", {pr.numa_nodes} nodes" if pr.numa_nodes > 1 else ""
                print(f"{pr.name:<12} {pr.cpus:>4} {pr.smp():<28} "
                      f"{pr.description}{numa}")
            return 0
        if args.action == "scan":
            text = Path(args.file).read_text(errors="replace")
            splats = scan_dmesg(text)
            for s in splats:
                print(f"{args.file}:{s.lineno}: {s.kind}: {s.line}")
            return 1 if splats else 0
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not cmd:
            raise VMError("no guest command given (vm run ... -- CMD)")
        guest_cmd = cmd[0] if len(cmd) == 1 else shlex.join(cmd)
        if args.dry_run:
            preset = PRESETS.get(args.preset)
            if preset is None:
                raise VMError(f"unknown preset {args.preset!r}")
            print(shlex.join(vng_command(args.kernel, preset, "OUTDIR",
                                         guest_cmd, args.append)))
            return 0
        print(f"vm: booting {args.kernel} on {args.preset}", file=sys.stderr)
        res = run(args.kernel, args.preset, guest_cmd, args.timeout,
                  args.append, args.keep, echo=True)
    except (VMError, OSError) as e:
        print(f"vm: error: {e}", file=sys.stderr)
        return 2
    if res.timed_out:
        print(f"vm: guest timed out after {args.timeout:.0f} s", file=sys.stderr)
    if res.died:
        print("vm: FAIL: the guest stopped before the command finished; "
              "its console ended with:", file=sys.stderr)
        print(tail(res.console), file=sys.stderr)
    if res.splats:
        print(f"vm: FAIL: {len(res.splats)} splat(s) in the guest's kernel log:",
              file=sys.stderr)
        print(splat_context(res.dmesg, res.splats), file=sys.stderr)
        return res.status or 1
    if not res.dmesg:
        print("vm: FAIL: no kernel log came back from the guest", file=sys.stderr)
        return res.status or 1
    return res.status


if __name__ == "__main__":
    sys.exit(main())
