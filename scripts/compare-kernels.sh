#!/usr/bin/env bash
# Kernel against kernel, in alternating boots (kernelab).
#
# usage: compare-kernels.sh [PRESET]
# environment: PAIR (which two kernels, below), BOOTS (per kernel, default
#              3), RUNS (per boot, default 5), GROUPS_LIST (default 2),
#              LOOPS (default 500), WORKLOAD, B_SETTING, SCHEDSTATS (1: on
#              in both, as in the A/B tables; default 0, the kernels'
#              default), QEMU_OPTS, OUT, FLAVOUR (PAIR=debian; cloud-amd64)
# PAIR=test (default): the pinned 6.12 without the series (A) against the
#   series with every feature off (B_SETTING default feat:NO_STEAL: nothing
#   is parked at boot, so that is every feature off), both test config.
# PAIR=debian: Debian's own linux-image of the pinned version (A) against
#   the series packaged by `make deb` with Debian's configuration (B, its
#   defaults unless B_SETTING says otherwise): what installing it changes.
#   Both are booted from their extracted packages (scripts/deb-kernel.sh).
# Results: OUT (default out/kernelab-PRESET/, out/kernelab-FLAVOUR-PRESET/
# for PAIR=debian): kab.json, report.txt, kab.png, and each boot's files in
# boot-N-SIDE/.
. "$(dirname "$0")/lib.sh"

preset=${1:-smp2}
case "${PAIR:-test}" in
test)
	stock=$("$REPO/scripts/stock-kernel.sh" test) a=stock
	series=$("$REPO/scripts/build-kernel.sh" test) b=series-off
	setting=${B_SETTING:-feat:NO_STEAL}
	out=${OUT:-$REPO/out/kernelab-$preset}
	;;
debian)
	stock=$("$REPO/scripts/deb-kernel.sh" stock "${FLAVOUR:-cloud-amd64}") a=debian
	series=$("$REPO/scripts/deb-kernel.sh" series "${FLAVOUR:-cloud-amd64}") b=sched-steal
	setting=${B_SETTING:-}
	out=${OUT:-$REPO/out/kernelab-${FLAVOUR:-cloud-amd64}-$preset}
	;;
*) die "PAIR must be test or debian, not '$PAIR'" ;;
esac
rm -rf "$out"
opts=()
[ -z "${QEMU_OPTS:-}" ] || opts=(--qemu-opts="$QEMU_OPTS")
[ "${SCHEDSTATS:-0}" = 1 ] || opts+=(--no-schedstat)
[ -z "$setting" ] || opts+=(--b-setting "$setting")
"$VENV/bin/kernelab" run --a-kernel "$stock" --a-name "$a" \
	--b-kernel "$series" --b-name "$b" \
	--preset "$preset" --boots "${BOOTS:-3}" --runs "${RUNS:-5}" \
	--workload "${WORKLOAD:-hackbench-process-pipe}" --param "${GROUPS_LIST:-2}" \
	--loops "${LOOPS:-500}" "${opts[@]}" --out "$out"
"$VENV/bin/kernelab" report "$out/kab.json" --plot "$out/kab.png" | tee "$out/report.txt"
log "results: $out/kab.json, $out/report.txt, $out/kab.png"
