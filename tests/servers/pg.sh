#!/bin/sh
# Start or stop a throwaway PostgreSQL 15 for the tests.
#   pg.sh start DIR PORT   -> initdb in DIR/pg (owned by postgres), start on
#                             127.0.0.1:PORT, print the URL on stdout
#   pg.sh stop DIR         -> stop it by the PID in DIR/pg.pid
# PostgreSQL refuses to run as root, so as root it runs as user postgres.
set -eu

cmd=$1
dir=$2
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

case "$cmd" in
start)
	port=$3
	mkdir -p "$dir"
	data="$dir/pg"
	[ "$(id -u)" -eq 0 ] && chown postgres "$dir"
	if "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port"; then
		echo "pg.sh: port $port is already in use" >&2
		exit 1
	fi
	if [ ! -f "$data/PG_VERSION" ]; then
		as_pg "$bindir/initdb" -D "$data" -U postgres -A trust \
			--no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
			{ cat "$dir/initdb.log" >&2; exit 1; }
	fi
	# Durable settings by default (fsync on): the tests must see real
	# commit behaviour. Extra settings can be passed in PG_EXTRA_OPTS.
	# Not through the as_pg function: dash keeps a copy of the caller's
	# stdout for a backgrounded function call, so $(pg.sh start) would
	# never return.
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$bindir/postgres" -D "$data" -p "$port" \
			-h 127.0.0.1 -k "$dir" -c max_connections=200 \
			-c shared_buffers=128MB -c max_locks_per_transaction=128 \
			${PG_EXTRA_OPTS:-} </dev/null >"$dir/postgres.log" 2>&1 &
	else
		"$bindir/postgres" -D "$data" -p "$port" -h 127.0.0.1 \
			-k "$dir" -c max_connections=200 -c shared_buffers=128MB \
			-c max_locks_per_transaction=128 ${PG_EXTRA_OPTS:-} \
			</dev/null >"$dir/postgres.log" 2>&1 &
	fi
	echo $! >"$dir/pg.pid"
	i=0
	until [ -f "$data/postmaster.pid" ] &&
		"$bindir/pg_isready" -q -h 127.0.0.1 -p "$port"; do
		i=$((i + 1))
		if [ $i -gt 100 ]; then
			echo "pg.sh: postgres did not start" >&2
			cat "$dir/postgres.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	"$bindir/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
		-c "CREATE DATABASE inbox_test" >/dev/null 2>&1 || true
	echo "postgresql://postgres@127.0.0.1:$port/inbox_test"
	;;
stop)
	# Signal only the postmaster of this data directory: a stale PID
	# could belong to any process by now (pid_max is small here).
	pidfile="$dir/pg/postmaster.pid"
	if [ -f "$pidfile" ]; then
		pid=$(head -1 "$pidfile")
		if [ -n "$pid" ] && grep -q "postgres" "/proc/$pid/cmdline" 2>/dev/null; then
			kill -INT "$pid" 2>/dev/null || true
			i=0
			while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
				sleep 0.1
				i=$((i + 1))
			done
			if grep -q "postgres" "/proc/$pid/cmdline" 2>/dev/null; then
				kill -KILL "$pid" 2>/dev/null || true
			fi
		fi
	fi
	rm -f "$dir/pg.pid"
	;;
*)
	echo "usage: pg.sh start DIR PORT | stop DIR" >&2
	exit 2
	;;
esac
