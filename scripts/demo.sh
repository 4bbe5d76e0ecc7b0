#!/usr/bin/env bash
# The main job: build the series, boot it on a preset, run hackbench under
# settings A and B alternately in one boot, print the comparison table.
#
# usage: demo.sh [PRESET]     environment: A, B, RUNS, GROUPS_LIST, LOOPS, OUT
# A and B default to NO_STEAL / STEAL when the kernel has the STEAL feature,
# else to SIS_UTIL / NO_SIS_UTIL (a stock 6.12 idle-search switch).
# Results (JSON, PNG, guest dmesg) go to OUT (default out/demo-PRESET/).
. "$(dirname "$0")/lib.sh"

preset=${1:-smp2}
runs=${RUNS:-5}
groups=${GROUPS_LIST:-1,2,4}
loops=${LOOPS:-200}
py=$VENV/bin/python
export PYTHONPATH=$REPO/tools

kernel=$("$REPO/scripts/build-kernel.sh" test | tail -n 1)
out=${OUT:-$REPO/out/demo-$preset}
rm -rf "$out"
mkdir -p "$out"

guest=$(cat <<GUEST
set -e
if grep -qw STEAL /sys/kernel/debug/sched/features; then a=feat:NO_STEAL b=feat:STEAL
else a=feat:SIS_UTIL b=feat:NO_SIS_UTIL; fi
python3 -m schedsteal.abbench run --a "${A:-\$a}" --b "${B:-\$b}" \
	--workload hackbench-process-pipe --param $groups --loops $loops \
	--runs $runs --out "\$SCHEDSTEAL_OUT/ab.json"
GUEST
)
log "booting $preset: hackbench $groups groups x $runs runs per setting"
"$py" -m schedsteal.vm run --kernel "$kernel" --preset "$preset" \
	--keep "$out" --timeout 3000 -- "$guest" >"$out/guest.log" 2>&1 || {
	tail -n 40 "$out/guest.log" >&2
	die "guest run failed (full log: $out/guest.log)"
}
"$py" -m schedsteal.abbench report "$out/ab.json" --plot "$out/ab.png"
"$py" -m schedsteal.abbench report "$out/ab.json" --json >"$out/report.json"
log "results: $out/ab.json, $out/ab.png, $out/report.json"
