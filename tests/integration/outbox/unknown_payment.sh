#!/bin/sh
# An unknown outcome on the payment call: the provider charges, then
# answers after the client gave up (timeout) — or drops the connection.
# The dispatcher retries with the *same* idempotency key, the provider
# answers with the stored first response, and charges once.
#   unknown_payment.sh INBOX_BIN PROVIDER_BIN
set -u
BIN=$1
PROV=$2
. "$(dirname "$0")/lib.sh"

dir=$(mktmp)
trap 'stop_provider' EXIT
start_provider "$dir" --slow-ms 1500 --seed 1 || exit 1
orders "$dir/orders.jsonl" 2
outbox_config "$dir/inbox.yaml" "sqlite:$dir/t.db" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/orders.checkpoint" ""

"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log"
expect_eq "the consumer reads both orders" "$?" 0
expect_eq "two outbox rows per order, pending" \
	"$(sqlite3 "$dir/t.db" "SELECT count(*) FROM outbox WHERE state = 'pending'")" 4

pfault pay timeout 1 # order 1: charged, answered too late
pfault pay drop 1    # order 2: charged, connection dropped
"$BIN" dispatch "$dir/inbox.yaml" --drain --timeout 30s 2>"$dir/dispatch.log"
expect_eq "dispatch --drain exits 0" "$?" 0

expect_eq "the provider charged each order once" "$(pstat pay.charges)" 2
expect_eq "no order charged twice" "$(pstat pay.orders_charged_twice)" 0
expect_eq "two requests per order reached the provider" "$(pstat pay.requests)" 4
expect_eq "the retries carried the same keys (2 keys in all)" "$(pstat pay.keys)" 2
expect_eq "the retries got the stored first answers" "$(pstat pay.replays)" 2
expect_eq "no 409: the same key came with the same body" "$(pstat pay.conflicts)" 0
expect_eq "both charge rows done after 2 attempts" \
	"$(sqlite3 "$dir/t.db" "SELECT group_concat(state || ':' || attempts) FROM outbox WHERE step = 'charge'")" \
	"done:2,done:2"
check "the unknown outcomes were logged" \
	grep -q '"step":"charge".*"state":"unknown"' "$dir/dispatch.log"
check "the stored response is the first charge" \
	sh -c "sqlite3 '$dir/t.db' \"SELECT CAST(response AS TEXT) FROM outbox WHERE step = 'charge'\" | grep -q chargeId"
expect_eq "every email sent once" "$(pstat email.sent)" 2
summary
