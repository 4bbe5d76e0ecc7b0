#!/usr/bin/env bash
# usage: check-config.sh .config FRAGMENT...
# Fail when an option requested by a fragment is not what ended up in
# .config (Kconfig silently drops options whose dependencies are unmet).
. "$(dirname "$0")/lib.sh"

cfg=$1
shift
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
		printf 'check-config: %s: wanted "%s", got "%s"\n' "${cfg##*/}" "$want" "${got:-<absent>}" >&2
		bad=1
	fi
done < <(cat "$@")
[ "$bad" -eq 0 ] || die "config fragments not honoured (missing dependencies?)"
