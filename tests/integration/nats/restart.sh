#!/bin/sh
# Restart nats-server under a running daemon, twice (a clean stop, then a
# SIGKILL), and publish more afterwards: the daemon reconnects and goes
# on; every order has exactly one invoice, none is missing.
#   restart.sh INBOX_BIN NATS_PUBLISH_BIN
set -u
BIN=$1
PUB=$2
. "$(dirname "$0")/lib.sh"
need_nats_server

HALF=1000
ORDERS=$((2 * HALF))
dir=$(mktmp)
trap cleanup EXIT
trap 'exit 1' INT TERM
start_nats
gen_orders "$dir/a.jsonl" $HALF 70 30 1
gen_orders "$dir/b.jsonl" $HALF 70 30 $((HALF + 1))
"$PUB" pub "$NATS_URL" ORDERS "$dir/a.jsonl" a >"$dir/seqs.a" ||
	{ echo "publish failed"; exit 1; }
src="$NATS_URL/ORDERS?durable=billing&ack_wait=2s"
write_config "$dir/inbox.yaml" "sqlite:$dir/t.db" "$src" invoices "" 10 \
	20ms 5
count_rows() { sqlite3 "$dir/t.db" "SELECT COUNT(*) FROM invoices"; }
echo "# $ORDERS orders in two halves, dir $dir"

start_daemon "$dir/inbox.yaml" "$dir/daemon.log"
c=$(wait_count 300 30)
echo "# $c invoices: stopping nats-server (SIGTERM), starting it again"
sh "$servers/nats.sh" restart "$dir/nats" || { echo "restart failed"; exit 1; }
# 200 more (or the rest of the first half): the daemon consumes again.
want=$((c + 200 < HALF ? c + 200 : HALF))
c=$(wait_count $want 30)
check "consuming again after a clean restart ($c invoices)" [ "$c" -ge $want ]
echo "# $c invoices: killing nats-server (SIGKILL), starting it again"
sh "$servers/nats.sh" kill "$dir/nats"
sleep_ms 300
sh "$servers/nats.sh" restart "$dir/nats" || { echo "restart failed"; exit 1; }
"$PUB" pub "$NATS_URL" ORDERS "$dir/b.jsonl" b >"$dir/seqs.b" ||
	{ echo "publish failed"; exit 1; }
ok "published the second half after the restarts"
check "the daemon survived both restarts" kill -0 "$pid"

got=$(wait_count $ORDERS 60)
expect_eq "all orders invoiced" "$got" "$ORDERS"
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
outage=$(grep -c '"poll_failed"\|"ack_failed"' "$dir/daemon.log")
echo "# poll/ack failures logged during the outages: $outage"
echo "# duplicates dropped (logged): $(logged duplicate "$dir/daemon.log")"
check "no error logged" sh -c "! grep -q '\"level\":\"error\"' '$dir/daemon.log'"
summary
