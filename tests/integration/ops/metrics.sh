#!/bin/sh
# /metrics of a running `inbox run`, after a stream with redeliveries, a
# fingerprint conflict and dead letters: promtool accepts the exposition,
# the numbers are what happened, labels carry only the consumer name (no
# key, id or payload), /healthz answers 200; the logs are JSON lines, with
# one debug line per message (key, outcome, duration) and no payload.
#   metrics.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
KIND=$2
. "$(dirname "$0")/lib.sh"
[ "$KIND" = pg ] && need_pg
dir=$(mktmp)
ops_setup
need_promtool

tag="opsm$$_"
trap ops_cleanup EXIT

# 20 orders, 4 redeliveries, 1 conflict (ord-5 again with another total
# and a new id), 1 unknown customer (dead letter), 1 malformed line.
src="$dir/orders.jsonl"
: >"$src"
for i in $(seq 1 20); do order "m-$i" "ord-$i" c1 $((100 + i)) >>"$src"; done
head -n 4 "$src" >"$dir/dups"
cat "$dir/dups" >>"$src"
order m-5-again ord-5 c1 999 >>"$src"
order m-21 ord-21 ghost 121 >>"$src"
echo '{"id":"m-22","data":' >>"$src"
lines=$(wc -l <"$src" | tr -d ' ')

ops_config "$dir/inbox.yaml" "jsonl:$src?follow=1&checkpoint=$dir/cp"
check "migrate" ops_migrate "$dir/inbox.yaml"
LOG_LEVEL=debug
ops_start_daemon "$dir/inbox.yaml" "$dir/run.log" ||
	bail "daemon starts with a metrics endpoint" "$(tail -5 "$dir/run.log")"
ok "daemon starts with a metrics endpoint on port $port"

seen() {
	get /metrics >"$dir/metrics.txt"
	[ "$(metric "$dir/metrics.txt" inbox_messages_total)" = "$lines" ]
}
check "all $lines messages processed" wait_until 20 seen
sleep 1.1 # the store numbers are re-read at most once a second
get /metrics >"$dir/metrics.txt"
expect_eq "GET /metrics: 200" "$http_status" 200

promtool_ok "$dir/metrics.txt"

m() { metric "$dir/metrics.txt" "$1"; }
expect_eq "applied_total" "$(m inbox_applied_total)" 20
expect_eq "duplicates_total" "$(m inbox_duplicates_total)" 4
expect_eq "fingerprint_conflicts_total" "$(m inbox_fingerprint_conflicts_total)" 1
expect_eq "dead_lettered_total (conflict + customer + malformed)" "$(m inbox_dead_lettered_total)" 3
expect_eq "retries_total" "$(m inbox_retries_total)" 0
expect_eq "histogram count = messages" "$(m inbox_processing_duration_seconds_count)" "$lines"
expect_eq "histogram +Inf bucket = count" \
	"$(awk '/^inbox_processing_duration_seconds_bucket\{.*le="\+Inf"/ { print $2 }' "$dir/metrics.txt")" "$lines"
expect_eq "inbox size (records)" "$(m inbox_records)" 21
expect_eq "records exact, not estimated (a small inbox)" "$(m inbox_records_estimated)" 0
expect_eq "records_dead" "$(m inbox_records_dead)" 1
expect_eq "records_processing" "$(m inbox_records_processing)" 0
expect_eq "dead_letters in the store" "$(m inbox_dead_letters)" 3
expect_eq "retention_seconds (default 7d)" "$(m inbox_retention_seconds)" 604800
check "retention headroom is there and positive" awk '/^inbox_retention_headroom_seconds\{/ { f = 1; if (!($2 > 0)) exit 1 } END { exit !f }' "$dir/metrics.txt"
expect_eq "store_up" "$(m inbox_store_up)" 1
expect_eq "outbox_pending (no outbox steps)" "$(m inbox_outbox_pending)" 0
expect_eq "consumer_up" "$(m inbox_consumer_up)" 1
if [ "$KIND" = pg ]; then
	expect_eq "generations: one, the newest, holding the 21 records" \
		"$(m inbox_generations)/$(m inbox_generations_sealed)/$(m inbox_generations_newest_records)" "1/0/21"
else
	check "no generations on SQLite" sh -c "! grep -q '^inbox_generations' '$dir/metrics.txt'"
fi

labels=$(grep -v '^#' "$dir/metrics.txt" | grep -o '{[^}]*}' | sed 's/,le="[^"]*"//' | sort -u | tr '\n' ' ')
expect_eq "labels: only the consumer name (and le, version)" "$labels" '{consumer="billing.ops"} {version="0.1.0"} '
if grep -E 'ord-|m-[0-9]|ghost|totalCents|create-invoice' "$dir/metrics.txt" >/dev/null; then
	fail "no key, id or payload in /metrics" "$(grep -E 'ord-|m-[0-9]|ghost|totalCents' "$dir/metrics.txt" | head -3)"
else
	ok "no key, id or payload in /metrics"
fi

# The process's own families, Prometheus' standard names.
now=$(date +%s)
check "process_start_time_seconds: within the last minute" awk -v now="$now" '
	$1 == "process_start_time_seconds" { f = 1; if (!($2 > now - 60 && $2 <= now + 1)) exit 1 }
	END { exit !f }' "$dir/metrics.txt"
check "process_resident_memory_bytes: more than 1 MB" awk '
	$1 == "process_resident_memory_bytes" { f = 1; if (!($2 > 1048576)) exit 1 }
	END { exit !f }' "$dir/metrics.txt"
fds=$(ls "/proc/$daemon_pid/fd" | wc -l)
check "process_open_fds: what /proc/PID/fd shows ($fds, give or take two)" awk -v n="$fds" '
	$1 == "process_open_fds" { f = 1; d = $2 - n; if (d < -2 || d > 2) exit 1 }
	END { exit !f }' "$dir/metrics.txt"

# The source's lag: a JSONL file counts bytes (refreshed every 2 s).
lag_read() {
	get /metrics >"$dir/lag.txt"
	[ "$(metric "$dir/lag.txt" inbox_source_lag_bytes)" = 0 ]
}
check "source lag: 0 bytes behind once the file is read" wait_until 10 lag_read
check "no message lag for a file (unknown)" sh -c "! grep -q '^inbox_source_lag{' '$dir/lag.txt'"

get /healthz >/dev/null
expect_eq "GET /healthz: 200 while running" "$http_status" 200
check "healthz says ok" jqok '.status == "ok" and .consumers[0].running and .consumers[0].store == "ok"' "$dir/http.body"
get /nothing >/dev/null
expect_eq "GET /nothing: 404" "$http_status" 404

ops_stop_daemon
expect_eq "SIGTERM: the daemon drains and exits 0" "$daemon_rc" 0
check "every log line is one JSON object" all_json_lines "$dir/run.log"
n=$(grep -c '"event":"message"' "$dir/run.log")
expect_eq "debug: one line per message" "$n" "$lines"
check "debug line: key, outcome, duration" \
	grep -q '"level":"debug","consumer":"billing.ops","event":"message","key":"create-invoice:ord-5","outcome":"conflict",.*"duration_ms":' "$dir/run.log"
check "batch lines (info) carry outcome counts and duration" \
	grep -q '"level":"info","consumer":"billing.ops","event":"batch",.*"duplicate":.*"duration_ms":' "$dir/run.log"
check "dead letter (warn) carries the reason" \
	grep -q '"level":"warn".*"event":"dead_letter","key":"create-invoice:ord-21".*"reason":"effect step 1: ' "$dir/run.log"
if grep -E 'totalCents|"customer":"ghost"' "$dir/run.log" >/dev/null; then
	fail "no payload in the logs (even at debug)" "$(grep totalCents "$dir/run.log" | head -2)"
else
	ok "no payload in the logs (even at debug)"
fi
summary
