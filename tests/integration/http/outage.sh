#!/bin/sh
# The http:// source while the database does not answer (its table
# locked past lock_timeout: the runner retries the batch with backoff):
# no client waits past answer_within. The request in the stuck batch gets
# 503 "not known yet" and, retried meanwhile, 409 (still in flight);
# one that arrived behind it gets 503 with nothing stored. Once the lock
# is gone the first commits: its retry is the replay, the second's retry
# is new, and each has one effect.
#   outage.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
dir=$(mktmp)
store_for "$MODE"
T="${tag}orders"
cat >"$dir/inbox.yaml" <<CFG
store: $store
table_prefix: "$tag"
consumers:
  - name: orders.api
    source: "http://127.0.0.1:0/orders?mode=api&status=201&answer_within=2s"
    lock_timeout: 200ms
    setup: |
      CREATE TABLE IF NOT EXISTS $T (id TEXT NOT NULL);
    effect:
      - sql: INSERT INTO $T (id) VALUES (\$1)
        params: [/body/id]
CFG
start_http "$dir/inbox.yaml" "$dir/daemon.log"
U="http://127.0.0.1:$port/orders"
rows() { count "SELECT COUNT(*) FROM $T WHERE id = '$1'"; }
if [ "$MODE" = pg ]; then
	psql "$INBOX_TEST_PG_URL" -X -q -c "BEGIN; LOCK TABLE $T; SELECT pg_sleep(7); COMMIT" >/dev/null 2>&1 &
else
	# with a busy timeout: without one, a BEGIN EXCLUSIVE that meets
	# another writer — locked()'s own BEGIN IMMEDIATE below, probing
	# while the locker starts, or the daemon — fails at once, and the
	# locker sleeps holding nothing (seen once: "the locker holds its
	# lock" failed, and every check after it)
	sqlite3 "$dir/t.db" ".timeout 5000" "BEGIN EXCLUSIVE;" ".shell sleep 7" "COMMIT;" >/dev/null 2>&1 &
fi
locker=$!
# The request below must reach the daemon while the lock is held, not
# 0.5 s after the locker was started: on a loaded machine psql took longer
# than that to lock, and the request committed (201).
if [ "$MODE" = pg ]; then
	locked() {
		[ "$(count "SELECT COUNT(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = '$T' AND l.mode = 'AccessExclusiveLock' AND l.granted")" = 1 ]
	}
else
	locked() { ! sqlite3 "$dir/t.db" ".timeout 0" "BEGIN IMMEDIATE;" "ROLLBACK;" >/dev/null 2>&1; }
fi
check "the locker holds its lock" wait_until 5 locked
t0=$(now_ms)
req stuck -X POST -H 'Idempotency-Key: a' -d '{"id":"a"}' "$U" &
c1=$!
sleep 0.5
req behind -X POST -H 'Idempotency-Key: b' -d '{"id":"b"}' "$U" &
c2=$!
wait "$c1"
took=$(($(now_ms) - t0))
stuck=$(awk 'NR == 1 { print $2 }' "$dir/stuck.h")
expect_eq "the request in the stuck batch: 503" "$stuck" 503
check "answered within answer_within and a round ($took ms)" [ "$took" -lt 4000 ]
expect_eq "503 has Retry-After" "$(hdr stuck Retry-After)" 1
check "503 says the outcome is not known yet" grep -q 'not known yet' "$dir/stuck.b"
req again -X POST -H 'Idempotency-Key: a' -d '{"id":"a"}' "$U"
expect_eq "its retry while the batch is still stuck: 409" "$code" 409
wait "$c2"
expect_eq "the request behind it: 503" "$(awk 'NR == 1 { print $2 }' "$dir/behind.h")" 503
check "503 says nothing was stored" grep -q 'nothing was stored' "$dir/behind.b"
wait "$locker"
committed() { [ "$(rows a)" = 1 ]; }
check "the stuck batch commits once the lock is gone" wait_until 15 committed
req replay -X POST -H 'Idempotency-Key: a' -d '{"id":"a"}' "$U"
expect_eq "then the first's retry: the replay" "$code:$(hdr replay Idempotent-Replayed)" 201:true
req new -X POST -H 'Idempotency-Key: b' -d '{"id":"b"}' "$U"
expect_eq "the second's retry: new" "$code:$(hdr new Idempotent-Replayed)" 201:
expect_eq "one effect each" "$(rows a):$(rows b)" 1:1
check "the log: the batch was retried" grep -q '"event":"batch_failed"' "$dir/daemon.log"
check "the log: the 503s as outcome timeout" grep -q '"status":503,"outcome":"timeout"' "$dir/daemon.log"
stop_daemon "$pid"
expect_eq "SIGTERM: exit 0" "$rc" 0
clean_logs "no error logged" "$dir/daemon.log"
summary
