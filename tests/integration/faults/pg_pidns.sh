#!/bin/sh
# PostgreSQL in its own PID namespace (as in a container) restarted under a
# running daemon, so that the daemon's new connection gets the very
# backend PID its old one had: nothing may be dead-lettered. The store
# used to decide "already prepared" by comparing PQbackendPID() with the
# PID it prepared on; here that was the same number on a fresh server,
# so every later message failed with 'prepared statement "inbox__h1" does
# not exist (26000)' and ended as a dead letter (issue 11, item 1).
#   pg_pidns.sh INBOX_BIN
# Port: INBOX_TEST_PORT_BASE + 5 (see lib.sh). Root only (PID namespaces
# and /proc/sys/kernel/ns_last_pid): run as the CI does.
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"

dir=$(mktmp)
chmod 755 "$dir"
port=$(fault_port 5)
pg="$dir/pgns"
stop_all() {
	stop_daemons
	sh "$servers/pg.sh" stop "$pg" kill >/dev/null 2>&1
}
exit_trap=stop_all
trap stop_all EXIT

start_pg() {
	PG_PIDNS=1 PG_EXTRA_OPTS="-c autovacuum=off" \
		sh "$servers/pg.sh" start "$pg" "$port" 2>>"$dir/pg.err"
}
url=$(start_pg) || bail "PostgreSQL starts in a PID namespace" "$(cat "$dir/pg.err")"
ok "PostgreSQL starts in a PID namespace"
check "its postmaster is PID 1 there" \
	[ "$(head -1 "$pg/pg/postmaster.pid")" = 1 ]

table=fx_orders
fx_config "$dir/d.yaml" "$url" "jsonl:$dir/in.jsonl?follow=1" "$table"
gen_orders "$dir/all.jsonl" 60 0 0
head -n 30 "$dir/all.jsonl" >"$dir/in.jsonl"
count_rows() { psql_at "$url" "SELECT count(*) FROM $table"; }

start_daemon "$dir/d.yaml" "$dir/d.log"
d=$pid
expect_eq "the daemon applies the first 30 orders" "$(wait_count 30 30)" 30
# The daemon's backend: the only libinbox connection.
old=$(psql_at "$url" "SELECT string_agg(pid::text, ',') FROM pg_stat_activity
                      WHERE application_name = 'libinbox'")
case "$old" in
'' | *,*) bail "one daemon connection" "pg_stat_activity: '$old'" ;;
esac
echo "# the daemon's backend PID before the restart: $old"

# Frozen while the server restarts, so that nothing else forks in the new
# namespace before its reconnect — which is then given the old PID.
kill -STOP "$d"
sh "$servers/pg.sh" stop "$pg" fast >/dev/null 2>&1
url2=$(start_pg) || bail "PostgreSQL restarts" "$(cat "$dir/pg.err")"
expect_eq "the restarted server has the same URL" "$url2" "$url"
sh "$servers/pg.sh" nextpid "$pg" "$old" 2>>"$dir/pg.err" ||
	bail "the next backend PID can be arranged" "$(cat "$dir/pg.err")"
tail -n +31 "$dir/all.jsonl" >>"$dir/in.jsonl"
kill -CONT "$d"

# The daemon reconnects; read the PID its new backend got without
# connecting ourselves (a connection of ours could take the PID).
new=""
i=0
while [ $i -lt 200 ] && [ -z "$new" ]; do
	new=$(sh "$servers/pg.sh" backends "$pg" |
		awk '/127\.0\.0\.1\(/ { print $1; exit }')
	[ -n "$new" ] || sleep 0.05
	i=$((i + 1))
done
echo "# the daemon's backend PID after the restart: ${new:-none}"
# Without the reuse this test would prove nothing: fail, not pass.
if [ "$new" != "$old" ]; then
	bail "the reconnect got the same backend PID ($old)" "got '$new'"
fi
ok "the reconnect got the same backend PID ($old)"

expect_eq "all 60 orders applied after the restart" "$(wait_count 60 30)" 60
check "the daemon still runs" alive "$d"
expect_eq "the daemon's connection kept its PID" \
	"$(psql_at "$url" "SELECT pid FROM pg_stat_activity WHERE application_name = 'libinbox'")" "$old"
stop_daemon "$d"
expect_eq "the daemon drains and exits 0" "$rc" 0

dls=$(psql_at "$url" "SELECT count(*) FROM dead_letters")
reasons=$(psql_at "$url" "SELECT reason FROM dead_letters LIMIT 3")
if [ "$dls" = 0 ]; then
	ok "no dead letter"
else
	fail "no dead letter" "$dls dead letters, e.g.:" "$reasons"
fi
expect_eq "each order applied once" \
	"$(psql_at "$url" "SELECT count(DISTINCT order_id) || '/' || count(*) FROM $table")" "60/60"
expect_eq "no attempt counted: every record completed at its first" \
	"$(psql_at "$url" "SELECT count(*) FROM inbox WHERE status <> 'completed' OR attempts <> 1")" 0
clean_logs "no error in the daemon's log" "$dir/d.log"
summary
