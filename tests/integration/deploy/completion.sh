#!/bin/sh
# packaging/bash-completion/inbox, in bash: it offers every command `inbox
# help` lists (and help, --version), every option each command's --help
# names, dlq's subcommands, the consumers of the config on the line after
# --consumer, and *.yaml files for CONFIG.
#   completion.sh INBOX_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$(dirname "$0")/lib.sh"
command -v bash >/dev/null || { echo "FAIL bash is missing"; echo "0 passed, 1 failed"; exit 1; }
dir=$(mktmp)
comp="$SRC/packaging/bash-completion/inbox"
cat >"$dir/two.yaml" <<'CFG'
store: sqlite:x.db
consumers:
  - name: billing.a
    source: jsonl:a.jsonl
    effect: {sql: "SELECT 1"}
  - name: "shipping.b"   # quoted, with a comment
    source: jsonl:b.jsonl
    effect: {sql: "SELECT 1"}
CFG
: >"$dir/other.yml"
: >"$dir/notes.txt"

# complete WORD...: what the completion offers for the words (the last
# one being completed; EMPTY for an empty word), one per line.
complete_words() {
	(cd "$dir" && bash -c '
		. "$1"; shift
		COMP_WORDS=(); for w in "$@"; do [ "$w" = EMPTY ] && w=""; COMP_WORDS+=("$w"); done
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		_inbox; printf "%s\n" "${COMPREPLY[@]}"' bash "$comp" "$@")
}
# offers WORD... : EXPECTED...: every EXPECTED is offered.
offers() {
	_w=""
	while [ "$1" != : ]; do _w="$_w $1"; shift; done
	shift
	# shellcheck disable=SC2086
	complete_words $_w >"$dir/got"
	_miss=""
	for _e in "$@"; do grep -qx -- "$_e" "$dir/got" || _miss="$_miss $_e"; done
	[ -z "$_miss" ] && return 0
	echo "     not offered:$_miss (offered: $(tr '\n' ' ' <"$dir/got"))"
	return 1
}

cmds=$("$BIN" help | awk '/^commands:/ { f = 1; next } f && /^$/ { exit } f && /^  [a-z]/ { print $1 }')
n=$(echo "$cmds" | wc -l | tr -d ' ')
[ "$n" -ge 8 ] || fail "inbox help lists the commands" "got: $cmds"
# shellcheck disable=SC2086
check "every command inbox help lists ($n) is offered" offers "$BIN" EMPTY : $cmds help --version
check "a prefix narrows them (di: dispatch)" offers "$BIN" di : dispatch
complete_words "$BIN" di >"$dir/got"
expect_eq "... and only them" "$(grep -c . "$dir/got")" 1
check "after help: the commands" offers "$BIN" help EMPTY : $cmds
for c in $cmds; do
	opts=$("$BIN" "$c" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
	[ -n "$opts" ] || continue
	# shellcheck disable=SC2086
	check "inbox $c --: its options ($(echo $opts | wc -w | tr -d ' '))" offers "$BIN" "$c" -- : $opts --help
done
check "inbox run --: --once, --metrics, --drain-timeout" offers "$BIN" run -- : --once --metrics --drain-timeout
check "inbox check --: --connect" offers "$BIN" check -- : --connect
check "inbox dlq: its subcommands" offers "$BIN" dlq EMPTY : list show replay drop
check "CONFIG: the .yaml and .yml files" offers "$BIN" run EMPTY : two.yaml other.yml
complete_words "$BIN" run EMPTY >"$dir/got"
check "... not the others" sh -c "! grep -qx notes.txt '$dir/got'"
check "--consumer: the config's consumers" offers "$BIN" stats two.yaml --consumer EMPTY : billing.a shipping.b
summary
