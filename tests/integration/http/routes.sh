#!/bin/sh
# Several routes on one listener (docs/http.md, "Several routes on one
# port"): two API routes and a Standard Webhooks route, three consumers,
# one host:port (port 0: one real port, read from the log). Each request
# lands in its own consumer's table exactly once, replays are per route,
# one Idempotency-Key on two routes is two operations, 404 and 405 (with
# Allow) for what no route takes, /metrics by route, SIGTERM answers the
# requests in flight on every route, and `inbox check` refuses routes
# that disagree on the listener's options (or take the same route).
#   routes.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
dir=$(mktmp)
store_for "$MODE"
T="${tag}rt"
key_b64=$(openssl rand -base64 24)
printf 'whsec_%s\n' "$key_b64" >"$dir/std.secret"
consumer() { # NAME PATH PARAMS TABLE ACK_DELAY
	cat <<C
  - name: $1
    source: "http://127.0.0.1:0$2?ack_delay=$5$3"
    setup: |
      CREATE TABLE IF NOT EXISTS ${T}_$4 (k TEXT NOT NULL, v TEXT NOT NULL);
    effect:
      - sql: INSERT INTO ${T}_$4 (k, v) VALUES (\$1, \$2)
        params: [/body/k, /body/v]
C
}
cfg() { # FILE ACK
	{
		echo "store: $store"
		echo "table_prefix: \"$tag\""
		echo "consumers:"
		consumer orders.api /orders "&mode=api&status=201" orders "$2"
		consumer refunds.api /refunds "&mode=api" refunds "$2"
		consumer hooks.stripe /hooks/std "&mode=standard&secret_file=$dir/std.secret" hooks "$2"
	} >"$1"
}
cfg "$dir/inbox.yaml" 0ms
"$BIN" check "$dir/inbox.yaml" >"$dir/check.out" 2>&1
expect_eq "check: three routes on one port are valid" "$?" 0
start_http "$dir/inbox.yaml" "$dir/daemon.log" --metrics 127.0.0.1:0
addr_of() { sed -n "s/.*\"consumer\":\"$1\",\"event\":\"http_listening\",\"address\":\"\([0-9.:]*\)\".*/\1/p" "$dir/daemon.log"; }
all_listening() { [ -n "$(addr_of hooks.stripe)" ] && [ -n "$(addr_of refunds.api)" ] && [ -n "$(addr_of orders.api)" ]; }
wait_until 10 all_listening
a1=$(addr_of orders.api)
expect_eq "port 0: refunds.api listens where orders.api does" "$(addr_of refunds.api)" "$a1"
expect_eq "port 0: hooks.stripe listens where orders.api does" "$(addr_of hooks.stripe)" "$a1"
B="http://$a1"
rows() { count "SELECT COUNT(*) FROM ${T}_$1${2:-}"; }
api() { # NAME PATH KEY V
	req "$1" -X POST -H "Idempotency-Key: $3" -H 'Content-Type: application/json' -d "{\"k\":\"$3\",\"v\":\"$4\"}" "$B$2"
}
api o1 /orders k1 order-1
expect_eq "orders: 201" "$code" 201
api r1 /refunds k1 refund-1
expect_eq "refunds, the same key: 200 (another operation)" "$code" 200
expect_eq "refunds: not a replay" "$(hdr r1 Idempotent-Replayed)" ""
expect_eq "orders: one row" "$(rows orders)" 1
expect_eq "refunds: one row, its own" "$(count "SELECT v FROM ${T}_refunds WHERE k = 'k1'")" refund-1
expect_eq "orders: its own row" "$(count "SELECT v FROM ${T}_orders WHERE k = 'k1'")" order-1
api o1b /orders k1 order-1
expect_eq "orders: the replay: 201" "$code" 201
expect_eq "orders: the replay is marked" "$(hdr o1b Idempotent-Replayed)" true
check "orders: the replay byte for byte" cmp -s "$dir/o1.b" "$dir/o1b.b"
api r1b /refunds k1 refund-1
expect_eq "refunds: the replay is marked" "$(hdr r1b Idempotent-Replayed)" true
expect_eq "refunds: the replay is refunds' answer" "$code" 200
api o2 /orders k2 order-2
api r2 /refunds k3 refund-3
expect_eq "orders: two rows after the replay" "$(rows orders)" 2
expect_eq "refunds: two rows after the replay" "$(rows refunds)" 2
api r3 /refunds k1 other-body
expect_eq "refunds: k1 with another body: 422 (refunds' fingerprint)" "$code" 422
now=$(date +%s)
body='{"k":"msg_1","v":"evt-1"}'
sig="v1,$(hmac_b64_hexkey "$(echo "$key_b64" | base64 -d | od -An -tx1 | tr -d ' \n')" "msg_1.$now.$body")"
hook() {
	req "$1" -X POST -H 'webhook-id: msg_1' -H "webhook-timestamp: $now" \
		-H "webhook-signature: $sig" -d "$body" "$B/hooks/std"
}
hook h1
expect_eq "webhook route: 200" "$code" 200
hook h2
expect_eq "webhook route: the provider's retry: 200" "$code" 200
expect_eq "webhook route: one row" "$(rows hooks)" 1
req hbad -X POST -H 'webhook-id: msg_2' -H "webhook-timestamp: $now" \
	-H "webhook-signature: v1,AAAA" -d "$body" "$B/hooks/std"
expect_eq "webhook route: a bad signature: 401" "$code" 401
api k1h /hooks/std k1 x
expect_eq "an API key on the webhook route: refused (401)" "$code" 401
expect_eq "orders and refunds untouched by the webhook route" "$(rows orders)/$(rows refunds)/$(rows hooks)" 2/2/1
api nf /nowhere k9 x
expect_eq "no route: 404" "$code" 404
req m405 -X PUT -H 'Idempotency-Key: k9' -d '{"k":"k9","v":"x"}' "$B/orders"
expect_eq "a route with another method: 405" "$code" 405
expect_eq "405: Allow names the route's method" "$(hdr m405 Allow)" POST
expect_eq "nothing stored by 404/405" "$(rows orders)/$(rows refunds)/$(rows hooks)" 2/2/1

mport=$(sed -n 's/.*"event":"metrics_listening","listen":"127\.0\.0\.1:\([0-9]*\)".*/\1/p' "$dir/daemon.log" | head -1)
curl -s "http://127.0.0.1:$mport/metrics" >"$dir/metrics.txt"
metric() { grep "^inbox_http_$1{consumer=\"$2\",route=\"$3\"$4}" "$dir/metrics.txt" | awk '{print $2}'; }
expect_eq "/metrics: 2xx of orders.api /orders" "$(metric requests_total orders.api /orders ',class="2xx"')" 3
expect_eq "/metrics: 2xx of refunds.api /refunds" "$(metric requests_total refunds.api /refunds ',class="2xx"')" 3
expect_eq "/metrics: 4xx of refunds.api /refunds" "$(metric requests_total refunds.api /refunds ',class="4xx"')" 1
expect_eq "/metrics: replays of refunds.api" "$(metric replays_total refunds.api /refunds '')" 1
expect_eq "/metrics: bad signatures of hooks.stripe" "$(metric bad_signatures_total hooks.stripe /hooks/std '')" 2
expect_eq "/metrics: 4xx of orders.api /orders (its 405)" "$(metric requests_total orders.api /orders ',class="4xx"')" 1
stop_daemon "$pid"
expect_eq "SIGTERM: exit 0" "$rc" 0

# SIGTERM with a request in flight on each API route (ack_delay holds
# them between commit and answer): each is answered, none dropped.
cfg "$dir/slow.yaml" 800ms
: >"$dir/slow.log"
start_http "$dir/slow.yaml" "$dir/slow.log"
wait_until 10 grep -q '"consumer":"refunds.api","event":"http_listening"' "$dir/slow.log"
B="http://$(sed -n 's/.*"consumer":"orders.api","event":"http_listening","address":"\([0-9.:]*\)".*/\1/p' "$dir/slow.log")"
api so /orders s1 slow-order &
c1=$!
(code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X POST -H 'Idempotency-Key: s1' -d '{"k":"s1","v":"slow-refund"}' "$B/refunds"); echo "$code" >"$dir/sr.code") &
c2=$!
both_committed() { [ "$(rows refunds " WHERE k = 's1'")" = 1 ] && [ "$(rows orders " WHERE k = 's1'")" = 1 ]; }
wait_until 10 both_committed
stop_daemon "$pid"
wait "$c1" "$c2"
so=$(head -1 "$dir/so.h" 2>/dev/null | cut -d' ' -f2)
expect_eq "SIGTERM: orders' request in flight answered 201" "$so" 201
expect_eq "SIGTERM: refunds' request in flight answered 200" "$(cat "$dir/sr.code")" 200
expect_eq "SIGTERM: exit 0 with requests in flight" "$rc" 0

# `inbox check`: one listener whose routes disagree on TLS, on the
# certificate, or take the same route.
: >"$dir/c1.pem"
: >"$dir/c2.pem"
: >"$dir/k.pem"
two() { # FILE URL-A URL-B
	cat >"$1" <<CFG
store: $store
consumers:
  - name: plain.one
    source: "$2"
    effect:
      - sql: SELECT \$1
        params: [/x]
  - name: tls.two
    source: "$3"
    effect:
      - sql: SELECT \$1
        params: [/x]
CFG
	"$BIN" check "$1" >"$1.out" 2>&1
	rc=$?
}
two "$dir/tls.yaml" "http://127.0.0.1:18080/a?mode=api" \
	"https://127.0.0.1:18080/b?mode=api&cert=$dir/c1.pem&key=$dir/k.pem"
expect_eq "check: http:// and https:// on one port: exit 3" "$rc" 3
check "check: it names both consumers and what differs" \
	grep -q "consumers plain.one and tls.two share 127.0.0.1:18080 but their listener options differ (http:// and https://)" "$dir/tls.yaml.out"
two "$dir/cert.yaml" "https://127.0.0.1:18080/a?mode=api&cert=$dir/c2.pem&key=$dir/k.pem" \
	"https://127.0.0.1:18080/b?mode=api&cert=$dir/c1.pem&key=$dir/k.pem"
expect_eq "check: two certificates on one port: exit 3" "$rc" 3
check "check: it names both consumers and the cert" \
	grep -q "plain.one and tls.two share .*(cert)" "$dir/cert.yaml.out"
two "$dir/dup.yaml" "http://127.0.0.1:18080/a?mode=api" "http://127.0.0.1:18080/a?mode=api"
expect_eq "check: the same route twice: exit 3" "$rc" 3
check "check: it names both consumers and the route" \
	grep -q "plain.one and tls.two both take POST /a" "$dir/dup.yaml.out"
two "$dir/ok2.yaml" "http://127.0.0.1:18080/a?mode=api" "http://127.0.0.1:18080/a?mode=api&method=PUT"
expect_eq "check: one path, two methods, two consumers: exit 0" "$rc" 0

# `inbox check` parses each route as its open would: what the daemon
# would refuse at start is refused here, with the route's own reason
two "$dir/nosecret.yaml" "http://127.0.0.1:18080/a?mode=api" "http://127.0.0.1:18081/h?mode=github"
expect_eq "check: a webhook route without a secret: exit 3" "$rc" 3
check "check: it names the consumer and says a secret is needed" \
	grep -q 'consumer "tls.two": source http://127.0.0.1:18081/h?mode=github: http: a webhook route needs at least one secret' "$dir/nosecret.yaml.out"
two "$dir/wcache.yaml" "http://127.0.0.1:18080/a?mode=api&replay_cache=50" \
	"http://127.0.0.1:18081/h?mode=github&secret=s3cr3t-value&replay_cache=50"
expect_eq "check: replay_cache on a webhook route: exit 3" "$rc" 3
check "check: replay_cache is for mode=api" grep -q 'tls.two": source http://.*: http: replay_cache= and replay_cache_ttl= are for mode=api' "$dir/wcache.yaml.out"
check "check: the secret is not shown" sh -c "! grep -q s3cr3t-value '$dir/wcache.yaml.out'"
two "$dir/unknown.yaml" "http://127.0.0.1:18080/a?mode=api&replay_cahce=5" "http://127.0.0.1:18081/h?mode=api"
expect_eq "check: an unknown parameter: exit 3" "$rc" 3
check "check: it names the parameter" grep -q "plain.one\": source http://.*: http: unknown parameter 'replay_cahce'" "$dir/unknown.yaml.out"
two "$dir/nokey.yaml" "https://127.0.0.1:18080/a?mode=api&cert=$dir/c1.pem" "http://127.0.0.1:18081/h?mode=api"
expect_eq "check: https:// without key=: exit 3" "$rc" 3
two "$dir/okhook.yaml" "http://127.0.0.1:18080/a?mode=api&replay_cache=50&replay_cache_ttl=5s" \
	"http://127.0.0.1:18081/h?mode=standard&secret=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
expect_eq "check: an api route with a cache, a standard route with its secret: exit 0" "$rc" 0
summary
