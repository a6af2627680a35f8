#!/bin/sh
# Poison entries: one with a malformed JSON payload, one whose effect
# always fails transiently (integer overflow in SQLite) until max_attempts.
# Both end in the dead letters with the broker's position (STREAM/ID) and
# delivery count (attempts), both are acked (nothing pending), and the
# entries after them are applied.
#   poison.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
need_redis

ORDERS=300
dir=$(mktmp)
stream="inbox-poison-$$-$(date +%s)"
R=$INBOX_TEST_REDIS_URL
produce "$R" "$stream" 100 0 0
bad=$(rcli "$R" XADD "$stream" '*' payload '{"id":"m-bad","data":{"orderId":')
slow=$(rcli "$R" XADD "$stream" '*' payload \
	'{"id":"m-slow","data":{"orderId":"ord-slow","customer":"c0","totalCents":"-9223372036854775808"}}')
# the rest of the orders, after the poison
awk -v s="$stream" 'BEGIN { for (o = 101; o <= 300; o++)
	printf("XADD %s * payload '\''{\"id\":\"m-%06d\",\"data\":{\"orderId\":\"ord-%06d\",\"customer\":\"c1\",\"totalCents\":%d}}'\''\n", s, o, o, o) }' |
	redis-cli -u "$R" >/dev/null
db="$dir/t.db"
write_config "$dir/inbox.yaml" "sqlite:$db" \
	"$R/$stream?group=billing&drain=1" invoices "" 50 0ms 3
echo "# stream $stream: malformed $bad, transient $slow; dir $dir"

run_until_drained "$BIN" "$dir/inbox.yaml" "$dir/daemon.log" 60
rc=$?
expect_eq "the daemon drains the group and exits 0" "$rc" 0
expect_eq "every good order applied, after the poison too" \
	"$(sq "$db" "SELECT COUNT(DISTINCT order_id) || '/' || COUNT(*) FROM invoices")" \
	"$ORDERS/$ORDERS"
expect_eq "two dead letters" "$(sq "$db" "SELECT COUNT(*) FROM dead_letters")" 2
row=$(sq "$db" "SELECT attempts || '|' || ifnull(message_id, '') FROM dead_letters
                WHERE position = '$stream/$bad'")
expect_eq "malformed: dead letter at its position, delivered once" "$row" "1|"
reason=$(sq "$db" "SELECT reason FROM dead_letters WHERE position = '$stream/$bad'")
case "$reason" in
*JSON*) ok "malformed: reason says JSON ($reason)" ;;
*) fail "malformed: reason says JSON" "$reason" ;;
esac
row=$(sq "$db" "SELECT attempts || '|' || message_id || '|' || key FROM dead_letters
                WHERE position = '$stream/$slow'")
expect_eq "transient: dead letter at its position after 3 deliveries" \
	"$row" "3|m-slow|create-invoice:ord-slow"
reason=$(sq "$db" "SELECT reason FROM dead_letters WHERE position = '$stream/$slow'")
case "$reason" in
*"max attempts"*overflow*) ok "transient: reason says max attempts ($reason)" ;;
*) fail "transient: reason says max attempts" "$reason" ;;
esac
expect_eq "both acked: nothing pending" \
	"$(group_pending "$R" "$stream" billing)" 0
rcli "$R" DEL "$stream" >/dev/null
summary
