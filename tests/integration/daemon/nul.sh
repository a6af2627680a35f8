#!/bin/sh
# Strings from a message are carried whole or the message is a dead letter
# naming the field, never cut at a U+0000 (issue 10, item 1), through
# `inbox run` on a JSONL file: ids differing only after a U+0000 are not
# one key (no false duplicate, no false conflict, no pre-emption of the
# real "order-1" by a crafted "order-1\u0000x"), an effect parameter
# holding one is a dead letter, not a shortened row; and a line over
# max_payload is dead-lettered with its real size (item 5).
#   nul.sh INBOX_BIN pg|sqlite
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
[ "$MODE" = pg ] && need_pg

dir=$(mktmp)
tag="nul$$_"
if [ "$MODE" = pg ]; then
	store=$INBOX_TEST_PG_URL
	prefix=$tag
	q() { pgq "$1"; }
	trap 'pg_drop_prefix "$tag"' EXIT
else
	store="sqlite:$dir/t.db"
	prefix=""
	q() { sq "$dir/t.db" "$1"; }
fi
t="${prefix}invoices"
dl="${prefix}dead_letters"
ib="${prefix}inbox"

cat >"$dir/nul.yaml" <<CFG
store: $store
table_prefix: "$prefix"
consumers:
  - name: nul.test
    source: jsonl:$dir/in.jsonl?checkpoint=$dir/cp
    key: "{id}"
    fingerprint: /data
    max_payload: 4KiB
    setup: |
      CREATE TABLE IF NOT EXISTS $t (
        order_id TEXT NOT NULL, customer TEXT NOT NULL, total INTEGER);
    effect:
      - sql: INSERT INTO $t (order_id, customer, total) VALUES (\$1, \$2, \$3)
        params: [/data/orderId, /data/customer, /data/totalCents]
CFG

# 1-2: the same data under ids equal up to a U+0000 (old: one row, then a
# duplicate); 3: other data (old: a conflict); 4-5: the crafted id first,
# then the real one (old: the real one a conflict, never applied); 6: an
# effect parameter with a U+0000 (old: the row "abc"); 7: over max_payload
# (5000 bytes); 8: a good one after all that.
big=$(awk 'BEGIN { s = ""; for (i = 0; i < 4960; i++) s = s "x"; print s }')
cat >"$dir/in.jsonl" <<EOF
{"id":"m\u0000first","data":{"orderId":"o-1","customer":"c","totalCents":1}}
{"id":"m\u0000second","data":{"orderId":"o-1","customer":"c","totalCents":1}}
{"id":"m\u0000third","data":{"orderId":"o-2","customer":"c","totalCents":2}}
{"id":"order-1\u0000x","data":{"orderId":"o-fake","customer":"c","totalCents":3}}
{"id":"order-1","data":{"orderId":"o-real","customer":"c","totalCents":4}}
{"id":"p-1","data":{"orderId":"abc\u0000def","customer":"c","totalCents":5}}
{"id":"big","data":{"orderId":"o-big","customer":"$big"}}
{"id":"last","data":{"orderId":"o-last","customer":"c","totalCents":6}}
EOF
biglen=$(sed -n 7p "$dir/in.jsonl" | tr -d '\n' | wc -c)

"$BIN" run "$dir/nul.yaml" --once >"$dir/run.out" 2>"$dir/run.log"
expect_eq "run: exit 0" "$?" 0
clean_logs "run: no error in the log" "$dir/run.log"
expect_eq "the real order-1 and the last one applied, nothing else" \
	"$(q "SELECT order_id FROM $t ORDER BY order_id" | tr '\n' ' ')" \
	"o-last o-real "
expect_eq "no shortened parameter stored" \
	"$(q "SELECT COUNT(*) FROM $t WHERE order_id = 'abc'")" 0
expect_eq "no key cut at the U+0000" \
	"$(q "SELECT COUNT(*) FROM $ib WHERE key IN ('m', 'order-1') AND status = 'completed'")" 1
expect_eq "six dead letters" "$(q "SELECT COUNT(*) FROM $dl")" 6
expect_eq "four ids named in their reason, without key or id" \
	"$(q "SELECT COUNT(*) FROM $dl WHERE key IS NULL AND message_id IS NULL AND reason = 'U+0000 in /id (the message id): cannot be stored as text'")" 4
expect_eq "the parameter named in its reason" \
	"$(q "SELECT reason FROM $dl WHERE message_id = 'p-1'")" \
	'effect parameter $1: U+0000 in /data/orderId: cannot be stored as text'
expect_eq "the over-size line with its real size" \
	"$(q "SELECT reason FROM $dl WHERE position LIKE '%:7'")" \
	"payload of $biglen bytes exceeds max_payload 4096"
expect_eq "its dead letter keeps max_payload + 1 bytes" \
	"$(q "SELECT length(payload) FROM $dl WHERE position LIKE '%:7'")" 4097
summary
