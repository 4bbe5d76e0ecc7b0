#!/usr/bin/env bash
# Build the series as a bzImage, incrementally and through ccache.
#
# usage: [TOPICS=prep,steal,...] build-kernel.sh [test|debug|jumplabel|modules|kcsan] [TREE]
# TOPICS (patches/topics) builds some topics of the series only, in a
# tree and build directory of their own.
# The config is `make tinyconfig` + configs/test.config (+ configs/debug.config,
# configs/jumplabel.config, configs/modules.config or configs/kcsan.config).
# The modules kernel also builds its modules (the steal governor).
# The bzImage path is the only line on stdout; progress goes to stderr.
. "$(dirname "$0")/lib.sh"

config=${1:-test}
tree=${2:-$KTREE}
extra=()
case "$config" in
test) frags=("$REPO/configs/test.config") ;;
debug) frags=("$REPO/configs/test.config" "$REPO/configs/debug.config") ;;
jumplabel) frags=("$REPO/configs/test.config" "$REPO/configs/jumplabel.config") ;;
modules) frags=("$REPO/configs/test.config" "$REPO/configs/modules.config") ;;
kcsan)
	frags=("$REPO/configs/test.config" "$REPO/configs/kcsan.config")
	# kernel/sched/Makefile turns KCSAN off for the whole scheduler
	# (noise and speed); the objects that hold the series' code are
	# instrumented by name. core.o is not: "core.o" is also
	# kernel/kcsan/core.o, which must never be instrumented.
	extra=(KCSAN_SANITIZE_fair.o=y KCSAN_SANITIZE_build_policy.o=y
		KCSAN_SANITIZE_build_utility.o=y)
	;;
*) die "unknown CONFIG '$config' (expected test, debug, jumplabel, modules or kcsan)" ;;
esac

topics=$(topics_name) || exit 1
if [ "$tree" = "$KTREE" ] && [ "$topics" != all ]; then
	# Some topics only (TOPICS): a tree and a build directory of their
	# own, so that the kernels of the whole series keep theirs.
	tree=$CACHE/topics/$topics/linux
	"$REPO/scripts/apply-series.sh" "$tree"
	out=$CACHE/build/$config-topics-$topics
elif [ "$tree" = "$KTREE" ]; then
	"$REPO/scripts/apply-series.sh"
	out=$CACHE/build/$config
else
	[ -e "$tree/Makefile" ] || die "no kernel tree at $tree"
	out=$CACHE/build/$config-$(basename "$(dirname "$tree")")
fi
mkdir -p "$out" "$CCACHE_DIR"
command -v ccache >/dev/null || die "ccache not found (run scripts/setup-host.sh)"

jobs=$(($(nproc) + 1))
# Objects in a full build, for the first progress estimate (measured).
declare -A FULL_BUILD_OBJECTS=([test]=1410 [debug]=1420 [jumplabel]=1410 [modules]=1420 [kcsan]=1420)
kmake() { make -C "$tree" O="$out" -j"$jobs" CC="ccache gcc" HOSTCC="ccache gcc" "${extra[@]}" "$@"; }

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

est=$(cat "$out/.objects" 2>/dev/null || true)
[ "${est:-0}" -gt 100 ] 2>/dev/null || est=${FULL_BUILD_OBJECTS[$config]}
log "building $config kernel ($jobs jobs; a full build compiles ~$est objects)"
start=$SECONDS
targets=(bzImage)
[ "$config" = modules ] && targets+=(modules)
kmake "${targets[@]}" 2>&1 | kbuild_progress "$config" "$est" "$start"
find "$out" -name '*.o' | wc -l >"$out/.objects"
log "built in $((SECONDS - start)) s"
echo "$out/arch/x86/boot/bzImage"
