# Helpers for the NATS daemon tests (sourced). Each test starts its own
# nats-server -js (tests/servers/nats.sh) on a free loopback port in its
# own temp dir, so restarting or killing it disturbs no other test; prints
# one line per check and ends with "N passed, N failed"; exit 0 only if
# all passed, 77 when skipped.
passed=0
failed=0
here=$(cd "$(dirname "$0")" && pwd)
servers=$(cd "$here/../../servers" && pwd)
daemons=""

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

# Stop what this test started (daemons still running, by PID; then the
# server).
cleanup() {
	for p in $daemons; do kill -KILL "$p" 2>/dev/null; done
	daemons=""
	[ -n "${dir:-}" ] && sh "$servers/nats.sh" stop "$dir/nats" \
		>/dev/null 2>&1
	[ -n "${cleanup_extra:-}" ] && eval "$cleanup_extra"
	return 0
}

summary() {
	echo "$passed passed, $failed failed"
	cleanup
	trap - EXIT
	if [ "$failed" -eq 0 ]; then
		[ -n "${dir:-}" ] && [ -z "${KEEP:-}" ] && rm -rf "$dir"
		exit 0
	fi
	[ -n "${dir:-}" ] && echo "files kept in $dir"
	exit 1
}

need_nats_server() {
	if ! command -v nats-server >/dev/null 2>&1; then
		echo "skip: nats-server is not installed"
		exit 77
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
		mktemp -d "$INBOX_TEST_TMP/nats.XXXXXX"
	else
		mktemp -d "${TMPDIR:-/tmp}/inbox-nats.XXXXXX"
	fi
}

rand_between() {
	r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
	echo $(($1 + r % ($2 - $1 + 1)))
}

sleep_ms() {
	sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"
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

# pgq SQL: one value (or rows, | separated) from PostgreSQL.
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

# gen_orders FILE ORDERS DUPS RETRIES [FIRST]: ORDERS order-created events
# (orderId ord-FIRST..) plus DUPS exact copies of earlier ones (a
# redelivery upstream) and RETRIES producer retries (a new message id, the
# same order), interleaved. About 10% duplicates with DUPS + RETRIES =
# ORDERS / 10.
gen_orders() {
	awk -v n="$2" -v dups="$3" -v retries="$4" -v first="${5:-1}" '
	function line(id, o) {
		return sprintf("{\"id\":\"%s\",\"type\":\"order.created\",\"data\":{\"orderId\":\"ord-%06d\",\"customer\":\"c%d\",\"totalCents\":%d}}", id, o, o % 97, 100 + (o * 7919) % 90000)
	}
	BEGIN {
		srand(7)
		for (i = 0; i < n; i++) {
			o = first + i
			l = line(sprintf("m-%06d", o), o)
			print l
			hist[i] = l
			if (dups > 0 && rand() < dups / n) { print hist[int(rand() * (i + 1))]; dups-- }
			if (retries > 0 && rand() < retries / n) { print line(sprintf("m-%06d-retry", o), o); retries-- }
		}
		for (; dups > 0; dups--) print hist[int(rand() * n)]
		for (; retries > 0; retries--) { o = first + int(rand() * n); print line(sprintf("m-%06d-late", o), o) }
	}' >"$1"
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

# start_daemon LOG: "inbox run" in the background; sets $pid.
start_daemon() {
	"$BIN" run "$dir/inbox.yaml" 2>>"$1" &
	pid=$!
	daemons="$daemons $pid"
}

# forget_daemon PID: it was waited for; never signal that PID again (it
# may belong to another process by now).
forget_daemon() {
	daemons=$(echo "$daemons" | tr ' ' '\n' | grep -vx "$1" | tr '\n' ' ')
}

# stop_daemon PID: SIGTERM (drain), wait; the exit status in $rc.
stop_daemon() {
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	rc=$?
	forget_daemon "$1"
}

# dups_logged LOG: duplicates the daemons reported in their batch lines.
dups_logged() {
	grep -o '"duplicate":[0-9]*' "$1" | awk -F: '{ s += $2 } END { print s + 0 }'
}

# Is one of the daemons still running (not exited, not a zombie)?
daemon_alive() {
	for p in $daemons; do
		if [ -r "/proc/$p/stat" ] &&
			! grep -q '^[0-9]* ([^)]*) Z' "/proc/$p/stat"; then
			return 0
		fi
	done
	return 1
}

# wait_count WANT SECONDS: until count_rows (defined by the test) reaches
# WANT, or no daemon runs any more; prints the last count.
wait_count() {
	end=$(($(date +%s) + $2))
	while :; do
		c=$(count_rows 2>/dev/null)
		[ -n "$c" ] || c=0
		if [ "$c" -ge "$1" ] || [ "$(date +%s)" -ge "$end" ] ||
			! daemon_alive; then
			echo "$c"
			return
		fi
		sleep 0.1
	done
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
