"""sched-steal host and guest tools.

Modules that run inside the guest (schedstat, abbench's runner, workloads)
use only the standard library: the guest sees the host's Python through
virtme-ng but not necessarily the project's virtualenv.
"""
