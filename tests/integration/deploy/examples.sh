#!/bin/sh
# examples/KIND/inbox.yaml, as written but for its store: and source:
# lines (pointed at the suite's PostgreSQL — a schema of the test's own
# through search_path, so the example's table names stay as they are — and
# at the suite's broker, or a Kafka mock cluster of the test's own):
#   inbox check --connect passes; 20 orders with 5 redeliveries and 3
#   producer retries (new id, same order) give 20 invoices; after a
#   restart 10 more orders and 5 repeats of the first ones give 30 in
#   all: no order twice, no dead letter, every stop a clean drain (0).
#   examples.sh INBOX_BIN KIND SOURCE_DIR TOOLS_DIR
# TOOLS_DIR holds kafka-mock, kafka-produce (tests/tools), amqp-publish
# (tests/integration/amqp) and nats_publish (tests/integration/nats),
# under the build tree.
set -u
BIN=$1
KIND=$2
SRC=$3
TOOLS=$4
. "$(dirname "$0")/lib.sh"
need_pg
dir=$(mktmp)
schema="ex_${KIND}_$$"
pid=""
mock_pid=""
cleanup_src=""
stop_all() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	pid=""
	if [ -n "$mock_pid" ]; then
		exec 9>&-
		kill -TERM "$mock_pid" 2>/dev/null
		wait "$mock_pid" 2>/dev/null
		mock_pid=""
	fi
	[ -n "$cleanup_src" ] && eval "$cleanup_src" >/dev/null 2>&1
	cleanup_src=""
	pgq "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1
	return 0
}
exit_trap=stop_all
trap stop_all EXIT
tool() {
	_t=$(find "$TOOLS" -name "$1" -type f -perm -u+x | head -1)
	[ -n "$_t" ] || bail "the test tool $1 is built" "not under $TOOLS"
	echo "$_t"
}

# order ID ORDER: one order.created event (its data a function of ORDER).
order() {
	o=$2
	printf '{"id":"%s","type":"order.created","data":{"orderId":"ord-%04d","customer":"c%d","totalCents":%d}}\n' \
		"$1" "$o" $((o % 7)) $((100 + o * 37))
}
# batch1: 20 orders, 5 redeliveries (same id), 3 producer retries (new id).
{
	for o in $(seq 1 20); do order "m-$o" "$o"; done
	for o in 3 7 11 15 19; do order "m-$o" "$o"; done
	for o in 2 9 17; do order "m-$o-retry" "$o"; done
} >"$dir/batch1.jsonl"
# batch2: 10 new orders and 5 repeats of the first ones.
{
	for o in $(seq 21 30); do order "m-$o" "$o"; done
	for o in 1 4 8 12 20; do order "m-$o-again" "$o"; done
} >"$dir/batch2.jsonl"

# --- the source --------------------------------------------------------------
case "$KIND" in
jsonl)
	: >"$dir/orders.jsonl"
	source_url="jsonl:orders.jsonl?follow=1&checkpoint=orders.checkpoint"
	feed() { cat "$1" >>"$dir/orders.jsonl"; }
	;;
redis)
	need_suite_server INBOX_TEST_REDIS_URL Redis redis.sh
	stream="orders-ex$$"
	source_url="$INBOX_TEST_REDIS_URL/$stream?group=billing&claim_idle=30s"
	cleanup_src="redis-cli -u '$INBOX_TEST_REDIS_URL' DEL '$stream'"
	feed() {
		awk -v s="$stream" '{ printf("XADD %s * payload '\''%s'\''\n", s, $0) }' "$1" |
			redis-cli -u "$INBOX_TEST_REDIS_URL" >/dev/null
	}
	;;
rabbitmq)
	need_suite_server INBOX_TEST_AMQP_URL RabbitMQ rabbitmq.sh
	PUB=$(tool amqp-publish) || exit 1
	q="orders-ex$$"
	source_url="$INBOX_TEST_AMQP_URL/$q?prefetch=100"
	cleanup_src="'$PUB' '$INBOX_TEST_AMQP_URL' delete '$q' '$q.retry'"
	feed() { "$PUB" "$INBOX_TEST_AMQP_URL" publish "$q" <"$1" >/dev/null; }
	# the queue exists before the daemon checks it
	"$PUB" "$INBOX_TEST_AMQP_URL" publish "$q" </dev/null >/dev/null
	;;
nats)
	need_suite_server INBOX_TEST_NATS_URL NATS nats.sh
	PUB=$(tool nats_publish) || exit 1
	st="ORDERSEX$$"
	source_url="$INBOX_TEST_NATS_URL/$st?durable=billing&ack_wait=30s"
	_n=0
	feed() {
		_n=$((_n + 1))
		"$PUB" pub "$INBOX_TEST_NATS_URL" "$st" "$1" "f$_n" >/dev/null
	}
	# the stream exists before the daemon checks it
	: >"$dir/empty"
	feed "$dir/empty"
	;;
kafka)
	MOCK=$(tool kafka-mock) || exit 1
	PRODUCE=$(tool kafka-produce) || exit 1
	mkfifo "$dir/mock.in"
	"$MOCK" --stdin-lifetime orders:3 <"$dir/mock.in" >"$dir/mock.out" 2>"$dir/mock.err" &
	mock_pid=$!
	exec 9>"$dir/mock.in"
	wait_until 15 grep -q '^bootstrap=' "$dir/mock.out" || bail "kafka-mock starts" "$(cat "$dir/mock.err")"
	boot=$(sed -n 's/^bootstrap=//p' "$dir/mock.out")
	# the mock cluster rebalances slowly by default: short sessions
	source_url="kafka://$boot/orders?group=billing&rdkafka.session.timeout.ms=6000&rdkafka.heartbeat.interval.ms=300"
	feed() { "$PRODUCE" -q "$boot" orders "$1" 9>&-; }
	;;
*)
	echo "unknown kind $KIND"
	exit 2
	;;
esac

# --- the example, its two URLs replaced ----------------------------------------
example="$SRC/examples/$KIND/inbox.yaml"
[ -f "$example" ] || bail "examples/$KIND/inbox.yaml exists"
pgq "CREATE SCHEMA $schema" >/dev/null
store_url="$INBOX_TEST_PG_URL?options=-csearch_path%3D$schema"
awk -v st="$store_url" -v so="$source_url" '
	/^store: / { print "store: \"" st "\""; ns++; next }
	/^    source: / { print "    source: \"" so "\""; nso++; next }
	{ print }
	END { if (ns != 1 || nso != 1) exit 1 }' "$example" >"$dir/inbox.yaml" ||
	bail "the example has one store: and one source: line"
q() { pgq "SET search_path = $schema; $1" | tail -1; }

run_rc "$dir/check.out" "$BIN" check "$dir/inbox.yaml" --connect
if [ "$rc" = 0 ]; then ok "inbox check --connect passes"; else fail "inbox check --connect passes" "$(cat "$dir/check.out")"; fi

start() {
	"$BIN" run "$dir/inbox.yaml" 2>"$1" &
	pid=$!
}
stop() {
	kill -TERM "$pid"
	wait "$pid"
	rc=$?
	pid=""
}
invoices() { [ "$(q "SELECT count(*) FROM invoices" 2>/dev/null)" = "$1" ]; }

feed "$dir/batch1.jsonl" || bail "feed the first batch"
start "$dir/run1.log"
check "20 orders (with 5 redeliveries and 3 producer retries): 20 invoices" wait_until 60 invoices 20
sleep 1
check "... no more" invoices 20
stop
expect_eq "SIGTERM: a clean drain (exit 0)" "$rc" 0

feed "$dir/batch2.jsonl" || bail "feed the second batch"
start "$dir/run2.log"
check "restarted: 10 new orders and 5 repeats give 30 invoices" wait_until 60 invoices 30
sleep 1
stop
expect_eq "SIGTERM: a clean drain (exit 0)" "$rc" 0
expect_eq "no order invoiced twice" "$(q "SELECT count(*) - count(DISTINCT order_id) FROM invoices")" 0
expect_eq "30 invoices in all" "$(q "SELECT count(*) FROM invoices")" 30
expect_eq "no dead letter" "$(q "SELECT count(*) FROM dead_letters")" 0
dups=$(q "SELECT count(*) FROM inbox")
expect_eq "the inbox holds one key per order" "$dups" 30
if grep -q '"level":"error"' "$dir/run1.log" "$dir/run2.log"; then
	fail "no error logged" "$(grep -h '"level":"error"' "$dir/run1.log" "$dir/run2.log" | head -3)"
else
	ok "no error logged"
fi
summary
