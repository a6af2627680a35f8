#!/bin/sh
# A message's attempts are its own failures, never the broker's delivery
# count; max_deliveries bounds a message that kills the daemon again and
# again (a crash loop), which max_attempts cannot see: nothing is ever
# recorded for it. PostgreSQL store, Redis source (the pending entry's
# delivery counter, bumped by every XAUTOCLAIM of a restarted member),
# max_attempts 2, max_deliveries 4, one message per batch.
#   o-stall stalls its effect for 3 deliveries (the daemon is SIGKILLed
#     in it each time, its backend terminated: a host gone), then no
#     more: applied at its 4th delivery (before: dead-lettered at its
#     3rd, "max attempts (2) reached: delivered 3 times").
#   o-loop stalls every time: killed at deliveries 1..4, dead-lettered
#     unrun at its 5th with "delivered 5 times without completing
#     (max_deliveries 4): a crash loop?".
# Every other order is applied once; nothing else is dead-lettered.
#   crash_loop.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
need_pg
need_suite_server INBOX_TEST_REDIS_URL redis-server redis.sh

dir=$(mktmp)
tag="crl$$_"
R=$INBOX_TEST_REDIS_URL
stream="inbox-crash-loop-$$-$(date +%s)"
stop_all() {
	stop_daemons
	pg_drop_prefix "$tag"
	redis-cli -u "$R" DEL "$stream" >/dev/null 2>&1
}
exit_trap=stop_all
trap stop_all EXIT

inv="${tag}invoices"
stall="${tag}stall"
pgq "CREATE TABLE $inv (order_id text NOT NULL);
     CREATE TABLE $stall (order_id text PRIMARY KEY);
     INSERT INTO $stall VALUES ('o-stall'), ('o-loop')" >/dev/null ||
	bail "the effect tables are created"

{
	order_stream 10 0 0 1
	echo '{"id":"m-stall","data":{"orderId":"o-stall"}}'
	order_stream 10 0 0 11
	echo '{"id":"m-loop","data":{"orderId":"o-loop"}}'
	order_stream 10 0 0 21
} | awk -v s="$stream" '{ printf("XADD %s * payload '\''%s'\''\n", s, $0) }' |
	redis-cli -u "$R" >/dev/null
# The effect names its backend after the order (application_name, local
# to the transaction), then sleeps while the order is in $stall.
cat >"$dir/inbox.yaml" <<CFG
store: $INBOX_TEST_PG_URL?application_name=${tag}d
table_prefix: "$tag"
consumers:
  - name: crash.loop
    source: $R/$stream?group=billing&claim_idle=200&drain=1
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: 1
    max_attempts: 2
    max_deliveries: 4
    retry_delay: 50ms
    poll_timeout: 50ms
    batch_timeout: 20s
    effect:
      - sql: SELECT set_config('application_name', '${tag}' || \$1, true)
        params: [/data/orderId]
      - sql: SELECT pg_sleep(30) FROM $stall WHERE order_id = \$1
        params: [/data/orderId]
      - sql: INSERT INTO $inv (order_id) VALUES (\$1)
        params: [/data/orderId]
CFG

# stalled: the order whose effect sleeps now (empty: none).
stalled() {
	pgq "SELECT substr(application_name, length('$tag') + 1)
	     FROM pg_stat_activity WHERE application_name IN
	     ('${tag}o-stall', '${tag}o-loop') AND wait_event = 'PgSleep'"
}
in_effect() { [ -n "$(stalled)" ] || ! alive "$pid"; }

kills_stall=0 kills_loop=0 exits=""
for round in 1 2 3 4 5 6 7 8 9 10; do
	"$BIN" run "$dir/inbox.yaml" --once 2>>"$dir/daemon.log" &
	pid=$!
	daemons="$daemons $pid"
	wait_until 60 in_effect || bail "round $round: neither in an effect nor done"
	who=$(stalled)
	if [ -z "$who" ]; then
		wait "$pid"
		exits="$?"
		forget_daemon "$pid"
		echo "# round $round: the daemon drained the group, exit $exits"
		break
	fi
	kill_daemon "$pid"
	# the host is gone: so is its session
	pgq "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	     WHERE application_name LIKE '${tag}%'" >/dev/null
	case $who in
	o-stall)
		kills_stall=$((kills_stall + 1))
		[ "$kills_stall" -eq 3 ] &&
			pgq "DELETE FROM $stall WHERE order_id = 'o-stall'" >/dev/null
		;;
	o-loop) kills_loop=$((kills_loop + 1)) ;;
	esac
	echo "# round $round: SIGKILL in $who's effect," \
		"invoices $(pgq "SELECT count(*) FROM $inv")"
done

expect_eq "o-stall: killed in its effect 3 times (deliveries 1-3 > max_attempts 2)" \
	"$kills_stall" 3
expect_eq "o-loop: killed in its effect 4 times (max_deliveries 4)" \
	"$kills_loop" 4
expect_eq "the last run drains the group and exits 0" "$exits" 0
expect_eq "o-stall applied at its 4th delivery, once" \
	"$(pgq "SELECT count(*) FROM $inv WHERE order_id = 'o-stall'")" 1
expect_eq "o-stall: one attempt recorded" \
	"$(pgq "SELECT status || ' ' || attempts FROM ${tag}inbox WHERE key = 'create-invoice:o-stall'")" \
	"completed 1"
expect_eq "every other order applied once (rows/distinct)" \
	"$(pgq "SELECT count(*) || '/' || count(DISTINCT order_id) FROM $inv WHERE order_id LIKE 'ord-%'")" \
	"30/30"
expect_eq "o-loop never applied" \
	"$(pgq "SELECT count(*) FROM $inv WHERE order_id = 'o-loop'")" 0
expect_eq "one dead letter: o-loop, with the crash-loop reason" \
	"$(pgq "SELECT string_agg(key || ' ' || attempts || ' ' || reason, ';') FROM ${tag}dead_letters")" \
	"create-invoice:o-loop 0 delivered 5 times without completing (max_deliveries 4): a crash loop?"
expect_eq "nothing pending in the group" \
	"$(redis-cli -u "$R" --raw XPENDING "$stream" billing | head -1)" 0
summary
