#!/bin/sh
# Kafka over TLS (issue 13, item 3) through librdkafka's own properties
# (rdkafka.security.protocol, rdkafka.ssl.*, rdkafka.sasl.*: passed
# through). librdkafka's mock cluster has no TLS listener
# (rdkafka_mock.h), so the test gives it one: in a network namespace of
# its own (unshare -n; lo only) a socat OPENSSL-LISTEN with a certificate
# from the test's CA listens on the mock broker's address 127.0.0.1:PORT
# and forwards, through a unix socket, to the mock in the test's
# namespace (lib.sh: kafka_setup, kafka_ns). Every connection the
# consumer makes there — bootstrap, the group coordinator, the partition
# leader — is TLS:
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
kafka_setup "tlskafka$$_"
PKI=$dir/pki

# The mock, reachable through a unix socket, where the namespace's TLS
# listener forwards (kafka_ns).
socat "UNIX-LISTEN:$dir/mock.sock,fork" "TCP:127.0.0.1:$mport" 2>"$dir/out/socat-unix.err" &
relay=$!
at_exit "kill -TERM $relay 2>/dev/null; wait $relay 2>/dev/null"

# in_tls_ns NAME SECONDS WANT CONFIG: `inbox run CONFIG` where
# 127.0.0.1:$mport is socat's TLS listener in front of the mock
# (kafka_ns in lib.sh).
in_tls_ns() { kafka_ns "$1" "$2" "$3" "$4" "$dir/mock.sock" tls; }

ssl="rdkafka.security.protocol=SSL&rdkafka.ssl.ca.location=$PKI/ca.pem&rdkafka.ssl.certificate.location=$PKI/client.pem&rdkafka.ssl.key.location=$PKI/client-enc.key"
kafka_config ssl "$ssl&rdkafka.ssl.key.password=$KEYPASS_ENC"
in_tls_ns ssl 40 5 "$dir/cfg/ssl.yaml"
expect_eq "kafka SSL: the daemon consumed the 5 orders over TLS" "$(kafka_rows ssl)" 5
expect_eq "kafka SSL: it stops cleanly (SIGTERM)" "$(cat "$dir/out/ssl.rc")" 0
check "kafka SSL: its start line shows the files, not the passphrase" \
	grep -q "\"event\":\"start\".*rdkafka.ssl.key.location=$PKI/client-enc.key&rdkafka.ssl.key.password=\*\*\*" "$dir/out/ssl.out"

kafka_config wrong-ca "rdkafka.security.protocol=SSL&rdkafka.ssl.ca.location=$PKI/other-ca.pem&open_timeout_ms=1000"
in_tls_ns wrong-ca 20 1 "$dir/cfg/wrong-ca.yaml"
expect_eq "kafka wrong CA: exit 4 (gave up waiting)" "$(cat "$dir/out/wrong-ca.rc")" 4
says wrong-ca "certificate verify failed"
says wrong-ca '"event":"waiting"'
expect_eq "kafka wrong CA: nothing consumed" "$(kafka_rows wrong-ca)" 0

kafka_config sasl-ssl "rdkafka.security.protocol=SASL_SSL&rdkafka.sasl.mechanism=PLAIN&rdkafka.sasl.username=u&rdkafka.sasl.password=$SASLPASS_ENC&rdkafka.ssl.ca.location=$PKI/ca.pem&open_timeout_ms=1000"
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
