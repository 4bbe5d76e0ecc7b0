#!/usr/bin/env bash
# Build the lab QEMU: Debian's source of the installed QEMU, with the
# project's patches (qemu/patches/series) applied, only the x86_64 system
# emulator and what virtme-ng needs (9p), through ccache. docs/lab.md says
# what the patches add (steal time under TCG, a parallel clock).
#
# usage: build-qemu.sh [--configure-only | --path]
#   (none)            fetch, patch, configure and build; print the binary
#   --configure-only  stop after configure (the fresh-machine check)
#   --path            print where the binary is (or would be) and exit
# The binary's path is the only line on stdout; progress goes to stderr.
#
# The source comes from the archive through the project's own apt
# configuration in the cache directory (a deb-src list for bookworm,
# bookworm-updates and bookworm-security; $SCHEDSTEAL_DEBIAN_MIRROR and
# $SCHEDSTEAL_SECURITY_MIRROR override the hosts): the machine's apt
# sources are never changed.
. "$(dirname "$0")/lib.sh"

QEMU_DIR=$CACHE/qemu
QTREE=$QEMU_DIR/tree
QBUILD=$QEMU_DIR/build
QBIN=$QBUILD/qemu-system-x86_64
QAPT=$CACHE/apt-src
QPATCHES=$REPO/qemu/patches
QBASE_FILE=$REPO/qemu/BASE_VERSION
MIRROR=${SCHEDSTEAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${SCHEDSTEAL_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

# Only what the x86_64 emulator, TCG and virtme-ng's 9p root need; the
# firmware comes from Debian's packages, where the stock QEMU finds it.
FIRMWARE_DIRS=(/usr/share/qemu /usr/share/seabios /usr/lib/ipxe/qemu)
CONFIGURE_OPTS=(
	--without-default-features --target-list=x86_64-softmmu --enable-tcg
	--enable-virtfs --enable-attr --enable-cap-ng --enable-fdt=system
	--disable-docs --disable-tools --disable-werror --disable-debug-info
	"--firmwarepath=$(IFS=:; echo "${FIRMWARE_DIRS[*]}")"
)

mode=build
case "${1:-}" in
"") ;;
--configure-only) mode=configure ;;
--path) echo "$QBIN"; exit 0 ;;
*) echo "usage: build-qemu.sh [--configure-only | --path]" >&2; exit 2 ;;
esac

# The source version of the QEMU Debian installed (binNMU suffix dropped):
# the lab QEMU is that QEMU plus our patches.
installed_version() {
	dpkg-query -W -f '${Status} ${source:Version}\n' qemu-system-x86 2>/dev/null |
		awk '$3 == "installed" { print $4 }' || true
}

apt_src() {
	apt-get -q -o Dir::Etc::SourceList="$QAPT/sources.list" \
		-o Dir::Etc::SourceParts=/nonexistent -o Dir::State::Lists="$QAPT/lists" \
		-o Dir::Cache="$QAPT/cache" -o Dir::State::Status=/var/lib/dpkg/status \
		-o APT::Sandbox::User=root "$@"
}

src_lists_update() {
	log "refreshing the project's deb-src lists ($QAPT)"
	apt_src update >/dev/null || die "apt-get update of $QAPT/sources.list failed"
	touch "$QAPT/updated"
}

# Download qemu=VERSION's source package once; print its .dsc. apt-get
# checks the files against the archive's signed lists, so dpkg-source
# need not check the .dsc's signature again.
fetch_source() { # VERSION
	local dsc dl=$QEMU_DIR/dl stamp=$QAPT/updated
	dsc=$dl/qemu_${1#*:}.dsc
	if [ -s "$dsc" ]; then
		echo "$dsc"
		return 0
	fi
	mkdir -p "$QAPT/lists/partial" "$QAPT/cache/archives/partial" "$dl"
	cat >"$QAPT/sources.list" <<-EOF
		deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR bookworm main
		deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR bookworm-updates main
		deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $SECURITY bookworm-security main
	EOF
	# The lists are refreshed at most once a day, and once more when the
	# version is not in them.
	if [ -z "$(find "$stamp" -mmin -1440 2>/dev/null)" ]; then
		src_lists_update
	fi
	log "downloading the source of qemu $1"
	if ! (cd "$dl" && apt_src source --download-only "qemu=$1" >/dev/null 2>&1 </dev/null); then
		src_lists_update
		(cd "$dl" && apt_src source --download-only "qemu=$1" >/dev/null </dev/null) ||
			die "could not download the source of qemu $1 (is it still in the archive?)"
	fi
	[ -s "$dsc" ] || die "apt-get source left no $dsc"
	echo "$dsc"
}

# A git tree whose first commit ("base") is Debian's source with Debian's
# own patches applied.
make_tree() { # VERSION DSC
	local tmp
	if [ "$(git -C "$QTREE" log -1 --format=%s base 2>/dev/null || true)" = "base: qemu $1" ]; then
		return 0
	fi
	log "extracting $2 with Debian's patches (about a minute)"
	tmp=$(mktemp -d "$QEMU_DIR/extract.XXXXXX")
	dpkg-source -q --no-check -x "$2" "$tmp/src" >/dev/null
	# quilt's bookkeeping is not source.
	rm -rf "$tmp/src/.pc"
	make_base_commit "$tmp/src" "base: qemu $1"
	rm -rf "$QTREE" "$QBUILD"
	mv "$tmp/src" "$QTREE"
	# dpkg-source leaves a copy of the upstream tarball beside the tree.
	rm -rf "$tmp"
}

configure() {
	local stamp
	stamp=$( (printf '%s\n' "${CONFIGURE_OPTS[@]}"; meson --version; gcc --version | head -n 1) |
		sha256sum | cut -c1-16)
	if [ "$(cat "$QBUILD/.configure-stamp" 2>/dev/null)" = "$stamp" ] &&
		[ -e "$QBUILD/build.ninja" ]; then
		return 0
	fi
	log "configuring the lab QEMU in $QBUILD"
	rm -rf "$QBUILD"
	mkdir -p "$QBUILD"
	(cd "$QBUILD" && CC="ccache gcc" "$QTREE/configure" "${CONFIGURE_OPTS[@]}" \
		--prefix="$QEMU_DIR/install") >"$QBUILD/configure.log" 2>&1 || {
		tail -n 20 "$QBUILD/configure.log" >&2
		die "QEMU's configure failed (log: $QBUILD/configure.log)"
	}
	echo "$stamp" >"$QBUILD/.configure-stamp"
}

# ninja's "[N/M] ..." lines as a progress line every 30 s; everything
# else (warnings, errors) goes through to stderr.
ninja_progress() { # START-SECONDS
	local last=$SECONDS line
	while IFS= read -r line; do
		if [[ $line =~ ^\[([0-9]+)/([0-9]+)\]\  ]]; then
			if ((SECONDS - last >= 30)); then
				last=$SECONDS
				log "qemu: ${BASH_REMATCH[1]} of ${BASH_REMATCH[2]} steps ($((BASH_REMATCH[1] * 100 / BASH_REMATCH[2]))%), $((SECONDS - $1)) s"
			fi
		elif [[ -n $line && ! $line =~ ^ninja:\ (Entering|no\ work) ]]; then
			printf '%s\n' "$line" >&2
		fi
	done
}

main() {
	local ver pinned dsc start
	ver=$(installed_version)
	[ -n "$ver" ] || die "qemu-system-x86 is not installed (run scripts/setup-host.sh)"
	for t in meson ninja pkg-config dpkg-source ccache; do
		command -v "$t" >/dev/null || die "$t not found (run scripts/setup-host.sh)"
	done
	pinned=$(tr -d '[:space:]' <"$QBASE_FILE")
	[ "$ver" = "$pinned" ] ||
		warn "installed QEMU is $ver, the patches were made on $pinned (qemu/BASE_VERSION); building $ver"
	mkdir -p "$QEMU_DIR" "$CCACHE_DIR"
	dsc=$(fetch_source "$ver")
	make_tree "$ver" "$dsc"
	apply_patches "$QTREE" series "$QPATCHES" "$QBASE_FILE"
	configure
	if [ "$mode" = configure ]; then
		log "configured: $QBUILD"
		echo "$QBIN"
		return 0
	fi
	start=$SECONDS
	log "building the lab QEMU ($(nproc) jobs)"
	ninja -C "$QBUILD" qemu-system-x86_64 2>&1 | ninja_progress "$start"
	[ -x "$QBIN" ] || die "the build left no $QBIN"
	# Run from the build tree, QEMU looks for firmware in qemu-bundle/
	# (the firmware path relocated under it): point that at Debian's.
	for d in "${FIRMWARE_DIRS[@]}"; do
		mkdir -p "$QBUILD/qemu-bundle$(dirname "$d")"
		ln -sfn "$d" "$QBUILD/qemu-bundle$d"
	done
	log "built in $((SECONDS - start)) s"
	echo "$QBIN"
}

main
