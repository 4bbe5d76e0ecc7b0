#!/usr/bin/env bash
# Try the README's path as a newcomer would: a fresh Debian 12 minbase
# chroot with only git and make added, the project cloned into it, then
#   setup   `make setup`, the lab QEMU's source fetched, patched and
#           configured (its build dependencies), and `make test-unit`
#           (what CI runs; a few minutes)
#   demo    the above, then `make demo` (cold kernel build: ~10 minutes more)
#   test    `make test` alone, from nothing: the README's time for it
#   deb     `make setup`, then `make deb-config`: make deb's tools and
#           Debian's configuration with the series, without the (hours
#           long) package build
#   qemu    `make setup`, then `make qemu`: the lab QEMU built from nothing
#
# usage: fresh-check.sh [setup|demo|test|deb|qemu]      (as root)
# environment: FRESH_REF (what to clone, default HEAD: commit first),
#              FRESH_KEEP=1 (keep the chroot afterwards, to look inside)
#
# The debootstrap packages and the chroot's downloaded .debs are cached in
# $SCHEDSTEAL_CACHE/fresh/, so a second run does not fetch them again. The
# host's CA trust store and pip configuration go into the chroot: package
# registries may be reached through a proxy with its own CA.
. "$(dirname "$0")/lib.sh"

mode=${1:-setup}
case "$mode" in
setup | demo | test | deb | qemu) ;;
*) die "unknown mode '$mode' (expected setup, demo, test, deb or qemu)" ;;
esac
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts)"
command -v debootstrap >/dev/null || as_root apt-get install -y -q debootstrap >&2
ref=${FRESH_REF:-HEAD}
git -C "$REPO" rev-parse -q --verify "$ref^{commit}" >/dev/null || die "no commit '$ref' in $REPO"
if [ "$ref" = HEAD ] && [ -n "$(git -C "$REPO" status --porcelain --untracked-files=no)" ]; then
	warn "uncommitted changes in $REPO are not part of the check (it clones $ref)"
fi

fresh=$CACHE/fresh
root=$fresh/root
debs=$fresh/debootstrap-bookworm-minbase.tgz
mirror=http://deb.debian.org/debian
mkdir -p "$fresh/apt-archives/partial"

mounted=()
cleanup() {
	local m
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		m=${mounted[i]}
		umount -l "$m" 2>/dev/null || true
	done
	if [ "${FRESH_KEEP:-0}" != 1 ]; then rm -rf "$root"; fi
}
trap cleanup EXIT
bind() { # SRC DST: recursive, and nothing done inside leaks out
	mkdir -p "$2"
	mount --rbind "$1" "$2"
	mount --make-rslave "$2"
	mounted+=("$2")
}

# Unmount what an interrupted run left, then start from nothing.
if [ -d "$root" ]; then
	grep -o " $root/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf "$root"
fi
start=$(date +%s)
if [ ! -s "$debs" ]; then
	log "downloading the Debian 12 minbase packages (once)"
	debootstrap --variant=minbase --include=git,make --make-tarball="$debs.tmp" \
		bookworm "$fresh/tarball-work" "$mirror" >"$fresh/debootstrap-download.log" 2>&1 ||
		{ tail -n 20 "$fresh/debootstrap-download.log" >&2; die "debootstrap --make-tarball failed"; }
	rm -rf "$fresh/tarball-work"
	mv "$debs.tmp" "$debs"
fi
log "debootstrap: Debian 12 minbase + git, make in $root"
debootstrap --variant=minbase --include=git,make --unpack-tarball="$debs" \
	bookworm "$root" "$mirror" >"$fresh/debootstrap.log" 2>&1 ||
	{ tail -n 20 "$fresh/debootstrap.log" >&2; die "debootstrap failed (log: $fresh/debootstrap.log)"; }
log "debootstrap done in $(($(date +%s) - start)) s"

# What a Debian 12 installation has in its sources: the release, its
# updates and the security archive (linux-source-6.12 comes from there).
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
# The host's trust store (its proxy CA included) and pip configuration.
# Local CAs go where update-ca-certificates finds them too: installing
# ca-certificates in the chroot rebuilds /etc/ssl/certs from them.
rm -rf "$root/etc/ssl/certs"
mkdir -p "$root/etc/ssl" "$root/usr/local/share/ca-certificates"
cp -aL /etc/ssl/certs "$root/etc/ssl/certs"
if [ -d /usr/local/share/ca-certificates ]; then
	cp -aL /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
fi
[ -e /etc/pip.conf ] && cp -L /etc/pip.conf "$root/etc/pip.conf"
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

bind /proc "$root/proc"
bind /sys "$root/sys"
bind /dev "$root/dev"
bind "$fresh/apt-archives" "$root/var/cache/apt/archives"
# Debian's docker images delete downloaded .debs after each install; a
# fresh Debian keeps them, and so does the cache bound here.
rm -f "$root/etc/apt/apt.conf.d/docker-clean"

git clone -q --no-local "$REPO" "$root/root/sched-steal"
git -C "$root/root/sched-steal" checkout -q --detach "$(git -C "$REPO" rev-parse "$ref")"

# Only the variables a user's login shell would have, plus the host's
# pip and CA settings (a proxy with its own CA needs them).
envs=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	LANG=C.UTF-8 TERM=dumb)
while IFS='=' read -r k _; do
	case "$k" in
	PIP_FIND_LINKS) ;; # a host directory, absent in the chroot
	PIP_* | SSL_CERT_* | REQUESTS_CA_BUNDLE | http_proxy | https_proxy | no_proxy | HTTP_PROXY | HTTPS_PROXY | NO_PROXY)
		envs+=("$k=${!k}")
		;;
	esac
done < <(env)

if [ "$mode" = deb ]; then
	steps=("make setup" "make deb-config")
elif [ "$mode" = qemu ]; then
	steps=("make setup" "make qemu")
elif [ "$mode" = test ]; then
	# The README's claim: `make test` from nothing, its time alone.
	steps=("make test")
else
	steps=("make setup" "scripts/build-qemu.sh --configure-only" "make test-unit")
	[ "$mode" = setup ] || steps+=("make demo")
fi
for step in "${steps[@]}"; do
	log "chroot: $step"
	t0=$(date +%s)
	if ! chroot "$root" /usr/bin/env -i "${envs[@]}" /bin/bash -c "cd /root/sched-steal && $step" </dev/null; then
		die "'$step' failed on a fresh Debian 12 after $(($(date +%s) - t0)) s"
	fi
	log "chroot: '$step' passed in $(($(date +%s) - t0)) s"
done
log "fresh-machine check ($mode) passed in $(($(date +%s) - start)) s"
