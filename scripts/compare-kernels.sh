#!/usr/bin/env bash
# Kernel against kernel: the pinned 6.12 without the series (A) against the
# series with every feature off (B), in alternating boots (kernelab).
#
# usage: compare-kernels.sh [PRESET]
# environment: BOOTS (per kernel, default 3), RUNS (per boot, default 5),
#              GROUPS_LIST (default 2), LOOPS (default 500), WORKLOAD,
#              B_SETTING (default feat:NO_STEAL: nothing is parked at boot,
#              so that is every feature off), SCHEDSTATS (1: on in both,
#              as in the A/B tables; default 0, the kernels' default),
#              QEMU_OPTS, OUT
# Results: OUT (default out/kernelab-PRESET/): kab.json, report.txt, and
# each boot's files in boot-N-SIDE/.
. "$(dirname "$0")/lib.sh"

preset=${1:-smp2}
stock=$("$REPO/scripts/stock-kernel.sh" test)
series=$("$REPO/scripts/build-kernel.sh" test)
out=${OUT:-$REPO/out/kernelab-$preset}
rm -rf "$out"
qemu=()
[ -z "${QEMU_OPTS:-}" ] || qemu=(--qemu-opts="$QEMU_OPTS")
[ "${SCHEDSTATS:-0}" = 1 ] || qemu+=(--no-schedstat)
"$VENV/bin/kernelab" run --a-kernel "$stock" --a-name stock \
	--b-kernel "$series" --b-name series-off --b-setting "${B_SETTING:-feat:NO_STEAL}" \
	--preset "$preset" --boots "${BOOTS:-3}" --runs "${RUNS:-5}" \
	--workload "${WORKLOAD:-hackbench-process-pipe}" --param "${GROUPS_LIST:-2}" \
	--loops "${LOOPS:-500}" "${qemu[@]}" --out "$out"
"$VENV/bin/kernelab" report "$out/kab.json" | tee "$out/report.txt"
log "results: $out/kab.json, $out/report.txt"
