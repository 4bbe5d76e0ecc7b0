"""The lab's validation probe (guest side): ``python3 guest/lab_probe.py``.

Checks the instrument, not the kernel (docs/lab.md). Prints one JSON
object on stdout.

    lab_probe.py loops --busyloop PATH --iterations N --series 1,2,4 [--pinned CPU]
        For each n of the series, start n copies of busyloop (a loop of a
        fixed instruction count), each pinned to its own CPU 0..n-1 (or
        all to CPU --pinned), let them go at once and report the batch's
        time (first start to last end, CLOCK_MONOTONIC) and each loop's.
    lab_probe.py steal --label NAME --seconds S [--busy]
        A measurement window of S seconds (with a busy loop pinned to each
        CPU if --busy): /proc/stat of every CPU before and after, and the
        marks $SCHEDSTEAL_OUT/mark-NAME-start and mark-NAME-end written
        at the two snapshots, for the host to sample its side at the
        same moments (lab.StealMonitor).
    lab_probe.py mmio --seconds S
        Needs two pci-testdev devices (QEMU's -device pci-testdev). For S
        seconds, CPU 0 switches the first one's memory decoding off and
        on (each switch a change of the guest's memory map), while each
        other CPU reads one byte of the second one's MMIO BAR, whose
        value does not change. Reports the switches, the reads and the
        reads that returned something else ("misread").
"""
import argparse
import json
import mmap
import os
import struct
import subprocess
import time

from .. import schedstat
from . import kernel, print_result, start_running, stop_hogs


def run_batch(busyloop: str, iterations: int, cpus: list[int]) -> dict:
    """One copy of busyloop per entry of cpus (pinned there), released
    together by closing their standard input once every copy says it is
    ready (loaded and waiting: loading from 9p takes a while)."""
    procs = []
    try:
        for cpu in cpus:
            procs.append(subprocess.Popen(
                ["taskset", "-c", str(cpu), busyloop, str(iterations)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for p in procs:
            line = p.stdout.readline()
            if line != "ready\n":
                raise RuntimeError(f"busyloop did not start ({line!r})")
        for p in procs:
            p.stdin.close()
        times = []
        for p in procs:
            out = p.stdout.read()
            p.stdout.close()
            if p.wait() != 0:
                raise RuntimeError(f"busyloop exited with status {p.returncode}")
            start, end = (int(x) for x in out.split())
            times.append((start, end))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return {"n": len(cpus), "cpus": sorted(set(cpus)),
            "batch_ns": max(e for _, e in times) - min(s for s, _ in times),
            "loop_ns": [e - s for s, e in times]}


def cmd_loops(args) -> int:
    series = [int(x) for x in args.series.split(",")]
    online = kernel.online_cpus()
    if max(series) > len(online) and args.pinned is None:
        raise SystemExit(f"lab_probe: --series asks for {max(series)} CPUs, "
                         f"the guest has {len(online)}")
    # The probe itself out of the way of the loops: on the last CPU.
    os.sched_setaffinity(0, {online[-1]})
    batches = []
    for n in series:
        cpus = [args.pinned] * n if args.pinned is not None else online[:n]
        batches.append(run_batch(args.busyloop, args.iterations, cpus))
    return print_result({"iterations": args.iterations, "pinned": args.pinned,
                         "batches": batches})


def write_mark(name: str) -> None:
    path = os.path.join(os.environ["SCHEDSTEAL_OUT"], f"mark-{name}")
    with open(path, "w") as f:
        f.write(f"{time.monotonic_ns()}\n")


def cmd_steal(args) -> int:
    cpus = kernel.online_cpus()
    hogs = []
    try:
        if args.busy:
            hogs = [start_running(["taskset", "-c", str(c)]) for c in cpus]
        # The window runs from one /proc/stat snapshot to the other; each
        # mark follows its snapshot at once, and the host samples its side
        # when it sees the mark: both ends lag alike.
        t0 = time.monotonic()
        before = schedstat.parse_proc_stat(kernel.read(kernel.STAT))
        write_mark(f"{args.label}-start")
        # The window itself: its length is what is measured, nothing
        # waits on it.
        time.sleep(args.seconds)
        window = time.monotonic() - t0
        after = schedstat.parse_proc_stat(kernel.read(kernel.STAT))
        write_mark(f"{args.label}-end")
    finally:
        stop_hogs(hogs)
    per_cpu = {}
    for c in cpus:
        d = {k: after[f"cpu{c}"][k] - before[f"cpu{c}"][k] for k in schedstat.PROC_STAT_COLUMNS}
        per_cpu[str(c)] = d
    return print_result({"label": args.label, "busy": args.busy, "window_s": window,
                         "user_hz": os.sysconf("SC_CLK_TCK"), "per_cpu": per_cpu})


TESTDEV = ("0x1b36", "0x0005")   # QEMU's pci-testdev: Red Hat's vendor ID
PCI_DEVICES = "/sys/bus/pci/devices"
PCI_COMMAND = 4                  # the command register's offset in config space
PCI_COMMAND_MEMORY = 0x2         # its memory decoding bit
# Offset of a byte of the test's name in pci-testdev's BAR 0, once a test
# is chosen (writing its number at offset 0): a fixed value to read.
TESTDEV_NAME_BYTE = 16


def testdevs(root: str = PCI_DEVICES) -> list[str]:
    """The pci-testdev devices' sysfs directories, in bus order."""
    found = []
    for d in sorted(os.listdir(root)):
        path = os.path.join(root, d)
        ids = tuple(open(os.path.join(path, f)).read().strip() for f in ("vendor", "device"))
        if ids == TESTDEV:
            found.append(path)
    return found


def pci_command(dev: str, value: int | None = None) -> int:
    """The command register of dev (sysfs config file); written first
    when value is given."""
    with open(os.path.join(dev, "config"), "r+b", buffering=0) as f:
        if value is not None:
            f.seek(PCI_COMMAND)
            f.write(struct.pack("<H", value))
        f.seek(PCI_COMMAND)
        return struct.unpack("<H", f.read(2))[0]


def read_bar(bar: mmap.mmap, want: int, seconds: float, out: int) -> None:
    """Child: read the byte until the time is up; [reads, misreads] to out."""
    n = bad = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(1000):
            if bar[TESTDEV_NAME_BYTE] != want:
                bad += 1
        n += 1000
    os.write(out, json.dumps([n, bad]).encode())


def cmd_mmio(args) -> int:
    devs = testdevs()
    if len(devs) != 2:
        raise SystemExit(f"lab_probe: mmio needs two pci-testdev devices, the guest has "
                         f"{len(devs)} (QEMU option -device pci-testdev, twice)")
    toggled, target = devs
    cpus = kernel.online_cpus()
    if len(cpus) < 2:
        raise SystemExit("lab_probe: mmio needs two CPUs or more")
    pci_command(target, pci_command(target) | PCI_COMMAND_MEMORY)
    fd = os.open(os.path.join(target, "resource0"), os.O_RDWR | os.O_SYNC)
    bar = mmap.mmap(fd, mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    bar[0] = 0           # choose test 0: the BAR now reads as its header
    want = bar[TESTDEV_NAME_BYTE]
    readers = []
    for cpu in cpus[1:]:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                os.sched_setaffinity(0, {cpu})
                read_bar(bar, want, args.seconds, w)
            finally:
                os._exit(0)
        os.close(w)
        readers.append((pid, r))
    os.sched_setaffinity(0, {cpus[0]})
    base = pci_command(toggled)
    switches = 0
    end = time.monotonic() + args.seconds
    try:
        while time.monotonic() < end:
            pci_command(toggled, base & ~PCI_COMMAND_MEMORY)
            pci_command(toggled, base | PCI_COMMAND_MEMORY)
            switches += 2
    finally:
        pci_command(toggled, base)
    reads = misreads = 0
    for pid, r in readers:
        data = os.read(r, 100)
        os.waitpid(pid, 0)
        if not data:
            raise SystemExit(f"lab_probe: a reader (pid {pid}) reported nothing")
        n, bad = json.loads(data)
        reads, misreads = reads + n, misreads + bad
    return print_result({"seconds": args.seconds, "cpus": len(cpus), "value": want,
                         "switches": switches, "reads": reads, "misread": misreads})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="lab_probe.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    lo = sub.add_parser("loops")
    lo.add_argument("--busyloop", required=True)
    lo.add_argument("--iterations", type=int, required=True)
    lo.add_argument("--series", required=True, help="loop counts, e.g. 1,2,4,8")
    lo.add_argument("--pinned", type=int, help="pin every loop to this CPU")
    st = sub.add_parser("steal")
    st.add_argument("--label", required=True)
    st.add_argument("--seconds", type=float, required=True)
    st.add_argument("--busy", action="store_true")
    mm = sub.add_parser("mmio")
    mm.add_argument("--seconds", type=float, required=True)
    args = p.parse_args(argv)
    return {"loops": cmd_loops, "steal": cmd_steal, "mmio": cmd_mmio}[args.action](args)
