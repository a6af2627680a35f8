# Helpers of the outbox tests (sourced; ../common.sh has the checks, the
# closing line and what every group shares): the test provider, its
# counters, configs with external effects.
group=outbox
. "${INBOX_IT_DIR:-$(dirname "$0")/..}/common.sh"

# start_provider DIR [ARGS...]: start the provider, set PROV_PID and
# PROV_PORT. Stopped by stop_provider (by PID).
start_provider() {
	pdir=$1
	shift
	"$PROV" "$@" >"$pdir/provider.port" 2>>"$pdir/provider.log" &
	PROV_PID=$!
	PROV_PORT=""
	for _ in $(seq 1 100); do
		PROV_PORT=$(sed -n 's/^port=//p' "$pdir/provider.port")
		[ -n "$PROV_PORT" ] && return 0
		sleep 0.05
	done
	echo "cannot start the provider" >&2
	return 1
}

stop_provider() {
	[ -n "${PROV_PID:-}" ] && kill "$PROV_PID" 2>/dev/null
	[ -n "${PROV_PID:-}" ] && wait "$PROV_PID" 2>/dev/null
	PROV_PID=""
}

# pstat JQ_PATH: one counter of the provider ("pay.charges").
pstat() {
	curl -s "http://127.0.0.1:$PROV_PORT/stats" | jq -r ".$1"
}

# pfault PATH KIND COUNT: the next COUNT requests to /PATH get KIND.
pfault() {
	curl -s -X POST \
		"http://127.0.0.1:$PROV_PORT/control/fault?path=$1&kind=$2&count=$3" \
		>/dev/null
}

# orders FILE N [COPIES_MIN COPIES_MAX SEED]: N order-confirmed events,
# each published COPIES_MIN..COPIES_MAX times (exact copies, or producer
# retries with a new message id), shuffled.
orders() {
	awk -v n="$2" -v lo="${3:-1}" -v hi="${4:-1}" -v seed="${5:-42}" '
	function line(id, o) {
		return sprintf("{\"id\":\"%s\",\"type\":\"order.confirmed\",\"data\":{\"orderId\":\"ord-%04d\",\"email\":\"c%d@example.com\",\"totalCents\":%d}}", id, o, o, 100 + (o * 7919) % 90000)
	}
	BEGIN {
		srand(seed)
		for (o = 1; o <= n; o++) {
			k = lo + int(rand() * (hi - lo + 1))
			for (c = 0; c < k; c++) {
				id = sprintf("m-%04d", o)
				if (c > 0 && rand() < 0.3) id = id "-retry" c
				# keep the first copy early-ish, spread the others
				printf "%.6f\t%s\n", (o + (c ? rand() * n : 0)) / n, line(id, o)
			}
		}
	}' | sort -n | cut -f2 >"$1"
}

# outbox_config FILE STORE SOURCE PREFIX [DISPATCH]: the seed's consumer:
# an invoice row (SQL effect, no unique constraint: a double would show),
# a charge through the payment API (idempotent) and a confirmation email
# (no idempotency: reconciled by reference).
outbox_config() {
	dispatch=${5:-}
	[ -n "$dispatch" ] || dispatch="{max_attempts: 10, timeout: 500ms, connect_timeout: 300ms, backoff: 100ms, max_backoff: 500ms, lease: 3s, poll: 50ms}"
	cat >"$1" <<CFG
store: $2
table_prefix: "$4"
consumers:
  - name: billing.order-confirmed.v1
    source: $3
    key: "order-confirmed:{/data/orderId}"
    fingerprint: /data
    batch_size: ${BATCH:-10}
    batch_pause: ${PAUSE:-0ms}
    retry_delay: 50ms
    setup: |
      CREATE TABLE IF NOT EXISTS ${4}invoices (
        order_id    TEXT    NOT NULL,
        total_cents INTEGER NOT NULL
      );
    effect:
      - sql: INSERT INTO ${4}invoices (order_id, total_cents) VALUES (\$1, \$2)
        params: [/data/orderId, /data/totalCents]
    outbox:
      - step: charge
        url: http://127.0.0.1:$PROV_PORT/pay
        body: {orderId: /data/orderId, amount: /data/totalCents, currency: "=EUR"}
        idempotent: true
      - step: email
        url: http://127.0.0.1:$PROV_PORT/email
        body: {to: /data/email, orderId: /data/orderId}
        idempotent: false
        reconcile: {url: "http://127.0.0.1:$PROV_PORT/email?reference={key}"}
    dispatch: $dispatch
CFG
}

# undone CONFIG: outbox rows left to do (pending, in flight, failed,
# unknown).
undone() {
	"$BIN" dispatch "$1" --pending 2>/dev/null | jq -s 'map(.undone) | add'
}
