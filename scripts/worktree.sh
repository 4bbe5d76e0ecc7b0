#!/usr/bin/env bash
# Give the developer a kernel tree with the series applied as commits, on
# branch "dev" at $WORKTREE. Edit, commit (git commit --fixup / rebase -i),
# then run export-patches.sh to write the commits back to patches/.
# Refuses to throw away commits or changes that were not exported.
. "$(dirname "$0")/lib.sh"

why=$(worktree_unexported)
[ -z "$why" ] || die "$why"
"$REPO/scripts/apply-series.sh" "$WORKTREE"
set_tree_state "$WORKTREE" applied-head "$(git -C "$WORKTREE" rev-parse HEAD)"
log "worktree: $WORKTREE (branch dev, $(git -C "$WORKTREE" rev-list --count base..HEAD) patches on base)"
echo "$WORKTREE"
