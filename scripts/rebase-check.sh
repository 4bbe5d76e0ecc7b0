#!/usr/bin/env bash
# Does the series apply to every linux-source-6.12 the archive offers?
#
# usage: rebase-check.sh [--bump] [--build]
#   For each version apt-cache lists: download the package (cached in
#   $SCHEDSTEAL_CACHE/rebase/), take from it only the files the series
#   changes, apply patches/series in order with git apply, and print a
#   table: applies, or the first patch that does not and the file where it
#   fails. A result is kept per (version, series) and reused.
#   --bump: when the pinned BASE_VERSION is superseded and the newest
#   version takes the whole series, write that version to BASE_VERSION.
#   --build: also build the test config of every version the series
#   applies to (the whole source extracted, the series applied, then
#   build-kernel.sh; one tree and build path for all versions, so ccache
#   can reuse what did not change. Stable updates touch widely included
#   headers, so it reuses little: about 15 minutes per version here).
#   A successful build is remembered per (version, series, test config);
#   a failed one is tried again next time. With --bump, the newest version
#   must also build.
# Exits non-zero when the series does not apply to (or, with --build, does
# not build on) the pinned version or the newest one. Needs the package
# lists (apt-get update, at most daily).
. "$(dirname "$0")/lib.sh"

bump=0 build=0
for a in "$@"; do
	case "$a" in
	--bump) bump=1 ;;
	--build) build=1 ;;
	*) die "usage: rebase-check.sh [--bump] [--build]" ;;
	esac
done

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

fetch() { # VERSION: the package file, downloaded once
	local ver=$1 deb
	deb=$dir/debs/${SRC_PKG}_${ver}_all.deb
	if [ ! -s "$deb" ]; then
		log "$ver: downloading $SRC_PKG"
		(cd "$dir/debs" && apt-get download -q "$SRC_PKG=$ver" >/dev/null 2>&1) ||
			die "could not download $SRC_PKG=$ver"
		# apt-get download names the file with the epoch escaped; one name.
		mv "$dir/debs/${SRC_PKG}_$(printf '%s' "$ver" | sed 's/:/%3a/')_all.deb" "$deb" 2>/dev/null || true
		[ -s "$deb" ] || die "no package file for $SRC_PKG=$ver in $dir/debs"
	fi
	echo "$deb"
}

# check VERSION: print "applies" or "patch NNNN: FILE"
check() {
	local ver=$1 deb tmp n=0 p out file
	deb=$(fetch "$ver")
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

# build_test VERSION: print "builds (N s)" or "fails: FIRST ERROR"
build_test() {
	local ver=$1 deb src=$dir/src p err t0=$SECONDS
	deb=$(fetch "$ver")
	log "$ver: extracting the whole source for a build"
	rm -rf "$src" "$CACHE/build/test-src"
	mkdir -p "$src"
	dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/$SRC_PKG.tar.xz" | tar -xJ -C "$src"
	for p in "${patches[@]}"; do
		git -C "$src/$SRC_PKG" apply --whitespace=nowarn "$p" || die "$ver: ${p##*/} did not apply"
	done
	log "$ver: building the test config"
	# build-kernel.sh names the build directory after the tree's parent:
	# build/test-src, the same for every version (ccache hits).
	if "$REPO/scripts/build-kernel.sh" test "$src/$SRC_PKG" >/dev/null 2>"$dir/build.log"; then
		echo "builds ($((SECONDS - t0)) s)"
	else
		err=$(grep -m1 -E 'error:|Error [0-9]' "$dir/build.log" || tail -n 1 "$dir/build.log")
		echo "fails: $err"
	fi
	rm -rf "$src" "$CACHE/build/test-src"
}

if [ "$build" -eq 1 ]; then
	cfg_hash=$(sha256sum <"$REPO/configs/test.config" | cut -c1-16)
	printf '%-22s %-14s %-22s %s\n' version "" result "test build"
else
	printf '%-22s %-14s %s\n' version "" result
fi
fail=0 newest_build=
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
	case "$res" in
	applies*) ;;
	*) if [ "$ver" = "$BASE_VERSION" ] || [ "$ver" = "$newest" ]; then fail=1; fi ;;
	esac
	if [ "$build" -eq 0 ]; then
		printf '%-22s %-14s %s\n' "$ver" "$mark" "$res"
		continue
	fi
	bres="-"
	if [[ $res == applies* ]]; then
		# Only a success is kept: a failure (or a full disk) is tried again.
		bres_file=$dir/results/$ver-$hash-build-$cfg_hash
		if [ -s "$bres_file" ]; then
			bres=$(cat "$bres_file")
		else
			bres=$(build_test "$ver")
			[[ $bres != builds* ]] || echo "$bres" >"$bres_file"
		fi
		[ "$ver" != "$newest" ] || newest_build=$bres
		if [[ $bres != builds* ]] && { [ "$ver" = "$BASE_VERSION" ] || [ "$ver" = "$newest" ]; }; then
			fail=1
		fi
	fi
	printf '%-22s %-14s %-22s %s\n' "$ver" "$mark" "$res" "$bres"
done
if [ "$newest" != "$BASE_VERSION" ]; then
	if [ "$bump" -eq 1 ] && grep -q '^applies' "$dir/results/$newest-$hash" &&
		{ [ "$build" -eq 0 ] || [[ $newest_build == builds* ]]; }; then
		echo "$newest" >"$REPO/BASE_VERSION"
		log "BASE_VERSION is now $newest: run make test (the kernel tree is rebuilt on it)"
	else
		log "the pinned $BASE_VERSION is superseded by $newest; to move to it: make rebase-check BUMP=1"
	fi
fi
exit "$fail"
