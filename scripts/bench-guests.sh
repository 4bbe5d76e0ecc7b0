#!/usr/bin/env bash
# The parking design's own experiment at this host's scale (issue 25,
# docs/results.md): pairs of guests on the lab QEMU, linked pair by pair,
# a request/response load (guest/rr.c) alone and with stress-ng workers in
# every guest, under every vCPU / a static preferred set / the steal
# governor (schedsteal-guests). Results, table and plot: out/guests/.
# environment: PAIRS (default 1), VCPUS (3), STATIC (0), WORKERS (16),
#   SECONDS_PER_CELL (20; bash owns SECONDS), SETTLE (5), RUNS (4), STRESS (0,2)
. "$(dirname "$0")/lib.sh"

kernel=$("$REPO/scripts/build-kernel.sh" test)
qemu=$("$REPO/scripts/build-qemu.sh" | tail -n 1)
out=$REPO/out/guests
rm -rf "$out"
mkdir -p "$out"
"$VENV/bin/schedsteal-guests" run --kernel "$kernel" --qemu "$qemu" \
	--pairs "${PAIRS:-1}" --vcpus "${VCPUS:-3}" --static "${STATIC:-0}" \
	--workers "${WORKERS:-16}" --seconds "${SECONDS_PER_CELL:-20}" --settle-s "${SETTLE:-5}" \
	--runs "${RUNS:-4}" --stress "${STRESS:-0,2}" --out "$out" --plot "$out/guests.png" |
	tee "$out/table.txt"
