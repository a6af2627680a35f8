#!/bin/sh
# `inbox dispatch` started while its database is down waits for it like
# `inbox run` does: a JSON "waiting" line per attempt (backoff), /healthz
# answering 503 with the reason meanwhile; once the database is up the
# outbox rows are performed. --connect-timeout bounds the wait (exit 4;
# 0: no wait); a config error still exits 3 at once; SIGTERM while
# waiting exits 0 promptly. Before, it exited 4 at once (issue 11).
#   dispatch_waiting.sh INBOX_BIN PROVIDER_BIN
# Ports: INBOX_TEST_PORT_BASE + 8 (PostgreSQL, down at start), see lib.sh.
set -u
BIN=$1
PROV=$2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../outbox/lib.sh"
group=faults
command -v curl >/dev/null || { echo "FAIL curl is missing"; echo "0 passed, 1 failed"; exit 1; }

SECRET=d1sp-s3cret
dir=$(mktmp)
chmod 755 "$dir"
pgport=$(fault_port 8)
stop_all() {
	stop_daemons
	stop_provider
	sh "$servers/pg.sh" stop "$dir/pg" kill >/dev/null 2>&1
}
exit_trap=stop_all
trap stop_all EXIT

health() {
	http_status=none
	listening_port "$1" "$pid" || return 1
	get /healthz >/dev/null
}
health_is() {
	health "$1" && [ "$http_status" = "$2" ]
}

start_provider "$dir" || bail "the test provider starts"
pgurl="postgresql://postgres:$SECRET@127.0.0.1:$pgport/inbox_test"
orders "$dir/orders.jsonl" 12
outbox_config "$dir/o.yaml" "$pgurl" "jsonl:$dir/orders.jsonl" "dw_"

# --- the database is down at start -----------------------------------------
"$BIN" dispatch "$dir/o.yaml" --metrics 127.0.0.1:0 2>"$dir/d.log" 9>&- &
pid=$!
daemons="$daemons $pid"
check "waiting for the store: 3 log lines (attempts)" \
	wait_until 10 sh -c "[ \$(grep -c '\"event\":\"waiting\"' '$dir/d.log') -ge 3 ]"
check "the dispatcher is still running" alive "$pid"
check "waiting lines are JSON, count attempts and name the store" \
	sh -c "grep '\"event\":\"waiting\"' '$dir/d.log' | head -2 | jq -se '(map(.for == \"store\" and .retry_in_ms > 0 and .consumer == \"billing.order-confirmed.v1\") | all) and .[1].attempt == .[0].attempt + 1 and .[1].retry_in_ms > .[0].retry_in_ms' >/dev/null"
health "$dir/d.log"
expect_eq "/healthz answers 503 while waiting" "$http_status" 503
cp "$dir/http.body" "$dir/health-waiting.json"
check "its reason says what the consumer waits for" \
	jqok '.status == "unavailable" and (.reason | test("consumer billing.order-confirmed.v1: waiting for its store")) and .consumers[0].running == false and .consumers[0].store == "unknown"' "$dir/health-waiting.json"
echo "     reason: $(jq -r .reason "$dir/health-waiting.json" | cut -c1-150)"

url=$(sh "$servers/pg.sh" start "$dir/pg" "$pgport" 2>"$dir/pg.err") ||
	bail "PostgreSQL starts (late)" "$(cat "$dir/pg.err")"
ok "PostgreSQL starts (late)"
check "/healthz answers 200 once the store is up" wait_until 30 health_is "$dir/d.log" 200
# the consumer writes the outbox rows; the waiting dispatcher performs them
"$BIN" run "$dir/o.yaml" --once 2>"$dir/run.log"
expect_eq "inbox run --once: exit 0" "$?" 0
check "the dispatcher performs every row" wait_until 30 sh -c "[ \"\$(\"$BIN\" dispatch '$dir/o.yaml' --pending 2>/dev/null | jq .undone)\" = 0 ]"
expect_eq "12 charges, each once" "$(pstat pay.charges)" 12
stop_daemon "$pid"
expect_eq "SIGTERM: exits 0" "$rc" 0
if grep -q "$SECRET" "$dir/d.log" "$dir/health-waiting.json"; then
	fail "the password appears neither in the log nor in /healthz" "$(grep -h "$SECRET" "$dir/d.log" "$dir/health-waiting.json" | head -2)"
else
	ok "the password appears neither in the log nor in /healthz"
fi
clean_logs "no error in the logs" "$dir/d.log" "$dir/run.log"

# --- bounds -------------------------------------------------------------------
sh "$servers/pg.sh" stop "$dir/pg" >/dev/null 2>&1
t0=$(now_ms)
# a bare number is seconds, as for inbox run (before, dispatch refused it)
"$BIN" dispatch "$dir/o.yaml" --drain --connect-timeout 1 >"$dir/timeout.out" 2>&1
rc=$?
t=$(($(now_ms) - t0))
expect_eq "--connect-timeout 1: exit 4" "$rc" 4
check "--connect-timeout 1: gives up after about 1 s (${t} ms)" [ "$t" -ge 900 -a "$t" -lt 8000 ]
check "--connect-timeout: says it gave up waiting" grep -q "gave up waiting for the store" "$dir/timeout.out"
t0=$(now_ms)
"$BIN" dispatch "$dir/o.yaml" --once --connect-timeout 0 >"$dir/nowait.out" 2>&1
rc=$?
t=$(($(now_ms) - t0))
expect_eq "--connect-timeout 0: exit 4" "$rc" 4
check "... at once, without waiting (${t} ms)" sh -c "[ $t -lt 3000 ] && ! grep -q '\"event\":\"waiting\"' '$dir/nowait.out'"
"$BIN" dispatch "$dir/o.yaml" --connect-timeout soon >"$dir/usage.out" 2>&1
expect_eq "--connect-timeout soon: exit 2" "$?" 2

sed 's|^    batch_size:|    batchsize:|' "$dir/o.yaml" >"$dir/bad.yaml"
t0=$(now_ms)
"$BIN" dispatch "$dir/bad.yaml" >"$dir/bad.out" 2>&1
rc=$?
expect_eq "a config error with the store down: exit 3" "$rc" 3
check "... at once, without waiting" sh -c "[ $(($(now_ms) - t0)) -lt 3000 ] && ! grep -q '\"event\":\"waiting\"' '$dir/bad.out'"

"$BIN" dispatch "$dir/o.yaml" 2>"$dir/term.log" 9>&- &
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
