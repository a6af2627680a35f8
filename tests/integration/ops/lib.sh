# Helpers of the operations tests (sourced; ../common.sh has the checks,
# the closing line and what every group shares): one consumer billing
# orders into ${tag}invoices, whose customer must exist in
# ${tag}customers (a foreign key: an unknown customer is a permanent
# failure, i.e. a dead letter, until the customer is created).
#
# Set before use: KIND (sqlite|pg), dir, tag. ops_setup sets STORE; q runs
# one SQL statement on the store (values | separated).
group=ops
. "${INBOX_IT_DIR:-$(dirname "$0")/..}/common.sh"

ops_setup() {
	case "$KIND" in
	sqlite)
		STORE="sqlite:$dir/inbox.db"
		;;
	pg)
		need_pg
		STORE="$INBOX_TEST_PG_URL"
		;;
	*)
		echo "unknown store kind $KIND"
		exit 2
		;;
	esac
}

q() {
	if [ "$KIND" = sqlite ]; then sq "$dir/inbox.db" "$1"; else pgq "$1"; fi
}

# ops_config FILE SOURCE_URL [NAME] [STORE_URL]
ops_config() {
	cat >"$1" <<CFG
store: ${4:-$STORE}
table_prefix: "$tag"
consumers:
  - name: ${3:-billing.ops}
    source: $2
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: 50
    retry_delay: 50ms
    poll_timeout: 50ms
    setup: |
      CREATE TABLE IF NOT EXISTS ${tag}customers (id TEXT PRIMARY KEY);
      CREATE TABLE IF NOT EXISTS ${tag}invoices (
        order_id    TEXT    NOT NULL,
        customer    TEXT    NOT NULL REFERENCES ${tag}customers (id),
        total_cents INTEGER NOT NULL
      );
    effect:
      - sql: |
          INSERT INTO ${tag}invoices (order_id, customer, total_cents)
          VALUES (\$1, \$2, \$3)
        params: [/data/orderId, /data/customer, /data/totalCents]
CFG
}

# order ID ORDER CUSTOMER TOTAL: one order-created line.
order() {
	printf '{"id":"%s","type":"order.created","data":{"orderId":"%s","customer":"%s","totalCents":%s}}\n' \
		"$1" "$2" "$3" "$4"
}

# Create the tables (migrate runs the setup SQL) and customers c1..c3.
ops_migrate() {
	"$BIN" migrate "$1" >"$dir/migrate.out" 2>&1 || {
		cat "$dir/migrate.out"
		return 1
	}
	q "INSERT INTO ${tag}customers (id) VALUES ('c1'), ('c2'), ('c3')" >/dev/null
}

# ops_start_daemon CONFIG LOG [ARGS...]: inbox run in the background with
# the metrics endpoint on a free port; sets daemon_pid and port.
ops_start_daemon() {
	cfg=$1
	log=$2
	shift 2
	INBOX_LOG_LEVEL=${LOG_LEVEL:-info} "$BIN" run "$cfg" --metrics 127.0.0.1:0 "$@" 2>"$log" &
	daemon_pid=$!
	listening_port "$log" "$daemon_pid"
}

# ops_stop_daemon: SIGTERM the daemon and wait: its exit status in
# daemon_rc (0 after a clean drain; a sanitizer build also fails it on
# leaks).
ops_stop_daemon() {
	daemon_rc=""
	if [ -n "${daemon_pid:-}" ]; then
		kill -TERM "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
		daemon_rc=$?
		daemon_pid=""
	fi
}

# jqok FILTER FILE: the filter holds (quietly).

# Every line of FILE is one JSON object.
all_json_lines() {
	bad=$(jq -R -r '. as $l | try (fromjson | if type == "object" then empty else $l end) catch $l' "$1" | head -3)
	if [ -z "$bad" ]; then return 0; fi
	echo "     not JSON: $bad"
	return 1
}

# Drop the test's tables (PostgreSQL), whatever happened.
ops_cleanup() {
	ops_stop_daemon
	[ "$KIND" = pg ] && pg_drop_prefix "$tag"
	return 0
}
