"""Keep device interrupts on the preferred CPUs: ``schedsteal-irq-preferred``.

Upstream leaves interrupts on non-preferred CPUs to user space ("irqbalance
could read the mask"); irqbalance does not read it yet. This is the small
agent an operator's system can run in the guest instead, stdlib only:

    schedsteal-irq-preferred [--once] [--interval S] [--json]

It reads /sys/devices/system/cpu/preferred and, for every interrupt whose
/proc/irq/N/smp_affinity_list reaches a CPU outside it, writes the part
of its affinity that is preferred (all preferred CPUs when no part is).
New interrupts get the preferred CPUs through /proc/irq/default_smp_affinity.
Interrupts the kernel does not let move (per-CPU ones, managed ones: the
write fails with EIO) are listed as refused and left alone.

Without --once it keeps running and polls the file every --interval
seconds (sysfs sends no change notification for it): when CPUs come back,
an interrupt it narrowed (and the default) gets back the affinity it had
before, once all of that is preferred again (an affinity that named a
CPU now offline stays narrowed). An affinity someone else changes after
the agent narrowed it is theirs: the agent narrows that one next and
restores it later. It changes nothing else; stopping it leaves the
affinities as they are.

Output: one line on stderr per pass that changed something; with --json,
one JSON object per such pass on stdout (--once: exactly one). Exit 0, 1
on a failure to read the preferred set, 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import errno
import glob
import json
import os
import sys
import time

from ..cli import ToolParser
from ..cpulist import format_cpulist, parse_cpulist
from ..schedstat import cpumask_to_list
from . import kernel

PREFERRED = "/sys/devices/system/cpu/preferred"
IRQ_DIR = "/proc/irq"


def cpumask_hex(cpus) -> str:
    """A CPU set in the kernel's cpumask format: hex, in 32-bit words
    separated by commas, most significant first."""
    value = 0
    for c in cpus:
        value |= 1 << c
    words = []
    while True:
        words.append(f"{value & 0xffffffff:08x}")
        value >>= 32
        if not value:
            break
    return ",".join(reversed(words))


class Agent:
    """One pass per ``apply()``. `saved` remembers, for each interrupt this
    agent narrowed ("default" for default_smp_affinity), the affinity it
    had before and the one the agent wrote: {key: (original, written)}."""

    def __init__(self, preferred: str = PREFERRED, irq_dir: str = IRQ_DIR):
        self.preferred_path = preferred
        self.irq_dir = irq_dir
        self.saved: dict[str, tuple[frozenset, frozenset]] = {}

    def preferred(self) -> set[int]:
        cpus = set(parse_cpulist(kernel.read(self.preferred_path).strip()))
        if not cpus:
            raise ValueError(f"{self.preferred_path} is empty")
        return cpus

    def _targets(self):
        """(key, path, read, format) of every interrupt, then the default."""
        def read_list(path):
            return frozenset(parse_cpulist(kernel.read(path).strip()))

        def read_mask(path):
            return frozenset(cpumask_to_list(kernel.read(path).strip()))

        for irq_path in sorted(glob.glob(os.path.join(self.irq_dir, "[0-9]*")),
                               key=lambda p: int(os.path.basename(p))):
            yield (os.path.basename(irq_path), os.path.join(irq_path, "smp_affinity_list"),
                   read_list, lambda cpus: format_cpulist(sorted(cpus)))
        default = os.path.join(self.irq_dir, "default_smp_affinity")
        if os.path.exists(default):
            yield "default", default, read_mask, cpumask_hex

    def apply(self) -> dict:
        """Move what may move; report {preferred, moved: {irq: [old, new]},
        restored, refused: {irq: errno name}} (cpulists)."""
        pref = frozenset(self.preferred())
        out = {"preferred": format_cpulist(sorted(pref)), "moved": {},
               "restored": {}, "refused": {}}
        seen = set()
        for key, path, read, fmt in self._targets():
            try:
                cur = read(path)
            except (OSError, ValueError):
                self.saved.pop(key, None)
                continue        # gone meanwhile, or nothing to read
            seen.add(key)
            orig, written = self.saved.get(key, (None, None))
            if orig is not None and cur != written:
                # Someone else set it since (an operator; the kernel when a
                # CPU went offline): theirs is the affinity to keep.
                del self.saved[key]
                orig = None
            base = orig if orig is not None else cur
            target = (base & pref) or pref
            back = orig is not None and target == base
            if target == cur:
                if back:
                    del self.saved[key]     # it is as it was before us
                continue
            try:
                kernel.write(path, fmt(target) + "\n")
            except OSError as exc:
                out["refused"][key] = errno.errorcode.get(exc.errno, str(exc.errno))
                continue
            if back:
                del self.saved[key]
            else:
                self.saved[key] = (base, target)
            out["restored" if back else "moved"][key] = [format_cpulist(sorted(cur)),
                                                         format_cpulist(sorted(target))]
        # An interrupt that went away may come back with its number reused.
        for key in set(self.saved) - seen:
            del self.saved[key]
        return out


def main(argv: list[str] | None = None) -> int:
    p = ToolParser(prog="schedsteal-irq-preferred",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--once", action="store_true", help="one pass, then exit")
    p.add_argument("--interval", type=float, default=1.0,
                   help="seconds between passes (default 1)")
    p.add_argument("--json", action="store_true", help="JSON per pass on stdout")
    p.add_argument("--preferred", default=PREFERRED, help=argparse.SUPPRESS)
    p.add_argument("--irq-dir", default=IRQ_DIR, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not 0.01 <= args.interval <= 3600:
        p.error(f"--interval {args.interval}: must be within 0.01-3600 seconds")
    agent = Agent(args.preferred, args.irq_dir)
    refused_seen: set[str] = set()     # reported once, not every pass
    while True:
        try:
            out = agent.apply()
        except (OSError, ValueError) as exc:
            print(f"schedsteal-irq-preferred: error: {exc}", file=sys.stderr)
            return 1
        new_refusals = set(out["refused"]) - refused_seen
        refused_seen |= set(out["refused"])
        changed = out["moved"] or out["restored"] or new_refusals
        if changed or args.once:
            print(f"irq-preferred: preferred {out['preferred']}: moved {len(out['moved'])}, "
                  f"restored {len(out['restored'])}, refused {len(out['refused'])}",
                  file=sys.stderr)
            if args.json:
                print(json.dumps(out), flush=True)
        if args.once:
            return 0
        try:
            time.sleep(args.interval)   # the poll period: sysfs cannot notify
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    raise SystemExit(main())
