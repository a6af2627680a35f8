#!/bin/sh
# inbox run under a service manager (systemd's sd_notify protocol, the
# Type=notify of packaging/inbox@.service): a notification socket of the
# test's own (tests/tools/notify-listen) as NOTIFY_SOCKET. READY=1 with a
# STATUS once the consumer runs, WATCHDOG=1 about every half
# WATCHDOG_USEC, STOPPING=1 when a drain begins. SIGHUP checks the config
# file again: one that fails (bad YAML, an effect the database refuses) is
# refused with a log line and the daemon goes on; one that passes drains
# and exits 0 (Restart=always starts it again with it). Without
# NOTIFY_SOCKET nothing is sent and the daemon runs as before.
#   notify.sh INBOX_BIN NOTIFY_LISTEN_BIN
set -u
BIN=$1
LISTEN=$2
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "FAIL curl is missing"; exit 1; }

dir=$(mktmp)
lpid=""
stop_all() {
	[ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	pid=""
	[ -n "$lpid" ] && kill "$lpid" 2>/dev/null && wait "$lpid" 2>/dev/null
	lpid=""
}
exit_trap=stop_all
trap stop_all EXIT

src="$dir/orders.jsonl"
: >"$src"
# cfg FILE [COLUMN]: SQLite store, JSONL source followed.
cfg() {
	cat >"$1" <<CFG
store: sqlite:$dir/inbox.db
consumers:
  - name: billing.notify
    source: jsonl:$src?follow=1&checkpoint=$dir/cp
    key: "inv:{/orderId}"
    poll_timeout: 50ms
    setup: |
      CREATE TABLE IF NOT EXISTS invoices (order_id TEXT PRIMARY KEY);
    effect:
      - sql: INSERT INTO invoices (${2:-order_id}) VALUES (\$1)
        params: [/orderId]
CFG
}
cfg "$dir/inbox.yaml"
sock="$dir/notify.sock"
"$LISTEN" "$sock" >"$dir/notify.out" 2>"$dir/listen.err" &
lpid=$!
wait_until 5 test -S "$sock" || bail "the notification socket is listening" "$(cat "$dir/listen.err")"

NOTIFY_SOCKET=$sock WATCHDOG_USEC=300000 "$BIN" run "$dir/inbox.yaml" \
	--metrics 127.0.0.1:0 2>"$dir/run.log" &
pid=$!
listening_port "$dir/run.log" "$pid" || bail "the daemon starts" "$(tail -5 "$dir/run.log")"
got() { grep -q "$1" "$dir/notify.out"; }
check "READY=1 once the consumer runs" wait_until 10 got '^READY=1|STATUS=running 1 consumer$'
echo '{"id":"1","orderId":"o1"}' >>"$src"
applied() { [ "$(sq "$dir/inbox.db" "SELECT count(*) FROM invoices")" = "$1" ]; }
check "the consumer applies a message" wait_until 10 applied 1
sleep 1
n=$(grep -c '^WATCHDOG=1$' "$dir/notify.out")
# every 150 ms (half of 300 ms): 6 or so in the second slept, more since
if [ "$n" -ge 4 ]; then ok "WATCHDOG=1 about every half WATCHDOG_USEC ($n so far)"; else fail "WATCHDOG=1 about every half WATCHDOG_USEC" "got $n"; fi
check "no STOPPING=1 while running" sh -c "! grep -q STOPPING=1 '$dir/notify.out'"

# SIGHUP with a file that does not parse: refused, the daemon goes on.
cp "$dir/inbox.yaml" "$dir/good.yaml"
printf 'store: sqlite:%s/inbox.db\nconsumers:\n  - name: billing.notify\n    source: [unclosed\n' "$dir" >"$dir/inbox.yaml"
kill -HUP "$pid"
check "SIGHUP, broken YAML: refused (logged with the reason)" \
	wait_until 10 grep -q '"event":"reload_refused".*inbox.yaml:[0-9]' "$dir/run.log"
check "... the daemon is still running" kill -0 "$pid"
check "... STATUS says the config was refused" wait_until 5 got '^STATUS=running; the config sent with SIGHUP was refused'
echo '{"id":"2","orderId":"o2"}' >>"$src"
check "... and it still applies messages" wait_until 10 applied 2
get /readyz >/dev/null
expect_eq "... /readyz 200" "$http_status" 200

# SIGHUP with a file that parses but whose effect the database refuses.
cfg "$dir/inbox.yaml" no_such_column
kill -HUP "$pid"
check "SIGHUP, an effect naming a missing column: refused" \
	wait_until 10 grep -q '"event":"reload_refused".*no_such_column' "$dir/run.log"
check "... the daemon is still running" kill -0 "$pid"

# SIGHUP with a good file: drain, exit 0.
cp "$dir/good.yaml" "$dir/inbox.yaml"
kill -HUP "$pid"
wait "$pid"
rc=$?
pid=""
expect_eq "SIGHUP, a good config: drains and exits 0 (the manager restarts it)" "$rc" 0
check "... logged as a reload, then the drain naming SIGHUP" \
	sh -c "grep -q '\"event\":\"reload\"' '$dir/run.log' && grep -q '\"event\":\"draining\",\"signal\":\"SIGHUP\"' '$dir/run.log'"
check "... STOPPING=1 sent" got '^STOPPING=1|STATUS=draining to restart with the new config$'

# Started again as the manager would: SIGTERM sends STOPPING=1 too.
: >"$dir/notify.out"
NOTIFY_SOCKET=$sock "$BIN" run "$dir/inbox.yaml" 2>"$dir/run2.log" &
pid=$!
check "restarted: READY=1" wait_until 10 got '^READY=1'
check "... the messages were not applied again" applied 2
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
expect_eq "SIGTERM: exit 0" "$rc" 0
check "... STOPPING=1 after a stop signal" got '^STOPPING=1|STATUS=draining after a stop signal$'
check "no WATCHDOG=1 without WATCHDOG_USEC" sh -c "! grep -q WATCHDOG '$dir/notify.out'"

# No NOTIFY_SOCKET (a terminal, Kubernetes): nothing sent, runs as before.
: >"$dir/notify.out"
WATCHDOG_USEC=100000 "$BIN" run "$dir/inbox.yaml" 2>"$dir/run3.log" &
pid=$!
sleep 1
check "without NOTIFY_SOCKET: running" kill -0 "$pid"
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
expect_eq "... exit 0 on SIGTERM" "$rc" 0
expect_eq "... nothing reached the socket" "$(wc -c <"$dir/notify.out" | tr -d ' ')" 0
summary
