"""Tests for schedsteal.workloads and guest/wakeup-latency.c."""

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from schedsteal.guest import workloads as wl

FIXTURES = Path(__file__).parent / "fixtures" / "abbench"
REPO = Path(__file__).resolve().parents[2]


def fixture(name):
    return (FIXTURES / name).read_text()


def test_registry():
    names = wl.names()
    for name in ("hackbench-process-pipe", "hackbench-process-sockets",
                 "hackbench-thread-pipe", "hackbench-thread-sockets",
                 "perf-messaging", "perf-messaging-thread-pipe",
                 "stress-ng-cpu", "wakeup-latency"):
        assert name in names
    with pytest.raises(wl.WorkloadError, match="unknown workload 'nope'"):
        wl.get("nope")


def test_hackbench_commands():
    assert wl.get("hackbench-process-pipe").command(4, {"loops": 500}) == \
        ["hackbench", "-P", "-p", "-g", "4", "-l", "500"]
    assert wl.get("hackbench-thread-sockets").command(2, {"loops": 10}) == \
        ["hackbench", "-T", "-g", "2", "-l", "10"]
    w = wl.get("hackbench-process-sockets")
    assert w.command(1) == ["hackbench", "-P", "-g", "1", "-l", "500"]  # default loops
    assert w.command(1, {"loops": None})[-1] == "500"
    assert not w.higher_is_better and w.unit == "s" and w.mean_kind == "Amean"
    assert (w.param_key, w.param_title) == ("g", "grps")


def test_hackbench_parse():
    w = wl.get("hackbench-thread-pipe")
    assert w.parse(fixture("hackbench.txt")).value == 1.234
    with pytest.raises(wl.WorkloadError, match="Time"):
        w.parse("Running in process mode\nhackbench: fork failed\n")


def test_perf_messaging():
    w = wl.get("perf-messaging")
    assert w.command(4, {"loops": 100}) == \
        ["perf", "bench", "sched", "messaging", "-g", "4", "-l", "100"]
    assert wl.get("perf-messaging-thread-pipe").command(2, {"loops": 5}) == \
        ["perf", "bench", "sched", "messaging", "-p", "-t", "-g", "2", "-l", "5"]
    assert w.parse(fixture("perf-messaging.txt")).value == 0.123
    with pytest.raises(wl.WorkloadError, match="Total time"):
        w.parse("perf not found for kernel 6.12.0\n")


def _script(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_available(tmp_path):
    w = wl.get("perf-messaging")
    good = _script(tmp_path / "perf-good", "echo '     Total time: 0.001 [sec]'\n")
    assert w.available({"binary": good}) is None
    bad = _script(tmp_path / "perf-bad",
                  "echo 'WARNING: perf not found for kernel 6.12' >&2; exit 2\n")
    reason = w.available({"binary": bad})
    assert "exited 2" in reason and "perf not found" in reason
    odd = _script(tmp_path / "perf-odd", "echo hello\n")
    assert "Total time" in w.available({"binary": odd})
    missing = wl.get("hackbench-process-pipe").available(
        {"binary": str(tmp_path / "no-such-hackbench")})
    assert "not found" in missing


def test_stress_ng_command():
    w = wl.get("stress-ng-cpu")
    assert w.higher_is_better and w.mean_kind == "Hmean"
    assert w.command(2, {"runtime": 5}) == [
        "stress-ng", "--cpu", "2", "--cpu-method", "matrixprod",
        "--timeout", "5s", "--metrics-brief", "--temp-path", tempfile.gettempdir()]
    argv = w.command(2, {}, workdir="/tmp/x")
    assert argv[-2:] == ["--yaml", "/tmp/x/stress-ng.yaml"]
    # A writable temp path even when the cwd is read-only (the guest's repo).
    assert argv[argv.index("--temp-path") + 1] == "/tmp/x"
    assert "10s" in argv


def test_stress_ng_parse_text():
    w = wl.get("stress-ng-cpu")
    r = w.parse(fixture("stress-ng-metrics-brief.txt"))
    assert r.value == 1234.50 and r.extra == {"bogo_ops": 12345.0, "source": "text"}
    # newer stress-ng: "metrc:" tag and two more columns
    assert w.parse(fixture("stress-ng-metrc.txt")).value == 1975.20
    with pytest.raises(wl.WorkloadError, match="metrics line"):
        w.parse("stress-ng: info:  [1] dispatching hogs: 2 cpu\n")


def test_stress_ng_parse_yaml(tmp_path):
    w = wl.get("stress-ng-cpu")
    (tmp_path / "stress-ng.yaml").write_text(fixture("stress-ng.yaml"))
    r = w.parse(fixture("stress-ng-metrics-brief.txt"), str(tmp_path))
    assert r.value == 1234.567 and r.extra["source"] == "yaml"
    # a YAML without the cpu stressor falls back to the text
    (tmp_path / "stress-ng.yaml").write_text("---\nmetrics:\n    - stressor: vm\n"
                                             "      bogo-ops-per-second-real-time: 9\n")
    assert w.parse(fixture("stress-ng-metrics-brief.txt"), str(tmp_path)).value == 1234.5
    with pytest.raises(wl.WorkloadError):
        wl.parse_stress_ng_yaml("---\nmetrics:\n    - stressor: cpu\n")


def test_wakeup_latency_parse():
    w = wl.get("wakeup-latency")
    r = w.parse(fixture("wakeup-latency.txt"))
    assert r.value == 55.0
    assert r.extra == {"p50": 12, "p90": 20, "p99": 55, "p99.9": 120, "max": 340,
                       "wakeups": 123456}
    with pytest.raises(wl.WorkloadError, match="lacks p99.9"):
        w.parse("p50 1\np90 2\np99 3\nmax 4\nwakeups 5\n")
    with pytest.raises(wl.WorkloadError, match="no wakeups"):
        w.parse("p50 0\np90 0\np99 0\np99.9 0\nmax 0\nwakeups 0\n")


def test_wakeup_latency_command(monkeypatch):
    w = wl.get("wakeup-latency")
    assert w.command(3, {"binary": "/x/wl", "workers": 2, "runtime": 1, "busy_us": 0}) == \
        ["/x/wl", "-m", "3", "-t", "2", "-r", "1", "-b", "0"]
    monkeypatch.setenv(wl.WAKEUP_LATENCY_ENV, "/env/wl")
    assert w.command(1)[0] == "/env/wl"
    assert w.command(1)[2:] == ["1", "-t", "4", "-r", "5", "-b", "50"]


def test_custom():
    w = wl.custom("bench -n {param} | tail -1", r"Time: ([0-9.]+)",
                  higher_is_better=False, unit="s", name="mine")
    assert w.command(8) == ["/bin/sh", "-c", "bench -n 8 | tail -1"]
    assert w.name == "mine" and w.unit == "s" and w.mean_kind == "Amean"
    assert w.parse("Time: 1\nTime: 2.5\n").value == 2.5          # last match
    assert wl.custom("x", r"\d+\.\d+", True).parse("took 3.25 s").value == 3.25
    with pytest.raises(wl.WorkloadError, match="did not match"):
        w.parse("nothing here")
    with pytest.raises(wl.WorkloadError, match="not a number"):
        wl.custom("x", r"Time: (\S+)", False).parse("Time: abc")
    with pytest.raises(wl.WorkloadError, match="bad --metric-regex"):
        wl.custom("x", r"(unclosed", False)
    with pytest.raises(wl.WorkloadError, match="empty"):
        wl.custom("  ", r"x", False)
    assert w.available() is None


@pytest.fixture(scope="module")
def wakeup_latency_bin(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed")
    out = tmp_path_factory.mktemp("wl") / "wakeup-latency"
    proc = subprocess.run([gcc, "-O2", "-Wall", "-Wextra", "-Werror", "-pthread",
                           "-o", str(out), str(REPO / "guest" / "wakeup-latency.c")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return str(out)


def test_wakeup_latency_program(wakeup_latency_bin):
    proc = subprocess.run([wakeup_latency_bin, "-m", "1", "-t", "2", "-r", "1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    r = wl.get("wakeup-latency").parse(proc.stdout)
    e = r.extra
    assert e["wakeups"] > 0
    assert e["p50"] <= e["p90"] <= e["p99"] <= e["p99.9"] <= e["max"]
    assert wl.get("wakeup-latency").available({"binary": wakeup_latency_bin}) is None


@pytest.mark.parametrize("args", [["-x"], ["-m"], ["-m", "0"], ["-t", "abc"],
                                  ["-r", "1x"], ["-b", "-1"], ["extra"]])
def test_wakeup_latency_bad_options(wakeup_latency_bin, args):
    proc = subprocess.run([wakeup_latency_bin, *args], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "usage:" in proc.stderr and proc.stdout == ""


def test_wakeup_latency_help(wakeup_latency_bin):
    proc = subprocess.run([wakeup_latency_bin, "-h"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0 and "usage:" in proc.stdout


@pytest.mark.parametrize("name, output, workdir_yaml", [
    ("custom", "Time: nan", None),
    ("custom", "Time: inf", None),
    ("custom", "Time: -Infinity", None),
    ("hackbench-process-pipe", "Time: 1e999\n", None),          # overflows to inf
    ("perf-messaging", "Total time: 1e400 [sec]\n", None),
    ("stress-ng-cpu", "", "---\nmetrics:\n    - stressor: cpu\n"
                          "      bogo-ops-per-second-real-time: nan\n"),
])
def test_non_finite_metric_is_an_error(tmp_path, name, output, workdir_yaml):
    # NaN/inf are not measurements: a report would silently drop them or
    # turn every statistic into NaN.
    w = wl.custom("x", r"Time: (\S+)", False) if name == "custom" else wl.get(name)
    workdir = None
    if workdir_yaml is not None:
        (tmp_path / wl.STRESS_NG_YAML).write_text(workdir_yaml)
        workdir = str(tmp_path)
    with pytest.raises(wl.WorkloadError, match="not a finite number"):
        w.parse(output, workdir)
