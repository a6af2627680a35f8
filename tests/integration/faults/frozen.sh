#!/bin/sh
# Two daemons on one PostgreSQL and one JSONL stream; one is frozen
# (SIGSTOP) inside its batch, holding its row locks. The other must keep
# applying during the freeze: the frozen one's transaction is ended by
# idle_in_transaction_session_timeout, the other's claims give up on a
# lock after lock_timeout (55P03: transient, retried, never counted) until
# the locks are gone. After SIGCONT the frozen one reconnects; nothing is
# lost or doubled. Before the limits, the other applied 0 rows for the
# whole freeze (issue 11, item 2).
#   frozen.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
need_pg

ORDERS=400
FREEZE_S=9
dir=$(mktmp)
tag="frz$$_"
holder=""
stop_all() {
	[ -n "$holder" ] && kill -KILL "$holder" 2>/dev/null
	stop_daemons
	pg_drop_prefix "$tag"
}
exit_trap=stop_all
trap stop_all EXIT

gen_orders "$dir/orders.jsonl" $ORDERS 0 0
orders="${tag}orders"
log="${tag}log"
pgq "CREATE TABLE $orders (order_id text PRIMARY KEY, version bigint, customer text);
     CREATE TABLE $log (order_id text NOT NULL)" >/dev/null ||
	bail "the effect tables are created"

# config FILE WHO LOCK_TIMEOUT: WHO names the daemon's connections
# (application_name: the suite's server is shared with other tests). The
# effect's first step is an upsert,
# which runs at once (it asks for its row count): where the frozen one
# waits; the second, a plain insert, shows a doubled effect as two rows.
config() {
	cat >"$1" <<CFG
store: $INBOX_TEST_PG_URL?application_name=$tag$2
table_prefix: "$tag"
consumers:
  - name: frozen.test
    source: jsonl:$dir/orders.jsonl?checkpoint=$dir/$2.checkpoint
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: 20
    retry_delay: 50ms
    batch_timeout: 10s
    lock_timeout: $3
    idle_in_transaction_timeout: 5s
    effect:
      - upsert:
          table: $orders
          key: { column: order_id, value: /data/orderId }
          version: { column: version, value: /data/totalCents }
          set: { customer: /data/customer }
      - sql: INSERT INTO $log (order_id) VALUES (\$1)
        params: [/data/orderId]
CFG
}
config "$dir/a.yaml" a 10s
config "$dir/b.yaml" b 200ms
rows() { pgq "SELECT count(*) FROM $log"; }

# A session of ours holds order 5's row: a's batch (orders 1..20) claims
# its keys, applies 1..4 and waits on 5 — inside its transaction.
PGAPPNAME="${tag}holder" psql "$INBOX_TEST_PG_URL" -X -q -c \
	"BEGIN; INSERT INTO $orders VALUES ('ord-000005', 0, 'held'); SELECT pg_sleep(120)" \
	>/dev/null 2>&1 &
holder=$!
held() {
	[ "$(pgq "SELECT count(*) FROM pg_stat_activity WHERE application_name = '${tag}holder' AND wait_event = 'PgSleep'")" = 1 ]
}
wait_until 10 held || bail "our session holds order 5"

"$BIN" run "$dir/a.yaml" --once 2>"$dir/a.log" &
a=$!
daemons="$daemons $a"
a_waits() {
	abe=$(pgq "SELECT pid FROM pg_stat_activity WHERE application_name = '${tag}a' AND wait_event_type = 'Lock'")
	[ -n "$abe" ]
}
wait_until 20 a_waits || bail "daemon a waits on order 5 in its batch"
kill -STOP "$a"
t0=$(now_ms)
pgq "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '${tag}holder'" >/dev/null
wait "$holder" 2>/dev/null
holder=""
a_idle() {
	[ "$(pgq "SELECT state FROM pg_stat_activity WHERE pid = $abe")" = "idle in transaction" ]
}
if wait_until 5 a_idle; then
	ok "frozen daemon a holds its batch's transaction open (backend $abe)"
else
	fail "frozen daemon a holds its batch's transaction open" \
		"state: $(pgq "SELECT state FROM pg_stat_activity WHERE pid = $abe")"
fi
before=$(rows)

"$BIN" run "$dir/b.yaml" --once 2>"$dir/b.log" &
b=$!
daemons="$daemons $b"
sleep_ms $((FREEZE_S * 1000 - ($(now_ms) - t0)))
during=$(($(rows) - before))
gone=$(pgq "SELECT count(*) FROM pg_stat_activity WHERE pid = $abe")
kill -CONT "$a"
echo "# rows applied by b during a's ${FREEZE_S} s freeze: $during (before it: $before)"
check "b keeps applying while a is frozen (rows during the freeze > 0)" \
	[ "$during" -gt 0 ]
expect_eq "a's frozen transaction was ended by the server (idle timeout)" "$gone" 0

wait "$b"
rb=$?
forget_daemon "$b"
wait "$a"
ra=$?
forget_daemon "$a"
expect_eq "daemon b exits 0" "$rb" 0
# b claimed a's keys while a held them (5 s): its claims gave up after
# 200 ms (55P03), each a transient retry, never counted.
tr=$(stopped_field transient_retries "$dir/b.log")
echo "# b's transient retries: ${tr:-none}, batch_failed lines: $(grep -c '"event":"batch_failed"' "$dir/b.log")"
check "b's claims gave up on a's locks (lock timeout) and were retried" \
	[ "${tr:-0}" -gt 0 ]
expect_eq "daemon a (frozen, then resumed) exits 0" "$ra" 0
expect_eq "every order applied once (rows/distinct)" \
	"$(pgq "SELECT count(*) || '/' || count(DISTINCT order_id) FROM $log")" "$ORDERS/$ORDERS"
expect_eq "every order upserted" "$(pgq "SELECT count(*) FROM $orders")" "$ORDERS"
expect_eq "no dead letter" "$(pgq "SELECT count(*) FROM ${tag}dead_letters")" 0
expect_eq "no attempt counted" \
	"$(pgq "SELECT count(*) FROM ${tag}inbox WHERE status <> 'completed' OR attempts <> 1")" 0
lines=$(wc -l <"$dir/orders.jsonl")
expect_eq "a read every line after its freeze" "$(stopped_field messages "$dir/a.log")" "$lines"
clean_logs "no error in the logs" "$dir/a.log" "$dir/b.log"
summary
