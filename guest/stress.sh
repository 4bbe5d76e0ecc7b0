#!/bin/sh
# Stress the scheduler while its configuration changes under it.
# usage: stress.sh ROUNDS
#
# In parallel:
#   - hackbench runs back to back, in the root cgroup and in a cgroup
#     throttled by cpu.max to 20% of one CPU;
#   - every CPU but 0 is hot-unplugged and replugged, ROUNDS times, and
#     the STEAL sched_feature is toggled at each step.
# Exits non-zero if any hackbench run fails, or if a CPU could not be
# brought back. The host scans the kernel log for splats.
rounds=${1:-5}
features=/sys/kernel/debug/sched/features
cg=/sys/fs/cgroup
mountpoint -q $cg || mount -t cgroup2 none $cg
echo +cpu >$cg/cgroup.subtree_control
mkdir -p $cg/stress
echo "20000 100000" >$cg/stress/cpu.max
echo 1 >/proc/sys/kernel/sched_schedstats

bench() { # bench NAME RUNS: hackbench RUNS times, stop at the first failure
	i=0
	while [ $i -lt "$2" ]; do
		hackbench -P -g 2 -l 100 >/dev/null || { echo "$1: hackbench failed" >&2; exit 1; }
		i=$((i + 1))
	done
	echo "$1: $2 runs ok"
}

bench root 6 &
root=$!
sh -c "echo \$\$ >$cg/stress/cgroup.procs && i=0; while [ \$i -lt 4 ]; do hackbench -P -g 1 -l 100 >/dev/null || exit 1; i=\$((i+1)); done; echo throttled: 4 runs ok" &
throttled=$!

cpus=$(ls -d /sys/devices/system/cpu/cpu[1-9]* 2>/dev/null)
r=0
while [ $r -lt "$rounds" ]; do
	for c in $cpus; do
		echo 0 >"$c/online" || { echo "offline $c failed" >&2; exit 1; }
		echo NO_STEAL >$features
		echo 1 >"$c/online" || { echo "online $c failed" >&2; exit 1; }
		echo STEAL >$features
	done
	r=$((r + 1))
done
echo "hotplug: $rounds rounds over $(echo $cpus | wc -w) CPUs ok"

status=0
wait $root || status=1
wait $throttled || status=1
echo "throttled periods: $(grep nr_throttled $cg/stress/cpu.stat)"
exit $status
