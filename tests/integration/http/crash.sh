#!/bin/sh
# The http:// source: SIGKILL of the daemon between the commit and the
# answer (staged with ack_delay=), then the client's retry of the same
# request gets the stored answer, marked as a replay, and no second
# effect.
#   crash.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
dir=$(mktmp)
store_for "$MODE"
T="${tag}payments"
config() { # FILE EXTRA-PARAMS
	cat >"$1" <<CFG
store: $store
table_prefix: "$tag"
consumers:
  - name: payments.api
    source: "http://127.0.0.1:0/payments?mode=api&status=201$2"
    setup: |
      CREATE TABLE IF NOT EXISTS $T (id TEXT NOT NULL, cents INTEGER NOT NULL);
    effect:
      - sql: INSERT INTO $T (id, cents) VALUES (\$1, \$2)
        params: [/body/id, /body/cents]
CFG
}
config "$dir/slow.yaml" "&ack_delay=5s"
config "$dir/fast.yaml" ""
rows() { count "SELECT COUNT(*) FROM $T"; }

start_http "$dir/slow.yaml" "$dir/daemon1.log"
first=$pid
curl -s -o "$dir/lost.b" -w '%{http_code}' --max-time 30 -X POST \
	-H 'Idempotency-Key: pay-1' -d '{"id":"p1","cents":1250}' \
	"http://127.0.0.1:$port/payments" >"$dir/lost.code" 2>/dev/null &
client=$!
committed() { [ "$(rows 2>/dev/null)" = 1 ]; }
check "the effect committed (the answer is held by ack_delay)" wait_until 10 committed
kill_daemon "$first"
expect_eq "SIGKILL between commit and answer" "$rc" 137
wait "$client"
expect_eq "the client got no answer" "$(cat "$dir/lost.code")" 000

start_http "$dir/fast.yaml" "$dir/daemon2.log"
req retry -X POST -H 'Idempotency-Key: pay-1' -d '{"id":"p1","cents":1250}' \
	"http://127.0.0.1:$port/payments"
expect_eq "the retry after the restart: 201" "$code" 201
expect_eq "the retry: Idempotent-Replayed: true" "$(hdr retry Idempotent-Replayed)" true
expect_eq "the retry: the stored answer" "$(cat "$dir/retry.b")" '{"key":"pay-1","outcome":"applied"}'
expect_eq "no second effect" "$(rows)" 1
stop_daemon "$pid"
expect_eq "SIGTERM: exit 0" "$rc" 0
clean_logs "no error logged" "$dir/daemon1.log" "$dir/daemon2.log"
summary
