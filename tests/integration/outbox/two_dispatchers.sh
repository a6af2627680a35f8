#!/bin/sh
# Two `inbox dispatch` processes on one PostgreSQL store at the same time
# (FOR UPDATE SKIP LOCKED): every row is performed by exactly one of them
# — the provider sees each email once and each payment key once — and
# both did part of the work.
#   two_dispatchers.sh INBOX_BIN PROVIDER_BIN pg
set -u
BIN=$1
PROV=$2
. "$(dirname "$0")/lib.sh"
need_pg

ORDERS=300
dir=$(mktmp)
tag="obtwo$$_"
trap 'stop_provider; pg_drop_prefix "$tag"' EXIT
start_provider "$dir" --seed 3 || exit 1
orders "$dir/orders.jsonl" $ORDERS
BATCH=100 outbox_config "$dir/inbox.yaml" "$INBOX_TEST_PG_URL" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/orders.checkpoint" "$tag" \
	"{batch: 4, timeout: 2s, connect_timeout: 1s, backoff: 100ms, poll: 20ms}"
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log"
expect_eq "the consumer reads the orders" "$?" 0
expect_eq "two rows per order" \
	"$(pgq "SELECT count(*) FROM ${tag}outbox WHERE state = 'pending'")" \
	$((2 * ORDERS))

"$BIN" dispatch "$dir/inbox.yaml" --drain --timeout 60s 2>"$dir/a.log" &
pa=$!
"$BIN" dispatch "$dir/inbox.yaml" --drain --timeout 60s 2>"$dir/b.log" &
pb=$!
wait $pa
ra=$?
wait $pb
rb=$?
expect_eq "dispatcher a exits 0" "$ra" 0
expect_eq "dispatcher b exits 0" "$rb" 0

expect_eq "all rows done" \
	"$(pgq "SELECT count(*) FROM ${tag}outbox WHERE state = 'done'")" \
	$((2 * ORDERS))
expect_eq "no row claimed twice (attempts all 1)" \
	"$(pgq "SELECT count(*) FROM ${tag}outbox WHERE attempts <> 1")" 0
expect_eq "emails sent: one per order" "$(pstat email.sent)" $ORDERS
expect_eq "email requests: one per row" "$(pstat email.requests)" $ORDERS
expect_eq "payment requests: one per row" "$(pstat pay.requests)" $ORDERS
expect_eq "no payment key requested twice" \
	"$(pstat pay.keys_requested_twice)" 0
claimed() {
	grep -o '"claimed":[0-9]*' "$1" | cut -d: -f2 | head -1
}
ca=$(claimed "$dir/a.log")
cb=$(claimed "$dir/b.log")
echo "# rows claimed: a=$ca b=$cb"
expect_eq "between them they claimed every row once" \
	"$((ca + cb))" $((2 * ORDERS))
check "both dispatchers did part of the work" [ "$ca" -gt 0 -a "$cb" -gt 0 ]
summary
