#!/bin/sh
# The dispatcher keeps several calls in flight, never more than its limit
# per provider: 20 orders (a charge and an email each, both at the same
# provider, scheme://host:port) against a provider answering after
# 300 ms. With dispatch: {concurrency: 4} the provider sees exactly 4
# calls at once at most and more than one; with the default (32) many
# more. Every row is done once; no email ever goes on a reused
# connection (providers without idempotency get a fresh one each time).
#   concurrency.sh INBOX_BIN PROVIDER_BIN
set -u
BIN=$1
PROV=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/dispatch_lib.sh"

ORDERS=20
dir=$(mktmp)
trap 'stop_provider' EXIT
start_provider "$dir" --latency-ms 300 --seed 5 || exit 1

# run_with NAME DISPATCH [ORDERS]: fresh database and provider counters,
# ORDERS orders consumed, then `inbox dispatch --drain`; its time in
# $secs.
run_with() {
	n=${3:-$ORDERS}
	orders "$dir/$1.jsonl" "$n"
	curl -s -X POST "http://127.0.0.1:$PROV_PORT/control/reset" >/dev/null
	outbox_config "$dir/$1.yaml" "sqlite:$dir/$1.db" \
		"jsonl:$dir/$1.jsonl?checkpoint=$dir/$1.checkpoint" "" "$2"
	"$BIN" run "$dir/$1.yaml" --once 2>"$dir/$1.run.log"
	expect_eq "$1: the consumer reads the orders" "$?" 0
	t0=$(now_ms)
	"$BIN" dispatch "$dir/$1.yaml" --drain --timeout 60s 2>"$dir/$1.dispatch.log"
	expect_eq "$1: dispatch --drain exits 0" "$?" 0
	secs=$(awk -v ms=$(($(now_ms) - t0)) 'BEGIN { printf "%.2f", ms / 1000 }')
	expect_eq "$1: every row done" \
		"$(sq "$dir/$1.db" "SELECT count(*) FROM outbox WHERE state = 'done'")" $((2 * n))
	expect_eq "$1: each order charged once" "$(pstat pay.charges)" "$n"
	expect_eq "$1: no payment key sent twice" "$(pstat pay.keys_requested_twice)" 0
	expect_eq "$1: each order emailed once" "$(pstat email.sent)" "$n"
	expect_eq "$1: one email request per order" "$(pstat email.requests)" "$n"
	expect_eq "$1: no email on a reused connection" "$(pstat email.on_reused_connection)" 0
	max=$(pstat in_flight_max)
	echo "# $1: $((2 * n)) calls in $secs s, at most $max in flight at the provider"
}

D="timeout: 2s, connect_timeout: 1s, backoff: 100ms, lease: 6s, poll: 50ms"
run_with limited "{$D, concurrency: 4}"
expect_eq "concurrency 4: the provider saw 4 calls at once at most (and reached it)" "$max" 4
run_with default "{$D}"
check "default concurrency: more than 4 calls at once ($max), at most 32" \
	[ "$max" -gt 4 -a "$max" -le 32 ]
run_with sequential "{$D, concurrency: 1}" 4
expect_eq "concurrency 1: one call at a time" "$max" 1
summary
