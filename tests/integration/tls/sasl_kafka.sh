#!/bin/sh
# Kafka SASL/PLAIN (issue 13, item 3) through librdkafka's own properties
# (rdkafka.security.protocol, rdkafka.sasl.*: passed through), with the
# configured user and password really checked. librdkafka's mock cluster
# has no SASL (rdkafka_mock_handlers.c answers neither SaslHandshake nor
# SaslAuthenticate, in 2.0.2 as in later versions), so the test puts
# tests/tools/kafka-sasl-relay in front of it: it adds the two APIs to the
# mock's ApiVersions answer, checks the PLAIN credentials, then relays
# the bytes. As in tls_kafka.sh (lib.sh: kafka_setup, kafka_ns), in a
# network namespace of its own (unshare -n; lo only) a socat listens on
# the mock broker's address 127.0.0.1:PORT (plain TCP, or TLS with the
# test's CA) and forwards to the relay's unix socket, so every connection
# the consumer makes — bootstrap, group coordinator, partition leader —
# authenticates:
#   - SASL_PLAINTEXT, the right password: a daemon consumes the orders,
#     the relay saw "auth ok user=inbox mechanism=PLAIN";
#   - SASL_SSL, the right password: the same over TLS;
#   - SASL_PLAINTEXT, a wrong password: refused by the relay ("auth
#     failed"), nothing consumed, the daemon says "SASL authentication
#     error" while it waits and gives up (exit 4, --connect-timeout): an
#     infrastructure fault, no dead letter;
#   - SCRAM-SHA-256, right and wrong password: the same (the relay checks
#     the client's proof);
#   - no output, log line, error or metric (scraped while it runs) holds
#     a piece of either password.
#   sasl_kafka.sh INBOX_BIN KAFKA_MOCK KAFKA_PRODUCE KAFKA_SASL_RELAY
set -u
BIN=$1
MOCK=$2
PRODUCE=$3
RELAY=$4
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || bail "curl is not installed (scripts/install-deps.sh)"
kafka_setup "saslkafka$$_"
PKI=$dir/pki
# The wrong password is another secret: it must not show either.
WRONGPASS='Wq3z/Rk@8u#Pd'
WRONGPASS_ENC='Wq3z%2FRk%408u%23Pd'
printf '%s\n%s\n' "$WRONGPASS" "$WRONGPASS_ENC" |
	awk '{ for (i = 1; i + 3 <= length($0); i++) print substr($0, i, 4) }' >>"$dir/cfg/pieces"

# The relay, here (it reaches the mock at 127.0.0.1:$mport); its lines
# (user names, never a password) in out/relay.err.
"$RELAY" "$dir/sasl.sock" 127.0.0.1 "$mport" inbox "$SASLPASS" 2>"$dir/out/relay.err" 9>&- &
relay=$!
at_exit "kill -TERM $relay 2>/dev/null; wait $relay 2>/dev/null"
wait_until 10 grep -q '^listening' "$dir/out/relay.err" || bail "kafka-sasl-relay: $(cat "$dir/out/relay.err")"

# in_sasl_ns NAME SECONDS WANT CONFIG tls|plain: `inbox run CONFIG` where
# 127.0.0.1:$mport is socat's listener (TLS or plain TCP) in front of the
# relay, its /metrics scraped while it runs into out/NAME.metrics
# (kafka_ns in lib.sh).
in_sasl_ns() { kafka_ns "$1" "$2" "$3" "$4" "$dir/sasl.sock" "$5" metrics; }
relay_says() { grep -c -F -- "$1" "$dir/out/relay.err"; }

sasl="rdkafka.sasl.mechanism=PLAIN&rdkafka.sasl.username=inbox"
kafka_config plain "rdkafka.security.protocol=SASL_PLAINTEXT&$sasl&rdkafka.sasl.password=$SASLPASS_ENC"
in_sasl_ns plain 40 5 "$dir/cfg/plain.yaml" plain
expect_eq "SASL_PLAINTEXT: the daemon consumed the 5 orders" "$(kafka_rows plain)" 5
expect_eq "SASL_PLAINTEXT: it stops cleanly (SIGTERM)" "$(cat "$dir/out/plain.rc")" 0
check "SASL_PLAINTEXT: the relay checked the password (auth ok user=inbox)" \
	test "$(relay_says "auth ok user=inbox mechanism=PLAIN")" -ge 1
check "SASL_PLAINTEXT: its start line masks the password" \
	grep -q '"event":"start".*rdkafka.sasl.password=\*\*\*' "$dir/out/plain.out"
check "SASL_PLAINTEXT: /metrics was scraped" test -s "$dir/out/plain.metrics"

ok_before=$(relay_says "auth ok")
kafka_config ssl "rdkafka.security.protocol=SASL_SSL&$sasl&rdkafka.sasl.password=$SASLPASS_ENC&rdkafka.ssl.ca.location=$PKI/ca.pem"
in_sasl_ns ssl 40 5 "$dir/cfg/ssl.yaml" tls
expect_eq "SASL_SSL: the daemon consumed the 5 orders over TLS" "$(kafka_rows ssl)" 5
expect_eq "SASL_SSL: it stops cleanly (SIGTERM)" "$(cat "$dir/out/ssl.rc")" 0
check "SASL_SSL: the relay checked the password again" \
	test "$(relay_says "auth ok")" -gt "$ok_before"

kafka_config wrong "rdkafka.security.protocol=SASL_PLAINTEXT&$sasl&rdkafka.sasl.password=$WRONGPASS_ENC&open_timeout_ms=1000"
in_sasl_ns wrong 20 1 "$dir/cfg/wrong.yaml" plain
expect_eq "wrong password: nothing consumed" "$(kafka_rows wrong)" 0
check "wrong password: refused by the relay (auth failed user=inbox)" \
	test "$(relay_says "auth failed user=inbox")" -ge 1
expect_eq "wrong password: exit 4 (gave up waiting)" "$(cat "$dir/out/wrong.rc")" 4
says wrong "SASL authentication error"
says wrong '"event":"waiting"'
expect_eq "wrong password: no dead letter" \
	"$(sq "$dir/data/wrong.db" "SELECT count(*) FROM ${tag}dead_letters")" 0
# SCRAM-SHA-256: the password never travels, a proof does; the relay
# checks it (and sends its own signature, which librdkafka checks).
scram="rdkafka.sasl.mechanism=SCRAM-SHA-256&rdkafka.sasl.username=inbox"
kafka_config scram "rdkafka.security.protocol=SASL_PLAINTEXT&$scram&rdkafka.sasl.password=$SASLPASS_ENC"
in_sasl_ns scram 40 5 "$dir/cfg/scram.yaml" plain
expect_eq "SCRAM-SHA-256: the daemon consumed the 5 orders" "$(kafka_rows scram)" 5
expect_eq "SCRAM-SHA-256: it stops cleanly (SIGTERM)" "$(cat "$dir/out/scram.rc")" 0
check "SCRAM-SHA-256: the relay checked the proof (auth ok)" \
	test "$(relay_says "auth ok user=inbox mechanism=SCRAM-SHA-256")" -ge 1
kafka_config scram-wrong "rdkafka.security.protocol=SASL_PLAINTEXT&$scram&rdkafka.sasl.password=$WRONGPASS_ENC&open_timeout_ms=1000"
in_sasl_ns scram-wrong 20 1 "$dir/cfg/scram-wrong.yaml" plain
expect_eq "SCRAM-SHA-256, wrong password: nothing consumed" "$(kafka_rows scram-wrong)" 0
check "SCRAM-SHA-256, wrong password: refused by the relay" \
	test "$(relay_says "auth failed user=inbox mechanism=SCRAM-SHA-256")" -ge 1
expect_eq "SCRAM-SHA-256, wrong password: exit 4" "$(cat "$dir/out/scram-wrong.rc")" 4
says scram-wrong "SASL authentication error"
no_secret "kafka SASL: every output, log, error and metric" "$dir"/out/*
summary
