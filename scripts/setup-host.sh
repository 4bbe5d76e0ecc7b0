#!/usr/bin/env bash
# Install what building, booting and measuring needs, idempotently:
# Debian packages (compiler, QEMU, ccache, workloads) and a virtualenv in
# the cache directory with virtme-ng, pytest and matplotlib.
. "$(dirname "$0")/lib.sh"

DEB_PACKAGES=(
	build-essential bc bison flex libelf-dev libssl-dev cpio kmod xz-utils zstd
	ccache perl git
	qemu-system-x86 udev          # udev creates /dev/virtio-ports for virtme-ng
	rt-tests stress-ng linux-perf # workloads: hackbench, stress-ng, perf bench
	python3-venv
)
# Pinned so that a guest boots the same way on every machine.
PY_PACKAGES=(virtme-ng==1.42 pytest matplotlib)

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

stamp=$(printf '%s\n' "${PY_PACKAGES[@]}" | sha256sum | cut -c1-16)
if [ "$(cat "$VENV/.stamp" 2>/dev/null)" != "$stamp" ]; then
	log "creating virtualenv $VENV"
	python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q --disable-pip-version-check "${PY_PACKAGES[@]}" >&2
	echo "$stamp" >"$VENV/.stamp"
fi
"$REPO/scripts/get-source.sh"
log "host ready (cache: $CACHE)"
