"""The guest half: the only code that touches the guest's kernel.

It runs as root inside the test guest under the guest's own python3, so
it uses the standard library only (Python 3.11). ``kernel`` reads and
writes the kernel's files; ``settings`` applies A/B settings; ``runner``
and ``workloads`` run benchmarks; ``trace`` drives tracefs; the probes
(``steal_probe``, ``park_probe``, ``placement_probe``, ``topology``) print one JSON object for
the host. From the host half it imports pure parsing only (``cpulist``,
``schedstat``).
"""
import json
import subprocess
import sys
import time


def print_result(result: dict) -> int:
    """Print a probe's result: one JSON object on one line, what the host's
    vm.guest_json() reads back. The probes' exit status: 0."""
    json.dump(result, sys.stdout)
    print()
    return 0


def until(cond, tries: int = 2000) -> bool:
    """Poll cond every 10 ms, at most `tries` times; whether it came true.
    The probes wait for a state this way, never with a bare sleep."""
    for _ in range(tries):
        if cond():
            return True
        time.sleep(0.01)
    return False


# A busy loop that says when it runs. Until then the shell may still be
# loading from the host's file system, sleeping, and each wakeup is a
# placement decision of its own; after it, the loop makes no system call.
RUNNING_LOOP = ["sh", "-c", "echo running; while :; do :; done"]


def start_running(prefix: list[str]) -> subprocess.Popen:
    """Start `prefix` + RUNNING_LOOP (taskset, chrt: they exec the loop)
    and return once the loop runs. The read is bounded by the boot's
    timeout."""
    proc = subprocess.Popen([*prefix, *RUNNING_LOOP], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    proc.stdout.close()
    if line != "running\n":
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{' '.join(prefix)}: the busy loop did not start ({line!r})")
    return proc


def stop_hogs(procs) -> None:
    """Kill and reap, the last started first."""
    for p in reversed(procs):
        p.kill()
        p.wait()
