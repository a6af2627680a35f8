#!/bin/sh
# Two `inbox run` daemons in one Kafka consumer group on one PostgreSQL
# store (issue 3): the group splits the partitions between them; one is
# SIGKILLed mid-batch and the other takes its partitions over (after the
# session timeout), re-reading from the dead member's last committed
# offset — the copies it sees again are decided by the database (the
# inbox's unique key), as are producer retries that reach the two members
# on different partitions. Then the killed daemon is restarted, joins the
# group again and takes part in a second stream (new orders and replays of
# old ones). At the end every order has exactly one invoice (the table has
# no unique constraint), none is missing, and each daemon applied some.
#   two.sh INBOX_BIN KAFKA_MOCK KAFKA_PRODUCE
set -u
BIN=$1
MOCK=$2
PRODUCE=$3
. "$(dirname "$0")/lib.sh"
need_pg

PARTS=6
ORDERS=3000  # first stream: + 200 redeliveries + 100 producer retries
ORDERS2=1000 # second stream: + 60 + 40, + 120 replays of the first
BATCH=20
dir=$(mktmp)
tag="kfk2_$$_$(rand_between 0 9999)_"
table="${tag}invoices"
cleanup_extra='pg_drop_prefix "$tag"'
trap cleanup EXIT
trap 'exit 1' INT TERM
t0=$(now_ms)

start_mock orders:$PARTS
gen_partitions "$dir/s1" $ORDERS 200 100 $PARTS
produce_orders orders "$dir/s1"
M1=$(cat "$dir"/s1/p.* | wc -l)
src="kafka://$BOOT/orders?group=billing&$GROUP_OPTS"
for w in a b1 b2; do
	write_config "$dir/$w.yaml" "$INBOX_TEST_PG_URL" "$src" "$table" \
		"$tag" $BATCH $w pg
done
count_rows() { pgq "SELECT COUNT(*) FROM $table"; }
who() { pgq "SELECT COUNT(*) FROM $table WHERE who = '$1'"; }
echo "# $M1 messages on $PARTS partitions ($ORDERS orders), cluster $BOOT"
echo "# dir $dir, tables $tag*"

# --- 1. a and b1 split the group; b1 is SIGKILLed with a batch in hand.
start_daemon "$dir/a.yaml" "$dir/a.log"
a=$pid
start_daemon "$dir/b1.yaml" "$dir/b1.log"
b1=$pid
wait_batches "$dir/b1.log" 2 40 || bail "b1 got no batch within 40 s"
ms=$(rand_between 100 600)
sleep_ms "$ms"
kill_daemon "$b1"
t_kill=$(now_ms)
expect_eq "b1 was running when SIGKILLed (exit 137)" "$rc" 137
b1_rows=$(who b1)
b1_parts=$(pgq "SELECT string_agg(DISTINCT part::text, ' ') FROM $table
                WHERE who = 'b1'")
b1_logged=$(logged applied "$dir/b1.log")
echo "# b1 SIGKILLed ${ms} ms after its 2nd batch, $(((t_kill - t0) / 1000)) s in:" \
	"$b1_rows orders applied ($b1_logged logged), partitions $b1_parts," \
	"$(count_rows) in all"
check "b1 applied some orders before it died" [ "$b1_rows" -gt 0 ]
check "b1 logged no more than it committed" [ "$b1_logged" -le "$b1_rows" ]
got=$(wait_count $ORDERS 60)
t_done=$(now_ms)
expect_eq "a alone applies the rest: every order of stream 1" "$got" $ORDERS
echo "# stream 1 complete $(((t_done - t_kill) / 1000)) s after the kill"
# The dead member's partitions: the survivor applied orders there after
# the last one b1 applied.
for p in $b1_parts; do
	n=$(pgq "SELECT COUNT(*) FROM $table WHERE part = $p AND who = 'a'
	         AND seq > (SELECT MAX(seq) FROM $table WHERE who = 'b1')")
	check "a took over b1's partition $p ($n orders after b1's last)" \
		[ "$n" -gt 0 ]
done
expect_eq "nothing applied twice so far" "$(pgq "SELECT COUNT(*) FROM
	(SELECT order_id FROM $table GROUP BY order_id HAVING COUNT(*) > 1) x")" 0

# --- 2. b restarts as a new member; a second stream (with replays of the
# first) is split between a and b2.
start_daemon "$dir/b2.yaml" "$dir/b2.log"
b2=$pid
gen_partitions "$dir/s2" $ORDERS2 60 40 $PARTS $((ORDERS + 1)) 7
for f in "$dir"/s1/p.*; do
	awk 'NR % 25 == 0' "$f" >>"$dir/s2/${f##*/}" # 120 replays
done
M2=$(cat "$dir"/s2/p.* | wc -l)
# b2 is given partitions only after a rebalance (several seconds on the
# mock): produce in small slices, one a second, until b2 applied some,
# then the rest at once — so that both members have work.
for f in "$dir"/s2/p.*; do
	split -n l/40 -d -a 2 "$f" "$f.s"
done
t_b2=$(now_ms)
b2_in=""
for k in $(seq -w 0 39); do
	for f in "$dir"/s2/p.?; do
		produce orders "$f.s$k" -p "${f##*.}"
	done
	if [ -z "$b2_in" ]; then
		if [ "$(who b2)" -gt 0 ]; then
			b2_in=$((($(now_ms) - t_b2) / 1000))
			echo "# b2 applied its first orders ~$b2_in s after its start (slice $k of 40)"
		else
			sleep 1
		fi
	fi
done
TOTAL=$((ORDERS + ORDERS2))
got=$(wait_count $TOTAL 60)
expect_eq "every order of both streams applied" "$got" $TOTAL
wait_quiet 20 1500 "$dir/a.log" "$dir/b2.log" ||
	fail "the daemons went quiet within 20 s"
stop_daemon "$a"
expect_eq "a drains on SIGTERM and exits 0" "$rc" 0
stop_daemon "$b2"
expect_eq "b2 drains on SIGTERM and exits 0" "$rc" 0
t_end=$(now_ms)

# --- Exactly once, none missing.
rows=$(count_rows)
distinct=$(pgq "SELECT COUNT(DISTINCT order_id) FROM $table")
doubled=$(pgq "SELECT COUNT(*) FROM (SELECT order_id FROM $table
               GROUP BY order_id HAVING COUNT(*) > 1) x")
expect_eq "no order billed twice" "$doubled" 0
expect_eq "one invoice per order: rows" "$rows" $TOTAL
expect_eq "one invoice per order: distinct orders" "$distinct" $TOTAL
expect_eq "every order's invoice has its own data" "$(pgq "SELECT COUNT(*)
	FROM $table WHERE customer <> 'c' || (substr(order_id, 5)::int % 97)
	OR total_cents <> 100 + (substr(order_id, 5)::int * 7919) % 90000")" 0
expect_eq "inbox: one completed record per order" "$(pgq "SELECT COUNT(*)
	|| '/' || COUNT(*) FILTER (WHERE status = 'completed')
	FROM ${tag}inbox WHERE consumer = 'billing.kafka'")" "$TOTAL/$TOTAL"
expect_eq "no dead letter" "$(pgq "SELECT COUNT(*) FROM ${tag}dead_letters")" 0

# --- Who did what. A cleanly stopped daemon logged every batch it
# committed: its rows are exactly what it counted as applied.
na=$(who a)
nb1=$(who b1)
nb2=$(who b2)
sa=$(stopped_field applied "$dir/a.log")
sb2=$(stopped_field applied "$dir/b2.log")
da=$(stopped_field duplicates "$dir/a.log")
db2=$(stopped_field duplicates "$dir/b2.log")
echo "# applied: a=$na (logged $sa, $da duplicates), b1=$nb1 (killed)," \
	"b2=$nb2 (logged $sb2, $db2 duplicates)"
expect_eq "a's rows are what a counted as applied" "$na" "${sa:-none}"
expect_eq "b2's rows are what b2 counted as applied" "$nb2" "${sb2:-none}"
check "both daemons applied some in stream 1 (a=$na, b1=$nb1)" \
	[ "$na" -gt 0 -a "$nb1" -gt 0 ]
check "the restarted daemon took part in stream 2 (b2=$nb2)" [ "$nb2" -gt 0 ]
s2a=$(pgq "SELECT COUNT(*) FROM $table WHERE who = 'a'
           AND substr(order_id, 5)::int > $ORDERS")
check "a took part in stream 2 too ($s2a)" [ "$s2a" -gt 0 ]
# Every message was consumed by someone (b1's last batch may be unlogged).
seen=$(logged size "$dir/a.log" "$dir/b1.log" "$dir/b2.log")
echo "# messages produced $((M1 + M2)), consumed (logged) $seen"
check "every produced message was consumed" \
	[ "$seen" -ge $((M1 + M2 - BATCH)) ]
check "no error (or sanitizer report) logged" no_errors "$dir/a.log" "$dir/b1.log" "$dir/b2.log"
echo "# duration $(((t_end - t0) / 1000)) s"
summary
