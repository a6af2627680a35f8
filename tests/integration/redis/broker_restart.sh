#!/bin/sh
# Restart the broker under a consuming daemon: once gracefully (SIGTERM),
# once as a crash (SIGKILL; the append-only file is fsynced at every
# write, so the stream, the group and its pending list survive). The
# daemon reconnects and goes on; at the end every order has exactly one
# invoice, none is missing, nothing is pending. A private redis-server, so
# that the tests sharing the suite's server are not disturbed.
#   broker_restart.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"

ORDERS=2000
dir=$(mktmp)
rdir="$dir/redis"
R=$(private_redis "$rdir") || {
	echo "FAIL cannot start a private redis-server"
	echo "0 passed, 1 failed"
	exit 1
}
trap 'sh "$servers/redis.sh" stop "$rdir" >/dev/null 2>&1' EXIT
trap 'exit 1' INT TERM
stream="inbox-restart-$$"
produce "$R" "$stream" $ORDERS 150 50
db="$dir/t.db"
write_config "$dir/inbox.yaml" "sqlite:$db" \
	"$R/$stream?group=billing&drain=1&timeout_ms=2000" invoices "" 20 10ms
echo "# $(rcli "$R" XLEN "$stream") entries, $ORDERS orders, $R, dir $dir"

invoices() {
	sq "$db" "SELECT COUNT(*) FROM invoices" 2>/dev/null || echo 0
}

# wait_invoices N SECONDS: until at least N invoices exist.
wait_invoices() {
	end=$(($(date +%s) + $2))
	while [ "$(invoices)" -lt "$1" ] && [ "$(date +%s)" -lt "$end" ]; do
		sleep_ms 20
	done
	[ "$(invoices)" -ge "$1" ]
}

timeout -s KILL 120 "$BIN" run "$dir/inbox.yaml" --once 2>"$dir/daemon.log" &
pid=$!

check "the daemon consumes (400 invoices)" wait_invoices 400 30
sh "$servers/redis.sh" restart "$rdir"
echo "# redis restarted (SIGTERM) at $(invoices) invoices"
check "the daemon goes on after a graceful restart (1000 invoices)" \
	wait_invoices 1000 30
sh "$servers/redis.sh" kill "$rdir"
sleep_ms 300
sh "$servers/redis.sh" restart "$rdir"
echo "# redis killed and started again at $(invoices) invoices"
wait "$pid"
rc=$?
expect_eq "the daemon drains the group and exits 0" "$rc" 0

rows=$(sq "$db" "SELECT COUNT(*) FROM invoices")
distinct=$(sq "$db" "SELECT COUNT(DISTINCT order_id) FROM invoices")
expect_eq "one invoice per order: rows" "$rows" "$ORDERS"
expect_eq "one invoice per order: distinct orders" "$distinct" "$ORDERS"
expect_eq "nothing pending in the group" \
	"$(group_pending "$R" "$stream" billing)" 0
expect_eq "no dead letter" "$(sq "$db" "SELECT COUNT(*) FROM dead_letters")" 0
lost=$(grep -c '"event":"poll_failed"' "$dir/daemon.log")
check "the lost connection was noticed and logged ($lost poll_failed)" \
	[ "$lost" -ge 1 ]
# before summary removes the directory holding its pid file
sh "$servers/redis.sh" stop "$rdir"
summary
