#!/bin/sh
# The chaos harness's PostgreSQL, on tests/servers/pg.sh: started plainly
# or in a PID namespace of its own (PG_PIDNS=1, as in a container: the
# postmaster is PID 1 there and its backends get small PIDs that come
# again after a restart), crashed with an immediate shutdown, started
# again on the same data.
#   pgfault.sh start DIR PORT plain|ns -> start on 127.0.0.1:PORT (data in
#                                       DIR/pg); prints the URL
#   pgfault.sh crash DIR               -> immediate shutdown, no checkpoint
#                                       (the next start runs crash
#                                       recovery): `pg_ctl stop -m
#                                       immediate`; for a namespaced server
#                                       the same signal by its host PID
#                                       (pg.sh stop DIR immediate)
#   pgfault.sh stop DIR                -> fast shutdown, whichever mode
#   pgfault.sh mode DIR                -> prints plain, ns or down
#   pgfault.sh clients DIR             -> the client backends' PIDs inside
#                                       the namespace, one a line, read
#                                       from /proc (connecting would fork
#                                       one more)
#   pgfault.sh nextpid DIR N           -> the namespaced server's next
#                                       fork gets PID N (pg.sh nextpid)
# DIR/mode says how the running server was started.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
pgsh=$(cd "$here/../servers" && pwd)/pg.sh
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
cmd=$1
dir=$2

mode() {
	cat "$dir/mode" 2>/dev/null || echo down
}

case "$cmd" in
start)
	case "$4" in
	plain) ns=0 ;;
	ns) ns=1 ;;
	*)
		echo "pgfault.sh: mode plain or ns" >&2
		exit 2
		;;
	esac
	url=$(PG_PIDNS=$ns sh "$pgsh" start "$dir" "$3")
	echo "$4" >"$dir/mode"
	echo "$url"
	;;
crash)
	case "$(mode)" in
	plain)
		if [ "$(id -u)" -eq 0 ]; then
			set -- runuser -u postgres --
		else
			set --
		fi
		"$@" "$bindir/pg_ctl" -D "$dir/pg" stop -m immediate -w -t 30 \
			>/dev/null
		;;
	ns) sh "$pgsh" stop "$dir" immediate ;;
	esac
	echo down >"$dir/mode"
	;;
stop)
	[ "$(mode)" = down ] || sh "$pgsh" stop "$dir"
	echo down >"$dir/mode"
	;;
mode)
	mode
	;;
clients)
	# a client backend's title: "postgres: USER DB HOST(PORT) STATE"
	[ "$(mode)" = down ] ||
		sh "$pgsh" backends "$dir" 2>/dev/null |
		awk '$3 == "postgres:" && $6 ~ /^[0-9.]+\([0-9]+\)$/ { print $1 }'
	;;
nextpid)
	sh "$pgsh" nextpid "$dir" "$3"
	;;
*)
	echo "usage: pgfault.sh start DIR PORT plain|ns | crash DIR | stop DIR |" \
		"mode DIR | clients DIR | nextpid DIR N" >&2
	exit 2
	;;
esac
