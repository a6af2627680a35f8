# Helpers shared by the RabbitMQ daemon tests (sourced). Each test prints
# one line per check and ends with "N passed, N failed"; exit 0 only if
# all passed, 77 when skipped (PostgreSQL not configured).
#   BIN = the inbox binary, PUB = amqp-publish, set by the test.
passed=0
failed=0
pids=""
queues=""

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

# Kill the daemons still running and delete the test's queues.
cleanup() {
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	if [ -n "$queues" ] && [ -n "${AMQP:-}" ]; then
		# shellcheck disable=SC2086
		"$PUB" "$AMQP" delete $queues >/dev/null 2>&1
	fi
	[ -n "${extra_cleanup:-}" ] && eval "$extra_cleanup"
	return 0
}

summary() {
	# Stop what runs (a private broker too) before its files go.
	cleanup
	trap - EXIT
	echo "$passed passed, $failed failed"
	if [ "$failed" -eq 0 ]; then
		[ -n "${dir:-}" ] && [ -z "${KEEP:-}" ] && rm -rf "$dir"
		exit 0
	fi
	[ -n "${dir:-}" ] && echo "files kept in $dir"
	exit 1
}

# The shared broker started by the suite; a test that cannot run without
# it fails (the suite always starts it).
need_amqp() {
	if [ -z "${INBOX_TEST_AMQP_URL:-}" ]; then
		echo "FAIL INBOX_TEST_AMQP_URL is not set: run the suite through" \
			"tests/run-suite.sh (it starts RabbitMQ via" \
			"tests/servers/rabbitmq.sh)"
		echo "0 passed, 1 failed"
		exit 1
	fi
	AMQP=$INBOX_TEST_AMQP_URL
}

need_pg() {
	if [ -z "${INBOX_TEST_PG_URL:-}" ]; then
		echo "skip: INBOX_TEST_PG_URL is not set"
		exit 77
	fi
}

mktmp() {
	if [ -n "${INBOX_TEST_TMP:-}" ] && [ -d "$INBOX_TEST_TMP" ]; then
		mktemp -d "$INBOX_TEST_TMP/amqp.XXXXXX"
	else
		mktemp -d "${TMPDIR:-/tmp}/inbox-amqp.XXXXXX"
	fi
}

# new_queue NAME: a queue name unique to this run, deleted at exit (with
# its retry queue).
new_queue() {
	q="inbox-it-$$-$1"
	queues="$queues $q $q.retry"
	echo "$q"
}

rand_between() {
	r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
	echo $(($1 + r % ($2 - $1 + 1)))
}

sleep_ms() {
	sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"
}

# ready QUEUE: messages ready in the queue (not delivered, or requeued).
ready() {
	"$PUB" "$AMQP" count "$1" 2>/dev/null | cut -d' ' -f1
}

# gen_orders FILE ORDERS DUPS [FIRST]: ORDERS order-created events (orderId
# ord-FIRST.., default 1) plus DUPS exact copies of earlier ones (producer
# retries and redeliveries), interleaved.
gen_orders() {
	awk -v n="$2" -v dups="$3" -v first="${4:-1}" '
	function line(o) {
		return sprintf("{\"id\":\"m-%06d\",\"type\":\"order.created\",\"data\":{\"orderId\":\"ord-%06d\",\"customer\":\"c%d\",\"totalCents\":%d}}", o, o, o % 97, 100 + (o * 7919) % 90000)
	}
	BEGIN {
		srand(7)
		for (i = 0; i < n; i++) {
			l = line(first + i)
			print l
			hist[i] = l
			if (dups > 0 && rand() < dups / n) { print hist[int(rand() * (i + 1))]; dups-- }
		}
		for (; dups > 0; dups--) print hist[int(rand() * n)]
	}' >"$1"
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

# wait_until SECONDS COMMAND...: poll every 200 ms until it succeeds.
wait_until() {
	end=$(($(date +%s) + $1))
	shift
	while ! "$@"; do
		[ "$(date +%s)" -ge "$end" ] && return 1
		sleep 0.2
	done
	return 0
}

# start_daemon CONFIG LOG: start `inbox run` in the background; $! in
# $daemon.
start_daemon() {
	"$BIN" run "$1" 2>>"$2" &
	daemon=$!
	pids="$pids $daemon"
}

# stop_daemon PID: SIGTERM (drain) and wait; the exit status in $st (not
# in a $(...) subshell: it could not wait for the daemon).
stop_daemon() {
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	st=$?
}

# clean_logs NAME LOG...: no error line and no sanitizer report.
clean_logs() {
	n=$1
	shift
	if grep -q '"level":"error"' "$@" ||
		grep -Eq 'Sanitizer|runtime error:' "$@"; then
		fail "$n" "$(grep -Eh '"level":"error"|Sanitizer|runtime error:' "$@" | head -5)"
	else
		ok "$n"
	fi
}
