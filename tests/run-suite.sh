#!/bin/sh
# Run the whole test suite: start the servers the tests need (on 127.0.0.1,
# non-default ports, in a temp dir), run ctest in each build dir given,
# stop the servers by PID whatever happens.
set -u
here=$(cd "$(dirname "$0")" && pwd)
builds="$*"
[ -n "$builds" ] || builds=build

tmp=$(mktemp -d /tmp/inbox-test.XXXXXX)
chmod 755 "$tmp"
stop_all() {
	sh "$here/servers/pg.sh" stop "$tmp/pg" >/dev/null 2>&1 || true
	sh "$here/servers/extra.sh" stop "$tmp" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap stop_all EXIT INT TERM

# Ports: a base derived from our PID keeps parallel runs apart; if the
# port is taken, try another base.
tries=0
while :; do
	# 10000-18990 (+ the brokers' offsets) stays below the ephemeral
	# port range (32768-60999), where a client socket could hold it.
	base=$((10000 + (($$ + tries * 7919) % 900) * 10))
	if INBOX_TEST_PG_URL=$(sh "$here/servers/pg.sh" start "$tmp/pg" "$base"); then
		break
	fi
	tries=$((tries + 1))
	if [ $tries -ge 5 ]; then
		echo "run-suite: cannot start PostgreSQL" >&2
		exit 1
	fi
done
export INBOX_TEST_PG_URL
export INBOX_TEST_TMP="$tmp"
export INBOX_TEST_PORT_BASE="$base"
echo "run-suite: PostgreSQL at $INBOX_TEST_PG_URL"
if [ -f "$here/servers/extra.sh" ]; then
	# Brokers (RabbitMQ, Redis, NATS, Kafka mock) export their URLs here.
	sh "$here/servers/extra.sh" start "$tmp" "$base" >"$tmp/servers.sh" || {
		echo "run-suite: cannot start the brokers" >&2
		exit 1
	}
	. "$tmp/servers.sh"
fi

# ThreadSanitizer builds (INBOX_TSAN=ON, make build-tsan) run only the
# tests labelled tsan. Every process writes its reports to $tmp/tsan (so a
# report from a daemon whose stderr a script swallows is seen too); any
# report fails the run. tests/tsan.supp lists the races inside
# third-party libraries we do not own.
export TSAN_OPTIONS="log_path=$tmp/tsan/report suppressions=$here/tsan.supp second_deadlock_stack=1 exitcode=66 ${TSAN_OPTIONS:-}"
mkdir -p "$tmp/tsan"

status=0
for b in $builds; do
	echo "run-suite: ctest in $b"
	label=""
	if grep -q '^INBOX_TSAN:BOOL=ON' "$b/CMakeCache.txt" 2>/dev/null; then
		label="-L tsan"
	fi
	# CTEST_ARGS (e.g. "-R nats", or "-R 'nats|redis'": it is parsed as
	# shell words, so its quotes are honoured) narrows the run while
	# developing.
	# shellcheck disable=SC2086
	if ! (cd "$b" && eval "set -- ${CTEST_ARGS:-}" &&
		ctest --output-on-failure -j2 --timeout 900 $label "$@"); then
		status=1
	fi
done
if ls "$tmp/tsan"/report.* >/dev/null 2>&1; then
	echo "run-suite: ThreadSanitizer reports:"
	cat "$tmp/tsan"/report.*
	status=1
fi
exit $status
