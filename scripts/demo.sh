#!/usr/bin/env bash
# The main job: build the series, boot it on a preset, run hackbench under
# settings A and B alternately in one boot, print the comparison table.
#
# usage: demo.sh [PRESET]
# environment: A, B, RUNS, GROUPS_LIST (the --param list), LOOPS, OUT,
#              WORKLOAD (default hackbench-process-pipe), EXTRA (more
#              abbench run options, e.g. --trace-dir '$SCHEDSTEAL_OUT/traces'),
#              QEMU_OPTS (e.g. '-icount shift=0,sleep=off': docs/steal.md)
# A and B default to NO_STEAL / STEAL when the kernel has the STEAL feature,
# else to SIS_UTIL / NO_SIS_UTIL (a stock 6.12 idle-search switch).
# Results (JSON, PNG, guest dmesg) go to OUT (default out/demo-PRESET/).
. "$(dirname "$0")/lib.sh"

preset=${1:-smp2}
runs=${RUNS:-5}
groups=${GROUPS_LIST:-1,2,4}
loops=${LOOPS:-200}

workload=${WORKLOAD:-hackbench-process-pipe}
kernel=$("$REPO/scripts/build-kernel.sh" test)
# The latency workload is ours: build it where the guest can see it.
mkdir -p "$CACHE/bin"
if [ "$REPO/guest/wakeup-latency.c" -nt "$CACHE/bin/wakeup-latency" ]; then
	gcc -O2 -Wall -pthread -o "$CACHE/bin/wakeup-latency" "$REPO/guest/wakeup-latency.c"
fi
case "$workload" in
hackbench* | perf-messaging*) opts="--loops $loops" ;;
*) opts="" ;;
esac
out=${OUT:-$REPO/out/demo-$preset}
rm -rf "$out"
mkdir -p "$out"

guest=$(cat <<GUEST
set -e
export SCHEDSTEAL_WAKEUP_LATENCY=$CACHE/bin/wakeup-latency
if grep -qwE "(NO_)?STEAL" /sys/kernel/debug/sched/features; then a=feat:NO_STEAL b=feat:STEAL
else a=feat:SIS_UTIL b=feat:NO_SIS_UTIL; fi
python3 -m schedsteal.abbench run --a "${A:-\$a}" --b "${B:-\$b}" \
	--workload $workload --param $groups $opts \
	--runs $runs ${EXTRA:-} --out "\$SCHEDSTEAL_OUT/ab.json"
GUEST
)
log "booting $preset: $workload $groups x $runs runs per setting"
guest_run "$kernel" "$preset" "$out" "${TIMEOUT:-3000}" "${QEMU_OPTS:-}" "$guest"
"$VENV/bin/abbench" report "$out/ab.json" --plot "$out/ab.png" --json-out "$out/report.json"
log "results: $out/ab.json, $out/ab.png, $out/report.json"
