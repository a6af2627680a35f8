#!/bin/sh
# Retry-After on 429 and 503 is honoured, in seconds and as an HTTP-date:
# the refused row is not tried again before it, and no other call goes to
# that provider meanwhile — rows that come due during the pause wait too
# (put back unperformed, without counting an attempt).
#   1. a charge answered 429 with "Retry-After: 2";
#   2. a charge answered 503 with a Retry-After HTTP-date 3 s ahead.
# Each time a dispatcher runs in the background, the first order's charge
# is refused, three more orders are consumed while it waits; then every
# later request must come after the pause.
#   retry_after.sh INBOX_BIN PROVIDER_BIN
set -u
BIN=$1
PROV=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dispatch_lib.sh"

dir=$(mktmp)
dpid=""
cleanup() {
	[ -n "$dpid" ] && kill -TERM "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
	dpid=""
	stop_provider
}
exit_trap=cleanup
trap cleanup EXIT
start_provider "$dir" --seed 7 || exit 1

# pause_case NAME KIND RETRY_AFTER: see above. Sets t429 (epoch seconds of
# the refused request) and tnext (the first request after it).
pause_case() {
	name=$1
	curl -s -X POST "http://127.0.0.1:$PROV_PORT/control/reset" >/dev/null
	: >"$dir/$name.jsonl"
	pay_config "$dir/$name.yaml" "sqlite:$dir/$name.db" \
		"jsonl:$dir/$name.jsonl?checkpoint=$dir/$name.checkpoint" "" \
		"{timeout: 2s, backoff: 100ms, max_backoff: 10s, poll: 50ms}"
	orders "$dir/all.jsonl" 4
	head -1 "$dir/all.jsonl" >"$dir/$name.jsonl"
	pfault_ra pay "$2" 1 "$3"
	"$BIN" run "$dir/$name.yaml" --once 2>"$dir/$name.run.log"
	"$BIN" dispatch "$dir/$name.yaml" 2>"$dir/$name.dispatch.log" &
	dpid=$!
	want_status=$2
	refused() {
		plog "$dir/$name.log"
		jqok "map(select(.status == $want_status)) | length == 1" "$dir/$name.log"
	}
	if ! wait_until 10 refused; then
		fail "$name: the first charge is refused ($2)" "$(cat "$dir/$name.log")"
		return
	fi
	# Three more orders become due while the provider is paused.
	cp "$dir/all.jsonl" "$dir/$name.jsonl"
	"$BIN" run "$dir/$name.yaml" --once 2>>"$dir/$name.run.log"
	all_done() {
		[ "$(sq "$dir/$name.db" "SELECT count(*) FROM outbox WHERE state = 'done'")" = 4 ]
	}
	check "$name: every row is done in the end" wait_until 20 all_done
	kill -TERM "$dpid" 2>/dev/null
	wait "$dpid" 2>/dev/null
	expect_eq "$name: SIGTERM: dispatch exits 0" "$?" 0
	dpid=""
	plog "$dir/$name.log"
	t429=$(jq -r "map(select(.status == 429 or .status == 503)) | .[0].t" "$dir/$name.log")
	tnext=$(jq -r "map(select(.status != 429 and .status != 503)) | map(.t) | min" "$dir/$name.log")
	key=$(jq -r "map(select(.status == 429 or .status == 503)) | .[0].key" "$dir/$name.log")
	again=$(jq -r --arg k "$key" "map(select(.key == \$k)) | .[1].t" "$dir/$name.log")
	expect_eq "$name: the provider charged each order once" "$(pstat pay.charges)" 4
	expect_eq "$name: five requests (one refused, then one per row)" "$(pstat pay.requests)" 5
	expect_eq "$name: the refused row took two attempts, the others one" \
		"$(sq "$dir/$name.db" "SELECT group_concat(attempts, ',') FROM (SELECT attempts FROM outbox ORDER BY attempts DESC)")" \
		"2,1,1,1"
	echo "# $name: refused at $t429, tried again at $again, next request at $tnext"
}

pause_case seconds 429 2
check "429 + Retry-After: 2 — the row is not tried again before 2 s" \
	awk -v a="$again" -v b="$t429" 'BEGIN { exit !(a - b >= 2.0) }'
check "429 + Retry-After: 2 — nothing is sent to the provider before 2 s" \
	awk -v a="$tnext" -v b="$t429" 'BEGIN { exit !(a - b >= 2.0) }'
expect_eq "the dispatcher logged the pause, once" \
	"$(grep -c '"event":"provider","provider":"http://127.0.0.1:'"$PROV_PORT"'","state":"retry_after","ms":2000' "$dir/seconds.dispatch.log")" 1

pause_case date 503 date:3
# The date is whole seconds: at least floor(t) + 3 of the refusal.
check "503 + Retry-After: HTTP-date — the row is not tried again before that date" \
	awk -v a="$again" -v b="$t429" 'BEGIN { exit !(a >= int(b) + 3) }'
check "503 + Retry-After: HTTP-date — nothing is sent to the provider before it" \
	awk -v a="$tnext" -v b="$t429" 'BEGIN { exit !(a >= int(b) + 3) }'
summary
