#!/bin/sh
# The http:// source, api mode, against the daemon: every status case of
# an idempotent API request (docs/http.md), the replay byte for byte, the
# metrics and the log.
#   api.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
dir=$(mktmp)
store_for "$MODE"
T="${tag}orders"
cat >"$dir/order.schema.json" <<'SCHEMA'
{"type":"object","required":["body"],
 "properties":{"body":{"type":"object","required":["id","amount"],
   "properties":{"amount":{"type":"integer"}}}}}
SCHEMA
# The gated route's effect fails (a runtime error that is neither the
# message's fault nor the connection's: the handler's RETRY) while a row
# is in ${T}_gate: a bad JSON path on SQLite, a PL/pgSQL exception on
# PostgreSQL.
if [ "$MODE" = pg ]; then
	gate_setup="      CREATE OR REPLACE FUNCTION ${T}_gate_ok() RETURNS boolean
        LANGUAGE plpgsql AS \$f\$ BEGIN
          IF EXISTS (SELECT 1 FROM ${T}_gate) THEN
            RAISE EXCEPTION 'the gate is closed'; END IF;
          RETURN true; END \$f\$;"
	gate_open="${T}_gate_ok()"
else
	gate_setup=""
	gate_open="json_extract('{}', (SELECT path FROM ${T}_gate)) IS NULL"
fi
cat >"$dir/inbox.yaml" <<CFG
store: $store
table_prefix: "$tag"
consumers:
  - name: orders.api
    source: "http://127.0.0.1:0/orders?mode=api&status=201&max_body=300"
    schema: order.schema.json
    lock_timeout: 200ms
    retry_delay: 50ms
    setup: |
      CREATE TABLE IF NOT EXISTS $T (
        id TEXT NOT NULL, amount INTEGER NOT NULL CHECK (amount >= 0));
    effect:
      - sql: INSERT INTO $T (id, amount) VALUES (\$1, \$2)
        params: [/body/id, /body/amount]
  - name: orders.gated
    source: "http://127.0.0.1:0/gated?mode=api&status=201"
    retry_delay: 50ms
    setup: |
      CREATE TABLE IF NOT EXISTS ${T}_gated (id TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS ${T}_gate (path TEXT);
$gate_setup
    effect:
      - sql: INSERT INTO ${T}_gated (id) SELECT \$1 WHERE $gate_open
        params: [/body/id]
  - name: orders.ptr
    source: "http://127.0.0.1:0/ptr?mode=api&id_pointer=/requestId"
    effect:
      - sql: INSERT INTO ${T}_gated (id) VALUES (\$1)
        params: [/body/requestId]
  - name: orders.hdr
    source: "http://127.0.0.1:0/hdr?mode=api&id_header=X-Request-Id"
    effect:
      - sql: INSERT INTO ${T}_gated (id) VALUES (\$1)
        params: [/body/id]
  - name: orders.invoice
    source: "http://127.0.0.1:0/invoices?mode=api&status=201"
    setup: |
      CREATE TABLE IF NOT EXISTS ${T}_inv (order_id TEXT NOT NULL, n INTEGER NOT NULL);
    effect:
      - sql: |
          INSERT INTO ${T}_inv (order_id, n)
          SELECT \$1, 1000 + count(*) FROM ${T}_inv RETURNING n
        params: [/body/id]
        result:
          invoice: "#n:json"
          order: /body/id
CFG
start_http "$dir/inbox.yaml" "$dir/daemon.log" --metrics 127.0.0.1:0
gport=$(sed -n 's/.*"consumer":"orders.gated","event":"http_listening","address":"[0-9.]*:\([0-9]*\)".*/\1/p' "$dir/daemon.log")
port=$(sed -n 's/.*"consumer":"orders.api","event":"http_listening","address":"[0-9.]*:\([0-9]*\)".*/\1/p' "$dir/daemon.log")
U="http://127.0.0.1:$port/orders"
post() { _n=$1; shift; req "$_n" -X POST -H 'Content-Type: application/json' "$@" "$U"; }
rows() { count "SELECT COUNT(*) FROM $T"; }

post first -H 'Idempotency-Key: k1' -d '{"id":"o1","amount":5}'
expect_eq "first request: 201" "$code" 201
expect_eq "first request: one effect" "$(rows)" 1
check "first request: not marked as a replay" [ -z "$(hdr first Idempotent-Replayed)" ]
post again -H 'Idempotency-Key: k1' -d '{"id":"o1","amount":5}'
expect_eq "the same request again: 201" "$code" 201
expect_eq "the same request again: Idempotent-Replayed: true" "$(hdr again Idempotent-Replayed)" true
check "the same request again: the body byte for byte" cmp -s "$dir/first.b" "$dir/again.b"
expect_eq "the same request again: the same Content-Type" "$(hdr again Content-Type)" "$(hdr first Content-Type)"
expect_eq "the same request again: no second effect" "$(rows)" 1
post canon -H 'Idempotency-Key: k1' -d '{ "amount": 5, "id": "o1" }'
expect_eq "the same body spelled otherwise (canonical JSON): replay" "$code:$(hdr canon Idempotent-Replayed)" 201:true

post other -H 'Idempotency-Key: k1' -d '{"id":"o1","amount":6}'
expect_eq "the same key, another payload: 422" "$code" 422
expect_eq "422 is problem+json" "$(hdr other Content-Type)" application/problem+json
check "422 says the key was reused" grep -q '"status":422' "$dir/other.b"
expect_eq "422: no effect" "$(rows)" 1

post nokey -d '{"id":"o2","amount":5}'
expect_eq "no Idempotency-Key: 400" "$code" 400
post notjson -H 'Idempotency-Key: k2' -d '{"id":'
expect_eq "a body that is not JSON: 400" "$code" 400
big=$(head -c 400 /dev/zero | tr '\0' 'x')
post big -H 'Idempotency-Key: k3' -d "{\"id\":\"$big\",\"amount\":1}"
expect_eq "a body over max_body (Content-Length): 413" "$code" 413
post chunked -H 'Idempotency-Key: k3' -H 'Transfer-Encoding: chunked' -d "{\"id\":\"$big\",\"amount\":1}"
expect_eq "a body over max_body (chunked): 413" "$code" 413
req nf -X POST -H 'Idempotency-Key: k4' -d '{}' "http://127.0.0.1:$port/other"
expect_eq "another path: 404" "$code" 404
req get -H 'Idempotency-Key: k4' "$U"
expect_eq "another method: 405" "$code" 405
expect_eq "405 names the method allowed" "$(hdr get Allow)" POST
expect_eq "nothing refused left an effect" "$(rows)" 1

post schema -H 'Idempotency-Key: k5' -d '{"id":"o5","amount":"five"}'
expect_eq "a schema violation: 422" "$code" 422
check "a schema violation: problem+json naming the schema" grep -q 'schema violation' "$dir/schema.b"
post schema2 -H 'Idempotency-Key: k5' -d '{"id":"o5","amount":"five"}'
expect_eq "a schema violation again: the same answer" "$code:$(cat "$dir/schema2.b")" "422:$(cat "$dir/schema.b")"
post reject -H 'Idempotency-Key: k6' -d '{"id":"o6","amount":-1}'
expect_eq "a rejected effect (CHECK): 422" "$code" 422
expect_eq "a rejected effect: problem+json" "$(hdr reject Content-Type)" application/problem+json
post reject2 -H 'Idempotency-Key: k6' -d '{"id":"o6","amount":-1}'
reject2=$code
# the stored refusal (stored results: the duplicate's first_outcome)
expect_eq "a rejected effect again: 422, a replay" "$code:$(hdr reject2 Idempotent-Replayed)" 422:true
expect_eq "no effect from the rejected ones" "$(rows)" 1

# A transient failure of the effect (its table does not exist yet: the
# handler's RETRY): 503 with Retry-After, nothing stored, so the same
# request once the table exists is new.
G="http://127.0.0.1:$gport/gated"
count "INSERT INTO ${T}_gate (path) VALUES ('\$[')" >/dev/null
req busy -X POST -H 'Idempotency-Key: k7' -d '{"id":"o7","amount":7}' "$G"
expect_eq "a transient failure: 503" "$code" 503
expect_eq "503 has Retry-After" "$(hdr busy Retry-After)" 1
expect_eq "503 is problem+json" "$(hdr busy Content-Type)" application/problem+json
count "DELETE FROM ${T}_gate" >/dev/null
req after -X POST -H 'Idempotency-Key: k7' -d '{"id":"o7","amount":7}' "$G"
expect_eq "after the 503, the same request: 201, not a replay" "$code:$(hdr after Idempotent-Replayed)" 201:
expect_eq "after the 503: its one effect" "$(count "SELECT COUNT(*) FROM ${T}_gated WHERE id = 'o7'")" 1

# The key from a configured body pointer, or a configured header.
port_of() { sed -n "s/.*\"consumer\":\"orders.$1\",\"event\":\"http_listening\",\"address\":\"[0-9.]*:\([0-9]*\)\".*/\1/p" "$dir/daemon.log"; }
P="http://127.0.0.1:$(port_of ptr)/ptr"
H="http://127.0.0.1:$(port_of hdr)/hdr"
req p1 -X POST -d '{"requestId":"r-1","x":1}' "$P"
expect_eq "id_pointer: the key from the body: 200" "$code" 200
expect_eq "id_pointer: the default body names that key" "$(cat "$dir/p1.b")" '{"key":"r-1","outcome":"applied"}'
req p2 -X POST -H 'Idempotency-Key: other' -d '{"requestId":"r-1","x":1}' "$P"
expect_eq "id_pointer: the same body again is the replay (the header is not the key)" "$code:$(hdr p2 Idempotent-Replayed)" 200:true
req p3 -X POST -H 'Idempotency-Key: k' -d '{"x":1}' "$P"
expect_eq "id_pointer: absent from the body: 400" "$code" 400
req p4 -X POST -d '{"requestId":7}' "$P"
expect_eq "id_pointer: not a string: 400" "$code" 400
req h1 -X POST -H 'X-Request-Id: h-1' -d '{"id":"h-1"}' "$H"
expect_eq "id_header: the key from X-Request-Id: 200" "$code" 200
req h2 -X POST -H 'Idempotency-Key: h-1' -d '{"id":"h-1"}' "$H"
expect_eq "id_header: Idempotency-Key alone is no key there: 400" "$code" 400
expect_eq "one effect each" "$(count "SELECT COUNT(*) FROM ${T}_gated WHERE id IN ('r-1', 'h-1')")" 2

# A declared result (an effect step's result:) is the answer's body, and
# what a retry of the key replays, byte for byte, with no second effect.
iport=$(sed -n 's/.*"consumer":"orders.invoice","event":"http_listening","address":"[0-9.]*:\([0-9]*\)".*/\1/p' "$dir/daemon.log")
I="http://127.0.0.1:$iport/invoices"
req i1 -X POST -H 'Idempotency-Key: inv-1' -d '{"id":"o-9"}' "$I"
expect_eq "a declared result: 201" "$code" 201
expect_eq "a declared result: the body is the result" "$(cat "$dir/i1.b")" '{"invoice":1000,"order":"o-9"}'
req i2 -X POST -H 'Idempotency-Key: inv-1' -d '{"id":"o-9"}' "$I"
expect_eq "its retry: the same status" "$code" 201
check "its retry: the same bytes" cmp -s "$dir/i1.b" "$dir/i2.b"
expect_eq "its retry: marked as a replay" "$(hdr i2 Idempotent-Replayed)" true
expect_eq "its retry: one invoice" "$(count "SELECT COUNT(*) FROM ${T}_inv")" 1
# i2 (the same bytes) was answered from the replay cache, i3 (the same
# request spelled otherwise) by the store: the same answer; another body
# with the key is still a conflict once the answer is cached.
req i3 -X POST -H 'Idempotency-Key: inv-1' -d '{ "id" : "o-9" }' "$I"
expect_eq "a retry the cache cannot match: the store's replay" "$code:$(hdr i3 Idempotent-Replayed)" 201:true
check "the store's replay: the cached replay's bytes" cmp -s "$dir/i2.b" "$dir/i3.b"
expect_eq "the store's replay: the cached replay's Content-Type" "$(hdr i3 Content-Type)" "$(hdr i2 Content-Type)"
req i4 -X POST -H 'Idempotency-Key: inv-1' -d '{"id":"o-10"}' "$I"
expect_eq "a cached key, another body: 422" "$code" 422
expect_eq "no invoice from the replays or the conflict" "$(count "SELECT COUNT(*) FROM ${T}_inv")" 1

mport=$(sed -n 's/.*"event":"metrics_listening","listen":"127\.0\.0\.1:\([0-9]*\)".*/\1/p' "$dir/daemon.log" | head -1)
curl -s "http://127.0.0.1:$mport/metrics" >"$dir/metrics.txt"
metric_of() { grep "^inbox_http_requests_total{consumer=\"orders.$1\",route=\"/$2\",class=\"$3\"}" "$dir/metrics.txt" | awk '{print $2}'; }
expect_eq "/metrics: the replay cache answered i2, not i3" "$(grep '^inbox_http_replay_cache_hits_total{consumer="orders.invoice",route="/invoices"}' "$dir/metrics.txt" | awk '{print $2}')" 1
# 3 answers of 2xx and 9 of 4xx, and the rejected request's retry: 4xx
# (stored: the refusal is replayed). The 404 of /other is no route's:
# every consumer here shares the listener of 127.0.0.1:0 (a 405 is its
# path's route's).
r2=0
[ "$reject2" = 422 ] && r2=1
expect_eq "/metrics: 2xx answers of /orders" "$(metric_of api orders 2xx)" $((4 - r2))
expect_eq "/metrics: 4xx answers of /orders" "$(metric_of api orders 4xx)" $((9 + r2))
expect_eq "/metrics: 5xx answers of /orders" "$(metric_of api orders 5xx)" 0
expect_eq "/metrics: 2xx answers of /gated" "$(metric_of gated gated 2xx)" 1
expect_eq "/metrics: 5xx answers of /gated" "$(metric_of gated gated 5xx)" 1
n=$(grep -c '"event":"http_request"' "$dir/daemon.log")
expect_eq "the log: one http_request line per request" "$n" 26
check "the log: a 503 with outcome retry" grep -q '"status":503,"outcome":"retry"' "$dir/daemon.log"
check "the log: a line with status 422 and outcome conflict" grep -q '"status":422,"outcome":"conflict"' "$dir/daemon.log"
stop_daemon "$pid"
expect_eq "SIGTERM: exit 0" "$rc" 0
clean_logs "no error logged" "$dir/daemon.log"
summary
