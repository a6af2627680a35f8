#!/bin/sh
# Start, stop or restart a throwaway RabbitMQ node for the tests.
#   rabbitmq.sh start DIR PORT  -> a node of its own in DIR, AMQP on
#                                  127.0.0.1:PORT, Erlang distribution on
#                                  PORT+1000, its own epmd on PORT+2000;
#                                  AMQP over TLS on a free port picked at
#                                  start (DIR/tls_port), with a test CA
#                                  made in DIR/tls (tests/servers/certs.sh:
#                                  a certificate for DNS:localhost; clients
#                                  must show a certificate of that CA);
#                                  prints "export VAR=VALUE" lines
#   rabbitmq.sh stop DIR        -> stop the node and its epmd by PID
#   rabbitmq.sh restart DIR     -> stop the node (not epmd) and start it
#                                  again on the same data (durable queues
#                                  and persistent messages survive)
#   rabbitmq.sh kill DIR        -> SIGKILL the node (a crash; epmd stays):
#                                  `restart` starts it again
#   rabbitmq.sh ctl DIR ARGS... -> rabbitmqctl ARGS... against the node
#                                  (add_user, set_permissions, ...)
# Everything the node writes (mnesia, logs, cookie, config) lives in DIR;
# /etc/rabbitmq and the system's epmd are not used. Runs as root or not.
set -eu

cmd=$1
dir=$2
sbin=/usr/lib/rabbitmq/bin

# Same environment for the node, for every start of it.
node_env() {
	port=$(cat "$dir/port")
	export HOME="$dir/home"
	export RABBITMQ_NODENAME="inboxtest$port@localhost"
	export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
	export RABBITMQ_NODE_PORT="$port"
	export RABBITMQ_DIST_PORT=$((port + 1000))
	export ERL_EPMD_PORT=$((port + 2000))
	export ERL_EPMD_ADDRESS=127.0.0.1
	export RABBITMQ_MNESIA_BASE="$dir/mnesia"
	export RABBITMQ_LOG_BASE="$dir/log"
	export RABBITMQ_LOGS="$dir/log/rabbit.log"
	export RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf"
	export RABBITMQ_ADVANCED_CONFIG_FILE="$dir/advanced.config"
	export RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf"
	export RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins"
	export RABBITMQ_PLUGINS_EXPAND_DIR="$dir/plugins-expand"
	export RABBITMQ_PID_FILE="$dir/rabbit.pid"
	export RABBITMQ_CTL_DIST_PORT_MIN=$((port + 3000))
	export RABBITMQ_CTL_DIST_PORT_MAX=$((port + 3009))
	# The distribution listens on loopback only, with our own epmd.
	export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
}

# 0 once the node answers the AMQP protocol header with a frame.
probe() {
	perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1",
		    PeerPort => $ARGV[0], Timeout => 2) or exit 1;
		print $s "AMQP\x00\x00\x09\x01";
		my $b = "";
		local $SIG{ALRM} = sub { exit 1 };
		alarm 3;
		sysread($s, $b, 1) == 1 or exit 1;
		exit(ord($b) == 1 ? 0 : 1);' "$1"
}

start_node() {
	node_env
	mkdir -p "$HOME" "$RABBITMQ_MNESIA_BASE" "$RABBITMQ_LOG_BASE"
	rm -f "$RABBITMQ_PID_FILE"
	# setsid: the node must not get the signals of the caller's group.
	# Started in DIR: a node killed while Mnesia starts writes its crash
	# dump (MnesiaCore.*) into its working directory.
	(cd "$dir" && exec setsid "$sbin/rabbitmq-server") \
		>>"$dir/server.out" 2>&1 </dev/null &
	echo $! >"$dir/server.pid"
	i=0
	until probe "$port"; do
		i=$((i + 1))
		if ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null ||
			[ $i -gt 240 ]; then
			echo "rabbitmq.sh: the node did not start" >&2
			tail -30 "$dir/server.out" >&2 || true
			tail -30 "$RABBITMQ_LOGS" >&2 || true
			return 1
		fi
		sleep 0.25
	done
}

# Stop by PID. halt_node TERM: TERM to the wrapper (it stops the VM
# cleanly), 30 s at most; halt_node KILL: a crash, SIGKILL to the wrapper
# and the VM (its PID is in rabbit.pid). Then KILL whatever is left.
halt_node() {
	[ -f "$dir/server.pid" ] || return 0
	pid=$(cat "$dir/server.pid")
	vm=$(cat "$dir/rabbit.pid" 2>/dev/null || true)
	if [ "$1" = KILL ]; then
		kill -KILL "$pid" ${vm:+"$vm"} 2>/dev/null || true
	else
		kill -TERM "$pid" 2>/dev/null || true
	fi
	i=0
	while { kill -0 "$pid" 2>/dev/null ||
		{ [ -n "$vm" ] && kill -0 "$vm" 2>/dev/null; }; } &&
		[ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL "$pid" 2>/dev/null || true
	[ -n "$vm" ] && kill -KILL "$vm" 2>/dev/null || true
	rm -f "$dir/server.pid"
}

case "$cmd" in
start)
	port=$3
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	echo "$port" >"$dir/port"
	sh "$(dirname "$0")/certs.sh" "$dir/tls" localhost || exit 1
	# A free port for TLS, away from the ones derived from PORT.
	while :; do
		tls_port=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 10000))
		ss -tan 2>/dev/null | awk '{ print $4 }' |
			grep -q ":$tls_port\$" || break
	done
	echo "$tls_port" >"$dir/tls_port"
	cat >"$dir/rabbitmq.conf" <<-EOF
		listeners.tcp.default = 127.0.0.1:$port
		listeners.ssl.default = 127.0.0.1:$tls_port
		ssl_options.cacertfile = $dir/tls/ca.pem
		ssl_options.certfile = $dir/tls/server.pem
		ssl_options.keyfile = $dir/tls/server.key
		ssl_options.verify = verify_peer
		ssl_options.fail_if_no_peer_cert = true
		loopback_users.guest = true
		disk_free_limit.absolute = 10MB
		log.console = false
		log.file.level = warning
	EOF
	echo "[]." >"$dir/advanced.config"
	echo "[]." >"$dir/enabled_plugins"
	: >"$dir/rabbitmq-env.conf"
	node_env
	epmd -port "$ERL_EPMD_PORT" -address 127.0.0.1 \
		>"$dir/epmd.out" 2>&1 </dev/null &
	echo $! >"$dir/epmd.pid"
	start_node
	echo "export INBOX_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:$port/%2f"
	echo "export INBOX_TEST_AMQP_DIR=$dir"
	echo "export INBOX_TEST_AMQPS_URL=amqps://guest:guest@localhost:$tls_port/%2f"
	echo "export INBOX_TEST_AMQP_TLS_DIR=$dir/tls"
	echo "export INBOX_TEST_AMQP_SCRIPT=$(cd "$(dirname "$0")" && pwd)/rabbitmq.sh"
	;;
restart)
	dir=$(cd "$dir" && pwd)
	halt_node TERM
	start_node
	;;
kill)
	dir=$(cd "$dir" && pwd)
	halt_node KILL
	;;
ctl)
	dir=$(cd "$dir" && pwd)
	shift 2
	node_env
	"$sbin/rabbitmqctl" -q -n "$RABBITMQ_NODENAME" "$@"
	;;
stop)
	[ -d "$dir" ] || exit 0
	halt_node TERM
	if [ -f "$dir/epmd.pid" ]; then
		pid=$(cat "$dir/epmd.pid")
		kill -TERM "$pid" 2>/dev/null || true
		sleep 0.1
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$dir/epmd.pid"
	fi
	;;
*)
	echo "usage: rabbitmq.sh start DIR PORT | stop DIR | restart DIR |" \
		"kill DIR | ctl DIR ARGS..." >&2
	exit 2
	;;
esac
