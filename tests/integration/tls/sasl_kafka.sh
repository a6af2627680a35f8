#!/bin/sh
# Kafka SASL/PLAIN (issue 13, item 3) through librdkafka's own properties
# (rdkafka.security.protocol, rdkafka.sasl.*: passed through), with the
# configured user and password really checked. librdkafka's mock cluster
# has no SASL (rdkafka_mock_handlers.c answers neither SaslHandshake nor
# SaslAuthenticate, in 2.0.2 as in later versions), so the test puts
# tests/tools/kafka-sasl-relay in front of it: it adds the two APIs to the
# mock's ApiVersions answer, checks the PLAIN credentials, then relays
# the bytes. As in tls_kafka.sh, in a network namespace of its own
# (unshare -n; lo only) a socat listens on the mock broker's address
# 127.0.0.1:PORT (plain TCP, or TLS with the test's CA) and forwards to
# the relay's unix socket, so every connection the consumer makes —
# bootstrap, group coordinator, partition leader — authenticates:
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
command -v socat >/dev/null || bail "socat is not installed (scripts/install-deps.sh)"
command -v curl >/dev/null || bail "curl is not installed (scripts/install-deps.sh)"
export CERT_SAN="DNS:localhost,IP:127.0.0.1"
tls_dir
unset CERT_SAN
tag="saslkafka$$_"
PKI=$dir/pki
# The wrong password is another secret: it must not show either.
WRONGPASS='Wq3z/Rk@8u#Pd'
WRONGPASS_ENC='Wq3z%2FRk%408u%23Pd'
printf '%s\n%s\n' "$WRONGPASS" "$WRONGPASS_ENC" |
	awk '{ for (i = 1; i + 3 <= length($0); i++) print substr($0, i, 4) }' >>"$dir/cfg/pieces"
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

# The relay, here (it reaches the mock at 127.0.0.1:$mport); its lines
# (user names, never a password) in out/relay.err.
"$RELAY" "$dir/sasl.sock" 127.0.0.1 "$mport" inbox "$SASLPASS" 2>"$dir/out/relay.err" 9>&- &
relay=$!
at_exit "kill -TERM $relay 2>/dev/null; wait $relay 2>/dev/null"
wait_until 10 grep -q '^listening' "$dir/out/relay.err" || bail "kafka-sasl-relay: $(cat "$dir/out/relay.err")"

# in_sasl_ns NAME SECONDS WANT CONFIG LISTEN [OPTIONS]: in a network namespace where
# 127.0.0.1:$mport (and [::1]) is socat's LISTEN address (TCP-LISTEN or
# OPENSSL-LISTEN, with OPTIONS) forwarding to the relay, `inbox run
# CONFIG` in the background until its store has WANT rows or SECONDS
# passed, then SIGTERM; its /metrics scraped while it runs into
# out/NAME.metrics, its output in out/NAME.out, its exit status in
# out/NAME.rc.
in_sasl_ns() {
	cat >"$dir/cfg/$1.ns.sh" <<NS
ip link set lo up
socat $5:$mport,bind=127.0.0.1,reuseaddr,fork${6:+,$6} UNIX-CONNECT:$dir/sasl.sock 2>"$dir/out/socat-$1.err" &
s=\$!
socat $5:$mport,bind=[::1],pf=ip6,reuseaddr,fork${6:+,$6} UNIX-CONNECT:$dir/sasl.sock 2>"$dir/out/socat6-$1.err" &
s6=\$!
i=0
while ! ss -ltn | grep -q ":$mport "; do sleep 0.05; i=\$((i + 1)); [ \$i -gt 100 ] && break; done
INBOX_LOG_LEVEL=debug "$BIN" run "$4" --connect-timeout 3 --metrics 127.0.0.1:9464 >"$dir/out/$1.out" 2>&1 &
p=\$!
end=\$((\$(date +%s) + $2))
while kill -0 \$p 2>/dev/null && [ \$(date +%s) -lt \$end ]; do
	curl -s -m 1 http://127.0.0.1:9464/metrics >"$dir/out/$1.metrics.new" 2>/dev/null &&
		[ -s "$dir/out/$1.metrics.new" ] && mv "$dir/out/$1.metrics.new" "$dir/out/$1.metrics"
	n=\$(sqlite3 "$dir/data/$1.db" "SELECT count(*) FROM ${tag}orders" 2>/dev/null)
	[ "\${n:-0}" -ge $3 ] && break
	sleep 0.2
done
curl -s -m 1 http://127.0.0.1:9464/metrics >"$dir/out/$1.metrics.new" 2>/dev/null &&
	[ -s "$dir/out/$1.metrics.new" ] && mv "$dir/out/$1.metrics.new" "$dir/out/$1.metrics"
rm -f "$dir/out/$1.metrics.new"
kill -TERM \$p 2>/dev/null
wait \$p
echo \$? >"$dir/out/$1.rc"
kill -TERM \$s \$s6 2>/dev/null
wait \$s \$s6 2>/dev/null
NS
	$NETNS sh "$dir/cfg/$1.ns.sh" </dev/null >/dev/null 2>&1 9>&-
}

# kconfig NAME PARAMS: a consumer of the orders topic with PARAMS.
kconfig() {
	config "$dir/cfg/$1.yaml" "sqlite:$dir/data/$1.db" \
		"kafka://localhost:$mport/orders?group=g$$$1&offset_reset=earliest&rdkafka.session.timeout.ms=6000&$2"
	"$BIN" migrate "$dir/cfg/$1.yaml" >"$dir/out/$1-migrate.out" 2>&1 ||
		fail "$1: migrate" "$(tail -2 "$dir/out/$1-migrate.out")"
}
rows() { sq "$dir/data/$1.db" "SELECT count(*) FROM ${tag}orders"; }
relay_says() { grep -c -F -- "$1" "$dir/out/relay.err"; }

sasl="rdkafka.sasl.mechanism=PLAIN&rdkafka.sasl.username=inbox"
kconfig plain "rdkafka.security.protocol=SASL_PLAINTEXT&$sasl&rdkafka.sasl.password=$SASLPASS_ENC"
in_sasl_ns plain 40 5 "$dir/cfg/plain.yaml" TCP-LISTEN
expect_eq "SASL_PLAINTEXT: the daemon consumed the 5 orders" "$(rows plain)" 5
expect_eq "SASL_PLAINTEXT: it stops cleanly (SIGTERM)" "$(cat "$dir/out/plain.rc")" 0
check "SASL_PLAINTEXT: the relay checked the password (auth ok user=inbox)" \
	test "$(relay_says "auth ok user=inbox mechanism=PLAIN")" -ge 1
check "SASL_PLAINTEXT: its start line masks the password" \
	grep -q '"event":"start".*rdkafka.sasl.password=\*\*\*' "$dir/out/plain.out"
check "SASL_PLAINTEXT: /metrics was scraped" test -s "$dir/out/plain.metrics"

ok_before=$(relay_says "auth ok")
kconfig ssl "rdkafka.security.protocol=SASL_SSL&$sasl&rdkafka.sasl.password=$SASLPASS_ENC&rdkafka.ssl.ca.location=$PKI/ca.pem"
in_sasl_ns ssl 40 5 "$dir/cfg/ssl.yaml" \
	"OPENSSL-LISTEN" "cert=$PKI/server.pem,key=$PKI/server.key,verify=0"
expect_eq "SASL_SSL: the daemon consumed the 5 orders over TLS" "$(rows ssl)" 5
expect_eq "SASL_SSL: it stops cleanly (SIGTERM)" "$(cat "$dir/out/ssl.rc")" 0
check "SASL_SSL: the relay checked the password again" \
	test "$(relay_says "auth ok")" -gt "$ok_before"

kconfig wrong "rdkafka.security.protocol=SASL_PLAINTEXT&$sasl&rdkafka.sasl.password=$WRONGPASS_ENC&open_timeout_ms=1000"
in_sasl_ns wrong 20 1 "$dir/cfg/wrong.yaml" TCP-LISTEN
expect_eq "wrong password: nothing consumed" "$(rows wrong)" 0
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
kconfig scram "rdkafka.security.protocol=SASL_PLAINTEXT&$scram&rdkafka.sasl.password=$SASLPASS_ENC"
in_sasl_ns scram 40 5 "$dir/cfg/scram.yaml" TCP-LISTEN
expect_eq "SCRAM-SHA-256: the daemon consumed the 5 orders" "$(rows scram)" 5
expect_eq "SCRAM-SHA-256: it stops cleanly (SIGTERM)" "$(cat "$dir/out/scram.rc")" 0
check "SCRAM-SHA-256: the relay checked the proof (auth ok)" \
	test "$(relay_says "auth ok user=inbox mechanism=SCRAM-SHA-256")" -ge 1
kconfig scram-wrong "rdkafka.security.protocol=SASL_PLAINTEXT&$scram&rdkafka.sasl.password=$WRONGPASS_ENC&open_timeout_ms=1000"
in_sasl_ns scram-wrong 20 1 "$dir/cfg/scram-wrong.yaml" TCP-LISTEN
expect_eq "SCRAM-SHA-256, wrong password: nothing consumed" "$(rows scram-wrong)" 0
check "SCRAM-SHA-256, wrong password: refused by the relay" \
	test "$(relay_says "auth failed user=inbox mechanism=SCRAM-SHA-256")" -ge 1
expect_eq "SCRAM-SHA-256, wrong password: exit 4" "$(cat "$dir/out/scram-wrong.rc")" 4
says scram-wrong "SASL authentication error"
no_secret "kafka SASL: every output, log, error and metric" "$dir"/out/*
summary
