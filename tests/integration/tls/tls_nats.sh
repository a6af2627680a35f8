#!/bin/sh
# NATS over TLS (issue 13, item 3): a private nats-server -js whose tls
# block has a certificate for DNS:localhost from the test's CA
# (tests/servers/certs.sh) and wants a client certificate of that CA
# (verify: true). A daemon with tls_ca, tls_cert and tls_key consumes the
# orders published (over TLS) to a stream; the wrong CA, the wrong host
# name, no client certificate, no TLS at all fail as connection faults
# (waited for, then exit 4 with --connect-timeout) saying why;
# tls_hostname lets an IP address in the URL check the certificate's
# name; a file that cannot be read is a config error naming it.
#   tls_nats.sh INBOX_BIN NATS_PUBLISH
# Port: a free one picked at run time.
set -u
BIN=$1
NPUB=$2
. "$(dirname "$0")/lib.sh"
command -v nats-server >/dev/null || bail "nats-server is not installed"
tls_dir
tag="tlsnats$$_"
PKI=$dir/pki

# The server: started directly, stopped by its PID at exit.
start_nats() {
	port=$(free_port)
	cat >"$dir/nats.conf" <<CONF
listen: 127.0.0.1:$port
server_name: inbox-tls-$port
jetstream { store_dir: "$dir/js" }
tls {
  cert_file: "$PKI/server.pem"
  key_file: "$PKI/server.key"
  ca_file: "$PKI/ca.pem"
  verify: true
  timeout: 2
}
CONF
	: >"$dir/nats.log"
	nats-server -c "$dir/nats.conf" >>"$dir/nats.log" 2>&1 &
	nats_pid=$!
	at_exit "kill -TERM $nats_pid 2>/dev/null; wait $nats_pid 2>/dev/null"
	wait_until 10 grep -q "Server is ready" "$dir/nats.log"
}
started=""
for _try in 1 2 3; do
	if start_nats; then started=1; break; fi
	kill -TERM "$nats_pid" 2>/dev/null
	wait "$nats_pid" 2>/dev/null
done
[ -n "$started" ] || bail "start a nats-server with TLS" "$(tail -5 "$dir/nats.log")"
ok "a nats-server with TLS on port $port"

orders "$dir/data/orders.jsonl" 5
NATS_TLS_CA=$PKI/ca.pem NATS_TLS_CERT=$PKI/client.pem NATS_TLS_KEY=$PKI/client.key \
	"$NPUB" pub "nats://localhost:$port" ORDERS "$dir/data/orders.jsonl" m \
	>"$dir/out/publish.txt" 2>&1 || bail "publish over TLS" "$(tail -3 "$dir/out/publish.txt")"
ok "5 orders published over TLS"

files="tls_ca=$PKI/ca.pem&tls_cert=$PKI/client.pem&tls_key=$PKI/client.key"
DB=$dir/data/inbox.db

# source_case NAME WANT URL: run --once --connect-timeout 1 on a
# consumer of URL exits WANT (3 config error, 4 cannot connect). Under
# load (an ASan build at load average 20) a first TLS attempt can outlast
# the 1 s: its "waiting" line (the one that gives up) is logged all the
# same.
source_case() {
	config "$dir/cfg/$1.yaml" "sqlite:$dir/data/$1.db" "$3"
	cmd "$1" "$2" run "$dir/cfg/$1.yaml" --once --connect-timeout 1
}

# daemon_case NAME DB URL WANT: a daemon on URL has WANT rows in DB.
daemon_case() {
	config "$dir/cfg/$1.yaml" "sqlite:$2" "$3"
	cmd "$1-migrate" 0 migrate "$dir/cfg/$1.yaml"
	INBOX_LOG_LEVEL=debug "$BIN" run "$dir/cfg/$1.yaml" >"$dir/out/$1.out" 2>&1 9>&- &
	pid=$!
	daemons="$daemons $pid"
	_db=$2
	count_rows() { sq "$_db" "SELECT count(*) FROM ${tag}orders"; }
	n=$(wait_count "$4" 30)
	expect_eq "$1: the daemon consumed the $4 orders over TLS" "$n" "$4"
	stop_daemon "$pid"
	expect_eq "$1: it stops cleanly (SIGTERM)" "$rc" 0
}

daemon_case good "$DB" "nats://localhost:$port/ORDERS?durable=tls1&$files" 5
check "nats: the start line shows the files of the URL" \
	grep -q "\"event\":\"start\".*tls_key=$PKI/client.key" "$dir/out/good.out"
# An IP address in the URL: tls_hostname names what the certificate says.
daemon_case by-ip "$dir/data/by-ip.db" "nats://127.0.0.1:$port/ORDERS?durable=tls2&$files&tls_hostname=localhost" 5

# tls_verify=0 gives the check up: the wrong CA is accepted.
daemon_case no-verify "$dir/data/no-verify.db" "nats://localhost:$port/ORDERS?durable=tls4&tls_verify=0&tls_ca=$PKI/other-ca.pem&tls_cert=$PKI/client.pem&tls_key=$PKI/client.key" 5

source_case wrong-ca 4 "nats://localhost:$port/ORDERS?durable=tls3&tls_ca=$PKI/other-ca.pem&tls_cert=$PKI/client.pem&tls_key=$PKI/client.key"
says wrong-ca "unable to get local issuer certificate"
says wrong-ca '"event":"waiting"'
source_case wrong-host 4 "nats://127.0.0.1:$port/ORDERS?durable=tls3&$files"
says wrong-host "IP address mismatch"
source_case wrong-name 4 "nats://127.0.0.1:$port/ORDERS?durable=tls3&$files&tls_hostname=other.example"
says wrong-name "hostname mismatch"
source_case no-client-cert 4 "nats://localhost:$port/ORDERS?durable=tls3&tls_ca=$PKI/ca.pem"
# Without tls=1 cnats still follows the server's tls_required, with the
# system's CAs, which do not know the test CA: refused all the same.
source_case no-tls 4 "nats://localhost:$port/ORDERS?durable=tls3"
says no-tls "SSL handshake error"
source_case no-ca-file 3 "nats://localhost:$port/ORDERS?tls_ca=$dir/pki/missing.pem"
says no-ca-file "missing.pem"
source_case tls-off 3 "nats://localhost:$port/ORDERS?tls=0&tls_ca=$PKI/ca.pem"
says tls-off "tls=0 with tls_* parameters"
source_case cert-no-key 3 "nats://localhost:$port/ORDERS?tls_cert=$PKI/client.pem"
says cert-no-key "tls_cert and tls_key go together"
no_secret "nats: every output" "$dir"/out/*
summary
