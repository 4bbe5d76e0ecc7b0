#!/usr/bin/env bash
# usage: stage.sh NAME COMMAND [ARG...]
# Run one stage of a long job and say how long it took, pass or fail, so
# that CI's log shows where the time goes.
set -uo pipefail
name=$1
shift
printf '==> %s\n' "$name" >&2
start=$(date +%s)
"$@"
rc=$?
t=$(($(date +%s) - start))
if [ "$rc" -eq 0 ]; then
	printf '==> %s: ok in %d min %02d s\n' "$name" $((t / 60)) $((t % 60)) >&2
else
	printf '==> %s: FAILED (status %d) after %d min %02d s\n' "$name" "$rc" $((t / 60)) $((t % 60)) >&2
fi
exit "$rc"
