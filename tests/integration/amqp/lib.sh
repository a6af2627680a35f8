# Helpers of the RabbitMQ daemon tests (sourced; ../common.sh has the
# checks, the closing line, the daemons in the background and what every
# group shares).
#   BIN = the inbox binary, PUB = amqp-publish, set by the test.
group=amqp
. "${INBOX_IT_DIR:-$(dirname "$0")/..}/common.sh"
queues=""
orders_seed=7
exit_trap=cleanup

# cleanup: the tests' EXIT trap: kill the daemons still running (by PID),
# delete the test's queues, then run the test's $cleanup_extra.
cleanup() {
	stop_daemons
	if [ -n "$queues" ] && [ -n "${AMQP:-}" ]; then
		# shellcheck disable=SC2086
		"$PUB" "$AMQP" delete $queues >/dev/null 2>&1
	fi
	[ -n "${cleanup_extra:-}" ] && eval "$cleanup_extra"
	return 0
}

# The shared broker started by the suite; a test that cannot run without
# it fails (the suite always starts it).
need_amqp() {
	need_suite_server INBOX_TEST_AMQP_URL RabbitMQ rabbitmq.sh
	AMQP=$INBOX_TEST_AMQP_URL
}

# new_queue NAME: a queue name unique to this run, deleted at exit (with
# its retry queue).
new_queue() {
	q="inbox-it-$$-$1"
	queues="$queues $q $q.retry"
	echo "$q"
}

# ready QUEUE: messages ready in the queue (not delivered, or requeued).
ready() {
	"$PUB" "$AMQP" count "$1" 2>/dev/null | cut -d' ' -f1
}

# write_config FILE STORE_URL SOURCE_URL TABLE PREFIX BATCH PAUSE: one
# consumer billing orders into TABLE, which has no unique constraint (a
# double effect shows as two rows) and refuses negative totals (a poison
# message the effect rejects).
write_config() {
	cat >"$1" <<CFG
store: "$2"
table_prefix: "$5"
consumers:
  - name: billing.amqp
    source: "$3"
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: $6
    batch_pause: $7
    retry_delay: 200ms
    max_attempts: 3
    setup: |
      CREATE TABLE IF NOT EXISTS $4 (
        order_id    TEXT    NOT NULL,
        customer    TEXT    NOT NULL,
        total_cents INTEGER NOT NULL CHECK (total_cents >= 0)
      );
    effect:
      - sql: |
          INSERT INTO $4 (order_id, customer, total_cents)
          VALUES (\$1, \$2, \$3)
        params: [/data/orderId, /data/customer, /data/totalCents]
CFG
}
