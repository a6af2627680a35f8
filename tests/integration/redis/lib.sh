# Helpers of the Redis daemon tests (sourced; ../common.sh has the checks,
# the closing line and what every group shares).
#
# How the daemon stops: Redis streams never end, so the tests give the
# source drain=1 and run `inbox run CONFIG --once`: poll reports the end
# once the group is drained (no new entry, nothing pending in the whole
# group, no retry waiting), and the daemon exits 0.
group=redis
. "${INBOX_IT_DIR:-$(dirname "$0")/..}/common.sh"

need_redis() {
	need_suite_server INBOX_TEST_REDIS_URL redis-server redis.sh
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

# produce URL STREAM ORDERS DUPS RETRIES: order_stream's events as stream
# entries (field "payload"), through one redis-cli session.
produce() {
	order_stream "$3" "$4" "$5" |
		awk -v s="$2" '{ printf("XADD %s * payload '\''%s'\''\n", s, $0) }' |
		redis-cli -u "$1" >/dev/null
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

# run_until_drained BIN CONFIG LOG SECONDS: `inbox run --once` under a
# deadline; returns its exit status (137 when the deadline killed it).
run_until_drained() {
	timeout -s KILL "$4" "$1" run "$2" --once 2>>"$3"
}
