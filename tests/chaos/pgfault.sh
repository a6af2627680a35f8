#!/bin/sh
# The chaos harness's PostgreSQL: started plainly (tests/servers/pg.sh) or
# in a PID namespace of its own (as in a container: the postmaster is PID
# 1 there and its backends get the same small PIDs after every restart),
# crashed with an immediate shutdown, started again on the same data.
#   pgfault.sh start DIR PORT plain|ns -> start on 127.0.0.1:PORT (data in
#                                       DIR/pg, created by pg.sh the first
#                                       time); prints the URL
#   pgfault.sh crash DIR               -> immediate shutdown, no checkpoint
#                                       (the next start runs crash
#                                       recovery): `pg_ctl stop -m
#                                       immediate`, or for a namespaced
#                                       server what it does, SIGQUIT to
#                                       the postmaster, by its host PID
#   pgfault.sh stop DIR                -> fast shutdown, whichever mode
#   pgfault.sh mode DIR                -> prints plain, ns or down
#   pgfault.sh clients DIR             -> how many client backends run,
#                                       read from /proc (connecting would
#                                       fork one more)
# DIR/mode says how the running server was started; DIR/ns.pid holds the
# host PID of a namespaced postmaster (its postmaster.pid holds the PID
# inside the namespace, which means another process out here).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
servers=$(cd "$here/../servers" && pwd)
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
cmd=$1
dir=$2

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# ours PID: PID is a postgres process (not a reused PID).
ours() {
	grep -q postgres "/proc/$1/cmdline" 2>/dev/null
}

# wait_gone PID: until PID has exited (30 s at most).
wait_gone() {
	i=0
	while ours "$1" && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	! ours "$1"
}

start_ns() {
	port=$1
	data="$dir/pg"
	[ -f "$data/PG_VERSION" ] || {
		echo "pgfault.sh: no data directory in $data (start plain first)" >&2
		exit 1
	}
	# The same settings as tests/servers/pg.sh. unshare forks: its child
	# is PID 1 of the new namespace and becomes the postmaster (setpriv
	# and runuser-less exec keep it so); without root, a user namespace
	# maps us to ourselves.
	if [ "$(id -u)" -eq 0 ]; then
		set -- unshare --pid --fork setpriv --reuid=postgres \
			--regid=postgres --init-groups --
	else
		set -- unshare --map-current-user --pid --fork
	fi
	"$@" "$bindir/postgres" -D "$data" -p "$port" -h 127.0.0.1 \
		-k "$dir" -c max_connections=200 -c shared_buffers=128MB \
		-c max_locks_per_transaction=128 ${PG_EXTRA_OPTS:-} \
		</dev/null >>"$dir/postgres.log" 2>&1 &
	u=$!
	i=0
	pm=""
	# Ready when postmaster.pid says so (its 8th line): polling with
	# pg_isready would fork a backend per poll, a different number each
	# time, and the daemons' connections would not get the PIDs they
	# had before the restart.
	until [ -n "$pm" ] &&
		[ "$(sed -n 8p "$data/postmaster.pid" 2>/dev/null | tr -d ' ')" = ready ]; do
		[ -n "$pm" ] || pm=$(cat "/proc/$u/task/$u/children" 2>/dev/null | tr -d ' ')
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 "$u" 2>/dev/null; then
			echo "pgfault.sh: postgres (PID namespace) did not start" >&2
			tail -20 "$dir/postgres.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "$pm" >"$dir/ns.pid"
}

case "$cmd" in
start)
	port=$3
	mode=$4
	case "$mode" in
	plain)
		mkdir -p "$dir"
		url=$(sh "$servers/pg.sh" start "$dir" "$port")
		;;
	ns)
		start_ns "$port"
		url="postgresql://postgres@127.0.0.1:$port/inbox_test"
		;;
	*)
		echo "pgfault.sh: mode plain or ns" >&2
		exit 2
		;;
	esac
	echo "$mode" >"$dir/mode"
	echo "$url"
	;;
crash | stop)
	sig=QUIT
	[ "$cmd" = stop ] && sig=INT
	mode=$(cat "$dir/mode" 2>/dev/null || echo down)
	case "$mode" in
	plain)
		if [ "$cmd" = stop ]; then
			sh "$servers/pg.sh" stop "$dir"
		else
			as_pg "$bindir/pg_ctl" -D "$dir/pg" stop -m immediate -w \
				-t 30 >/dev/null
		fi
		;;
	ns)
		pid=$(cat "$dir/ns.pid" 2>/dev/null || true)
		if [ -n "$pid" ] && ours "$pid"; then
			kill "-$sig" "$pid"
			wait_gone "$pid" || kill -KILL "$pid" 2>/dev/null || true
		fi
		rm -f "$dir/ns.pid"
		;;
	esac
	echo down >"$dir/mode"
	;;
mode)
	cat "$dir/mode" 2>/dev/null || echo down
	;;
clients)
	case "$(cat "$dir/mode" 2>/dev/null)" in
	ns) pm=$(cat "$dir/ns.pid" 2>/dev/null || true) ;;
	plain) pm=$(head -1 "$dir/pg/postmaster.pid" 2>/dev/null || true) ;;
	*) pm="" ;;
	esac
	n=0
	if [ -n "$pm" ] && ours "$pm"; then
		for c in $(cat "/proc/$pm/task/$pm/children" 2>/dev/null); do
			# a client backend's title: "postgres: USER DB HOST(PORT) ..."
			tr '\0' ' ' <"/proc/$c/cmdline" 2>/dev/null |
				grep -q '^postgres: [^ ]* [^ ]* [0-9.]*([0-9]*)' &&
				n=$((n + 1))
		done
	fi
	echo "$n"
	;;
*)
	echo "usage: pgfault.sh start DIR PORT plain|ns | crash DIR | stop DIR | mode DIR | clients DIR" >&2
	exit 2
	;;
esac
