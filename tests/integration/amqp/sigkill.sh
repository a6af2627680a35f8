#!/bin/sh
# SIGKILL the daemon at random points while it consumes a RabbitMQ queue,
# restart it, five times; then let it finish. Every order has exactly one
# invoice (the table has no unique constraint, so a double effect would
# show), none is missing, and every message was acked in the end.
#   sigkill.sh INBOX_BIN AMQP_PUBLISH
set -u
BIN=$1
PUB=$2
. "$(dirname "$0")/lib.sh"
need_amqp

ORDERS=2000
DUPS=200
dir=$(mktmp)
trap cleanup EXIT
q=$(new_queue kill)
gen_orders "$dir/orders.jsonl" $ORDERS $DUPS 0
sent=$("$PUB" "$AMQP" publish "$q" <"$dir/orders.jsonl")
expect_eq "published $((ORDERS + DUPS)) messages" "$sent" $((ORDERS + DUPS))
write_config "$dir/inbox.yaml" "sqlite:$dir/t.db" "$AMQP/$q?declare=1" \
	invoices "" 10 20ms
count() { sq "$dir/t.db" "$1" 2>/dev/null; }
echo "# queue $q, dir $dir"

killed=0
for round in 1 2 3 4 5; do
	start_daemon "$dir/inbox.yaml" "$dir/daemon.log"
	ms=$(rand_between 300 900)
	sleep_ms "$ms"
	kill_daemon "$pid"
	[ "$rc" -eq 137 ] && killed=$((killed + 1))
	echo "# round $round: SIGKILL after ${ms} ms, exit status $rc," \
		"$(count "SELECT COUNT(*) FROM invoices") rows"
done
check "killed mid-stream 5 times ($killed)" [ "$killed" -eq 5 ]
mid=$(count "SELECT COUNT(DISTINCT order_id) FROM invoices")
check "the kills interrupted the stream ($mid of $ORDERS done)" \
	[ "$mid" -gt 0 -a "$mid" -lt $ORDERS ]

done_all() {
	[ "$(count "SELECT COUNT(DISTINCT order_id) FROM invoices")" = $ORDERS ] &&
		[ "$(ready "$q")" = 0 ]
}
start_daemon "$dir/inbox.yaml" "$dir/daemon.log"
check "the last run applies every order" wait_until 90 done_all
sleep 1 # the duplicates still prefetched are dropped and acked
stop_daemon "$pid"
expect_eq "the last run drains and exits 0 on SIGTERM" "$rc" 0

rows=$(count "SELECT COUNT(*) FROM invoices")
distinct=$(count "SELECT COUNT(DISTINCT order_id) FROM invoices")
doubled=$(count "SELECT COUNT(*) FROM (SELECT order_id FROM invoices
                 GROUP BY order_id HAVING COUNT(*) > 1)")
expect_eq "no order billed twice" "$doubled" 0
expect_eq "one invoice per order: rows" "$rows" $ORDERS
expect_eq "one invoice per order: distinct orders" "$distinct" $ORDERS
expect_eq "every message acked: queue empty" "$(ready "$q")" 0
stats=$("$BIN" stats "$dir/inbox.yaml" --json 2>&1)
case "$stats" in
*"\"completed\":$ORDERS,"*) ok "inbox stats: $ORDERS completed records" ;;
*) fail "inbox stats: $ORDERS completed records" "$stats" ;;
esac
expect_eq "no dead letters" \
	"$(count "SELECT COUNT(*) FROM dead_letters")" 0
clean_logs "no error or sanitizer report logged" "$dir/daemon.log"
summary
