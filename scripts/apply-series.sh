#!/usr/bin/env bash
# Bring $KTREE to "pristine base + patches/series", applied with git am.
# Does nothing when the tree already holds exactly this series, so that
# unchanged files keep their timestamps and builds stay incremental.
#
# usage: apply-series.sh [TREE]   (default: the build tree $KTREE)
. "$(dirname "$0")/lib.sh"

tree=${1:-$KTREE}
"$REPO/scripts/get-source.sh"
if [ "$tree" != "$KTREE" ] && [ ! -e "$tree/.git" ]; then
	mkdir -p "$(dirname "$tree")"
	git -C "$KTREE" worktree prune
	git -C "$KTREE" worktree add -q --detach "$tree" base
fi

# "hash head": the series this tree holds, and the commit it ended at, so
# that a tree moved to another commit since is applied again.
want="$(series_hash) "
have=$(tree_state "$tree" series)
if [ -n "$have" ] && [ "$have" = "$want$(git -C "$tree" rev-parse HEAD)" ] &&
	[ -z "$(git -C "$tree" status --porcelain --untracked-files=no)" ]; then
	log "$tree already has the series applied ($(series_files | wc -l) patches)"
	exit 0
fi

cd "$tree"
git am --abort >/dev/null 2>&1 || true
# Remember the timestamps of the files the old series changed: those that
# come out of the new series unchanged get them back (below), so that make
# does not rebuild what it already built from the same content.
old_head=$(git rev-parse -q --verify HEAD || true)
stamps=$(mktemp)
trap 'rm -f "$stamps"' EXIT
if [ -n "$old_head" ]; then
	git diff --name-only base "$old_head" | while IFS= read -r f; do
		if [ -e "$f" ]; then printf '%s %s\n' "$(stat -c %Y "$f")" "$f"; fi
	done >"$stamps"
fi
# A branch can be checked out in one worktree only: the build tree has
# "series", the developer worktree "dev", scratch trees none.
case "$tree" in
"$KTREE") git checkout -q -f -B series base ;;
"$WORKTREE") git checkout -q -f -B dev base ;;
*) git checkout -q -f --detach base ;;
esac
n=0
while IFS= read -r patch; do
	n=$((n + 1))
	if ! git am -q --keep-cr "$patch" >/dev/null 2>&1; then
		git am --abort >/dev/null 2>&1 || true
		set_tree_state "$tree" series ""
		die "patch $n (${patch##*/}) does not apply to base $(git log -1 --format=%s base)"
	fi
done < <(series_files)
set_tree_state "$tree" series "$want$(git rev-parse HEAD)"
while read -r mtime f; do
	if [ -e "$f" ] && git diff --quiet "$old_head" HEAD -- "$f"; then
		touch -d "@$mtime" "$f"
	fi
done <"$stamps"
log "applied $n patches on $(git log -1 --format=%s base) in $tree"
