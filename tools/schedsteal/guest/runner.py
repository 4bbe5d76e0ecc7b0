"""abbench ``run``: the A/B sequence in the guest (standard library only).

For every parameter value it runs rounds of one A run and one B run,
applying the setting before each run, in ABBA order (A B, B A, A B ...) so
that slow drift of the machine does not favour one side, or with
``--order random`` in a seeded random order per round; it snapshots
/proc/schedstat around each run and writes everything to a JSON file
(each run with its ``setting``, its round ``index`` and its ``position``
in the whole sequence; ``order`` and ``seed`` at the top). The JSON is
rewritten after every run, so a guest crash leaves the runs done so far
(``"complete": false``). Without ``--b`` only A runs (``"sides": "A"``,
B's setting recorded as not run): one side of a kernel-against-kernel
comparison, whose other side is another boot (``kernelab``). Unless
``--no-schedstat`` is given, ``run`` turns on ``kernel.sched_schedstats``
(the counters stand still without it) and sets it back after the run.

With ``--trace-dir DIR`` each measured run of the first ``--trace-runs``
rounds (default: all) records the scheduler events schedtrace reads
(sched_switch, sched_wakeup[_new], sched_migrate_task) into
``DIR/trace-POSITION.txt``; the run's ``trace`` names the file (relative
to the results file's directory when DIR is under it) and ``trace_lost``
the events the ring buffer dropped. The recording uses a tracefs
instance of its own, tracing/instances/schedsteal-PID, with
``--trace-buffer-kb`` per CPU (the total is printed), copied to the file
a chunk at a time, and removed on exit; the top-level buffer is never
touched. The host's ``abbench report`` and ``schedtrace`` read the files.
Tracing costs time on both sides alike; take timing headlines from
untraced runs.

The run works the same on a real machine (README "Bare metal"). The
results record it under ``machine`` (kernel.machine()). Whatever the
exit (the end, an error, Ctrl-C, SIGTERM, which raises ``Terminated``),
the features and sysctls the settings name and kernel.sched_schedstats
get back the values read before the run, the workload's process group is
killed and the trace instance removed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

from .. import schedstat
from . import kernel, trace
from . import workloads as wl
from .settings import SETTING_HELP, AbbenchError, Applier, SettingError, parse_setting

FORMAT = "schedsteal-abbench"
FORMAT_VERSION = 1
SIDES = ("A", "B")
ORDERS = ("abba", "random")
TAIL_CHARS = 2000
TRACE_INSTANCE = "schedsteal-{pid}"


class Terminated(BaseException):
    """SIGTERM, raised wherever the runner is (as Ctrl-C raises
    KeyboardInterrupt) so that the same cleanup runs. A BaseException:
    no ``except Exception`` on the way may swallow it."""


def _raise_terminated(signum, frame):
    raise Terminated()


def parse_params(values: list[str]) -> list[int]:
    """``["1,2", "4"]`` -> ``[1, 2, 4]``."""
    params = []
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item.isdigit():
                raise AbbenchError(f"bad --param value {item!r}: expected "
                                   "non-negative integers like 1,2,4")
            params.append(int(item))
    if not params:
        raise AbbenchError("no --param values")
    return params


def _execute(argv: list[str], timeout: float, env: dict) -> tuple[int, str, str | None]:
    """Run argv in its own session; (exit code, output, error or None).

    SIGINT and SIGTERM are blocked until the Popen object is held: their
    handlers raise, and one raised inside Popen() after the fork, or
    before the assignment, left the workload running with nothing to kill
    it (test_run_restores_on_a_real_signal_and_kills_the_workload, under
    load). The child gets the caller's mask back before it execs."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, errors="replace", env=env,
                                start_new_session=True,
                                preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, old))
    except OSError as exc:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return 127, "", f"cannot run {argv[0]}: {exc.strerror or exc}"
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        raise
    try:
        # A signal that came meanwhile is taken here, with proc held.
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, _ = proc.communicate()
        return 124, out, f"timed out after {timeout:g} s"
    except BaseException:
        # Ctrl-C or SIGTERM: the workload has a session of its own, so
        # the signal did not reach it; it must not outlive the run.
        _kill_group(proc)
        proc.wait()
        raise
    if proc.returncode != 0:
        return proc.returncode, out, f"exit status {proc.returncode}"
    return 0, out, None


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def write_json(out: str, doc: dict) -> None:
    """Write a results document whole or not at all (through OUT.tmp): a
    crash mid-write leaves the last complete one."""
    tmp = f"{out}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, out)
    except OSError as exc:
        raise AbbenchError(f"cannot write {out}: {exc.strerror or exc}") from None


class Runner:
    """Runs the A/B sequence and keeps the results document up to date."""

    def __init__(self, args: argparse.Namespace, workload: wl.Workload,
                 options: dict, sides: dict, applier: Applier, params: list[int],
                 instance: trace.Instance | None = None):
        self.args = args
        self.instance = instance    # records the traced runs
        self.workload = workload
        self.options = options
        self.sides = sides          # "A"/"B" -> (label, Setting)
        self.applier = applier
        self.params = params
        self.failures = 0
        self.position = 0           # place of the next run in the whole sequence
        self.seed = args.seed
        if args.order == "random" and self.seed is None:
            self.seed = random.SystemRandom().randrange(2 ** 32)
            print(f"abbench: random order, --seed {self.seed}", file=sys.stderr)
        self.rng = random.Random(self.seed)
        self.doc = self._skeleton()

    def _skeleton(self) -> dict:
        w = self.workload
        uname = os.uname()
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION,
            "complete": False,
            "workload": w.name, "description": w.description,
            "unit": w.unit, "higher_is_better": w.higher_is_better,
            "mean_kind": w.mean_kind, "param_key": w.param_key,
            "param_title": w.param_title, "options": self.options,
            "commands": {str(p): w.command(p, self.options) for p in self.params},
            "settings": {s: ({"name": self.sides[s][0], "spec": self.sides[s][1].spec}
                             if s in self.sides else {"name": "(not run)", "spec": None})
                         for s in SIDES},
            "sides": "".join(self.sides),
            "params": self.params, "runs_per_setting": self.args.runs,
            "warmup_per_setting": self.args.warmup,
            "timeout": self.args.timeout,
            "order": self.args.order if "B" in self.sides else None,
            "seed": self.seed if self.args.order == "random" else None,
            "schedstat": not self.args.no_schedstat,
            "runs": [], "warmup": [],
            "host": {"uname": " ".join(uname), "release": uname.release,
                     "ncpus": os.cpu_count(), "cmdline": _cmdline()},
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "topology": _topology(),
            "machine": _machine(),
            "lab": _lab(),
        }

    def save(self) -> None:
        write_json(self.args.out, self.doc)

    def _snapshot(self):
        """A schedstat snapshot, or None (disabled, or it failed: warned)."""
        if self.args.no_schedstat:
            return None
        try:
            return kernel.schedstat_snapshot(self.args.schedstat_path, self.args.stat_path)
        except Exception as exc:  # noqa: BLE001 -- keep benchmarking without it
            print(f"abbench: warning: schedstat snapshot failed: {exc}",
                  file=sys.stderr)
            return None

    def _trace_path(self) -> str:
        return os.path.join(self.args.trace_dir, f"trace-{self.position}.txt")

    def _save_trace(self, rec: dict) -> None:
        """Copy the stopped recording to its file and name it in rec."""
        path = self._trace_path()
        try:
            lost = self.instance.copy_to(path)
        except (trace.TraceError, kernel.KernelError) as exc:
            raise AbbenchError(str(exc)) from None
        base = os.path.dirname(os.path.abspath(self.args.out))
        full = os.path.abspath(path)
        rec["trace"] = (os.path.relpath(full, base)
                        if full.startswith(base + os.sep) else full)
        rec["trace_lost"] = lost
        if lost:
            print(f"abbench: warning: the trace of run {self.position} lost "
                  f"{lost} events (raise --trace-buffer-kb)", file=sys.stderr)

    def run_once(self, param: int, traced: bool = False) -> dict:
        env = dict(os.environ, SCHEDSTEAL_PARAM=str(param))
        with tempfile.TemporaryDirectory(prefix="abbench-") as workdir:
            argv = self.workload.command(param, self.options, workdir)
            before = self._snapshot()
            if traced:
                self.instance.start()
            start = time.monotonic()
            code, output, error = _execute(argv, self.args.timeout, env)
            duration = time.monotonic() - start
            if traced:
                self.instance.stop()
            after = self._snapshot()
            rec = {"value": None, "exit_code": code, "duration": round(duration, 6)}
            if traced:
                self._save_trace(rec)
            if error is None:
                try:
                    result = self.workload.parse(output, workdir)
                    rec["value"] = result.value
                    if result.extra:
                        rec["extra"] = result.extra
                except wl.WorkloadError as exc:
                    error = f"parse error: {exc}"
        if error is not None:
            rec["error"] = error
            rec["output_tail"] = output[-TAIL_CHARS:]
        if before is not None and after is not None:
            rec["recording"] = schedstat.make_recording(before, after, argv, code)
        else:
            rec["recording"] = None
        return rec

    def _progress(self, head: str, param: int, side: str, what: str, rec: dict) -> None:
        label = self.sides[side][0]
        if rec.get("error"):
            result = f"FAILED ({rec['error']})"
        else:
            result = f"{rec['value']:.6g} {self.workload.unit}".rstrip()
        print(f"{head} {self.workload.name} {self.workload.param_key}={param} "
              f"{side}({label}) {what}: {result}", file=sys.stderr, flush=True)

    def _apply(self, side: str) -> None:
        self.applier.apply(self.sides[side][1])

    def _traced(self, round_no: int) -> bool:
        limit = self.args.trace_runs
        return bool(self.args.trace_dir) and (limit is None or round_no < limit)

    def round_order(self, round_no: int) -> str:
        """The sides of one round, in the order they run: ABBA alternates
        AB and BA so a drift adds as much to A as to B over two rounds;
        random draws each round's order from the seeded generator. A run
        without B has rounds of A alone."""
        if "B" not in self.sides:
            return "A"
        if self.args.order == "random":
            return "AB" if self.rng.random() < 0.5 else "BA"
        return "AB" if round_no % 2 == 0 else "BA"

    def _run_at(self, param: int, traced: bool = False) -> dict:
        rec = self.run_once(param, traced)
        rec["position"] = self.position
        self.position += 1
        return rec

    def run(self) -> int:
        total = len(self.params) * self.args.runs * len(self.sides)
        width = len(str(total))
        done = 0
        self.save()
        for param in self.params:
            for w in range(self.args.warmup):
                for side in self.round_order(w):
                    self._apply(side)
                    rec = self._run_at(param)
                    rec.pop("recording", None)
                    rec.update(param=param, setting=side, index=w)
                    self.doc["warmup"].append(rec)
                    if rec.get("error"):
                        self.failures += 1
                    self._progress("[warmup]", param, side,
                                   f"warmup {w + 1}/{self.args.warmup}", rec)
            for i in range(self.args.runs):
                for side in self.round_order(i):
                    self._apply(side)
                    rec = self._run_at(param, self._traced(i))
                    rec = {"param": param, "setting": side, "index": i, **rec}
                    self.doc["runs"].append(rec)
                    done += 1
                    if rec.get("error"):
                        self.failures += 1
                    self._progress(f"[{done:{width}d}/{total}]", param, side,
                                   f"run {i + 1}/{self.args.runs}", rec)
                    self.save()
        self.doc["complete"] = True
        self.doc["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.doc["failures"] = self.failures
        self.save()
        if self.failures:
            print(f"abbench: {self.failures} workload run(s) failed; results in "
                  f"{self.args.out}", file=sys.stderr)
            return 1
        return 0


def _topology() -> dict | None:
    """LLC groups and NUMA nodes, for the report's trace figures."""
    try:
        return kernel.topology()
    except Exception:  # noqa: BLE001 -- not a guest (tests): no topology
        return None


def _machine() -> dict | None:
    """The machine the runs measured (kernel.machine())."""
    try:
        return kernel.machine()
    except Exception:  # noqa: BLE001 -- a record, never a reason to stop
        return None


def _lab() -> dict | None:
    """The QEMU and clock of the boot (lab.json, which schedsteal-vm puts
    in $SCHEDSTEAL_OUT); None outside such a guest (bare metal)."""
    out = os.environ.get("SCHEDSTEAL_OUT")
    if not out:
        return None
    try:
        with open(os.path.join(out, "lab.json")) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def _cmdline() -> str | None:
    try:
        return kernel.read("/proc/cmdline").strip()
    except kernel.KernelError:
        return None


def _enable_schedstats(proc_sys: str) -> None:
    try:
        if kernel.enable_schedstats(proc_sys):
            print("abbench: enabled kernel.sched_schedstats", file=sys.stderr)
    except kernel.KernelError as exc:
        print(f"abbench: warning: {exc}; schedstat counters may stand still",
              file=sys.stderr)


def _workload_from_args(args: argparse.Namespace) -> wl.Workload:
    if args.workload_cmd is not None:
        if args.metric_regex is None:
            raise AbbenchError("--workload-cmd needs --metric-regex")
        if args.higher_is_better is None:
            raise AbbenchError("--workload-cmd needs --lower-is-better or "
                               "--higher-is-better")
        return wl.custom(args.workload_cmd, args.metric_regex,
                         args.higher_is_better, unit=args.unit or "",
                         name=args.name or "custom")
    for flag, opt in (("metric_regex", "--metric-regex"), ("unit", "--unit"),
                      ("name", "--name"),
                      ("higher_is_better", "--higher/--lower-is-better")):
        if getattr(args, flag) is not None:
            raise AbbenchError(f"{opt} only goes with --workload-cmd")
    return wl.get(args.workload)


def cmd_run(args: argparse.Namespace) -> int:
    """The ``run`` subcommand."""
    try:
        workload = _workload_from_args(args)
    except wl.WorkloadError as exc:
        raise AbbenchError(str(exc)) from None
    if args.runs < 1:
        raise AbbenchError("--runs must be at least 1")
    if args.warmup < 0:
        raise AbbenchError("--warmup must be >= 0")
    if not args.timeout > 0:
        raise AbbenchError("--timeout must be > 0")
    if args.seed is not None and args.order != "random":
        raise AbbenchError("--seed only goes with --order random")
    params = parse_params(args.param)
    for flag, value, low in (("--loops", args.loops, 1), ("--runtime", args.runtime, 1),
                             ("--workers", args.workers, 1),
                             ("--busy-us", args.busy_us, 0)):
        if value is not None and value < low:
            raise AbbenchError(f"{flag} must be at least {low}")
    options = workload.options({"loops": args.loops, "runtime": args.runtime,
                                "workers": args.workers, "busy_us": args.busy_us,
                                "binary": args.binary})
    if args.b is None and (args.b_name is not None or args.order != "abba"):
        raise AbbenchError("--b-name and --order only go with --b")
    sides = {}
    for side, spec, name in (("A", args.a, args.a_name), ("B", args.b, args.b_name)):
        if spec is None:
            continue
        setting = parse_setting(spec)
        sides[side] = (name or setting.spec, setting)
    applier = Applier(args.features_path, args.proc_sys)
    for _, setting in sides.values():
        applier.check(setting)
    if not args.skip_check:
        reason = workload.available(options)
        if reason:
            raise AbbenchError(f"workload {workload.name} cannot run: {reason}")
    if args.trace_runs is not None and args.trace_runs < 0:
        raise AbbenchError("--trace-runs must be >= 0")
    if args.trace_dir:
        if args.trace_buffer_kb < 64:
            raise AbbenchError("--trace-buffer-kb must be at least 64")
        try:
            os.makedirs(args.trace_dir, exist_ok=True)
        except OSError as exc:
            raise AbbenchError(f"cannot create {args.trace_dir}: "
                               f"{exc.strerror or exc}") from None
    elif args.trace_runs is not None:
        raise AbbenchError("--trace-runs only goes with --trace-dir")
    if not args.no_schedstat:
        try:
            kernel.schedstat_snapshot(args.schedstat_path, args.stat_path)
        except Exception as exc:  # noqa: BLE001 -- any failure: say how to go on without
            raise AbbenchError(f"cannot read schedstat ({exc}); use "
                               "--no-schedstat to run without it") from None
    # Everything after this point changes the system: read what it was,
    # and put it back whatever way the run ends.
    applier.save([st for _, st in sides.values()],
                 () if args.no_schedstat else ("kernel.sched_schedstats",))
    instance = None
    if args.trace_dir:
        instance = trace.Instance(TRACE_INSTANCE.format(pid=os.getpid()),
                                  args.trace_buffer_kb, tracing=args.tracefs)
    handlers = {signal.SIGTERM: signal.signal(signal.SIGTERM, _raise_terminated),
                # also when started with SIGINT ignored (a shell's "cmd &")
                signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler)}
    runner = None
    try:
        for side in sides:        # validate by applying A then B once
            applier.apply(sides[side][1])
        if not args.no_schedstat:
            _enable_schedstats(args.proc_sys)
        if instance:
            try:
                total = instance.create()
            except (trace.TraceError, kernel.KernelError) as exc:
                raise AbbenchError(f"--trace-dir: {exc}") from None
            print(f"abbench: tracing in {instance.path}: {args.trace_buffer_kb} KiB "
                  f"per CPU, {total} KiB in all", file=sys.stderr, flush=True)
        runner = Runner(args, workload, options, sides, applier, params, instance)
        status = runner.run()
    except (SettingError, kernel.KernelError, trace.TraceError) as exc:
        if runner is None:
            raise AbbenchError(str(exc)) from None  # before any run: exit 2
        status = _stop(runner, str(exc), f"error: {exc}", 1)
    except KeyboardInterrupt:
        status = _stop(runner, "interrupted", "interrupted", 130)
    except Terminated:
        status = _stop(runner, "terminated", "terminated (SIGTERM)", 143)
    finally:
        restored = _cleanup(applier, instance)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return status or (0 if restored else 1)


def _stop(runner: Runner | None, error: str, say: str, status: int) -> int:
    """The end of a run cut short: the error in the results, a line on stderr."""
    where = ""
    if runner is not None:
        runner.doc["error"] = error
        runner.save()
        where = f" (results so far in {runner.args.out})"
    print(f"abbench: {say}{where}", file=sys.stderr)
    return status


def _cleanup(applier: Applier, instance: trace.Instance | None) -> bool:
    """Put back what the run changed: the trace instance goes, the saved
    features and sysctls get their values back; whether all did. SIGINT
    and SIGTERM are ignored meanwhile: a second Ctrl-C cannot cut it short."""
    held = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        problems = []
        if instance:
            try:
                instance.remove()
            except trace.TraceError as exc:
                problems.append(str(exc))
        done, failed = applier.restore()
        if done:
            print(f"abbench: restored {' '.join(done)}", file=sys.stderr)
        for problem in problems + failed:
            print(f"abbench: warning: not restored: {problem}", file=sys.stderr)
        return not (problems or failed)
    finally:
        for signum, handler in held.items():
            signal.signal(signum, handler)


def _default(workload: str, key: str):
    """A workload's default option value, for --help."""
    return wl.get(workload).defaults[key]


def add_run_parser(sub) -> None:
    """abbench's ``run`` subcommand, on the subparsers of its CLI."""
    run = sub.add_parser("run", help="run an A/B comparison (in the guest)",
                         epilog=SETTING_HELP,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--a", required=True, metavar="SETTING",
                     help="baseline setting (syntax below)")
    run.add_argument("--b", metavar="SETTING",
                     help="setting compared with the baseline (without it only "
                     "A runs: one side of a kernel-against-kernel comparison)")
    run.add_argument("--a-name", help="label of A (default: the setting)")
    run.add_argument("--b-name", help="label of B (default: the setting)")
    what = run.add_mutually_exclusive_group(required=True)
    what.add_argument("--workload", choices=wl.names(), metavar="NAME",
                      help="one of: " + ", ".join(wl.names()))
    what.add_argument("--workload-cmd", metavar="CMD",
                      help="custom /bin/sh command; {param} is replaced")
    run.add_argument("--metric-regex", help="custom: regex whose group 1 is the metric")
    hib = run.add_mutually_exclusive_group()
    hib.add_argument("--higher-is-better", dest="higher_is_better",
                     action="store_true", default=None)
    hib.add_argument("--lower-is-better", dest="higher_is_better",
                     action="store_false")
    run.add_argument("--unit", help="custom: unit of the metric")
    run.add_argument("--name", help="custom: workload name (default: custom)")
    run.add_argument("--param", action="append", required=True,
                     help="parameter values, e.g. 1,2,4 (repeatable)")
    run.add_argument("--runs", type=int, default=10,
                     help="runs per setting (default: %(default)s)")
    run.add_argument("--warmup", type=int, default=1,
                     help="discarded rounds per param (default: %(default)s)")
    run.add_argument("--order", choices=ORDERS, default="abba",
                     help="order of A and B in each round: abba alternates AB "
                     "and BA, random draws it per round (default: %(default)s)")
    run.add_argument("--seed", type=int,
                     help="seed of --order random (default: drawn and recorded)")
    run.add_argument("--out", required=True, metavar="FILE.json")
    run.add_argument("--timeout", type=float, default=600.0,
                     help="seconds per workload run (default: %(default)s)")
    run.add_argument("--loops", type=int,
                     help="hackbench/perf-messaging loops (default: "
                     f"{_default('hackbench-process-pipe', 'loops')})")
    run.add_argument("--runtime", type=int,
                     help="seconds (default: stress-ng-cpu "
                     f"{_default('stress-ng-cpu', 'runtime')}, wakeup-latency "
                     f"{_default('wakeup-latency', 'runtime')})")
    run.add_argument("--workers", type=int,
                     help="wakeup-latency workers per thread (default: "
                     f"{_default('wakeup-latency', 'workers')})")
    run.add_argument("--busy-us", type=int,
                     help="wakeup-latency busy usec (default: "
                     f"{_default('wakeup-latency', 'busy_us')})")
    run.add_argument("--binary", help="path of the workload program "
                     "(default: found on $PATH)")
    run.add_argument("--skip-check", action="store_true",
                     help="do not check that the workload runs first")
    run.add_argument("--features-path", default=kernel.FEATURES,
                     help="scheduler features file (default: %(default)s)")
    run.add_argument("--proc-sys", default=kernel.PROC_SYS,
                     help="sysctl tree (default: %(default)s)")
    run.add_argument("--schedstat-path", default=kernel.SCHEDSTAT,
                     help="(default: %(default)s)")
    run.add_argument("--stat-path", default=kernel.STAT,
                     help="(default: %(default)s)")
    run.add_argument("--no-schedstat", action="store_true",
                     help="do not record /proc/schedstat")
    run.add_argument("--trace-dir", metavar="DIR",
                     help="record the scheduler events of measured runs into "
                     "DIR/trace-N.txt (for abbench report and schedtrace)")
    run.add_argument("--trace-runs", type=int, metavar="N",
                     help="trace only the first N rounds of each param "
                     "(default: all)")
    run.add_argument("--trace-buffer-kb", type=int, default=trace.INSTANCE_BUFFER_KB,
                     help="ring buffer per CPU of the trace instance "
                     "(default: %(default)s)")
    run.add_argument("--tracefs", default=trace.TRACING,
                     help="tracefs, where the instance is made (default: %(default)s)")
    run.set_defaults(func=cmd_run)
