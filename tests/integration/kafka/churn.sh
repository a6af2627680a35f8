#!/bin/sh
# A Kafka consumer group whose members keep dying (issue 11, item 3).
#
# MEMBERS `inbox run` daemons in one group on one topic of PARTS
# partitions, on one PostgreSQL store, consume KEYS orders (plus exact
# redeliveries and producer retries under new ids), produced at RATE
# orders a second while they run (RATE 0: all before they start). While
# they do, a member chosen at random is stopped every KILL_MIN..KILL_MAX
# ms — SIGKILL, and every TERMS-th time SIGTERM to the member restarted
# last (a restart while it joins: it must drain and exit 0, even in the
# middle of its first rebalance) — and restarted at
# once with the same configuration: the same consumer name on the same
# host, so the same derived group.instance.id (see
# src/source/kafka/kafka.h). The kill loop stops after KILL_FOR seconds
# (0: never, it runs until every key is done); a line every REPORT
# seconds shows the keys done so far.
#
# Measured: the time until every key is done (DONE_S), and the time from
# the last stop until then (SETTLE_S): how long the group takes to
# settle. Checked: every order exactly once (the table has no unique
# constraint), none missing, the inbox holds one completed record per
# order, no dead letter, no error logged, every SIGTERM drained and
# exited 0; when KILL_FOR > 0, everything was done within SETTLE_MAX
# seconds after the last stop.
#
#   churn.sh INBOX_BIN KAFKA_MOCK KAFKA_PRODUCE
#
# Knobs (environment, CHURN_ prefix): KEYS (1500), RATE (150), MEMBERS
# (3), PARTS (6), KILL_MIN / KILL_MAX (1000 / 4000 ms), KILL_FOR (16 s),
# TERMS (2: every other stop is a SIGTERM; 0: SIGKILL only),
# DEADLINE (120 s for the whole stream), SETTLE_MAX (45 s), REPORT (5 s),
# BATCH (20), URL (extra kafka URL parameters, e.g. "instance_id=" for
# dynamic membership), SESSION_MS (the session.timeout.ms the daemons
# are given, 3000; empty: librdkafka's default, 45 s).
#
# On librdkafka's mock cluster a member killed without leaving holds a
# rebalance up until its session times out, and every join starts the
# rebalance again; the mock accepts group.instance.id but ignores it (see
# src/source/kafka/kafka.h), so there the group settles only once the
# stops stop, within a few session timeouts: what static membership saves
# on a real broker cannot be seen here. bench/kafka-churn runs this with
# 10,000 keys and the stops going on until every key is done, and prints
# the figures; the final "RESULT ..." line has them all, for scripts.
set -u
BIN=$1
MOCK=$2
PRODUCE=$3
. "$(dirname "$0")/lib.sh"
need_pg

KEYS=${CHURN_KEYS:-1500}
RATE=${CHURN_RATE:-150}
MEMBERS=${CHURN_MEMBERS:-3}
PARTS=${CHURN_PARTS:-6}
KILL_MIN=${CHURN_KILL_MIN:-1000}
KILL_MAX=${CHURN_KILL_MAX:-4000}
KILL_FOR=${CHURN_KILL_FOR:-16}
TERMS=${CHURN_TERMS:-2}
DEADLINE=${CHURN_DEADLINE:-120}
SETTLE_MAX=${CHURN_SETTLE_MAX:-45}
REPORT=${CHURN_REPORT:-5}
BATCH=${CHURN_BATCH:-20}
EXTRA=${CHURN_URL:-}
CSESSION=${CHURN_SESSION_MS-3000}
DUPS=$((KEYS / 20))
RETRIES=$((KEYS / 40))

dir=$(mktmp)
tag="kchurn_$$_$(rand_between 0 9999)_"
table="${tag}invoices"
producers=""
cleanup_extra='for _p in $producers; do kill "$_p" 2>/dev/null; done; pg_drop_prefix "$tag"'
trap cleanup EXIT
trap 'exit 1' INT TERM

start_mock orders:$PARTS
gen_partitions "$dir/s" "$KEYS" $DUPS $RETRIES "$PARTS"
M=$(cat "$dir"/s/p.* | wc -l)
[ "$RATE" -gt 0 ] || produce_orders orders "$dir/s"
opts="rdkafka.heartbeat.interval.ms=300&rdkafka.log_level=3"
[ -n "$CSESSION" ] && opts="$opts&rdkafka.session.timeout.ms=$CSESSION"
src="kafka://$BOOT/orders?group=billing&$opts${EXTRA:+&$EXTRA}"
count_rows() { pgq "SELECT COUNT(DISTINCT order_id) FROM $table"; }
echo "# $M messages ($KEYS orders, ${RATE}/s; 0: before the start) on" \
	"$PARTS partitions, $MEMBERS members," \
	"a member stopped every $KILL_MIN-$KILL_MAX ms for ${KILL_FOR}s (0: until done)"
echo "# cluster $BOOT, dir $dir, tables $tag*, source $src"

# Member i runs as m$i; each run's rows say which run applied them
# (m$i.$run), its log is m$i.$run.log. A daemon's config is written per
# run only for `who`; the source URL is the same for every run of every
# member.
run_of() { eval "echo \${run_$1:-0}"; }
start_member() {
	_r=$(($(run_of "$1") + 1))
	eval "run_$1=$_r"
	_w="m$1.$_r"
	write_config "$dir/$_w.yaml" "$INBOX_TEST_PG_URL" "$src" "$table" \
		"$tag" "$BATCH" "$_w"
	start_daemon "$dir/$_w.yaml" "$dir/$_w.log"
	eval "pid_$1=$pid"
}
# The tables must exist before the first count: the first member creates
# them (setup runs at start); wait for it.
t0=$(now_ms)
i=1
while [ $i -le "$MEMBERS" ]; do
	start_member $i
	i=$((i + 1))
done
wait_until 30 pgq "SELECT 1 FROM $table LIMIT 0" >/dev/null 2>&1 ||
	bail "the daemons created no table within 30 s"
# The stream: one paced producer per partition (RATE split evenly by
# messages, duplicates included), in the background.
if [ "$RATE" -gt 0 ]; then
	prate=$(((M * RATE / KEYS + PARTS - 1) / PARTS))
	for f in "$dir"/s/p.*; do
		"$PRODUCE" -q -K -i -r "$prate" -p "${f##*.}" "$BOOT" orders "$f" \
			9>&- 2>>"$dir/produce.err" &
		producers="$producers $!"
	done
fi

kills=0 # stops, SIGKILL or SIGTERM
terms=0
bad_terms=""
last_kill=$t0
next_kill=$((t0 + $(rand_between "$KILL_MIN" "$KILL_MAX")))
next_report=$((t0 + REPORT * 1000))
done_ms=""
timeline=""
while :; do
	now=$(now_ms)
	n=$(count_rows 2>/dev/null)
	n=${n:-0}
	if [ "$n" -ge "$KEYS" ] && [ -z "$done_ms" ]; then
		done_ms=$now
		break
	fi
	[ "$now" -ge $((t0 + DEADLINE * 1000)) ] && break
	if [ "$now" -ge "$next_report" ]; then
		s=$(((now - t0) / 1000))
		echo "# t=${s}s keys=$n kills=$kills"
		timeline="$timeline $s:$n"
		next_report=$((next_report + REPORT * 1000))
	fi
	killing=1
	[ "$KILL_FOR" -gt 0 ] && [ "$now" -ge $((t0 + KILL_FOR * 1000)) ] &&
		killing=0
	if [ $killing -eq 1 ] && [ "$now" -ge "$next_kill" ]; then
		v=$(rand_between 1 "$MEMBERS")
		if [ "$TERMS" -gt 0 ] && [ $((kills % TERMS)) -eq $((TERMS - 1)) ]; then
			# the member restarted last, most likely still in its
			# first rebalance
			v=$newest
			stop_daemon "$(eval "echo \$pid_$v")"
			terms=$((terms + 1))
			if [ "$rc" -ne 0 ]; then
				bad_terms="$bad_terms m$v.$(run_of "$v")=$rc"
			fi
		else
			kill_daemon "$(eval "echo \$pid_$v")"
		fi
		kills=$((kills + 1))
		last_kill=$(now_ms)
		start_member "$v"
		newest=$v
		next_kill=$((last_kill + $(rand_between "$KILL_MIN" "$KILL_MAX")))
	fi
	sleep 0.1
done
t_end=$(now_ms)
n=$(count_rows)
for p in $producers; do
	wait "$p" || fail "kafka-produce (pid $p) failed" "$(head -3 "$dir/produce.err")"
done
if [ -n "$done_ms" ]; then
	done_s=$(awk -v a="$t0" -v b="$done_ms" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
	settle_s=$(awk -v a="$last_kill" -v b="$done_ms" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
	echo "# all $KEYS keys done after ${done_s}s, ${settle_s}s after the last of $kills kills"
else
	done_s=none
	settle_s=none
	echo "# deadline: $n of $KEYS keys done after ${DEADLINE}s, $kills kills"
fi
echo "# timeline (s:keys):$timeline"
rebalances=$(cat "$dir"/m*.log | grep -c '"event":"kafka_assigned"')
echo "RESULT keys=$KEYS done=$n done_s=$done_s settle_s=$settle_s kills=$kills" \
	"sigterms=$terms members=$MEMBERS parts=$PARTS rate=$RATE" \
	"assigned_events=$rebalances consumed=$(logged size "$dir"/m*.log)" \
	"messages=$M"

check "members were stopped $kills times ($terms by SIGTERM)" [ "$kills" -gt 0 ]
expect_eq "every SIGTERM drained and exited 0 (runs that did not: exit status)" \
	"${bad_terms:- none}" " none"
expect_eq "every key done within the ${DEADLINE}s deadline" "$n" "$KEYS"
if [ "$KILL_FOR" -gt 0 ] && [ -n "$done_ms" ]; then
	check "the group settled: done ${settle_s}s after the last kill (at most ${SETTLE_MAX}s)" \
		[ $((done_ms - last_kill)) -le $((SETTLE_MAX * 1000)) ]
fi

# Let the stream go quiet (duplicates of the re-read tail), then stop
# every member cleanly.
wait_quiet 20 1500 "$dir"/m*.log || fail "the members went quiet within 20 s"
i=1
while [ $i -le "$MEMBERS" ]; do
	stop_daemon "$(eval "echo \$pid_$i")"
	expect_eq "member $i drains on SIGTERM and exits 0" "$rc" 0
	i=$((i + 1))
done

rows=$(pgq "SELECT COUNT(*) FROM $table")
doubled=$(pgq "SELECT COUNT(*) FROM (SELECT order_id FROM $table
               GROUP BY order_id HAVING COUNT(*) > 1) x")
expect_eq "no order billed twice" "$doubled" 0
expect_eq "one invoice per order: rows" "$rows" "$KEYS"
expect_eq "inbox: one completed record per order" "$(pgq "SELECT COUNT(*)
	|| '/' || COUNT(*) FILTER (WHERE status = 'completed')
	FROM ${tag}inbox WHERE consumer = 'billing.kafka'")" "$KEYS/$KEYS"
expect_eq "no dead letter" "$(pgq "SELECT COUNT(*) FROM ${tag}dead_letters")" 0
seen=$(logged size "$dir"/m*.log)
dups=$(logged duplicate "$dir"/m*.log)
echo "# messages produced $M, consumed (logged, all runs) $seen, of which" \
	"$dups duplicates (re-read); runs per member:" \
	"$(i=1; while [ $i -le "$MEMBERS" ]; do printf ' m%d=%d' $i "$(run_of $i)"; i=$((i + 1)); done)"
clean_logs "no error (or sanitizer report) logged" "$dir"/m*.log
echo "# duration $(((t_end - t0) / 1000)) s"
summary
