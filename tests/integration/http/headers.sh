#!/bin/sh
# The http:// source, api mode: response headers stored with the result
# (an effect step's headers:, docs/http.md). The first answer, its replay
# and a replay after a daemon restart carry the same header values, which
# were computed once (from a returned column, the body and the key); a
# value that would hold a line break is the request's rejection (422),
# never a second header line; a non-HTTP consumer cannot declare them.
#   headers.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
dir=$(mktmp)
store_for "$MODE"
T="${tag}hinv"
cat >"$dir/inbox.yaml" <<CFG
store: $store
table_prefix: "$tag"
consumers:
  - name: invoices.api
    source: "http://127.0.0.1:0/invoices?mode=api&status=201"
    setup: |
      CREATE TABLE IF NOT EXISTS $T (order_id TEXT NOT NULL, n INTEGER NOT NULL);
    effect:
      - sql: |
          INSERT INTO $T (order_id, n)
          SELECT \$1, 1000 + count(*) FROM $T RETURNING n
        params: [/body/id]
        result:
          invoice: "#n:json"
        headers:
          Location: "/invoices/{#n}"
          X-Order: "{/body/id} ({key})"
  - name: invoices.bare
    source: "http://127.0.0.1:0/bare?mode=api"
    effect:
      - sql: INSERT INTO $T (order_id, n) VALUES (\$1, 1)
        params: [/body/id]
        headers:
          Location: "/bare/{key}"
CFG
# route_port LOG ROUTE: the port ROUTE listens on (both start at once)
route_port() {
	_i=0
	while [ $_i -lt 200 ]; do
		_p=$(sed -n 's|.*"event":"http_listening","address":"[0-9.]*:\([0-9]*\)","route":"'"$2"'".*|\1|p' "$1" | tail -1)
		[ -n "$_p" ] && { echo "$_p"; return 0; }
		sleep 0.05
		_i=$((_i + 1))
	done
	return 1
}
start_http "$dir/inbox.yaml" "$dir/daemon.log"
inv=$(route_port "$dir/daemon.log" /invoices) || bail "/invoices listens" "$(tail -3 "$dir/daemon.log")"
bare=$(route_port "$dir/daemon.log" /bare) || bail "/bare listens" "$(tail -3 "$dir/daemon.log")"
rows() { count "SELECT COUNT(*) FROM $T"; }

post() { # NAME PORT PATH KEY BODY
	req "$1" -H "Idempotency-Key: $4" -H 'Content-Type: application/json' \
		-d "$5" "http://127.0.0.1:$2$3"
}
post first "$inv" /invoices k-1 '{"id":"o-1"}'
expect_eq "first request: 201" "$code" 201
expect_eq "first request: Location from the returned column" "$(hdr first Location)" /invoices/1000
expect_eq "first request: a header from the body and the key" "$(hdr first X-Order)" "o-1(k-1)"
expect_eq "first request: the body is the declared result" "$(cat "$dir/first.b")" '{"invoice":1000}'
expect_eq "first request: Content-Type of the body" "$(hdr first Content-Type)" application/json
expect_eq "first request: not a replay" "$(hdr first Idempotent-Replayed)" ""
# another order moves the counter: a recomputed Location would say 1002
post second "$inv" /invoices k-2 '{"id":"o-2"}'
expect_eq "another key: its own Location" "$(hdr second Location)" /invoices/1001
post again "$inv" /invoices k-1 '{"id":"o-1"}'
expect_eq "replay: 201" "$code" 201
expect_eq "replay: Idempotent-Replayed: true" "$(hdr again Idempotent-Replayed)" true
expect_eq "replay: the same Location" "$(hdr again Location)" /invoices/1000
expect_eq "replay: the same X-Order" "$(hdr again X-Order)" "o-1(k-1)"
expect_eq "replay: the same body" "$(cat "$dir/again.b")" "$(cat "$dir/first.b")"
expect_eq "replay: no second effect" "$(rows)" 2
post b1 "$bare" /bare b-1 '{"id":"o-3"}'
expect_eq "headers without a result: 200, the key's default body" "$code:$(cat "$dir/b1.b")" '200:{"key":"b-1","outcome":"applied"}'
expect_eq "headers without a result: Location" "$(hdr b1 Location)" /bare/b-1
post b2 "$bare" /bare b-1 '{"id":"o-3"}'
expect_eq "headers without a result: replayed" "$(hdr b2 Location):$(hdr b2 Idempotent-Replayed)" /bare/b-1:true
# a line break in a value: rejected, stored as such, no extra header
post crlf "$inv" /invoices k-3 '{"id":"o\r\nX-Injected: 1"}'
expect_eq "a value with a line break: 422" "$code" 422
expect_eq "a value with a line break: no injected header" "$(hdr crlf X-Injected)" ""
expect_eq "a value with a line break: no Location" "$(hdr crlf Location)" ""
expect_eq "a value with a line break: no effect" "$(rows)" 3
stop_daemon "$pid"
expect_eq "SIGTERM: exit 0" "$rc" 0

# a restart: the stored headers, not a new computation
start_http "$dir/inbox.yaml" "$dir/daemon2.log"
inv=$(route_port "$dir/daemon2.log" /invoices) || bail "/invoices listens again" "$(tail -3 "$dir/daemon2.log")"
post restart "$inv" /invoices k-1 '{"id":"o-1"}'
expect_eq "after a restart: a replay" "$code:$(hdr restart Idempotent-Replayed)" 201:true
expect_eq "after a restart: the same Location" "$(hdr restart Location)" /invoices/1000
expect_eq "after a restart: the same X-Order" "$(hdr restart X-Order)" "o-1(k-1)"
expect_eq "after a restart: the same body" "$(cat "$dir/restart.b")" "$(cat "$dir/first.b")"
expect_eq "after a restart: no second effect" "$(rows)" 3
stop_daemon "$pid"

# only an http:// route answers with headers
sed 's|source: "http://127.0.0.1:0/bare?mode=api"|source: "jsonl:'"$dir"'/in.jsonl"|' \
	"$dir/inbox.yaml" >"$dir/jsonl.yaml"
"$BIN" check "$dir/jsonl.yaml" >"$dir/check.out" 2>&1
expect_eq "a JSONL consumer with headers: refused" "$?" 3
check "the refusal says why" grep -q "headers: only an http" "$dir/check.out"
# a header the source writes itself cannot be stored
sed 's|X-Order:|Content-Type:|' "$dir/inbox.yaml" >"$dir/own.yaml"
"$BIN" check "$dir/own.yaml" >"$dir/own.out" 2>&1
expect_eq "Content-Type as a stored header: refused" "$?" 3
# a template whose {} is not closed, a name that is no HTTP token
sed 's|"/invoices/{#n}"|"/invoices/{#n"|' "$dir/inbox.yaml" >"$dir/brace.yaml"
"$BIN" check "$dir/brace.yaml" >"$dir/brace.out" 2>&1
expect_eq "an unclosed {: refused" "$?" 3
sed 's|X-Order:|"X Order":|' "$dir/inbox.yaml" >"$dir/name.yaml"
"$BIN" check "$dir/name.yaml" >"$dir/name.out" 2>&1
expect_eq "a header name with a space: refused" "$?" 3
"$BIN" check "$dir/inbox.yaml" >"$dir/good.out" 2>&1
expect_eq "the config itself passes inbox check" "$?" 0
clean_logs "no error logged" "$dir/daemon.log" "$dir/daemon2.log"
summary
