"""The steal governor's probe (guest side): ``python3 guest/governor_probe.py``.
Prints one JSON object for tests/vm/test_governor.py and
``schedsteal-governor``.

    governor_probe.py run [--busy-to 3] [--confine-to 1] [--restore-to 3]
                          [--others 5-7] [--quiet-s 3] [--phase-s 30] [--hold-s 4]
                          [--poll 0.05]
        Switches the governor on (steal_governor.enabled=Y; the boot
        chooses interval_ms) and samples /sys/devices/system/cpu/preferred
        and each CPU's steal every --poll s through six phases:
          quiet    the guest idle, for --quiet-s;
          static   (--static K,...) the governor off, the loops started,
                   the first K CPUs preferred (the rest parked by hand)
                   for --hold-s each: the static sets to compare with;
          busy     a busy loop per online CPU (or, --hackbench G,L, hackbench
                   runs back to back; or, --stress-ng N, one stress-ng run of
                   N matrixprod workers cut at each window (below); or
                   --stress-ng N,S, runs of S s back to back, rounds being
                   bogo-ops), every CPU allowed: until at
                   most --busy-to CPUs are preferred, then --hold-s more;
          confine  between the marks confine-start and confine-end (the
                   host confines QEMU to one core, lab.ConfineQemu): until
                   at most --confine-to are preferred, then --hold-s;
          restore  after confine-end (the host gives the cores back):
                   until --restore-to or more are preferred, then --hold-s;
          idle     the loops stopped: until every CPU is preferred;
          others   --others written to parked by hand, for --hold-s: the
                   governor leaves CPUs it did not park alone.
        A phase that never reaches its state ends after --phase-s and is
        reported as not reached. Then the governor is switched off (the
        hand-written set must stay), the files read back, and the set
        cleared. Each loop counts its rounds (a counter file per loop,
        read at each sample): the workload's throughput.

    governor_probe.py module --ko PATH [--others 7] [--interval-ms 100] [--limit-s 30]
        The governor as a module (a kernel built with
        CONFIG_STEAL_GOVERNOR=m): two loads with refused parameters
        (low_threshold not below high_threshold; high_threshold out of
        range) must fail and change nothing; with --others parked by
        hand and a busy loop per CPU, a load must govern (park a core of
        its own within --limit-s), and an unload must unpark what it
        parked and leave --others parked; a second load (enabled=0) and
        unload must work too.

        With --stress-ng N (no run length) the load is one stress-ng run
        at a time, interrupted (SIGINT: stress-ng stops its workers and
        reports the partial run) and started again at each phase's start
        and when a phase reaches its state: "segments" lists each window's
        [phase, settled, t start, t end, bogo-ops, real s] as stress-ng
        reported them, so that a phase's rate has no whole-run rounding.

    governor_probe.py busydomain --ko PATH [--top 4-7] [--sleepers 3]
                                 [--runtime-us 9600] [--period-us 10000]
                                 [--interval-ms 100] [--limit-s 30]
        The module again, on a guest split in two root domains: --top a
        cpuset partition whose admitted deadline sleepers leave no
        capacity to park any of its CPUs (a park by hand is refused with
        EBUSY first). With a busy loop on every CPU, a load must park a
        core below --top, none in it, and the unload unpark it.
"""
import argparse
import os
import select
import signal
import subprocess
import time

from .. import schedstat
from ..cpulist import format_cpulist, parse_cpulist
from . import kernel, print_result, stop_hogs, until, workloads
from .lab_probe import write_mark

GOVERNOR = "/sys/module/steal_governor/parameters"
PARAMS = ("enabled", "interval_ms", "high_threshold", "low_threshold", "unpark_backoff",
          "park_confirm")
PHASES = ("quiet", "busy", "confine", "restore", "idle", "others")

# A busy loop that counts its rounds in a file it rewrites every 2**16
# rounds (position 0, no growth): a sample reads every loop's count.
COUNTING_LOOP = ("import os, sys\n"
                 "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
                 "print('running', flush=True)\n"
                 "n = 0\n"
                 "while True:\n"
                 "    n += 1\n"
                 "    if not n & 0xffff:\n"
                 "        os.pwrite(fd, b'%020d' % n, 0)\n")


def params() -> dict:
    """The governor's parameters; one a kernel does not have (unpark_backoff
    before 0041, park_confirm before park/0025) is left out."""
    return {p: kernel.read(f"{GOVERNOR}/{p}").strip() for p in PARAMS
            if os.path.exists(f"{GOVERNOR}/{p}")}


def steal_ticks(cpus) -> list[int]:
    """Each CPU's steal so far, /proc/stat's clock ticks."""
    stat = schedstat.parse_proc_stat(kernel.read(kernel.STAT))
    return [stat[f"cpu{c}"]["steal"] for c in cpus]


def loop_rounds(paths) -> int:
    """The loops' rounds so far: a counting loop's file holds its count;
    the hackbench loop's gains one byte per finished run."""
    total = 0
    for p in paths:
        try:
            if p.endswith(".runs"):
                total += os.path.getsize(p)
                continue
            with open(p, "rb") as f:
                total += int(f.read() or b"0")
        except (OSError, ValueError):
            pass
    return total


# stress-ng runs back to back: the workload registry's stress-ng-cpu
# (bench-park's mix: matrixprod workers), its command and its parser; the
# counter file holds the bogo-ops of the finished runs, rewritten in place
# as the counting loop's is. A run's ops count when it ends: a rate over a
# window is off by at most one run's ops (keep runs short against the
# window: 1 s runs against 20 s held).
STRESS_LOOP = ("import os, subprocess, sys\n"
               "from schedsteal.guest import workloads\n"
               "path, workers, secs, workdir = sys.argv[1:5]\n"
               "w = workloads.get('stress-ng-cpu')\n"
               "argv = w.command(int(workers), {'runtime': int(secs)}, workdir)\n"
               "fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
               "print('running', flush=True)\n"
               "total = 0\n"
               "while True:\n"
               "    out = subprocess.run(argv, capture_output=True, text=True, check=True)\n"
               "    total += int(w.parse(out.stdout + out.stderr, workdir).extra['bogo_ops'])\n"
               "    os.pwrite(fd, b'%020d' % total, 0)\n")


# hackbench process/pipe runs back to back; one byte per finished run.
HACKBENCH_LOOP = ("echo running; while :; do "
                  "hackbench -P -p -g {groups} -l {loops} >/dev/null 2>&1 && printf x >>{path}; done")


class StressCuts:
    """One stress-ng run of `workers` matrixprod workers at a time (every
    CPU in `cpus` allowed), cut at each window: cut() interrupts the run,
    keeps what stress-ng reported for it and starts the next one. A run is
    bounded by --timeout 3600 s in case the probe dies without stopping it
    (its session is killed by stop() as well)."""

    # The first start loads the binary over 9p: seconds under TCG.
    START_S = 300

    def __init__(self, cpus, workers: int, workdir: str, t0: float):
        self.cpus, self.workers, self.workdir, self.t0 = cpus, workers, workdir, t0
        self.p, self.tag, self.started, self.head = None, None, None, b""
        self.segments, self.total, self.stopped = [], 0, False

    def _start(self, tag) -> None:
        argv = workloads.get("stress-ng-cpu").command(self.workers, {"runtime": 3600}, None)
        argv[argv.index("--temp-path") + 1] = self.workdir
        self.head = b""
        self.p = subprocess.Popen(["taskset", "-c", ",".join(map(str, self.cpus)), *argv],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        # Its workers run once it says so: a window starts then, not at the
        # fork. Read from the descriptor itself (bytes, decoded once in
        # cut()): the pipe's file object would read ahead, and
        # communicate() in cut() does not see what it holds.
        fd, head = self.p.stdout.fileno(), b""
        deadline = time.monotonic() + self.START_S
        while b"dispatching hogs" not in head:
            left = deadline - time.monotonic()
            chunk = os.read(fd, 4096) if left > 0 and select.select([fd], [], [], left)[0] else b""
            if not chunk:
                self.stop()
                said = head.decode(errors="replace")[-500:]
                raise RuntimeError(f"stress-ng did not start its workers: {said!r}")
            head += chunk
        self.head = head
        self.tag, self.started = tag, time.monotonic() - self.t0

    def cut(self, tag) -> None:
        """End the running window (if any) and start one tagged `tag`
        ((phase, settled)); tag None stops the load for good. A run that
        ends with neither a report nor a clean exit is an error."""
        if self.stopped:
            return
        if self.p is not None:
            os.kill(self.p.pid, signal.SIGINT)
            out = (self.head + self.p.communicate(timeout=120)[0]).decode(errors="replace")
            ended = time.monotonic() - self.t0
            rc, self.p, self.head = self.p.returncode, None, b""
            try:
                r = workloads.parse_stress_ng(out)
                ops = r.extra["bogo_ops"]
                real = ops / r.value if r.value > 0 else ended - self.started
            except workloads.WorkloadError:
                if rc != 0:
                    raise RuntimeError(f"stress-ng ended (status {rc}) without a report:"
                                       f" {out[-500:]!r}") from None
                # Cut before a worker finished a round (a state reached
                # at a phase's first sample): nothing done, nothing lost.
                ops, real = 0, ended - self.started
            self.segments.append([self.tag[0], self.tag[1], round(self.started, 3),
                                  round(ended, 3), ops, round(real, 3)])
            self.total += ops
        if tag is None:
            self.stopped = True
        else:
            self._start(tag)

    def stop(self) -> None:
        if self.p is not None:
            stop_group(self.p)
            self.p.stdout.close()
            self.p = None


class Sampler:
    """Samples of the preferred count, CPU 0's state, each CPU's steal and
    the load's rounds, each tagged with its phase; t in s since creation."""

    def __init__(self, cpus, poll):
        self.cpus, self.poll = cpus, poll
        self.t0 = time.monotonic()
        self.samples, self.counters, self.starts = [], [], {}
        self.cuts = None  # StressCuts: windows cut at phase starts and states

    def sample(self, phase: str) -> int:
        pref = parse_cpulist(kernel.preferred())
        rounds = self.cuts.total if self.cuts else loop_rounds(self.counters)
        self.samples.append([round(time.monotonic() - self.t0, 3), phase, len(pref),
                             0 in pref, steal_ticks(self.cpus), rounds])
        return len(pref)

    def phase(self, name, done, limit, hold):
        """Sample until done(count), then `hold` s more, at most `limit` s
        before that; when done() first held (s since creation), or None."""
        if self.cuts:
            self.cuts.cut((name, False))
        start = time.monotonic()
        self.starts[name] = round(start - self.t0, 3)
        end = start + limit
        reached = None
        while True:
            n = self.sample(name)
            now = time.monotonic()
            if reached is None and done(n):
                if self.cuts:
                    self.cuts.cut((name, True))
                reached = now - self.t0
                end = now + hold
            if now >= end:
                return reached
            time.sleep(self.poll)


def start_session_loop(cpus, argv: list[str], what: str):
    """argv, a loop that prints "running" once it runs, every CPU allowed,
    in a session of its own (stop_group() kills it and all it started);
    returns once it runs."""
    p = subprocess.Popen(["taskset", "-c", ",".join(map(str, cpus)), *argv],
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    if p.stdout.readline() != "running\n":
        stop_group(p)
        raise RuntimeError(f"the {what} loop did not start")
    p.stdout.close()
    return p


def start_hackbench(cpus, outdir, groups: int, loops: int):
    """hackbench runs back to back; returns once the loop runs."""
    path = os.path.join(outdir, "hackbench.runs")
    open(path, "w").close()
    cmd = HACKBENCH_LOOP.format(groups=groups, loops=loops, path=path)
    return [start_session_loop(cpus, ["sh", "-c", cmd], "hackbench")], [path]


def start_stress(cpus, outdir, workers: int, secs: int):
    """stress-ng runs back to back; returns once the loop runs."""
    path = os.path.join(outdir, "stress-ng.ops")
    argv = ["python3", "-c", STRESS_LOOP, path, str(workers), str(secs), outdir]
    return [start_session_loop(cpus, argv, "stress-ng")], [path]


def stop_group(p) -> None:
    """Kill a loop and everything it started (its own session)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def start_loops(cpus, outdir, cgroup: str | None = None, tag: str = "loop"):
    """One counting loop per CPU, every CPU allowed; returns once all run.
    cgroup: a cgroup v2 group each joins before it execs (a cpuset
    partition's CPUs are allowed only inside it)."""
    allowed = ",".join(map(str, cpus))
    procs, paths = [], []
    for i in range(len(cpus)):
        path = os.path.join(outdir, f"{tag}-{i}")
        p = subprocess.Popen(["taskset", "-c", allowed, "python3", "-c", COUNTING_LOOP, path],
                             stdout=subprocess.PIPE, text=True,
                             preexec_fn=kernel.joins_cgroup(cgroup))
        procs.append(p)
        paths.append(path)
    for p in procs:
        if p.stdout.readline() != "running\n":
            stop_hogs(procs)
            raise RuntimeError("a counting loop did not start")
        p.stdout.close()
    return procs, paths


def stop_loops(loops, args) -> None:
    if args.hackbench or args.stress_ng:
        for p in loops:
            stop_group(p)
    else:
        stop_hogs(loops)


def cmd_run(args) -> int:
    cpus = kernel.online_cpus()
    n = len(cpus)
    s = Sampler(cpus, args.poll)
    reached = {}
    loops = []
    enabled = f"{GOVERNOR}/enabled"
    kernel.write(enabled, "Y")
    try:
        reached["quiet"] = s.phase("quiet", lambda c: False, args.quiet_s, 0)
        # Off while the loops start (seconds, loading python over 9p), so
        # that the busy phase sees the whole descent from every CPU.
        kernel.write(enabled, "N")
        if args.hackbench:
            loops, s.counters = start_hackbench(cpus, args.workdir, *args.hackbench)
        elif args.stress_ng and len(args.stress_ng) == 1:
            s.cuts = StressCuts(cpus, args.stress_ng[0], args.workdir, s.t0)
            s.cuts.cut(("start", False))
        elif args.stress_ng:
            loops, s.counters = start_stress(cpus, args.workdir, *args.stress_ng)
        else:
            loops, s.counters = start_loops(cpus, args.workdir)
        static = {}
        # The first hackbench run loads its 160 processes over 9p (the
        # first stress-ng run its binary): wait for it (bounded) so that
        # no static set pays for it.
        if args.hackbench or (args.stress_ng and not s.cuts):
            until(lambda: loop_rounds(s.counters) >= 1, tries=6000)
        for k in args.static:
            # Static sets for comparison: the first k CPUs preferred.
            kernel.set_parked(format_cpulist(cpus[k:]))
            s.phase(f"static{k}", lambda c: False, args.hold_s, 0)
            static[str(k)] = kernel.preferred().strip()
        kernel.set_parked("")
        kernel.write(enabled, "Y")
        reached["busy"] = s.phase("busy", lambda c: c <= args.busy_to, args.phase_s,
                                  args.hold_s)
        write_mark("confine-start")
        reached["confine"] = s.phase("confine", lambda c: c <= args.confine_to,
                                     args.phase_s, args.hold_s)
        write_mark("confine-end")
        reached["restore"] = s.phase("restore", lambda c: c >= args.restore_to,
                                     args.phase_s, args.hold_s)
        stop_loops(loops, args)
        loops = []
        if s.cuts:
            s.cuts.cut(None)
        reached["idle"] = s.phase("idle", lambda c: c == n, args.phase_s, 0)
        kernel.set_parked(args.others)
        s.phase("others", lambda c: False, args.hold_s, 0)
        others = {"written": args.others, "parked_after": kernel.parked()}
        running = params()
        kernel.write(enabled, "N")
        others["parked_when_off"] = kernel.parked()
        off = {"enabled": kernel.read(enabled).strip(), "preferred": kernel.preferred().strip()}
        kernel.set_parked("")
        off["preferred_cleared"] = kernel.preferred().strip()
    finally:
        stop_loops(loops, args)
        if s.cuts:
            s.cuts.stop()
        kernel.write(enabled, "N")
        kernel.set_parked("")
    return print_result({"online": n, "cpus": cpus, "params": running,
                         "user_hz": os.sysconf("SC_CLK_TCK"), "poll_s": args.poll,
                         "reached": reached, "samples": s.samples, "others": others,
                         "static": static, "phase_start": s.starts,
                         "workload": ("hackbench" if args.hackbench else
                                      "stress-ng" if args.stress_ng else "loops"),
                         "off": off,
                         **({"segments": s.cuts.segments} if s.cuts else {})})


MODULE = "/sys/module/steal_governor"


def insmod(ko: str, *params: str) -> dict:
    """insmod's exit status and its last line of error, and whether the
    module is there afterwards."""
    r = subprocess.run(["insmod", ko, *params], capture_output=True, text=True)
    err = r.stderr.strip().splitlines()
    return {"rc": r.returncode, "error": err[-1] if err else "",
            "loaded": os.path.isdir(MODULE)}


def rmmod() -> dict:
    r = subprocess.run(["rmmod", "steal_governor"], capture_output=True, text=True)
    return {"rc": r.returncode, "error": r.stderr.strip(), "loaded": os.path.isdir(MODULE)}


def cmd_module(args) -> int:
    """The governor built as a module (CONFIG_STEAL_GOVERNOR=m, as Debian
    builds it): refused parameters, a load that governs, an unload that
    gives back what it parked, and a second load."""
    result = {"before": {"loaded": os.path.isdir(MODULE), "parked": kernel.parked()}}
    loops = []
    try:
        # Bad input: refused, nothing loaded, nothing parked.
        result["low_not_below_high"] = insmod(args.ko, "low_threshold=600")
        result["high_out_of_range"] = insmod(args.ko, "high_threshold=10000")
        result["confirm_out_of_range"] = insmod(args.ko, "park_confirm=0")
        result["parked_after_refusals"] = kernel.parked()
        # An operator's set first: the governor must leave it alone.
        kernel.set_parked(args.others)
        loops, _ = start_loops(kernel.online_cpus(), args.workdir)
        result["load"] = insmod(args.ko, f"interval_ms={args.interval_ms}")
        result["params"] = params() if result["load"]["loaded"] else {}
        others = set(parse_cpulist(args.others))
        # Bounded poll: the busy guest's steal makes it park a core of
        # its own within a few intervals.
        result["governed"] = until(
            lambda: bool(set(parse_cpulist(kernel.parked())) - others),
            tries=int(args.limit_s * 100))
        result["parked_loaded"] = kernel.parked()
        result["unload"] = rmmod()
        result["parked_unloaded"] = kernel.parked()
        stop_hogs(loops)
        loops = []
        result["reload"] = insmod(args.ko, "enabled=0")
        result["reload_params"] = params() if result["reload"]["loaded"] else {}
        result["unload2"] = rmmod()
        result["parked_end"] = kernel.parked()
    finally:
        stop_hogs(loops)
        if os.path.isdir(MODULE):
            rmmod()
        kernel.set_parked("")
    return print_result(result)


def cmd_busydomain(args) -> int:
    """A root domain short of deadline bandwidth at the top of the CPU
    numbers must not keep the governor from parking below it. --top is
    a cpuset partition (a root domain of its own) holding --sleepers
    deadline sleepers of --runtime-us/--period-us each, admitted there:
    enough that parking any one of its CPUs is refused with EBUSY, which
    a write by hand checks first. A busy loop per CPU (those of --top
    started in the partition) gives the guest steal; the module, loaded
    with --interval-ms, must then park a core outside --top within
    --limit-s, and none inside it. Errors, the clean-up's included, are
    reported in the result ("error", "cleanup"), so that the probes
    before it in the same boot keep their results."""
    # Here rather than at the top: only this probe needs park_probe.
    from .park_probe import dl_total_bw, park, start_dl_sleeper
    result = {"top": args.top}
    group, sleepers, loops, top, bw_before = None, [], [], [], 0
    try:
        top = parse_cpulist(args.top)
        below = [c for c in kernel.online_cpus() if c not in top]
        result["below"] = format_cpulist(below)
        # Named first, so that the clean-up removes a half-made group too.
        group = f"{kernel.CGROUP}/busytop"
        kernel.make_partition("busytop", args.top)
        result["partition"] = kernel.read(f"{group}/cpuset.cpus.partition").strip()
        bw_before = dl_total_bw(top[0]) or 0
        each = argparse.Namespace(runtime_us=args.runtime_us, period_us=args.period_us)
        for _ in range(args.sleepers):
            t = start_dl_sleeper(each, cgroup=group)
            if t is not None:
                sleepers.append(t)
        result["admitted"] = len(sleepers)
        result["total_bw"] = dl_total_bw(top[0])
        result["park_top_errno"], _ = park(str(top[-1]))
        result["parked_after_refusal"] = kernel.parked()
        loops, _ = start_loops(below, args.workdir, tag="below")
        more, _ = start_loops(top, args.workdir, cgroup=group, tag="top")
        loops += more
        result["load"] = insmod(args.ko, f"interval_ms={args.interval_ms}")
        # Bounded poll: with the domain at the top passed over, a core
        # below it is parked within a few intervals. The set that ended
        # the poll is the one reported.
        seen = {"parked": ""}

        def parked_below():
            seen["parked"] = kernel.parked()
            return bool(set(parse_cpulist(seen["parked"])) - set(top))
        result["governed"] = until(parked_below, tries=int(args.limit_s * 100))
        result["parked_loaded"] = seen["parked"]
        result["unload"] = rmmod()
        result["parked_unloaded"] = kernel.parked()
    except Exception as e:     # reported: the test says what failed
        result["error"] = repr(e)
    finally:
        problems = []
        for step in (lambda: stop_hogs(loops),
                     lambda: os.path.isdir(MODULE) and rmmod(),
                     lambda: stop_hogs(sleepers),
                     # A dead deadline task may give its bandwidth back
                     # up to a period later: before the domains change.
                     lambda: sleepers and until(
                         lambda: (dl_total_bw(top[0]) or 0) <= bw_before, tries=300),
                     lambda: kernel.set_parked(""),
                     lambda: kernel.remove_partition(group) if group else None):
            try:
                step()
            except Exception as e:
                problems.append(repr(e))
        if problems:
            result["cleanup"] = problems
    return print_result(result)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="governor_probe.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run")
    r.add_argument("--busy-to", type=int, default=3)
    r.add_argument("--confine-to", type=int, default=1)
    r.add_argument("--restore-to", type=int, default=3)
    r.add_argument("--others", default="5-7")
    r.add_argument("--static", type=lambda v: [int(x) for x in v.split(",") if x], default=[],
                   help="preferred-CPU counts to hold for --hold-s each, governor off, "
                        "before the busy phase (e.g. 8,4,3,2)")
    r.add_argument("--hackbench", metavar="GROUPS,LOOPS",
                   type=lambda v: tuple(int(x) for x in v.split(",")),
                   help="the load: hackbench -P -p -g GROUPS -l LOOPS back to back "
                        "instead of a busy loop per CPU; rounds are finished runs")
    r.add_argument("--stress-ng", metavar="WORKERS[,SECONDS]",
                   type=lambda v: tuple(int(x) for x in v.split(",")),
                   help="the load: stress-ng --cpu WORKERS --cpu-method matrixprod, "
                        "one run cut at each window (\"segments\"), or runs of "
                        "--timeout SECONDS back to back; rounds are bogo-ops")
    r.add_argument("--quiet-s", type=float, default=3)
    r.add_argument("--phase-s", type=float, default=30)
    r.add_argument("--hold-s", type=float, default=4)
    r.add_argument("--poll", type=float, default=0.05)
    r.add_argument("--workdir", default="/tmp")
    m = sub.add_parser("module")
    m.add_argument("--ko", required=True, help="steal_governor.ko of the booted kernel")
    m.add_argument("--others", default="7", help="CPUs parked by hand before the load")
    m.add_argument("--interval-ms", type=int, default=100)
    m.add_argument("--limit-s", type=float, default=30)
    m.add_argument("--workdir", default="/tmp")
    d = sub.add_parser("busydomain")
    d.add_argument("--ko", required=True, help="steal_governor.ko of the booted kernel")
    d.add_argument("--top", default="4-7", help="the partition short of bandwidth")
    d.add_argument("--sleepers", type=int, default=3)
    d.add_argument("--runtime-us", type=int, default=9600)
    d.add_argument("--period-us", type=int, default=10000)
    d.add_argument("--interval-ms", type=int, default=100)
    d.add_argument("--limit-s", type=float, default=30)
    d.add_argument("--workdir", default="/tmp")
    args = p.parse_args(argv)
    if args.action == "module":
        return cmd_module(args)
    if args.action == "busydomain":
        return cmd_busydomain(args)
    if args.hackbench and args.stress_ng:
        p.error("--hackbench and --stress-ng: one load at a time")
    if args.stress_ng and (len(args.stress_ng) > 2 or min(args.stress_ng) < 1):
        p.error(f"--stress-ng {args.stress_ng}: expected WORKERS or WORKERS,SECONDS")
    return {"run": cmd_run}[args.action](args)
