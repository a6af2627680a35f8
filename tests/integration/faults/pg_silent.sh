#!/bin/sh
# The database host is gone without a word — no RST, no FIN: a crashed
# host, a partition, a failover to another address. The daemon must
# notice in bounded time with libinbox's default connection settings
# (TCP keepalives; tcp_user_timeout 30 s for data never acknowledged),
# retry (never the message's fault) and go on once the database is back.
# Before, a statement sent into the void waited for the kernel's
# retransmissions (about 15 minutes) and an idle connection for 2 hours
# of keepalive silence.
#
# The test runs itself in a private network namespace (unshare -n, as
# root): PostgreSQL and the daemon talk over its own loopback, and taking
# that loopback down drops every packet silently.
#   pg_silent.sh INBOX_BIN
set -u
BIN=$1
if [ -z "${INBOX_NETNS:-}" ]; then
	if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null ||
		! command -v ip >/dev/null; then
		echo "FAIL needs root, unshare (util-linux) and ip (iproute2)"
		echo "0 passed, 1 failed"
		exit 1
	fi
	INBOX_NETNS=1 exec unshare -n sh "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
ip link set lo up || bail "the namespace's loopback comes up"

DETECT_MAX_S=45 # tcp_user_timeout 30 s + the first retransmissions
dir=$(mktmp)
chmod 755 "$dir"
port=$(fault_port 9) # (a namespace of our own: no one else is there)
stop_all() {
	ip link set lo up 2>/dev/null
	stop_daemons
	sh "$servers/pg.sh" stop "$dir/pg" kill >/dev/null 2>&1
}
exit_trap=stop_all
trap stop_all EXIT

url=$(sh "$servers/pg.sh" start "$dir/pg" "$port" 2>"$dir/pg.err") ||
	bail "PostgreSQL starts in the namespace" "$(cat "$dir/pg.err")"
# Checks go through the server's Unix socket: it works with lo down.
local_q() {
	psql "host=$dir/pg port=$port user=postgres dbname=inbox_test" \
		-X -q -tA -v ON_ERROR_STOP=1 -c "$1"
}

gen_orders "$dir/orders.jsonl" 5 0 0
fx_config "$dir/s.yaml" "$url" "jsonl:$dir/orders.jsonl?follow=1" fx_silent
"$BIN" run "$dir/s.yaml" 2>"$dir/daemon.log" 9>&- &
pid=$!
daemons="$daemons $pid"
count_rows() { local_q "SELECT count(*) FROM fx_silent" 2>/dev/null; }
expect_eq "5 orders applied" "$(wait_count 5 30)" 5

# The daemon's connections to the server (client side: the remote port
# is the server's), established, as local ports: from /proc/net/tcp (only
# this namespace's sockets).
hexport=$(printf '%04X' "$port")
client_conns() {
	awk -v p=":$hexport" '$3 ~ p"$" && $4 == "01" { split($2, a, ":"); print a[2] }' \
		/proc/net/tcp | sort
}
before=$(client_conns)
check "the daemon holds connections to the server ($(echo $before))" [ -n "$before" ]
# gone: none of those connections is still there (closed: noticed dead)
gone() {
	now=$(client_conns)
	for c in $before; do
		echo "$now" | grep -qx "$c" && return 1
	done
	return 0
}

ip link set lo down || bail "loopback down"
t0=$(now_ms)
order_stream 1 0 0 6 >>"$dir/orders.jsonl"
if wait_until $DETECT_MAX_S gone; then
	t=$(($(now_ms) - t0))
	ok "every dead connection is noticed and closed after ${t} ms (at most ${DETECT_MAX_S} s)"
else
	fail "every dead connection is noticed within ${DETECT_MAX_S} s" \
		"still established: $(client_conns | tr '\n' ' ')"
fi
check "the daemon is still running" alive "$pid"
ip link set lo up
expect_eq "the order is applied once the database is back" "$(wait_count 6 40)" 6
stop_daemon "$pid"
expect_eq "SIGTERM: drains and exits 0" "$rc" 0
expect_eq "every order applied once (rows/distinct)" \
	"$(local_q "SELECT count(*) || '/' || count(DISTINCT order_id) FROM fx_silent")" "6/6"
tr=$(stopped_field transient_retries "$dir/daemon.log")
check "the lost connection was a transient retry (transient_retries ${tr:-none})" \
	[ "${tr:-0}" -gt 0 ]
expect_eq "no dead letter" "$(local_q "SELECT count(*) FROM dead_letters")" 0
expect_eq "no attempt counted" \
	"$(local_q "SELECT count(*) FROM inbox WHERE status <> 'completed' OR attempts <> 1")" 0
summary
