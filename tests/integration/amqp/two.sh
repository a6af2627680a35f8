#!/bin/sh
# Two daemons consume the same RabbitMQ queue into one PostgreSQL store;
# one of them is SIGKILLed mid-stream and restarted (its unacked messages
# go to the other or come back to it, marked redelivered). Every order is
# billed exactly once, none is missing, both daemons did part of the work.
#   two.sh INBOX_BIN AMQP_PUBLISH
set -u
BIN=$1
PUB=$2
. "$(dirname "$0")/lib.sh"
need_amqp
need_pg

ORDERS=2000
DUPS=200
dir=$(mktmp)
tag="amqp$$_"
table="${tag}invoices"
cleanup_extra='pg_drop_prefix "$tag"'
trap cleanup EXIT
q=$(new_queue two)
gen_orders "$dir/orders.jsonl" $ORDERS $DUPS 0
sent=$("$PUB" "$AMQP" publish "$q" <"$dir/orders.jsonl")
expect_eq "published $((ORDERS + DUPS)) messages" "$sent" $((ORDERS + DUPS))
write_config "$dir/inbox.yaml" "$INBOX_TEST_PG_URL" "$AMQP/$q" "$table" \
	"$tag" 10 30ms
echo "# queue $q, tables $tag*, dir $dir"

start_daemon "$dir/inbox.yaml" "$dir/a.log"
a=$pid
start_daemon "$dir/inbox.yaml" "$dir/b.log"
b=$pid
sleep_ms "$(rand_between 500 1000)"
kill_daemon "$a"
mid=$(pgq "SELECT COUNT(DISTINCT order_id) FROM $table")
check "daemon A killed mid-stream ($mid of $ORDERS done)" \
	[ "$mid" -gt 0 -a "$mid" -lt $ORDERS ]
start_daemon "$dir/inbox.yaml" "$dir/a.log"
a=$pid

done_all() {
	[ "$(pgq "SELECT COUNT(DISTINCT order_id) FROM $table")" = $ORDERS ] &&
		[ "$(ready "$q")" = 0 ]
}
check "every order applied" wait_until 90 done_all
sleep 1
stop_daemon "$a"
expect_eq "daemon A drains and exits 0" "$rc" 0
stop_daemon "$b"
expect_eq "daemon B drains and exits 0" "$rc" 0

rows=$(pgq "SELECT COUNT(*) FROM $table")
doubled=$(pgq "SELECT COUNT(*) FROM (SELECT order_id FROM $table
               GROUP BY order_id HAVING COUNT(*) > 1) x")
expect_eq "no order billed twice" "$doubled" 0
expect_eq "one invoice per order" "$rows" $ORDERS
expect_eq "every message acked: queue empty" "$(ready "$q")" 0
na=$(logged applied "$dir/a.log")
nb=$(logged applied "$dir/b.log")
echo "# applied: A $na, B $nb"
check "both daemons applied orders (A $na, B $nb)" [ "$na" -gt 0 -a "$nb" -gt 0 ]
clean_logs "no error or sanitizer report logged" "$dir/a.log" "$dir/b.log"
summary
