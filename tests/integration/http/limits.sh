#!/bin/sh
# The http:// source's limits against the daemon: a client trickling its
# body (curl --limit-rate) is hung up on after body_timeout and holds
# nobody up meanwhile; past the connection limit a connection is
# refused, and served again once the slow ones are gone.
#   limits.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
dir=$(mktmp)
store_for sqlite
cat >"$dir/inbox.yaml" <<CFG
store: $store
consumers:
  - name: orders.api
    source: "http://127.0.0.1:0/orders?mode=api&body_timeout=2s&timeout=2s&connections=3"
    setup: |
      CREATE TABLE IF NOT EXISTS orders (id TEXT NOT NULL);
    effect:
      - sql: INSERT INTO orders (id) VALUES (\$1)
        params: [/body/id]
CFG
start_http "$dir/inbox.yaml" "$dir/daemon.log"
U="http://127.0.0.1:$port/orders"
pad=$(head -c 400 /dev/zero | tr '\0' 'x')
slow() { # NAME KEY: a 400-byte body at 20 bytes/s (20 s)
	t0=$(now_ms)
	curl -s -o /dev/null -w '%{http_code}' --max-time 20 --limit-rate 20 \
		-X POST -H "Idempotency-Key: $2" -d "{\"id\":\"$2\",\"p\":\"$pad\"}" \
		"$U" >"$dir/$1.code" 2>/dev/null
	echo $(($(now_ms) - t0)) >"$dir/$1.ms"
}
slow s1 slow-1 &
p1=$!
slow s2 slow-2 &
p2=$!
sleep 0.5
req fast -X POST -H 'Idempotency-Key: fast-1' -d '{"id":"f1"}' "$U"
expect_eq "beside two slow clients, a request is served" "$code" 200
wait "$p1"
wait "$p2"
expect_eq "a trickled body is hung up on (no answer)" "$(cat "$dir/s1.code")" 000
check "hung up on within body_timeout and a round, not the 20 s it needed ($(cat "$dir/s1.ms") ms)" [ "$(cat "$dir/s1.ms")" -lt 12000 ]
expect_eq "nothing of the trickled ones was recorded" "$(count "SELECT COUNT(*) FROM orders WHERE id LIKE 'slow-%'")" 0
# three slow ones fill the connection limit: a fourth is not served
# (libmicrohttpd leaves it in the listen backlog) until one is gone
slow s3 slow-3 &
p3=$!
slow s4 slow-4 &
p4=$!
slow s5 slow-5 &
p5=$!
sleep 0.7
t0=$(now_ms)
req over -X POST -H 'Idempotency-Key: over' -d '{"id":"over"}' "$U"
waited=$(($(now_ms) - t0))
wait "$p3"
wait "$p4"
wait "$p5"
expect_eq "past the connection limit: served once a slow one is gone" "$code" 200
check "past the connection limit: not before ($waited ms)" [ "$waited" -ge 1000 ]
req after -X POST -H 'Idempotency-Key: after' -d '{"id":"after"}' "$U"
expect_eq "then at once again" "$code" 200
stop_daemon "$pid"
expect_eq "SIGTERM: exit 0" "$rc" 0
clean_logs "no error logged" "$dir/daemon.log"
summary
