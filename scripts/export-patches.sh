#!/usr/bin/env bash
# Write the commits base..HEAD of the developer worktree back to patches/
# and regenerate patches/series: the kernel's, one directory per topic of
# patches/topics (its patch counts split the commits). Output is stable: the same commits give
# byte-identical files (no commit ids, no version footer), so an unchanged
# series shows no diff. A topic's patches are numbered within it, as they
# are posted ([PATCH 03/12], [RFC PATCH 1/2] for an rfc topic), beside its
# cover letter; the lab QEMU's are not numbered.
#
# usage: export-patches.sh [TREE [DIR]]   (default: the kernel worktree,
#        patches/; the lab QEMU's: a QEMU tree and qemu/patches)
. "$(dirname "$0")/lib.sh"

tree=${1:-$WORKTREE}
dir=${2:-$REPO/patches}
[ -e "$tree/.git" ] || die "no worktree at $tree (run scripts/worktree.sh)"
[ -z "$(git -C "$tree" status --porcelain --untracked-files=no)" ] ||
	die "$tree has uncommitted changes; commit them first"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fmt() { # OUT-DIR RANGE [FORMAT-PATCH-OPTION...]
	local o=$1 r=$2
	shift 2
	git -C "$tree" format-patch -q --zero-commit --no-signature --filename-max-length=100 \
		"$@" -o "$o" "$r"
}
# The subject prefix of a topic's patches, from its kind in patches/topics.
topic_prefix() { # TOPIC
	case "$(awk -v t="$1" '$1 == t { print $4 }' "$dir/topics")" in
	rfc) echo "RFC PATCH" ;;
	*) echo PATCH ;;
	esac
}
# A topic's cover letter, in git format-patch --cover-letter form, as
# patches/TOPIC/0000-cover-letter.patch (not in patches/series): the
# subject and text from patches/covers/TOPIC.txt (first line, then the
# text after the blank line), the shortlog and diffstat from git. From
# and Date are the topic's patches' (first author, last date), so that an
# unchanged topic exports the same file.
cover_letter() { # TOPIC RANGE
	local text=$dir/covers/$1.txt out=$tmp/cover-$1 cover
	[ -s "$text" ] || die "no cover letter text for topic '$1': write ${text#"$REPO"/}"
	fmt "$out" "$2" --cover-letter --numbered --subject-prefix="$(topic_prefix "$1")"
	cover=$out/0000-cover-letter.patch
	awk -v text="$text" \
		-v from="$(awk '/^From: /{p=1; print; next} p && /^ /{print; next} p{exit}' "$tmp/$1"/0001-*.patch)" \
		-v date="$(grep -h -m1 '^Date: ' "$tmp/$1"/*.patch | tail -n 1)" '
		BEGIN {
			getline subject <text
			while ((getline line <text) > 0) if (line != "" || body != "") body = body line "\n"
		}
		/^From: / && !done_from { print from; done_from = 1; skip = 1; next }
		skip && /^ / { next }
		{ skip = 0 }
		/^Date: / && !done_date { print date; done_date = 1; next }
		/^Subject: / && (i = index($0, "*** SUBJECT HERE ***")) {
			$0 = substr($0, 1, i - 1) subject substr($0, i + 20)
		}
		/^\*\*\* BLURB HERE \*\*\*$/ { printf "%s", body; next }
		{ print }' "$cover" >"$tmp/$1/0000-cover-letter.patch"
}

: >"$tmp/series"
if [ "$dir" = "$REPO/patches" ] && [ -e "$dir/topics" ]; then
	# The kernel series: each topic's commits, in patches/topics' order and
	# numbers, go to patches/TOPIC/, numbered from 1 within the topic.
	[ "$(topics_name)" = all ] || die "export-patches writes every topic: unset TOPICS (it is '$TOPICS')"
	mapfile -t commits < <(git -C "$tree" rev-list --reverse base..HEAD)
	total=$(topics_table | awk '{n += $2} END {print n + 0}')
	[ "${#commits[@]}" -eq "$total" ] ||
		die "$tree has ${#commits[@]} commits, patches/topics counts $total: give each topic its number of patches there first"
	at=0
	while read -r name count after; do
		[ "$count" -gt 0 ] || die "patches/topics: topic '$name' has no patches"
		from=$([ "$at" -eq 0 ] && echo base || echo "${commits[at - 1]}")
		fmt "$tmp/$name" "$from..${commits[at + count - 1]}" \
			--numbered --subject-prefix="$(topic_prefix "$name")"
		for f in "$tmp/$name"/*.patch; do echo "$name/${f##*/}" >>"$tmp/series"; done
		cover_letter "$name" "$from..${commits[at + count - 1]}"
		at=$((at + count))
	done < <(topics_table)
	# Replace every topic directory as a whole so that dropped patches go.
	find "$dir" -mindepth 1 -maxdepth 2 -name '*.patch' -delete
	find "$dir" -mindepth 1 -maxdepth 1 -type d -empty -delete
	while read -r name count after; do
		mkdir -p "$dir/$name"
		cp "$tmp/$name"/*.patch "$dir/$name/"   # with its cover letter
	done < <(topics_table)
else
	fmt "$tmp/out" base..HEAD --no-numbered
	# Replace patches/ as a whole so that dropped patches disappear too.
	mkdir -p "$dir"
	find "$dir" -maxdepth 1 -name '*.patch' -delete
	for f in "$tmp/out"/*.patch; do
		[ -e "$f" ] || break
		cp "$f" "$dir/"
		echo "${f##*/}" >>"$tmp/series"
	done
fi
n=$(wc -l <"$tmp/series")
cp "$tmp/series" "$dir/series"
set_tree_state "$tree" exported-head "$(git -C "$tree" rev-parse HEAD)"
log "exported $n patches to ${dir#"$REPO"/}/"
