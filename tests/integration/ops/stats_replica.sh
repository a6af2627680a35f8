#!/bin/sh
# inbox stats on a read replica (docs/scaling.md): a primary and a
# streaming standby of it (pg_basebackup -R), both throwaway servers of
# this test. The daemon writes on the primary (applied orders, dead
# letters); once the standby has replayed that far, `inbox stats` on a
# config whose store is the standby prints exactly what it prints on the
# primary. The standby is really one: pg_is_in_recovery(), and `inbox
# migrate` against it fails (a replica takes no writes).
# Ports: picked at random in 40000-59999 (pg.sh refuses one in use; a few
# tries).
#   stats_replica.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$bindir" ] || [ ! -x "$bindir/pg_basebackup" ]; then
	fail "PostgreSQL binaries (postgres, pg_basebackup)" "not found"
	summary
	exit 1
fi

dir=$(mktmp)
chmod 755 "$dir"
tag="opsr$$_"
KIND=pg
stop_pgs() {
	sh "$servers/pg.sh" stop "$dir/standby" >/dev/null 2>&1
	sh "$servers/pg.sh" stop "$dir/primary" >/dev/null 2>&1
}
finish() {
	ops_stop_daemon
	stop_pgs
	summary
	exit $?
}
trap 'ops_stop_daemon; stop_pgs' EXIT

# start_pg NAME: a server in $dir/NAME on a free port; its URL in $url
start_pg() {
	url=""
	for _try in 1 2 3 4 5; do
		_port=$(rand_between 40000 59999)
		if url=$(sh "$servers/pg.sh" start "$dir/$1" "$_port" 2>"$dir/$1.err"); then
			return 0
		fi
		url=""
		# a failed start of a fresh standby leaves its data: keep it
	done
	return 1
}

start_pg primary || { fail "start the primary" "$(cat "$dir/primary.err")"; finish; }
primary=$url
pport=${primary##*:}
pport=${pport%%/*}
ok "primary on port $pport"

# The standby: a base backup of the primary with standby.signal and
# primary_conninfo (-R); pg.sh then starts it as it is (no initdb).
mkdir -p "$dir/standby"
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" -eq 0 ] && chown postgres "$dir/standby"
if ! as_pg "$bindir/pg_basebackup" -h 127.0.0.1 -p "$pport" -U postgres \
	-D "$dir/standby/pg" -R -X stream -c fast >"$dir/basebackup.log" 2>&1; then
	fail "pg_basebackup of the primary" "$(tail -5 "$dir/basebackup.log")"
	finish
fi
start_pg standby || { fail "start the standby" "$(cat "$dir/standby.err")"; finish; }
standby=$url
check "the standby is in recovery" \
	test "$(psql "$standby" -X -q -tA -c 'SELECT pg_is_in_recovery()')" = t

# Orders on the primary: 8 applied, 2 for an unknown customer (dead
# letters).
INBOX_TEST_PG_URL=$primary
STORE=$primary
src="$dir/orders.jsonl"
: >"$src"
for i in $(seq 1 8); do order "m-$i" "ord-$i" c1 $((100 + i)) >>"$src"; done
order m-9 ord-9 nobody 109 >>"$src"
order m-10 ord-10 nobody 110 >>"$src"
ops_config "$dir/primary.yaml" "jsonl:$src?checkpoint=$dir/cp"
ops_config "$dir/standby.yaml" "jsonl:$src?checkpoint=$dir/cp" billing.ops "$standby"
check "migrate (primary)" ops_migrate "$dir/primary.yaml"
INBOX_LOG_LEVEL=warn "$BIN" run --once "$dir/primary.yaml" 2>"$dir/run.log"
check "the daemon ran on the primary" test $? -eq 0
check "8 invoices on the primary" test "$(pgq "SELECT count(*) FROM ${tag}invoices")" = 8

# Wait until the standby has replayed everything the primary wrote.
lsn=$(pgq "SELECT pg_current_wal_lsn()")
replayed() {
	test "$(psql "$standby" -X -q -tA -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn")" = t
}
check "the standby replays the primary's writes" wait_until 30 replayed

"$BIN" stats "$dir/primary.yaml" --json >"$dir/stats.primary" 2>"$dir/stats.primary.err"
check "stats on the primary" test $? -eq 0
"$BIN" stats "$dir/standby.yaml" --json >"$dir/stats.standby" 2>"$dir/stats.standby.err"
rc=$?
check "stats on the standby: exit 0" test $rc -eq 0
[ $rc -eq 0 ] || cat "$dir/stats.standby.err"
check "stats on the standby: 8 completed, 2 dead letters" \
	jqok '.completed == 8 and .dead_letters == 2' "$dir/stats.standby"
# the same numbers (ages aside: they tick between the two runs)
noages() { jq -S -c 'walk(if type == "object" then with_entries(select(.key | test("age_s$|headroom_s$") | not)) else . end)' "$1"; }
a=$(noages "$dir/stats.primary")
b=$(noages "$dir/stats.standby")
check "stats on the standby print what the primary's print" \
	test -n "$a" -a "$a" = "$b"
"$BIN" migrate "$dir/standby.yaml" >"$dir/migrate.standby" 2>&1
check "migrate on the standby is refused (read-only)" test $? -ne 0
pg_drop_prefix "$tag"
finish
