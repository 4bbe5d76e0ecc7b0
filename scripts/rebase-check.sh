#!/usr/bin/env bash
# Does the series apply to every linux-source-6.12 the archive offers?
#
# usage: rebase-check.sh [--bump]
#   For each version apt-cache lists: download the package (cached in
#   $SCHEDSTEAL_CACHE/rebase/), take from it only the files the series
#   changes, apply patches/series in order with git apply, and print a
#   table: applies, or the first patch that does not and the file where it
#   fails. A result is kept per (version, series) and reused.
#   --bump: when the pinned BASE_VERSION is superseded and the newest
#   version takes the whole series, write that version to BASE_VERSION.
# Exits non-zero when the series does not apply to the pinned version or to
# the newest one. Needs the package lists (apt-get update, at most daily).
. "$(dirname "$0")/lib.sh"

bump=0
case "${1:-}" in
"") ;;
--bump) bump=1 ;;
*) die "usage: rebase-check.sh [--bump]" ;;
esac

dir=$CACHE/rebase
mkdir -p "$dir/debs" "$dir/results"
apt_update_daily "the versions of $SRC_PKG"
mapfile -t versions < <(apt-cache madison "$SRC_PKG" | awk '{ print $3 }' | sort -V)
[ ${#versions[@]} -gt 0 ] || die "the archive offers no $SRC_PKG (is bookworm-security in the sources?)"
newest=${versions[-1]}

mapfile -t patches < <(series_files)
# Files the series changes that exist before it (not those it creates).
mapfile -t touched < <(
	for p in "${patches[@]}"; do
		awk '/^--- a\// { print substr($2, 3) }' "$p"
	done | sort -u |
		grep -vxF -f <(for p in "${patches[@]}"; do
			awk '/^--- \/dev\/null/ { getline; print substr($2, 3) }' "$p"
		done | sort -u)
)
hash=$(series_hash)

# check VERSION: print "applies" or "patch NNNN: FILE"
check() {
	local ver=$1 deb tmp n=0 p out file
	deb=$dir/debs/${SRC_PKG}_${ver}_all.deb
	if [ ! -s "$deb" ]; then
		log "$ver: downloading $SRC_PKG"
		(cd "$dir/debs" && apt-get download -q "$SRC_PKG=$ver" >/dev/null 2>&1) ||
			die "could not download $SRC_PKG=$ver"
		# apt-get download names the file with the epoch escaped; one name.
		mv "$dir/debs/${SRC_PKG}_$(printf '%s' "$ver" | sed 's/:/%3a/')_all.deb" "$deb" 2>/dev/null || true
		[ -s "$deb" ] || die "no package file for $SRC_PKG=$ver in $dir/debs"
	fi
	tmp=$(mktemp -d "$dir/tree.XXXXXX")
	log "$ver: extracting the ${#touched[@]} files the series changes"
	dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/$SRC_PKG.tar.xz" |
		tar -xJ -C "$tmp" "${touched[@]/#/$SRC_PKG/}"
	for p in "${patches[@]}"; do
		n=$((n + 1))
		if ! out=$(git -C "$tmp/$SRC_PKG" apply --whitespace=nowarn "$p" 2>&1); then
			file=$(printf '%s\n' "$out" | sed -n 's/^error: patch failed: \([^:]*\):.*/\1/p; s/^error: \([^:]*\): does not exist.*/\1/p' | head -n 1)
			printf 'patch %s: %s\n' "${p##*/}" "${file:-$(printf '%s' "$out" | head -n 1)}"
			rm -rf "$tmp"
			return 0
		fi
	done
	rm -rf "$tmp"
	echo "applies ($n patches)"
}

printf '%-22s %-14s %s\n' version "" result
fail=0
for ver in "${versions[@]}"; do
	res_file=$dir/results/$ver-$hash
	if [ ! -s "$res_file" ]; then
		check "$ver" >"$res_file.tmp"
		mv "$res_file.tmp" "$res_file"
	fi
	res=$(cat "$res_file")
	mark=""
	[ "$ver" = "$BASE_VERSION" ] && mark=pinned
	[ "$ver" = "$newest" ] && mark="${mark:+$mark,}newest"
	printf '%-22s %-14s %s\n' "$ver" "$mark" "$res"
	case "$res" in
	applies*) ;;
	*) if [ "$ver" = "$BASE_VERSION" ] || [ "$ver" = "$newest" ]; then fail=1; fi ;;
	esac
done
if [ "$newest" != "$BASE_VERSION" ]; then
	if [ "$bump" -eq 1 ] && grep -q '^applies' "$dir/results/$newest-$hash"; then
		echo "$newest" >"$REPO/BASE_VERSION"
		log "BASE_VERSION is now $newest: run make test (the kernel tree is rebuilt on it)"
	else
		log "the pinned $BASE_VERSION is superseded by $newest; to move to it: make rebase-check BUMP=1"
	fi
fi
exit "$fail"
