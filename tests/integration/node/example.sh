#!/bin/sh
# example.sh BUILD_DIR SOURCE_DIR NAME
# bindings/node/examples/NAME against the suite's servers: the binding
# installed from its tarball (lib.sh), the example's client (amqplib,
# kafkajs) from npm's cache as its package-lock.json pins it (put there by
# scripts/install-deps.sh: the test never reaches the network), then
# the example's node --test file. The Kafka example starts its own mock
# cluster (tests/tools/kafka-mock, $KAFKA_MOCK).
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
name=$3
. "$(dirname "$0")/lib.sh"
[ -n "${INBOX_TEST_PG_URL:-}" ] || bail "INBOX_TEST_PG_URL not set (run through tests/run-suite.sh)"
case $name in
amqp-billing) [ -n "${INBOX_TEST_AMQP_URL:-}" ] || bail "INBOX_TEST_AMQP_URL not set (run through tests/run-suite.sh)" ;;
kafka-billing) export KAFKA_MOCK="$build/tests/tools/kafka-mock"
	[ -x "$KAFKA_MOCK" ] || bail "$KAFKA_MOCK missing" ;;
esac
tmp=$(mktemp -d /tmp/inbox-node-ex.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
install_binding "$build" "$src" "$tmp"
cp -R "$src/bindings/node/examples/$name" "$tmp/example"
rm -rf "$tmp/example/node_modules"
(cd "$tmp/example" && npm ci --offline --no-audit --no-fund --loglevel=error >"$tmp/npm-ex.log" 2>&1) ||
	{ cat "$tmp/npm-ex.log"; bail "npm ci --offline of the example failed (its packages are fetched by scripts/install-deps.sh: run make deps as root)"; }
cd "$tmp/example"
LIBINBOX_MODULE="$mod" node --test --test-reporter=spec example.test.js
