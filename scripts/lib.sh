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

# The kernel series' topics (patches/topics), in the order they apply:
# one "NAME COUNT AFTER" line each, AFTER a comma-separated list of the
# topics it must be applied after, or "-".
topics_table() {
	local f=$REPO/patches/topics
	[ -r "$f" ] || die "no topics file $f"
	awk '!/^[[:space:]]*(#|$)/ { print $1, $2, $3 }' "$f"
}

# Die unless patches/topics is well formed: a name (lower case, not a
# name patches/ uses itself), a patch count and the earlier topics it
# comes after ("-" for none) on every line, each name once.
check_topics_table() {
	local f=$REPO/patches/topics err
	[ -r "$f" ] || die "no topics file $f"
	err=$(awk '
		/^[[:space:]]*(#|$)/ { next }
		{
			where = FILENAME ":" FNR ": "
			if (NF < 4) { print where "expected: NAME PATCHES AFTER KIND [WHAT]"; exit }
			if ($1 !~ /^[a-z][a-z0-9-]*$/ || $1 ~ /^(covers|series|topics)$/) { print where "bad topic name \"" $1 "\""; exit }
			if ($1 in seen) { print where "topic \"" $1 "\" twice"; exit }
			if ($2 !~ /^[1-9][0-9]*$/) { print where "bad patch count \"" $2 "\""; exit }
			if ($4 !~ /^(prep|submission|rfc|tool)$/) { print where "bad kind \"" $4 "\" (prep, submission, rfc or tool)"; exit }
			if ($3 != "-") {
				n = split($3, after, ",")
				for (i = 1; i <= n; i++)
					if (!(after[i] in seen)) { print where "\"" $1 "\" comes after \"" after[i] "\", which is not an earlier topic"; exit }
			}
			seen[$1] = 1
		}' "$f")
	[ -z "$err" ] || die "$err"
}

# The topics $TOPICS selects (comma- or space-separated; unset, empty or
# "all": every topic), in the table's order, one per line. An unknown
# topic, or one whose AFTER topics are not selected too, is an error.
selected_topics() {
	local want=${TOPICS:-all} name count after t known=() sel=() words=()
	want=${want//,/ }
	check_topics_table
	while read -r name count after; do known+=("$name"); done < <(topics_table)
	if [ "$want" = all ]; then
		printf '%s\n' "${known[@]}"
		return 0
	fi
	read -r -a words <<<"$want" # no globbing of the names
	[ "${#words[@]}" -gt 0 ] || die "TOPICS='$TOPICS' names no topic (the topics: ${known[*]}; or all)"
	want=" ${words[*]} "
	for t in "${words[@]}"; do
		[[ " ${known[*]} " == *" $t "* ]] ||
			die "TOPICS: unknown topic '$t' (the topics: ${known[*]}; or all)"
	done
	while read -r name count after; do
		[[ " $want " == *" $name "* ]] || continue
		for t in ${after//,/ }; do
			[ "$t" = - ] || [[ " $want " == *" $t "* ]] ||
				die "TOPICS: topic '$name' must be applied after '$t' (patches/topics); add it"
		done
		sel+=("$name")
	done < <(topics_table)
	printf '%s\n' "${sel[@]}"
}

# A name for the selection, for build and tree directories: "all" or the
# selected topics joined with "+".
topics_name() {
	local sel all
	# Explicit exits: a command substitution does not inherit set -e.
	sel=$(selected_topics | paste -sd+) || exit 1
	all=$(topics_table | awk '{print $1}' | paste -sd+) || exit 1
	[ "$sel" != "$all" ] || sel=all
	echo "$sel"
}

# A bad TOPICS stops every script at once, before anything reads the
# series (series_files also runs where a failure would go unseen).
if [ -n "${TOPICS:-}" ]; then
	topics_name >/dev/null || exit 1
fi

# Patches listed in DIR/series (default: the kernel's patches/), in
# order, one path per line. A listed file that is missing or empty is an
# error: never skip a patch. For the kernel's series, only the topics
# $TOPICS selects (selected_topics); a kernel patch lives in
# patches/TOPIC/.
series_files() { # [DIR]
	local p dir=${1:-$REPO/patches} sel= all=
	[ -r "$dir/series" ] || die "no series file in $dir"
	if [ "$dir" = "$REPO/patches" ] && [ -e "$dir/topics" ]; then
		sel=" $(selected_topics | paste -sd' ') " || exit 1
		all=" $(topics_table | awk '{print $1}' | paste -sd' ') " || exit 1
	fi
	while IFS= read -r p || [ -n "$p" ]; do
		p=${p%%#*}
		p=$(printf '%s' "$p" | tr -d '[:space:]')
		[ -n "$p" ] || continue
		[ -s "$dir/$p" ] || die "${dir#"$REPO"/}/series lists '$p' but ${dir#"$REPO"/}/$p is missing or empty"
		if [ -n "$all" ]; then
			[[ $p == */* && $all == *" ${p%%/*} "* ]] ||
				die "${dir#"$REPO"/}/series lists '$p', which is in no topic of ${dir#"$REPO"/}/topics"
			[[ $sel == *" ${p%%/*} "* ]] || continue
		fi
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
		# The commit of ~90,000 files starts an automatic gc; in the
		# foreground, so that nothing still writes in the tree when the
		# caller goes on (fresh-check's cleanup once met a detached gc
		# repacking it: "rm: cannot remove .git: Directory not empty").
		git config gc.autoDetach false
		git config maintenance.autoDetach false
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
