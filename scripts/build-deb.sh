#!/usr/bin/env bash
# Build the series into installable Debian packages, with Debian's own
# configuration for one flavour of its 6.12 kernel.
#
# usage: build-deb.sh [--config-only] [FLAVOUR]      (default cloud-amd64)
#   --config-only: check the tools and configure, print the .config path,
#   build nothing (what make fresh-check FRESH=deb runs on a fresh machine)
# environment: DEBUG_INFO=1 keeps Debian's DWARF and BTF (a far longer
#              build; needs pahole, package dwarves); JOBS (default nproc + 1)
#
# The configuration is Debian's config.amd64_none_FLAVOUR from the
# linux-config-6.12 package of the same version as the kernel source, then
# configs/deb.config, then olddefconfig; check-config.sh fails the build if
# an option the fragment sets did not survive. The kernel release is
# VERSION-sched-steal-FLAVOUR. Packages are built by the kernel's own
# bindeb-pkg (linux-image, linux-headers, linux-libc-dev) into
# $SCHEDSTEAL_CACHE/deb/FLAVOUR/; build.log and build-time there record the
# last build. The linux-image package's path is the only line on stdout.
. "$(dirname "$0")/lib.sh"

config_only=0
if [ "${1:-}" = --config-only ]; then
	config_only=1
	shift
fi
flavour=${1:-cloud-amd64}
[[ $flavour =~ ^[a-z0-9-]+$ ]] || die "bad FLAVOUR '$flavour' (expected e.g. cloud-amd64)"

"$REPO/scripts/get-source.sh"
# Some topics only (TOPICS): their own tree, build directory and release
# name, so that neither the tests' tree nor the whole series' packages
# are touched.
topics=$(topics_name) || exit 1
if [ "$topics" = all ]; then
	tree=$KTREE
	"$REPO/scripts/apply-series.sh"
	top=$CACHE/deb/$flavour
	localver=sched-steal-$flavour
else
	tree=$CACHE/topics/$topics/linux
	"$REPO/scripts/apply-series.sh" "$tree"
	top=$CACHE/deb/$flavour-topics-$topics
	localver=sched-steal-${topics//+/-}-$flavour
fi
ver=$(dpkg-query -W -f '${Version}' "$SRC_PKG")
for t in dpkg-buildpackage fakeroot rsync dh_listpackages openssl; do
	command -v "$t" >/dev/null || die "$t not found (run scripts/setup-host.sh)"
done

out=$top/build

# Debian's configuration, from the package that matches the source.
cfgpkg=$(deb_download linux-config-6.12 "$ver" "$CACHE/deb/pkgs")
member=./usr/src/linux-config-6.12/config.amd64_none_$flavour.xz
listing=$(dpkg-deb -c "$cfgpkg")
if ! grep -q " ${member}\$" <<<"$listing"; then
	known=$(sed -n 's|.*/config\.amd64_none_\(.*\)\.xz$|\1|p' <<<"$listing" | tr '\n' ' ')
	die "Debian has no amd64 configuration for flavour '$flavour' (there are: $known)"
fi
mkdir -p "$out" "$CCACHE_DIR"
dpkg-deb --fsys-tarfile "$cfgpkg" | tar -xO "$member" | xz -dc >"$top/debian.config"

# The fragment: configs/deb.config, the release name, and debug info when
# asked for.
frag=$top/sched-steal.config
{
	cat "$REPO/configs/deb.config"
	echo "CONFIG_LOCALVERSION=\"-$localver\""
	if [ "${DEBUG_INFO:-0}" = 1 ]; then
		echo "# CONFIG_DEBUG_INFO_NONE is not set"
		echo "CONFIG_DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT=y"
		echo "CONFIG_DEBUG_INFO_BTF=y"
	fi
} >"$frag"

if [ "${DEBUG_INFO:-0}" = 1 ] && ! command -v pahole >/dev/null; then
	die "DEBUG_INFO=1 needs pahole for BTF: apt-get install dwarves"
fi

jobs=${JOBS:-$(($(nproc) + 1))}
# LOCALVERSION= (set, empty): the release is exactly VERSION + the config's
# CONFIG_LOCALVERSION, without the "+" setlocalversion adds for a git tree.
kmake() {
	make -C "$tree" O="$out" -j"$jobs" CC="ccache gcc" HOSTCC="ccache gcc" LOCALVERSION= "$@"
}

stamp=$(cat "$top/debian.config" "$frag" | sha256sum | cut -c1-16)
if [ "$(cat "$out/.config-stamp" 2>/dev/null)" != "$stamp" ] || [ ! -s "$out/.config" ]; then
	log "configuring: Debian's $flavour configuration ($ver) + configs/deb.config"
	cp "$top/debian.config" "$out/.config"
	"$tree/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$frag" >/dev/null
	kmake -s olddefconfig >/dev/null
	"$REPO/scripts/check-config.sh" "$out/.config" "$tree" "$frag"
	echo "$stamp" >"$out/.config-stamp"
fi
release=$(kmake -s kernelrelease)
if [ "$config_only" -eq 1 ]; then
	log "configured $release in $out"
	echo "$out/.config"
	exit 0
fi

# bindeb-pkg writes the packages into the build directory's parent; clear
# out the previous build's so that only this one's are there.
rm -f "$top"/*.deb "$top"/*.buildinfo "$top"/*.changes
est=$(cat "$out/.objects" 2>/dev/null || true)
[ "${est:-0}" -gt 100 ] 2>/dev/null || est=7000 # a guess until the first build
# The package version: the kernel's, then the build time, which orders
# rebuilds for dpkg, and the series hash, which names what is inside.
pkgversion=$(kmake -s kernelversion)-$(date -u +%Y%m%d%H%M)+schedsteal.$(series_hash | cut -c1-8)
log "building $release packages, version $pkgversion ($jobs jobs; ~$est objects; about an hour or more from cold)"
start=$SECONDS
kmake bindeb-pkg KDEB_PKGVERSION="$pkgversion" 2>&1 | tee "$top/build.log" | kbuild_progress "deb $flavour" "$est" "$start"
find "$out" -name '*.o' | wc -l >"$out/.objects"
elapsed=$((SECONDS - start))
printf '%s %s s %s jobs %s\n' "$(date -u +%FT%TZ)" "$elapsed" "$jobs" "$release" >>"$top/build-time"
image=$(ls "$top"/linux-image-"$release"_*.deb 2>/dev/null | grep -v -- '-dbg_' | head -n 1 || true)
[ -n "$image" ] || die "bindeb-pkg made no linux-image-$release package (log: $top/build.log)"
log "built in $elapsed s:"
ls -1 "$top"/*.deb | sed 's/^/  /' >&2
echo "$image"
