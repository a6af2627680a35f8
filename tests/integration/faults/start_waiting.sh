#!/bin/sh
# `inbox run` started while its database, then its broker, is down: it
# waits with backoff and a JSON log line per attempt, /healthz answering
# 503 with the reason meanwhile, and once the dependency comes up the
# messages flow. --connect-timeout bounds the wait (exit 4); a config
# error still exits 3 at once; SIGTERM while waiting exits 0 promptly.
# Before, the daemon exited 4 at once: under systemd or Kubernetes a
# restart loop with nothing in /healthz (issue 11, item 4).
#   start_waiting.sh INBOX_BIN
# Ports: INBOX_TEST_PORT_BASE + 6 (PostgreSQL) and + 7 (Redis), see lib.sh.
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "FAIL curl is missing"; echo "0 passed, 1 failed"; exit 1; }
command -v redis-server >/dev/null || { echo "FAIL redis-server is missing"; echo "0 passed, 1 failed"; exit 1; }
command -v socat >/dev/null || { echo "FAIL socat is missing (scripts/install-deps.sh)"; echo "0 passed, 1 failed"; exit 1; }

SECRET=w4it-s3cret
dir=$(mktmp)
chmod 755 "$dir"
pgport=$(fault_port 6)
rport=$(fault_port 7)
stop_all() {
	stop_daemons
	sh "$servers/pg.sh" stop "$dir/pg" kill >/dev/null 2>&1
	sh "$servers/redis.sh" stop "$dir/redis" >/dev/null 2>&1
}
exit_trap=stop_all
trap stop_all EXIT

# health: GET /healthz of the daemon whose log is $1 (its port read from
# the metrics_listening line); status in $http_status, body in $dir/http.body.
health() {
	http_status=none
	listening_port "$1" "$pid" || return 1
	get /healthz >/dev/null
}
health_is() {
	health "$1" && [ "$http_status" = "$2" ]
}
# waiting_lines LOG FOR: how many "waiting" lines for FOR (store/source).
waiting_lines() {
	grep '"event":"waiting"' "$1" | grep -c "\"for\":\"$2\""
}

# --- the database is down at start -----------------------------------------
pgurl="postgresql://postgres:$SECRET@127.0.0.1:$pgport/inbox_test"
gen_orders "$dir/orders.jsonl" 15 0 0
fx_config "$dir/pg.yaml" "$pgurl" "jsonl:$dir/orders.jsonl?follow=1" fx_wait
"$BIN" run "$dir/pg.yaml" --metrics 127.0.0.1:0 2>"$dir/pg.log" 9>&- &
pid=$!
daemons="$daemons $pid"
check "waiting for the store: 3 log lines (attempts)" \
	wait_until 10 sh -c "[ \$(grep -c '\"event\":\"waiting\"' '$dir/pg.log') -ge 3 ]"
check "the daemon is still running" alive "$pid"
check "waiting lines are JSON, count attempts and name the store" \
	sh -c "grep '\"event\":\"waiting\"' '$dir/pg.log' | head -2 | jq -se '(map(.for == \"store\" and .retry_in_ms > 0) | all) and .[1].attempt == .[0].attempt + 1' >/dev/null"
health "$dir/pg.log"
expect_eq "/healthz answers 503 while waiting" "$http_status" 503
cp "$dir/http.body" "$dir/health-waiting.json"
check "its reason says what the consumer waits for" \
	jqok '.status == "unavailable" and (.reason | test("consumer faults.test: waiting for its store")) and .consumers[0].running == false' "$dir/health-waiting.json"
echo "     reason: $(jq -r .reason "$dir/health-waiting.json" | cut -c1-150)"

url=$(sh "$servers/pg.sh" start "$dir/pg" "$pgport" 2>"$dir/pg.err") ||
	bail "PostgreSQL starts (late)" "$(cat "$dir/pg.err")"
ok "PostgreSQL starts (late)"
check "/healthz answers 200 once the store is up" wait_until 30 health_is "$dir/pg.log" 200
count_rows() { psql_at "$url" "SELECT count(*) FROM fx_wait"; }
expect_eq "the orders waiting in the file are applied" "$(wait_count 15 30)" 15
order_stream 5 0 0 16 >>"$dir/orders.jsonl"
expect_eq "new orders flow" "$(wait_count 20 30)" 20
stop_daemon "$pid"
expect_eq "SIGTERM: drains and exits 0" "$rc" 0
if grep -q "$SECRET" "$dir/pg.log" "$dir/health-waiting.json"; then
	fail "the password appears neither in the log nor in /healthz" "$(grep -h "$SECRET" "$dir/pg.log" "$dir/health-waiting.json" | head -2)"
else
	ok "the password appears neither in the log nor in /healthz"
fi

# --- the broker is down at start --------------------------------------------
R="redis://127.0.0.1:$rport"
fx_config "$dir/r.yaml" "sqlite:$dir/r.db" "$R/orders?group=billing" fx_wait
"$BIN" run "$dir/r.yaml" --metrics 127.0.0.1:0 2>"$dir/r.log" 9>&- &
pid=$!
daemons="$daemons $pid"
check "waiting for the source: log lines" \
	wait_until 10 sh -c "[ \$(grep -c '\"event\":\"waiting\",\"for\":\"source\"' '$dir/r.log') -ge 2 ]"
health "$dir/r.log"
expect_eq "/healthz answers 503 while waiting for the broker" "$http_status" 503
check "its reason says it waits for the source" \
	jqok '.reason | test("waiting for its source")' "$dir/http.body"
sh "$servers/redis.sh" start "$dir/redis" "$rport" >/dev/null 2>"$dir/redis.err" ||
	bail "Redis starts (late)" "$(cat "$dir/redis.err")"
ok "Redis starts (late)"
order_stream 25 0 0 | awk '{ printf("XADD orders * payload '\''%s'\''\n", $0) }' |
	redis-cli -u "$R" >/dev/null
check "/healthz answers 200 once the broker is up" wait_until 30 health_is "$dir/r.log" 200
count_rows() { sq "$dir/r.db" "SELECT count(*) FROM fx_wait"; }
expect_eq "the messages flow" "$(wait_count 25 30)" 25
stop_daemon "$pid"
expect_eq "SIGTERM: drains and exits 0" "$rc" 0
clean_logs "no error in the logs" "$dir/pg.log" "$dir/r.log"

# --- bounds -------------------------------------------------------------------
sh "$servers/pg.sh" stop "$dir/pg" >/dev/null 2>&1
t0=$(now_ms)
"$BIN" run "$dir/pg.yaml" --connect-timeout 1s >"$dir/timeout.out" 2>&1
rc=$?
t=$(($(now_ms) - t0))
expect_eq "--connect-timeout 1s: exit 4" "$rc" 4
check "--connect-timeout 1s: gives up after about 1 s (${t} ms)" [ "$t" -ge 900 -a "$t" -lt 8000 ]
check "--connect-timeout: says it gave up waiting" grep -q "gave up waiting for the store" "$dir/timeout.out"
check "--connect-timeout: a waiting line per attempt, the last one gives up" \
	sh -c "grep '\"event\":\"waiting\"' '$dir/timeout.out' | jq -se 'length >= 2 and ([.[].attempt] == [range(1; length + 1)]) and (.[:-1] | map(.retry_in_ms > 0 and .gave_up == null) | all) and (.[-1] | .gave_up == true and .retry_in_ms == 0)' >/dev/null"
# A first attempt that alone outlasts --connect-timeout: a server that
# accepts the connection and never answers (libpq gives up after its
# connect_timeout). It still has its waiting line, the one that gives up
# (before, none: the log showed no wait at all). libpq's deadline is in
# whole seconds (time(NULL) + connect_timeout, the wait left read again
# in whole seconds), so connect_timeout=N ends after N - 1 to N s: a run
# that started just before a second turned gave up after 1015 ms with 2.
# With 3 it takes 2 to 3 s, always longer than --connect-timeout 1s.
socat -u "TCP-LISTEN:$pgport,bind=127.0.0.1,reuseaddr" OPEN:/dev/null 2>"$dir/mute.err" &
mute=$!
fx_config "$dir/mute.yaml" "$pgurl?connect_timeout=3" "jsonl:$dir/orders.jsonl" fx_wait
wait_until 5 sh -c "ss -ltn | grep -q '127.0.0.1:$pgport '"
t0=$(now_ms)
"$BIN" run "$dir/mute.yaml" --connect-timeout 1s >"$dir/mute.out" 2>&1
rc=$?
t=$(($(now_ms) - t0))
kill -TERM "$mute" 2>/dev/null
wait "$mute" 2>/dev/null
expect_eq "a first attempt longer than --connect-timeout: exit 4" "$rc" 4
check "... that one attempt took libpq's 2 to 3 s (${t} ms)" [ "$t" -ge 1900 -a "$t" -lt 8000 ]
check "... its waiting line, the one that gives up" \
	sh -c "grep '\"event\":\"waiting\"' '$dir/mute.out' | jq -se 'length == 1 and (.[0] | .for == \"store\" and .attempt == 1 and .gave_up == true)' >/dev/null"
check "... says it gave up waiting" grep -q "gave up waiting for the store" "$dir/mute.out"

sed 's|^    batch_size:|    batchsize:|' "$dir/pg.yaml" >"$dir/bad.yaml"
t0=$(now_ms)
"$BIN" run "$dir/bad.yaml" >"$dir/bad.out" 2>&1
rc=$?
expect_eq "a config error with the store down: exit 3" "$rc" 3
check "... at once, without waiting" sh -c "[ $(($(now_ms) - t0)) -lt 3000 ] && ! grep -q '\"event\":\"waiting\"' '$dir/bad.out'"
# A missing effect table is only found in the database: with the store up
# it is a config error (3) at once, not something to wait for.
url=$(sh "$servers/pg.sh" start "$dir/pg" "$pgport" 2>"$dir/pg.err") || bail "PostgreSQL restarts"
sed 's|INSERT INTO fx_wait|INSERT INTO fx_nosuch|' "$dir/pg.yaml" >"$dir/notable.yaml"
sed -i '/CREATE TABLE IF NOT EXISTS/,/);/d; /setup: |/d' "$dir/notable.yaml"
"$BIN" run "$dir/notable.yaml" >"$dir/notable.out" 2>&1
expect_eq "an effect the database refuses: exit 3 at once" "$?" 3
sh "$servers/pg.sh" stop "$dir/pg" >/dev/null 2>&1

"$BIN" run "$dir/pg.yaml" 2>"$dir/term.log" 9>&- &
pid=$!
daemons="$daemons $pid"
wait_until 10 sh -c "grep -q '\"event\":\"waiting\"' '$dir/term.log'"
t0=$(now_ms)
stop_daemon "$pid"
t=$(($(now_ms) - t0))
expect_eq "SIGTERM while waiting: exit 0" "$rc" 0
check "... promptly (${t} ms)" [ "$t" -lt 2000 ]
check "... saying so" grep -q '"event":"stopped","result":"ok","while":"waiting' "$dir/term.log"
summary
