#!/bin/sh
# Runs inside the guest as virtme-ng's --exec command.
# usage: vm-init.sh OUTDIR COMMAND
#
# OUTDIR is a host directory shared read-write with the guest. The kernel
# log is streamed there while COMMAND runs (so a hang or panic still leaves
# a log behind) and written whole at the end, together with COMMAND's
# status, for the host to scan.
out=$1
cmd=$2
repo=$(cd "$(dirname "$0")/.." && pwd)

mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
# Events are enabled from boot (see vm.py); record only when a probe asks.
echo 0 >/sys/kernel/tracing/tracing_on 2>/dev/null
# The boot instance (vm.py's trace_instance=) only holds its probes: it
# records nothing and keeps a page per CPU.
{
	echo 0 >/sys/kernel/tracing/instances/schedsteal-boot/tracing_on
	echo 4 >/sys/kernel/tracing/instances/schedsteal-boot/buffer_size_kb
} 2>/dev/null
dmesg --follow >"$out/dmesg.stream" 2>/dev/null &
follower=$!

export SCHEDSTEAL_OUT="$out" SCHEDSTEAL_REPO="$repo"
export PYTHONPATH="$repo/tools${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$repo/guest/bin:$PATH"

# The host keeps vng's stderr for the kernel console: send the command's
# stderr along with its stdout.
/bin/sh -c "$cmd" 2>&1
rc=$?

kill "$follower" 2>/dev/null
dmesg >"$out/dmesg.txt"
echo "$rc" >"$out/rc"
exit "$rc"
