"""The guest's CPU topology as JSON, as sysfs and schedstat see it (guest
side): ``python3 guest/topology.py``. Boot tests compare it with the
preset that started the guest.
"""

from ..schedstat import cpumask_to_list, parse_schedstat
from . import kernel, print_result


def main():
    snap = parse_schedstat(kernel.read_schedstat())
    return print_result({
        "cpus": kernel.online_cpus(),
        "smt_groups": kernel.cpu_groups(f"{kernel.CPU_SYSFS}/cpu*/topology/thread_siblings_list"),
        "llc_groups": sorted(set(kernel.llc_of_cpus().values())),
        "numa_nodes": kernel.cpu_groups("/sys/devices/system/node/node*/cpulist"),
        "schedstat_version": snap.version,
        "domains": {str(cpu): [cpumask_to_list(d.span) for d in stats.domains]
                    for cpu, stats in sorted(snap.cpus.items())},
    })
