#!/bin/sh
# The http:// source: 50 concurrent requests with one key -> one effect,
# one 2xx that is not a replay, every other answer a 409 (with
# Retry-After) or the replay.
#   concurrent.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
dir=$(mktmp)
store_for "$MODE"
T="${tag}charges"
# ack_delay holds each answer a little, so the requests overlap in flight
cat >"$dir/inbox.yaml" <<CFG
store: $store
table_prefix: "$tag"
consumers:
  - name: charges.api
    source: "http://127.0.0.1:0/charges?mode=api&ack_delay=200ms"
    setup: |
      CREATE TABLE IF NOT EXISTS $T (id TEXT NOT NULL);
    effect:
      - sql: INSERT INTO $T (id) VALUES (\$1)
        params: [/body/id]
CFG
start_http "$dir/inbox.yaml" "$dir/daemon.log"
U="http://127.0.0.1:$port/charges"
mkdir "$dir/r"
one() {
	curl -s -D "$dir/r/$1.h" -o "$dir/r/$1.b" -w '%{http_code}\n' --max-time 30 \
		-X POST -H 'Idempotency-Key: charge-42' -d '{"id":"c42"}' "$U" >"$dir/r/$1.code"
}
i=1
while [ $i -le 50 ]; do
	one $i &
	i=$((i + 1))
done
wait_clients() { for _j in $(jobs -p); do [ "$_j" = "$pid" ] || wait "$_j"; done; }
# (the daemon is a job too: wait for the clients only)
for f in $(seq 1 300); do
	[ "$(ls "$dir"/r/*.code 2>/dev/null | wc -l)" -ge 50 ] &&
		[ -z "$(find "$dir/r" -name '*.code' -empty)" ] && break
	sleep 0.1
done
fresh=0
replays=0
busy=0
other=0
for i in $(seq 1 50); do
	c=$(cat "$dir/r/$i.code")
	rp=$(grep -i '^Idempotent-Replayed:' "$dir/r/$i.h" | tr -d ' \r' | cut -d: -f2)
	ra=$(grep -i '^Retry-After:' "$dir/r/$i.h" | tr -d ' \r' | cut -d: -f2)
	case "$c:$rp" in
	200:) fresh=$((fresh + 1)) ;;
	200:true) replays=$((replays + 1)) ;;
	409:) [ -n "$ra" ] && busy=$((busy + 1)) || other=$((other + 1)) ;;
	*) other=$((other + 1)) ;;
	esac
done
echo "# 50 requests: $fresh fresh 2xx, $replays replays, $busy 409"
expect_eq "one 2xx that is not a replay" "$fresh" 1
expect_eq "every other answer is a 409 with Retry-After or the replay" "$other" 0
check "some requests overlapped in flight (409)" [ "$busy" -gt 0 ]
expect_eq "one effect" "$(count "SELECT COUNT(*) FROM $T")" 1
stop_daemon "$pid"
expect_eq "SIGTERM: exit 0" "$rc" 0
clean_logs "no error logged" "$dir/daemon.log"
summary
