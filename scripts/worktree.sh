#!/usr/bin/env bash
# Give the developer a kernel tree with the series applied as commits, on
# branch "dev" at $WORKTREE. Edit, commit (git commit --fixup / rebase -i),
# then run export-patches.sh to write the commits back to patches/.
# Refuses to throw away commits or changes that were not exported.
. "$(dirname "$0")/lib.sh"

if [ -e "$WORKTREE/.git" ]; then
	if [ -n "$(git -C "$WORKTREE" status --porcelain --untracked-files=no)" ]; then
		die "$WORKTREE has uncommitted changes; commit and export them, or reset them first"
	fi
	exported=$(git -C "$WORKTREE" config --get sched-steal.exported-head || true)
	head=$(git -C "$WORKTREE" rev-parse HEAD)
	applied=$(git -C "$WORKTREE" config --get sched-steal.applied-head || true)
	if [ "$head" != "$exported" ] && [ "$head" != "$applied" ]; then
		die "$WORKTREE has commits that were not exported (run scripts/export-patches.sh first)"
	fi
fi
"$REPO/scripts/apply-series.sh" "$WORKTREE"
git -C "$WORKTREE" config sched-steal.applied-head "$(git -C "$WORKTREE" rev-parse HEAD)"
log "worktree: $WORKTREE (branch dev, $(git -C "$WORKTREE" rev-list --count base..HEAD) patches on base)"
echo "$WORKTREE"
