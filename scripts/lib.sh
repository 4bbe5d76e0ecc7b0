#!/usr/bin/env bash
# shellcheck shell=bash
# Common settings for the sched-steal scripts. Source it, do not run it
# (except as `lib.sh --cache-dir`, which prints the cache directory for the
# Makefile and the Python tools: this file is its only definition).
#
# Everything big (kernel tree, build output, virtualenv, ccache) lives in
# $SCHEDSTEAL_CACHE, outside the repository, so nothing of it is ever
# committed and a fresh clone can reuse a warm cache.

set -Eeuo pipefail

# Every failure names itself: script, line, command and status. Without
# this, `set -e` ends a script silently (a failed `x=$(cmd)` prints nothing).
trap 'on_error $? "${BASH_SOURCE[0]:-$0}" "$LINENO" "$BASH_COMMAND"' ERR
on_error() {
	printf '%s: error: %s:%s: `%s` failed (status %s)\n' \
		"${0##*/}" "${2##*/}" "$3" "$4" "$1" >&2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${SCHEDSTEAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sched-steal}
export SCHEDSTEAL_CACHE=$CACHE
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	[ "${1:-}" = --cache-dir ] || { echo "usage: lib.sh --cache-dir" >&2; exit 2; }
	echo "$CACHE"
	exit 0
fi
BASE_VERSION=$(tr -d '[:space:]' <"$REPO/BASE_VERSION")
SRC_PKG=linux-source-6.12
KTREE=$CACHE/linux                 # git tree: commit "base" + the series
WORKTREE=$CACHE/work/linux         # developer worktree (make worktree)
VENV=$CACHE/venv
export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() { printf '%s: error: %s\n' "${0##*/}" "$*" >&2; exit 1; }
warn() { printf '%s: WARNING: %s\n' "${0##*/}" "$*" >&2; }

# Boot KERNEL on PRESET and run the guest shell command GUEST; the guest's
# files are kept in OUT and its output in OUT/guest.log. On failure, show
# the log's tail and die. QEMU_OPTS (one string, may be empty) goes to QEMU.
guest_run() { # KERNEL PRESET OUT TIMEOUT QEMU_OPTS GUEST
	local qemu=()
	[ -z "$5" ] || qemu=(--qemu-opts="$5")
	"$VENV/bin/schedsteal-vm" run --kernel "$1" --preset "$2" "${qemu[@]}" \
		--keep "$3" --timeout "$4" -- "$6" >"$3/guest.log" 2>&1 || {
		tail -n 40 "$3/guest.log" >&2
		die "guest run failed (full log: $3/guest.log)"
	}
}

# Filter kbuild's one-line-per-step output (stdin) into a progress line
# every 30 s; everything else (warnings, errors) passes through to stderr.
# ESTIMATE is the number of objects a full build compiles.
kbuild_progress() { # NAME ESTIMATE START-SECONDS
	local name=$1 est=$2 start=$3 n=0 last=$SECONDS line
	while IFS= read -r line; do
		if [[ $line =~ ^\ \ (CC|AS)(\ \[M\])?\ +[^\ ]+\.o$ ]]; then
			n=$((n + 1))
			if ((SECONDS - last >= 30)); then
				last=$SECONDS
				log "$name: $n of ~$est objects compiled ($((n * 100 / est))%), $((SECONDS - start)) s"
			fi
		elif ! [[ $line =~ ^\ \ [A-Z0-9_]+(\ \[M\])?\ +[^\ ]+$ ||
			$line =~ ^make(\[[0-9]+\])?:\ (Entering|Leaving)\ directory ]]; then
			printf '%s\n' "$line" >&2
		fi
	done
	log "$name: $n objects compiled"
}

# Download PACKAGE=VERSION into DIR once (apt-get download) and print
# the file's path. apt-get escapes an epoch's colon in the file name.
deb_download() { # PACKAGE VERSION DIR
	local glob="$3/${1}_${2//:/%3a}_*.deb" f tmp
	f=$(compgen -G "$glob" | head -n 1 || true)
	if [ -z "$f" ]; then
		log "downloading $1=$2"
		mkdir -p "$3"
		tmp=$(mktemp -d "$3/dl.XXXXXX")
		(cd "$tmp" && apt-get download -q "$1=$2" >/dev/null 2>&1) ||
			{ rm -rf "$tmp"; die "could not download $1=$2 (is bookworm-security in the sources?)"; }
		mv "$tmp"/*.deb "$3/"
		rm -rf "$tmp"
		f=$(compgen -G "$glob" | head -n 1 || true)
		[ -n "$f" ] || die "apt-get download $1=$2 left no package file"
	fi
	echo "$f"
}

# Patches listed in DIR/series (default: the kernel's patches/), in
# order, one path per line. A listed file that is missing or empty is an
# error: never skip a patch.
series_files() { # [DIR]
	local p dir=${1:-$REPO/patches}
	[ -r "$dir/series" ] || die "no series file in $dir"
	while IFS= read -r p || [ -n "$p" ]; do
		p=${p%%#*}
		p=$(printf '%s' "$p" | tr -d '[:space:]')
		[ -n "$p" ] || continue
		[ -s "$dir/$p" ] || die "${dir#"$REPO"/}/series lists '$p' but ${dir#"$REPO"/}/$p is missing or empty"
		printf '%s\n' "$dir/$p"
	done <"$dir/series"
}

# A hash of the series content and its base: tells whether a tree is
# current. Default: the kernel series on BASE_VERSION.
series_hash() { # [DIR BASE-FILE]
	{ cat "${2:-$REPO/BASE_VERSION}"; series_files "${1:-}" | xargs -r cat; } | sha256sum | cut -c1-16
}

# Make DIR a git repository whose one commit, tagged "base", holds all of
# it, on branch "series". A fixed author and date make the commit id the
# same on every machine.
make_base_commit() { # DIR SUBJECT
	(
		cd "$1"
		git init -q -b series
		git config user.name "sched-steal base"
		git config user.email "base@sched-steal.invalid"
		git config core.abbrev 12
		git add -A -f
		GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" GIT_COMMITTER_DATE="2000-01-01T00:00:00Z" \
			git commit -q -m "$2"
		git tag -f base >/dev/null
	)
}

# Bring TREE (a git tree whose tag "base" is the pristine source) to base
# plus the patches of DIR/series, applied with git am on BRANCH (empty:
# detached). Does nothing when TREE already holds exactly this series, so
# that unchanged files keep their timestamps and builds stay incremental;
# files the old and new series leave the same get their old timestamps.
apply_patches() { # TREE BRANCH DIR BASE-FILE
	local tree=$1 branch=$2 dir=$3 want have old_head stamps n=0 patch mtime f
	want="$(series_hash "$dir" "$4") "
	have=$(tree_state "$tree" series)
	if [ -n "$have" ] && [ "$have" = "$want$(git -C "$tree" rev-parse HEAD)" ] &&
		[ -z "$(git -C "$tree" status --porcelain --untracked-files=no)" ]; then
		log "$tree already has the series applied ($(series_files "$dir" | wc -l) patches)"
		return 0
	fi
	git -C "$tree" am --abort >/dev/null 2>&1 || true
	old_head=$(git -C "$tree" rev-parse -q --verify HEAD || true)
	stamps=$(mktemp)
	if [ -n "$old_head" ]; then
		git -C "$tree" diff --name-only base "$old_head" | while IFS= read -r f; do
			if [ -e "$tree/$f" ]; then printf '%s %s\n' "$(stat -c %Y "$tree/$f")" "$f"; fi
		done >"$stamps"
	fi
	if [ -n "$branch" ]; then
		git -C "$tree" checkout -q -f -B "$branch" base
	else
		git -C "$tree" checkout -q -f --detach base
	fi
	while IFS= read -r patch; do
		n=$((n + 1))
		if ! git -C "$tree" am -q --keep-cr "$patch" >/dev/null 2>&1; then
			git -C "$tree" am --abort >/dev/null 2>&1 || true
			set_tree_state "$tree" series ""
			rm -f "$stamps"
			die "patch $n (${patch##*/}) does not apply to base $(git -C "$tree" log -1 --format=%s base)"
		fi
	done < <(series_files "$dir")
	set_tree_state "$tree" series "$want$(git -C "$tree" rev-parse HEAD)"
	while read -r mtime f; do
		if [ -e "$tree/$f" ] && git -C "$tree" diff --quiet "$old_head" HEAD -- "$f"; then
			touch -d "@$mtime" "$tree/$f"
		fi
	done <"$stamps"
	rm -f "$stamps"
	log "applied $n patches on $(git -C "$tree" log -1 --format=%s base) in $tree"
}

# Per-tree state (series hash, applied/exported heads) lives in the tree's
# own git directory: `git config` is shared between a repository and its
# worktrees, so a new worktree would inherit the build tree's state.
tree_state_file() { # TREE NAME
	printf '%s/sched-steal-%s\n' "$(git -C "$1" rev-parse --absolute-git-dir)" "$2"
}
tree_state() { # TREE NAME: print the value, empty if unset
	cat "$(tree_state_file "$1" "$2")" 2>/dev/null || true
}
set_tree_state() { # TREE NAME VALUE (empty VALUE removes it)
	local f
	f=$(tree_state_file "$1" "$2")
	if [ -n "$3" ]; then echo "$3" >"$f"; else rm -f "$f"; fi
}

# Why the developer worktree must not be thrown away, or nothing.
worktree_unexported() {
	[ -e "$WORKTREE/.git" ] || return 0
	if [ -n "$(git -C "$WORKTREE" status --porcelain --untracked-files=no)" ]; then
		echo "$WORKTREE has uncommitted changes; commit and export them, or reset them first"
		return 0
	fi
	local head
	head=$(git -C "$WORKTREE" rev-parse HEAD)
	if [ "$head" != "$(tree_state "$WORKTREE" exported-head)" ] &&
		[ "$head" != "$(tree_state "$WORKTREE" applied-head)" ]; then
		echo "$WORKTREE has commits that were not exported (run make export-patches first)"
	fi
}

# apt-get update, unless it ran less than a day ago: builds and checks
# call this often, and the package lists change far more slowly.
apt_update_daily() { # WHY
	local stamp=$CACHE/apt-updated
	[ -z "$(find "$stamp" -mmin -1440 2>/dev/null)" ] || return 0
	log "refreshing the package lists (apt-get update, at most once a day): $1"
	as_root apt-get update -qq
	mkdir -p "$CACHE"
	touch "$stamp"
}

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Let the build tree and the developer worktree share ccache entries.
export CCACHE_BASEDIR=$CACHE CCACHE_NOHASHDIR=1
