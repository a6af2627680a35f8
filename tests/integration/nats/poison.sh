#!/bin/sh
# Poison messages on a JetStream durable: a malformed JSON message is
# dead-lettered at once; one whose effect fails transiently every time
# (a trigger raises an ordinary SQL error) is redelivered (Nak with a
# delay) until max_attempts, counted from the broker's delivery count,
# then dead-lettered. Both dead letters carry the broker's position
# (ORDERS/stream sequence) and the delivery count; both are terminated on
# the broker (never redelivered); the orders after them are applied.
#   poison.sh INBOX_BIN NATS_PUBLISH_BIN
set -u
BIN=$1
PUB=$2
. "$(dirname "$0")/lib.sh"
need_nats_server

N=300
BAD=101    # line of the malformed message
POISON=201 # line of the order whose effect always fails
dir=$(mktmp)
trap cleanup EXIT
trap 'exit 1' INT TERM
start_nats
awk -v n=$N -v bad=$BAD -v poison=$POISON 'BEGIN {
	line = 0
	for (o = 1; o <= n; o++) {
		line++
		if (line == bad) { print "{\"id\":\"broken\",\"data\":{"; line++ }
		cust = (line == poison) ? "poison" : sprintf("c%d", o % 97)
		printf("{\"id\":\"m-%d\",\"data\":{\"orderId\":\"ord-%06d\",\"customer\":\"%s\",\"totalCents\":%d}}\n", o, o, cust, 100 + o)
	}
}' >"$dir/orders.jsonl"
check "the poison order is on line $POISON" \
	sh -c "sed -n ${POISON}p '$dir/orders.jsonl' | grep -q poison"
"$PUB" pub "$NATS_URL" ORDERS "$dir/orders.jsonl" p >"$dir/seqs" ||
	{ echo "publish failed"; exit 1; }
bad_seq=$(awk -v l=$BAD '$1 == l { print $2 }' "$dir/seqs")
poison_seq=$(awk -v l=$POISON '$1 == l { print $2 }' "$dir/seqs")

# The trigger fails the effect with a non-constraint error (RETRY).
sqlite3 "$dir/t.db" "CREATE TABLE invoices (order_id TEXT NOT NULL,
	customer TEXT NOT NULL, total_cents INTEGER NOT NULL);
	CREATE TRIGGER poison BEFORE INSERT ON invoices
	WHEN NEW.customer = 'poison' BEGIN SELECT json(NEW.customer); END;"
src="$NATS_URL/ORDERS?durable=billing&ack_wait=5s"
write_config "$dir/inbox.yaml" "sqlite:$dir/t.db" "$src" invoices "" 20 \
	0ms 3
count_rows() { sqlite3 "$dir/t.db" "SELECT COUNT(*) FROM invoices"; }
q() { sqlite3 "$dir/t.db" "$1"; }
echo "# $N orders, malformed at seq $bad_seq, poison at seq $poison_seq, dir $dir"

start_daemon "$dir/inbox.yaml" "$dir/daemon.log"
got=$(wait_count $((N - 1)) 30)
expect_eq "every other order applied, after the poison ones too" "$got" \
	$((N - 1))
check "the last order applied" [ "$(q "SELECT COUNT(*) FROM invoices
	WHERE order_id = 'ord-$(printf %06d $N)'")" -eq 1 ]
# Dead letters are written before the broker is told: wait for both.
two_dead_letters() { [ "$(q "SELECT COUNT(*) FROM dead_letters")" -ge 2 ]; }
wait_until 20 two_dead_letters
if st=$(wait_settled 20); then ok "durable settled: $st"; else
	fail "durable settled" "$st"; fi
# Terminated: not redelivered, even after ack_wait.
sleep 6
stop_daemon "$pid"
expect_eq "SIGTERM drains and exits 0" "$rc" 0

expect_eq "two dead letters" "$(q "SELECT COUNT(*) FROM dead_letters")" 2
expect_eq "malformed: broker position and delivery count" \
	"$(q "SELECT position || ' ' || attempts FROM dead_letters
	      WHERE message_id = 'p-$BAD' AND key IS NULL")" "ORDERS/$bad_seq 1"
expect_eq "poison: broker position and delivery count" \
	"$(q "SELECT position || ' ' || attempts FROM dead_letters
	      WHERE key = 'create-invoice:ord-$(printf %06d $((POISON - 1)))'")" \
	"ORDERS/$poison_seq 3"
reason=$(q "SELECT reason FROM dead_letters WHERE attempts = 3")
case "$reason" in
*"max attempts"*) ok "poison reason: $reason" ;;
*) fail "poison reason says max attempts" "$reason" ;;
esac
check "dead letters keep the NATS headers" [ "$(q "SELECT COUNT(*) FROM
	dead_letters WHERE headers LIKE '%Nats-Msg-Id%'")" -eq 2 ]
expect_eq "dead-lettered once each (logged)" \
	"$(grep -c '"event":"dead_letter"' "$dir/daemon.log")" 2
expect_eq "the poison was retried twice first (logged)" \
	"$(grep -c '"event":"retry"' "$dir/daemon.log")" 2
expect_eq "no order billed twice" "$(q "SELECT COUNT(*) FROM (SELECT
	order_id FROM invoices GROUP BY order_id HAVING COUNT(*) > 1)")" 0
check "no error logged" sh -c "! grep -q '\"level\":\"error\"' '$dir/daemon.log'"
summary
