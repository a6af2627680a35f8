#!/bin/sh
# /livez and /readyz (Kubernetes probes) beside /healthz, on a PostgreSQL
# of the test's own (so it can stop it; tests/servers/pg.sh):
#   - running: all three 200; /readyz says "ready" with store and source ok
#   - draining (SIGTERM during a batch the database makes last 8 s):
#     /readyz and /healthz 503 "draining", /livez 200 (state draining);
#     exit 0, and after a restart the message was applied once
#   - the store down: /readyz and /healthz 503 naming the consumer's
#     store, /livez still 200 (restarting would not bring the database
#     back); 200 again once it is back
#   probes.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { echo "FAIL no PostgreSQL binaries"; exit 1; }
command -v curl >/dev/null || { echo "FAIL curl is missing"; exit 1; }

dir=$(mktmp)
chmod 755 "$dir"
pgdir="$dir/pg"
pid=""
stop_all() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	pid=""
	sh "$servers/pg.sh" stop "$pgdir" >/dev/null 2>&1
}
exit_trap=stop_all
trap stop_all EXIT
own_pg "$pgdir" || bail "a PostgreSQL of our own"
ok "own PostgreSQL on port $own_pg_port"
INBOX_TEST_PG_URL=$own_pg_url

src="$dir/orders.jsonl"
: >"$src"
cat >"$dir/inbox.yaml" <<CFG
store: $own_pg_url
consumers:
  - name: billing.probes
    source: jsonl:$src?follow=1&checkpoint=$dir/cp
    key: "inv:{/orderId}"
    poll_timeout: 50ms
    retry_delay: 50ms
    batch_timeout: 20s
    setup: |
      CREATE TABLE IF NOT EXISTS invoices (order_id TEXT PRIMARY KEY);
    effect:
      - sql: |
          INSERT INTO invoices (order_id)
          SELECT CAST(\$1 AS text) FROM pg_sleep(CAST(\$2 AS float8))
        params: [/orderId, /sleep]
CFG
msg() { printf '{"id":"%s","orderId":"%s","sleep":%s}\n' "$1" "$1" "$2" >>"$src"; }
applied() { [ "$(pgq "SELECT count(*) FROM invoices" 2>/dev/null)" = "$1" ]; }
start() {
	INBOX_LOG_LEVEL=info "$BIN" run "$dir/inbox.yaml" --metrics 127.0.0.1:0 --drain-timeout 20s 2>"$1" &
	pid=$!
	listening_port "$1" "$pid" || bail "the daemon starts" "$(tail -5 "$1")"
}
status_is() {
	get "$1" >/dev/null
	[ "$http_status" = "$2" ]
}

for i in 1 2 3; do msg "o$i" 0; done
start "$dir/run1.log"
check "3 messages applied" wait_until 20 applied 3
check "/readyz 200" wait_until 10 status_is /readyz 200
check "... status ready, store and source ok" jqok '.status == "ready" and .consumers[0].store == "ok" and .consumers[0].source == "ok"' "$dir/http.body"
get /livez >/dev/null
expect_eq "/livez 200" "$http_status" 200
check "... state running" jqok '.status == "ok" and .state == "running"' "$dir/http.body"
get /healthz >/dev/null
expect_eq "/healthz 200 as before" "$http_status" 200

# Draining: a batch the database holds for 8 s (time enough on a loaded
# machine), SIGTERM inside it: once its pg_sleep runs in the database,
# not 1 s after the line was appended (on a loaded machine the daemon had
# not begun the batch by then, and the drain found nothing in flight).
msg o4 8
in_batch() {
	[ "$(pgq "SELECT count(*) FROM pg_stat_activity
	           WHERE state = 'active' AND query LIKE '%pg_sleep%'
	           AND pid <> pg_backend_pid()")" -gt 0 ]
}
check "the slow batch runs in the database" wait_until 30 in_batch
kill -TERM "$pid"
check "draining: /readyz 503" wait_until 5 status_is /readyz 503
check "... the reason says draining" jqok '.status == "unavailable" and (.reason | test("draining"))' "$dir/http.body"
get /healthz >/dev/null
expect_eq "draining: /healthz 503" "$http_status" 503
get /livez >/dev/null
expect_eq "draining: /livez 200 (the process works)" "$http_status" 200
check "... state draining" jqok '.state == "draining"' "$dir/http.body"
check "... still draining (the checks above saw the drain)" kill -0 "$pid"
wait "$pid"
rc=$?
pid=""
expect_eq "the drain finishes the batch and exits 0" "$rc" 0
check "the slow message was applied" applied 4

start "$dir/run2.log"
check "restarted: /readyz 200" wait_until 10 status_is /readyz 200
msg o5 0
check "a new message is applied" wait_until 10 applied 5
check "... and the slow one was not applied twice" applied 5

# The store goes away.
sh "$servers/pg.sh" stop "$pgdir" >/dev/null 2>&1
check "store down: /readyz 503" wait_until 10 status_is /readyz 503
check "... naming the consumer and its store" jqok '(.reason | test("consumer billing.probes: ")) and .consumers[0].store == "error"' "$dir/http.body"
get /healthz >/dev/null
expect_eq "store down: /healthz 503" "$http_status" 503
get /livez >/dev/null
expect_eq "store down: /livez 200 (a restart would not help)" "$http_status" 200
check "the daemon is still running" kill -0 "$pid"
if sh "$servers/pg.sh" start "$pgdir" "$own_pg_port" >/dev/null 2>"$dir/pg.err"; then
	check "store back: /readyz 200 again" wait_until 20 status_is /readyz 200
else
	fail "restart PostgreSQL" "$(cat "$dir/pg.err")"
fi
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
expect_eq "SIGTERM: exit 0" "$rc" 0
summary
