#!/bin/sh
# SIGKILL the daemon at random points mid-file, restart, repeat; at the end
# every order has exactly one invoice (the table has no unique constraint,
# so a double effect would show) and none is missing.
#   sigkill.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
[ "$MODE" = pg ] && need_pg

ORDERS=2500
dir=$(mktmp)
tag="kill$$_"
gen_orders "$dir/orders.jsonl" $ORDERS 300 200
lines=$(wc -l <"$dir/orders.jsonl" | tr -d ' ')
src="jsonl:$dir/orders.jsonl?checkpoint=$dir/orders.checkpoint"
if [ "$MODE" = pg ]; then
	table="${tag}invoices"
	write_config "$dir/inbox.yaml" "$INBOX_TEST_PG_URL" "$src" "$table" \
		"$tag" 50 25ms
	count() { pgq "$1"; }
	trap 'pg_drop_prefix "$tag"' EXIT
else
	table=invoices
	write_config "$dir/inbox.yaml" "sqlite:$dir/t.db" "$src" "$table" \
		"" 20 10ms
	count() { sqlite3 "$dir/t.db" "$1"; }
fi
echo "# $lines lines, $ORDERS orders, mode $MODE, dir $dir"

killed=0
for round in 1 2 3 4 5 6; do
	"$BIN" run "$dir/inbox.yaml" --once 2>>"$dir/daemon.log" &
	pid=$!
	ms=$(rand_between 50 400)
	sleep_ms "$ms"
	kill_daemon "$pid"
	[ "$rc" -eq 137 ] && killed=$((killed + 1))
	echo "# round $round: SIGKILL after ${ms} ms, exit status $rc"
done

run_to_end "$dir/inbox.yaml" "$dir/daemon.log"
expect_eq "the last run reaches the end and exits 0" "$rc" 0
check "killed mid-stream at least 3 times ($killed of 6)" [ "$killed" -ge 3 ]

rows=$(count "SELECT COUNT(*) FROM $table")
distinct=$(count "SELECT COUNT(DISTINCT order_id) FROM $table")
doubled=$(count "SELECT COUNT(*) FROM (SELECT order_id FROM $table
                 GROUP BY order_id HAVING COUNT(*) > 1) x")
expect_eq "no order billed twice" "$doubled" 0
expect_eq "one invoice per order: rows" "$rows" "$ORDERS"
expect_eq "one invoice per order: distinct orders" "$distinct" "$ORDERS"
stats=$("$BIN" stats "$dir/inbox.yaml" --json 2>&1)
case "$stats" in
*"\"completed\":$ORDERS,"*) ok "inbox stats: $ORDERS completed records" ;;
*) fail "inbox stats: $ORDERS completed records" "$stats" ;;
esac
check "no error logged" sh -c "! grep -q '\"level\":\"error\"' '$dir/daemon.log'"
summary
