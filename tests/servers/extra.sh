#!/bin/sh
# Start/stop the brokers the integration tests need, besides PostgreSQL.
#   extra.sh start DIR BASEPORT  -> prints "export VAR=VALUE" lines
#   extra.sh stop DIR
# Each broker has its own script tests/servers/NAME.sh with the same
# interface (start DIR PORT prints export lines; stop DIR stops by PID).
# A broker whose script is absent is skipped.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cmd=$1
dir=$2
brokers="kafka redis rabbitmq nats"
case "$cmd" in
start)
	base=$3
	i=1
	for b in $brokers; do
		if [ -f "$here/$b.sh" ]; then
			mkdir -p "$dir/$b"
			sh "$here/$b.sh" start "$dir/$b" $((base + i)) || {
				echo "extra.sh: $b did not start" >&2
				exit 1
			}
		fi
		i=$((i + 1))
	done
	;;
stop)
	for b in $brokers; do
		if [ -f "$here/$b.sh" ] && [ -d "$dir/$b" ]; then
			sh "$here/$b.sh" stop "$dir/$b" || true
		fi
	done
	;;
*)
	echo "usage: extra.sh start DIR BASEPORT | stop DIR" >&2
	exit 2
	;;
esac
