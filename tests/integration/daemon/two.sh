#!/bin/sh
# Two daemons on the same JSONL file (each with its own checkpoint) and the
# same store at the same time: every effect exactly once — the database
# decides, through the inbox's unique key. One of them is also SIGKILLed
# mid-way and restarted.
#   two.sh INBOX_BIN pg|sqlite
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
[ "$MODE" = pg ] && need_pg

ORDERS=2000
dir=$(mktmp)
tag="two$$_"
gen_orders "$dir/orders.jsonl" $ORDERS 200 100
if [ "$MODE" = pg ]; then
	table="${tag}invoices"
	store=$INBOX_TEST_PG_URL
	count() { pgq "$1"; }
	trap 'pg_drop_prefix "$tag"' EXIT
	prefix=$tag
else
	table=invoices
	store="sqlite:$dir/t.db"
	count() { sqlite3 "$dir/t.db" "$1"; }
	prefix=""
fi
for w in a b; do
	write_config "$dir/$w.yaml" "$store" \
		"jsonl:$dir/orders.jsonl?checkpoint=$dir/$w.checkpoint" \
		"$table" "$prefix" 50 20ms
done

"$BIN" run "$dir/a.yaml" --once 2>"$dir/a.log" &
pa=$!
"$BIN" run "$dir/b.yaml" --once 2>"$dir/b1.log" &
pb=$!
sleep_ms "$(rand_between 100 300)"
kill_daemon "$pb"
"$BIN" run "$dir/b.yaml" --once 2>"$dir/b2.log"
rb=$?
wait "$pa"
ra=$?
expect_eq "daemon a exits 0" "$ra" 0
expect_eq "daemon b (restarted after SIGKILL) exits 0" "$rb" 0

rows=$(count "SELECT COUNT(*) FROM $table")
distinct=$(count "SELECT COUNT(DISTINCT order_id) FROM $table")
expect_eq "each effect exactly once: rows" "$rows" "$ORDERS"
expect_eq "each effect exactly once: distinct orders" "$distinct" "$ORDERS"
# The finished runs each read the whole file; between them they applied
# every order once (b's killed run may have applied some too).
aa=$(stopped_field applied "$dir/a.log")
ab=$(stopped_field applied "$dir/b2.log")
echo "# applied: a=$aa, b (after restart)=$ab"
# (both counts must be there: empty ones add up to 0 in $((...)))
check "both finished runs applied no order twice" \
	[ -n "$aa" -a -n "$ab" -a "$((${aa:-0} + ${ab:-0}))" -le "$ORDERS" ]
lines=$(wc -l <"$dir/orders.jsonl")
expect_eq "a's run read every line" "$(stopped_field messages "$dir/a.log")" "$lines"
summary
