#!/bin/sh
# SIGKILL the daemon at random points while it consumes a JetStream
# durable, restart it, five times; at the end every order has exactly one
# invoice (no unique constraint: a double effect would show), none is
# missing, and the durable has nothing pending or unacknowledged.
#   sigkill.sh INBOX_BIN NATS_PUBLISH_BIN
set -u
BIN=$1
PUB=$2
. "$(dirname "$0")/lib.sh"
need_nats_server

ORDERS=2000
dir=$(mktmp)
trap cleanup EXIT
trap 'exit 1' INT TERM
start_nats
gen_orders "$dir/orders.jsonl" $ORDERS 150 50
lines=$(wc -l <"$dir/orders.jsonl" | tr -d ' ')
"$PUB" pub "$NATS_URL" ORDERS "$dir/orders.jsonl" k >"$dir/seqs" ||
	{ echo "publish failed"; exit 1; }
src="$NATS_URL/ORDERS?durable=billing&ack_wait=2s"
write_config "$dir/inbox.yaml" "sqlite:$dir/t.db" "$src" invoices "" 10 \
	20ms 5
count_rows() { sqlite3 "$dir/t.db" "SELECT COUNT(*) FROM invoices"; }
echo "# $lines messages, $ORDERS orders, dir $dir"

killed=0
for round in 1 2 3 4 5; do
	start_daemon "$dir/inbox.yaml" "$dir/daemon.log"
	ms=$(rand_between 150 700)
	sleep_ms "$ms"
	kill_daemon "$pid"
	c=$(count_rows 2>/dev/null)
	[ "$rc" -eq 137 ] && [ "${c:-0}" -lt $ORDERS ] && killed=$((killed + 1))
	echo "# round $round: SIGKILL after ${ms} ms (status $rc), ${c:-0} invoices"
done
check "killed mid-stream 5 times ($killed)" [ "$killed" -eq 5 ]
echo "# after the kills: $("$PUB" info "$NATS_URL" ORDERS billing)"

start_daemon "$dir/inbox.yaml" "$dir/daemon.log"
got=$(wait_count $ORDERS 60)
expect_eq "all orders invoiced after the restarts" "$got" "$ORDERS"
# Messages of the killed batches come back after ack_wait: let them.
if st=$(wait_settled 30); then ok "durable settled: $st"; else
	fail "durable settled" "$st"; fi
stop_daemon "$pid"
expect_eq "SIGTERM drains and exits 0" "$rc" 0

rows=$(count_rows)
distinct=$(sqlite3 "$dir/t.db" "SELECT COUNT(DISTINCT order_id) FROM invoices")
doubled=$(sqlite3 "$dir/t.db" "SELECT COUNT(*) FROM (SELECT order_id FROM
           invoices GROUP BY order_id HAVING COUNT(*) > 1)")
expect_eq "no order billed twice" "$doubled" 0
expect_eq "one invoice per order: rows" "$rows" "$ORDERS"
expect_eq "one invoice per order: distinct" "$distinct" "$ORDERS"
dl=$(sqlite3 "$dir/t.db" "SELECT COUNT(*) FROM dead_letters")
expect_eq "no dead letters" "$dl" 0
echo "# duplicates dropped (logged): $(logged duplicate "$dir/daemon.log")"
check "no error logged" sh -c "! grep -q '\"level\":\"error\"' '$dir/daemon.log'"
summary
