# What every integration test shares (sourced by each group's lib.sh as
# "$(dirname "$0")/../common.sh"; POSIX sh, the tests run under dash). A
# script outside tests/integration (tests/chaos) that sources a group's
# lib.sh sets INBOX_IT_DIR to this directory first.
# A test prints one line per check and ends with "N passed, N failed";
# it exits 0 only if every check passed, 1 otherwise, 77 when skipped (a
# server it needs is not configured). Processes it starts are stopped by
# PID, never by name. The helpers' own variables start with "_" so that
# they do not overwrite the test's.
passed=0
failed=0
daemons="" # PIDs of the background daemons not yet waited for
servers=$(cd "${INBOX_IT_DIR:-$(dirname "$0")/..}/../servers" && pwd) # tests/servers

# --- Checks and the closing line -------------------------------------------

ok() {
	passed=$((passed + 1))
	echo "ok   $1"
}

# fail NAME [DETAIL...]: one FAIL line, then each detail indented.
fail() {
	failed=$((failed + 1))
	echo "FAIL $1"
	shift
	for _l in "$@"; do echo "     $_l"; done
}

# check NAME COMMAND...: the command's status decides.
check() {
	_name=$1
	shift
	if "$@"; then ok "$_name"; else fail "$_name"; fi
}

# jqok FILTER FILE: jq -e FILTER FILE is true.
jqok() {
	# jq 1.6 -e exits 0 on an empty input (no result at all): a check
	# of a missing or empty output must fail, so a result is required.
	_jq=$(jq -e "$1" "$2" 2>/dev/null) && [ -n "$_jq" ]
}

# expect_eq NAME GOT WANT
expect_eq() {
	if [ "$2" = "$3" ]; then ok "$1"; else fail "$1" "got '$2', want '$3'"; fi
}

# summary: the closing "N passed, N failed" line, then exit 0 if every
# check passed (the test's $dir removed, unless KEEP=1) or 1 (the files
# kept). In a group whose tests stop what they started in an EXIT trap,
# lib.sh names that function in $exit_trap: summary runs it first —
# nothing may still run in $dir when it goes — and clears the trap.
summary() {
	if [ -n "${exit_trap:-}" ]; then
		"$exit_trap"
		trap - EXIT
	fi
	# a run that checked nothing proves nothing
	[ $((passed + failed)) -eq 0 ] && fail "no check ran"
	echo "$passed passed, $failed failed"
	if [ "$failed" -eq 0 ]; then
		# KEEP=1 keeps the files of a passing run too
		[ -n "${dir:-}" ] && [ -z "${KEEP:-}" ] && rm -rf "$dir"
		exit 0
	fi
	[ -n "${dir:-}" ] && echo "files kept in $dir"
	exit 1
}

# bail NAME [DETAIL...]: a step the rest depends on failed.
bail() {
	fail "$@"
	summary
}

# --- What a test needs -----------------------------------------------------

need_pg() {
	if [ -z "${INBOX_TEST_PG_URL:-}" ]; then
		echo "skip: INBOX_TEST_PG_URL is not set"
		exit 77
	fi
}

# need_suite_server VAR SERVER SCRIPT: a server tests/run-suite.sh always
# starts (tests/servers/SCRIPT) and exports in VAR; without it the test
# fails rather than skips.
need_suite_server() {
	eval "_url=\${$1:-}"
	if [ -z "$_url" ]; then
		echo "FAIL $1 is not set: run the suite through" \
			"tests/run-suite.sh (it starts $2 via" \
			"tests/servers/$3)"
		echo "0 passed, 1 failed"
		exit 1
	fi
}

# mktmp: a new directory for the test's files, inside the suite's temp
# dir when there is one; named after $group (set by lib.sh).
mktmp() {
	if [ -n "${INBOX_TEST_TMP:-}" ] && [ -d "$INBOX_TEST_TMP" ]; then
		mktemp -d "$INBOX_TEST_TMP/$group.XXXXXX"
	else
		mktemp -d "${TMPDIR:-/tmp}/inbox-$group.XXXXXX"
	fi
}

# ckpt_pos FILE FIELD: the offset (FIELD 1) or the line (FIELD 2) of a
# JSONL checkpoint: its newest slot ("inbox-jsonl-checkpoint 2 SEQ OFFSET
# LINE ..." at 0 and 512), or a format-1 file's "OFFSET LINE"; empty when
# there is none.
ckpt_pos() {
	[ -f "$1" ] || return 0
	tr -s ' ' <"$1" | awk -v f="$2" '
		/^[0-9]/ { print $f; exit }
		$1 == "inbox-jsonl-checkpoint" && $2 == 2 && (!n || $3 > best) {
			best = $3; v = $(3 + f); n = 1 }
		END { if (n) print v }'
}

# --- Time and chance -------------------------------------------------------

# rand_between LO HI: a random integer in [LO, HI].
rand_between() {
	_r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
	echo $(($1 + _r % ($2 - $1 + 1)))
}

# sleep_ms MS
sleep_ms() {
	sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"
}

now_ms() {
	date +%s%3N
}

# wait_until SECONDS COMMAND...: run COMMAND every 0.1 s until it
# succeeds (0), or until SECONDS have passed (1).
wait_until() {
	_until=$(($(now_ms) + $1 * 1000))
	shift
	while ! "$@"; do
		[ "$(now_ms)" -ge "$_until" ] && return 1
		sleep 0.1
	done
	return 0
}

# --- The stores ------------------------------------------------------------

# pgq SQL: one value (or rows, | separated) from PostgreSQL.
pgq() {
	psql "$INBOX_TEST_PG_URL" -X -q -tA -v ON_ERROR_STOP=1 -c "$1"
}

# pg_drop_prefix PREFIX: drop every table whose name starts with PREFIX.
pg_drop_prefix() {
	_tables=$(pgq "SELECT string_agg(quote_ident(tablename), ',') FROM pg_tables
	              WHERE schemaname = current_schema()
	              AND starts_with(tablename, '$1')")
	[ -n "$_tables" ] && pgq "DROP TABLE IF EXISTS $_tables" >/dev/null
	return 0
}

# sq DB SQL: the same from SQLite, waiting up to 5 s for a daemon's lock.
sq() {
	sqlite3 -cmd ".timeout 5000" "$1" "$2"
}

# --- Planted passwords -----------------------------------------------------

# plant_secret URL: URL with $SECRET as its user's password
# (postgresql://postgres@HOST:PORT/DB -> postgresql://postgres:SECRET@...).
plant_secret() {
	echo "$1" | sed "s|://\([^@/:]*\)@|://\1:$SECRET@|"
}

# run_redacted NAME RC INBOX-ARGS...: `$BIN INBOX-ARGS...` with debug logs,
# stdout and stderr in $dir/NAME.out: it exits RC, prints something and
# $SECRET does not appear in what it printed.
run_redacted() {
	_name=$1
	_want=$2
	shift 2
	INBOX_LOG_LEVEL=debug "$BIN" "$@" >"$dir/$_name.out" 2>&1
	_got=$?
	expect_eq "$_name: exit $_want" "$_got" "$_want"
	# with debug logs every command prints something: an empty output
	# would make the next check vacuous
	# (not through check: it would overwrite $_name)
	if [ -s "$dir/$_name.out" ]; then
		ok "$_name: prints something"
	else
		fail "$_name: prints something"
	fi
	if grep -q "$SECRET" "$dir/$_name.out"; then
		fail "$_name: the password does not appear" "$(grep "$SECRET" "$dir/$_name.out" | head -3)"
	else
		ok "$_name: the password does not appear"
	fi
}

# --- Streams of orders -----------------------------------------------------

# order_stream ORDERS DUPS RETRIES [FIRST]: ORDERS order-created events,
# one JSON line each (orderId ord-FIRST.., default 1), plus DUPS exact
# copies of earlier lines (redeliveries) and RETRIES producer retries (a
# new message id, the same order data), interleaved. awk's rand() is
# seeded with $orders_seed (default 42): the same stream on every run.
order_stream() {
	awk -v n="$1" -v dups="$2" -v retries="$3" -v first="${4:-1}" \
		-v seed="${orders_seed:-42}" '
	function line(id, o) {
		return sprintf("{\"id\":\"%s\",\"type\":\"order.created\",\"data\":{\"orderId\":\"ord-%06d\",\"customer\":\"c%d\",\"totalCents\":%d}}", id, o, o % 97, 100 + (o * 7919) % 90000)
	}
	BEGIN {
		srand(seed)
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
	}'
}

# gen_orders FILE ORDERS DUPS RETRIES [FIRST]: order_stream into FILE.
gen_orders() {
	_file=$1
	shift
	order_stream "$@" >"$_file"
}

# --- Daemons in the background ---------------------------------------------

# start_daemon CONFIG LOG: `inbox run CONFIG` ($BIN) in the background,
# stderr appended to LOG, without fd 9 (kafka/lib.sh holds its mock
# cluster's lifetime pipe there); sets $pid and adds it to $daemons.
start_daemon() {
	"$BIN" run "$1" 2>>"$2" 9>&- &
	pid=$!
	daemons="$daemons $pid"
}

# forget_daemon PID: it was waited for; never signal that PID again (it
# may belong to another process by now).
forget_daemon() {
	daemons=$(echo "$daemons" | tr ' ' '\n' | grep -vx "$1" | tr '\n' ' ')
}

# stop_daemon PID: SIGTERM (drain), wait; the exit status in $rc (not in
# a $(...) subshell: it could not wait for the daemon).
stop_daemon() {
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	rc=$?
	forget_daemon "$1"
}

# kill_daemon PID: SIGKILL, wait; the exit status in $rc (137: it was
# still running, 0: it had already finished).
kill_daemon() {
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	rc=$?
	forget_daemon "$1"
}

# stop_daemons: SIGKILL the daemons still running and wait for them (for
# an EXIT trap).
stop_daemons() {
	for _p in $daemons; do kill -KILL "$_p" 2>/dev/null; done
	for _p in $daemons; do wait "$_p" 2>/dev/null; done
	daemons=""
}

# run_to_end CONFIG LOG: `inbox run CONFIG --once` until a run exits 0
# (it reached the end of its source), 5 runs at most; the last exit
# status in $rc.
run_to_end() {
	rc=1
	for _run in 1 2 3 4 5; do
		"$BIN" run "$1" --once 2>>"$2"
		rc=$?
		[ "$rc" -eq 0 ] && break
	done
}

# alive PID: running (not exited, not a zombie)? (Read once: a process
# that exits between a test of its stat file and a read is not alive.)
alive() {
	_st=$(cat "/proc/$1/stat" 2>/dev/null) && [ -n "$_st" ] &&
		! echo "$_st" | grep -q '^[0-9]* ([^)]*) Z'
}

# daemon_alive: is one of $daemons still running?
daemon_alive() {
	for _p in $daemons; do
		alive "$_p" && return 0
	done
	return 1
}

# wait_count WANT SECONDS: until count_rows (defined by the test) reaches
# WANT, or no daemon runs any more, or SECONDS passed; prints the count.
wait_count() {
	_end=$(($(date +%s) + $2))
	while :; do
		_c=$(count_rows 2>/dev/null)
		[ -n "$_c" ] || _c=0
		if [ "$_c" -ge "$1" ] || [ "$(date +%s)" -ge "$_end" ] ||
			! daemon_alive; then
			echo "$_c"
			return
		fi
		sleep 0.1
	done
}

# wait_quiet SECONDS MS LOG...: until no LOG grew for MS milliseconds (the
# stream, duplicates included, is consumed), or SECONDS passed.
wait_quiet() {
	_end=$(($(date +%s) + $1))
	_q=$2
	shift 2
	_last=$(cat "$@" 2>/dev/null | wc -c)
	_since=$(now_ms)
	while [ "$(date +%s)" -lt "$_end" ]; do
		sleep 0.1
		_cur=$(cat "$@" 2>/dev/null | wc -c)
		if [ "$_cur" != "$_last" ]; then
			_last=$_cur
			_since=$(now_ms)
		elif [ $(($(now_ms) - _since)) -ge "$_q" ]; then
			return 0
		fi
	done
	return 1
}

# --- The daemons' logs -----------------------------------------------------

# logged FIELD LOG...: the sum of FIELD over the batch lines of the logs.
logged() {
	_f=$1
	shift
	cat "$@" | grep '"event":"batch"' | grep -o "\"$_f\":[0-9]*" |
		awk -F: '{ s += $2 } END { print s + 0 }'
}

# stopped_field FIELD LOG: FIELD of the last "stopped" line of LOG.
stopped_field() {
	grep '"event":"stopped"' "$2" | tail -1 | grep -o "\"$1\":[0-9]*" |
		cut -d: -f2
}

# no_errors LOG...: no line at level error, no sanitizer report (an
# ASan/UBSan build writes them to the daemon's stderr, the log).
no_errors() {
	! cat "$@" | grep -q -e '"level":"error"' -e 'Sanitizer' \
		-e 'runtime error:'
}

# clean_logs NAME LOG...: the check that no_errors holds, showing the
# first offending lines when it does not.
clean_logs() {
	_name=$1
	shift
	if no_errors "$@"; then
		ok "$_name"
	else
		fail "$_name" "$(grep -Eh '"level":"error"|Sanitizer|runtime error:' "$@" | head -5)"
	fi
}

# --- The metrics endpoint ----------------------------------------------------

need_promtool() {
	command -v promtool >/dev/null || {
		echo "skip: promtool (package prometheus) is missing"
		exit 77
	}
}

# listening_port LOG PID [SECONDS]: wait (SECONDS, 60 by default, at
# most, while PID runs) for the metrics_listening line that
# `inbox run|dispatch --metrics 127.0.0.1:0` logs to LOG; its port in
# $port, 0 if there is one. The bound only guards against a hang (a
# daemon that dies returns at once): it used to be 100 polls (about 5 s),
# which a daemon of the ASan build starting on a machine at load average
# 25 can outlast.
listening_port() {
	port=""
	_lp_until=$(($(now_ms) + ${3:-60} * 1000))
	while :; do
		port=$(sed -n 's/.*"event":"metrics_listening","listen":"127\.0\.0\.1:\([0-9]*\)".*/\1/p' "$1" 2>/dev/null | head -1)
		[ -n "$port" ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		[ "$(now_ms)" -ge "$_lp_until" ] && return 1
		sleep 0.05
	done
}

# get PATH: the body of http://127.0.0.1:$port/PATH on stdout and in
# $dir/http.body, the HTTP status in $http_status.
get() {
	http_status=$(curl -s -o "$dir/http.body" -w '%{http_code}' --max-time 10 "http://127.0.0.1:$port$1")
	cat "$dir/http.body"
}

# metric FILE NAME: the value of NAME{consumer=...} (the first sample; ""
# when there is none).
metric() {
	awk -v n="$2" '$1 ~ "^" n "\\{" { print $2; exit }' "$1"
}

# promtool_ok FILE [WHAT]: the check that promtool accepts the exposition
# in FILE (its complaints in FILE.promtool).
promtool_ok() {
	_name="promtool check metrics passes${2:+ ($2)}"
	if promtool check metrics <"$1" >"$1.promtool" 2>&1; then
		ok "$_name"
	else
		fail "$_name" "$(head -5 "$1.promtool")"
	fi
}
