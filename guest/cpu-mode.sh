#!/bin/sh
# Put the guest's CPUs in one of the modes the parking benchmarks compare.
# usage: cpu-mode.sh all | park LIST | offline LIST
#   all           every CPU online and unparked
#   park LIST     every CPU online, LIST parked
#   offline LIST  nothing parked, LIST hot-unplugged
# Used as an abbench "sh:" setting, so it is idempotent. The work is
# schedsteal.guest.kernel's (vm-init.sh puts tools/ on PYTHONPATH).
exec python3 -m schedsteal.guest.kernel cpu-mode "$@"
