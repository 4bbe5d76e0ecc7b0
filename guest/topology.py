#!/usr/bin/env python3
"""Print the guest's CPU topology as JSON, as sysfs and schedstat see it.

Runs in the guest (standard library only). Boot tests compare it with the
preset that started the guest.
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
from schedsteal.schedstat import cpumask_to_list, parse_cpulist, parse_schedstat  # noqa: E402


def read(path):
    with open(path) as f:
        return f.read()


def groups(pattern):
    """Distinct CPU sets found in the files matching pattern, sorted."""
    return sorted({tuple(parse_cpulist(read(p))) for p in glob.glob(pattern)})


def llc_index(cpu):
    """The cache index of the last level (highest level, unified)."""
    best = None
    for d in glob.glob(f"/sys/devices/system/cpu/cpu{cpu}/cache/index*"):
        level = int(read(f"{d}/level"))
        if best is None or level > best[0]:
            best = (level, d)
    return best[1] if best else None


def main():
    online = parse_cpulist(read("/sys/devices/system/cpu/online"))
    llcs = set()
    for cpu in online:
        d = llc_index(cpu)
        if d:
            llcs.add(tuple(parse_cpulist(read(f"{d}/shared_cpu_list"))))
    snap = parse_schedstat(read("/proc/schedstat"))
    domains = {
        str(cpu): [cpumask_to_list(d.span) for d in stats.domains]
        for cpu, stats in sorted(snap.cpus.items())
    }
    json.dump({
        "cpus": online,
        "smt_groups": groups("/sys/devices/system/cpu/cpu*/topology/thread_siblings_list"),
        "llc_groups": sorted(llcs),
        "numa_nodes": groups("/sys/devices/system/node/node*/cpulist"),
        "schedstat_version": snap.version,
        "domains": domains,
    }, sys.stdout)
    print()


if __name__ == "__main__":
    main()
