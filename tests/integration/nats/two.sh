#!/bin/sh
# Two daemons on the same JetStream durable, one PostgreSQL store: the
# server spreads the messages over both, duplicates (and redeliveries)
# may reach either, and the inbox's unique key arbitrates; every order has
# exactly one invoice, none is missing, and both daemons did work.
#   two.sh INBOX_BIN NATS_PUBLISH_BIN
set -u
BIN=$1
PUB=$2
. "$(dirname "$0")/lib.sh"
need_nats_server
need_pg

ORDERS=2000
dir=$(mktmp)
tag="nats2_$$_"
table="${tag}invoices"
cleanup_extra='pg_drop_prefix "$tag"'
trap cleanup EXIT
trap 'exit 1' INT TERM
start_nats
gen_orders "$dir/orders.jsonl" $ORDERS 150 50
src="$NATS_URL/ORDERS?durable=billing&ack_wait=2s&create=1"
write_config "$dir/inbox.yaml" "$INBOX_TEST_PG_URL" "$src" "$table" \
	"$tag" 20 5ms 5
count_rows() { pgq "SELECT COUNT(*) FROM $table"; }
echo "# $ORDERS orders, dir $dir, tables $tag*"

start_daemon "$dir/inbox.yaml" "$dir/a.log"
a=$pid
start_daemon "$dir/inbox.yaml" "$dir/b.log"
b=$pid
"$PUB" pub "$NATS_URL" ORDERS "$dir/orders.jsonl" t >"$dir/seqs" ||
	{ echo "publish failed"; exit 1; }
got=$(wait_count $ORDERS 90)
expect_eq "all orders invoiced" "$got" "$ORDERS"
if st=$(wait_settled 30); then ok "durable settled: $st"; else
	fail "durable settled" "$st"; fi
stop_daemon "$a"
expect_eq "daemon A drains and exits 0" "$rc" 0
stop_daemon "$b"
expect_eq "daemon B drains and exits 0" "$rc" 0

rows=$(count_rows)
distinct=$(pgq "SELECT COUNT(DISTINCT order_id) FROM $table")
doubled=$(pgq "SELECT COUNT(*) FROM (SELECT order_id FROM $table
               GROUP BY order_id HAVING COUNT(*) > 1) x")
expect_eq "no order billed twice" "$doubled" 0
expect_eq "one invoice per order: rows" "$rows" "$ORDERS"
expect_eq "one invoice per order: distinct" "$distinct" "$ORDERS"
aa=$(stopped_field applied "$dir/a.log")
ab=$(stopped_field applied "$dir/b.log")
echo "# applied by A: $aa, by B: $ab"
expect_eq "applied A + B = orders" "$((${aa:-0} + ${ab:-0}))" "$ORDERS"
check "both daemons applied some" [ "${aa:-0}" -gt 0 -a "${ab:-0}" -gt 0 ]
check "no error logged" sh -c "! grep -q '\"level\":\"error\"' '$dir/a.log' '$dir/b.log'"
summary
