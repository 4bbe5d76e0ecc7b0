#!/usr/bin/env bash
# Install Debian's linux-source-6.12 at the pinned version (BASE_VERSION)
# and turn it into a git tree whose first commit is the pristine base.
#
# If the pinned version has left the archive, fall back to the newest 6.12
# package with a loud warning; apply-series.sh then tells whether the
# series still applies. The archive is asked again at most once a day.
. "$(dirname "$0")/lib.sh"

installed_version() {
	# dpkg-query fails when the package was never installed: that is "none".
	dpkg-query -W -f '${Status} ${Version}\n' "$SRC_PKG" 2>/dev/null |
		awk '$3 == "installed" { print $4 }' || true
}

archive_has() { # VERSION: is it in the package lists?
	apt-cache madison "$SRC_PKG" 2>/dev/null | awk '{ print $3 }' | grep -qxF "$1"
}

apt_install() {
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}

ensure_package() {
	local have
	have=$(installed_version)
	[ "$have" = "$BASE_VERSION" ] && return 0
	# Stale package lists, or none yet (a fresh machine): refresh them, but
	# not on every build of a machine that runs the fallback version.
	archive_has "$BASE_VERSION" || apt_update_daily "looking for $SRC_PKG $BASE_VERSION"
	if archive_has "$BASE_VERSION"; then
		log "installing $SRC_PKG=$BASE_VERSION"
		apt_install --allow-downgrades "$SRC_PKG=$BASE_VERSION"
		return 0
	fi
	if [ -z "$have" ] && ! apt-cache madison "$SRC_PKG" 2>/dev/null | grep -q .; then
		die "no $SRC_PKG package in the archive: enable bookworm-security in /etc/apt/sources.list (see README)"
	fi
	warn "$SRC_PKG $BASE_VERSION is no longer in the archive; falling back to the newest 6.12 package"
	warn "results are NOT comparable with those recorded for $BASE_VERSION; update BASE_VERSION once the series is checked"
	[ -n "$have" ] || apt_install "$SRC_PKG"
}

tree_version() {
	git -C "$KTREE" log -1 --format=%s base 2>/dev/null | sed -n 's/^base: .* \([^ ]*\)$/\1/p' || true
}

main() {
	ensure_package
	local ver tarball tmp why
	ver=$(installed_version)
	[ -n "$ver" ] || die "$SRC_PKG is not installed"
	if [ "$(tree_version)" = "$ver" ]; then
		log "kernel tree $KTREE is at $SRC_PKG $ver"
		return 0
	fi
	# A new base replaces the tree, and the developer worktree with it.
	why=$(worktree_unexported)
	[ -z "$why" ] || die "not replacing $KTREE with $SRC_PKG $ver: $why"
	tarball=/usr/src/$SRC_PKG.tar.xz
	[ -r "$tarball" ] || die "$tarball not found (is $SRC_PKG installed?)"
	log "extracting $tarball (about a minute)"
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/extract.XXXXXX")
	tar -C "$tmp" -xf "$tarball"
	rm -rf "$KTREE" "$WORKTREE"
	mv "$tmp/$SRC_PKG" "$KTREE"
	rmdir "$tmp"
	log "creating the pristine base commit (about a minute)"
	make_base_commit "$KTREE" "base: $SRC_PKG $ver"
	log "kernel tree ready: $KTREE (base $(git -C "$KTREE" rev-parse --short base))"
}

main "$@"
