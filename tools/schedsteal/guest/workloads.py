"""Benchmark workloads: guest command lines and output parsers (stdlib only).

Each workload is a :class:`Workload` with a name, the command to run for one
value of its parameter (hackbench groups, stress-ng workers, wakeup-latency
message threads), a parser turning the command's output into one metric
value, the metric's unit and whether higher is better (rates, summarised with
the harmonic mean) or lower is better (times/latencies, arithmetic mean).

Examples::

    >>> from schedsteal.guest import workloads
    >>> w = workloads.get("hackbench-process-pipe")
    >>> w.command(4, {"loops": 500})
    ['hackbench', '-P', '-p', '-g', '4', '-l', '500']
    >>> w.parse("Running in process mode with 4 groups ...\\nTime: 1.234\\n").value
    1.234
    >>> c = workloads.custom("my-bench -n {param}", r"took ([0-9.]+) s",
    ...                      higher_is_better=False, unit="s")
    >>> c.command(3)
    ['/bin/sh', '-c', 'my-bench -n 3']

Registered names: hackbench-{process,thread}-{pipe,sockets},
perf-messaging[-{process,thread}-{pipe,sockets}] (plain ``perf-messaging`` is
perf's default: processes over sockets), stress-ng-cpu, wakeup-latency.

Options (``options`` dicts; unset keys take the workload's defaults):
``loops`` (hackbench, perf-messaging), ``runtime`` seconds (stress-ng-cpu,
wakeup-latency), ``workers`` per message thread and ``busy_us`` (wakeup-latency),
``binary`` (path of the program to run instead of the default).

The wakeup-latency binary is looked up as: ``binary`` option,
``$SCHEDSTEAL_WAKEUP_LATENCY``, ``wakeup-latency`` on ``$PATH``, then
``guest/wakeup-latency`` in this source tree (build it with
``gcc -O2 -Wall -Wextra -pthread -o guest/wakeup-latency guest/wakeup-latency.c``).

Parsers raise :class:`WorkloadError` when the output lacks the metric;
:meth:`Workload.parse` also when the metric is NaN or infinite.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Result",
    "Workload",
    "WorkloadError",
    "custom",
    "get",
    "names",
    "parse_hackbench",
    "parse_perf_messaging",
    "parse_stress_ng",
    "parse_stress_ng_yaml",
    "parse_wakeup_latency",
    "wakeup_latency_binary",
]

STRESS_NG_YAML = "stress-ng.yaml"
WAKEUP_LATENCY_ENV = "SCHEDSTEAL_WAKEUP_LATENCY"


class WorkloadError(Exception):
    """A workload name, option or output that cannot be used."""


@dataclass(frozen=True)
class Result:
    """One parsed run: the metric value plus optional extra figures."""

    value: float
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    """A named benchmark.  See the module docstring."""

    name: str
    description: str
    unit: str
    higher_is_better: bool
    param_key: str            # short label in reports: "g" in "g=4"
    param_title: str          # column title in reports: "grps"
    build: Callable[[int, dict, str | None], list[str]]
    parser: Callable[[str, str | None], Result]
    defaults: dict = field(default_factory=dict)
    probe: Callable[[dict], list[str]] | None = None  # quick self-test run

    @property
    def mean_kind(self) -> str:
        return "Hmean" if self.higher_is_better else "Amean"

    def options(self, options: dict | None = None) -> dict:
        """The defaults overridden by the non-None entries of options."""
        merged = dict(self.defaults)
        merged.update({k: v for k, v in (options or {}).items() if v is not None})
        return merged

    def command(self, param: int, options: dict | None = None,
                workdir: str | None = None) -> list[str]:
        """argv for one run with the given parameter value.

        workdir is a scratch directory for output files (stress-ng's YAML);
        without one the workload falls back to parsing its text output.
        """
        return self.build(param, self.options(options), workdir)

    def parse(self, output: str, workdir: str | None = None) -> Result:
        """Parse the combined stdout+stderr text (and files in workdir)."""
        result = self.parser(output, workdir)
        # float() takes "nan", "inf" and overflows like "1e999" to inf: none
        # of them is a measurement, and one would poison every statistic.
        if not math.isfinite(result.value):
            raise WorkloadError(f"{self.name}: metric value {result.value!r} is "
                                "not a finite number")
        return result

    def available(self, options: dict | None = None) -> str | None:
        """None when the workload can run here, else the reason it cannot."""
        opts = self.options(options)
        argv = self.command(1, opts)
        exe = argv[0]
        path = exe if os.sep in exe else shutil.which(exe)
        if not path or not os.access(path, os.X_OK):
            return f"{exe}: not found or not executable"
        if self.probe is None:
            return None
        probe = self.probe(opts)
        try:
            proc = subprocess.run(probe, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=60,
                                  text=True, errors="replace", check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{' '.join(probe)}: {exc}"
        if proc.returncode != 0:
            tail = proc.stdout.strip().splitlines()[-1:] or [""]
            return (f"{' '.join(probe)} exited {proc.returncode}: "
                    f"{tail[0]}").rstrip(": ")
        try:
            self.parse(proc.stdout)
        except WorkloadError as exc:
            return f"{' '.join(probe)}: {exc}"
        return None


# --- parsers ---------------------------------------------------------------

_NUM = r"([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"


def _last_float(pattern: str, text: str, what: str) -> float:
    found = re.findall(pattern, text, re.MULTILINE)
    if not found:
        raise WorkloadError(f"no {what} in the output")
    return float(found[-1])


def parse_hackbench(output: str, workdir: str | None = None) -> Result:
    """rt-tests hackbench: ``Time: 1.234`` (seconds)."""
    return Result(_last_float(r"^\s*Time:\s*" + _NUM + r"\s*$", output,
                              "'Time: <seconds>' line"))


def parse_perf_messaging(output: str, workdir: str | None = None) -> Result:
    """perf bench sched messaging: ``Total time: 0.123 [sec]``."""
    return Result(_last_float(r"Total time:\s*" + _NUM + r"\s*\[sec\]", output,
                              "'Total time: <seconds> [sec]' line"))


def parse_stress_ng_yaml(text: str, stressor: str = "cpu") -> Result:
    """The metrics section of stress-ng's ``--yaml`` file (no YAML library:
    the file is flat enough to read line by line)."""
    current = None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*-\s*stressor:\s*(\S+)\s*$", line)
        if m:
            current = m.group(1)
            continue
        m = re.match(r"^\s*([A-Za-z0-9-]+):\s*(\S+)\s*$", line)
        if m and current == stressor:
            fields.setdefault(m.group(1), m.group(2))
    rate = fields.get("bogo-ops-per-second-real-time")
    if rate is None:
        raise WorkloadError(f"no bogo-ops-per-second-real-time for stressor "
                            f"{stressor!r} in the stress-ng YAML")
    try:
        extra = {"source": "yaml"}
        if "bogo-ops" in fields:
            extra["bogo_ops"] = float(fields["bogo-ops"])
        return Result(float(rate), extra)
    except ValueError:
        raise WorkloadError(f"bad number in the stress-ng YAML: {rate!r}") from None


def parse_stress_ng(output: str, workdir: str | None = None,
                    stressor: str = "cpu") -> Result:
    """stress-ng --metrics-brief: bogo ops/s (real time) of the stressor.

    Reads ``workdir/stress-ng.yaml`` when present, else the metrics lines
    (``stress-ng: info:  [123] cpu  12345  10.00  19.80  0.01  1234.50  623.22``
    whose columns are bogo ops, real, usr and sys time, bogo ops/s real time,
    bogo ops/s usr+sys time...).
    """
    if workdir:
        path = Path(workdir) / STRESS_NG_YAML
        if path.is_file():
            try:
                return parse_stress_ng_yaml(path.read_text(errors="replace"),
                                            stressor)
            except WorkloadError:
                pass  # fall back to the text output
    row = None
    pattern = (r"^(?:stress-ng:\s*\w+:\s*\[\d+\]\s*)?" + re.escape(stressor)
               + r"((?:\s+[0-9.]+){6,})\s*$")
    for line in output.splitlines():
        m = re.match(pattern, line.strip())
        if m:
            row = m.group(1).split()
    if row is None:
        raise WorkloadError(f"no '{stressor}' metrics line (--metrics-brief) "
                            "in the stress-ng output")
    try:
        return Result(float(row[4]), {"bogo_ops": float(row[0]), "source": "text"})
    except ValueError:
        raise WorkloadError(f"bad stress-ng metrics line: {' '.join(row)}") from None


WAKEUP_KEYS = ("p50", "p90", "p99", "p99.9", "max", "wakeups")


def parse_wakeup_latency(output: str, workdir: str | None = None) -> Result:
    """guest/wakeup-latency: lines ``p50 12`` ... ``max 340`` ``wakeups N``.

    The value is p99 in usec; extra holds every figure.
    """
    got: dict[str, float] = {}
    for m in re.finditer(r"^(p50|p90|p99|p99\.9|max|wakeups)\s+([0-9]+)\s*$",
                         output, re.MULTILINE):
        got[m.group(1)] = int(m.group(2))
    missing = [k for k in WAKEUP_KEYS if k not in got]
    if missing:
        raise WorkloadError(f"wakeup-latency output lacks {', '.join(missing)}")
    if got["wakeups"] <= 0:
        raise WorkloadError("wakeup-latency recorded no wakeups")
    return Result(float(got["p99"]), got)


# --- command builders --------------------------------------------------------

def _hackbench(mode: str, transport: str):
    def build(param: int, o: dict, workdir: str | None) -> list[str]:
        argv = [o.get("binary") or "hackbench",
                "-P" if mode == "process" else "-T"]
        if transport == "pipe":
            argv.append("-p")
        return argv + ["-g", str(param), "-l", str(o["loops"])]
    return build


def _perf_messaging(mode: str, transport: str):
    def build(param: int, o: dict, workdir: str | None) -> list[str]:
        argv = [o.get("binary") or "perf", "bench", "sched", "messaging"]
        if transport == "pipe":
            argv.append("-p")
        if mode == "thread":
            argv.append("-t")
        return argv + ["-g", str(param), "-l", str(o["loops"])]
    return build


def _perf_probe(o: dict) -> list[str]:
    return [o.get("binary") or "perf", "bench", "sched", "messaging",
            "-g", "1", "-l", "1"]


def _stress_ng(param: int, o: dict, workdir: str | None) -> list[str]:
    argv = [o.get("binary") or "stress-ng", "--cpu", str(param),
            "--cpu-method", "matrixprod", "--timeout", f"{o['runtime']}s",
            "--metrics-brief",
            # stress-ng refuses to start in a read-only cwd (the guest's
            # view of the repo), even for stressors that write nothing.
            "--temp-path", str(workdir or tempfile.gettempdir())]
    if workdir:
        argv += ["--yaml", str(Path(workdir) / STRESS_NG_YAML)]
    return argv


def wakeup_latency_binary(explicit: str | None = None) -> str:
    """Path of the wakeup-latency program (see the module docstring)."""
    if explicit:
        return explicit
    env = os.environ.get(WAKEUP_LATENCY_ENV)
    if env:
        return env
    found = shutil.which("wakeup-latency")
    if found:
        return found
    return str(Path(__file__).resolve().parents[3] / "guest" / "wakeup-latency")


def _wakeup_latency(param: int, o: dict, workdir: str | None) -> list[str]:
    return [wakeup_latency_binary(o.get("binary")), "-m", str(param),
            "-t", str(o["workers"]), "-r", str(o["runtime"]),
            "-b", str(o["busy_us"])]


def _registry() -> dict[str, Workload]:
    reg: dict[str, Workload] = {}
    for mode in ("process", "thread"):
        for transport in ("pipe", "sockets"):
            name = f"hackbench-{mode}-{transport}"
            reg[name] = Workload(
                name, f"rt-tests hackbench, {mode}es over {transport}",
                "s", False, "g", "grps", _hackbench(mode, transport),
                parse_hackbench, {"loops": 500})
            name = f"perf-messaging-{mode}-{transport}"
            reg[name] = Workload(
                name, f"perf bench sched messaging, {mode}es over {transport}",
                "s", False, "g", "grps", _perf_messaging(mode, transport),
                parse_perf_messaging, {"loops": 500}, _perf_probe)
    reg["perf-messaging"] = Workload(
        "perf-messaging", "perf bench sched messaging (processes, sockets)",
        "s", False, "g", "grps", _perf_messaging("process", "sockets"),
        parse_perf_messaging, {"loops": 500}, _perf_probe)
    reg["stress-ng-cpu"] = Workload(
        "stress-ng-cpu", "stress-ng --cpu N --cpu-method matrixprod throughput",
        "bogo-ops/s", True, "n", "cpus", _stress_ng, parse_stress_ng,
        {"runtime": 10})
    reg["wakeup-latency"] = Workload(
        "wakeup-latency", "guest/wakeup-latency p99 wakeup latency",
        "usec", False, "m", "msgt", _wakeup_latency, parse_wakeup_latency,
        {"runtime": 5, "workers": 4, "busy_us": 50})
    return reg


WORKLOADS: dict[str, Workload] = _registry()


def names() -> list[str]:
    return sorted(WORKLOADS)


def get(name: str) -> Workload:
    """The registered workload called name, or WorkloadError."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise WorkloadError(f"unknown workload {name!r} (known: "
                            f"{', '.join(names())})") from None


def custom(command: str, metric_regex: str, higher_is_better: bool,
           unit: str = "", name: str = "custom") -> Workload:
    """A user-defined workload: a /bin/sh command and a metric regex.

    ``{param}`` in command is replaced by the parameter value, which is also
    exported as $SCHEDSTEAL_PARAM.  The metric is the first group of the last
    match of metric_regex in the output (the whole match without a group).
    """
    try:
        rx = re.compile(metric_regex, re.MULTILINE)
    except re.error as exc:
        raise WorkloadError(f"bad --metric-regex {metric_regex!r}: {exc}") from None
    if not command.strip():
        raise WorkloadError("empty workload command")

    def build(param: int, o: dict, workdir: str | None) -> list[str]:
        return ["/bin/sh", "-c", command.replace("{param}", str(param))]

    def parse(output: str, workdir: str | None = None) -> Result:
        matches = list(rx.finditer(output))
        if not matches:
            raise WorkloadError(f"metric regex {metric_regex!r} did not match "
                                "the output")
        m = matches[-1]
        text = m.group(1) if rx.groups else m.group(0)
        try:
            return Result(float(text))
        except (TypeError, ValueError):
            raise WorkloadError(f"metric regex matched {text!r}, "
                                "not a number") from None

    return Workload(name, f"custom: {command}", unit, higher_is_better,
                    "p", "param", build, parse, {})
