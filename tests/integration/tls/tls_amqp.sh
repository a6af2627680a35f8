#!/bin/sh
# amqps:// (issue 13, item 3): the RabbitMQ source over TLS against the
# suite's node, whose TLS listener (tests/servers/rabbitmq.sh:
# INBOX_TEST_AMQPS_URL, a free port picked at start) has a certificate
# for DNS:localhost from a test CA and wants a client certificate of that
# CA. A daemon with the CA, the client certificate and its encrypted key
# (tls_key_password) consumes the orders published on the plain port
# (and publishes its retry copies on the same TLS connection); the wrong
# CA, the wrong host name, no client certificate, a wrong passphrase
# fail as connection faults (waited for, then exit 4 with
# --connect-timeout) saying why; a file that cannot be read, or a tls_*
# parameter on amqp://, is a config error naming it. No output shows the
# passphrase.
#   tls_amqp.sh INBOX_BIN AMQP_PUBLISH
set -u
BIN=$1
PUB=$2
. "$(dirname "$0")/lib.sh"
need_suite_server INBOX_TEST_AMQPS_URL RabbitMQ rabbitmq.sh
need_suite_server INBOX_TEST_AMQP_URL RabbitMQ rabbitmq.sh
tls_dir
tag="tlsamqp$$_"
PKI=$INBOX_TEST_AMQP_TLS_DIR
q="inbox-tls-$$"
at_exit "'$PUB' '$INBOX_TEST_AMQP_URL' delete $q $q.retry >/dev/null 2>&1"
# The broker's CA and client certificate; the key encrypted here.
openssl pkey -in "$PKI/client.key" -aes256 -passout "pass:$KEYPASS" \
	-out "$dir/pki/broker-client-enc.key" || bail "encrypt the client key"
orders "$dir/data/orders.jsonl" 5
"$PUB" "$INBOX_TEST_AMQP_URL" publish "$q" --message-id-prefix m- \
	<"$dir/data/orders.jsonl" || bail "publish the orders"
ok "5 orders published on the plain port"

hp=$(echo "$INBOX_TEST_AMQPS_URL" | sed 's|^amqps://[^@]*@\([^/]*\)/.*|\1|')
tport=${hp##*:}
good="amqps://guest:guest@$hp/%2f/$q?tls_ca=$PKI/ca.pem&tls_cert=$PKI/client.pem&tls_key=$dir/pki/broker-client-enc.key&tls_key_password=$KEYPASS_ENC"
DB=$dir/data/inbox.db

# source_case NAME WANT URL [ARGS]: run --once --connect-timeout 1 on a
# consumer of URL exits WANT (3 config error, 4 cannot connect). Under
# load (an ASan build at load average 20) a first TLS attempt can outlast
# the 1 s: its "waiting" line (the one that gives up) is logged all the
# same.
source_case() {
	config "$dir/cfg/$1.yaml" "sqlite:$dir/data/$1.db" "$3"
	cmd "$1" "$2" run "$dir/cfg/$1.yaml" --once --connect-timeout 1
}

# A daemon over TLS consumes them all.
config "$dir/cfg/good.yaml" "sqlite:$DB" "$good"
cmd good-migrate 0 migrate "$dir/cfg/good.yaml"
INBOX_LOG_LEVEL=debug "$BIN" run "$dir/cfg/good.yaml" --metrics 127.0.0.1:0 >"$dir/out/good.out" 2>&1 9>&- &
pid=$!
daemons="$daemons $pid"
count_rows() { sq "$DB" "SELECT count(*) FROM ${tag}orders"; }
n=$(wait_count 5 30)
expect_eq "amqps: the daemon consumed the 5 orders over TLS" "$n" 5
if listening_port "$dir/out/good.out" "$pid"; then
	get /metrics >"$dir/out/good.metrics"
	get /healthz >"$dir/out/good.healthz"
	check "amqps: /metrics served (searched below)" grep -q "^inbox_" "$dir/out/good.metrics"
else
	fail "amqps: the daemon serves /metrics"
fi
check "amqps: its start line shows the source redacted, the files not" \
	grep -q "\"event\":\"start\".*amqps://guest:\*\*\*@$hp/%2f/$q?tls_ca=$PKI/ca.pem&tls_cert=$PKI/client.pem&tls_key=$dir/pki/broker-client-enc.key&tls_key_password=\*\*\*" "$dir/out/good.out"
stop_daemon "$pid"
expect_eq "amqps: the daemon stops cleanly (SIGTERM)" "$rc" 0
no_secret good "$dir/out/good.out"
ready=$("$PUB" "$INBOX_TEST_AMQP_URL" count "$q" | cut -d' ' -f1)
expect_eq "amqps: every order was acked over TLS" "$ready" 0

# Refusals: each a connection fault, retried, then exit 4, saying why.
source_case wrong-ca 4 "amqps://guest:guest@$hp/%2f/$q?tls_ca=$dir/pki/other-ca.pem&tls_cert=$PKI/client.pem&tls_key=$dir/pki/broker-client-enc.key&tls_key_password=$KEYPASS_ENC"
says wrong-ca "SSL peer cert verification failed"
says wrong-ca '"event":"waiting"'
source_case wrong-host 4 "amqps://guest:guest@127.0.0.1:$tport/%2f/$q?tls_ca=$PKI/ca.pem&tls_cert=$PKI/client.pem&tls_key=$dir/pki/broker-client-enc.key&tls_key_password=$KEYPASS_ENC"
says wrong-host "SSL hostname verification failed"
source_case no-client-cert 4 "amqps://guest:guest@$hp/%2f/$q?tls_ca=$PKI/ca.pem"
says no-client-cert "does the broker want a client certificate?"
source_case wrong-keypass 4 "amqps://guest:guest@$hp/%2f/$q?tls_ca=$PKI/ca.pem&tls_cert=$PKI/client.pem&tls_key=$dir/pki/broker-client-enc.key&tls_key_password=$SASLPASS_ENC"
says wrong-keypass "broker-client-enc.key"
# A daemon that cannot open its key waits, /healthz saying why (the file,
# not the passphrase).
INBOX_LOG_LEVEL=debug "$BIN" run "$dir/cfg/wrong-keypass.yaml" --metrics 127.0.0.1:0 >"$dir/out/wkp-daemon.out" 2>&1 9>&- &
pid=$!
daemons="$daemons $pid"
if listening_port "$dir/out/wkp-daemon.out" "$pid" &&
	wait_until 20 grep -q '"event":"waiting"' "$dir/out/wkp-daemon.out"; then
	get /healthz >"$dir/out/wkp-daemon.healthz"
	expect_eq "amqps waiting: /healthz answers 503" "$http_status" 503
	check "amqps waiting: /healthz names the key file" \
		grep -q "broker-client-enc.key" "$dir/out/wkp-daemon.healthz"
	get /metrics >"$dir/out/wkp-daemon.metrics"
else
	fail "amqps waiting: a daemon waits for its source" "$(tail -2 "$dir/out/wkp-daemon.out" | cut -c1-300)"
fi
stop_daemon "$pid"
expect_eq "amqps waiting: SIGTERM while waiting exits 0" "$rc" 0
# Plain AMQP to the TLS port, TLS to the plain port: refused too.
plain_hp=$(echo "$INBOX_TEST_AMQP_URL" | sed 's|^amqp://[^@]*@\([^/]*\)/.*|\1|')
source_case tls-to-plain 4 "amqps://guest:guest@localhost:${plain_hp##*:}/%2f/$q?tls_ca=$PKI/ca.pem&tls_cert=$PKI/client.pem&tls_key=$PKI/client.key"
# tls_verify=0 gives up the check: with the wrong CA a daemon still
# consumes (an order published for it).
printf '{"id":"m-6","data":{"orderId":"ord-6"}}\n' |
	"$PUB" "$INBOX_TEST_AMQP_URL" publish "$q" >/dev/null || bail "publish one more"
NV=$dir/data/no-verify.db
config "$dir/cfg/no-verify.yaml" "sqlite:$NV" "amqps://guest:guest@127.0.0.1:$tport/%2f/$q?tls_verify=0&tls_ca=$dir/pki/other-ca.pem&tls_cert=$PKI/client.pem&tls_key=$PKI/client.key"
"$BIN" migrate "$dir/cfg/no-verify.yaml" >"$dir/out/no-verify-migrate.out" 2>&1
INBOX_LOG_LEVEL=debug "$BIN" run "$dir/cfg/no-verify.yaml" >"$dir/out/no-verify.out" 2>&1 9>&- &
pid=$!
daemons="$daemons $pid"
count_rows() { sq "$NV" "SELECT count(*) FROM ${tag}orders"; }
n=$(wait_count 1 30)
expect_eq "tls_verify=0: the wrong CA and host name are accepted" "$n" 1
stop_daemon "$pid"
# Config errors (exit 3), naming the file.
source_case no-ca-file 3 "amqps://guest:guest@$hp/%2f/$q?tls_ca=$dir/pki/missing.pem"
says no-ca-file "missing.pem"
source_case tls-on-amqp 3 "amqp://guest:guest@$hp/%2f/$q?tls_ca=$PKI/ca.pem"
says tls-on-amqp "tls_ca is for amqps://"
source_case cert-no-key 3 "amqps://guest:guest@$hp/%2f/$q?tls_cert=$PKI/client.pem"
says cert-no-key "tls_cert and tls_key go together"
no_secret "amqps: every output" "$dir"/out/*
summary
