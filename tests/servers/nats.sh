#!/bin/sh
# Start, stop or restart a throwaway nats-server with JetStream for the tests.
#   nats.sh start DIR PORT  -> nats-server -js on 127.0.0.1:PORT, JetStream
#                              store in DIR/js, pid in DIR/nats.pid, log in
#                              DIR/nats.log; prints the export lines
#   nats.sh stop DIR        -> stop it by PID (SIGTERM, then SIGKILL)
#   nats.sh kill DIR        -> SIGKILL it by PID (a crash)
#   nats.sh restart DIR     -> stop, then start again on the same port with
#                              the same store (streams and consumers persist)
set -eu

cmd=$1
dir=$2

wait_ready() {
	# "Server is ready" is logged once JetStream has recovered its store.
	i=0
	until grep -q "Server is ready" "$dir/nats.log" 2>/dev/null &&
		ss -ltn "sport = :$1" 2>/dev/null | grep -q LISTEN; do
		i=$((i + 1))
		if [ $i -gt 200 ] || ! kill -0 "$(cat "$dir/nats.pid")" 2>/dev/null
		then
			echo "nats.sh: nats-server did not start" >&2
			cat "$dir/nats.log" >&2
			exit 1
		fi
		sleep 0.05
	done
}

start() {
	port=$1
	mkdir -p "$dir/js"
	echo "$port" >"$dir/port"
	: >"$dir/nats.log"
	nats-server -js -a 127.0.0.1 -p "$port" -sd "$dir/js" \
		-n "inbox-test-$port" >>"$dir/nats.log" 2>&1 &
	echo $! >"$dir/nats.pid"
	wait_ready "$port"
}

# Is PID still our nats-server (not a reused PID)?
ours() {
	[ -r "/proc/$1/cmdline" ] &&
		tr '\0' ' ' <"/proc/$1/cmdline" | grep -q "nats-server.* $dir/js"
}

stop() {
	sig=$1
	if [ -f "$dir/nats.pid" ]; then
		pid=$(cat "$dir/nats.pid")
		rm -f "$dir/nats.pid"
		ours "$pid" || return 0
		kill "-$sig" "$pid" 2>/dev/null || true
		i=0
		while ours "$pid" && [ $i -lt 100 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		if ours "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
		# Wait for the port to be released (SIGKILL above, or a
		# slow exit).
		while ours "$pid"; do sleep 0.05; done
	fi
}

case "$cmd" in
start)
	start "$3"
	echo "export INBOX_TEST_NATS_URL=nats://127.0.0.1:$3"
	echo "export INBOX_TEST_NATS_DIR=$dir"
	;;
stop)
	stop TERM
	;;
kill)
	stop KILL
	;;
restart)
	stop TERM
	start "$(cat "$dir/port")"
	;;
*)
	echo "usage: nats.sh start DIR PORT | stop DIR | kill DIR | restart DIR" >&2
	exit 2
	;;
esac
