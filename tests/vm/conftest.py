"""Shared fixtures for tests that boot a guest.

The kernel comes from $SCHEDSTEAL_KERNEL_TEST / $SCHEDSTEAL_KERNEL_DEBUG /
$SCHEDSTEAL_KERNEL_JUMPLABEL / $SCHEDSTEAL_KERNEL_MODULES / $SCHEDSTEAL_KERNEL_KCSAN
(set by `make test`
and `make test-kcsan`), or is built on first
use. The jump-label kernel boots under single-threaded TCG (vm.py sees
CONFIG_JUMP_LABEL in its build directory).
"""
import os
import subprocess
import warnings
from pathlib import Path

import pytest

from schedsteal import vm

REPO = Path(__file__).resolve().parents[2]


def _kernel(config):
    env = f"SCHEDSTEAL_KERNEL_{config.upper()}"
    if os.environ.get(env):
        return os.environ[env]
    out = subprocess.run([str(REPO / "scripts" / "build-kernel.sh"), config],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    os.environ[env] = out.strip().splitlines()[-1]
    return os.environ[env]


def has_topic(name):
    """Whether the kernels under test have topic `name` (patches/topics):
    all do unless `make test-topics TOPICS=...` chose some."""
    return not vm.missing_topics([name], vm.kernel_topics())


def pytest_collection_modifyitems(config, items):
    """A test marked topics(...) is skipped when a topic it needs is not
    in the kernels under test (make test-topics); with the whole series
    every test runs."""
    have = vm.kernel_topics()
    for item in items:
        need = [name for mark in item.iter_markers("topics") for name in mark.args]
        missing = vm.missing_topics(need, have)
        if missing:
            item.add_marker(pytest.mark.skip(
                reason=f"needs topic {', '.join(missing)}; the kernel has {','.join(sorted(have))}"))


@pytest.fixture(scope="session")
def test_kernel():
    return _kernel("test")


@pytest.fixture(scope="session")
def debug_kernel():
    return _kernel("debug")


@pytest.fixture(scope="session")
def jumplabel_kernel():
    k = _kernel("jumplabel")
    # Its .config says CONFIG_JUMP_LABEL=y, so every boot of it is single-threaded.
    assert vm.needs_single_thread_tcg(k), f"{k}: not a jump-label kernel"
    return k


@pytest.fixture(scope="session")
def modules_kernel():
    """The test kernel with loadable modules and the steal governor as a
    module (configs/modules.config), the way Debian's configuration
    builds it."""
    return _kernel("modules")


@pytest.fixture(scope="session")
def kcsan_kernel():
    return _kernel("kcsan")


@pytest.fixture(params=["test", "debug"])
def any_kernel(request):
    """Each kernel in turn: for tests that must also hold on the debug
    kernel (lockdep and the other checks watching)."""
    return _kernel(request.param)


def boot(kernel, preset, cmd, timeout=900, append=None, keep=None):
    """Run cmd in a guest; fail with the guest's output on any problem.
    keep: a directory that receives the guest's $SCHEDSTEAL_OUT files.
    A boot that QEMU itself ended before the kernel reached user space
    (RunResult.host_crash), or whose only reports are RCU stalls caused by
    a timer that never fired (RunResult.lost_timer), is tried once more,
    with a warning that carries the first boot's reports; the second boot
    must be clean."""
    res = boot_raw(kernel, preset, cmd, timeout=timeout, append=append, keep=keep)
    if res.lost_timer:
        warnings.warn(f"{preset}: RCU stalls from a guest timer that never fired "
                      "(not a scheduler report); booting again. Reports:\n"
                      + vm.splat_context(res.dmesg, res.splats))
        res = vm.run(kernel, preset, cmd, timeout=timeout, append=append, keep=keep)
    assert not res.timed_out, (f"guest timed out:\n{res.output[-4000:]}\n"
                               f"console:\n{vm.tail(res.console)}")
    assert not res.splats, "kernel log has splats:\n" + vm.splat_context(res.dmesg, res.splats)
    assert not res.died, ("guest stopped before the command finished; console:\n"
                          + vm.tail(res.console))
    assert res.dmesg, "no kernel log came back from the guest"
    return res


def boot_raw(kernel, preset, cmd, timeout=900, append=None, keep=None):
    """vm.run() with a second try after a QEMU crash during boot, and no
    verdict: boot() judges it; a test that sorts the kernel's reports
    itself calls this."""
    return vm.run_past_host_crash(kernel, preset, cmd, timeout=timeout, append=append,
                                  keep=keep)


def run_json(kernel, preset, cmd, append=None, timeout=900):
    """boot(), then the JSON object the guest command printed (a probe's
    result) and the run."""
    res = boot(kernel, preset, cmd, timeout=timeout, append=append)
    return vm.guest_json(res.output), res


def json_results(res, n):
    """The JSON objects that the probes run in one boot printed, in order;
    exactly n of them (a probe that printed none fails here)."""
    got = [obj for _, obj in vm.json_objects(res.output.splitlines())]
    assert len(got) == n, res.output[-3000:]
    return got


@pytest.fixture(scope="session")
def lab_qemu():
    """The lab QEMU (`make qemu`; $SCHEDSTEAL_QEMU_LAB names a binary built
    elsewhere), built on first use."""
    path = os.environ.get("SCHEDSTEAL_QEMU_LAB")
    if not path:
        out = subprocess.run([str(REPO / "scripts" / "build-qemu.sh")], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        path = out.strip().splitlines()[-1]
        os.environ["SCHEDSTEAL_QEMU_LAB"] = path
    return path
