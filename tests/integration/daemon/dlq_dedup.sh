#!/bin/sh
# Dead letters are idempotent (issue 10, item 4): four daemons reading the
# same 230 malformed lines (each with its own checkpoint, at the same time)
# give 230 dead letters counting 920 deliveries, not a row per delivery;
# `dlq list` shows each once with its count, `dlq show` the count and when
# it was first and last seen, `stats` counts 230 pending; another run and
# a replay that fails again count on the same ones; a message missing its
# key field has no key, the field named in the reason.
#   dlq_dedup.sh INBOX_BIN pg|sqlite
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
[ "$MODE" = pg ] && need_pg

BAD=230
DAEMONS=4
dir=$(mktmp)
tag="dld$$_"
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
dl="${prefix}dead_letters"

# 100 good orders and 230 bad lines, interleaved: malformed JSON, invalid
# UTF-8, and orders without the key field (each line its own bytes).
awk -v bad=$BAD 'BEGIN {
	for (i = 1; i <= 100 || i <= bad; i++) {
		if (i <= 100)
			printf "{\"id\":\"m-%d\",\"data\":{\"orderId\":\"ord-%d\",\"customer\":\"c\",\"totalCents\":%d}}\n", i, i, i
		if (i > bad) continue
		k = i % 3
		if (k == 0) printf "{\"id\":\"bad-%d\",\"data\":{\"orderId\":\n", i
		else if (k == 1) printf "{\"id\":\"utf-%d\",\"data\":{\"orderId\":\"o\377%d\"}}\n", i, i
		else printf "{\"id\":\"nokey-%d\",\"data\":{\"customer\":\"c\",\"totalCents\":1}}\n", i
	}
}' >"$dir/in.jsonl"
expect_eq "the stream: 330 lines" "$(wc -l <"$dir/in.jsonl" | tr -d ' ')" 330

i=0
while [ $i -lt $DAEMONS ]; do
	write_config "$dir/d$i.yaml" "$store" \
		"jsonl:$dir/in.jsonl?checkpoint=$dir/cp$i" \
		"${prefix}invoices" "$prefix" 25 0ms
	i=$((i + 1))
done
# All at once: the same lines in the same moments.
pids=""
i=0
while [ $i -lt $DAEMONS ]; do
	"$BIN" run "$dir/d$i.yaml" --once 2>"$dir/d$i.log" &
	pids="$pids $!"
	i=$((i + 1))
done
fails=0
for p in $pids; do
	wait "$p" || fails=$((fails + 1))
done
expect_eq "every daemon exits 0" "$fails" 0
clean_logs "no error in the logs" "$dir"/d*.log
expect_eq "each good order applied once" \
	"$(q "SELECT COUNT(*) FROM ${prefix}invoices")" 100
expect_eq "$BAD dead letters, one per bad line" "$(q "SELECT COUNT(*) FROM $dl")" $BAD
expect_eq "counting every delivery: $((BAD * DAEMONS))" \
	"$(q "SELECT SUM(deliveries) FROM $dl")" $((BAD * DAEMONS))
expect_eq "each delivered by every daemon" \
	"$(q "SELECT COUNT(*) FROM $dl WHERE deliveries = $DAEMONS")" $BAD
expect_eq "missing key field: no key, the field named" \
	"$(q "SELECT COUNT(*) FROM $dl WHERE key IS NULL AND reason = 'missing key field /data/orderId'")" 77
expect_eq "no half-rendered key" \
	"$(q "SELECT COUNT(*) FROM $dl WHERE key IS NOT NULL")" 0

"$BIN" dlq list "$dir/d0.yaml" --json >"$dir/list.json" 2>"$dir/list.err"
expect_eq "dlq list --json: exit 0" "$?" 0
expect_eq "dlq list shows each once" "$(jq -s length "$dir/list.json")" $BAD
expect_eq "dlq list: each with its $DAEMONS deliveries" \
	"$(jq -s "[.[] | select(.deliveries == $DAEMONS)] | length" "$dir/list.json")" $BAD
"$BIN" dlq list "$dir/d0.yaml" >"$dir/list.out" 2>&1
check "dlq list (text): a DELIVERIES column" grep -q "DELIVERIES" "$dir/list.out"
check "dlq list (text): counts $BAD" grep -q "($BAD dead letters)" "$dir/list.out"
"$BIN" stats "$dir/d0.yaml" --json >"$dir/stats.json"
check "stats: $BAD dead letters, $BAD pending" \
	jqok ".dead_letters == $BAD and .pending == $BAD" "$dir/stats.json"

id=$(q "SELECT MIN(id) FROM $dl")
"$BIN" dlq show "$dir/d0.yaml" "$id" >"$dir/show.out" 2>&1
check "dlq show: deliveries" grep -q "^deliveries  *$DAEMONS\$" "$dir/show.out"
check "dlq show: first seen" grep -q "^first seen  *20" "$dir/show.out"
check "dlq show: last seen" grep -q "^last seen  *20" "$dir/show.out"
"$BIN" dlq show "$dir/d0.yaml" "$id" --json >"$dir/show.json"
check "dlq show --json: deliveries, first and last seen" \
	jqok ".deliveries == $DAEMONS and .last_seen_at_ms >= .created_at_ms and .created_at_ms > 0" "$dir/show.json"

# The file read again from the start: counted on the same rows.
write_config "$dir/again.yaml" "$store" \
	"jsonl:$dir/in.jsonl?checkpoint=$dir/cp-again" \
	"${prefix}invoices" "$prefix" 100 0ms
"$BIN" run "$dir/again.yaml" --once 2>"$dir/again.log"
expect_eq "a fifth run: exit 0" "$?" 0
expect_eq "still $BAD dead letters" "$(q "SELECT COUNT(*) FROM $dl")" $BAD
expect_eq "one more delivery each" \
	"$(q "SELECT SUM(deliveries) FROM $dl")" $((BAD * (DAEMONS + 1)))
# A replay that fails again: the same dead letter, counted, still pending.
"$BIN" dlq replay "$dir/d0.yaml" "$id" >"$dir/replay.out" 2>&1
expect_eq "replay of a malformed line: exit 1 (dead-lettered again)" "$?" 1
check "replay: counted on the same dead letter" \
	grep -q "dead_lettered again as dead letter $id (the same" "$dir/replay.out"
expect_eq "replay: no new row" "$(q "SELECT COUNT(*) FROM $dl")" $BAD
expect_eq "replay: counted" "$(q "SELECT deliveries FROM $dl WHERE id = $id")" $((DAEMONS + 2))
expect_eq "replay: still pending" \
	"$(q "SELECT COUNT(*) FROM $dl WHERE replayed_at IS NULL")" $BAD
summary
