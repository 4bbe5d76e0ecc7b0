#!/usr/bin/env bash
# Write the commits base..HEAD of the developer worktree back to patches/
# and regenerate patches/series. Output is stable: the same commits give
# byte-identical files (no commit ids, no version footer, no [PATCH n/m]),
# so an unchanged series shows no diff.
#
# usage: export-patches.sh [TREE [DIR]]   (default: the kernel worktree,
#        patches/; the lab QEMU's: a QEMU tree and qemu/patches)
. "$(dirname "$0")/lib.sh"

tree=${1:-$WORKTREE}
dir=${2:-$REPO/patches}
[ -e "$tree/.git" ] || die "no worktree at $tree (run scripts/worktree.sh)"
[ -z "$(git -C "$tree" status --porcelain --untracked-files=no)" ] ||
	die "$tree has uncommitted changes; commit them first"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$tree" format-patch -q --zero-commit --no-signature --no-numbered --filename-max-length=100 \
	-o "$tmp" base..HEAD
# Replace patches/ as a whole so that dropped patches disappear too.
mkdir -p "$dir"
find "$dir" -maxdepth 1 -name '*.patch' -delete
n=0
: >"$tmp/series"
for f in "$tmp"/*.patch; do
	[ -e "$f" ] || break
	cp "$f" "$dir/"
	basename "$f" >>"$tmp/series"
	n=$((n + 1))
done
cp "$tmp/series" "$dir/series"
set_tree_state "$tree" exported-head "$(git -C "$tree" rev-parse HEAD)"
log "exported $n patches to ${dir#"$REPO"/}/"
