#!/bin/sh
# Start, stop or restart a throwaway redis-server for the tests.
#   redis.sh start DIR PORT  -> redis-server on 127.0.0.1:PORT, data in DIR,
#                               append-only file fsynced at every write (a
#                               restart keeps the streams, the groups and
#                               their pending lists); prints
#                                 export INBOX_TEST_REDIS_URL=redis://127.0.0.1:PORT
#                                 export INBOX_TEST_REDIS_DIR=DIR
#   redis.sh stop DIR        -> stop it by the PID in DIR/redis.pid
#   redis.sh restart DIR     -> stop, then start again on the same port
#   redis.sh kill DIR        -> SIGKILL it (a crash; the AOF is fsynced)
set -eu

cmd=${1:-}
dir=${2:-}
[ -n "$dir" ] || {
	echo "usage: redis.sh start DIR PORT | stop DIR | restart DIR | kill DIR" >&2
	exit 2
}

launch() {
	port=$(cat "$dir/port")
	redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" \
		--appendonly yes --appendfsync always --save '' \
		--daemonize no --protected-mode no --logfile "$dir/redis.log" \
		</dev/null >/dev/null 2>&1 &
	echo $! >"$dir/redis.pid"
	i=0
	until [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = "PONG" ]; do
		i=$((i + 1))
		if [ $i -gt 200 ] || ! alive "$(cat "$dir/redis.pid")"; then
			echo "redis.sh: redis-server did not start" >&2
			tail -20 "$dir/redis.log" >&2 2>/dev/null || true
			exit 1
		fi
		sleep 0.05
	done
}

# Running and not a zombie (a reaper may take its time with those).
alive() {
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

halt() {
	sig=$1
	[ -f "$dir/redis.pid" ] || return 0
	pid=$(cat "$dir/redis.pid")
	kill "-$sig" "$pid" 2>/dev/null || true
	i=0
	while alive "$pid" && [ $i -lt 200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	kill -KILL "$pid" 2>/dev/null || true
	i=0
	while alive "$pid" && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	rm -f "$dir/redis.pid"
}

case "$cmd" in
start)
	port=${3:?port}
	command -v redis-server >/dev/null || {
		echo "redis.sh: redis-server not installed" >&2
		exit 1
	}
	mkdir -p "$dir"
	echo "$port" >"$dir/port"
	launch
	echo "export INBOX_TEST_REDIS_URL=redis://127.0.0.1:$port"
	echo "export INBOX_TEST_REDIS_DIR=$dir"
	;;
stop)
	halt TERM
	;;
kill)
	halt KILL
	;;
restart)
	halt TERM
	launch
	;;
*)
	echo "usage: redis.sh start DIR PORT | stop DIR | restart DIR | kill DIR" >&2
	exit 2
	;;
esac
