#!/usr/bin/env bash
# A packaged kernel, ready to boot in a guest without installing anything
# on the host: the linux-image package extracted, plus the 9p modules the
# guest needs.
#
# usage: deb-kernel.sh stock|series [FLAVOUR]     (default cloud-amd64)
#   stock   Debian's own linux-image-VERSION+deb12-FLAVOUR-unsigned at the
#           pinned version (downloaded, with its headers packages)
#   series  the packages `make deb` built (scripts/build-deb.sh; built here
#           if there are none yet)
# The vmlinuz path is the only line on stdout; beside it are config-VERSION
# (vm.py reads it) and lib/modules/VERSION with a fresh modules.dep.
#
# Why 9p: virtme-ng gives the guest the host's file system over 9p (or
# virtiofs, whose daemon Debian 12 lacks in the form virtme-ng needs), and
# Debian's cloud flavour builds no 9p at all. The modules are built from
# the pristine source's net/9p and fs/9p against the package's own headers,
# the same way for both kernels, and only the guest's root mount uses them.
# They are not signed, so both kernels are tainted "E" alike.
. "$(dirname "$0")/lib.sh"

which=${1:-}
flavour=${2:-cloud-amd64}
case "$which" in
stock | series) ;;
*) die "usage: deb-kernel.sh stock|series [FLAVOUR]" ;;
esac
[[ $flavour =~ ^[a-z0-9-]+$ ]] || die "bad FLAVOUR '$flavour'"

"$REPO/scripts/get-source.sh"
ver=$(dpkg-query -W -f '${Version}' "$SRC_PKG") # e.g. 6.12.117-1~deb12u1
pkgs=$CACHE/deb/pkgs
mkdir -p "$pkgs"

download() { deb_download "$1" "$2" "$pkgs"; }

if [ "$which" = stock ]; then
	abi=${ver%%-*}+deb12 # Debian's ABI name: 6.12.117+deb12
	release=$abi-$flavour
	# One assignment each: a failed download must stop the script here.
	image=$(download "linux-image-$release-unsigned" "$ver")
	h1=$(download "linux-headers-$release" "$ver")
	h2=$(download "linux-headers-$abi-common" "$ver")
	h3=$(download "linux-kbuild-$abi" "$ver")
	headers=("$h1" "$h2" "$h3")
else
	# The package make deb built from this source and this series, or a
	# (re)build: a package of an older series is never booted.
	top=$CACHE/deb/$flavour
	release=${ver%%-*}-sched-steal-$flavour
	want="+schedsteal.$(series_hash | cut -c1-8)"
	image=$(compgen -G "$top/linux-image-${release}_*_amd64.deb" | head -n 1 || true)
	if [ -z "$image" ] || [[ $(dpkg-deb -f "$image" Version) != *"$want" ]]; then
		[ -z "$image" ] || log "${image##*/} is not of the current series ($want): rebuilding"
		image=$("$REPO/scripts/build-deb.sh" "$flavour")
	fi
	h1=$(compgen -G "$top/linux-headers-${release}_*_amd64.deb" | head -n 1 || true)
	[ -n "$h1" ] || die "no linux-headers-$release package beside ${image##*/} in $top"
	headers=("$h1")
fi

dest=$CACHE/deb/$flavour/boot-$which
# Contents only: the same packages and script, however the script was called.
stamp=$(sha256sum "$image" "${headers[@]}" "$0" | cut -d' ' -f1 | sha256sum | cut -c1-16)
vmlinuz=$dest/root/boot/vmlinuz-$release
if [ "$(cat "$dest/.stamp" 2>/dev/null)" = "$stamp" ] && [ -s "$vmlinuz" ]; then
	echo "$vmlinuz"
	exit 0
fi

log "extracting ${image##*/} into $dest/root"
rm -rf "$dest"
mkdir -p "$dest/root" "$dest/headers" "$dest/9p"
dpkg-deb -x "$image" "$dest/root"
[ -s "$vmlinuz" ] || die "${image##*/} has no boot/vmlinuz-$release"
for h in "${headers[@]}"; do dpkg-deb -x "$h" "$dest/headers"; done
kdir=$dest/headers/usr/src/linux-headers-$release
[ -e "$kdir/Makefile" ] || die "no headers for $release in ${headers[*]##*/}"
# Debian's per-flavour Makefile includes the common one by absolute path.
sed -i "s|^include /usr/src/|include $dest/headers/usr/src/|" "$kdir/Makefile"

log "building the 9p modules for $release against its headers"
git -C "$KTREE" archive base net/9p fs/9p | tar -x -C "$dest/9p"
# No BTF for these (pahole may be absent); the options name what to build.
kmod_make() { make -s -C "$kdir" -j"$(($(nproc) + 1))" CONFIG_DEBUG_INFO_BTF_MODULES= "$@" modules >&2; }
kmod_make M="$dest/9p/net/9p" CONFIG_NET_9P=m CONFIG_NET_9P_VIRTIO=m
kmod_make M="$dest/9p/fs/9p" CONFIG_9P_FS=m KBUILD_EXTRA_SYMBOLS="$dest/9p/net/9p/Module.symvers"
moddir=$dest/root/lib/modules/$release
mkdir -p "$moddir/extra"
cp "$dest/9p/net/9p/9pnet.ko" "$dest/9p/net/9p/9pnet_virtio.ko" "$dest/9p/fs/9p/9p.ko" "$moddir/extra/"
depmod -b "$dest/root" "$release"
rm -rf "$dest/headers" "$dest/9p"
echo "$stamp" >"$dest/.stamp"
echo "$vmlinuz"
