#!/usr/bin/env bash
# Build the series as a bzImage, incrementally and through ccache.
#
# usage: build-kernel.sh [test|debug] [TREE]
# The config is `make tinyconfig` + configs/test.config (+ configs/debug.config).
# The bzImage path is the last line of output.
. "$(dirname "$0")/lib.sh"

config=${1:-test}
tree=${2:-$KTREE}
case "$config" in
test) frags=("$REPO/configs/test.config") ;;
debug) frags=("$REPO/configs/test.config" "$REPO/configs/debug.config") ;;
*) die "unknown CONFIG '$config' (expected test or debug)" ;;
esac

if [ "$tree" = "$KTREE" ]; then
	"$REPO/scripts/apply-series.sh"
	out=$CACHE/build/$config
else
	[ -e "$tree/Makefile" ] || die "no kernel tree at $tree"
	out=$CACHE/build/$config-$(basename "$(dirname "$tree")")
fi
mkdir -p "$out" "$CCACHE_DIR"
command -v ccache >/dev/null || die "ccache not found (run scripts/setup-host.sh)"

jobs=$(($(nproc) + 1))
kmake() { make -C "$tree" O="$out" -j"$jobs" CC="ccache gcc" HOSTCC="ccache gcc" "$@"; }

# Regenerate .config only when a fragment changed: olddefconfig rewrites
# .config and a needless rewrite costs a relink.
stamp=$(cat "${frags[@]}" | sha256sum | cut -c1-16)
if [ "$(cat "$out/.config-stamp" 2>/dev/null)" != "$stamp" ] || [ ! -s "$out/.config" ]; then
	log "configuring $config kernel in $out"
	kmake -s tinyconfig >/dev/null
	"$tree/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "${frags[@]}" >/dev/null
	kmake -s olddefconfig >/dev/null
	"$REPO/scripts/check-config.sh" "$out/.config" "$tree" "${frags[@]}"
	echo "$stamp" >"$out/.config-stamp"
fi

log "building $config kernel ($jobs jobs)"
start=$(date +%s)
kmake -s bzImage >&2
log "built in $(($(date +%s) - start)) s"
echo "$out/arch/x86/boot/bzImage"
