#!/bin/sh
# Two daemons in the same consumer group, one PostgreSQL store: every
# effect exactly once — Redis splits the entries between the members, and
# where both see one (a takeover), the inbox's unique key decides. Daemon b
# is SIGKILLed mid-way and restarted as a new member; its entries are
# taken over (claim_idle=500).
#   two.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
need_redis
need_pg

ORDERS=2000
dir=$(mktmp)
tag="rds$$_"
table="${tag}invoices"
trap 'pg_drop_prefix "$tag"' EXIT
trap 'exit 1' INT TERM
stream="inbox-two-$$-$(date +%s)"
R=$INBOX_TEST_REDIS_URL
produce "$R" "$stream" $ORDERS 150 50
src="$R/$stream?group=billing&claim_idle=500&drain=1"
write_config "$dir/inbox.yaml" "$INBOX_TEST_PG_URL" "$src" "$table" "$tag" \
	20 10ms
echo "# $(rcli "$R" XLEN "$stream") entries, $ORDERS orders, tables $tag*"

run_until_drained "$BIN" "$dir/inbox.yaml" "$dir/a.log" 120 &
pa=$!
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/b1.log" &
pb=$!
sleep_ms "$(rand_between 300 700)"
kill_daemon "$pb"
echo "# b killed with $(group_pending "$R" "$stream" billing) pending"
run_until_drained "$BIN" "$dir/inbox.yaml" "$dir/b2.log" 120
rb=$?
wait "$pa"
ra=$?
expect_eq "daemon a drains and exits 0" "$ra" 0
expect_eq "daemon b (restarted after SIGKILL) drains and exits 0" "$rb" 0

rows=$(pgq "SELECT COUNT(*) FROM $table")
distinct=$(pgq "SELECT COUNT(DISTINCT order_id) FROM $table")
expect_eq "each effect exactly once: rows" "$rows" "$ORDERS"
expect_eq "each effect exactly once: distinct orders" "$distinct" "$ORDERS"
expect_eq "nothing pending in the group" \
	"$(group_pending "$R" "$stream" billing)" 0
expect_eq "no dead letter" "$(pgq "SELECT COUNT(*) FROM ${tag}dead_letters")" 0
aa=$(stopped_field applied "$dir/a.log")
ab=$(stopped_field applied "$dir/b2.log")
echo "# applied: a=$aa, b (after restart)=$ab, b's killed run: the rest"
# b took part in its killed run or after its restart (which of the two
# is scheduling: a may leave nothing for the restart).
check "both members took part: a applied some, b the rest" \
	[ -n "$aa" -a "${aa:-0}" -gt 0 -a "${aa:-0}" -lt "$ORDERS" ]
check "no error logged" sh -c "! grep -q '\"level\":\"error\"' '$dir'/*.log"
rcli "$R" DEL "$stream" >/dev/null
summary
