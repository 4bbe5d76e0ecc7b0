#!/usr/bin/env bash
# Benchmarks of the parking series (docs/results.md), on overcommit8 (8
# vCPUs on this 2-core host), CPUs $PARK (default 2-7):
#   hackbench process/pipe 1/2/4 groups, every CPU in use (A) vs parked (B),
#     then parked (A) vs hot-unplugged (B), each pair alternated in one boot;
#   stress-ng cpu throughput (8 workers), every CPU (A) vs parked (B);
#   the sysfs write and how long tasks stay on the parked CPUs after it,
#     against the time to hot-unplug and replug the same CPUs.
# Results: out/park-*/.
# environment: RUNS (default 10), LOOPS (default 200), PARK (default 2-7),
#   TIMING_RUNS (park/unpark write timings, default 8)
. "$(dirname "$0")/lib.sh"

runs=${RUNS:-10}
park=${PARK:-2-7}
truns=${TIMING_RUNS:-8}
mode="sh:guest/cpu-mode.sh"

A="$mode all" B="$mode park $park" RUNS=$runs LOOPS=${LOOPS:-200} GROUPS_LIST=1,2,4 \
	OUT=$REPO/out/park-hackbench-all-vs-parked "$REPO/scripts/demo.sh" overcommit8
A="$mode park $park" B="$mode offline $park" RUNS=$runs LOOPS=${LOOPS:-200} GROUPS_LIST=1,2,4 \
	OUT=$REPO/out/park-hackbench-parked-vs-offline "$REPO/scripts/demo.sh" overcommit8
A="$mode all" B="$mode park $park" WORKLOAD=stress-ng-cpu GROUPS_LIST=8 RUNS=$runs \
	EXTRA="--runtime 3" OUT=$REPO/out/park-stressng "$REPO/scripts/demo.sh" overcommit8

out=$REPO/out/park-timing
rm -rf "$out"
mkdir -p "$out"
kernel=$("$REPO/scripts/build-kernel.sh" test)
# Both under 8 CPU hogs (the evacuate probe's default): the same load.
log "booting overcommit8: park/unpark timings ($truns runs) and hotplug timings (5 runs)"
guest_run "$kernel" overcommit8 "$out" 5400 "" \
	"for i in \$(seq $truns); do python3 guest/park_probe.py evacuate --park $park || exit 1; done
python3 guest/park_probe.py hotplug --cpus $park --hog 8 --repeat 5"
"$VENV/bin/parktiming" "$out/guest.log" | tee "$out/timing.txt"
