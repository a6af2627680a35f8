# Helpers of the concurrent-dispatcher tests (sourced after lib.sh): a
# consumer with one idempotent payment step, the provider's request log.

# pay_config FILE STORE SOURCE PREFIX DISPATCH [PROVIDERS_YAML]: orders
# -> one charge each (idempotent) at the test provider; DISPATCH is the
# dispatch: mapping; PROVIDERS_YAML (optional) the body of a top-level
# providers: list.
pay_config() {
	{
		cat <<CFG
store: $2
table_prefix: "$4"
consumers:
  - name: billing.order-confirmed.v1
    source: $3
    key: "order-confirmed:{/data/orderId}"
    batch_size: 100
    outbox:
      - step: charge
        url: http://127.0.0.1:$PROV_PORT/pay
        body: {orderId: /data/orderId, amount: /data/totalCents, currency: "=EUR"}
        idempotent: true
    dispatch: $5
CFG
		if [ -n "${6:-}" ]; then
			echo "providers:"
			printf '%s\n' "$6"
		fi
	} >"$1"
}

# plog FILE: the provider's request log (GET /log) into FILE.
plog() {
	curl -s "http://127.0.0.1:$PROV_PORT/log" >"$1"
}

# pclear: drop the provider's queued faults.
pclear() {
	curl -s -X POST "http://127.0.0.1:$PROV_PORT/control/faults-clear" >/dev/null
}

# pfault_ra PATH KIND COUNT RETRY_AFTER: like pfault, with a Retry-After
# (N seconds, or date:N).
pfault_ra() {
	curl -s -X POST \
		"http://127.0.0.1:$PROV_PORT/control/fault?path=$1&kind=$2&count=$3&retry_after=$4" \
		>/dev/null
}
