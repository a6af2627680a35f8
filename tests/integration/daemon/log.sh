#!/bin/sh
# The command's log: the library raises events, the CLI's writer
# (src/cli/log.c) prints them on stderr as one JSON object per line — ts,
# level, consumer (left out for process-level events, never ""), event,
# then the event's fields. INBOX_LOG_LEVEL filters; a value that names no
# level is a config error (exit 3) before anything is consumed.
#   log.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"

# jqs FILTER FILE: jq -e FILTER over the lines of FILE as one array.
jqs() {
	[ -s "$2" ] && jq -e -s "$1" "$2" >/dev/null 2>&1 # [] | all is true
}

dir=$(mktmp)
gen_orders "$dir/orders.jsonl" 30 3 0
ck=$dir/cp
write_config "$dir/c.yaml" "sqlite:$dir/t.db" \
	"jsonl:$dir/orders.jsonl?checkpoint=$ck" invoices "" 10 0ms

# An invalid level: exit 3 with a message naming it and the valid ones.
for bad in verbose INFO warning; do
	INBOX_LOG_LEVEL=$bad "$BIN" run "$dir/c.yaml" --once >"$dir/bad.out" 2>&1
	expect_eq "INBOX_LOG_LEVEL=$bad: exit 3" "$?" 3
	check "INBOX_LOG_LEVEL=$bad: the message names it and the valid ones" \
		grep -q "inbox: error: INBOX_LOG_LEVEL=\"$bad\" is not a log level (valid: debug, info, warn, error)" "$dir/bad.out"
done
check "an invalid level: nothing consumed" [ ! -e "$ck" ]

# A checkpoint beyond the end of the file: the JSONL source (library code)
# raises jsonl_restart; the writer prints it.
restart_run() {
	echo "999999 5000" >"$ck"
	INBOX_LOG_LEVEL=$1 "$BIN" run "$dir/c.yaml" --once \
		--metrics 127.0.0.1:0 2>"$dir/$2.log"
	expect_eq "INBOX_LOG_LEVEL=$1: exit 0" "$?" 0
}

restart_run debug debug
log=$dir/debug.log
check "every line is one JSON object" \
	jqs 'length > 10 and all(type == "object")' "$log"
check "the JSONL source's event is printed" grep -q \
	"^{\"ts\":\"[0-9-]*T[0-9:.]*Z\",\"level\":\"warn\",\"consumer\":\"billing.test\",\"event\":\"jsonl_restart\",\"path\":\"$dir/orders.jsonl\",\"reason\":\"checkpoint beyond the end" "$log"
check "a process-level line has no consumer" grep -q \
	'^{"ts":"[^"]*","level":"info","event":"metrics_listening","listen":"127\.0\.0\.1:[0-9]*",' "$log"
check "no line has an empty consumer" sh -c "! grep -q '\"consumer\":\"\"' '$log'"
check "ts, level, [consumer,] event come first" jqs 'all(
	(keys_unsorted[0:2] == ["ts", "level"]) and
	(if has("consumer") then keys_unsorted[2:4] == ["consumer", "event"]
	 else keys_unsorted[2] == "event" end))' "$log"
check "debug: one message line per line read" \
	jqs '[.[] | select(.event == "message")] | length == 33' "$log"

restart_run warn warn
check "warn: the warning is printed" grep -q '"event":"jsonl_restart"' "$dir/warn.log"
check "warn: nothing below warn" \
	jqs 'all(.level == "warn" or .level == "error")' "$dir/warn.log"

restart_run "" default
check "unset or empty: info" grep -q '"level":"info","consumer":"billing.test","event":"batch"' "$dir/default.log"
check "unset or empty: no debug" sh -c "! grep -q '\"level\":\"debug\"' '$dir/default.log'"

summary
