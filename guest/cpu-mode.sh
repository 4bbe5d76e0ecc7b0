#!/bin/sh
# Put the guest's CPUs in one of the modes the parking benchmarks compare.
# usage: cpu-mode.sh all | park LIST | offline LIST
#   all           every CPU online and unparked
#   park LIST     every CPU online, LIST parked
#   offline LIST  nothing parked, LIST hot-unplugged
# Used as an abbench "sh:" setting, so it must be idempotent.
set -e
sys=/sys/devices/system/cpu
mode=$1
list=$2

cpus_of() { # expand a cpulist (no spaces) into CPU numbers
	echo "$1" | tr ',' '\n' | while IFS=- read -r a b; do
		[ -n "$a" ] || continue
		seq "$a" "${b:-$a}"
	done
}
online_all() {
	for f in $sys/cpu[0-9]*/online; do
		[ "$(cat "$f")" = 1 ] || echo 1 >"$f"
	done
}

case "$mode" in
all)
	online_all
	echo >$sys/parked
	;;
park)
	online_all
	echo "$list" >$sys/parked
	;;
offline)
	echo >$sys/parked
	online_all
	for c in $(cpus_of "$list"); do
		echo 0 >$sys/cpu$c/online
	done
	;;
*)
	echo "usage: cpu-mode.sh all | park LIST | offline LIST" >&2
	exit 2
	;;
esac
