#!/bin/sh
# Stored results through the daemon (issue 14): an effect step's
# result: (returned columns and message pointers) is stored with each
# applied message's record in PostgreSQL; a duplicate — in the same batch,
# and in a later run of the daemon — gets the first processing's result
# (the debug line says result_bytes and first_outcome; never the bytes),
# and inbox inspect shows the result itself.
#   results.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
need_pg

dir=$(mktmp)
tag="res$$_"
trap 'pg_drop_prefix "$tag"' EXIT
inv="${tag}invoices"
cat >"$dir/c.yaml" <<CFG
store: $INBOX_TEST_PG_URL
table_prefix: "$tag"
consumers:
  - name: billing.results
    source: jsonl:$dir/in.jsonl?checkpoint=$dir/ck
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: 10
    setup: |
      CREATE TABLE IF NOT EXISTS $inv (
        number      INTEGER PRIMARY KEY,
        order_id    TEXT    NOT NULL UNIQUE,
        total_cents INTEGER NOT NULL
      );
    effect:
      - sql: |
          INSERT INTO $inv (number, order_id, total_cents)
          VALUES ((SELECT coalesce(max(number), 1000) + 1 FROM $inv),
                  \$1, \$2)
          RETURNING number, total_cents
        params: [/data/orderId, /data/totalCents]
        result:
          invoice: "#number:json"
          cents: "#total_cents:json"
          order: /data/orderId
CFG
# o-1 twice in one batch, o-2 once
cat >"$dir/in.jsonl" <<'JSONL'
{"id":"m-1","data":{"orderId":"o-1","totalCents":150}}
{"id":"m-2","data":{"orderId":"o-2","totalCents":20}}
{"id":"m-3","data":{"orderId":"o-1","totalCents":150}}
JSONL
INBOX_LOG_LEVEL=debug "$BIN" run "$dir/c.yaml" --once 2>"$dir/run1.log"
expect_eq "first run: exit 0" "$?" 0
clean_logs "first run: no error" "$dir/run1.log"
expect_eq "two invoices, numbered once each" \
	"$(pgq "SELECT string_agg(order_id || '=' || number, ',' ORDER BY number) FROM $inv")" \
	"o-1=1001,o-2=1002"
r1='{"invoice":1001,"cents":150,"order":"o-1"}'
check "applied: the result's size in the debug line" \
	grep -q "\"key\":\"create-invoice:o-1\",\"outcome\":\"applied\".*\"result_bytes\":${#r1}" "$dir/run1.log"
check "the repeat in the batch: the first processing's result" \
	grep -q "\"key\":\"create-invoice:o-1\",\"outcome\":\"duplicate\".*\"result_bytes\":${#r1},\"first_outcome\":\"applied\"" "$dir/run1.log"
check "the result bytes never reach the log" sh -c "! grep -qF '\"invoice\":' '$dir/run1.log'"
"$BIN" inspect "$dir/c.yaml" billing.results create-invoice:o-1 --json >"$dir/i1.json"
expect_eq "inspect: exit 0" "$?" 0
check "inspect --json: the stored result and outcome" \
	jqok ".result == \"$(printf '%s' "$r1" | sed 's/"/\\"/g')\" and .result_type == \"application/json\" and .outcome == \"applied\"" "$dir/i1.json"
"$BIN" inspect "$dir/c.yaml" billing.results create-invoice:o-2 >"$dir/i2.txt"
check "inspect: the result line" \
	grep -q '^result \.* 41 bytes, application/json: {"invoice":1002,"cents":20,"order":"o-2"}$' "$dir/i2.txt"

# A later run (another process): the redelivery of o-1 gets the answer
# from the database; nothing is inserted again.
echo '{"id":"m-4","data":{"orderId":"o-1","totalCents":150}}' >>"$dir/in.jsonl"
INBOX_LOG_LEVEL=debug "$BIN" run "$dir/c.yaml" --once 2>"$dir/run2.log"
expect_eq "second run: exit 0" "$?" 0
check "after a restart: the duplicate carries the first result" \
	grep -q "\"key\":\"create-invoice:o-1\",\"outcome\":\"duplicate\".*\"result_bytes\":${#r1},\"first_outcome\":\"applied\"" "$dir/run2.log"
expect_eq "still two invoices" "$(pgq "SELECT count(*) FROM $inv")" 2
expect_eq "the stored bytes, as the first run wrote them" \
	"$(pgq "SELECT convert_from(result, 'UTF8') FROM ${tag}inbox WHERE key = 'create-invoice:o-1'")" "$r1"
# A leaf that is no template is a config error at its line (exit 3).
sed 's|order: /data/orderId|order: data/orderId|' "$dir/c.yaml" >"$dir/bad.yaml"
"$BIN" run "$dir/bad.yaml" --once >"$dir/bad.out" 2>&1
expect_eq "a bad result leaf: exit 3" "$?" 3
check "a bad result leaf: named, with its place" \
	grep -q 'bad.yaml:[0-9]*:[0-9]*: result: "data/orderId" is neither a JSON pointer' "$dir/bad.out"
summary
