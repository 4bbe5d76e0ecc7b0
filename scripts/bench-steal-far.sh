#!/usr/bin/env bash
# Stealing beyond the LLC (docs/results.md): each preset boots once and
# compares, with runs alternated and every run traced,
#   none  NO_STEAL                     no stealing
#   llc   STEAL                        inside the LLC only
#   node  STEAL + STEAL_NODE           also from the other LLCs of the node
#   numa  STEAL + STEAL_NODE + NUMA    also from other nodes
# as the pairs none/llc and llc/<each level the preset has>: llc2x4 (two
# LLCs, one node) llc/node, numa2 (an LLC per node) llc/numa, big32 (4
# LLCs on 2 nodes) llc/node and llc/numa. The figures to read are in the
# trace table of each report: %wasted_mach (idle while another CPU of
# the machine has a task waiting), x_llc and x_node (moves between LLCs,
# between nodes), back (moves undone within 10 ms), moves/task; and
# %find, far (steals beyond the LLC) in the schedstat table.
# QEMU_OPTS defaults to '-icount shift=0,sleep=off': time is then the
# guest's work, and a vCPU the host descheduled does not look busy.
# Results: out/steal-far-PRESET/<pair>.json, .txt (the report), .png
# (the runs) and .report.json.
# environment: RUNS (default 4), LOOPS (default 200; 100 on big32),
#              PRESETS (default "llc2x4 numa2 big32"), QEMU_OPTS
. "$(dirname "$0")/lib.sh"

none=feat:NO_STEAL,NO_STEAL_NODE,NO_STEAL_NUMA
llc=feat:STEAL,NO_STEAL_NODE,NO_STEAL_NUMA
node=feat:STEAL,STEAL_NODE,NO_STEAL_NUMA
numa=feat:STEAL,STEAL_NODE,STEAL_NUMA
runs=${RUNS:-4}
qemu_opts=${QEMU_OPTS--icount shift=0,sleep=off}
kernel=$("$REPO/scripts/build-kernel.sh" test)

for preset in ${PRESETS:-llc2x4 numa2 big32}; do
	case "$preset" in
	llc2x4) pairs="none:llc llc:node" groups=2,4 loops=${LOOPS:-200} ;;
	numa2) pairs="none:llc llc:numa" groups=2,4 loops=${LOOPS:-200} ;;
	big32) pairs="none:llc llc:node llc:numa" groups=4,8 loops=${LOOPS:-100} ;;
	*) die "no pairs defined for preset '$preset' (llc2x4, numa2, big32)" ;;
	esac
	out=$REPO/out/steal-far-$preset
	rm -rf "$out"
	mkdir -p "$out"
	guest="set -e"
	for pair in $pairs; do
		a=${pair%%:*} b=${pair##*:}
		guest+="
python3 -m schedsteal.abbench run --a ${!a} --a-name $a --b ${!b} --b-name $b \
	--workload hackbench-process-pipe --param $groups --loops $loops --runs $runs \
	--trace-dir \"\$SCHEDSTEAL_OUT/traces-$a-$b\" --out \"\$SCHEDSTEAL_OUT/$a-$b.json\""
	done
	log "booting $preset: pairs $pairs, hackbench $groups groups, $runs+$runs runs each"
	guest_run "$kernel" "$preset" "$out" "${TIMEOUT:-3000}" "$qemu_opts" "$guest"
	for pair in $pairs; do
		f=$out/${pair/:/-}
		"$VENV/bin/abbench" report "$f.json" --plot "$f.png" --json-out "$f.report.json" |
			tee "$f.txt"
	done
	log "results: $out/"
done
