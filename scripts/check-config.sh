#!/usr/bin/env bash
# usage: check-config.sh .config KERNEL-TREE FRAGMENT...
# Fail when an option requested by a fragment is not what ended up in
# .config (Kconfig silently drops options whose dependencies are unmet).
# Options that the tree's Kconfig does not define at all (one the series
# adds, in a tree without the series) are reported and skipped.
. "$(dirname "$0")/lib.sh"

cfg=$1
tree=$2
shift 2
bad=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=*) opt=${line%%=*} ;;
	"# CONFIG_"*" is not set") opt=${line#\# } opt=${opt%% *} ;;
	*) continue ;;
	esac
	# The last fragment that mentions an option wins, as in merge_config.
	want=$(grep -h -E "^(# )?$opt[= ]" "$@" | tail -n 1)
	[ "$line" = "$want" ] || continue
	got=$(grep -E "^(# )?$opt[= ]" "$cfg" || true)
	if [ "$got" != "$want" ]; then
		case "$want" in
		"# "*) [ -z "$got" ] && continue ;; # unset and not even offered
		esac
		if ! grep -rqsE --include='Kconfig*' "^[[:space:]]*(menu)?config ${opt#CONFIG_}\b" "$tree"; then
			printf 'check-config: %s is not defined in %s; skipped\n' "$opt" "$tree" >&2
			continue
		fi
		printf 'check-config: %s: wanted "%s", got "%s"\n' "${cfg##*/}" "$want" "${got:-<absent>}" >&2
		bad=1
	fi
done < <(cat "$@")
[ "$bad" -eq 0 ] || die "config fragments not honoured (missing dependencies?)"
