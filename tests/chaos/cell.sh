#!/bin/sh
# One cell of the chaos matrix: a store (sqlite, pg) and a source (jsonl,
# kafka, amqp, redis, nats), DAEMONS `inbox run` daemons on one consumer,
# a producer publishing a stream of orders with redeliveries, producer
# retries, malformed and effect-rejected messages, and faults for SECONDS:
#   - SIGKILL of a daemon (restarted 0.1-1 s later), every 0.4-2 s
#   - SIGSTOP of a daemon past the lease and the brokers' redelivery
#     timeouts (3-5 s), then SIGCONT, every 8-16 s
#   - pg: an immediate shutdown of PostgreSQL, down 0.2-2 s, started again
#     plainly or in a PID namespace (CHAOS_PG_NS), 3-7 s after the previous
#     one ended; one in a namespace is followed by another one once the
#     daemons have reconnected (a crash loop: their new connections likely
#     get the PIDs they had; no SIGKILL meanwhile, so that they live on to
#     the second)
#   - pg: pg_terminate_backend of some of the daemons' connections, every
#     3-8 s
#   - brokers: kill -9 of the broker (the Kafka mock: every broker set
#     down), down 0.2-2 s, started again on its data, 8-16 s after the
#     previous one ended (and 2-4 s at least after a PostgreSQL restart)
# Outages (PostgreSQL, broker) happen while the producer runs, so that a
# row can follow each of them. A daemon that exits by itself (exit 4:
# store or source unreachable at start-up) is started again 0.5 s later,
# as a supervisor would. A broker that dies by itself and cannot come
# back (the Kafka mock keeps its log in memory) ends the faults, and the
# cell fails with broker_died=1: what it held is counted as lost. Then the
# faults stop, everything is brought back, the cell waits (at most SETTLE
# seconds) for the source to be drained and the store to hold what it
# should, stops the daemons with SIGTERM and checks: every valid order
# applied exactly once, none missing, every bad message dead-lettered
# exactly once with its reason, nothing valid among the dead letters, each
# daemon's last run drained and exited 0.
#   cell.sh BUILD_DIR STORE SOURCE SECONDS
# Prints progress ("# ...") and one figure line ("chaos store=... ..."),
# written to $CHAOS_OUT too when set; exit 0 if every check held, 1 if
# not, 2 if the cell could not be set up. PostgreSQL is the driver's
# (run.sh): INBOX_TEST_PG_URL, CHAOS_PG_DIR, CHAOS_PG_PORT.
set -u
BUILD=$(cd "$1" && pwd)
STORE=$2
SOURCE=$3
SECONDS_CHAOS=$4
here=$(cd "$(dirname "$0")" && pwd)
INBOX_IT_DIR=$(cd "$here/../integration" && pwd)
export INBOX_IT_DIR
BIN=$BUILD/src/cli/inbox
DAEMONS=${CHAOS_DAEMONS:-3}
SETTLE=${CHAOS_SETTLE:-90}
RATE=${CHAOS_RATE:-100} # valid orders per second while producing

case "$SOURCE" in
jsonl) . "$INBOX_IT_DIR/daemon/lib.sh" ;;
kafka)
	MOCK=$BUILD/tests/tools/kafka-mock
	PRODUCE=$BUILD/tests/tools/kafka-produce
	SESSION_MS=3000
	. "$INBOX_IT_DIR/kafka/lib.sh"
	;;
amqp)
	PUB=$BUILD/tests/integration/amqp/amqp-publish
	. "$INBOX_IT_DIR/amqp/lib.sh"
	;;
redis) . "$INBOX_IT_DIR/redis/lib.sh" ;;
nats)
	PUB=$BUILD/tests/integration/nats/nats_publish
	. "$INBOX_IT_DIR/nats/lib.sh"
	;;
*)
	echo "cell.sh: unknown source $SOURCE" >&2
	exit 2
	;;
esac
group=chaos
. "$here/lib.sh"
case "$STORE" in
sqlite) ;;
pg)
	[ -n "${INBOX_TEST_PG_URL:-}" ] && [ -n "${CHAOS_PG_DIR:-}" ] || {
		echo "cell.sh: pg needs INBOX_TEST_PG_URL and CHAOS_PG_DIR (run.sh)" >&2
		exit 2
	}
	;;
*)
	echo "cell.sh: unknown store $STORE" >&2
	exit 2
	;;
esac

dir=$(mktmp)
name="$STORE+$SOURCE"
producer_pid=""
stopped="" # "SLOT:PID:CONT_AT" of the daemon under SIGSTOP
cell_exit() {
	[ -n "$producer_pid" ] && kill "$producer_pid" 2>/dev/null
	for _p in $daemons; do kill -CONT "$_p" 2>/dev/null; done
	if [ "$(type cleanup 2>/dev/null | head -1)" = "cleanup is a shell function" ]; then
		cleanup
	else
		stop_daemons
	fi
	src_stop
	[ "$STORE" = pg ] && [ -z "${KEEP:-}" ] && pg_drop_prefix "$prefix"
	return 0
}
trap cell_exit EXIT
trap 'exit 1' INT TERM

if [ "$STORE" = pg ]; then
	prefix="chaos_${SOURCE}_"
	store_url=$INBOX_TEST_PG_URL
	pg_drop_prefix "$prefix"
else
	prefix=""
	store_url="sqlite:$dir/t.db"
fi

# --- The stream, in chunks for the producer -----------------------------------
produce_s=$((SECONDS_CHAOS * 3 / 4))
[ "$produce_s" -ge 1 ] || produce_s=1
ORDERS=$((RATE * produce_s))
NBAD=$((ORDERS / 100 > 3 ? ORDERS / 100 : 3))
orders_seed=${CHAOS_SEED:-$(rand_between 1 60000)}
gen_stream "$dir/stream" "$ORDERS" "$NBAD"
expected "$dir/stream" "$dir"
messages=$(wc -l <"$dir/stream" | tr -d ' ')
CHUNK_MS=500
chunks=$((produce_s * 1000 / CHUNK_MS))
per=$(((messages + chunks - 1) / chunks))
mkdir -p "$dir/chunks"
split -a 4 -d -l "$per" "$dir/stream" "$dir/chunks/c"
chunks=$(ls "$dir/chunks" | wc -l | tr -d ' ')
echo "# $name: $messages messages ($ORDERS orders, $NBAD malformed, $NBAD rejected," \
	"seed $orders_seed) in $chunks chunks over ${produce_s}s, $DAEMONS daemons," \
	"faults for ${SECONDS_CHAOS}s, dir $dir"

src_start || {
	echo "# $name: cannot start the source's server"
	exit 2
}

# --- The daemons ----------------------------------------------------------------
# slot i: $pid_i (running or stopped), $down_i (restart due at, ms; "" if up)
for i in $(seq 1 "$DAEMONS"); do
	chaos_config "$dir/d$i.yaml" "$store_url" "$(src_url "$i")" "$prefix" "d$i"
done
"$BIN" migrate "$dir/d1.yaml" >"$dir/migrate.out" 2>&1 || {
	echo "# $name: inbox migrate failed: $(head -3 "$dir/migrate.out")"
	exit 2
}

kills=0
exits=0 # daemons that exited by themselves
exit_codes=""
: >"$dir/faults"

slot_start() {
	start_daemon "$dir/d$1.yaml" "$dir/d$1.log"
	eval "pid_$1=$pid down_$1="
}
for i in $(seq 1 "$DAEMONS"); do slot_start "$i"; done

# --- The producer ---------------------------------------------------------------
# Chunk k is due at start + k * CHUNK_MS; a failed publish is retried
# (new message ids) every 300 ms. Its log: "CHUNK ATTEMPT ok|fail MS".
: >"$dir/producer.log"
t0=$(now_ms)
(
	trap - EXIT
	k=0
	for c in "$dir"/chunks/c*; do
		due=$((t0 + k * CHUNK_MS))
		n=$(now_ms)
		[ "$n" -lt "$due" ] && sleep_ms $((due - n))
		a=1
		until src_publish "$c" "$a"; do
			echo "${c##*/} $a fail $(now_ms)" >>"$dir/producer.log"
			a=$((a + 1))
			sleep_ms 300
		done
		echo "${c##*/} $a ok $(now_ms)" >>"$dir/producer.log"
		k=$((k + 1))
	done
	echo "done $(now_ms)" >>"$dir/producer.log"
) 9>&- &
producer_pid=$!

# --- Faults -------------------------------------------------------------------------
t_end=$((t0 + SECONDS_CHAOS * 1000))
t_prod=$((t0 + produce_s * 1000))
after() { echo $(($(now_ms) + $(rand_between "$1" "$2"))); }
next_kill=$(after 400 2000)
next_stop=$(after 4000 10000)
next_pgr=$(after 2000 6000)
next_term=$(after 1500 5000)
next_brk=$(after 3000 8000)

# running SLOT: the slot's daemon runs (not stopped, not down)
running() {
	eval "_p=\$pid_$1 _d=\$down_$1"
	[ -z "$_d" ] && [ -n "$_p" ] && case " $stopped" in *":$_p:"*) return 1 ;; esac
}

# pick: a random running slot, "" if none
pick() {
	_c=""
	for _i in $(seq 1 "$DAEMONS"); do running "$_i" && _c="$_c $_i"; done
	[ -n "$_c" ] || return 0
	set -- $_c
	shift $(rand_between 0 $(($# - 1)))
	echo "$1"
}

# housekeeping: restarts due, SIGCONT due, daemons that exited by
# themselves (started again 0.5 s later)
housekeeping() {
	_n=$(now_ms)
	for _i in $(seq 1 "$DAEMONS"); do
		eval "_p=\$pid_$_i _d=\$down_$_i"
		if [ -n "$_d" ]; then
			[ "$_n" -ge "$_d" ] && slot_start "$_i"
		elif ! alive "$_p"; then
			wait "$_p" 2>/dev/null
			_rc=$?
			forget_daemon "$_p"
			exits=$((exits + 1))
			exit_codes="$exit_codes $_rc"
			echo "d$_i pid $_p exited by itself with status $_rc at $_n" >>"$dir/exits"
			eval "down_$_i=$((_n + 500))"
		fi
	done
	if [ -n "$stopped" ]; then
		_s=${stopped%%:*}
		_r=${stopped#*:}
		_p=${_r%%:*}
		_at=${_r#*:}
		if [ "$_n" -ge "$_at" ]; then
			kill -CONT "$_p" 2>/dev/null
			echo "sigstop ${stopped_at} $(now_ms) d$_s" >>"$dir/faults"
			stopped=""
		fi
	fi
}

# Outages run in the background, one at a time (so that the time to the
# first row after one is its own), while kills and SIGSTOPs go on; each
# writes its line to $dir/faults when it is over ("KIND START END ..."),
# or "outage_failed" when the server did not come back.
outage_pid=""
outage_fn=""
# outage_running: one is in progress; when it has just ended, the next
# one of its kind is due an interval after its end (not after its start:
# a RabbitMQ node may take 20 s to start here, and the next outage would
# follow at once, with no row in between)
outage_running() {
	[ -n "$outage_pid" ] && alive "$outage_pid" && return 0
	if [ -n "$outage_pid" ]; then
		wait "$outage_pid" 2>/dev/null
		case "$outage_fn" in
		pg_outage) next_pgr=$(after 3000 7000) ;;
		broker_outage) next_brk=$(after 8000 16000) ;;
		esac
		# either kind waits 2-4 s after the other
		_g=$(after 2000 4000)
		[ "$next_pgr" -lt "$_g" ] && next_pgr=$_g
		[ "$next_brk" -lt "$_g" ] && next_brk=$_g
	fi
	outage_pid=""
	return 1
}

# pg_restart [MODE [NEXTPID]]: crash PostgreSQL, start it again (MODE,
# or as pg_mode_next says; NEXTPID: the next backend's PID in the
# namespace)
pg_restart() {
	_s=$(now_ms)
	sh "$here/pgfault.sh" crash "$CHAOS_PG_DIR"
	sleep_ms "$(rand_between 200 2000)"
	_m=$(pg_up ${1:-}) || {
		echo "outage_failed pg $(now_ms)" >>"$dir/faults"
		return 1
	}
	[ -n "${2:-}" ] && sh "$here/pgfault.sh" nextpid "$CHAOS_PG_DIR" "$2"
	echo "pg_restart $_s $(now_ms) $_m" >>"$dir/faults"
}

# pg_outage: a restart; one that came back in a PID namespace is followed
# by another one in a namespace (a container that crash-loops), once two
# daemons have reconnected (10 s at most) and had 0.3-1 s to use their
# connections, and the namespace's next PID is set to the first of their
# backends' (how many processes the start-up forked varies: the daemons'
# attempts while it recovers each cost one), so that the daemons reconnect
# to backends with the PIDs they had. Kills leave the daemons alone
# meanwhile ($dir/crashloop), so that they live on to the second.
pg_outage() {
	pg_restart || return 1
	if [ "$_m" = ns ]; then
		: >"$dir/crashloop"
		reconnected() {
			[ "$(sh "$here/pgfault.sh" clients "$CHAOS_PG_DIR" | wc -l)" -ge 2 ]
		}
		wait_until 10 reconnected
		sleep_ms "$(rand_between 300 1000)"
		_first=$(sh "$here/pgfault.sh" clients "$CHAOS_PG_DIR" | sort -n | head -1)
		pg_restart ns "$_first"
		rm -f "$dir/crashloop"
	fi
}

broker_outage() {
	_s=$(now_ms)
	src_crash
	sleep_ms "$(rand_between 200 2000)"
	src_recover || {
		echo "outage_failed broker $(now_ms)" >>"$dir/faults"
		return 1
	}
	echo "broker_restart $_s $(now_ms)" >>"$dir/faults"
}

# outage FUNCTION: run it in the background (fd 9, the Kafka mock's
# command pipe, stays open for it)
outage() {
	(
		trap - EXIT
		"$1"
	) &
	outage_pid=$!
	outage_fn=$1
}

while :; do
	n=$(now_ms)
	[ "$n" -ge "$t_end" ] && break
	grep -q '^outage_failed' "$dir/faults" && break
	if src_died; then
		echo "$(now_ms) $died_why" >"$dir/broker_died"
		echo "# $name: the broker died, the faults stop: $died_why"
		break
	fi
	housekeeping
	if [ "$n" -ge "$next_kill" ] && [ ! -f "$dir/crashloop" ]; then
		s=$(pick)
		if [ -n "$s" ]; then
			eval "p=\$pid_$s"
			kill_daemon "$p"
			if [ "$rc" -eq 137 ]; then
				kills=$((kills + 1))
			else
				exits=$((exits + 1))
				exit_codes="$exit_codes $rc"
			fi
			eval "down_$s=$(after 100 1000)"
		fi
		next_kill=$(after 400 2000)
	fi
	if [ "$n" -ge "$next_stop" ] && [ -z "$stopped" ]; then
		s=$(pick)
		if [ -n "$s" ]; then
			eval "p=\$pid_$s"
			kill -STOP "$p"
			stopped_at=$(now_ms)
			stopped="$s:$p:$(after 3000 5000)"
		fi
		next_stop=$(after 8000 16000)
	fi
	if [ "$n" -lt "$t_prod" ] && ! outage_running; then
		if [ "$STORE" = pg ] && [ "$n" -ge "$next_pgr" ]; then
			outage pg_outage
		elif [ "$SOURCE" != jsonl ] && [ "$n" -ge "$next_brk" ]; then
			outage broker_outage
		fi
	fi
	# backend terminations: not during an outage either (the time to the
	# next row would be the outage's)
	if [ "$STORE" = pg ] && [ "$n" -lt "$t_prod" ] &&
		[ "$n" -ge "$next_term" ] && ! outage_running; then
		_s=$(now_ms)
		t=$(pg_terminate)
		[ "${t:-0}" -gt 0 ] &&
			echo "pg_terminate $_s $(now_ms) $t" >>"$dir/faults"
		next_term=$(after 3000 8000)
	fi
	sleep_ms 100
done
# the outage in progress comes to its end
while outage_running; do sleep 0.1; done
t_faults=$(now_ms)

# --- Settle ---------------------------------------------------------------------------
outage_failed=$(grep -c '^outage_failed' "$dir/faults")
[ "$STORE" = pg ] && pg_up >/dev/null
if grep -q '^outage_failed broker' "$dir/faults"; then
	echo "# $name: the broker did not come back: starting it again"
	src_recover
fi
if [ -n "$stopped" ]; then
	stopped=${stopped%:*}:0
	housekeeping
fi
for i in $(seq 1 "$DAEMONS"); do
	eval "[ -n \"\$down_$i\" ]" && slot_start "$i"
done

# a broker that died with its log (the Kafka mock) has nothing more to
# deliver: no settling, the check counts what it took with it as lost
if [ ! -f "$dir/broker_died" ] && src_died; then
	echo "$(now_ms) $died_why" >"$dir/broker_died"
	echo "# $name: the broker died: $died_why"
fi
broker_died=0
[ -f "$dir/broker_died" ] && broker_died=1 SETTLE=1
settle_deadline=$(($(now_ms) + SETTLE * 1000))
wait_produced() { grep -q '^done' "$dir/producer.log"; }
if ! wait_until "$SETTLE" wait_produced; then
	echo "# $name: the producer did not finish: $(tail -1 "$dir/producer.log")"
fi
nvalid=$(wc -l <"$dir/valid" | tr -d ' ')
nbad=$(wc -l <"$dir/bad" | tr -d ' ')
settled() {
	housekeeping >/dev/null
	[ "$(q "SELECT COUNT(DISTINCT order_id) FROM ${prefix}invoices" 2>/dev/null)" = "$nvalid" ] &&
		[ "$(q "SELECT COUNT(*) FROM ${prefix}dead_letters" 2>/dev/null)" -ge "$nbad" ] &&
		src_drained
}
left=$(((settle_deadline - $(now_ms)) / 1000))
[ "$left" -ge 1 ] || left=1
if wait_until "$left" settled; then
	# what is still in flight (redeliveries after the last kills) comes
	# and is dropped or applied before the checks look
	wait_quiet 20 3000 "$dir"/d*.log
	settled_ok=1
else
	settled_ok=0
	echo "# $name: not settled within ${SETTLE}s"
fi
t_settled=$(now_ms)

stop_fails=0
housekeeping # (a daemon that exited by itself just now is counted there)
for i in $(seq 1 "$DAEMONS"); do
	eval "p=\$pid_$i d=\$down_$i"
	[ -z "$d" ] || continue
	stop_daemon "$p"
	if [ "$rc" -ne 0 ]; then
		stop_fails=$((stop_fails + 1))
		echo "# $name: d$i's last run exited $rc on SIGTERM"
	fi
done

# --- Check and figures -----------------------------------------------------------------
count_faults() { awk -v k="$1" -v m="${2:-}" '$1 == k && (m == "" || $4 == m) { n++ } END { print n + 0 }' "$dir/faults"; }
pg_restarts=$(count_faults pg_restart)
pg_ns=$(count_faults pg_restart ns)
pg_terms=$(count_faults pg_terminate)
terminated=$(awk '$1 == "pg_terminate" { n += $4 } END { print n + 0 }' "$dir/faults")
broker_restarts=$(count_faults broker_restart)
sigstops=$(count_faults sigstop)
check_cell "$dir"
. "$dir/check"
rec=$(recovery "$dir")
# each outage's recovery, for run.sh's figures over the whole matrix
[ -n "${CHAOS_OUT:-}" ] &&
	sed "s/^/$STORE $SOURCE /" "$dir/recovery" >>"$CHAOS_OUT.recovery"
errors=$(cat "$dir"/d*.log | grep -c '"level":"error"')
sanitizer=$(cat "$dir"/d*.log | grep -c -e 'Sanitizer' -e 'runtime error:')
republished=$(grep -c ' fail ' "$dir/producer.log")
result=PASS
[ "$lost" -eq 0 ] && [ "$doubled" -eq 0 ] && [ "$unexpected" -eq 0 ] &&
	[ "$dl_missing" -eq 0 ] && [ "$dl_extra" -eq 0 ] &&
	[ "$dl_bad_reason" -eq 0 ] && [ "$valid_in_dl" -eq 0 ] &&
	[ "$unknown_dl" -eq 0 ] && [ "$settled_ok" -eq 1 ] &&
	[ "$stop_fails" -eq 0 ] && [ "$sanitizer" -eq 0 ] &&
	[ "$outage_failed" -eq 0 ] && [ "$broker_died" -eq 0 ] || result=FAIL
if [ -s "$dir/problems" ]; then
	sed "s/^/# $name: /" "$dir/problems" | head -20
fi
line="chaos store=$STORE source=$SOURCE seconds=$(((t_faults - t0) / 1000))"
line="$line daemons=$DAEMONS messages=$messages republished_chunks=$republished"
# "4x17,1x2": how many exited by themselves with each status
codes=$(echo $exit_codes | tr ' ' '\n' | grep . | sort | uniq -c |
	awk '{ printf("%s%sx%s", NR > 1 ? "," : "", $2, $1) }')
line="$line valid=$valid kills=$kills self_exits=$exits${codes:+($codes)}"
line="$line sigstops=$sigstops pg_restarts=$pg_restarts pg_ns_restarts=$pg_ns"
line="$line pg_terminations=$pg_terms backends_terminated=$terminated"
line="$line broker_restarts=$broker_restarts lost=$lost doubled=$doubled"
line="$line unexpected=$unexpected dl_expected=$dl_expected dl_found=$dl_found"
line="$line dl_missing=$dl_missing dl_extra=$dl_extra dl_bad_reason=$dl_bad_reason"
line="$line valid_in_dl=$valid_in_dl settle_s=$(((t_settled - t_faults) / 1000))"
line="$line recovery_ms=${rec:--} errors_logged=$errors"
line="$line outages_failed=$outage_failed broker_died=$broker_died"
line="$line sigterm_failed=$stop_fails"
line="$line sanitizer=$sanitizer result=$result"
echo "$line"
[ -n "${CHAOS_OUT:-}" ] && echo "$line" >>"$CHAOS_OUT"
if [ "$result" = PASS ]; then
	# after the servers are stopped (cell_exit: their PID files are in
	# $dir; removed first, every passing cell left its broker running)
	cell_exit
	trap - EXIT
	[ -z "${KEEP:-}" ] && rm -rf "$dir"
	exit 0
fi
echo "# $name: files kept in $dir"
exit 1
