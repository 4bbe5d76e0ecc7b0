#!/usr/bin/env bash
# Benchmarks of SIS_SPARSE, the wakeup search over the LLC's set of idle
# CPUs (docs/results.md): A = NO_SIS_SPARSE (the scan), B = SIS_SPARSE,
# both with NO_STEAL: find_time also counts steal searches, whose waits
# on a remote rq lock would swamp the wakeup search. One boot per preset,
# runs alternated.
#   hackbench process/pipe, 2/4 groups, on llc32 (one LLC of 32 CPUs),
#   big32 (4 LLCs of 8) and llc2x4
#   wakeup-latency (p99) on the same presets
# The schedstat columns to read: %find (search time) and %found (searches
# that came back with an idle CPU). Under TCG's overcommit a vCPU can lose
# its host CPU in the middle of a search; QEMU_OPTS='-icount
# shift=0,sleep=off' makes guest time count instructions instead (the
# figures in docs/results.md). Results: out/sis-*/.
# environment: RUNS (default 6), LOOPS (default 100), PRESETS,
#              GROUPS_LIST (default 2,4), QEMU_OPTS
. "$(dirname "$0")/lib.sh"

export A=feat:NO_STEAL,NO_SIS_SPARSE B=feat:NO_STEAL,SIS_SPARSE
runs=${RUNS:-6}
for preset in ${PRESETS:-llc32 big32 llc2x4}; do
	RUNS=$runs LOOPS=${LOOPS:-100} GROUPS_LIST=${GROUPS_LIST:-2,4} \
		OUT=$REPO/out/sis-hackbench-$preset "$REPO/scripts/demo.sh" "$preset"
	WORKLOAD=wakeup-latency GROUPS_LIST=2 RUNS=$runs EXTRA="--runtime 2 --workers 2" \
		OUT=$REPO/out/sis-latency-$preset "$REPO/scripts/demo.sh" "$preset"
done
