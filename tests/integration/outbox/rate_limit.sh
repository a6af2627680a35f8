#!/bin/sh
# A provider's rate limit holds: 30 charges with providers: [{rate: 10,
# burst: 1}] — without the limit they would all go at once (concurrency
# 32); with it no one-second window holds more than 11 requests (the
# burst plus 10 a second) and the 30 take about 2.9 s (29 gaps of 0.1 s).
# Then the config checks of providers: (exit 3, before anything is sent).
#   rate_limit.sh INBOX_BIN PROVIDER_BIN
set -u
BIN=$1
PROV=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dispatch_lib.sh"

ORDERS=30
dir=$(mktmp)
trap 'stop_provider' EXIT
start_provider "$dir" --seed 13 || exit 1
orders "$dir/orders.jsonl" $ORDERS
pay_config "$dir/inbox.yaml" "sqlite:$dir/t.db" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/orders.checkpoint" "" \
	"{timeout: 2s, backoff: 100ms, poll: 50ms}" \
	"  - url: http://127.0.0.1:$PROV_PORT/any/path
    rate: 10
    burst: 1"
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log"
expect_eq "the consumer reads the orders" "$?" 0
"$BIN" dispatch "$dir/inbox.yaml" --drain --timeout 60s 2>"$dir/dispatch.log"
expect_eq "dispatch --drain exits 0" "$?" 0
expect_eq "each order charged once" "$(pstat pay.charges)" $ORDERS
expect_eq "one request per row" "$(pstat pay.requests)" $ORDERS
expect_eq "no row put back (they wait in the dispatcher)" \
	"$(sq "$dir/t.db" "SELECT max(attempts) FROM outbox")" 1
plog "$dir/log.json"
jq -r '.[].t' "$dir/log.json" | sort -n >"$dir/times"
# The most requests in any window [t, t + 1 s).
most=$(awk '{ t[NR] = $1 } END {
	m = 0; j = 1
	for (i = 1; i <= NR; i++) {
		while (t[i] - t[j] >= 1.0) j++
		if (i - j + 1 > m) m = i - j + 1
	}
	print m }' "$dir/times")
span=$(awk 'NR == 1 { a = $1 } { b = $1 } END { printf "%.2f", b - a }' "$dir/times")
echo "# $ORDERS requests over $span s, at most $most in one second"
check "at most 11 requests in any second ($most)" [ "$most" -le 11 ]
check "the 30 took at least 2.8 s, about 29 x 0.1 s ($span)" \
	awk -v s="$span" 'BEGIN { exit !(s >= 2.8) }'

# ---- config errors ---------------------------------------------------------
cfg_err() { # NAME PROVIDERS_YAML MESSAGE
	pay_config "$dir/$1.yaml" "sqlite:$dir/c.db" "jsonl:$dir/orders.jsonl" "" \
		"{timeout: 2s}" "$2"
	out=$("$BIN" dispatch "$dir/$1.yaml" --once 2>&1)
	st=$?
	case "$out" in
	*"$3"*) expect_eq "$1: exit 3 ($3)" "$st" 3 ;;
	*) fail "$1: $3" "$out" ;;
	esac
}
cfg_err bad_url "  - url: mailto:x@example.com" "an http:// or https:// URL with a host is required"
cfg_err twice "  - url: http://Pay.example/a
  - url: http://pay.example:80/b" "provider http://pay.example:80 is declared twice"
cfg_err rate "  - url: http://pay.example
    rate: 0" "is not a number of calls per second"
cfg_err key "  - url: http://pay.example
    limit: 3" "limit"
cfg_err breaker "  - url: http://pay.example
    breaker: {failures: 3, open: 5s, max_open: 1s}" "max_open is below open"
expect_eq "nothing was sent by the config errors" "$(pstat pay.requests)" $ORDERS
summary
