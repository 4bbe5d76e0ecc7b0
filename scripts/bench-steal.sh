#!/usr/bin/env bash
# Benchmarks of the steal series (docs/results.md): A = NO_STEAL,
# B = STEAL, in one boot per preset, runs alternated.
#   hackbench process/pipe, 1/2/4 groups, on smp2, smt4, llc2x4
#   stress-ng cpu (throughput) and wakeup-latency (p99) on smt4
# Results: out/steal-*/ (JSON, PNG, report.json, guest log).
# environment: RUNS (default 10), LOOPS (default 200), PRESETS
. "$(dirname "$0")/lib.sh"

export A=feat:NO_STEAL B=feat:STEAL
runs=${RUNS:-10}
for preset in ${PRESETS:-smp2 smt4 llc2x4}; do
	RUNS=$runs LOOPS=${LOOPS:-200} GROUPS_LIST=1,2,4 OUT=$REPO/out/steal-hackbench-$preset \
		"$REPO/scripts/demo.sh" "$preset"
done
WORKLOAD=stress-ng-cpu GROUPS_LIST=4 RUNS=$runs EXTRA="--runtime 3" \
	OUT=$REPO/out/steal-stressng-smt4 "$REPO/scripts/demo.sh" smt4
WORKLOAD=wakeup-latency GROUPS_LIST=2 RUNS=$runs EXTRA="--runtime 2 --workers 2" \
	OUT=$REPO/out/steal-latency-smt4 "$REPO/scripts/demo.sh" smt4
