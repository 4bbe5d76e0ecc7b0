#!/usr/bin/env bash
# Build the pinned 6.12 without the series, for kernel-against-kernel runs.
#
# usage: stock-kernel.sh [test|debug]
# The tree is the "base" commit of the kernel tree (get-source.sh), copied
# once per base to $SCHEDSTEAL_CACHE/stock/linux; the build goes to
# build/CONFIG-stock with the same config fragments as the series' kernels
# (options only the series defines are reported and skipped). The bzImage
# path is the only line on stdout.
. "$(dirname "$0")/lib.sh"

config=${1:-test}
"$REPO/scripts/get-source.sh"
base=$(git -C "$KTREE" rev-parse --verify -q base) || die "$KTREE has no base commit"
stock=$CACHE/stock
if [ "$(cat "$stock/.base" 2>/dev/null)" != "$base" ]; then
	log "copying the pristine base ${base:0:12} to $stock/linux"
	rm -rf "$stock"
	mkdir -p "$stock/linux"
	git -C "$KTREE" archive base | tar -x -C "$stock/linux"
	echo "$base" >"$stock/.base"
fi
exec "$REPO/scripts/build-kernel.sh" "$config" "$stock/linux"
