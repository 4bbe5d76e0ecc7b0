"""The guest's CPU topology as JSON, as sysfs and schedstat see it (guest
side): ``python3 guest/topology.py``. Boot tests compare it with the
preset that started the guest.
"""

from ..schedstat import cpumask_to_list, parse_schedstat
from . import kernel, print_result


def main():
    snap = parse_schedstat(kernel.read_schedstat())
    return print_result({
        **kernel.topology(),
        "schedstat_version": snap.version,
        "domains": {str(cpu): [cpumask_to_list(d.span) for d in stats.domains]
                    for cpu, stats in sorted(snap.cpus.items())},
    })
