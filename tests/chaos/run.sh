#!/bin/sh
# make chaos: the chaos matrix, bounded in time. Starts PostgreSQL (for the
# pg cells) in a temp dir, runs each cell (cell.sh: its own broker, its
# daemons, its producer and faults) one after the other, prints each
# cell's figure line and a table of them all with the totals; stops what
# it started by PID. Exit 0 only if every cell held.
#   run.sh BUILD_DIR
# Environment:
#   CHAOS_MINUTES  the whole run's budget (default 10): when a cell
#                  starts, what is left, less CHAOS_SETUP (default 25 s)
#                  per cell still to run for starting and settling (a cell
#                  may settle for up to CHAOS_SETTLE, 90 s), is shared among
#                  them, 3 shares to a pg cell, 2 to a sqlite one
#   CHAOS_CELLS    which cells, STORE+SOURCE (default: all ten, below)
#   CHAOS_DAEMONS  daemons per cell (3); CHAOS_RATE orders/s (100)
#   CHAOS_PG_NS    PostgreSQL restarts come back in a PID namespace:
#                  random (default, half of them), 1 (all), 0 (none)
#   CHAOS_SEED     the streams' seed (default: random, printed)
#   CHAOS_OUT      also append the figure lines to this file
#   KEEP=1         keep every cell's files (failed cells' are always kept)
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-build}" && pwd) || exit 2
[ -x "$BUILD/src/cli/inbox" ] || {
	echo "chaos: no $BUILD/src/cli/inbox (make build first)" >&2
	exit 2
}
MINUTES=${CHAOS_MINUTES:-10}
CELLS=${CHAOS_CELLS:-"sqlite+jsonl pg+jsonl pg+kafka pg+amqp pg+redis pg+nats sqlite+kafka sqlite+amqp sqlite+redis sqlite+nats"}
SETUP=${CHAOS_SETUP:-25}
INBOX_IT_DIR=$(cd "$here/../integration" && pwd)
. "$INBOX_IT_DIR/common.sh" # rand_between, now_ms

tmp=$(mktemp -d /tmp/inbox-chaos.XXXXXX)
chmod 755 "$tmp"
out=$tmp/figures
: >"$out"
pg_started=0
status=0
stop_all() {
	[ "$pg_started" -eq 1 ] && sh "$here/pgfault.sh" stop "$tmp/pg" >/dev/null 2>&1
	if [ -z "${KEEP:-}" ] && [ "$status" -eq 0 ]; then rm -rf "$tmp"; else
		echo "chaos: files kept in $tmp"; fi
}
trap stop_all EXIT
trap 'exit 1' INT TERM

case " $CELLS" in
*" pg+"*)
	mkdir -p "$tmp/pg"
	for try in 1 2 3 4 5; do
		port=$(rand_between 20000 28999)
		if INBOX_TEST_PG_URL=$(sh "$here/pgfault.sh" start "$tmp/pg" "$port" plain); then
			pg_started=1
			break
		fi
	done
	[ "$pg_started" -eq 1 ] || {
		echo "chaos: cannot start PostgreSQL" >&2
		exit 1
	}
	export INBOX_TEST_PG_URL CHAOS_PG_DIR="$tmp/pg" CHAOS_PG_PORT="$port"
	echo "chaos: PostgreSQL at $INBOX_TEST_PG_URL"
	;;
esac
export INBOX_TEST_TMP="$tmp"

t_start=$(now_ms)
deadline=$(awk -v m="$MINUTES" -v t="$t_start" 'BEGIN {
	if (m !~ /^[0-9]+(\.[0-9]+)?$/ || m == 0) exit 1
	printf("%.0f", t + m * 60000) }') || {
	echo "chaos: CHAOS_MINUTES must be a positive number of minutes" >&2
	exit 2
}
set -- $CELLS
left=$#
# weights: a PostgreSQL cell has more faults to go through (restarts,
# terminations) than a SQLite one, and gets 3 shares to its 2
weight() { case "$1" in pg+*) echo 3 ;; *) echo 2 ;; esac; }
wleft=0
for cell in "$@"; do wleft=$((wleft + $(weight "$cell"))); done
for cell in "$@"; do
	store=${cell%%+*}
	source=${cell#*+}
	w=$(weight "$cell")
	share=$((((deadline - $(now_ms)) / 1000 - left * SETUP) * w / wleft))
	[ "$share" -ge 15 ] || share=15
	echo "chaos: $cell for ${share}s ($left cells left)"
	CHAOS_OUT=$out sh "$here/cell.sh" "$BUILD" "$store" "$source" "$share" ||
		status=1
	# a cell that failed to start still gets a line in the table
	grep -q "store=$store source=$source " "$out" ||
		echo "chaos store=$store source=$source result=FAIL (did not run)" >>"$out"
	left=$((left - 1))
	wleft=$((wleft - w))
done
t_all=$((($(now_ms) - t_start) / 1000))

# --- The table -----------------------------------------------------------------
echo
echo "chaos: $(wc -l <"$out" | tr -d ' ') cells in ${t_all}s on $(nproc) cores"
awk '
function v(k) { return (k in f) ? f[k] : "-" }
BEGIN {
	printf("| store | source | s | messages | kills | SIGSTOPs | pg restarts (ns) | backend terms | broker restarts | lost | doubled | dead letters exp/found | recovery ms (max) | result |\n")
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
}
{
	delete f
	for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = substr($i, length(kv[1]) + 2) }
	# "pg_restart:n=4,max=238,p50=184;..." -> "pg_restart 238, ..."
	res = v("result"); if (v("broker_died") + 0 > 0) res = res " (broker died)"
	rec = v("recovery_ms"); gsub(/:n=[0-9]+,max=/, " ", rec); gsub(/,p50=[0-9]+/, "", rec); gsub(/;/, ", ", rec)
	printf("| %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s | %s | %s | %s/%s | %s | %s |\n",
	    v("store"), v("source"), v("seconds"), v("messages"), v("kills"), v("sigstops"),
	    v("pg_restarts"), v("pg_ns_restarts"), v("pg_terminations"), v("broker_restarts"),
	    v("lost"), v("doubled"), v("dl_expected"), v("dl_found"), rec, res)
	for (k in f) if (k ~ /^(messages|kills|sigstops|pg_restarts|pg_ns_restarts|pg_terminations|broker_restarts|lost|doubled|dl_expected|dl_found)$/) t[k] += f[k]
	if (v("result") == "PASS") pass++; n++
}
END {
	printf("| all | | | %d | %d | %d | %d (%d) | %d | %d | %d | %d | %d/%d | | %d/%d PASS |\n",
	    t["messages"], t["kills"], t["sigstops"], t["pg_restarts"], t["pg_ns_restarts"],
	    t["pg_terminations"], t["broker_restarts"], t["lost"], t["doubled"],
	    t["dl_expected"], t["dl_found"], pass, n)
}' "$out"

# --- Recovery over the whole matrix ------------------------------------------
# (lines "STORE SOURCE KIND START END MS" from every cell; MS "-" when no
# row followed the outage)
echo
if [ -s "$out.recovery" ]; then
	echo "| recovery (ms) | outages | followed by a row | p50 | p90 | max |"
	echo "|---|---|---|---|---|---|"
	for kind in pg_restart pg_terminate broker_restart sigstop; do
		awk -v k="$kind" '$3 == k { n++ } $3 == k && $6 != "-" { print $6 }' "$out.recovery" |
			sort -n | awk -v k="$kind" -v all="$(grep -c " $kind " "$out.recovery")" '
			{ v[n++] = $1 }
			END {
				if (all == 0) exit
				if (n == 0) { printf("| %s | %d | 0 | - | - | - |\n", k, all); exit }
				printf("| %s | %d | %d | %d | %d | %d |\n", k, all, n,
				    v[int((n - 1) * 0.5)], v[int((n - 1) * 0.9)], v[n - 1])
			}'
	done
fi
[ -n "${CHAOS_OUT:-}" ] && cat "$out" >>"$CHAOS_OUT"
exit $status
