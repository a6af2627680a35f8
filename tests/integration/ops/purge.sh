#!/bin/sh
# inbox purge: records are aged by UPDATE (processed_at moved back), some
# past the 7-day window, some inside it. --dry-run counts without
# deleting; purge deletes exactly the expired ones, never one inside the
# window nor a processing/failed one, and shows a progress line on a
# pseudo-terminal; a second purge finds nothing.
#   purge.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
KIND=$2
. "$(dirname "$0")/lib.sh"
[ "$KIND" = pg ] && need_pg
dir=$(mktmp)
ops_setup
tag="opsp$$_"
trap ops_cleanup EXIT

src="$dir/orders.jsonl"
: >"$src"
for i in $(seq 1 60); do order "m-$i" "ord-$i" c1 $((100 + i)) >>"$src"; done
ops_config "$dir/inbox.yaml" "jsonl:$src?checkpoint=$dir/cp"
check "migrate" ops_migrate "$dir/inbox.yaml"
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log"
expect_eq "run --once: exit 0" "$?" 0

# ord-1..ord-40: 8 days + i minutes old (expired, each a different age);
# ord-41..ord-50: 6 days old (inside the window); ord-51: expired but
# processing; ord-52: expired but failed; the rest: fresh.
if [ "$KIND" = sqlite ]; then
	for i in $(seq 1 40); do echo "UPDATE ${tag}inbox SET processed_at = processed_at - (8 * 86400 + $i * 60) * 1000 WHERE key = 'create-invoice:ord-$i';"; done >"$dir/age.sql"
	for i in $(seq 41 52); do echo "UPDATE ${tag}inbox SET processed_at = processed_at - 6 * 86400 * 1000 WHERE key = 'create-invoice:ord-$i';"; done >>"$dir/age.sql"
	echo "UPDATE ${tag}inbox SET processed_at = processed_at - 9 * 86400 * 1000 WHERE key IN ('create-invoice:ord-51', 'create-invoice:ord-52');" >>"$dir/age.sql"
	sqlite3 -cmd ".timeout 5000" "$dir/inbox.db" <"$dir/age.sql"
else
	q "UPDATE ${tag}inbox SET processed_at = processed_at - interval '8 days' - (substr(key, 20)::int * interval '1 minute') WHERE substr(key, 20)::int <= 40" >/dev/null
	q "UPDATE ${tag}inbox SET processed_at = processed_at - interval '6 days' WHERE substr(key, 20)::int BETWEEN 41 AND 50" >/dev/null
	q "UPDATE ${tag}inbox SET processed_at = processed_at - interval '9 days' WHERE substr(key, 20)::int IN (51, 52)" >/dev/null
fi
q "UPDATE ${tag}inbox SET status = 'processing' WHERE key = 'create-invoice:ord-51'" >/dev/null
q "UPDATE ${tag}inbox SET status = 'failed' WHERE key = 'create-invoice:ord-52'" >/dev/null
expect_eq "records before" "$(q "SELECT count(*) FROM ${tag}inbox")" 60

# A copy of the config with `retention: 2s` may not shrink the stored 7d
# window by starting (before: it rewrote it for everyone, and the next
# purge deleted every record older than 2s): refused, exit 3, naming both.
sed 's/^    batch_size: 50$/    batch_size: 50\n    retention: 2s/' "$dir/inbox.yaml" >"$dir/short.yaml"
"$BIN" run "$dir/short.yaml" --once >"$dir/short.out" 2>&1
expect_eq "run with another retention: exit 3" "$?" 3
check "run with another retention: names both windows" \
	grep -q "retention 2s differs from the 7d stored" "$dir/short.out"
"$BIN" stats "$dir/short.yaml" --json >"$dir/stats0.json"
check "the stored window is still 7d" jqok '.retention_s == 604800' "$dir/stats0.json"
"$BIN" stats "$dir/inbox.yaml" --json >"$dir/stats1.json"
check "stats: 40 expired, headroom negative" jqok '.expired == 40 and .headroom_s < 0' "$dir/stats1.json"

"$BIN" purge "$dir/inbox.yaml" --dry-run >"$dir/dry.out" 2>&1
expect_eq "purge --dry-run: exit 0" "$?" 0
check "dry run counts 40" grep -q "would delete 40 records older than the 7d window" "$dir/dry.out"
expect_eq "dry run deletes nothing" "$(q "SELECT count(*) FROM ${tag}inbox")" 60

if command -v script >/dev/null; then
	script -qec "$BIN purge $dir/inbox.yaml --batch 7" /dev/null >"$dir/purge.tty" 2>&1
	expect_eq "purge on a tty: exit 0" "$?" 0
	check "tty: progress lines (purged N/40 with \\r)" grep -q "$(printf '\r')billing.ops: purged [0-9]*/40" "$dir/purge.tty"
	check "tty: the last progress line says 40/40" grep -q "purged 40/40 (100%)" "$dir/purge.tty"
	# once (before, PostgreSQL's purge printed it about six times)
	expect_eq "tty: the final progress line is shown once" \
		"$(grep -o "purged 40/40 (100%)" "$dir/purge.tty" | wc -l | tr -d ' ')" 1
else
	"$BIN" purge "$dir/inbox.yaml" --batch 7 >"$dir/purge.tty" 2>&1
	expect_eq "purge: exit 0" "$?" 0
fi
check "purge reports 40 deleted" grep -q "deleted 40 records older than the 7d window" "$dir/purge.tty"
expect_eq "records after" "$(q "SELECT count(*) FROM ${tag}inbox")" 20
expect_eq "expired ones gone" \
	"$(q "SELECT count(*) FROM ${tag}inbox WHERE key IN ('create-invoice:ord-1', 'create-invoice:ord-20', 'create-invoice:ord-40')")" 0
expect_eq "inside the window: all 10 kept" \
	"$(q "SELECT count(*) FROM ${tag}inbox WHERE key IN ('create-invoice:ord-41','create-invoice:ord-42','create-invoice:ord-43','create-invoice:ord-44','create-invoice:ord-45','create-invoice:ord-46','create-invoice:ord-47','create-invoice:ord-48','create-invoice:ord-49','create-invoice:ord-50')")" 10
expect_eq "processing and failed records kept however old" \
	"$(q "SELECT count(*) FROM ${tag}inbox WHERE key IN ('create-invoice:ord-51', 'create-invoice:ord-52')")" 2
"$BIN" purge "$dir/inbox.yaml" >"$dir/purge2.out" 2>&1
check "second purge: nothing left to delete" grep -q "deleted 0 records" "$dir/purge2.out"
if [ "$KIND" = pg ]; then
	# Generations: the 20 records left are sealed into generation 1 (a
	# filter of their keys); redeliveries of them are still duplicates,
	# new orders go to generation 2; a generation the purge empties is
	# dropped. A fingerprint conflict is still caught across the seal.
	"$BIN" purge "$dir/inbox.yaml" --seal-rows 30 >"$dir/seal0.out" 2>&1
	expect_eq "purge --seal-rows 30: exit 0" "$?" 0
	check "  it ran (deleted 0 records)" grep -q "deleted 0 records" "$dir/seal0.out"
	check "20 records: --seal-rows 30 does not seal" sh -c "! grep -q sealed '$dir/seal0.out'"
	expect_eq "  still one generation" "$(q "SELECT count(*) FROM ${tag}inbox_generations")" 1
	"$BIN" purge "$dir/inbox.yaml" --seal-rows 10 >"$dir/seal.out" 2>&1
	expect_eq "purge --seal-rows 10: exit 0" "$?" 0
	check "it seals generation 1" grep -q "billing.ops: sealed inbox generation 1" "$dir/seal.out"
	"$BIN" stats "$dir/inbox.yaml" --json >"$dir/stats-gen.json"
	check "stats --json: 2 generations, 1 sealed holding 20 keys" \
		jqok '.generations.count == 2 and .generations.sealed == 1 and .generations.sealed_keys == 20 and .generations.unfiltered == 0 and .generations.newest == 2 and .generations.filter_bytes > 0' "$dir/stats-gen.json"
	"$BIN" stats "$dir/inbox.yaml" >"$dir/stats-gen.txt"
	check "stats: a generations line" grep -q "generations \.* 2  (sealed 1: 20 keys" "$dir/stats-gen.txt"
	expect_eq "generations: 1 sealed with its filter, 2 the newest" \
		"$(q "SELECT string_agg(gen || ':' || (sealed_at IS NOT NULL) || ':' || coalesce(nkeys, -1), ',' ORDER BY gen) FROM ${tag}inbox_generations")" \
		"1:true:20,2:false:-1"
	for i in $(seq 41 50) $(seq 53 60); do order "again-$i" "ord-$i" c1 $((100 + i)); done >>"$src"
	for i in $(seq 61 65); do order "m-$i" "ord-$i" c1 $((100 + i)); done >>"$src"
	order "conflict-45" "ord-45" c1 999 >>"$src"
	"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run2.log"
	expect_eq "run after the seal: exit 0" "$?" 0
	expect_eq "redeliveries of sealed keys: no second invoice" \
		"$(q "SELECT count(*) FROM ${tag}invoices WHERE order_id IN ('ord-41','ord-45','ord-50','ord-53','ord-60')")" 5
	expect_eq "new orders invoiced once, in generation 2" \
		"$(q "SELECT count(*) FROM ${tag}inbox WHERE gen = 2")/$(q "SELECT count(*) FROM ${tag}invoices WHERE order_id IN ('ord-61','ord-62','ord-63','ord-64','ord-65')")" "5/5"
	expect_eq "the conflict with a sealed record is a dead letter" \
		"$(q "SELECT count(*) FROM ${tag}dead_letters WHERE message_id = 'conflict-45'")" 1
	expect_eq "the daemon counted 18 duplicates" \
		"$(stopped_field duplicates "$dir/run2.log")" 18
	# Age everything in generation 1 past the window (processing and
	# failed records made completed): the purge empties it and drops it.
	q "UPDATE ${tag}inbox SET status = 'completed', processed_at = now() - interval '9 days' WHERE gen = 1" >/dev/null
	# (a generation is dropped only a minute after its seal: stale
	# handles may still take it for the newest until they re-read)
	q "UPDATE ${tag}inbox_generations SET sealed_at = now() - interval '2 minutes' WHERE gen = 1" >/dev/null
	"$BIN" purge "$dir/inbox.yaml" --seal-rows 1000 >"$dir/seal2.out" 2>&1
	expect_eq "purge after aging generation 1: exit 0" "$?" 0
	expect_eq "generation 1 dropped, 2 left" \
		"$(q "SELECT string_agg(gen::text, ',' ORDER BY gen) FROM ${tag}inbox_generations")" 2
	expect_eq "its partition is gone" \
		"$(q "SELECT count(*) FROM pg_class WHERE relname = '${tag}inbox_g1'")" 0
fi
"$BIN" purge "$dir/inbox.yaml" --batch 0 >/dev/null 2>&1
expect_eq "purge --batch 0: usage error" "$?" 2
"$BIN" purge "$dir/inbox.yaml" --consumer nosuch >/dev/null 2>&1
expect_eq "purge --consumer unknown: usage error" "$?" 2
# Changed on purpose: migrate --set-retention stores the config's window
# (logged), then a consumer with it starts; back to 7d the same way.
"$BIN" migrate "$dir/short.yaml" --set-retention >"$dir/set.out" 2>&1
expect_eq "migrate --set-retention: exit 0" "$?" 0
check "migrate --set-retention: says from and to" grep -q "retention window 2s (was 7d)" "$dir/set.out"
check "migrate --set-retention: logged" grep -q '"event":"retention_changed","from_s":604800,"to_s":2' "$dir/set.out"
"$BIN" run "$dir/short.yaml" --once >"$dir/short2.out" 2>&1
expect_eq "then a run with 2s starts: exit 0" "$?" 0
"$BIN" migrate "$dir/inbox.yaml" --set-retention >/dev/null 2>&1
expect_eq "back to 7d on purpose: exit 0" "$?" 0
"$BIN" run "$dir/short.yaml" --once >/dev/null 2>&1
expect_eq "and 2s is refused again: exit 3" "$?" 3
summary
