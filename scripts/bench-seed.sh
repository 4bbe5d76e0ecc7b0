#!/usr/bin/env bash
# The design's tables under the parallel clock (issue 27, docs/results.md):
# does stealing pay on parallel CPUs, on the machine shapes the design
# measured? One boot per shape on the lab QEMU (`make qemu`) with
# `--clock parallel`: every vCPU runs as if it had a CPU of its own, so a
# guest's time is parallel time, whatever else the host runs. Each boot
# runs its pairs one after the other, runs alternated (ABBA):
#   llc20   1 LLC of 10 cores x 2 threads (the design's 20-CPU machine)
#           none/steal, hackbench process sockets, g 1,2,3,4,8;
#           relax/steal sockets g 1,2,4 (stealing or newidle balance?);
#           none/steal process pipe, g 1,2,3,4,8
#   numa40  2 nodes of 10 x 2 (the design's 40-CPU machine)
#           none/steal sockets g 1,2,3,4,8; llc/numa sockets g 2,4
#   llc2x4  2 LLCs of 4 (the arm64 board of the design's thread)
#           none/steal sockets g 1,2,3,4 (the groups of the reply);
#           none/steal pipe g 1,2,3,4
#   llc44   1 LLC of 22 x 2 (the design's 44-CPU machine); not in the
#           default SHAPES for its host time (44 vCPUs on one host thread:
#           about 45 min, docs/results.md)
#           none/steal sockets g 1,2,3,4,8; none/steal pipe g 1,2,4
# where none = NO_STEAL, steal = STEAL (LLC only), relax = NO_STEAL +
# NI_RELAX, llc = STEAL alone, numa = STEAL + STEAL_NODE + STEAL_NUMA.
# The last pair of each boot that is not traced is followed by one traced
# round of none/steal (the decision columns: %wasted_llc, moves).
# The parallel clock runs a whole guest on one host thread: JOBS guests
# (default 2, one per host core) run at once, and the host's load does not
# change what a guest measures, only how long it takes.
# Results: out/seed-SHAPE/<pair>-<workload>-g<groups>.{json,txt,png,report.json},
# and `schedsteal-seed` prints the design's figures beside ours.
# environment: RUNS (default 6), LOOPS (default 500), SHAPES (default
#              "llc20 numa40 llc2x4"), JOBS (default 2), TIMEOUT (s),
#              PAIRS (instead of each shape's own pairs: cells separated
#              by ";", each "A:B WORKLOAD GROUPS", e.g.
#              "none:steal pipe 4,8"), TRACED (default 1; 0: no traced
#              round; with PAIRS, out/seed-SHAPE keeps the files of
#              earlier boots: a file's name has its pair, workload, groups)
. "$(dirname "$0")/lib.sh"

runs=${RUNS:-6}
loops=${LOOPS:-500}
jobs=${JOBS:-2}
none=feat:NO_STEAL,NO_NI_RELAX,NO_STEAL_NODE,NO_STEAL_NUMA
steal=feat:STEAL,NO_NI_RELAX,NO_STEAL_NODE,NO_STEAL_NUMA
relax=feat:NO_STEAL,NI_RELAX,NO_STEAL_NODE,NO_STEAL_NUMA
llc=$steal
numa=feat:STEAL,NO_NI_RELAX,STEAL_NODE,STEAL_NUMA

# The cells a shape runs: "A:B WORKLOAD GROUPS;..." (PAIRS overrides).
cells_of() { # SHAPE
	case "$1" in
	llc20) echo "none:steal sockets 1,2,3,4,8;relax:steal sockets 1,2,4;none:steal pipe 1,2,3,4,8" ;;
	numa40) echo "none:steal sockets 1,2,3,4,8;llc:numa sockets 2,4" ;;
	llc2x4) echo "none:steal sockets 1,2,3,4;none:steal pipe 1,2,3,4" ;;
	llc44) echo "none:steal sockets 1,2,3,4,8;none:steal pipe 1,2,4" ;;
	*) return 1 ;;
	esac
}

# Bad input is refused before anything is built or booted.
for s in ${SHAPES:-llc20 numa40 llc2x4}; do
	cells_of "$s" >/dev/null || die "SHAPES: no pairs for shape '$s' (llc20, numa40, llc2x4, llc44)"
done
if [ -n "${PAIRS:-}" ]; then
	IFS=';' read -ra cells <<<"$PAIRS"
	for cell in "${cells[@]}"; do
		# shellcheck disable=SC2086 # "A:B WORKLOAD GROUPS": three words
		set -- $cell
		[ $# = 3 ] && [[ $1 =~ ^(none|steal|relax|llc|numa):(none|steal|relax|llc|numa)$ ]] &&
			[[ $2 =~ ^(sockets|pipe)$ ]] && [[ $3 =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
			die "PAIRS: bad cell '$cell' (want 'A:B WORKLOAD GROUPS', e.g. 'none:steal pipe 4,8'; A, B: none, steal, relax, llc, numa; WORKLOAD: sockets, pipe)"
	done
fi
case "${TRACED:-1}" in 0 | 1) ;; *) die "TRACED: 0 or 1, not '$TRACED'" ;; esac

kernel=$("$REPO/scripts/build-kernel.sh" test)
qemu=$("$REPO/scripts/build-qemu.sh" | tail -n 1)

# One abbench run in the guest: PAIR WORKLOAD GROUPS [EXTRA]
pair_cmd() {
	local a=${1%%:*} b=${1##*:}
	printf '%s\n' "python3 -m schedsteal.abbench run --a ${!a} --a-name $a --b ${!b} --b-name $b \
	--workload hackbench-process-$2 --param $3 --loops $loops --runs $runs ${4:-} \
	--out \"\$SCHEDSTEAL_OUT/$a-$b-$2-g${3//,/-}.json\""
}

shape() { # SHAPE
	local preset=$1 out=$REPO/out/seed-$1 guest="set -e" f
	local cells cell
	cells=${PAIRS:-$(cells_of "$preset")}
	IFS=';' read -ra cells <<<"$cells"
	for cell in "${cells[@]}"; do
		# shellcheck disable=SC2086 # "A:B WORKLOAD GROUPS", checked above
		set -- $cell
		guest+=$'\n'$(pair_cmd "$1" "$2" "$3")
	done
	# One traced round for the decision columns (the runs above are not
	# traced: a trace of 20-40 vCPUs costs more host time than the run).
	[ "${TRACED:-1}" = 0 ] ||
		guest+=$'\n'"python3 -m schedsteal.abbench run --a $none --a-name none \
	--b $steal --b-name steal --workload hackbench-process-sockets --param 2 \
	--loops $loops --runs 1 --trace-dir \"\$SCHEDSTEAL_OUT/traces\" \
	--out \"\$SCHEDSTEAL_OUT/traced-none-steal-sockets.json\""
	[ -n "${PAIRS:-}" ] || rm -rf "$out"
	mkdir -p "$out"
	log "$preset: booting (parallel clock), $runs+$runs runs a cell, $loops loops"
	"$VENV/bin/schedsteal-vm" run --kernel "$kernel" --preset "$preset" --qemu "$qemu" \
		--clock parallel --keep "$out" --timeout "${TIMEOUT:-14400}" -- "$guest" \
		>"$out/guest.log" 2>&1 || {
		tail -n 40 "$out/guest.log" >&2
		die "$preset: guest run failed (full log: $out/guest.log)"
	}
	for f in "$out"/*.json; do
		case "$f" in */lab.json | *.report.json) continue ;; esac
		"$VENV/bin/abbench" report "$f" --plot "${f%.json}.png" \
			--json-out "${f%.json}.report.json" >"${f%.json}.txt"
	done
	log "$preset: done ($out)"
}

pids=()
for s in ${SHAPES:-llc20 numa40 llc2x4}; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
	shape "$s" &
	pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ "$status" = 0 ] || die "a shape failed (see above)"
"$VENV/bin/schedsteal-seed" "$REPO"/out/seed-*
