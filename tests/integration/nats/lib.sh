# Helpers of the NATS daemon tests (sourced; ../common.sh has the checks,
# the closing line, the daemons in the background and what every group
# shares). Each test starts its own nats-server -js (tests/servers/
# nats.sh) on a free loopback port in its own temp dir, so restarting or
# killing it disturbs no other test.
group=nats
. "${INBOX_IT_DIR:-$(dirname "$0")/..}/common.sh"
orders_seed=7
exit_trap=cleanup

# cleanup: the tests' EXIT trap: stop what this test started (the
# daemons still running, by PID; then the server), then run the test's
# $cleanup_extra.
cleanup() {
	stop_daemons
	[ -n "${dir:-}" ] && sh "$servers/nats.sh" stop "$dir/nats" \
		>/dev/null 2>&1
	[ -n "${cleanup_extra:-}" ] && eval "$cleanup_extra"
	return 0
}

need_nats_server() {
	if ! command -v nats-server >/dev/null 2>&1; then
		echo "skip: nats-server is not installed"
		exit 77
	fi
}

# A loopback port no socket uses, below the usual ephemeral range
# (32768-60999) and the suite's brokers (20000-39999).
free_port() {
	while :; do
		p=$(rand_between 10000 19999)
		if ! ss -tan 2>/dev/null | awk '{ print $4 }' |
			grep -q ":$p\$"; then
			echo "$p"
			return
		fi
	done
}

# start_nats: a private server in $dir/nats; sets NATS_URL. A port taken
# meanwhile by someone else is retried with another.
start_nats() {
	mkdir -p "$dir/nats"
	for try in 1 2 3 4 5; do
		if sh "$servers/nats.sh" start "$dir/nats" "$(free_port)" \
			>"$dir/nats.env" 2>"$dir/nats.err"; then
			. "$dir/nats.env"
			NATS_URL=$INBOX_TEST_NATS_URL
			return
		fi
	done
	echo "cannot start nats-server"
	cat "$dir/nats.err"
	exit 1
}

# write_config FILE STORE_URL SOURCE_URL TABLE PREFIX BATCH PAUSE
#              MAX_ATTEMPTS: one consumer billing orders into TABLE (no
# unique constraint: a double effect shows as two rows).
write_config() {
	cat >"$1" <<CFG
store: $2
table_prefix: "$5"
consumers:
  - name: billing.nats
    source: "$3"
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: $6
    batch_pause: $7
    max_attempts: $8
    retry_delay: 50ms
    poll_timeout: 100ms
    setup: |
      CREATE TABLE IF NOT EXISTS $4 (
        order_id    TEXT    NOT NULL,
        customer    TEXT    NOT NULL,
        total_cents INTEGER NOT NULL
      );
    effect:
      - sql: |
          INSERT INTO $4 (order_id, customer, total_cents)
          VALUES (\$1, \$2, \$3)
        params: [/data/orderId, /data/customer, /data/totalCents]
CFG
}

# wait_settled SECONDS: until the durable has nothing pending and nothing
# unacknowledged; prints its state.
wait_settled() {
	end=$(($(date +%s) + $1))
	while :; do
		st=$("$PUB" info "$NATS_URL" ORDERS billing 2>&1)
		case "$st" in
		*"pending=0 ack_pending=0 "*) echo "$st"; return 0 ;;
		esac
		if [ "$(date +%s)" -ge "$end" ] || ! daemon_alive; then
			echo "$st"
			return 1
		fi
		sleep 0.2
	done
}
