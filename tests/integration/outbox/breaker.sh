#!/bin/sh
# The circuit breaker of a provider that fails everything: 10 charges, the
# payment API answering 500 to every request. With providers:
# [{breaker: {failures: 3, open: 2s}}] the breaker opens after the first
# failures (gauge inbox_provider_breaker_state 1): no request reaches the
# provider while it is open; the rows are put back unperformed, no
# attempt counted. After 2 s it half-opens: one trial call, which fails:
# open again, for 4 s. Then the provider recovers: the next trial
# succeeds, the breaker closes (0) and every row is charged once. The
# provider's request log shows the pauses (timing checks are lower
# bounds only: a slow machine cannot make them fail).
#   breaker.sh INBOX_BIN PROVIDER_BIN
set -u
BIN=$1
PROV=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dispatch_lib.sh"
need_promtool

ORDERS=10
dir=$(mktmp)
dpid=""
cleanup() {
	[ -n "$dpid" ] && kill -TERM "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
	dpid=""
	stop_provider
}
exit_trap=cleanup
trap cleanup EXIT
start_provider "$dir" --seed 11 || exit 1
orders "$dir/orders.jsonl" $ORDERS
pay_config "$dir/inbox.yaml" "sqlite:$dir/t.db" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/orders.checkpoint" "" \
	"{timeout: 1s, backoff: 100ms, max_backoff: 200ms, max_attempts: 20, poll: 50ms}" \
	"  - url: http://127.0.0.1:$PROV_PORT
    breaker: {failures: 3, open: 2s, max_open: 10s}"
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log"
expect_eq "the consumer reads the orders" "$?" 0

pfault pay 500 100000
"$BIN" dispatch "$dir/inbox.yaml" --metrics 127.0.0.1:0 2>"$dir/dispatch.log" &
dpid=$!
if ! listening_port "$dir/dispatch.log" "$dpid"; then
	fail "dispatch --metrics starts" "$(tail -5 "$dir/dispatch.log")"
	summary
fi
P="provider=\"http://127.0.0.1:$PROV_PORT\""
m() { # FAMILY: the provider's sample
	get /metrics >"$dir/m.txt"
	awk -v k="$1{$P}" '$1 == k { print $2 }' "$dir/m.txt"
}
state_is() { [ "$(m inbox_provider_breaker_state)" = "$1" ]; }

check "the breaker opens (inbox_provider_breaker_state 1)" wait_until 10 state_is 1
promtool_ok "$dir/m.txt" dispatch
reopened() { [ "$(m inbox_provider_breaker_opens_total)" = 2 ]; }
check "it half-opens, the trial fails, it opens again" wait_until 15 reopened
expect_eq "open again (1)" "$(m inbox_provider_breaker_state)" 1
expect_eq "one trial so far" "$(m inbox_provider_breaker_trials_total)" 1

pclear # the provider recovers
closed() {
	state_is 0 &&
		[ "$(sq "$dir/t.db" "SELECT count(*) FROM outbox WHERE state = 'done'")" = $ORDERS ]
}
check "the next trial succeeds: closed (0), every row done" wait_until 30 closed
expect_eq "every open ended with one trial (trials_total = opens_total)" \
	"$(m inbox_provider_breaker_trials_total)" "$(m inbox_provider_breaker_opens_total)"
check "rows were put back while it was open (inbox_provider_rejected_total > 0)" \
	[ "$(m inbox_provider_rejected_total)" -gt 0 ]
expect_eq "calls_total = the provider's requests" \
	"$(m inbox_provider_calls_total)" "$(pstat pay.requests)"
expect_eq "failures_total = the 500s" "$(m inbox_provider_failures_total)" \
	"$(curl -s "http://127.0.0.1:$PROV_PORT/stats" | jq '.pay.faults["500"]')"
expect_eq "each order charged once" "$(pstat pay.charges)" $ORDERS
expect_eq "rows put back cost no attempt: attempts = the provider's requests" \
	"$(sq "$dir/t.db" "SELECT sum(attempts) FROM outbox")" "$(pstat pay.requests)"
expect_eq "no dead letter" "$(sq "$dir/t.db" "SELECT count(*) FROM dead_letters")" 0
kill -TERM "$dpid" 2>/dev/null
wait "$dpid" 2>/dev/null
expect_eq "SIGTERM: dispatch exits 0" "$?" 0
dpid=""
states=$(sed -n 's/.*"event":"provider",.*"state":"\([a-z_]*\)".*/\1/p' "$dir/dispatch.log" | tr '\n' ' ')
expect_eq "the breaker's changes are logged" "$states" \
	"breaker_open breaker_half_open breaker_open breaker_half_open breaker_closed "

# When the requests came: the 10 first attempts at once; then nothing for
# the open time after the third failure (the breaker opened when its
# answer came, after the request); one trial; then nothing for twice the
# open time.
plog "$dir/log.json"
jq -r '.[].t' "$dir/log.json" | sort -n >"$dir/times"
t() { sed -n "${1}p" "$dir/times"; }
expect_eq "the first 10 requests are the 10 rows' first attempts" \
	"$(jq '.[0:10] | map(.key) | unique | length' "$dir/log.json")" 10
echo "# requests at: 3rd $(t 3), 10th $(t 10), 11th $(t 11), 12th $(t 12)"
check "open: no request for 2 s after the third failure (11th - 3rd >= 2 s)" \
	awk -v a="$(t 11)" -v b="$(t 3)" 'BEGIN { exit !(a - b >= 2.0) }'
check "the failed trial opened it for 4 s (12th - 11th >= 4 s)" \
	awk -v a="$(t 12)" -v b="$(t 11)" 'BEGIN { exit !(a - b >= 4.0) }'
echo "# provider: $(curl -s "http://127.0.0.1:$PROV_PORT/stats" | jq -c .pay)"
summary
