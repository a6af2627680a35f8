#!/bin/sh
# /readyz follows the source too: a Redis of the test's own
# (tests/servers/redis.sh, a random free port) under a running daemon on
# SQLite. Stopped: its polls fail, /readyz answers 503 with the source's
# error ("source":"error") while /healthz (consumers running, store
# answering) and /livez stay 200; started again and fed an entry: the
# entry is applied and /readyz is 200 again.
#   probes_source.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
command -v redis-server >/dev/null || { echo "FAIL redis-server is missing"; echo "0 passed, 1 failed"; exit 1; }
dir=$(mktmp)
rdir="$dir/redis"
mkdir -p "$rdir"
pid=""
stop_all() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	pid=""
	sh "$servers/redis.sh" stop "$rdir" >/dev/null 2>&1
	return 0
}
exit_trap=stop_all
trap stop_all EXIT
url=""
for i in 1 2 3 4 5 6; do
	rport=$(rand_between 30000 59000)
	if sh "$servers/redis.sh" start "$rdir" "$rport" >/dev/null 2>&1; then
		url="redis://127.0.0.1:$rport"
		break
	fi
done
[ -n "$url" ] || bail "a Redis of our own"
ok "own Redis on port $rport"
cat >"$dir/inbox.yaml" <<CFG
store: sqlite:$dir/inbox.db
consumers:
  - name: billing.redis
    source: "$url/orders?group=billing"
    key: "inv:{/orderId}"
    poll_timeout: 100ms
    setup: CREATE TABLE IF NOT EXISTS invoices (order_id TEXT PRIMARY KEY)
    effect: {sql: "INSERT INTO invoices (order_id) VALUES (\$1)", params: [/orderId]}
CFG
add() { redis-cli -u "$url" XADD orders '*' payload "{\"id\":\"$1\",\"orderId\":\"$1\"}" >/dev/null; }
applied() { [ "$(sq "$dir/inbox.db" "SELECT count(*) FROM invoices" 2>/dev/null)" = "$1" ]; }
status_is() {
	get "$1" >/dev/null
	[ "$http_status" = "$2" ]
}
add o1
"$BIN" run "$dir/inbox.yaml" --metrics 127.0.0.1:0 2>"$dir/run.log" &
pid=$!
listening_port "$dir/run.log" "$pid" || bail "the daemon starts" "$(tail -5 "$dir/run.log")"
check "the first entry is applied" wait_until 20 applied 1
check "/readyz 200" wait_until 10 status_is /readyz 200

sh "$servers/redis.sh" stop "$rdir" >/dev/null 2>&1
check "source down: /readyz 503" wait_until 20 status_is /readyz 503
check "... the source named with its error" jqok '.consumers[0].source == "error" and (.consumers[0].source_error | length > 0) and (.reason | test("consumer billing.redis: source: "))' "$dir/http.body"
echo "     reason: $(jq -r .reason "$dir/http.body")"
get /healthz >/dev/null
expect_eq "... /healthz 200 (consumer running, store answering)" "$http_status" 200
get /livez >/dev/null
expect_eq "... /livez 200" "$http_status" 200
check "the daemon is still running" kill -0 "$pid"

sh "$servers/redis.sh" start "$rdir" "$rport" >/dev/null 2>&1 || fail "restart Redis"
wait_until 10 add o2 || fail "XADD after the restart"
check "source back: the new entry is applied" wait_until 30 applied 2
check "... /readyz 200 again" wait_until 10 status_is /readyz 200
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
expect_eq "SIGTERM: exit 0" "$rc" 0
summary
