#!/bin/sh
# Every thread of the daemon at once, for ThreadSanitizer (build-tsan runs
# the tests labelled tsan; the plain and ASan builds run this one too):
# six consumers, one thread each — JSONL into SQLite, JSONL into
# PostgreSQL, Kafka (its own mock cluster; librdkafka's callbacks) into
# the same SQLite file, NATS JetStream into PostgreSQL with a handler slow
# enough for the source's in-progress keeper thread to run, a Redis stream
# into SQLite and a RabbitMQ queue into PostgreSQL — the first two
# with an outbox step performed by --dispatch (a dispatcher thread each),
# and /metrics and /healthz scraped by three clients at once the whole
# time (the libmicrohttpd thread reading what the others write). Every
# message is applied once, every charge made once, the drain exits 0, and
# nothing (no sanitizer) complains. Before it, a daemon waiting at start
# for a store that is not there (the main thread retrying, /healthz
# answering 503 from its thread, SIGTERM from outside); after it, `inbox
# dispatch` (its dispatcher threads, the --timeout watchdog, SIGTERM).
#   daemon.sh INBOX_BIN PROVIDER KAFKA_MOCK KAFKA_PRODUCE NATS_PUBLISH
#             AMQP_PUBLISH
set -u
BIN=$1
PROV=$2
MOCK=$3
PRODUCE=$4
PUB=$5
AMQP_PUB=$6
group=threads
. "$(dirname "$0")/../common.sh"
need_pg
need_suite_server INBOX_TEST_NATS_URL nats-server nats.sh
need_suite_server INBOX_TEST_REDIS_URL redis-server redis.sh
need_suite_server INBOX_TEST_AMQP_URL RabbitMQ rabbitmq.sh

N=${THREADS_N:-100}
dir=$(mktmp)
tag="thr$$_"
queue="inbox-it-$$-thr"
mock_pid=""
prov_pid=""
scrapers=""
cleanup() {
	touch "$dir/stop" "$dir/stop.w"
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
	redis-cli -u "$INBOX_TEST_REDIS_URL" DEL "THR$$" >/dev/null 2>&1
	"$AMQP_PUB" "$INBOX_TEST_AMQP_URL" delete "$queue" "$queue.retry" \
		>/dev/null 2>&1
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
orders r >"$dir/r.jsonl"
orders q >"$dir/q.jsonl"

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
	consumer thr.r "$INBOX_TEST_REDIS_URL/THR$$?group=thr" "${tag}r"
	consumer thr.q "$INBOX_TEST_AMQP_URL/$queue" "${tag}q" "$PG"
} >"$dir/inbox.yaml"

"$BIN" migrate "$dir/inbox.yaml" >"$dir/migrate.out" 2>&1 ||
	bail "migrate" "$(cat "$dir/migrate.out")"
"$PRODUCE" -q -K -i "$BOOT" thr "$dir/k.tsv" 9>&- ||
	bail "kafka-produce"
"$PUB" pub "$INBOX_TEST_NATS_URL" "THR$$" "$dir/n.jsonl" n >/dev/null 2>"$dir/pub.err" ||
	bail "nats publish" "$(cat "$dir/pub.err")"
awk -v s="THR$$" '{ printf("XADD %s * payload '\''%s'\''\n", s, $0) }' \
	"$dir/r.jsonl" | redis-cli -u "$INBOX_TEST_REDIS_URL" >/dev/null ||
	bail "redis XADD"
sent=$("$AMQP_PUB" "$INBOX_TEST_AMQP_URL" publish "$queue" <"$dir/q.jsonl")
[ "$sent" = "$N" ] || bail "amqp publish" "sent: $sent"

# scrape PATH FILE STOP: GET http://127.0.0.1:$port/PATH until $dir/STOP
# exists; the time (ms) each answer came and its status, one a line, in
# $dir/FILE.
scrape() {
	while [ ! -f "$dir/$3" ]; do
		_s=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
			"http://127.0.0.1:$port$1")
		echo "$(now_ms) $_s" >>"$dir/$2"
	done
}
# waited N: N attempts logged and N answers to /healthz.
waited() {
	[ "$(grep -c '"event":"waiting"' "$dir/wait.log")" -ge "$1" ] &&
		[ "$(cat "$dir/wscrape.1" 2>/dev/null | wc -l)" -ge "$1" ]
}

# --- Waiting at start: the store's socket does not exist ------------------
{
	printf 'store: "postgresql://postgres@/inbox_test?host=%s/nosock"\n' "$dir"
	printf 'consumers:\n'
	consumer thr.w "jsonl:$dir/a.jsonl" "${tag}w"
} >"$dir/wait.yaml"
"$BIN" run "$dir/wait.yaml" --metrics 127.0.0.1:0 2>"$dir/wait.log" 9>&- &
pid=$!
daemons=$pid
listening_port "$dir/wait.log" "$pid" ||
	bail "the waiting daemon serves /healthz" "$(tail -5 "$dir/wait.log")"
scrape /healthz wscrape.1 stop.w &
scrapers="$!"
scrape /metrics wscrape.2 stop.w &
scrapers="$scrapers $!"
check "waiting for its store: 3 attempts logged, /healthz asked 3 times" \
	wait_until 30 waited 3
t_term=$(now_ms)
stop_daemon "$pid"
expect_eq "SIGTERM while waiting: exits 0" "$rc" 0
touch "$dir/stop.w"
for _p in $scrapers; do wait "$_p" 2>/dev/null; done
scrapers=""
bad=$(awk -v t="$t_term" '$1 < t && $2 != 503' "$dir/wscrape.1" | wc -l)
expect_eq "every /healthz answer while waiting was a 503" "$bad" 0

# --- Everything at once ---------------------------------------------------
"$BIN" run "$dir/inbox.yaml" --dispatch --metrics 127.0.0.1:0 \
	2>"$dir/run.log" 9>&- &
pid=$!
daemons=$pid
listening_port "$dir/run.log" "$pid" ||
	bail "the daemon serves /metrics" "$(tail -5 "$dir/run.log")"
ok "the daemon serves /metrics on port $port"

scrape /metrics scrape.1 stop &
scrapers="$scrapers $!"
scrape /metrics scrape.2 stop &
scrapers="$scrapers $!"
scrape /healthz scrape.3 stop &
scrapers="$scrapers $!"

rows() {
	case "$1" in
	a | k | r) sq "$dir/inbox.db" "SELECT count(*) || ' ' || count(DISTINCT order_id) FROM ${tag}$1" ;;
	*) pgq "SELECT count(*) || ' ' || count(DISTINCT order_id) FROM ${tag}$1" ;;
	esac
}
all_done() {
	for t in a b k n r q; do [ "$(rows $t)" = "$N $N" ] || return 1; done
	[ "$(curl -s "http://127.0.0.1:$PROV_PORT/stats" | jq -r .pay.charges)" = $((2 * N)) ]
}
wait_until 180 all_done || fail "everything applied within 180 s" \
	"a: $(rows a), b: $(rows b), k: $(rows k), n: $(rows n), r: $(rows r), q: $(rows q)" \
	"charges: $(curl -s "http://127.0.0.1:$PROV_PORT/stats" | jq -c .pay)"
for t in a b k n r q; do
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
bad=$(cat "$dir"/scrape.1 "$dir"/scrape.2 | awk -v t="$t_term" '$1 < t && $2 != 200' | wc -l)
check "the scrapers got answers meanwhile ($got)" [ "$got" -ge 10 ]
expect_eq "every /metrics answer before SIGTERM was a 200" "$bad" 0
# /healthz is 503 until every consumer runs (the stores are opened after
# the HTTP thread starts), then 200 until SIGTERM.
bad=$(awk -v t="$t_term" '$1 < t && $2 == 200 { up = 1 } $1 < t && up && $2 != 200' "$dir/scrape.3" | wc -l)
expect_eq "every /healthz answer between the first 200 and SIGTERM was a 200" "$bad" 0

# --- inbox dispatch: nothing left to do, its threads all the same ---------
"$BIN" dispatch "$dir/inbox.yaml" --timeout 1s --metrics 127.0.0.1:0 \
	2>"$dir/dispatch1.log" 9>&- &
pid=$!
daemons=$pid
http_status=none
listening_port "$dir/dispatch1.log" "$pid" && get /metrics >/dev/null
expect_eq "inbox dispatch --timeout 1s: /metrics answers" "$http_status" 200
check "inbox dispatch --timeout 1s: its watchdog stops it" \
	wait_until 30 grep -q '"event":"dispatch_timeout"' "$dir/dispatch1.log"
wait "$pid"
rc=$?
forget_daemon "$pid"
expect_eq "inbox dispatch --timeout 1s: exits 0" "$rc" 0
"$BIN" dispatch "$dir/inbox.yaml" --metrics 127.0.0.1:0 \
	2>"$dir/dispatch2.log" 9>&- &
pid=$!
daemons=$pid
http_status=none
listening_port "$dir/dispatch2.log" "$pid" && get /metrics >/dev/null
expect_eq "inbox dispatch: /metrics answers" "$http_status" 200
stop_daemon "$pid"
expect_eq "inbox dispatch: SIGTERM, exits 0" "$rc" 0

if grep -q "Sanitizer\|runtime error" "$dir/wait.log" "$dir/run.log" \
	"$dir/dispatch1.log" "$dir/dispatch2.log"; then
	fail "no sanitizer report" "$(grep -h -m3 "Sanitizer\|runtime error" "$dir/wait.log" "$dir/run.log" "$dir"/dispatch*.log)"
else
	ok "no sanitizer report"
fi
summary
