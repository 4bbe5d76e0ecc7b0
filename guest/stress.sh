#!/bin/sh
# Stress the scheduler while its configuration changes under it.
# usage: stress.sh ROUNDS [park]
#
# In parallel:
#   - hackbench runs back to back, in the root cgroup and in a cgroup
#     throttled by cpu.max to 20% of one CPU;
#   - every CPU but 0 is hot-unplugged and replugged, ROUNDS times, and
#     the STEAL and SIS_SPARSE sched_features are toggled at each step
#     (SIS_SPARSE on while a CPU is offline: the idle set is rebuilt with
#     the domains while wakeups read it, and seeded at each switch-on);
#   - with "park", the parked set is rewritten in a loop, cycling through
#     sets of CPUs other than 0 (a set holding a CPU that is offline at
#     that moment is refused, which is counted, not an error), and two
#     SCHED_DEADLINE tasks run throughout: a busy loop (throttled and
#     replenished every period) and one that sleeps and wakes.
# Exits non-zero if any hackbench run fails, if a CPU could not be brought
# back, or if no park write succeeded. The host scans the kernel log for
# splats.
rounds=${1:-5}
park=${2:-}
parked=/sys/devices/system/cpu/parked
stop=/tmp/stress.stop
rm -f $stop
# Features, schedstats and the cgroup through schedsteal.guest.kernel
# (vm-init.sh puts tools/ on PYTHONPATH); hotplug and park writes stay in
# shell so that they come as fast as a storm should.
kernel="python3 -m schedsteal.guest.kernel"
cg=$($kernel cgroup stress "20000 100000") || exit 1
$kernel schedstats || exit 1

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
sh -c "echo \$\$ >$cg/cgroup.procs && i=0; while [ \$i -lt 4 ]; do hackbench -P -g 1 -l 100 >/dev/null || exit 1; i=\$((i+1)); done; echo throttled: 4 runs ok" &
throttled=$!

storm() { # rewrite the parked set until the hotplug loop is done
	ok=0 refused=0
	while [ ! -e $stop ]; do
		for set in 1 2-3 1,3 "" 2 1-2 3 ""; do
			if echo "$set" >$parked 2>/dev/null; then ok=$((ok + 1))
			else refused=$((refused + 1)); fi
		done
	done
	echo "" >$parked
	echo "park: $ok writes ok, $refused refused"
	[ $ok -gt 0 ]
}
if [ "$park" = park ]; then
	# 2 ms every 20 ms each. The sleeper wakes every 10 ms without
	# forking (a deadline task may not fork).
	dl="chrt -d --sched-runtime 2000000 --sched-deadline 20000000 --sched-period 20000000 0"
	$dl sh -c "while [ ! -e $stop ]; do :; done" &
	dlbusy=$!
	$dl python3 -c "import os, time
while not os.path.exists('$stop'): time.sleep(0.01)" &
	dlsleep=$!
	storm &
	stormer=$!
fi

cpus=$(ls -d /sys/devices/system/cpu/cpu[1-9]* 2>/dev/null)
r=0
while [ $r -lt "$rounds" ]; do
	for c in $cpus; do
		echo 0 >"$c/online" || { echo "offline $c failed" >&2; exit 1; }
		$kernel feature NO_STEAL SIS_SPARSE
		echo 1 >"$c/online" || { echo "online $c failed" >&2; exit 1; }
		$kernel feature STEAL NO_SIS_SPARSE
	done
	r=$((r + 1))
done
echo "hotplug: $rounds rounds over $(echo $cpus | wc -w) CPUs ok"
touch $stop

status=0
[ -z "${stormer:-}" ] || wait $stormer || status=1
if [ -n "${dlbusy:-}" ]; then
	if wait $dlbusy && wait $dlsleep; then echo "deadline: 2 tasks ok"
	else echo "deadline: a task failed" >&2; status=1; fi
fi
wait $root || status=1
wait $throttled || status=1
echo "throttled periods: $(grep nr_throttled $cg/cpu.stat)"
exit $status
