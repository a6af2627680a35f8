#!/bin/sh
# Kafka over TLS (issue 13, item 3) through librdkafka's own properties
# (rdkafka.security.protocol, rdkafka.ssl.*, rdkafka.sasl.*: passed
# through). librdkafka's mock cluster has no TLS listener
# (rdkafka_mock.h), so the test gives it one: in a network namespace of
# its own (unshare -n; lo only) a socat OPENSSL-LISTEN with a certificate
# from the test's CA listens on the mock broker's address 127.0.0.1:PORT
# and forwards, through a unix socket, to the mock in the test's
# namespace. Every connection the consumer makes there — bootstrap, the
# group coordinator, the partition leader — is TLS:
#   - SSL with the CA and a client certificate whose key is encrypted
#     (ssl.key.password): a daemon consumes the orders end to end;
#   - the wrong CA: refused, "certificate verify failed", waited for
#     (an infrastructure fault), exit 4 with --connect-timeout;
#   - SSL to the plain mock: the handshake fails, the same way;
#   - SASL_SSL (sasl.password): the TLS part passes, the mock answers no
#     SASL handshake, so SASL is refused: what is tested is that the
#     password shows nowhere;
#   - a wrong ssl.key.password: a config error naming the key's file.
# Untested here: SASL authentication succeeding (the mock has no SASL:
# sasl_kafka.sh puts a relay that has it in front of the mock), a broker
# that asks for the client certificate (socat does not: verify=0).
#   tls_kafka.sh INBOX_BIN KAFKA_MOCK KAFKA_PRODUCE
set -u
BIN=$1
MOCK=$2
PRODUCE=$3
. "$(dirname "$0")/lib.sh"
command -v socat >/dev/null || bail "socat is not installed (scripts/install-deps.sh)"
export CERT_SAN="DNS:localhost,IP:127.0.0.1"
tls_dir
unset CERT_SAN
tag="tlskafka$$_"
PKI=$dir/pki
if [ "$(id -u)" -eq 0 ]; then
	NETNS="unshare -n"
else
	NETNS="unshare --user --map-root-user -n"
fi

$NETNS true 2>/dev/null || bail "cannot make a network namespace ($NETNS)"
rm -f "$dir/mock.in"
mkfifo "$dir/mock.in" || bail "mkfifo"
"$MOCK" --brokers 1 --stdin-lifetime orders:1 <"$dir/mock.in" >"$dir/mock.out" 2>&1 &
mock=$!
exec 9>"$dir/mock.in"
at_exit "kill -TERM $mock 2>/dev/null; wait $mock 2>/dev/null; exec 9>&-"
wait_until 15 grep -q '^bootstrap=' "$dir/mock.out" || bail "kafka-mock: $(cat "$dir/mock.out")"
boot=$(sed -n 's/^bootstrap=//p' "$dir/mock.out")
mport=${boot##*:}
orders "$dir/data/orders.jsonl" 5
"$PRODUCE" -q "$boot" orders "$dir/data/orders.jsonl" || bail "produce the orders"
ok "5 orders produced to the mock cluster"

# The mock, reachable through a unix socket.
socat "UNIX-LISTEN:$dir/mock.sock,fork" "TCP:127.0.0.1:$mport" 2>"$dir/out/socat-unix.err" &
relay=$!
at_exit "kill -TERM $relay 2>/dev/null; wait $relay 2>/dev/null"

# in_tls_ns NAME SECONDS WANT CONFIG: in a network namespace where
# 127.0.0.1:$mport is socat's TLS listener, `inbox run CONFIG` in the
# background until its store has WANT rows or SECONDS passed, then
# SIGTERM; its output in out/NAME.out, its exit status in out/NAME.rc.
in_tls_ns() {
	cat >"$dir/cfg/$1.ns.sh" <<NS
ip link set lo up
socat OPENSSL-LISTEN:$mport,bind=127.0.0.1,reuseaddr,fork,cert=$PKI/server.pem,key=$PKI/server.key,verify=0 UNIX-CONNECT:$dir/mock.sock 2>"$dir/out/socat-$1.err" &
s=\$!
# localhost is ::1 too: the same relay there, so no connection is refused
# whichever address librdkafka tries first (harmless where IPv6 is off)
socat OPENSSL-LISTEN:$mport,bind=[::1],pf=ip6,reuseaddr,fork,cert=$PKI/server.pem,key=$PKI/server.key,verify=0 UNIX-CONNECT:$dir/mock.sock 2>"$dir/out/socat6-$1.err" &
s6=\$!
i=0
while ! ss -ltn | grep -q ":$mport "; do sleep 0.05; i=\$((i + 1)); [ \$i -gt 100 ] && break; done
INBOX_LOG_LEVEL=debug "$BIN" run "$4" --connect-timeout 3 >"$dir/out/$1.out" 2>&1 &
p=\$!
end=\$((\$(date +%s) + $2))
while kill -0 \$p 2>/dev/null && [ \$(date +%s) -lt \$end ]; do
	n=\$(sqlite3 "$dir/data/$1.db" "SELECT count(*) FROM ${tag}orders" 2>/dev/null)
	[ "\${n:-0}" -ge $3 ] && break
	sleep 0.2
done
kill -TERM \$p 2>/dev/null
wait \$p
echo \$? >"$dir/out/$1.rc"
kill -TERM \$s \$s6 2>/dev/null
wait \$s \$s6 2>/dev/null
NS
	$NETNS sh "$dir/cfg/$1.ns.sh" </dev/null >/dev/null 2>&1
}

# kconfig NAME PARAMS: a consumer of the orders topic with PARAMS.
kconfig() {
	config "$dir/cfg/$1.yaml" "sqlite:$dir/data/$1.db" \
		"kafka://localhost:$mport/orders?group=g$$$1&offset_reset=earliest&rdkafka.session.timeout.ms=6000&$2"
	"$BIN" migrate "$dir/cfg/$1.yaml" >"$dir/out/$1-migrate.out" 2>&1 ||
		fail "$1: migrate" "$(tail -2 "$dir/out/$1-migrate.out")"
}
rows() { sq "$dir/data/$1.db" "SELECT count(*) FROM ${tag}orders"; }

ssl="rdkafka.security.protocol=SSL&rdkafka.ssl.ca.location=$PKI/ca.pem&rdkafka.ssl.certificate.location=$PKI/client.pem&rdkafka.ssl.key.location=$PKI/client-enc.key"
kconfig ssl "$ssl&rdkafka.ssl.key.password=$KEYPASS_ENC"
in_tls_ns ssl 40 5 "$dir/cfg/ssl.yaml"
expect_eq "kafka SSL: the daemon consumed the 5 orders over TLS" "$(rows ssl)" 5
expect_eq "kafka SSL: it stops cleanly (SIGTERM)" "$(cat "$dir/out/ssl.rc")" 0
check "kafka SSL: its start line shows the files, not the passphrase" \
	grep -q "\"event\":\"start\".*rdkafka.ssl.key.location=$PKI/client-enc.key&rdkafka.ssl.key.password=\*\*\*" "$dir/out/ssl.out"

kconfig wrong-ca "rdkafka.security.protocol=SSL&rdkafka.ssl.ca.location=$PKI/other-ca.pem&open_timeout_ms=1000"
in_tls_ns wrong-ca 20 1 "$dir/cfg/wrong-ca.yaml"
expect_eq "kafka wrong CA: exit 4 (gave up waiting)" "$(cat "$dir/out/wrong-ca.rc")" 4
says wrong-ca "certificate verify failed"
says wrong-ca '"event":"waiting"'
expect_eq "kafka wrong CA: nothing consumed" "$(rows wrong-ca)" 0

kconfig sasl-ssl "rdkafka.security.protocol=SASL_SSL&rdkafka.sasl.mechanism=PLAIN&rdkafka.sasl.username=u&rdkafka.sasl.password=$SASLPASS_ENC&rdkafka.ssl.ca.location=$PKI/ca.pem&open_timeout_ms=1000"
in_tls_ns sasl-ssl 20 1 "$dir/cfg/sasl-ssl.yaml"
expect_eq "kafka SASL_SSL: exit 4 (the mock has no SASL)" "$(cat "$dir/out/sasl-ssl.rc")" 4
says sasl-ssl "SASL"
check "kafka SASL_SSL: the TLS handshake passed" \
	sh -c "! grep -q 'certificate verify failed' '$dir/out/sasl-ssl.out'"

# SSL to the plain mock (in this namespace): the handshake fails.
config "$dir/cfg/plain.yaml" "sqlite:$dir/data/plain.db" \
	"kafka://$boot/orders?$ssl&rdkafka.ssl.key.password=$KEYPASS_ENC&open_timeout_ms=1000"
cmd plain 4 run "$dir/cfg/plain.yaml" --once --connect-timeout 1
says plain "SSL_HANDSHAKE"
says plain "gave up waiting"
config "$dir/cfg/wrong-keypass.yaml" "sqlite:$dir/data/wkp.db" \
	"kafka://$boot/orders?$ssl&rdkafka.ssl.key.password=$SASLPASS_ENC"
cmd wrong-keypass 3 run "$dir/cfg/wrong-keypass.yaml" --once --connect-timeout 1
says wrong-keypass "ssl.key.location"
no_secret "kafka: every output" "$dir"/out/*
summary
