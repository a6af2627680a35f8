# Helpers shared by the daemon tests (sourced). Each test prints one line
# per check and ends with "N passed, N failed"; exit 0 only if all passed,
# 77 when skipped (a server it needs is not configured).
passed=0
failed=0

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

# check NAME COMMAND...: the command's status decides.
check() {
	name=$1
	shift
	if "$@"; then ok "$name"; else fail "$name"; fi
}

# expect_eq NAME GOT WANT
expect_eq() {
	if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$2', want '$3'"; fi
}

summary() {
	echo "$passed passed, $failed failed"
	if [ "$failed" -eq 0 ]; then
		# KEEP=1 keeps the files of a passing run too
		[ -n "${dir:-}" ] && [ -z "${KEEP:-}" ] && rm -rf "$dir"
		exit 0
	fi
	[ -n "${dir:-}" ] && echo "files kept in $dir"
	exit 1
}

need_pg() {
	if [ -z "${INBOX_TEST_PG_URL:-}" ]; then
		echo "skip: INBOX_TEST_PG_URL is not set"
		exit 77
	fi
}

mktmp() {
	if [ -n "${INBOX_TEST_TMP:-}" ] && [ -d "$INBOX_TEST_TMP" ]; then
		mktemp -d "$INBOX_TEST_TMP/daemon.XXXXXX"
	else
		mktemp -d "${TMPDIR:-/tmp}/inbox-daemon.XXXXXX"
	fi
}

# q SQL: one value (or rows, | separated) from PostgreSQL.
pgq() {
	psql "$INBOX_TEST_PG_URL" -X -q -tA -v ON_ERROR_STOP=1 -c "$1"
}

# Drop every table whose name starts with PREFIX (PostgreSQL).
pg_drop_prefix() {
	tables=$(pgq "SELECT string_agg(quote_ident(tablename), ',') FROM pg_tables
	              WHERE schemaname = current_schema()
	              AND starts_with(tablename, '$1')")
	[ -n "$tables" ] && pgq "DROP TABLE IF EXISTS $tables" >/dev/null
	return 0
}

# A random integer in [LO, HI].
rand_between() {
	r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
	echo $(($1 + r % ($2 - $1 + 1)))
}

# sleep_ms MS
sleep_ms() {
	sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"
}

now_ms() {
	date +%s%3N
}

# gen_orders FILE ORDERS DUPS RETRIES [FIRST]: ORDERS order-created events
# (orderId ord-FIRST.., default 1) plus DUPS exact copies of earlier lines
# (redeliveries) and RETRIES producer retries (a new message id, the same
# order data), interleaved.
gen_orders() {
	awk -v n="$2" -v dups="$3" -v retries="$4" -v first="${5:-1}" '
	function line(id, o) {
		return sprintf("{\"id\":\"%s\",\"type\":\"order.created\",\"data\":{\"orderId\":\"ord-%06d\",\"customer\":\"c%d\",\"totalCents\":%d}}", id, o, o % 97, 100 + (o * 7919) % 90000)
	}
	BEGIN {
		srand(42)
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

# write_config FILE STORE_URL SOURCE_URL TABLE PREFIX BATCH PAUSE [NAME]:
# one consumer billing orders into TABLE (no unique constraint: a double
# effect would show as two rows).
write_config() {
	cat >"$1" <<CFG
store: $2
table_prefix: "$5"
consumers:
  - name: ${8:-billing.test}
    source: $3
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: $6
    batch_pause: $7
    retry_delay: 50ms
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

# distinct_orders FILE [LINES]: distinct orderIds in the first LINES lines.
distinct_orders() {
	if [ -n "${2:-}" ]; then head -n "$2" "$1"; else cat "$1"; fi |
		grep -o '"orderId":"[^"]*"' | sort -u | wc -l | tr -d ' '
}
