#!/bin/sh
# Poison messages on a RabbitMQ queue: one malformed JSON message that was
# already delivered once (to a client that died without acking it), and
# one order the effect rejects (a CHECK constraint). Both end in the dead
# letters with the broker's position (QUEUE/TAG, "redelivered") and one
# attempt each — their own failure, not the broker's delivery count —
# their payload kept; the messages after them are applied and everything
# is acked.
#   poison.sh INBOX_BIN AMQP_PUBLISH
set -u
BIN=$1
PUB=$2
. "$(dirname "$0")/lib.sh"
need_amqp

dir=$(mktmp)
trap cleanup EXIT
q=$(new_queue poison)
bad='{"id":"bad-1","data":{"orderId":"ord-bad"'
echo "$bad" | "$PUB" "$AMQP" publish "$q" --message-id-prefix pa- >/dev/null
# A client takes it and dies without acking: the broker requeues it as
# redelivered.
"$PUB" "$AMQP" take "$q" 1
gen_orders "$dir/a.jsonl" 40 0 0 1
gen_orders "$dir/b.jsonl" 40 0 0 41
neg='{"id":"neg-1","data":{"orderId":"ord-neg","customer":"c1","totalCents":-5}}'
"$PUB" "$AMQP" publish "$q" --message-id-prefix g1- <"$dir/a.jsonl" >/dev/null
echo "$neg" | "$PUB" "$AMQP" publish "$q" --message-id-prefix pb- >/dev/null
"$PUB" "$AMQP" publish "$q" --message-id-prefix g2- <"$dir/b.jsonl" >/dev/null
expect_eq "82 messages queued" "$(ready "$q")" 82

write_config "$dir/inbox.yaml" "sqlite:$dir/t.db" "$AMQP/$q" invoices "" 10 \
	0ms
count() { sq "$dir/t.db" "$1" 2>/dev/null; }
done_all() {
	[ "$(count "SELECT COUNT(*) FROM invoices")" = 80 ] &&
		[ "$(count "SELECT COUNT(*) FROM dead_letters")" = 2 ] &&
		[ "$(ready "$q")" = 0 ]
}
start_daemon "$dir/inbox.yaml" "$dir/daemon.log"
check "80 orders applied, 2 dead letters, queue drained" wait_until 60 done_all
stop_daemon "$pid"
expect_eq "the daemon drains and exits 0" "$rc" 0

dl() { count "SELECT $1 FROM dead_letters WHERE message_id = '$2'"; }
pos=$(dl position pa-1)
case "$pos" in
"$q/"[0-9]*" redelivered") ok "malformed: position $pos" ;;
*) fail "malformed: position QUEUE/TAG redelivered" "got '$pos'" ;;
esac
expect_eq "malformed: 1 attempt (delivered twice: not its fault)" "$(dl attempts pa-1)" 1
expect_eq "malformed: payload kept" "$(dl "CAST(payload AS TEXT)" pa-1)" "$bad"
case "$(dl reason pa-1)" in
*JSON*) ok "malformed: reason names JSON" ;;
*) fail "malformed: reason names JSON" "$(dl reason pa-1)" ;;
esac
pos=$(dl position pb-1)
case "$pos" in
*redelivered*) fail "rejected: position QUEUE/TAG" "got '$pos'" ;;
"$q/"[0-9]*) ok "rejected: position $pos" ;;
*) fail "rejected: position QUEUE/TAG" "got '$pos'" ;;
esac
expect_eq "rejected: 1 attempt" "$(dl attempts pb-1)" 1
case "$(dl reason pb-1)" in
*CHECK*|*constraint*) ok "rejected: reason from the database" ;;
*) fail "rejected: reason from the database" "$(dl reason pb-1)" ;;
esac
expect_eq "the orders after the poison are applied" \
	"$(count "SELECT COUNT(*) FROM invoices WHERE order_id > 'ord-000040'")" 40
expect_eq "no order billed twice" \
	"$(count "SELECT COUNT(*) - COUNT(DISTINCT order_id) FROM invoices")" 0
expect_eq "the rejected order left no row" \
	"$(count "SELECT COUNT(*) FROM invoices WHERE order_id = 'ord-neg'")" 0
expect_eq "everything acked" "$(ready "$q")" 0
clean_logs "no error or sanitizer report logged" "$dir/daemon.log"
summary
