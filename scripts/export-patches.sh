#!/usr/bin/env bash
# Write the commits base..dev of the developer worktree back to patches/
# and regenerate patches/series. Output is stable: the same commits give
# byte-identical files (no commit ids, no version footer, no [PATCH n/m]),
# so an unchanged series shows no diff.
. "$(dirname "$0")/lib.sh"

tree=${1:-$WORKTREE}
[ -e "$tree/.git" ] || die "no worktree at $tree (run scripts/worktree.sh)"
[ -z "$(git -C "$tree" status --porcelain --untracked-files=no)" ] ||
	die "$tree has uncommitted changes; commit them first"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$tree" format-patch -q --zero-commit --no-signature --no-numbered --filename-max-length=100 \
	-o "$tmp" base..HEAD
# Replace patches/ as a whole so that dropped patches disappear too.
find "$REPO/patches" -maxdepth 1 -name '*.patch' -delete
n=0
: >"$tmp/series"
for f in "$tmp"/*.patch; do
	[ -e "$f" ] || break
	cp "$f" "$REPO/patches/"
	basename "$f" >>"$tmp/series"
	n=$((n + 1))
done
cp "$tmp/series" "$REPO/patches/series"
set_tree_state "$tree" exported-head "$(git -C "$tree" rev-parse HEAD)"
log "exported $n patches to patches/"
