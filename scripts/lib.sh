# shellcheck shell=bash
# Common settings for the sched-steal scripts. Source it, do not run it.
#
# Everything big (kernel tree, build output, virtualenv, ccache) lives in
# $SCHED_STEAL_CACHE, outside the repository, so nothing of it is ever
# committed and a fresh clone can reuse a warm cache.

set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${SCHED_STEAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sched-steal}
BASE_VERSION=$(tr -d '[:space:]' <"$REPO/BASE_VERSION")
SRC_PKG=linux-source-6.12
KTREE=$CACHE/linux                 # git tree: commit "base" + the series
WORKTREE=$CACHE/work/linux         # developer worktree (make worktree)
VENV=$CACHE/venv
export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() { printf '%s: error: %s\n' "${0##*/}" "$*" >&2; exit 1; }
warn() { printf '%s: WARNING: %s\n' "${0##*/}" "$*" >&2; }

# Patches listed in patches/series, in order, one path per line.
# A listed file that is missing or empty is an error: never skip a patch.
series_files() {
	local p
	while IFS= read -r p || [ -n "$p" ]; do
		p=${p%%#*}
		p=$(printf '%s' "$p" | tr -d '[:space:]')
		[ -n "$p" ] || continue
		[ -s "$REPO/patches/$p" ] || die "patches/series lists '$p' but patches/$p is missing or empty"
		printf '%s\n' "$REPO/patches/$p"
	done <"$REPO/patches/series"
}

# A hash of the series content: tells whether the tree is current.
series_hash() {
	{ cat "$REPO/BASE_VERSION"; series_files | xargs -r cat; } | sha256sum | cut -c1-16
}

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Let the build tree and the developer worktree share ccache entries.
export CCACHE_BASEDIR=$CACHE CCACHE_NOHASHDIR=1
