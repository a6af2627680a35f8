#!/bin/sh
# Every thread of the daemon at once, for ThreadSanitizer (build-tsan runs
# the tests labelled tsan; the plain and ASan builds run this one too):
# four consumers, one thread each — JSONL into SQLite, JSONL into
# PostgreSQL, Kafka (its own mock cluster; librdkafka's callbacks) into
# the same SQLite file, NATS JetStream into PostgreSQL with a handler slow
# enough for the source's in-progress keeper thread to run — the first two
# with an outbox step performed by --dispatch (a dispatcher thread each),
# and /metrics and /healthz scraped by three clients at once the whole
# time (the libmicrohttpd thread reading what the others write). Every
# message is applied once, every charge made once, the drain exits 0, and
# nothing (no sanitizer) complains.
#   daemon.sh INBOX_BIN PROVIDER KAFKA_MOCK KAFKA_PRODUCE NATS_PUBLISH
set -u
BIN=$1
PROV=$2
MOCK=$3
PRODUCE=$4
PUB=$5
group=threads
. "$(dirname "$0")/../common.sh"
need_pg
need_suite_server INBOX_TEST_NATS_URL nats-server nats.sh

N=${THREADS_N:-100}
dir=$(mktmp)
tag="thr$$_"
mock_pid=""
prov_pid=""
scrapers=""
cleanup() {
	touch "$dir/stop"
	for _p in $scrapers; do wait "$_p" 2>/dev/null; done
	stop_daemons
	for _p in $mock_pid $prov_pid; do
		kill -TERM "$_p" 2>/dev/null
		wait "$_p" 2>/dev/null
	done
	mock_pid=""
	prov_pid=""
	exec 9>&-
	pg_drop_prefix "$tag"
	return 0
}
exit_trap=cleanup
trap cleanup EXIT

# The provider (payment API) and the Kafka mock cluster.
"$PROV" >"$dir/provider.port" 2>"$dir/provider.log" &
prov_pid=$!
mkfifo "$dir/mock.in" || bail "mkfifo"
"$MOCK" --stdin-lifetime thr:2 <"$dir/mock.in" >"$dir/mock.out" \
	2>"$dir/mock.err" &
mock_pid=$!
exec 9>"$dir/mock.in"
wait_until 15 grep -q '^port=' "$dir/provider.port" ||
	bail "the provider starts" "$(cat "$dir/provider.log")"
wait_until 15 grep -q '^bootstrap=' "$dir/mock.out" ||
	bail "the mock cluster starts" "$(cat "$dir/mock.err")"
PROV_PORT=$(sed -n 's/^port=//p' "$dir/provider.port")
BOOT=$(sed -n 's/^bootstrap=//p' "$dir/mock.out")

# Orders P-0001.. for each prefix P (unique across consumers: the
# provider counts charges per order).
orders() {
	awk -v p="$1" -v n="$N" 'BEGIN { for (i = 1; i <= n; i++)
		printf "{\"id\":\"%s-m%d\",\"data\":{\"orderId\":\"%s-%04d\",\"totalCents\":%d}}\n", p, i, p, i, 100 + i }'
}
orders a >"$dir/a.jsonl"
orders b >"$dir/b.jsonl"
orders k | awk '{ k = $0; sub(/.*"id":"/, "", k); sub(/".*/, "", k);
	printf "%s\t%s\t%s\n", k, k, $0 }' >"$dir/k.tsv"
orders n >"$dir/n.jsonl"

# consumer NAME SOURCE TABLE [STORE] [SLOW] [OUTBOX]
consumer() {
	printf '  - name: %s\n    source: "%s"\n' "$1" "$2"
	[ -n "${4:-}" ] && printf '    store: %s\n' "$4"
	cat <<CFG
    key: "order:{/data/orderId}"
    fingerprint: /data
    batch_size: 10
    retry_delay: 50ms
    poll_timeout: 50ms
    setup: |
      CREATE TABLE IF NOT EXISTS $3 (order_id TEXT NOT NULL, total INTEGER NOT NULL);
    effect:
      - sql: INSERT INTO $3 (order_id, total) VALUES (\$1, \$2)
        params: [/data/orderId, /data/totalCents]
CFG
	[ -n "${5:-}" ] && cat <<CFG
      - sql: SELECT pg_sleep(CASE WHEN \$1 LIKE '%0' THEN 0.3 ELSE 0 END)
        params: [/data/orderId]
CFG
	[ -n "${6:-}" ] && cat <<CFG
    outbox:
      - step: charge
        url: http://127.0.0.1:$PROV_PORT/pay
        body: {orderId: /data/orderId, amount: /data/totalCents}
        idempotent: true
    dispatch: {timeout: 2s, connect_timeout: 1s, backoff: 50ms, max_backoff: 200ms, poll: 20ms}
CFG
	return 0
}

PG=$INBOX_TEST_PG_URL
NATS="$INBOX_TEST_NATS_URL/THR$$?durable=thr&create=1&ack_wait=2s&in_progress_interval=100ms"
{
	printf 'store: sqlite:%s/inbox.db\ntable_prefix: "%s"\nconsumers:\n' "$dir" "$tag"
	consumer thr.a "jsonl:$dir/a.jsonl?follow=1&checkpoint=$dir/a.ck" "${tag}a" "" "" outbox
	consumer thr.b "jsonl:$dir/b.jsonl?follow=1&checkpoint=$dir/b.ck" "${tag}b" "$PG" "" outbox
	consumer thr.k "kafka://$BOOT/thr?group=thr&rdkafka.session.timeout.ms=6000&rdkafka.heartbeat.interval.ms=300&rdkafka.log_level=3" "${tag}k"
	consumer thr.n "$NATS" "${tag}n" "$PG" slow
} >"$dir/inbox.yaml"

"$BIN" migrate "$dir/inbox.yaml" >"$dir/migrate.out" 2>&1 ||
	bail "migrate" "$(cat "$dir/migrate.out")"
"$PRODUCE" -q -K -i "$BOOT" thr "$dir/k.tsv" 9>&- ||
	bail "kafka-produce"
"$PUB" pub "$INBOX_TEST_NATS_URL" "THR$$" "$dir/n.jsonl" n >/dev/null 2>"$dir/pub.err" ||
	bail "nats publish" "$(cat "$dir/pub.err")"

"$BIN" run "$dir/inbox.yaml" --dispatch --metrics 127.0.0.1:0 \
	2>"$dir/run.log" 9>&- &
pid=$!
daemons=$pid
listening_port "$dir/run.log" "$pid" ||
	bail "the daemon serves /metrics" "$(tail -5 "$dir/run.log")"
ok "the daemon serves /metrics on port $port"

# Three scrapers until told to stop: the time (ms) each answer came and
# its status, one a line.
scrape() {
	while [ ! -f "$dir/stop" ]; do
		_s=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
			"http://127.0.0.1:$port$1")
		echo "$(now_ms) $_s" >>"$dir/scrape.$2"
	done
}
scrape /metrics 1 &
scrapers="$scrapers $!"
scrape /metrics 2 &
scrapers="$scrapers $!"
scrape /healthz 3 &
scrapers="$scrapers $!"

rows() {
	case "$1" in
	a | k) sq "$dir/inbox.db" "SELECT count(*) || ' ' || count(DISTINCT order_id) FROM ${tag}$1" ;;
	*) pgq "SELECT count(*) || ' ' || count(DISTINCT order_id) FROM ${tag}$1" ;;
	esac
}
all_done() {
	for t in a b k n; do [ "$(rows $t)" = "$N $N" ] || return 1; done
	[ "$(curl -s "http://127.0.0.1:$PROV_PORT/stats" | jq -r .pay.charges)" = $((2 * N)) ]
}
wait_until 180 all_done || fail "everything applied within 180 s" \
	"a: $(rows a), b: $(rows b), k: $(rows k), n: $(rows n)" \
	"charges: $(curl -s "http://127.0.0.1:$PROV_PORT/stats" | jq -c .pay)"
for t in a b k n; do
	expect_eq "consumer thr.$t: every order applied once" "$(rows $t)" "$N $N"
done
stats=$(curl -s "http://127.0.0.1:$PROV_PORT/stats")
expect_eq "every order charged" "$(echo "$stats" | jq .pay.charges)" $((2 * N))
expect_eq "no order charged twice" "$(echo "$stats" | jq .pay.orders_charged_twice)" 0

# SIGTERM while the scrapers go on: the drain (and /healthz turning 503)
# happens under their requests too.
t_term=$(now_ms)
stop_daemon "$pid"
expect_eq "SIGTERM: the daemon drains and exits 0" "$rc" 0
touch "$dir/stop"
for _p in $scrapers; do wait "$_p" 2>/dev/null; done
scrapers=""
got=$(cat "$dir"/scrape.* | awk -v t="$t_term" '$1 < t' | wc -l)
bad=$(cat "$dir"/scrape.* | awk -v t="$t_term" '$1 < t && $2 != 200' | wc -l)
check "the scrapers got answers meanwhile ($got)" [ "$got" -ge 10 ]
expect_eq "every scrape answered before SIGTERM was a 200" "$bad" 0
if grep -q "Sanitizer\|runtime error" "$dir/run.log"; then
	fail "no sanitizer report" "$(grep -m3 "Sanitizer\|runtime error" "$dir/run.log")"
else
	ok "no sanitizer report"
fi
summary
