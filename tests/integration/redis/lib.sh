# Helpers for the Redis daemon tests (sourced). Each test prints one line
# per check and ends with "N passed, N failed"; exit 0 only if all passed,
# 77 when skipped (PostgreSQL not configured for a test that needs it).
#
# How the daemon stops: Redis streams never end, so the tests give the
# source drain=1 and run `inbox run CONFIG --once`: poll reports the end
# once the group is drained (no new entry, nothing pending in the whole
# group, no retry waiting), and the daemon exits 0.
passed=0
failed=0
here=$(cd "$(dirname "$0")" && pwd)
servers="$here/../../servers"

ok() {
	passed=$((passed + 1))
	echo "ok   $1"
}

fail() {
	failed=$((failed + 1))
	echo "FAIL $1"
	shift
	for l in "$@"; do echo "     $l"; done
}

check() {
	name=$1
	shift
	if "$@"; then ok "$name"; else fail "$name"; fi
}

expect_eq() {
	if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$2', want '$3'"; fi
}

summary() {
	echo "$passed passed, $failed failed"
	if [ "$failed" -eq 0 ]; then
		[ -n "${dir:-}" ] && [ -z "${KEEP:-}" ] && rm -rf "$dir"
		exit 0
	fi
	[ -n "${dir:-}" ] && echo "files kept in $dir"
	exit 1
}

need_redis() {
	if [ -z "${INBOX_TEST_REDIS_URL:-}" ]; then
		echo "FAIL INBOX_TEST_REDIS_URL is not set: run the suite through" \
			"tests/run-suite.sh (it starts redis-server via" \
			"tests/servers/redis.sh)"
		echo "0 passed, 1 failed"
		exit 1
	fi
}

need_pg() {
	if [ -z "${INBOX_TEST_PG_URL:-}" ]; then
		echo "skip: INBOX_TEST_PG_URL is not set"
		exit 77
	fi
}

mktmp() {
	if [ -n "${INBOX_TEST_TMP:-}" ] && [ -d "$INBOX_TEST_TMP" ]; then
		mktemp -d "$INBOX_TEST_TMP/redis.XXXXXX"
	else
		mktemp -d "${TMPDIR:-/tmp}/inbox-redis.XXXXXX"
	fi
}

rand_between() {
	r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
	echo $(($1 + r % ($2 - $1 + 1)))
}

sleep_ms() {
	sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"
}

# rcli URL ARGS...: one redis-cli command, raw output.
rcli() {
	u=$1
	shift
	redis-cli -u "$u" --raw "$@"
}

# Pending entries of GROUP on STREAM (the XPENDING summary count).
group_pending() {
	rcli "$1" XPENDING "$2" "$3" | head -1
}

# private_redis DIR: start a redis-server of our own on a free port (for
# tests that restart it); prints its URL.
private_redis() {
	for i in 1 2 3 4 5 6; do
		port=$(rand_between 30000 59000)
		if sh "$servers/redis.sh" start "$1" "$port" >/dev/null; then
			echo "redis://127.0.0.1:$port"
			return 0
		fi
	done
	return 1
}

# produce URL STREAM ORDERS DUPS RETRIES: ORDERS order-created events as
# stream entries (field "payload"), plus DUPS exact copies of earlier ones
# (redeliveries) and RETRIES producer retries (a new message id, the same
# order data), interleaved; through one redis-cli session.
produce() {
	awk -v s="$2" -v n="$3" -v dups="$4" -v retries="$5" '
	function line(id, o) {
		return sprintf("XADD %s * payload '\''{\"id\":\"%s\",\"type\":\"order.created\",\"data\":{\"orderId\":\"ord-%06d\",\"customer\":\"c%d\",\"totalCents\":%d}}'\''", s, id, o, o % 97, 100 + (o * 7919) % 90000)
	}
	BEGIN {
		srand(42)
		for (i = 0; i < n; i++) {
			o = 1 + i
			l = line(sprintf("m-%06d", o), o)
			print l
			hist[i] = l
			if (dups > 0 && rand() < dups / n) { print hist[int(rand() * (i + 1))]; dups-- }
			if (retries > 0 && rand() < retries / n) { print line(sprintf("m-%06d-retry", o), o); retries-- }
		}
		for (; dups > 0; dups--) print hist[int(rand() * n)]
		for (; retries > 0; retries--) { o = 1 + int(rand() * n); print line(sprintf("m-%06d-late", o), o) }
	}' | redis-cli -u "$1" >/dev/null
}

# write_config FILE STORE_URL SOURCE_URL TABLE PREFIX BATCH PAUSE
#              [MAX_ATTEMPTS]: one consumer billing orders into TABLE (no
# unique constraint: a double effect would show as two rows). The amount
# goes through abs(CAST(... AS INTEGER)) so that a total of
# "-9223372036854775808" fails transiently (integer overflow) every time.
write_config() {
	cat >"$1" <<CFG
store: $2
table_prefix: "$5"
consumers:
  - name: billing.redis
    source: $3
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: $6
    batch_pause: $7
    retry_delay: 50ms
    poll_timeout: 100ms
    max_attempts: ${8:-5}
    setup: |
      CREATE TABLE IF NOT EXISTS $4 (
        order_id    TEXT    NOT NULL,
        customer    TEXT    NOT NULL,
        total_cents INTEGER NOT NULL
      );
    effect:
      - sql: |
          INSERT INTO $4 (order_id, customer, total_cents)
          VALUES (\$1, \$2, abs(CAST(\$3 AS INTEGER)))
        params: [/data/orderId, /data/customer, /data/totalCents]
CFG
}

pgq() {
	psql "$INBOX_TEST_PG_URL" -X -q -tA -v ON_ERROR_STOP=1 -c "$1"
}

pg_drop_prefix() {
	tables=$(pgq "SELECT string_agg(quote_ident(tablename), ',') FROM pg_tables
	              WHERE schemaname = current_schema()
	              AND starts_with(tablename, '$1')")
	[ -n "$tables" ] && pgq "DROP TABLE IF EXISTS $tables" >/dev/null
	return 0
}

sq() {
	sqlite3 -cmd ".timeout 5000" "$1" "$2"
}

# run_until_drained BIN CONFIG LOG SECONDS: `inbox run --once` under a
# deadline; returns its exit status (137 when the deadline killed it).
run_until_drained() {
	timeout -s KILL "$4" "$1" run "$2" --once 2>>"$3"
}
