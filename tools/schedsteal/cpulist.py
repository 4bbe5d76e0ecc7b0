"""CPU list formats (pure parsing: both halves use it).

``parse_cpulist`` / ``format_cpulist``: sysfs lists such as ``0-3,8``.
"""
from __future__ import annotations


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8\\n' -> [0, 1, 2, 3, 8] (sysfs cpulist format, the inverse of
    format_cpulist)."""
    cpus = []
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus += range(int(lo), int(hi or lo) + 1)
    return cpus


def format_cpulist(cpus) -> str:
    """[0, 1, 2, 3, 8] -> '0-3,8'."""
    out, cpus = [], sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)
