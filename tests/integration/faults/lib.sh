# Helpers of the fault tests (sourced; ../common.sh has the checks, the
# closing line and what every group shares): infrastructure faults —
# a PostgreSQL restarted in its own PID namespace, a frozen daemon, a
# dependency down at start — must never be a message's fault.
group=faults
. "$(dirname "$0")/../common.sh"

# fault_port OFFSET: a port of our own for a server a test starts and
# restarts: INBOX_TEST_PORT_BASE + OFFSET (the suite's base is a multiple
# of 10; +0..+4 are its servers). The offsets of this group:
#   +5  pg_pidns.sh: PostgreSQL in a PID namespace
#   +6  start_waiting.sh: PostgreSQL, down at start
#   +7  start_waiting.sh: Redis, down at start
#   +8  dispatch_waiting.sh: PostgreSQL, down at start
#   +9  pg_silent.sh: PostgreSQL in the test's own network namespace
# Without a base (a test run by hand), a random one.
fault_port() {
	_b=${INBOX_TEST_PORT_BASE:-$((20000 + $(rand_between 0 899) * 10))}
	echo $((_b + $1))
}

# psql_at URL SQL: one value (or rows, | separated).
psql_at() {
	psql "$1" -X -q -tA -v ON_ERROR_STOP=1 -c "$2"
}

# fx_config FILE STORE SOURCE TABLE [EXTRA]: one consumer whose effect
# inserts the order into TABLE (no unique constraint: a double effect
# shows as two rows); EXTRA lines are added to the consumer.
fx_config() {
	cat >"$1" <<CFG
store: $2
consumers:
  - name: faults.test
    source: $3
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: 20
    max_attempts: 3
    retry_delay: 50ms
    poll_timeout: 50ms
${5:-}
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
