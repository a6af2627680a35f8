#!/bin/sh
# Poison messages on a Kafka partition, under the inbox daemon:
#  - a malformed JSON payload: dead-lettered at once (no key);
#  - an order the effect rejects for good (a CHECK constraint: SQLSTATE
#    class 23 on PostgreSQL, SQLITE_CONSTRAINT_CHECK on SQLite):
#    dead-lettered at once with the database's message;
#  - an order whose effect fails transiently every time (a trigger raises
#    an ordinary error): the partition is sought back and the order
#    delivered again until max_attempts (3), then dead-lettered.
# Each dead letter keeps the message's position TOPIC/PARTITION/OFFSET,
# its id header, the attempts and the reason; every other message of the
# partition — those after the poison too — is applied, in offset order;
# the other partitions are unaffected.
#   poison.sh INBOX_BIN KAFKA_MOCK KAFKA_PRODUCE sqlite|pg
set -u
BIN=$1
MOCK=$2
PRODUCE=$3
MODE=$4
. "$(dirname "$0")/lib.sh"
[ "$MODE" = pg ] && need_pg

dir=$(mktmp)
tag="kfkp_$$_$(rand_between 0 9999)_"
trap cleanup EXIT
trap 'exit 1' INT TERM
t0=$(now_ms)

# Partition 0, offset by offset: orders 1-100 (offsets 0-99), the
# malformed message (100), orders 101-200 (101-200), the rejected order
# (201), orders 201-300 (202-301), the transient poison (302), orders
# 301-400 (303-402). Partitions 1 and 2: orders 401-700.
GOOD=700
awk -v dir="$dir" '
function order(o, p, cust, cents) {
	printf("m-%d\tm-%d\t{\"id\":\"m-%d\",\"p\":%d,\"data\":{\"orderId\":\"ord-%06d\",\"customer\":\"%s\",\"totalCents\":%d}}\n", o, o, o, p, o, cust, cents) >> (dir "/p." p)
}
BEGIN {
	for (o = 1; o <= 400; o++) {
		order(o, 0, "c" (o % 97), 100 + o)
		if (o == 100)
			print "bad-1\tbad-1\t{\"id\":\"bad-1\",\"p\":0,\"data\":{\"orderId\":" >> (dir "/p.0")
		if (o == 200)
			print "neg-1\tneg-1\t{\"id\":\"neg-1\",\"p\":0,\"data\":{\"orderId\":\"ord-neg\",\"customer\":\"c1\",\"totalCents\":-5}}" >> (dir "/p.0")
		if (o == 300)
			print "slow-1\tslow-1\t{\"id\":\"slow-1\",\"p\":0,\"data\":{\"orderId\":\"ord-slow\",\"customer\":\"poison\",\"totalCents\":5}}" >> (dir "/p.0")
	}
	for (o = 401; o <= 700; o++)
		order(o, 1 + o % 2, "c" (o % 97), 100 + o)
}'
check "partition 0 has the poison where planned" [ "$(awk -F'\t' '
	NR == 101 && $2 == "bad-1" { n++ } NR == 202 && $2 == "neg-1" { n++ }
	NR == 303 && $2 == "slow-1" { n++ } END { print n + 0 }' "$dir/p.0")" -eq 3 ]

if [ "$MODE" = pg ]; then
	store=$INBOX_TEST_PG_URL
	prefix=$tag
	table="${tag}invoices"
	q() { pgq "$1"; }
	cleanup_extra='pg_drop_prefix "$tag"; pgq "DROP FUNCTION IF EXISTS ${tag}poison()" >/dev/null 2>&1'
	pgq "CREATE TABLE $table (seq BIGSERIAL, order_id TEXT NOT NULL,
		customer TEXT NOT NULL,
		total_cents INTEGER NOT NULL CHECK (total_cents >= 0),
		part INTEGER NOT NULL, who TEXT NOT NULL);
	CREATE FUNCTION ${tag}poison() RETURNS trigger LANGUAGE plpgsql AS
	\$\$ BEGIN
		IF NEW.customer = 'poison' THEN
			RAISE EXCEPTION 'poisoned order %', NEW.order_id;
		END IF;
		RETURN NEW;
	END \$\$;
	CREATE TRIGGER poison BEFORE INSERT ON $table
		FOR EACH ROW EXECUTE FUNCTION ${tag}poison();" >/dev/null ||
		bail "create the table"
else
	store="sqlite:$dir/t.db"
	prefix=""
	table=invoices
	q() { sq "$dir/t.db" "$1"; }
	# json('poison') fails: an ordinary error, not a constraint.
	sq "$dir/t.db" "CREATE TABLE invoices (seq INTEGER PRIMARY KEY,
		order_id TEXT NOT NULL, customer TEXT NOT NULL,
		total_cents INTEGER NOT NULL CHECK (total_cents >= 0),
		part INTEGER NOT NULL, who TEXT NOT NULL);
	CREATE TRIGGER poison BEFORE INSERT ON invoices
	WHEN NEW.customer = 'poison' BEGIN SELECT json(NEW.customer); END;" ||
		bail "create the table"
fi
start_mock orders:3
produce_orders orders "$dir"
src="kafka://$BOOT/orders?group=billing&$GROUP_OPTS"
write_config "$dir/inbox.yaml" "$store" "$src" "$table" "$prefix" 50 d
sed -i 's/^    max_attempts: 5$/    max_attempts: 3/' "$dir/inbox.yaml"
grep -q '^    max_attempts: 3$' "$dir/inbox.yaml" || bail "max_attempts: 3"
count_rows() { q "SELECT COUNT(*) FROM $table"; }
dl() { q "SELECT COUNT(*) FROM ${prefix}dead_letters"; }
echo "# mode $MODE, cluster $BOOT, dir $dir"

start_daemon "$dir/inbox.yaml" "$dir/daemon.log"
got=$(wait_count $GOOD 60)
expect_eq "every good order applied, after the poison too" "$got" $GOOD
# Dead letters are written in the transaction of their batch: wait for
# the third (the transient one needs its retries).
three_dead_letters() { [ "$(dl)" -ge 3 ]; }
wait_until 20 three_dead_letters
wait_quiet 10 1000 "$dir/daemon.log" || fail "the daemon went quiet within 10 s"
stop_daemon "$pid"
expect_eq "SIGTERM drains and exits 0" "$rc" 0
t_end=$(now_ms)

expect_eq "three dead letters" "$(dl)" 3
row() {
	q "SELECT position || ' ' || attempts || ' ' || coalesce(key, '-') ||
	   ' ' || coalesce(message_id, '-') FROM ${prefix}dead_letters
	   WHERE message_id = '$1'"
}
reason() { q "SELECT reason FROM ${prefix}dead_letters WHERE message_id = '$1'"; }
expect_eq "malformed: position, one delivery, no key, id header" \
	"$(row bad-1)" "orders/0/100 1 - bad-1"
r=$(reason bad-1)
case "$r" in
*JSON* | *json*) ok "malformed: reason ($r)" ;;
*) fail "malformed: the reason names JSON" "$r" ;;
esac
expect_eq "rejected: position, one delivery, key, id header" \
	"$(row neg-1)" "orders/0/201 1 create-invoice:ord-neg neg-1"
r=$(reason neg-1)
case "$r" in
*check* | *CHECK*) ok "rejected: reason ($r)" ;;
*) fail "rejected: the reason is the CHECK violation" "$r" ;;
esac
expect_eq "transient: position, 3 deliveries, key, id header" \
	"$(row slow-1)" "orders/0/302 3 create-invoice:ord-slow slow-1"
r=$(reason slow-1)
case "$r" in
*"max attempts"*) ok "transient: reason ($r)" ;;
*) fail "transient: the reason says max attempts" "$r" ;;
esac
check "dead letters keep the payload and the Kafka headers" [ "$(q "SELECT
	COUNT(*) FROM ${prefix}dead_letters WHERE headers LIKE '%message-id%'
	AND payload IS NOT NULL")" -eq 3 ]
expect_eq "the transient one was retried twice first (logged)" \
	"$(grep -c '"event":"retry"' "$dir/daemon.log")" 2
expect_eq "dead-lettered once each (logged)" \
	"$(grep -c '"event":"dead_letter"' "$dir/daemon.log")" 3
expect_eq "partition 0: orders 1-400 applied once each" "$(q "SELECT
	COUNT(*) || '/' || COUNT(DISTINCT order_id) FROM $table WHERE part = 0")" \
	"400/400"
# Order kept: in application order, partition 0's orders only go up.
expect_eq "partition 0: applied in offset order" "$(q "SELECT COUNT(*) FROM
	(SELECT order_id, LAG(order_id) OVER (ORDER BY seq) AS prev
	 FROM $table WHERE part = 0) x WHERE prev > order_id")" 0
expect_eq "partitions 1 and 2: all applied once each" "$(q "SELECT COUNT(*)
	|| '/' || COUNT(DISTINCT order_id) FROM $table WHERE part IN (1, 2)")" \
	"300/300"
expect_eq "no order billed twice" "$(q "SELECT COUNT(*) FROM (SELECT order_id
	FROM $table GROUP BY order_id HAVING COUNT(*) > 1) x")" 0
expect_eq "the poison orders have no invoice" "$(q "SELECT COUNT(*) FROM
	$table WHERE order_id IN ('ord-neg', 'ord-slow')")" 0
check "no error (or sanitizer report) logged" no_errors "$dir/daemon.log"
echo "# duration $(((t_end - t0) / 1000)) s"
summary
