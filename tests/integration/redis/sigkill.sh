#!/bin/sh
# SIGKILL the daemon at random points while it consumes a Redis stream,
# restart it, five times; then a last run until the group is drained.
# Every restart is a new group member (HOSTNAME-PID): it takes the dead
# ones' pending entries over with XAUTOCLAIM (claim_idle=500). At the end
# every order has exactly one invoice (no unique constraint on the table,
# so a double effect would show), none is missing, nothing is pending.
#   sigkill.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
need_redis

ORDERS=2000
dir=$(mktmp)
stream="inbox-sigkill-$$-$(date +%s)"
R=$INBOX_TEST_REDIS_URL
produce "$R" "$stream" $ORDERS 150 50
entries=$(rcli "$R" XLEN "$stream")
db="$dir/t.db"
write_config "$dir/inbox.yaml" "sqlite:$db" \
	"$R/$stream?group=billing&claim_idle=500&drain=1" invoices "" 20 20ms
echo "# $entries entries, $ORDERS orders, stream $stream, dir $dir"

killed=0
for round in 1 2 3 4 5; do
	"$BIN" run "$dir/inbox.yaml" --once 2>>"$dir/daemon.log" &
	pid=$!
	ms=$(rand_between 150 700)
	sleep_ms "$ms"
	kill_daemon "$pid"
	[ "$rc" -eq 137 ] && killed=$((killed + 1))
	echo "# round $round: SIGKILL after ${ms} ms, exit status $rc," \
		"pending $(group_pending "$R" "$stream" billing)," \
		"invoices $(sq "$db" "SELECT COUNT(*) FROM invoices" 2>/dev/null)"
done

run_until_drained "$BIN" "$dir/inbox.yaml" "$dir/daemon.log" 120
rc=$?
expect_eq "the last run drains the group and exits 0" "$rc" 0
check "killed mid-stream at least 3 times ($killed of 5)" [ "$killed" -ge 3 ]

rows=$(sq "$db" "SELECT COUNT(*) FROM invoices")
distinct=$(sq "$db" "SELECT COUNT(DISTINCT order_id) FROM invoices")
doubled=$(sq "$db" "SELECT COUNT(*) FROM (SELECT order_id FROM invoices
                    GROUP BY order_id HAVING COUNT(*) > 1)")
expect_eq "no order billed twice" "$doubled" 0
expect_eq "one invoice per order: rows" "$rows" "$ORDERS"
expect_eq "one invoice per order: distinct orders" "$distinct" "$ORDERS"
expect_eq "nothing pending in the group" \
	"$(group_pending "$R" "$stream" billing)" 0
expect_eq "no dead letter" "$(sq "$db" "SELECT COUNT(*) FROM dead_letters")" 0
check "no error logged" sh -c "! grep -q '\"level\":\"error\"' '$dir/daemon.log'"
rcli "$R" DEL "$stream" >/dev/null
summary
