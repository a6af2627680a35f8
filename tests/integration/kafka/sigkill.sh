#!/bin/sh
# One `inbox run` daemon on a Kafka topic and a SQLite store, SIGKILLed at
# a random point (100-600 ms after its first batch that applied
# something, so most likely with a batch in hand) five times and
# restarted each time; each new run joins the group again and resumes
# from the last committed offsets — what was committed to the database
# but not yet to Kafka comes again and the inbox drops it. At the end
# every order has exactly one invoice (the table has no unique
# constraint), none is missing.
#   sigkill.sh INBOX_BIN KAFKA_MOCK KAFKA_PRODUCE
set -u
BIN=$1
MOCK=$2
PRODUCE=$3
# Each restart waits for the killed member's session to expire: keep it
# short (the mock's rebalances then take about 2 x 3 s).
SESSION_MS=3000
. "$(dirname "$0")/lib.sh"

PARTS=4
ORDERS=4000 # + 260 redeliveries + 140 producer retries
BATCH=20
KILLS=5
dir=$(mktmp)
trap cleanup EXIT
trap 'exit 1' INT TERM
t0=$(now_ms)

start_mock orders:$PARTS
gen_partitions "$dir/s" $ORDERS 260 140 $PARTS
produce_orders orders "$dir/s"
M=$(cat "$dir"/s/p.* | wc -l)
db="$dir/t.db"
src="kafka://$BOOT/orders?group=billing&$GROUP_OPTS"
count_rows() { sq "$db" "SELECT COUNT(*) FROM invoices"; }
who() { sq "$db" "SELECT COUNT(*) FROM invoices WHERE who = '$1'"; }
echo "# $M messages on $PARTS partitions ($ORDERS orders), cluster $BOOT, dir $dir"

applied_some() { [ "$(logged applied "$1")" -gt 0 ]; }
killed=0
round=1
while [ $round -le $KILLS ]; do
	w=r$round
	write_config "$dir/$w.yaml" "sqlite:$db" "$src" invoices "" $BATCH $w \
		sqlite
	ts=$(now_ms)
	start_daemon "$dir/$w.yaml" "$dir/$w.log"
	# The first batch that applied something (a run's first batches
	# may be only the copies of what the killed run before it had
	# committed to the database but not yet to Kafka).
	if ! wait_until 40 applied_some "$dir/$w.log"; then
		fail "round $round: nothing applied within 40 s"
		break
	fi
	tb=$(now_ms)
	ms=$(rand_between 100 600)
	sleep_ms "$ms"
	kill_daemon "$pid"
	[ "$rc" -eq 137 ] && killed=$((killed + 1))
	echo "# round $round: first applying batch after $((tb - ts)) ms, SIGKILL" \
		"${ms} ms later (exit $rc): $(who $w) applied" \
		"($(logged applied "$dir/$w.log") logged," \
		"$(logged duplicate "$dir/$w.log") duplicates), $(count_rows) in all"
	round=$((round + 1))
done
expect_eq "SIGKILLed mid-stream $KILLS times" "$killed" $KILLS
check "the stream was not over before the last kill" \
	[ "$(count_rows)" -lt $ORDERS ]

# The last run and the check run are not killed: they do without the
# slow effect (which only makes a SIGKILL land mid-batch), or under a
# loaded machine an ASan build takes minutes over the rest of the stream.
w=r$round
write_config "$dir/$w.yaml" "sqlite:$db" "$src" invoices "" $BATCH $w
start_daemon "$dir/$w.yaml" "$dir/$w.log"
pid_last=$pid
got=$(wait_count $ORDERS 60)
expect_eq "the last run applies the rest" "$got" $ORDERS
wait_quiet 20 1500 "$dir/$w.log" || fail "the daemon went quiet within 20 s"
stop_daemon "$pid_last"
expect_eq "the last run drains on SIGTERM and exits 0" "$rc" 0

# A clean stop commits the offsets: one more run re-reads nothing and
# applies only what is new.
NEW=100
gen_partitions "$dir/new" $NEW 0 0 $PARTS $((ORDERS + 1))
wc=check
write_config "$dir/$wc.yaml" "sqlite:$db" "$src" invoices "" $BATCH $wc
start_daemon "$dir/$wc.yaml" "$dir/$wc.log"
produce_orders orders "$dir/new"
got=$(wait_count $((ORDERS + NEW)) 40)
expect_eq "a run after the clean stop applies the $NEW new orders" "$got" \
	$((ORDERS + NEW))
wait_quiet 10 1000 "$dir/$wc.log" || fail "the daemon went quiet within 10 s"
stop_daemon "$pid"
expect_eq "it drains on SIGTERM and exits 0" "$rc" 0
expect_eq "it received only the new messages (nothing re-read)" \
	"$(logged size "$dir/$wc.log")/$(logged applied "$dir/$wc.log")" "$NEW/$NEW"
ORDERS=$((ORDERS + NEW))
t_end=$(now_ms)

rows=$(count_rows)
distinct=$(sq "$db" "SELECT COUNT(DISTINCT order_id) FROM invoices")
doubled=$(sq "$db" "SELECT COUNT(*) FROM (SELECT order_id FROM invoices
                    GROUP BY order_id HAVING COUNT(*) > 1)")
expect_eq "no order billed twice" "$doubled" 0
expect_eq "one invoice per order: rows" "$rows" $ORDERS
expect_eq "one invoice per order: distinct orders" "$distinct" $ORDERS
expect_eq "inbox: one completed record per order" "$(sq "$db" "SELECT
	COUNT(*) || '/' || SUM(status = 'completed') FROM inbox
	WHERE consumer = 'billing.kafka'")" "$ORDERS/$ORDERS"
expect_eq "no dead letter" "$(sq "$db" "SELECT COUNT(*) FROM dead_letters")" 0
expect_eq "the last run's rows are what it counted as applied" \
	"$(who $w)" "$(stopped_field applied "$dir/$w.log")"
per=$(sq "$db" "SELECT group_concat(who || '=' || n, ' ') FROM
	(SELECT who, COUNT(*) n FROM invoices GROUP BY who ORDER BY who)")
echo "# applied per run: $per"
check "every killed run applied some" [ "$(sq "$db" "SELECT COUNT(DISTINCT who)
	FROM invoices WHERE who LIKE 'r%' AND who <> '$w'")" -eq $KILLS ]
seen=$(logged size "$dir"/r*.log)
echo "# messages produced $M (+ $NEW), consumed (logged, all runs) $seen"
check "every produced message was consumed" [ "$seen" -ge $((M - BATCH)) ]
check "no error (or sanitizer report) logged" no_errors "$dir"/*.log
stats=$("$BIN" stats "$dir/r1.yaml" --json 2>&1)
case "$stats" in
*"\"completed\":$ORDERS,"*) ok "inbox stats: $ORDERS completed records" ;;
*) fail "inbox stats: $ORDERS completed records" "$stats" ;;
esac
echo "# duration $(((t_end - t0) / 1000)) s"
summary
