#!/bin/sh
# The seed's story end to end ("the customer charged twice"): order-
# confirmed events, each published 2-4 times (copies and producer retries
# with new ids), consumed by `inbox run` (an invoice row in the inbox's
# transaction + a charge and an email in the outbox) and dispatched by
# `inbox dispatch` — and by `inbox run --dispatch` in some rounds — while
# both are SIGKILLed at random points and restarted, and the provider
# injects faults (perform then time out, perform then drop, 500, 429) at
# random. At the end, for every order: exactly one invoice, exactly one
# charge performed by the provider, exactly one email sent.
#   chaos.sh INBOX_BIN PROVIDER_BIN sqlite|pg
set -u
BIN=$1
PROV=$2
MODE=$3
. "$(dirname "$0")/lib.sh"
[ "$MODE" = pg ] && need_pg

ORDERS=${ORDERS:-200}
ROUNDS=${ROUNDS:-8}
dir=$(mktmp)
tag="obchaos$$_"
seed=${SEED:-$(rand_between 1 60000)}
faults="timeout=0.06,drop=0.06,500=0.05,429=0.05"
if [ "$MODE" = pg ]; then
	store=$INBOX_TEST_PG_URL
	prefix=$tag
	q() { pgq "$1"; }
	trap 'stop_provider; pg_drop_prefix "$tag"' EXIT
else
	store="sqlite:$dir/t.db"
	prefix=""
	q() { sqlite3 "$dir/t.db" "$1"; }
	trap 'stop_provider' EXIT
fi
start_provider "$dir" --slow-ms 900 --seed "$seed" \
	--fault "pay:$faults" --fault "email:$faults" || exit 1
orders "$dir/orders.jsonl" "$ORDERS" 2 4 "$seed"
lines=$(wc -l <"$dir/orders.jsonl" | tr -d ' ')
BATCH=10 PAUSE=80ms outbox_config "$dir/inbox.yaml" "$store" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/orders.checkpoint" "$prefix" \
	"{max_attempts: 30, timeout: 500ms, connect_timeout: 300ms, backoff: 100ms, max_backoff: 800ms, lease: 3s, poll: 50ms}"
echo "# $ORDERS orders, $lines events, mode $MODE, seed $seed, dir $dir"

kills=0
# kill_at PID MS: SIGKILL after MS milliseconds; counts a kill that hit.
kill_at() {
	sleep_ms "$2"
	kill_daemon "$1"
	[ "$rc" -eq 137 ] && kills=$((kills + 1))
	echo "#   pid $1: SIGKILL after ${2} ms, exit status $rc"
}
for round in $(seq 1 "$ROUNDS"); do
	extra=""
	[ $((round % 3)) -eq 0 ] && extra="--dispatch"
	"$BIN" run "$dir/inbox.yaml" --once $extra 2>>"$dir/run.log" &
	pr=$!
	"$BIN" dispatch "$dir/inbox.yaml" 2>>"$dir/dispatch.log" &
	pd=$!
	echo "# round $round: run $extra (pid $pr), dispatch (pid $pd)"
	t1=$(rand_between 200 1200)
	t2=$(rand_between 0 800)
	if [ $((round % 2)) -eq 0 ]; then
		kill_at "$pr" "$t1"
		kill_at "$pd" "$t2"
	else
		kill_at "$pd" "$t1"
		kill_at "$pr" "$t2"
	fi
done

run_to_end "$dir/inbox.yaml" "$dir/run.log"
expect_eq "the last run reaches the end and exits 0" "$rc" 0
"$BIN" dispatch "$dir/inbox.yaml" --drain --timeout 120s 2>>"$dir/dispatch.log"
expect_eq "dispatch --drain empties the outbox and exits 0" "$?" 0
check "killed mid-way at least $ROUNDS times ($kills of $((2 * ROUNDS)))" \
	[ "$kills" -ge "$ROUNDS" ]

inv="${prefix}invoices"
expect_eq "one invoice per order: rows" "$(q "SELECT count(*) FROM $inv")" "$ORDERS"
expect_eq "one invoice per order: distinct" \
	"$(q "SELECT count(DISTINCT order_id) FROM $inv")" "$ORDERS"
expect_eq "charges performed by the provider" "$(pstat pay.charges)" "$ORDERS"
expect_eq "orders charged" "$(pstat pay.orders)" "$ORDERS"
expect_eq "orders charged twice" "$(pstat pay.orders_charged_twice)" 0
expect_eq "idempotency keys reused with another body (409)" \
	"$(pstat pay.conflicts)" 0
expect_eq "emails sent by the provider" "$(pstat email.sent)" "$ORDERS"
expect_eq "orders emailed" "$(pstat email.orders)" "$ORDERS"
expect_eq "orders emailed twice" "$(pstat email.orders_emailed_twice)" 0
expect_eq "outbox rows done" \
	"$(q "SELECT count(*) FROM ${prefix}outbox WHERE state = 'done'")" \
	$((2 * ORDERS))
expect_eq "dead letters" "$(q "SELECT count(*) FROM ${prefix}dead_letters")" 0
check "no error logged by the consumers" \
	sh -c "! grep -q '\"level\":\"error\"' '$dir/run.log'"
echo "# provider: $(curl -s "http://127.0.0.1:$PROV_PORT/stats")"
echo "# outbox: attempts $(q "SELECT sum(attempts) FROM ${prefix}outbox"), reconciliations $(q "SELECT sum(reconciliations) FROM ${prefix}outbox"), fenced $(grep -c outbox_fenced "$dir/dispatch.log")"
summary
