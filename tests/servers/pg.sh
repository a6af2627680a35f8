#!/bin/sh
# Start or stop a throwaway PostgreSQL 15 for the tests.
#   pg.sh start DIR PORT   -> initdb in DIR/pg (owned by postgres), start on
#                             127.0.0.1:PORT, print the URL on stdout
#   pg.sh stop DIR [MODE]  -> stop it by the PID in DIR/pg.pid; MODE is
#                             fast (default: SIGINT), immediate (SIGQUIT, a
#                             crash: the next start recovers) or kill
#                             (SIGKILL)
# Starting again with the same DIR restarts the same cluster (its data is
# kept), as a container restart would.
#
# PG_PIDNS=1 runs the server in its own PID namespace (unshare --pid
# --fork, util-linux), as in a container: the postmaster is PID 1 there
# and backends get small, predictable PIDs — after a restart a new
# connection can get the PID an earlier one had. Then also:
#   pg.sh nextpid DIR N    -> the next process the server forks (the next
#                             connection's backend, when nothing else
#                             forks: run it with -c autovacuum=off) gets
#                             PID N in its namespace (root only:
#                             /proc/sys/kernel/ns_last_pid)
#   pg.sh backends DIR     -> one line per child of the postmaster:
#                             "NSPID HOSTPID TITLE" (its PID inside the
#                             namespace, outside, and its ps title), read
#                             from /proc without connecting
# DIR/pg.hostpid holds the postmaster's PID as seen from here (the data
# directory's postmaster.pid says 1).
#
# PostgreSQL refuses to run as root, so as root it runs as user postgres.
# Every role trusts 127.0.0.1 except the members of the group role
# inbox_password_auth: they must give their password (scram-sha-256), so
# a test can have a wrong password refused (tests create their own login
# roles IN ROLE inbox_password_auth, and drop them).
set -eu

cmd=$1
dir=$2
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)

# The postmaster's PID here, if it is still that process.
postmaster_pid() {
	if [ -f "$dir/pg.hostpid" ]; then
		_p=$(cat "$dir/pg.hostpid")
	elif [ -f "$dir/pg/postmaster.pid" ]; then
		_p=$(head -1 "$dir/pg/postmaster.pid")
	else
		return 1
	fi
	# A stale PID could belong to any process by now (pid_max is small
	# here): only a postgres whose data directory is ours.
	[ -n "$_p" ] && tr '\0' ' ' 2>/dev/null <"/proc/$_p/cmdline" |
		grep -q -- "postgres -D $dir/pg " || return 1
	echo "$_p"
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
		if [ "$(id -u)" -eq 0 ]; then
			runuser -u postgres -- "$bindir/initdb" -D "$data" \
				-U postgres -A trust --no-sync -E UTF8 \
				--locale=C >"$dir/initdb.log" 2>&1
		else
			"$bindir/initdb" -D "$data" -U postgres -A trust \
				--no-sync -E UTF8 --locale=C \
				>"$dir/initdb.log" 2>&1
		fi || { cat "$dir/initdb.log" >&2; exit 1; }
		# The first line that matches decides: password roles first.
		hba="$data/pg_hba.conf"
		{
			echo "host all +inbox_password_auth 127.0.0.1/32 scram-sha-256"
			echo "host all +inbox_password_auth ::1/128 scram-sha-256"
			cat "$hba"
		} >"$hba.new"
		cat "$hba.new" >"$hba"
		rm -f "$hba.new"
	fi
	# Durable settings by default (fsync on): the tests must see real
	# commit behaviour. Extra settings can be passed in PG_EXTRA_OPTS.
	# Started in the background directly, never through a shell
	# function: dash keeps a copy of the caller's stdout for a
	# backgrounded function call, so $(pg.sh start) would never return.
	# Under PG_PIDNS, setpriv (as root) execs the postmaster as PID 1 of
	# the namespace; unshare --kill-child takes it along if killed.
	set -- "$bindir/postgres" -D "$data" -p "$port" -h 127.0.0.1 \
		-k "$dir" -c max_connections=200 -c shared_buffers=128MB \
		-c max_locks_per_transaction=128
	if [ "${PG_PIDNS:-0}" = 1 ] && [ "$(id -u)" -eq 0 ]; then
		set -- unshare --pid --fork --kill-child setpriv \
			--reuid=postgres --regid=postgres --init-groups "$@"
	elif [ "${PG_PIDNS:-0}" = 1 ]; then
		set -- unshare --user --map-current-user --pid --fork \
			--kill-child "$@"
	elif [ "$(id -u)" -eq 0 ]; then
		set -- runuser -u postgres -- "$@"
	fi
	# shellcheck disable=SC2086
	"$@" ${PG_EXTRA_OPTS:-} </dev/null >>"$dir/postgres.log" 2>&1 &
	echo $! >"$dir/pg.pid"
	rm -f "$dir/pg.hostpid"
	i=0
	until [ -f "$data/postmaster.pid" ] &&
		"$bindir/pg_isready" -q -h 127.0.0.1 -p "$port"; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$(cat "$dir/pg.pid")" 2>/dev/null; then
			echo "pg.sh: postgres did not start" >&2
			tail -20 "$dir/postgres.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	if [ "${PG_PIDNS:-0}" = 1 ]; then
		# The postmaster is unshare's only child.
		u=$(cat "$dir/pg.pid")
		echo $(cat "/proc/$u/task/$u/children") >"$dir/pg.hostpid"
		if ! postmaster_pid >/dev/null; then
			echo "pg.sh: cannot find the namespaced postmaster" >&2
			exit 1
		fi
	fi
	"$bindir/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
		-c "CREATE DATABASE inbox_test" >/dev/null 2>&1 || true
	"$bindir/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
		-c "CREATE ROLE inbox_password_auth NOLOGIN" >/dev/null 2>&1 || true
	echo "postgresql://postgres@127.0.0.1:$port/inbox_test"
	;;
stop)
	case "${3:-fast}" in
	fast) sig=INT ;;
	immediate) sig=QUIT ;;
	kill) sig=KILL ;;
	*)
		echo "pg.sh: stop mode is fast, immediate or kill" >&2
		exit 2
		;;
	esac
	if pid=$(postmaster_pid); then
		kill -"$sig" "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		if postmaster_pid >/dev/null; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	# unshare (PG_PIDNS) exits with its child; wait for it, by PID.
	if [ -f "$dir/pg.hostpid" ] && [ -f "$dir/pg.pid" ]; then
		u=$(cat "$dir/pg.pid")
		i=0
		while grep -q unshare 2>/dev/null "/proc/$u/cmdline" && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
	fi
	rm -f "$dir/pg.pid" "$dir/pg.hostpid"
	;;
nextpid)
	n=$3
	pid=$(postmaster_pid) || { echo "pg.sh: not running" >&2; exit 1; }
	[ -f "$dir/pg.hostpid" ] || { echo "pg.sh: not in a PID namespace (PG_PIDNS=1)" >&2; exit 1; }
	nsenter --target "$pid" --pid -- sh -c \
		"echo $((n - 1)) >/proc/sys/kernel/ns_last_pid"
	;;
backends)
	pid=$(postmaster_pid) || { echo "pg.sh: not running" >&2; exit 1; }
	for c in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
		ns=$(awk '/^NSpid:/ { print $NF }' "/proc/$c/status" 2>/dev/null) || continue
		[ -n "$ns" ] || continue
		echo "$ns $c $(tr '\0' ' ' 2>/dev/null <"/proc/$c/cmdline")"
	done
	;;
*)
	echo "usage: pg.sh start DIR PORT | stop DIR [fast|immediate|kill] |" \
		"nextpid DIR N | backends DIR" >&2
	exit 2
	;;
esac
