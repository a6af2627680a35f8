# Helpers of the daemon tests (sourced; ../common.sh has the checks, the
# closing line and what every group shares): the consumer's config and
# what a JSONL file of orders holds.
group=daemon
. "${INBOX_IT_DIR:-$(dirname "$0")/..}/common.sh"

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
