# Helpers of the Kafka daemon tests (sourced; ../common.sh has the checks,
# the closing line, the daemons in the background and what every group
# shares). Each test starts its own Kafka cluster — librdkafka's mock
# cluster in tests/tools/kafka-mock, on random loopback ports — and its
# own `inbox run` daemons, and stops all of them by PID whatever happens.
#
# Kafka topics never end, so the daemons run without --once: a test waits
# until the effect table holds what it expects (under a deadline), lets the
# stream go quiet, then stops the daemons with SIGTERM (drain, exit 0).
#
# The mock cluster's group coordinator is slow on purpose: a group's first
# join waits ~3 s; a member that dies without leaving (SIGKILL) holds its
# partitions until session.timeout.ms; a rebalance waits for every member
# to rejoin. GROUP_OPTS keeps those short.
group=kafka
. "${INBOX_IT_DIR:-$(dirname "$0")/..}/common.sh"
mock_pid=""
exit_trap=cleanup

SESSION_MS=${SESSION_MS:-6000}
GROUP_OPTS="rdkafka.session.timeout.ms=$SESSION_MS&rdkafka.heartbeat.interval.ms=300&rdkafka.log_level=3"

# cleanup: the tests' EXIT trap: stop what this test started: the daemons
# still running (by PID), then the mock cluster (SIGTERM by PID; it also
# exits when fd 9, the write end of its stdin, closes); then run the
# test's $cleanup_extra.
cleanup() {
	stop_daemons
	if [ -n "$mock_pid" ]; then
		kill -TERM "$mock_pid" 2>/dev/null
		wait "$mock_pid" 2>/dev/null
		mock_pid=""
	fi
	exec 9>&-
	[ -n "${cleanup_extra:-}" ] && eval "$cleanup_extra"
	return 0
}

# start_mock TOPIC:PARTITIONS...: a mock cluster of 3 brokers of our own
# in the background; sets BOOT (host:port,...) and mock_pid. Its stdin is
# a FIFO whose write end this shell holds as fd 9 (children get it
# closed): if the test dies, the cluster goes with it.
start_mock() {
	rm -f "$dir/mock.in"
	mkfifo "$dir/mock.in" || bail "mkfifo"
	"$MOCK" --stdin-lifetime "$@" <"$dir/mock.in" >"$dir/mock.out" \
		2>"$dir/mock.err" &
	mock_pid=$!
	exec 9>"$dir/mock.in"
	_end=$(($(date +%s) + 15))
	BOOT=""
	while [ -z "$BOOT" ] && [ "$(date +%s)" -lt "$_end" ]; do
		BOOT=$(sed -n 's/^bootstrap=//p' "$dir/mock.out")
		[ -n "$BOOT" ] || sleep 0.05
	done
	[ -n "$BOOT" ] || bail "kafka-mock printed no bootstrap line: $(cat "$dir/mock.err")"
}

# produce TOPIC FILE [kafka-produce options]: lines "KEY<TAB>ID<TAB>PAYLOAD"
# (the id goes to the message-id header); fails the test if not delivered.
produce() {
	_t=$1
	_f=$2
	shift 2
	"$PRODUCE" -q -K -i "$@" "$BOOT" "$_t" "$_f" 9>&- ||
		bail "kafka-produce $_t $_f $* failed"
}

# gen_partitions DIR ORDERS DUPS RETRIES PARTS [FIRST [SEED]]:
# order-created events for orders FIRST..FIRST+ORDERS-1 (default 1), one
# file per partition, DIR/p.N, as "KEY<TAB>ID<TAB>PAYLOAD" lines. Order o goes to
# partition o % PARTS; DUPS exact copies of earlier events (same message
# id, same partition: a redelivery upstream) and RETRIES producer retries
# (a new message id, the same order data, on the next partition — so two
# group members may race for the same business key) are interleaved.
# The payload's top-level "p" is the partition (outside /data, the
# fingerprinted part), the effect stores it.
gen_partitions() {
	mkdir -p "$1" && rm -f "$1"/p.*
	awk -v dir="$1" -v n="$2" -v dups="$3" -v retries="$4" -v parts="$5" \
		-v first="${6:-1}" -v seed="${7:-42}" '
	function emit(id, o, p) {
		printf("%s\t%s\t{\"id\":\"%s\",\"type\":\"order.created\",\"p\":%d,\"data\":{\"orderId\":\"ord-%06d\",\"customer\":\"c%d\",\"totalCents\":%d}}\n", id, id, id, p, o, o % 97, 100 + (o * 7919) % 90000) >> (dir "/p." p)
		hid[nh] = id; ho[nh] = o; hp[nh] = p; nh++
	}
	BEGIN {
		srand(seed)
		nh = 0
		for (i = 0; i < n; i++) {
			o = first + i
			emit(sprintf("m-%06d", o), o, o % parts)
			if (dups > 0 && rand() < dups / n) {
				k = int(rand() * nh); emit(hid[k], ho[k], hp[k]); dups--
			}
			if (retries > 0 && rand() < retries / n) {
				emit(sprintf("m-%06d-retry", o), o, (o + 1) % parts); retries--
			}
		}
		for (; dups > 0; dups--) { k = int(rand() * nh); emit(hid[k], ho[k], hp[k]) }
		for (; retries > 0; retries--) {
			o = first + int(rand() * n)
			emit(sprintf("m-%06d-late", o), o, (o + 1) % parts)
		}
	}'
}

# produce_orders TOPIC DIR: produce DIR/p.N to partition N, for each N.
produce_orders() {
	for _f in "$2"/p.*; do
		produce "$1" "$_f" -p "${_f##*.}"
	done
}

# write_config FILE STORE_URL SOURCE_URL TABLE PREFIX BATCH WHO [SLOW]:
# one consumer billing orders into TABLE (no unique constraint: a double
# effect shows as two rows). Each row records WHO applied it (a constant
# per daemon run), the partition it came from and, in seq, the order in
# which rows were inserted. SLOW adds an effect step
# that makes each message cost about a millisecond inside the transaction
# (so a SIGKILL most likely lands with a batch in hand): "pg" or "sqlite".
write_config() {
	case "${8:-}" in
	pg) _slow="
      - sql: SELECT pg_sleep(0.001)" ;;
	sqlite) _slow="
      - sql: |
          SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1
            UNION ALL SELECT x + 1 FROM c WHERE x < 5000) SELECT x FROM c)" ;;
	*) _slow="" ;;
	esac
	# The application order: PostgreSQL's sequence, SQLite's rowid.
	case "$2" in
	postgres*) _seq="seq BIGSERIAL," ;;
	*) _seq="seq INTEGER PRIMARY KEY," ;;
	esac
	cat >"$1" <<CFG
store: $2
table_prefix: "$5"
consumers:
  - name: billing.kafka
    source: "$3"
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: $6
    retry_delay: 50ms
    poll_timeout: 100ms
    max_attempts: 5
    setup: |
      CREATE TABLE IF NOT EXISTS $4 (
        $_seq
        order_id    TEXT    NOT NULL,
        customer    TEXT    NOT NULL,
        total_cents INTEGER NOT NULL,
        part        INTEGER NOT NULL,
        who         TEXT    NOT NULL
      );
    effect:
      - sql: |
          INSERT INTO $4 (order_id, customer, total_cents, part, who)
          VALUES (\$1, \$2, \$3, \$4, '$7')
        params: [/data/orderId, /data/customer, /data/totalCents, /p]$_slow
CFG
}

# wait_batches LOG N SECONDS: until LOG has N batch lines; 0 if it did.
wait_batches() {
	_end=$(($(date +%s) + $3))
	# (a LOG not created yet counts 0: `[ "" -lt N ]` is an error, false,
	# and would end the wait as if the batches were there)
	while :; do
		_n=$(grep -c '"event":"batch"' "$1" 2>/dev/null)
		[ "${_n:-0}" -ge "$2" ] && return 0
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.02
	done
}
