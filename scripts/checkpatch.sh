#!/usr/bin/env bash
# Run the base tree's checkpatch.pl --strict on every patch in the series.
# An empty series passes. Exits non-zero if any patch has an error,
# warning or check.
. "$(dirname "$0")/lib.sh"

"$REPO/scripts/get-source.sh" >/dev/null 2>&1 || "$REPO/scripts/get-source.sh"
cp="$KTREE/scripts/checkpatch.pl"
[ -x "$cp" ] || die "$cp not found"
fail=0 n=0
while IFS= read -r patch; do
	n=$((n + 1))
	# Run from the base tree so checkpatch finds its spelling and
	# const_structs data. FILE_PATH_CHANGES only asks whether MAINTAINERS
	# needs an entry for a new file: an out-of-tree series cannot add one.
	if out=$(cd "$KTREE" && "$cp" --strict --quiet --no-summary --show-types \
		--ignore FILE_PATH_CHANGES "$patch" 2>&1); then
		printf 'ok   %s\n' "${patch##*/}"
	else
		printf 'FAIL %s\n%s\n' "${patch##*/}" "$out"
		fail=1
	fi
done < <(series_files)
log "$n patches checked"
exit "$fail"
