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

# A branch can be checked out in one worktree only: the build tree has
# "series", the developer worktree "dev", scratch trees none.
case "$tree" in
"$KTREE") branch=series ;;
"$WORKTREE") branch=dev ;;
*) branch= ;;
esac
apply_patches "$tree" "$branch" "$REPO/patches" "$REPO/BASE_VERSION"
