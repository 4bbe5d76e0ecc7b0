#!/usr/bin/env bash
# Baseline figures of the unpatched scheduler (docs/results.md): hackbench
# process mode, 1/2/4 groups, on smp2 and smt4, as an A/A comparison
# (both settings "none"), which also shows how noisy this machine is.
# Results: out/baseline-PRESET/.
. "$(dirname "$0")/lib.sh"

for preset in ${PRESETS:-smp2 smt4}; do
	A=none B=none RUNS=${RUNS:-5} LOOPS=${LOOPS:-500} OUT=$REPO/out/baseline-$preset \
		"$REPO/scripts/demo.sh" "$preset"
done
