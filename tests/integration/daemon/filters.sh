#!/bin/sh
# Filters (issue 13, item 2) through the daemon: an outbox charge step
# with `when: {pointer: /type, equals: order.created}` writes no row for
# order.updated (nor for anything else), and a consumer no step of which
# wants a message skips it; a consumer-level `when` with `in`, a step with
# `exists`. Skipped messages are counted (the stopped line), acked (the
# checkpoint passes them), neither errors nor dead letters, and a
# redelivery of them runs nothing (duplicates).
#   filters.sh INBOX_BIN pg|sqlite
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
[ "$MODE" = pg ] && need_pg

dir=$(mktmp)
tag="flt$$_"
if [ "$MODE" = pg ]; then
	store=$INBOX_TEST_PG_URL
	q() { pgq "$1"; }
	trap 'pg_drop_prefix "$tag"' EXIT
else
	store="sqlite:$dir/t.db"
	q() { sq "$dir/t.db" "$1"; }
fi

cat >"$dir/in.jsonl" <<'EV'
{"id":"e1","type":"order.created","data":{"orderId":"o-1","totalCents":100}}
{"id":"e2","type":"order.updated","data":{"orderId":"o-1","totalCents":120}}
{"id":"e3","type":"order.updated","data":{"orderId":"o-2","totalCents":5,"coupon":"SPRING"}}
{"id":"e4","type":"order.deleted","data":{"orderId":"o-1"}}
{"id":"e5","type":"order.created","data":{"orderId":"o-3","totalCents":300}}
{"id":"e6","data":{"orderId":"o-4"}}
{"id":"e2","type":"order.updated","data":{"orderId":"o-1","totalCents":120}}
EV

cat >"$dir/f.yaml" <<CFG
store: $store
table_prefix: "$tag"
consumers:
  - name: billing.charges
    source: jsonl:in.jsonl?checkpoint=cp-charges
    outbox:
      - step: charge
        url: http://127.0.0.1:9/charges
        body: {orderId: /data/orderId, amount: /data/totalCents}
        idempotent: true
        when: {pointer: /type, equals: order.created}
  - name: billing.audit
    source: jsonl:in.jsonl?checkpoint=cp-audit
    when: {pointer: /type, in: [order.created, order.updated]}
    setup: |
      CREATE TABLE IF NOT EXISTS ${tag}audit (id TEXT NOT NULL, type TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS ${tag}coupons (id TEXT NOT NULL, code TEXT NOT NULL);
    effect:
      - sql: INSERT INTO ${tag}audit (id, type) VALUES (\$1, \$2)
        params: [/id, /type]
      - sql: INSERT INTO ${tag}coupons (id, code) VALUES (\$1, \$2)
        params: [/id, /data/coupon]
        when: {pointer: /data/coupon, exists: true}
CFG

"$BIN" run "$dir/f.yaml" --once >"$dir/run1.out" 2>&1
expect_eq "run: exit 0" "$?" 0
stopped() { # LOG CONSUMER FIELD
	jq -r "select(.event == \"stopped\" and .consumer == \"$2\") | .$3" "$1" 2>/dev/null
}
expect_eq "charges: skipped e2 e3 e4 e6" "$(stopped "$dir/run1.out" billing.charges skipped)" 4
expect_eq "charges: applied e1 e5" "$(stopped "$dir/run1.out" billing.charges applied)" 2
expect_eq "charges: the repeated e2 a duplicate" "$(stopped "$dir/run1.out" billing.charges duplicates)" 1
expect_eq "charges: no dead letter" "$(stopped "$dir/run1.out" billing.charges dead_letters)" 0
expect_eq "charges: a row for each order.created only" \
	"$(q "SELECT string_agg(key, ',' ORDER BY key) FROM ${tag}outbox WHERE consumer = 'billing.charges'" 2>/dev/null ||
	   q "SELECT group_concat(key, ',') FROM (SELECT key FROM ${tag}outbox WHERE consumer = 'billing.charges' ORDER BY key)")" "e1,e5"
expect_eq "audit: skipped e4 e6" "$(stopped "$dir/run1.out" billing.audit skipped)" 2
expect_eq "audit: created and updated recorded" "$(q "SELECT count(*) FROM ${tag}audit")" 4
expect_eq "audit: the coupon step only where one exists" \
	"$(q "SELECT id || ':' || code FROM ${tag}coupons")" "e3:SPRING"
expect_eq "no dead letters at all" "$(q "SELECT count(*) FROM ${tag}dead_letters")" 0
expect_eq "skipped messages are recorded" \
	"$(q "SELECT count(*) FROM ${tag}inbox WHERE consumer = 'billing.charges' AND key IN ('e2','e3','e4','e6')")" 4
check "charges: the checkpoint passed them (acked)" [ -s "$dir/cp-charges" ]

# Redelivered (from the first line again): duplicates, nothing runs.
rm -f "$dir/cp-charges" "$dir/cp-audit"
"$BIN" run "$dir/f.yaml" --once >"$dir/run2.out" 2>&1
expect_eq "again: exit 0" "$?" 0
expect_eq "again: charges all duplicates" "$(stopped "$dir/run2.out" billing.charges duplicates)" 7
expect_eq "again: charges nothing skipped anew" "$(stopped "$dir/run2.out" billing.charges skipped)" 0
expect_eq "again: no new outbox row" "$(q "SELECT count(*) FROM ${tag}outbox")" 2
expect_eq "again: no new audit row" "$(q "SELECT count(*) FROM ${tag}audit")" 4

# /metrics counts them: inbox_skipped_total of a daemon that follows.
sed -e 's|jsonl:in.jsonl?checkpoint=cp-charges|jsonl:in.jsonl?follow=1\&checkpoint=cp-m|' \
	-e 's|name: billing.charges|name: billing.charges.m|' "$dir/f.yaml" |
	awk '/name: billing.audit/ { exit } { print }' >"$dir/m.yaml"
trap 'stop_daemons; [ "$MODE" = pg ] && pg_drop_prefix "$tag"' EXIT
"$BIN" run "$dir/m.yaml" --metrics 127.0.0.1:0 2>"$dir/m.log" &
pid=$!
daemons="$pid"
listening_port "$dir/m.log" "$pid" || fail "metrics: a port" "$(tail -3 "$dir/m.log")"
skipped_4() {
	get /metrics >"$dir/m.prom"
	[ "$(metric "$dir/m.prom" inbox_skipped_total)" = 4 ]
}
check "metrics: inbox_skipped_total 4" wait_until 20 skipped_4
expect_eq "metrics: inbox_applied_total 2" "$(metric "$dir/m.prom" inbox_applied_total)" 2
stop_daemon "$pid"

# A filter of the wrong shape is a config error at its place.
sed 's|when: {pointer: /type, equals: order.created}|when: {pointer: /type, equal: order.created}|' \
	"$dir/f.yaml" >"$dir/typo.yaml"
"$BIN" run "$dir/typo.yaml" --once >"$dir/typo.out" 2>&1
expect_eq "typo: exit 3" "$?" 3
check "typo: did you mean" grep -q 'typo.yaml:11:32: unknown key "equal" in when (did you mean "equals"?)' "$dir/typo.out"
sed 's|when: {pointer: /type, equals: order.created}|when: {pointer: /type}|' \
	"$dir/f.yaml" >"$dir/noop.yaml"
"$BIN" run "$dir/noop.yaml" --once >"$dir/noop.out" 2>&1
expect_eq "no operator: exit 3" "$?" 3
check "no operator: says so" grep -q 'noop.yaml:11:15: when: one of equals:, in: or exists: is required' "$dir/noop.out"
summary
