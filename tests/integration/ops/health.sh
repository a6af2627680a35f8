#!/bin/sh
# /healthz of a running `inbox run` when its PostgreSQL goes away: 200
# while the store answers, 503 with a JSON reason once nothing listens on
# its port (the daemon stays up and keeps retrying), 200 again when the
# server is back, and the messages that arrived meanwhile are applied
# once. The test runs its own throwaway PostgreSQL (tests/servers/pg.sh)
# so it can stop it; the store URL carries a planted password that must
# never show in /healthz, /metrics or the logs.
#   health.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { echo "skip: no PostgreSQL binaries"; exit 77; }
command -v curl >/dev/null || { echo "skip: curl is missing"; exit 77; }

SECRET=h3alth-s3cret
dir=$(mktmp)
chmod 755 "$dir"
tag="opsh$$_"
KIND=pg
pgdir="$dir/pg"
stop_pg() { sh "$servers/pg.sh" stop "$pgdir" >/dev/null 2>&1; }
# Stop what we started before summary removes the directory (and the PID
# files in it).
finish() {
	ops_stop_daemon
	stop_pg
	summary
}
trap 'ops_stop_daemon; stop_pg' EXIT

# A port of our own: after the suite's (base+9), else derived from the PID;
# pg.sh refuses a port already in use, so try a few.
base=${INBOX_TEST_PORT_BASE:-$((30000 + $$ % 1000 * 10))}
url=""
for try in 9 19 29 39 49; do
	pgport=$((base + try))
	if url=$(sh "$servers/pg.sh" start "$pgdir" "$pgport" 2>"$dir/pg.err"); then
		break
	fi
	url=""
done
if [ -z "$url" ]; then
	fail "start a PostgreSQL of our own" "$(cat "$dir/pg.err")"
	finish
fi
ok "own PostgreSQL on port $pgport"
INBOX_TEST_PG_URL=$url
STORE=$(plant_secret "$url")

src="$dir/orders.jsonl"
: >"$src"
for i in $(seq 1 10); do order "m-$i" "ord-$i" c1 $((100 + i)) >>"$src"; done
ops_config "$dir/inbox.yaml" "jsonl:$src?follow=1&checkpoint=$dir/cp"
check "migrate" ops_migrate "$dir/inbox.yaml"
LOG_LEVEL=debug
if ! ops_start_daemon "$dir/inbox.yaml" "$dir/run.log"; then
	fail "daemon starts" "$(tail -5 "$dir/run.log")"
	finish
fi
applied() { [ "$(q "SELECT count(*) FROM ${tag}invoices")" = "$1" ]; }
check "10 orders applied" wait_until 20 applied 10
get /healthz >/dev/null
expect_eq "healthz 200 while the store answers" "$http_status" 200

stop_pg
status_is() {
	get /healthz >/dev/null
	[ "$http_status" = "$1" ]
}
check "healthz 503 once the store is down" wait_until 10 status_is 503
cp "$dir/http.body" "$dir/health503.json"
check "503 body is JSON with status unavailable" jqok '.status == "unavailable"' "$dir/health503.json"
check "the reason names the consumer and the store" \
	jqok '(.reason | test("consumer billing.ops: ")) and .consumers[0].store == "error" and (.consumers[0].error | length > 0)' "$dir/health503.json"
echo "     reason: $(jq -r .reason "$dir/health503.json")"

# Messages arriving while the store is down: the daemon keeps retrying.
for i in $(seq 11 15); do order "m-$i" "ord-$i" c1 $((100 + i)) >>"$src"; done
# Waited for, not assumed 1 s after the lines were appended (a loaded
# machine's daemon may not have tried a batch by then): a batch failed,
# then one more, i.e. retried.
batches_failed() { [ "$(grep -c '"event":"batch_failed"' "$dir/run.log")" -ge "$1" ]; }
check "batches fail and are retried (logged)" wait_until 30 batches_failed 2
check "the daemon is still running" kill -0 "$daemon_pid"
get /metrics >"$dir/metrics-down.txt"
expect_eq "/metrics still answers while the store is down" "$http_status" 200
expect_eq "store_up 0" "$(metric "$dir/metrics-down.txt" inbox_store_up)" 0

if ! sh "$servers/pg.sh" start "$pgdir" "$pgport" >/dev/null 2>"$dir/pg.err"; then
	fail "restart PostgreSQL" "$(cat "$dir/pg.err")"
	finish
fi
check "healthz 200 again when the store is back" wait_until 20 status_is 200
check "the 5 orders that waited are applied, once" wait_until 20 applied 15
sleep 0.5
check "no order applied twice" applied 15
ops_stop_daemon
expect_eq "SIGTERM: the daemon drains and exits 0" "$daemon_rc" 0

for f in "$dir/run.log" "$dir/health503.json" "$dir/metrics-down.txt"; do
	if grep -q "$SECRET" "$f"; then
		fail "password absent from $(basename "$f")" "$(grep "$SECRET" "$f" | head -2)"
	else
		ok "password absent from $(basename "$f")"
	fi
done
check "every log line is one JSON object" all_json_lines "$dir/run.log"
finish
