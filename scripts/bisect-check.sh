#!/usr/bin/env bash
# Build every commit of the series (make bisect-check): the pristine base
# plus patches 1..k of patches/series for every k, with the test config,
# so that a bisection never lands on a commit that does not build.
#
# usage: bisect-check.sh [FIRST [LAST]]   (patch numbers, default: all)
#
# The commits are those of a scratch tree ($SCHEDSTEAL_CACHE/bisect/linux)
# that the series is applied to; each is checked out in turn and built
# incrementally through ccache in its own build directory, so the kernels
# the tests boot are not touched. A commit that built is remembered by the
# hash of the base and the patches up to it (and the config fragment), and
# is not built again. Not part of CI (about a minute per commit when warm).
# Exits non-zero at the first commit that does not build, naming it.
. "$(dirname "$0")/lib.sh"

tree=$CACHE/bisect/linux
okdir=$CACHE/bisect/ok
mkdir -p "$okdir"
"$REPO/scripts/apply-series.sh" "$tree"

mapfile -t patches < <(series_files)
mapfile -t commits < <(git -C "$tree" rev-list --reverse base..HEAD)
[ "${#patches[@]}" -eq "${#commits[@]}" ] ||
	die "$tree has ${#commits[@]} commits for ${#patches[@]} patches"
first=${1:-1}
last=${2:-${#patches[@]}}
[[ $first =~ ^[0-9]+$ && $last =~ ^[0-9]+$ && $first -ge 1 && $last -le ${#patches[@]} && $first -le $last ]] ||
	die "patch range '$first..$last' is not within 1..${#patches[@]}"

start=$SECONDS
built=0
kept=0
for ((i = first; i <= last; i++)); do
	key=$({ cat "$REPO/BASE_VERSION" "$REPO/configs/test.config"; cat "${patches[@]:0:i}"; } |
		sha256sum | cut -c1-16)
	name=${patches[i - 1]##*/}
	if [ -e "$okdir/$key" ]; then
		kept=$((kept + 1))
		continue
	fi
	log "[$i/${#patches[@]}] building $name"
	git -C "$tree" checkout -q --detach "${commits[i - 1]}"
	if ! "$REPO/scripts/build-kernel.sh" test "$tree" >/dev/null; then
		die "patch $i ($name) does not build (tree: $tree, commit ${commits[i - 1]})"
	fi
	touch "$okdir/$key"
	built=$((built + 1))
done
git -C "$tree" checkout -q --detach "${commits[-1]}"
log "patches $first..$last build: $built built, $kept already known to build ($((SECONDS - start)) s)"
