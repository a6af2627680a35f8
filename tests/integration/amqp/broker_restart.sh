#!/bin/sh
# Restart the broker while the daemon consumes: the daemon keeps running,
# reconnects when the broker is back and goes on; every order is billed
# exactly once and none is missing (the persistent messages of the
# durable queue survive the restart; those delivered but not acked come
# back and the inbox drops the ones already applied). The broker is a
# private node started here, so the suite's shared one stays up for the
# tests running beside this one.
#   broker_restart.sh INBOX_BIN AMQP_PUBLISH RABBITMQ_SH
set -u
BIN=$1
PUB=$2
RMQ=$3
. "$(dirname "$0")/lib.sh"
need_amqp # the suite's broker: proves RabbitMQ can run here

ORDERS=2000
DUPS=200
dir=$(mktmp)
cleanup_extra='sh "$RMQ" stop "$dir/rmq" >/dev/null 2>&1'
trap cleanup EXIT

# A free port for the private node (it also uses port+1000 and +2000).
port=$((${INBOX_TEST_PORT_BASE:-$((30000 + $$ % 1000 * 10))} + 8))
while ss -ltn 2>/dev/null | grep -Eq ":($port|$((port + 1000))|$((port + 2000))) "; do
	port=$((port + 17))
done
sh "$RMQ" start "$dir/rmq" "$port" >"$dir/rmq.env" ||
	bail "start a private RabbitMQ node on port $port"
AMQP="amqp://guest:guest@127.0.0.1:$port/%2f"
q=$(new_queue restart)
gen_orders "$dir/orders.jsonl" $ORDERS $DUPS 0
sent=$("$PUB" "$AMQP" publish "$q" <"$dir/orders.jsonl")
expect_eq "published $((ORDERS + DUPS)) messages" "$sent" $((ORDERS + DUPS))
write_config "$dir/inbox.yaml" "sqlite:$dir/t.db" "$AMQP/$q?declare=1" \
	invoices "" 10 20ms
count() { sq "$dir/t.db" "$1" 2>/dev/null; }
echo "# queue $q on port $port, dir $dir"

start_daemon "$dir/inbox.yaml" "$dir/daemon.log"
sleep_ms "$(rand_between 800 1500)"
t0=$(date +%s)
sh "$RMQ" restart "$dir/rmq" >>"$dir/rmq.out" 2>&1
rst=$?
expect_eq "the broker restarted" "$rst" 0
mid=$(count "SELECT COUNT(DISTINCT order_id) FROM invoices")
echo "# broker restarted in $(($(date +%s) - t0)) s, $mid orders done"
check "restarted mid-stream ($mid of $ORDERS done)" \
	[ "$mid" -gt 0 -a "$mid" -lt $ORDERS ]
check "the daemon survived the broker's restart" kill -0 "$pid"

done_all() {
	[ "$(count "SELECT COUNT(DISTINCT order_id) FROM invoices")" = $ORDERS ] &&
		[ "$(ready "$q")" = 0 ]
}
check "the daemon reconnects and applies every order" wait_until 90 done_all
sleep 1
stop_daemon "$pid"
expect_eq "the daemon drains and exits 0" "$rc" 0

rows=$(count "SELECT COUNT(*) FROM invoices")
doubled=$(count "SELECT COUNT(*) FROM (SELECT order_id FROM invoices
                 GROUP BY order_id HAVING COUNT(*) > 1)")
expect_eq "no order billed twice" "$doubled" 0
expect_eq "one invoice per order" "$rows" $ORDERS
expect_eq "every message acked: queue empty" "$(ready "$q")" 0
check "the outage was logged" grep -q 'amqp: ' "$dir/daemon.log"
clean_logs "no error or sanitizer report logged" "$dir/daemon.log"
summary
