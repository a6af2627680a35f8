# Helpers of the secrets tests (sourced; ../common.sh has the checks, the
# closing line and what every group shares): canaries planted in every
# URL form, every output of the inbox command collected under $dir/out
# and searched for any piece of them.
#
# The canaries: passwords holding every character a URL parser cares about
# ('/', '@', '#', ':', '%'), written percent-encoded where the URL must
# carry them, raw where the test wants a refusal. A leak is any 4 bytes in
# a row of any of their spellings (raw, encoded with upper- or lower-case
# hex digits) in anything the command printed, served or wrote.
group=secrets
. "${INBOX_IT_DIR:-$(dirname "$0")/..}/common.sh"

CANARY='Zq8V/w3@Kx#7:Jm%9'
CANARY_ENC='Zq8V%2Fw3%40Kx%237%3AJm%259'
CANARY_ENC_LOW='Zq8V%2fw3%40Kx%237%3aJm%259'
WRONG='Yt4W/pq@Rz#5:Ne%3'
WRONG_ENC='Yt4W%2Fpq%40Rz%235%3ANe%253'
WRONG_ENC_LOW='Yt4W%2fpq%40Rz%235%3aNe%253'
TOKEN='Hb6Tq2Lx9Wz4Pr7Ks'

# secrets_dir: $dir with cfg/ (configs and the list of pieces: never
# searched), out/ (what the commands print and serve) and data/ (the
# files they write).
secrets_dir() {
	dir=$(mktmp)
	mkdir -p "$dir/cfg" "$dir/out" "$dir/data"
	for _s in "$CANARY" "$CANARY_ENC" "$CANARY_ENC_LOW" "$WRONG" \
		"$WRONG_ENC" "$WRONG_ENC_LOW" "$TOKEN"; do
		printf '%s\n' "$_s"
	done | awk '{ for (i = 1; i + 3 <= length($0); i++) print substr($0, i, 4) }' |
		sort -u >"$dir/cfg/pieces"
}

# no_secret NAME FILE...: no file holds a piece of a canary.
no_secret() {
	_n=$1
	shift
	_hits=$(grep -a -H -n -F -f "$dir/cfg/pieces" "$@" 2>/dev/null | cut -c1-300 | head -3)
	if [ -n "$_hits" ]; then
		fail "$_n: no piece of a secret" "$_hits"
	else
		ok "$_n: no piece of a secret"
	fi
}

# cmd NAME WANT ARGS...: `$BIN ARGS...` with debug logs, stdout and
# stderr in out/NAME.out. WANT is an exit code, or "fail": refused as a
# config error (3) or a connection failure (4). It prints something (an
# empty output would make the search vacuous) and shows no secret.
cmd() {
	_name=$1
	_want=$2
	shift 2
	INBOX_LOG_LEVEL=debug "$BIN" "$@" >"$dir/out/$_name.out" 2>&1 9>&-
	_rc=$?
	if [ "$_want" = fail ]; then
		if [ "$_rc" -eq 3 ] || [ "$_rc" -eq 4 ]; then
			ok "$_name: refused (exit $_rc)"
		else
			fail "$_name: refused (exit 3 or 4)" "exit $_rc" \
				"$(tail -2 "$dir/out/$_name.out" | cut -c1-300)"
		fi
	elif [ "$_rc" -eq "$_want" ]; then
		ok "$_name: exit $_want"
	else
		fail "$_name: exit $_want" "exit $_rc" \
			"$(tail -2 "$dir/out/$_name.out" | cut -c1-300)"
	fi
	if [ -s "$dir/out/$_name.out" ]; then
		ok "$_name: prints something"
	else
		fail "$_name: prints something"
	fi
	no_secret "$_name" "$dir/out/$_name.out"
}

# config FILE STORE SOURCE: one consumer, billing.sec, whose effect
# inserts into ${tag}invoices (a foreign key to ${tag}customers, which is
# empty: every message is a dead letter, so dlq show has one to show),
# with an outbox step (so that dispatch opens the store too).
config() {
	cat >"$1" <<CFG
store: $2
table_prefix: "$tag"
${SCHEMA:+schema: $SCHEMA}
consumers:
  - name: billing.sec
    source: $3
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: 10
    retry_delay: 50ms
    poll_timeout: 100ms
    max_attempts: 1
    setup: |
      CREATE TABLE IF NOT EXISTS ${tag}customers (id TEXT PRIMARY KEY);
      CREATE TABLE IF NOT EXISTS ${tag}invoices (
        order_id TEXT NOT NULL,
        customer TEXT NOT NULL REFERENCES ${tag}customers (id));
    effect:
      - sql: INSERT INTO ${tag}invoices (order_id, customer) VALUES (\$1, \$2)
        params: [/data/orderId, /data/customer]
    outbox:
      - step: notify
        url: http://127.0.0.1:1/notify
        body: {orderId: /data/orderId}
        idempotent: true
CFG
}

# orders FILE: two orders, one JSON line each.
orders() {
	for _i in 1 2; do
		printf '{"id":"m-%s","data":{"orderId":"ord-%s","customer":"c%s"}}\n' \
			"$_i" "$_i" "$_i"
	done >"$1"
}

# store_commands NAME CONFIG WANT [few]: every command that opens the
# store, each through cmd (WANT 0: the store works; "fail": it cannot be
# opened); with "few" only run, stats and migrate (every command prints
# its errors its own way, but opens the store the same way: the whole
# set runs on a few URLs, these three on every one).
store_commands() {
	cmd "$1-migrate" "$3" migrate "$2"
	cmd "$1-run" "$3" run "$2" --once --connect-timeout 1 \
		--metrics 127.0.0.1:0
	cmd "$1-stats" "$3" stats "$2"
	[ "${4:-}" = few ] && return
	cmd "$1-stats-json" "$3" stats "$2" --json
	cmd "$1-purge-dry" "$3" purge "$2" --dry-run
	cmd "$1-purge" "$3" purge "$2"
	cmd "$1-dlq-list" "$3" dlq list "$2"
	cmd "$1-dlq-list-json" "$3" dlq list "$2" --json
	cmd "$1-dispatch" "$3" dispatch "$2" --pending
	if [ "$3" = fail ]; then
		# inbox dispatch waits for its store too: its 'waiting' lines
		cmd "$1-dispatch-wait" fail dispatch "$2" --once \
			--connect-timeout 1s
		cmd "$1-dlq-show" fail dlq show "$2" 1
		cmd "$1-dlq-replay" fail dlq replay "$2" 1
		cmd "$1-inspect" fail inspect "$2" billing.sec create-invoice:ord-1
	else
		cmd "$1-inspect" 0 inspect "$2" billing.sec create-invoice:ord-1
		cmd "$1-inspect-json" 0 inspect "$2" billing.sec \
			create-invoice:ord-1 --json
	fi
}

# daemon NAME CONFIG [ARGS...]: `inbox run CONFIG --metrics 127.0.0.1:0
# ARGS...` in the background, debug logs in out/NAME.log; sets $pid and
# $port (the test fails when it does not listen).
daemon() {
	_dn=$1
	_dc=$2
	shift 2
	INBOX_LOG_LEVEL=debug "$BIN" run "$_dc" --metrics 127.0.0.1:0 "$@" \
		>"$dir/out/$_dn.stdout" 2>"$dir/out/$_dn.log" 9>&- &
	pid=$!
	daemons="$daemons $pid"
	if listening_port "$dir/out/$_dn.log" "$pid"; then
		ok "$_dn: serves /metrics"
	else
		fail "$_dn: serves /metrics" "$(tail -3 "$dir/out/$_dn.log" | cut -c1-300)"
	fi
}

# waiting_daemon NAME CONFIG: a daemon whose store or source cannot be
# reached (a wrong password) waits for it, /healthz saying why (503);
# scraped, then stopped by SIGTERM, which exits 0 while it waits.
waiting_daemon() {
	daemon "$1" "$2"
	if wait_until 20 grep -q '"event":"waiting"' "$dir/out/$1.log"; then
		ok "$1: waits for what it cannot reach"
	else
		fail "$1: waits for what it cannot reach" \
			"$(tail -3 "$dir/out/$1.log" | cut -c1-300)"
	fi
	sleep 0.5
	scrape "$1" waiting
	check "$1: /healthz says it is not ready, and why" \
		health '.status != "ok" and (.reason | length > 0)' \
		"$dir/out/$1.waiting.healthz"
	stop_daemon "$pid"
	expect_eq "$1: SIGTERM while waiting exits 0" "$rc" 0
}

# scrape NAME SUFFIX: /metrics and /healthz of the daemon into
# out/NAME.SUFFIX.metrics and .healthz.
scrape() {
	get /metrics >"$dir/out/$1.$2.metrics"
	get /healthz >"$dir/out/$1.$2.healthz"
}

# started NAME WHAT: the daemon logged its start line, the URL redacted.
started() {
	if wait_until 20 grep -q '"event":"start"' "$dir/out/$1.log"; then
		ok "$1: logs its start line"
	else
		fail "$1: logs its start line" "$(tail -3 "$dir/out/$1.log" | cut -c1-300)"
	fi
	check "$1: the start line shows $2" \
		grep -q "\"event\":\"start\".*$2" "$dir/out/$1.log"
}

# secret_files NAME: the search over everything the test's commands and
# daemons printed, served and wrote.
secret_files() {
	no_secret "$1: every output and file" "$dir"/out/* $(find "$dir/data" -type f)
}
