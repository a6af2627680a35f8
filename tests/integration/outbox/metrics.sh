#!/bin/sh
# The dispatchers' counters on /metrics.
#   1. `inbox dispatch --metrics`: three orders (a charge and an email each)
#      with faults queued at the provider — the payment performed then
#      answered after the client's timeout (unknown outcome, retried with
#      the same key), one email performed then dropped (unknown, reconciled:
#      found) and one answered 500 without sending (unknown, reconciled:
#      not found, sent again). promtool accepts the exposition and every
#      counter is what happened, checked against the provider's /stats;
#      only the outbox gauges come with them (no consumer runs there), and
#      the provider's families, labelled with its scheme://host:port.
#   2. `inbox run --dispatch --metrics`: the same counters beside the
#      consumer's, under the same consumer label.
#   metrics.sh INBOX_BIN PROVIDER_BIN sqlite|pg
set -u
BIN=$1
PROV=$2
MODE=$3
. "$(dirname "$0")/lib.sh"
[ "$MODE" = pg ] && need_pg
need_promtool

dir=$(mktmp)
tag="obmet$$_"
bg_pid=""
# start_bg LOG ARGS...: `inbox ARGS...` in the background; waits for its
# metrics_listening line and sets bg_pid and port.
start_bg() {
	log=$1
	shift
	"$BIN" "$@" 2>"$log" &
	bg_pid=$!
	listening_port "$log" "$bg_pid"
}
# stop_bg: SIGTERM, wait; the exit status in bg_rc.
stop_bg() {
	bg_rc=""
	if [ -n "$bg_pid" ]; then
		kill -TERM "$bg_pid" 2>/dev/null
		wait "$bg_pid" 2>/dev/null
		bg_rc=$?
		bg_pid=""
	fi
}

if [ "$MODE" = pg ]; then
	store=$INBOX_TEST_PG_URL
	prefix=$tag
	trap 'stop_bg; stop_provider; pg_drop_prefix "$tag"' EXIT
else
	store="sqlite:$dir/t.db"
	prefix=""
	trap 'stop_bg; stop_provider' EXIT
fi
start_provider "$dir" --slow-ms 1500 --seed 3 || exit 1
orders "$dir/orders.jsonl" 3
outbox_config "$dir/inbox.yaml" "$store" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/orders.checkpoint" "$prefix" ""
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log"
expect_eq "the consumer reads the orders" "$?" 0
expect_eq "six outbox rows to do" "$(undone "$dir/inbox.yaml")" 6

# ---- 1. inbox dispatch --metrics ------------------------------------------

pfault pay timeout 1
pfault email drop 1
pfault email 500 1
m1="$dir/dispatch.metrics"
if ! start_bg "$dir/dispatch.log" dispatch "$dir/inbox.yaml" --metrics 127.0.0.1:0; then
	fail "dispatch --metrics starts" "$(tail -5 "$dir/dispatch.log")"
	summary
fi
ok "dispatch --metrics listens on port $port"
all_done() {
	get /metrics >"$m1"
	[ "$(metric "$m1" inbox_outbox_done_total)" = 6 ]
}
check "the six rows are done (inbox_outbox_done_total)" wait_until 30 all_done
sleep 1.1 # the outbox gauges are re-read at most once a second
get /metrics >"$m1"
expect_eq "GET /metrics: 200" "$http_status" 200
promtool_ok "$m1" dispatch

m() { metric "$m1" "$1"; }
pay_req=$(pstat pay.requests)
email_req=$(pstat email.requests)
lookups=$(pstat email.lookups)
found=$(pstat email.found)
echo "# provider: pay.requests $pay_req, email.requests $email_req, lookups $lookups, found $found"
echo "# /metrics: $(grep '^inbox_outbox_' "$m1" | sed 's/{[^}]*}//' | tr '\n' ' ')"
expect_eq "the provider charged each order once" "$(pstat pay.charges)" 3
expect_eq "the provider emailed each order once" "$(pstat email.sent)" 3
expect_eq "attempts_total = requests the provider saw (pay + email)" \
	"$(m inbox_outbox_attempts_total)" $((pay_req + email_req))
expect_eq "attempts_total: 3 charges + 1 retry, 3 emails + 1 resend" \
	"$(m inbox_outbox_attempts_total)" 8
expect_eq "unknown_outcomes_total (timeout, drop, 500 without idempotency)" \
	"$(m inbox_outbox_unknown_outcomes_total)" 3
expect_eq "retries_total" "$(m inbox_outbox_retries_total)" 3
expect_eq "reconciliations_total = the provider's lookups" \
	"$(m inbox_outbox_reconciliations_total)" "$lookups"
expect_eq "reconciliations_total" "$(m inbox_outbox_reconciliations_total)" 2
expect_eq "reconciled_found_total = lookups that found the email" \
	"$(m inbox_outbox_reconciled_found_total)" "$found"
expect_eq "reconciled_not_found_total" \
	"$(m inbox_outbox_reconciled_not_found_total)" $((lookups - found))
expect_eq "dead_letters_total" "$(m inbox_outbox_dead_letters_total)" 0
expect_eq "lease_takeovers_total" "$(m inbox_outbox_lease_takeovers_total)" 0
expect_eq "fenced_total" "$(m inbox_outbox_fenced_total)" 0
expect_eq "outbox_pending gauge" "$(m inbox_outbox_pending)" 0
expect_eq "no oldest age when nothing is pending" "$(m inbox_outbox_oldest_age_seconds)" ""
expect_eq "store_up" "$(m inbox_store_up)" 1
expect_eq "no consumer counters (no consumer runs here)" "$(m inbox_messages_total)" ""
expect_eq "no inbox gauges (inbox run shows them)" "$(m inbox_records)" ""
expect_eq "no consumer_up" "$(m inbox_consumer_up)" ""
n=$(grep -c '^# TYPE inbox_outbox_.*_total counter$' "$m1")
expect_eq "ten outbox counter families" "$n" 10
labels=$(grep -v '^#' "$m1" | grep -o '{[^}]*}' | sed 's/^{version="[^"]*"}$/{version}/; s/,le="[^"]*"//' | sort -u | tr '\n' ' ')
expect_eq "labels: only the consumer name (and version, the provider)" "$labels" \
	"{consumer=\"billing.order-confirmed.v1\"} {provider=\"http://127.0.0.1:$PROV_PORT\"} {version} "

# The call duration histogram: one observation per HTTP call (not the
# reconcile lookups), by provider.
h=inbox_outbox_call_duration_seconds
hl="provider=\"http://127.0.0.1:$PROV_PORT\""
expect_eq "call histogram: one observation per call (= attempts_total)" \
	"$(awk -v k="${h}_count{$hl}" '$1 == k { print $2 }' "$m1")" "$(m inbox_outbox_attempts_total)"
expect_eq "call histogram: +Inf bucket = count" \
	"$(awk -v k="${h}_bucket{$hl,le=\"+Inf\"}" '$1 == k { print $2 }' "$m1")" "$(m inbox_outbox_attempts_total)"
check "call histogram: buckets cumulative, sum > 0" awk -v p="^${h}_bucket" -v s="^${h}_sum" '
	$1 ~ p { if ($2 < last) exit 1; last = $2; nb++ }
	$1 ~ s { sum = $2 }
	END { exit !(nb == 12 && sum > 0) }' "$m1"

get /healthz >"$dir/health.json"
expect_eq "GET /healthz: 200" "$http_status" 200
check "healthz: the dispatcher runs, its store answers" \
	jqok '.status == "ok" and .consumers[0].running and .consumers[0].dispatcher == "running" and .consumers[0].store == "ok"' "$dir/health.json"

stop_bg
expect_eq "SIGTERM: dispatch exits 0" "$bg_rc" 0
stopped=$(grep '"event":"dispatcher_stopped"' "$dir/dispatch.log")
case "$stopped" in
*'"attempts":8,"done":6,"retries":3,"unknown_outcomes":3,'*'"reconciliations":2,"reconciled_found":1,"dead_letters":0,'*)
	ok "the dispatcher_stopped line agrees with /metrics" ;;
*) fail "the dispatcher_stopped line agrees with /metrics" "$stopped" ;;
esac

# ---- 2. inbox run --dispatch --metrics ------------------------------------

curl -s -X POST "http://127.0.0.1:$PROV_PORT/control/reset" >/dev/null
if [ "$MODE" = pg ]; then
	store2=$store
	prefix2="${tag}r_"
else
	store2="sqlite:$dir/t2.db"
	prefix2=""
fi
orders "$dir/orders2.jsonl" 2
outbox_config "$dir/inbox2.yaml" "$store2" \
	"jsonl:$dir/orders2.jsonl?follow=1&checkpoint=$dir/orders2.checkpoint" "$prefix2" ""
m2="$dir/run.metrics"
if ! start_bg "$dir/run2.log" run "$dir/inbox2.yaml" --dispatch --metrics 127.0.0.1:0; then
	fail "run --dispatch --metrics starts" "$(tail -5 "$dir/run2.log")"
	summary
fi
ok "run --dispatch --metrics listens on port $port"
run_done() {
	get /metrics >"$m2"
	[ "$(metric "$m2" inbox_outbox_done_total)" = 4 ]
}
check "the four rows are done (inbox_outbox_done_total)" wait_until 30 run_done
get /metrics >"$m2"
promtool_ok "$m2" "run --dispatch"
m() { metric "$m2" "$1"; }
expect_eq "consumer counters: messages_total" "$(m inbox_messages_total)" 2
expect_eq "dispatcher counters under the same consumer: attempts_total" \
	"$(m inbox_outbox_attempts_total)" 4
expect_eq "attempts_total = requests the provider saw" "$(m inbox_outbox_attempts_total)" \
	$(($(pstat pay.requests) + $(pstat email.requests)))
expect_eq "unknown_outcomes_total" "$(m inbox_outbox_unknown_outcomes_total)" 0
expect_eq "consumer_up" "$(m inbox_consumer_up)" 1
labels=$(grep -v '^#' "$m2" | grep -o '{[^}]*}' | sed 's/,le="[^"]*"//; s/^{version="[^"]*"}$/{version}/' | sort -u | tr '\n' ' ')
expect_eq "labels: only the consumer name (and le, version, the provider)" "$labels" \
	"{consumer=\"billing.order-confirmed.v1\"} {provider=\"http://127.0.0.1:$PROV_PORT\"} {version} "
get /healthz >"$dir/health2.json"
expect_eq "GET /healthz: 200" "$http_status" 200
check "healthz: the consumer and its dispatcher run" \
	jqok '.status == "ok" and .consumers[0].running and .consumers[0].dispatcher == "running"' "$dir/health2.json"
stop_bg
expect_eq "SIGTERM: run exits 0" "$bg_rc" 0
[ "$MODE" = pg ] && pg_drop_prefix "${tag}r_"
summary
