#!/usr/bin/env bash
# Install what building, booting and measuring needs, idempotently:
# Debian packages (compiler, QEMU, ccache, workloads, what virtme-ng's
# guest init runs) and a virtualenv in the cache directory with
# virtme-ng, pytest, matplotlib and this project's tools (pyproject.toml).
. "$(dirname "$0")/lib.sh"

DEB_PACKAGES=(
	build-essential bc bison flex libelf-dev libssl-dev cpio kmod xz-utils zstd
	dpkg-dev debhelper fakeroot rsync # make deb: the kernel's bindeb-pkg (its debian/rules runs dh_*)
	openssl                          # make deb: the build makes its module signing key
	busybox-static                   # virtme-ng's initramfs for a packaged kernel (its 9p is modules)
	ccache perl git python3 python3-venv
	qemu-system-x86
	# virtme-ng's guest init runs udevd (/dev/virtio-ports), systemd-tmpfiles
	# and `ip link set dev lo up`; a minimal Debian has none of them.
	udev systemd iproute2
	procps util-linux                 # ps, taskset, dmesg in the guest scripts
	rt-tests stress-ng linux-perf     # workloads: hackbench, cyclictest, stress-ng, perf bench
	# make qemu: the lab QEMU from Debian's source (x86_64 emulator, 9p)
	meson ninja-build pkg-config libglib2.0-dev libpixman-1-dev libfdt-dev
	libcap-ng-dev libattr1-dev zlib1g-dev
)
# virtme-ng pinned so that a guest boots the same way on every machine;
# setuptools and wheel build the editable install of our own package.
PY_PACKAGES=(virtme-ng==1.42 pytest matplotlib "setuptools>=64" wheel)
# Debian's interpreter, not whatever python3 is first on PATH: the same
# on every machine, and the one the guest runs.
PYTHON=/usr/bin/python3

missing=()
for p in "${DEB_PACKAGES[@]}"; do
	dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing Debian packages: ${missing[*]}"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		"${missing[@]}" >&2
fi

stamp=$( (printf '%s\n' "${PY_PACKAGES[@]}"; "$PYTHON" --version) | sha256sum | cut -c1-16)
if [ "$(cat "$VENV/.stamp" 2>/dev/null)" != "$stamp" ]; then
	log "creating virtualenv $VENV"
	rm -rf "$VENV"
	"$PYTHON" -m venv "$VENV"
	"$VENV/bin/pip" install -q --disable-pip-version-check "${PY_PACKAGES[@]}" >&2
	echo "$stamp" >"$VENV/.stamp"
fi
# The project's own package, editable: console scripts (schedstat,
# abbench, schedsteal-vm, ...) that run this checkout's code. Another
# checkout (a CI clone) installs itself in turn.
pkg_stamp="$REPO $(sha256sum <"$REPO/pyproject.toml" | cut -c1-16)"
if [ "$(cat "$VENV/.stamp-schedsteal" 2>/dev/null)" != "$pkg_stamp" ]; then
	log "installing the schedsteal tools from $REPO into $VENV"
	"$VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation --no-deps -e "$REPO" >&2
	echo "$pkg_stamp" >"$VENV/.stamp-schedsteal"
fi
"$REPO/scripts/get-source.sh"
log "host ready (cache: $CACHE)"
