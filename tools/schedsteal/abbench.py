"""A/B benchmark runner and report: two scheduler settings, one boot.

``run`` executes inside the test guest (standard library only).  For every
parameter value it runs rounds of one A run and one B run, applying the
setting before each run, in ABBA order (A B, B A, A B ...) so that slow drift
of the machine does not favour one side, or with ``--order random`` in a
seeded random order per round; it snapshots /proc/schedstat around each run
and writes everything to a JSON file (each run with its ``setting``, its
round ``index`` and its ``position`` in the whole sequence; ``order`` and
``seed`` at the top).  ``report`` (host or guest) prints an mmtests
compare-kernels style table with Welch t-tests and paired t-tests (over the
rounds: B minus A), the mean schedstat figures per setting, and optionally
plots the runs.

Usage::

    python3 -m schedsteal.abbench run --a feat:NO_STEAL --b feat:STEAL \\
        --workload hackbench-process-pipe --param 1,2,4 --loops 500 \\
        --runs 10 --out /tmp/steal.json
    python3 -m schedsteal.abbench run --a none --b sysctl:kernel.foo=1 \\
        --workload-cmd 'my-bench -n {param}' --metric-regex 'Time: ([0-9.]+)' \\
        --lower-is-better --unit s --param 8 --out /tmp/custom.json
    python3 -m schedsteal.abbench run --a none --b feat:STEAL --order random \\
        --seed 42 --workload hackbench-process-pipe --param 2 --out /tmp/r.json
    python3 -m schedsteal.abbench report /tmp/steal.json
    python3 -m schedsteal.abbench report /tmp/steal.json --json
    python3 -m schedsteal.abbench report /tmp/steal.json --plot steal.png

Settings (``--a``/``--b``):

* ``feat:NAME[,NAME...]`` writes each NAME (``STEAL``, ``NO_STEAL`` ...) to
  /sys/kernel/debug/sched/features (debugfs is mounted if needed); names
  the kernel does not list are rejected before anything runs;
* ``sysctl:key=value[,key=value...]`` writes /proc/sys/<key, dots as slashes>;
* ``sh:COMMAND`` runs COMMAND with /bin/sh; a non-zero exit is an error;
* ``none`` does nothing.

``--help`` spells out exactly what each form accepts.  Both settings are
applied once up front (A, then B) so a typo fails at once.  Exit status of
``run``: 0 when every run succeeded, 1 when some workload run failed
(non-zero exit, unparsable output, timeout; the JSON is still written), 2
for bad usage or settings.  The JSON is rewritten after every
run, so a guest crash leaves the runs done so far (``"complete": false``).

Percent changes in the report (%chg) are signed so that positive means B
is better than A, as in mmtests: (A-B)/A for lower-is-better metrics,
(B-A)/A for higher-is-better ones.  ``*x%*`` marks p < alpha (Welch's
t-test), ``(x%)`` a difference that is not significant.  Higher-is-better
metrics are compared by their harmonic mean (Hmean) unless a value of either
side is <= 0; then both sides use the arithmetic mean (Amean), and the row
and a note say so.

Schedstat hooks (module ``schedsteal.schedstat``, imported lazily):
``snapshot(schedstat_path=..., stat_path=...)``,
``make_recording(before, after, cmd, exit_code)`` and
``compute_report(recording)["summary"]``.  Unless ``--no-schedstat`` is given,
``run`` turns on ``kernel.sched_schedstats`` (the counters stand still
without it).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import stats
from . import workloads as wl

FORMAT = "schedsteal-abbench"
FORMAT_VERSION = 1
REPORT_FORMAT = "schedsteal-abbench-report"
DEFAULT_FEATURES = "/sys/kernel/debug/sched/features"
DEBUGFS = "/sys/kernel/debug"
DEFAULT_PROC_SYS = "/proc/sys"
SIDES = ("A", "B")
ORDERS = ("abba", "random")
# Summary keys shown in the schedstat table, with their column titles.
SCHEDSTAT_COLUMNS = (("time", "time", "{:.2f}"), ("busy_pct", "%busy", "{:.1f}"),
                     ("slice_ms", "slice", "{:.2f}"), ("sched", "sched", "{:.1f}"),
                     ("idle", "idle", "{:.1f}"), ("wake", "wake", "{:.1f}"),
                     ("find_pct", "%find", "{:.1f}"), ("steal", "steal", "{:.1f}"))
TAIL_CHARS = 2000


class AbbenchError(Exception):
    """Bad usage, input or setting: reported as ``abbench: error: ...``, exit 2."""


class SettingError(AbbenchError):
    """A setting that cannot be applied."""


def _schedstat():
    """The schedstat module, imported on first use (tests substitute it)."""
    return importlib.import_module(__package__ + ".schedstat")


def _summarize(recording: dict) -> dict:
    """Per-CPU averaged summary of one recording: time, busy_pct, slice_ms,
    sched, idle, wake and, when the kernel reports them, find_pct, steal."""
    return _schedstat().compute_report(recording)["summary"]


# --- settings ----------------------------------------------------------------

_FEATURE_RE = re.compile(r"^[A-Za-z0-9_]+$")
_SYSCTL_KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/:]*$")


@dataclass(frozen=True)
class Setting:
    """A parsed ``--a``/``--b`` value."""

    spec: str
    kind: str       # "feat", "sysctl", "sh" or "none"
    items: tuple    # feature names, (key, value) pairs or (command,)


def parse_setting(spec: str) -> Setting:
    """Parse a setting string; AbbenchError explains what is wrong."""
    spec = spec.strip()
    if spec == "none":
        return Setting(spec, "none", ())
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in ("feat", "sysctl", "sh"):
        raise AbbenchError(f"bad setting {spec!r}: expected feat:NAME[,NAME], "
                           "sysctl:key=value[,key=value], sh:COMMAND or none")
    if kind == "sh":
        if not rest.strip():
            raise AbbenchError(f"bad setting {spec!r}: empty command")
        return Setting(spec, kind, (rest,))
    if kind == "feat":
        names = [n.strip() for n in rest.split(",")]
        for name in names:
            if not _FEATURE_RE.match(name):
                raise AbbenchError(f"bad setting {spec!r}: bad feature name "
                                   f"{name!r}")
        return Setting(spec, kind, tuple(names))
    pairs = []
    # A comma starts a new pair only when "key=" follows, so values may
    # contain commas (cpu lists).
    for item in re.split(r",(?=\s*[A-Za-z0-9_.\-/:]+=)", rest):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not _SYSCTL_KEY_RE.match(key) or ".." in key:
            raise AbbenchError(f"bad setting {spec!r}: expected key=value, "
                               f"got {item!r}")
        pairs.append((key, value.strip()))
    return Setting(spec, kind, tuple(pairs))


class Applier:
    """Applies settings; paths are overridable for tests."""

    def __init__(self, features_path: str = DEFAULT_FEATURES,
                 proc_sys: str = DEFAULT_PROC_SYS):
        self.features_path = features_path
        self.proc_sys = proc_sys

    def sysctl_path(self, key: str) -> Path:
        return Path(self.proc_sys) / key.replace(".", "/")

    def _ensure_debugfs(self) -> None:
        if (self.features_path != DEFAULT_FEATURES
                or os.path.exists(self.features_path)
                or not os.path.isdir(DEBUGFS) or os.path.ismount(DEBUGFS)):
            return
        proc = subprocess.run(["mount", "-t", "debugfs", "debugfs", DEBUGFS],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SettingError(f"cannot mount debugfs on {DEBUGFS}: "
                               f"{proc.stderr.strip()}")

    def known_features(self) -> set[str]:
        """Feature names the kernel lists, without NO_ prefixes."""
        self._ensure_debugfs()
        try:
            text = Path(self.features_path).read_text()
        except OSError as exc:
            raise SettingError(f"cannot read {self.features_path}: "
                               f"{exc.strerror or exc} (debugfs mounted? "
                               "kernel built with CONFIG_SCHED_DEBUG?)") from None
        return {t.removeprefix("NO_") for t in text.split()}

    def check(self, setting: Setting) -> None:
        """Static checks that need no change to the system."""
        if setting.kind == "feat":
            known = self.known_features()
            for name in setting.items:
                base = name.removeprefix("NO_")
                if base not in known:
                    raise SettingError(f"unknown scheduler feature {name!r} in "
                                       f"{setting.spec!r} (not listed in "
                                       f"{self.features_path})")
        elif setting.kind == "sysctl":
            for key, _ in setting.items:
                if not self.sysctl_path(key).is_file():
                    raise SettingError(f"unknown sysctl {key!r}: no "
                                       f"{self.sysctl_path(key)}")

    def apply(self, setting: Setting) -> None:
        if setting.kind == "feat":
            for name in setting.items:
                self._write(self.features_path, name, f"feature {name!r}")
        elif setting.kind == "sysctl":
            for key, value in setting.items:
                self._write(str(self.sysctl_path(key)), value + "\n",
                            f"sysctl {key}={value!r}")
        elif setting.kind == "sh":
            proc = subprocess.run(["/bin/sh", "-c", setting.items[0]],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  errors="replace", check=False)
            if proc.stdout:
                sys.stderr.write(proc.stdout)
            if proc.returncode != 0:
                raise SettingError(f"setting {setting.spec!r}: command exited "
                                   f"with status {proc.returncode}")

    @staticmethod
    def _write(path: str, text: str, what: str) -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
        except OSError as exc:
            hint = " (unknown name or bad value?)" if exc.errno == errno.EINVAL else ""
            raise SettingError(f"cannot set {what}: {path}: "
                               f"{exc.strerror or exc}{hint}") from None


# --- run -------------------------------------------------------------------

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
    """Run argv in its own session; (exit code, output, error or None)."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, errors="replace", env=env,
                                start_new_session=True)
    except OSError as exc:
        return 127, "", f"cannot run {argv[0]}: {exc.strerror or exc}"
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, _ = proc.communicate()
        return 124, out, f"timed out after {timeout:g} s"
    if proc.returncode != 0:
        return proc.returncode, out, f"exit status {proc.returncode}"
    return 0, out, None


class Runner:
    """Runs the A/B sequence and keeps the results document up to date."""

    def __init__(self, args: argparse.Namespace, workload: wl.Workload,
                 options: dict, sides: dict, applier: Applier, params: list[int]):
        self.args = args
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
            "settings": {s: {"name": label, "spec": setting.spec}
                         for s, (label, setting) in self.sides.items()},
            "params": self.params, "runs_per_setting": self.args.runs,
            "warmup_per_setting": self.args.warmup,
            "timeout": self.args.timeout,
            "order": self.args.order,
            "seed": self.seed if self.args.order == "random" else None,
            "schedstat": not self.args.no_schedstat,
            "runs": [], "warmup": [],
            "host": {"uname": " ".join(uname), "release": uname.release,
                     "ncpus": os.cpu_count(), "cmdline": _read("/proc/cmdline")},
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    def save(self) -> None:
        out = self.args.out
        tmp = f"{out}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(self.doc, f, indent=1)
                f.write("\n")
            os.replace(tmp, out)
        except OSError as exc:
            raise AbbenchError(f"cannot write {out}: {exc.strerror or exc}") from None

    def _snapshot(self):
        """A schedstat snapshot, or None (disabled, or it failed: warned)."""
        if self.args.no_schedstat:
            return None
        try:
            return _schedstat().snapshot(schedstat_path=self.args.schedstat_path,
                                         stat_path=self.args.stat_path)
        except Exception as exc:  # noqa: BLE001 -- keep benchmarking without it
            print(f"abbench: warning: schedstat snapshot failed: {exc}",
                  file=sys.stderr)
            return None

    def run_once(self, param: int) -> dict:
        env = dict(os.environ, SCHEDSTEAL_PARAM=str(param))
        with tempfile.TemporaryDirectory(prefix="abbench-") as workdir:
            argv = self.workload.command(param, self.options, workdir)
            before = self._snapshot()
            start = time.monotonic()
            code, output, error = _execute(argv, self.args.timeout, env)
            duration = time.monotonic() - start
            after = self._snapshot()
            rec = {"value": None, "exit_code": code, "duration": round(duration, 6)}
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
            rec["recording"] = _schedstat().make_recording(before, after, argv, code)
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

    def round_order(self, round_no: int) -> str:
        """The sides of one round, in the order they run: ABBA alternates
        AB and BA so a drift adds as much to A as to B over two rounds;
        random draws each round's order from the seeded generator."""
        if self.args.order == "random":
            return "AB" if self.rng.random() < 0.5 else "BA"
        return "AB" if round_no % 2 == 0 else "BA"

    def _run_at(self, param: int) -> dict:
        rec = self.run_once(param)
        rec["position"] = self.position
        self.position += 1
        return rec

    def run(self) -> int:
        total = len(self.params) * self.args.runs * len(SIDES)
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
                    rec = self._run_at(param)
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


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _enable_schedstats(proc_sys: str) -> None:
    """Turn on kernel.sched_schedstats if it exists and is off."""
    path = Path(proc_sys) / "kernel" / "sched_schedstats"
    if _read(str(path)) != "0":
        return
    try:
        path.write_text("1\n")
        print("abbench: enabled kernel.sched_schedstats", file=sys.stderr)
    except OSError as exc:
        print(f"abbench: warning: cannot enable kernel.sched_schedstats: "
              f"{exc.strerror or exc}; schedstat counters may stand still",
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
    sides = {}
    for side, spec, name in (("A", args.a, args.a_name), ("B", args.b, args.b_name)):
        setting = parse_setting(spec)
        sides[side] = (name or setting.spec, setting)
    applier = Applier(args.features_path, args.proc_sys)
    for _, setting in sides.values():
        applier.check(setting)
    if not args.skip_check:
        reason = workload.available(options)
        if reason:
            raise AbbenchError(f"workload {workload.name} cannot run: {reason}")
    if not args.no_schedstat:
        try:
            _schedstat().snapshot(schedstat_path=args.schedstat_path,
                                  stat_path=args.stat_path)
        except Exception as exc:  # noqa: BLE001 -- ImportError, SchedstatError...
            raise AbbenchError(f"cannot read schedstat ({exc}); use "
                               "--no-schedstat to run without it") from None
    for side in SIDES:        # validate by applying A then B once
        applier.apply(sides[side][1])
    if not args.no_schedstat:
        _enable_schedstats(args.proc_sys)
    runner = Runner(args, workload, options, sides, applier, params)
    try:
        return runner.run()
    except SettingError as exc:
        runner.doc["error"] = str(exc)
        runner.save()
        print(f"abbench: error: {exc} (results so far in {args.out})",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        runner.doc["error"] = "interrupted"
        runner.save()
        print(f"abbench: interrupted (results so far in {args.out})",
              file=sys.stderr)
        return 130


# --- report ----------------------------------------------------------------

def load_results(path: str) -> dict:
    """Read and sanity-check a results file written by ``run``."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as exc:
        raise AbbenchError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise AbbenchError(f"{path}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise AbbenchError(f"{path}: not an abbench results file")
    version = doc.get("format_version")
    if not _is_int(version) or version != FORMAT_VERSION:   # True == 1
        raise AbbenchError(f"{path}: unsupported format_version {version!r}")
    for key in ("workload", "unit", "higher_is_better", "settings", "params", "runs"):
        if key not in doc:
            raise AbbenchError(f"{path}: missing {key!r}")
    problem = _check_results(doc)
    if problem:
        raise AbbenchError(f"{path}: {problem}")
    return doc


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_value(x) -> bool:
    """A measured value: a finite number (JSON may hold NaN/Infinity)."""
    return (isinstance(x, (int, float)) and not isinstance(x, bool)
            and math.isfinite(x))


def _check_results(doc: dict) -> str | None:
    """What is wrong with the shape of a results document, or None: the
    report must fail with a message, not a traceback or a wrong table."""
    for key in ("workload", "unit", "param_key", "param_title"):
        if key in doc and not isinstance(doc[key], str):
            return f"{key!r} must be a string"
    if not isinstance(doc["higher_is_better"], bool):
        return "'higher_is_better' must be true or false"
    settings = doc["settings"]
    if not isinstance(settings, dict) or set(settings) != set(SIDES):
        return "settings must be A and B"
    for side in SIDES:
        if (not isinstance(settings[side], dict)
                or not isinstance(settings[side].get("name"), str)):
            return f"settings: {side} must be an object with a string 'name'"
    if not isinstance(doc["params"], list) or not all(_is_int(p) for p in doc["params"]):
        return "'params' must be a list of integers"
    if not isinstance(doc["runs"], list):
        return "'runs' must be a list"
    key = doc.get("param_key", "p")
    rounds = set()
    for n, run in enumerate(doc["runs"], 1):
        where = f"run {n}"
        if not isinstance(run, dict):
            return f"{where}: not an object"
        if not _is_int(run.get("param")):
            return f"{where}: 'param' must be an integer"
        if run.get("setting") not in SIDES:
            return f"{where}: 'setting' must be A or B, not {run.get('setting')!r}"
        if run.get("value") is not None and not _is_value(run["value"]):
            return (f"{where}: 'value' must be a finite number or null, "
                    f"not {run['value']!r}")
        if run.get("error") is not None and not isinstance(run["error"], str):
            return f"{where}: 'error' must be a string"
        index = run.get("index")
        if index is not None:
            if not _is_int(index):
                return f"{where}: 'index' must be an integer"
            # the round pairs A with B for the paired t-test
            this = (run["param"], run["setting"], index)
            if this in rounds:
                return (f"{where}: {run['setting']} {key}={run['param']} round "
                        f"{index} appears twice")
            rounds.add(this)
    return None


def _finite(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _schedstat_means(runs: list[dict]) -> tuple[dict | None, str | None]:
    recordings = [r["recording"] for r in runs if r.get("recording")]
    if not recordings:
        return None, None
    try:
        _schedstat()
    except ImportError as exc:
        return None, f"schedstat summaries unavailable: {exc}"
    summaries = []
    for rec in recordings:
        try:
            summaries.append(_summarize(rec))
        except Exception as exc:  # noqa: BLE001 -- a bad recording must not kill the report
            return None, f"cannot summarize a schedstat recording: {exc}"
    keys = []
    for s in summaries:
        keys += [k for k, v in s.items()
                 if k not in keys and isinstance(v, (int, float))
                 and not isinstance(v, bool)]
    means = {}
    for k in keys:
        vals = [s[k] for s in summaries if isinstance(s.get(k), (int, float))]
        means[k] = stats.amean(vals)
    means["n"] = len(summaries)
    return means, None


def analyze(doc: dict, alpha: float = 0.05) -> dict:
    """The report as a dict (what ``report --json`` prints)."""
    hib = bool(doc["higher_is_better"])
    key = doc.get("param_key", "p")
    out = {
        "format": REPORT_FORMAT, "format_version": FORMAT_VERSION,
        "workload": doc["workload"], "unit": doc["unit"],
        "higher_is_better": hib, "mean_kind": "Hmean" if hib else "Amean",
        "param_key": key,
        "param_title": doc.get("param_title", "param"),
        "alpha": alpha, "complete": doc.get("complete", True),
        "order": doc.get("order"), "seed": doc.get("seed"),
        "settings": doc["settings"], "params": [], "notes": [],
    }
    for param in doc["params"]:
        entry = {"param": param}
        runs, ok, values = {}, {}, {}
        for side in SIDES:
            runs[side] = [r for r in doc["runs"]
                          if r["param"] == param and r["setting"] == side]
            ok[side] = [r for r in runs[side]
                        if r.get("value") is not None and not r.get("error")]
            values[side] = [float(r["value"]) for r in ok[side]]
        # One kind of mean for both sides: Hmean only if every value of
        # either side is > 0, else Amean for both (never Hmean vs Amean).
        every = values["A"] + values["B"]
        use_hmean = hib and bool(every) and min(every) > 0
        entry["mean_kind"] = "Hmean" if use_hmean else "Amean"
        if hib and every and not use_hmean:
            out["notes"].append(f"{key}={param}: Amean used for A and B "
                                "(Hmean needs every value > 0)")
        for side in SIDES:
            vals = values[side]
            cell = {"n": len(vals), "failed": len(runs[side]) - len(vals),
                    "values": vals, "indices": [r.get("index") for r in ok[side]]}
            if vals:
                d = stats.describe(vals, use_hmean)
                cell.update(mean=d["mean"], mean_kind=d["mean_kind"],
                            amean=d["amean"], stddev=d["stddev"],
                            coeffvar=d["coeffvar"], min=d["min"], max=d["max"],
                            median=d["median"], ci95=d["ci95"])
            else:
                cell.update(mean=None, mean_kind=entry["mean_kind"], amean=None,
                            stddev=None, coeffvar=None, min=None, max=None,
                            median=None, ci95=None)
            cell["schedstat"], note = _schedstat_means(ok[side])
            if note and note not in out["notes"]:
                out["notes"].append(note)
            entry[side] = cell
        a, b = entry["A"], entry["B"]
        test = stats.welch_ttest(values["A"], values["B"])

        def pct(field, better_high, a=a, b=b):
            if a[field] is None or b[field] is None:
                return None
            return stats.pct_improvement(a[field], b[field], better_high)

        b["pct_change"] = pct("mean", hib)
        b["pct_changes"] = {"mean": b["pct_change"],
                            "stddev": pct("stddev", False),
                            "coeffvar": pct("coeffvar", False),
                            "min": pct("min", hib), "max": pct("max", hib)}
        b["p_value"] = test.p
        b["t"] = test.t
        b["significant"] = test.significant(alpha)
        a["pct_change"] = 0.0 if a["mean"] is not None else None
        a["pct_changes"] = {k: (0.0 if a[k] is not None else None)
                            for k in ("mean", "stddev", "coeffvar", "min", "max")}
        a["p_value"] = None
        a["t"] = None
        a["significant"] = False
        entry["paired"] = _paired(ok, alpha)
        entry["verdict"] = _verdict(b, test.p, alpha)
        out["params"].append(entry)
    return _clean(out)


def _paired(ok: dict, alpha: float) -> dict:
    """Paired t-test over the rounds (same ``index``) where both A and B
    succeeded; diff_mean is the mean of B - A."""
    by_round = {side: {r["index"]: float(r["value"]) for r in ok[side]
                       if r.get("index") is not None} for side in SIDES}
    rounds = sorted(set(by_round["A"]) & set(by_round["B"]))
    a = [by_round["A"][i] for i in rounds]
    b = [by_round["B"][i] for i in rounds]
    test = stats.paired_ttest(a, b)
    return {"pairs": len(rounds),
            "diff_mean": stats.amean([y - x for x, y in zip(a, b)]) if rounds else None,
            "t": test.t, "df": test.df, "p_value": test.p,
            "significant": test.significant(alpha)}


def _verdict(b: dict, p: float | None, alpha: float) -> str:
    if p is None:
        return "not enough runs (need 2+ per setting)"
    if math.isnan(p):   # NaN >= alpha is False: it would read as significant
        return "n/a (no p-value)"
    if p >= alpha:
        return "not significant"
    change = b.get("pct_change")
    if change is None or change == 0:
        return "different (significant)"
    return "B better (significant)" if change > 0 else "B worse (significant)"


def _clean(obj):
    """NaN/inf -> None, recursively, so the JSON is standard."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clean(v) for v in obj]
    return _finite(obj)


def _fmt_pct(pct: float | None, star: bool) -> str:
    body = "n/a" if pct is None else f"{pct:.2f}%"
    return f"*{body:>8}*" if star else f"({body:>8})"


def format_report(rep: dict) -> str:
    """mmtests compare-kernels style text for an ``analyze`` result."""
    key = rep["param_key"]
    labels = [rep["settings"][s]["name"] for s in SIDES]
    direction = "higher" if rep["higher_is_better"] else "lower"
    order = f"; run order {rep['order']}" if rep.get("order") else ""
    if rep.get("seed") is not None:
        order += f", seed {rep['seed']}"
    lines = [f"{rep['workload']} ({rep['unit'] or 'no unit'}, {direction} is better{order})",
             f"%chg: + = better than base A ({labels[0]}); *x%* = p < {rep['alpha']:g} "
             "(Welch t-test), (x%) = not significant"]
    if not rep.get("complete", True):
        lines.append("WARNING: the run did not complete; partial results")
    rows = []
    stat_rows = ((None, "mean", True), ("Stddev", "stddev", False),
                 ("CoeffVar", "coeffvar", False), ("Min", "min", False),
                 ("Max", "max", False))
    for fixed_title, field, testable in stat_rows:
        for entry in rep["params"]:
            # the mean row says which mean it is, per param
            title = fixed_title or entry.get("mean_kind", rep["mean_kind"])
            cells = []
            for side in SIDES:
                cell = entry[side]
                value = cell[field]
                vtext = "n/a" if value is None else f"{value:.4f}"
                star = testable and side == "B" and cell["significant"]
                cells.append((vtext, _fmt_pct(cell["pct_changes"][field], star)))
            rows.append((f"{title:<9}{key}={entry['param']}", cells))
    head_w = max([len(r[0]) for r in rows] + [10]) + 1  # a space before wide values
    val_w = max([len(c[0]) for r in rows for c in r[1]] + [8])
    col_w = max([val_w + 2 + 10] + [len(lbl) + 1 for lbl in labels])
    lines.append(" " * head_w + "".join(f"{lbl:>{col_w}}" for lbl in labels))
    for head, cells in rows:
        lines.append(f"{head:<{head_w}}" + "".join(
            f"{v:>{col_w - 11}} {p}" for v, p in cells))

    lines += ["", f"Significance (two-sided, alpha {rep['alpha']:g}): p(Welch) and the "
              "verdict: Welch's t-test on all runs;",
              "p(paired): paired t-test on each round's B-A difference"]
    p_rows = [("", "n(A)", "n(B)", "fail(A)", "fail(B)", "p(Welch)", "pairs",
               "p(paired)", "verdict")]
    for entry in rep["params"]:
        p = entry["B"]["p_value"]
        paired = entry.get("paired") or {"pairs": 0, "p_value": None}
        pp = paired["p_value"]
        p_rows.append((f"{key}={entry['param']}", str(entry["A"]["n"]),
                       str(entry["B"]["n"]), str(entry["A"]["failed"]),
                       str(entry["B"]["failed"]),
                       "n/a" if p is None else f"{p:.4f}", str(paired["pairs"]),
                       "n/a" if pp is None else f"{pp:.4f}", entry["verdict"]))
    lines += _columns(p_rows, left=(0, 8))

    sched_rows = _schedstat_rows(rep, labels)
    if sched_rows:
        lines += ["", "schedstat (per-CPU deltas per run, Amean over runs)"]
        lines += _columns(sched_rows, left=(0, 1))
    for note in rep.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"


def _schedstat_rows(rep: dict, labels: list[str]) -> list[tuple]:
    present = [c for c in SCHEDSTAT_COLUMNS
               if any((e[s]["schedstat"] or {}).get(c[0]) is not None
                      for e in rep["params"] for s in SIDES)]
    if not present:
        return []
    rows = [(rep["param_title"], "setting") + tuple(c[1] for c in present)]
    for entry in rep["params"]:
        for side, label in zip(SIDES, labels):
            means = entry[side]["schedstat"] or {}
            rows.append((str(entry["param"]), label) + tuple(
                "-" if means.get(k) is None else fmt.format(means[k])
                for k, _, fmt in present))
    return rows


def _columns(rows: list[tuple], left: tuple = (0,)) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        out.append("  ".join(c.ljust(w) if i in left else c.rjust(w)
                             for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    return out


def plot(rep: dict, path: str) -> None:
    """Write a PNG: per-run values per param, one series per setting."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise AbbenchError("--plot needs matplotlib (pip install matplotlib)") from None
    entries = rep["params"]
    fig, axes = plt.subplots(len(entries), 1, squeeze=False,
                             figsize=(8, 2.8 * max(1, len(entries))))
    colors = {"A": "tab:blue", "B": "tab:orange"}
    for ax, entry in zip(axes[:, 0], entries):
        for side in SIDES:
            cell = entry[side]
            label = rep["settings"][side]["name"]
            runs = [n + 1 if i is None else i + 1  # 1-based, as in the progress
                    for n, i in enumerate(cell["indices"])]
            ax.plot(runs, cell["values"], "o-", color=colors[side],
                    label=f"{side}: {label}", alpha=0.8)
            if cell["mean"] is not None:
                ax.axhline(cell["mean"], color=colors[side], linestyle="--",
                           linewidth=1)
        p = entry["B"]["p_value"]
        pct = entry["B"]["pct_change"]
        title = f"{rep['param_key']}={entry['param']}"
        if pct is not None:
            title += f": B {pct:+.2f}% on {entry['mean_kind']} (positive = better)"
        if p is not None:
            sig = "significant" if entry["B"]["significant"] else "not significant"
            title += f", p={p:.3g} ({sig})"
        ax.set_title(title, fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        last = max([len(entry[s]["indices"]) for s in SIDES]
                   + [i + 1 for s in SIDES for i in entry[s]["indices"] if i is not None]
                   + [1])
        ax.set_xlim(0.5, last + 0.5)
        ax.set_xlabel("run")
        ax.set_ylabel(rep["unit"] or "value")
        ax.legend(fontsize=8)
    fig.suptitle(f"{rep['workload']} ({'higher' if rep['higher_is_better'] else 'lower'}"
                 " is better; dashed = the mean named in each title)", fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(path, format="png", dpi=100)
    except OSError as exc:
        raise AbbenchError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)


def cmd_report(args: argparse.Namespace) -> int:
    """The ``report`` subcommand."""
    if not 0 < args.alpha < 1:
        raise AbbenchError("--alpha must be between 0 and 1")
    rep = analyze(load_results(args.file), args.alpha)
    if args.plot:
        plot(rep, args.plot)
    if args.json:
        json.dump(rep, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(rep))
    return 0


# --- command line ------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"abbench: error: {message}\n")


# What parse_setting() accepts, for --help.
SETTING_HELP = f"""\
SETTING (--a, --b) is one of:
  feat:NAME[,NAME...]
      write each NAME to {DEFAULT_FEATURES} (--features-path),
      in turn; NO_NAME turns NAME off. A name is letters, digits and _, and
      must be one the kernel lists there (checked before anything runs).
  sysctl:key=value[,key=value...]
      write each value to /proc/sys/<key, dots as slashes> (--proc-sys).
      A key is letters, digits and _ . - / : without "..", and must exist.
      A comma starts a new pair only when key= follows, so a value may hold
      commas: sysctl:kernel.foo=0-3,5 sets kernel.foo to 0-3,5.
  sh:COMMAND
      run COMMAND (everything after "sh:") with /bin/sh -c; output goes to
      stderr, a non-zero exit status is an error.
  none
      change nothing.
Both settings are checked, then applied once (A, then B) so that a typo fails
at once; during the run the setting is applied again before every run.
"""


def _default(workload: str, key: str):
    """A workload's default option value, for --help."""
    return wl.get(workload).defaults[key]


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="abbench", description=__doc__.split("\n\n")[0],
                     epilog=SETTING_HELP, formatter_class=fmt)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run an A/B comparison (in the guest)",
                         epilog=SETTING_HELP, formatter_class=fmt)
    run.add_argument("--a", required=True, metavar="SETTING",
                     help="baseline setting (syntax below)")
    run.add_argument("--b", required=True, metavar="SETTING",
                     help="setting compared with the baseline")
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
    run.add_argument("--features-path", default=DEFAULT_FEATURES,
                     help="scheduler features file (default: %(default)s)")
    run.add_argument("--proc-sys", default=DEFAULT_PROC_SYS,
                     help="sysctl tree (default: %(default)s)")
    run.add_argument("--schedstat-path", default="/proc/schedstat",
                     help="(default: %(default)s)")
    run.add_argument("--stat-path", default="/proc/stat",
                     help="(default: %(default)s)")
    run.add_argument("--no-schedstat", action="store_true",
                     help="do not record /proc/schedstat")
    run.set_defaults(func=cmd_run)

    rep = sub.add_parser("report", help="compare A and B from a results file")
    rep.add_argument("file", metavar="FILE.json")
    rep.add_argument("--json", action="store_true", help="print JSON")
    rep.add_argument("--plot", metavar="OUT.png", help="write a PNG plot")
    rep.add_argument("--alpha", type=float, default=0.05,
                     help="significance level (default: %(default)s)")
    rep.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except AbbenchError as exc:
        print(f"abbench: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # report piped into head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
