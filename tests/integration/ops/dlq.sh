#!/bin/sh
# inbox dlq list / show / replay / drop, and inspect, after a stream with
# dead letters: an order for a customer that does not exist yet (a
# foreign-key violation: permanent, dead-lettered), a fingerprint
# conflict and a line that is not UTF-8.
#   - list shows them with their reasons; show prints payload (bad bytes
#     as \xNN; --raw gives the exact bytes), headers, position, attempts;
#   - after the customer is created, replay applies the order once and
#     sets replayed_at; replaying again is a duplicate (no second invoice);
#   - replaying the conflict is a conflict again (nothing applied),
#     counted on the same dead letter, which stays pending;
#   - replay --all on a pseudo-terminal shows a progress line;
#   - drop removes a dead letter; inspect shows a record, exit 1 if none.
#   dlq.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
KIND=$2
. "$(dirname "$0")/lib.sh"
[ "$KIND" = pg ] && need_pg
dir=$(mktmp)
ops_setup
tag="opsd$$_"
trap ops_cleanup EXIT

src="$dir/orders.jsonl"
: >"$src"
for i in 1 2 3; do order "m-$i" "ord-$i" c1 $((100 + i)) >>"$src"; done
order m-4 ord-4 newcust 104 >>"$src"   # line 4: dead letter (no customer)
order m-2-again ord-2 c1 999 >>"$src"  # line 5: conflict with ord-2
printf '{"id":"m-6","data":{"orderId":"ord-6","customer":"c\377","totalCents":6}}\n' >>"$src" # line 6
for i in 7 8 9; do order "m-$i" "ord-$i" nobody $((100 + i)) >>"$src"; done # more dead letters
ops_config "$dir/inbox.yaml" "jsonl:$src?checkpoint=$dir/cp"
# Before the migration the read-only commands say what to do (before:
# "no such table: inbox" / 'relation "..." does not exist').
for cmd in stats "dlq list" inspect; do
	extra=""
	[ "$cmd" = inspect ] && extra="billing.ops k"
	# shellcheck disable=SC2086 # the words of cmd and extra
	"$BIN" $cmd "$dir/inbox.yaml" $extra >"$dir/unmigrated.out" 2>&1
	expect_eq "$cmd before migrate: exit 4" "$?" 4
	check "$cmd before migrate: says the tables do not exist, and to migrate" \
		sh -c "grep -q 'its tables do not exist yet' '$dir/unmigrated.out' &&
			grep -q 'hint: run \"inbox migrate' '$dir/unmigrated.out'"
done
check "migrate" ops_migrate "$dir/inbox.yaml"
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log"
expect_eq "run --once: exit 0" "$?" 0

id_of() { q "SELECT id FROM ${tag}dead_letters WHERE $1"; }
dl4=$(id_of "key = 'create-invoice:ord-4'")
dlc=$(id_of "stored_fingerprint IS NOT NULL")
dl6=$(id_of "key IS NULL")

"$BIN" dlq list "$dir/inbox.yaml" >"$dir/list.out" 2>&1
expect_eq "dlq list: exit 0" "$?" 0
check "list shows the foreign-key dead letter with its reason" \
	grep -Eq "^$dl4 .*create-invoice:ord-4 .*(FOREIGN KEY|foreign key)" "$dir/list.out"
check "list shows the conflict" grep -Eq "^$dlc .*create-invoice:ord-2 .*fingerprint" "$dir/list.out"
check "list counts 6" grep -q "(6 dead letters)" "$dir/list.out"
# The columns line up under the header: in every row each column starts
# where its header word does, after the padding of the cell before it
# (before, CONSUMER, KEY and REASON moved with the widths of the cells).
check "list: every column starts under its header" awk '
	NR == 1 { n = split("FIRST SEEN|DELIVERIES|ATTEMPTS|REPLAYED|CONSUMER|KEY|REASON", h, "|")
		for (c = 1; c <= n; c++) at[c] = index($0, h[c]); next }
	/^\(/ { next }
	{ for (c = 1; c <= n; c++)
		if (substr($0, at[c] - 1, 1) != " " || substr($0, at[c], 1) == " ") bad = 1 }
	END { exit bad }' "$dir/list.out"
"$BIN" dlq list "$dir/inbox.yaml" --json >"$dir/list.json"
expect_eq "list --json: 6 objects" "$(jq -s length "$dir/list.json")" 6
# The conflict (a copy with other data in the same batch as its key's
# first delivery) counts the attempts of the key's record (before: 0).
expect_eq "list --json: the conflict lists attempts 1" \
	"$(jq -r "select(.id == $dlc) | .attempts" "$dir/list.json")" 1

"$BIN" dlq show "$dir/inbox.yaml" "$dl6" >"$dir/show6.out" 2>&1
expect_eq "dlq show: exit 0" "$?" 0
check "show: invalid UTF-8 shown as \\xff" grep -qF '"customer":"c\xff"' "$dir/show6.out"
check "show: says the payload is not UTF-8" grep -q "not valid UTF-8" "$dir/show6.out"
check "show: position" grep -q "^position  *$src:6" "$dir/show6.out"
check "show: attempts" grep -q "^attempts  *1" "$dir/show6.out"
"$BIN" dlq show "$dir/inbox.yaml" "$dl6" --raw >"$dir/raw6"
sed -n 6p "$src" | tr -d '\n' >"$dir/line6"
check "show --raw: the exact bytes" cmp -s "$dir/raw6" "$dir/line6"
"$BIN" dlq show "$dir/inbox.yaml" "$dlc" --json >"$dir/showc.json"
check "show --json: conflict with both fingerprints" \
	jqok '.stored_fingerprint != null and .fingerprint != .stored_fingerprint and (.payload | test("999"))' "$dir/showc.json"
"$BIN" dlq show "$dir/inbox.yaml" 999999 >"$dir/show-missing.out" 2>&1
expect_eq "show of an unknown id: exit 1" "$?" 1

# The cause is fixed: the customer exists now.
q "INSERT INTO ${tag}customers (id) VALUES ('newcust')" >/dev/null
"$BIN" dlq replay "$dir/inbox.yaml" "$dl4" >"$dir/replay1.out" 2>&1
expect_eq "replay after the fix: exit 0" "$?" 0
check "replay: applied" grep -q "dead letter $dl4 (billing.ops, key create-invoice:ord-4): applied" "$dir/replay1.out"
expect_eq "one invoice for ord-4" "$(q "SELECT count(*) FROM ${tag}invoices WHERE order_id = 'ord-4'")" 1
check "replayed_at set" test -n "$(q "SELECT replayed_at FROM ${tag}dead_letters WHERE id = $dl4")"
expect_eq "the record is completed" \
	"$(q "SELECT status FROM ${tag}inbox WHERE key = 'create-invoice:ord-4'")" completed
"$BIN" dlq replay "$dir/inbox.yaml" "$dl4" >"$dir/replay2.out" 2>&1
expect_eq "replay again: exit 0" "$?" 0
check "replay again: duplicate" grep -q "): duplicate" "$dir/replay2.out"
expect_eq "still one invoice for ord-4" "$(q "SELECT count(*) FROM ${tag}invoices WHERE order_id = 'ord-4'")" 1
check "the dead letter is kept" test -n "$(id_of "id = $dl4")"

"$BIN" dlq replay "$dir/inbox.yaml" "$dlc" >"$dir/replayc.out" 2>&1
expect_eq "replay of a conflict: exit 1" "$?" 1
check "replay of a conflict: conflict again, counted on itself" \
	grep -q "): conflict again as dead letter $dlc (the same: counted, pending again)" "$dir/replayc.out"
expect_eq "ord-2 still billed once, with the first total" \
	"$(q "SELECT count(*), min(total_cents) FROM ${tag}invoices WHERE order_id = 'ord-2'")" "1|102"

# The three orders of customer "nobody": fix, then replay them all on a
# pseudo-terminal.
q "INSERT INTO ${tag}customers (id) VALUES ('nobody')" >/dev/null
if command -v script >/dev/null; then
	script -qec "$BIN dlq replay $dir/inbox.yaml --all" /dev/null >"$dir/all.tty" 2>&1
	expect_eq "replay --all on a tty: exit 1 (the bad-UTF-8 and conflict letters fail again)" "$?" 1
	check "tty: a progress line (replayed N/M with \\r)" grep -q "$(printf '\r')replayed [0-9]*/[0-9]*" "$dir/all.tty"
else
	"$BIN" dlq replay "$dir/inbox.yaml" --all >"$dir/all.tty" 2>&1
fi
check "replay --all: 3 more applied" grep -q "3 applied" "$dir/all.tty"
expect_eq "orders of nobody billed once each" \
	"$(q "SELECT count(*) FROM ${tag}invoices WHERE customer = 'nobody'")" 3
"$BIN" dlq replay "$dir/inbox.yaml" --all >"$dir/all2.out" 2>&1
check "replay --all without a tty: a plain line per dead letter" \
	grep -q "^dead letter [0-9]* (billing.ops): dead_lettered again" "$dir/all2.out"

# What happened to message X, by its id or its source position (before:
# by key only).
"$BIN" inspect "$dir/inbox.yaml" billing.ops --message-id m-4 >"$dir/by_id.out" 2>&1
expect_eq "inspect --message-id: exit 0" "$?" 0
check "  the record of its key" grep -q "^key \.* create-invoice:ord-4$" "$dir/by_id.out"
check "  shown once (record and dead letter share the key)" \
	test "$(grep -c '^key ' "$dir/by_id.out")" -eq 1
check "  its dead letter" grep -q "^dead letters \.* $dl4 (replayed)" "$dir/by_id.out"
check "  its outbox rows (none)" grep -q "^outbox \.* none" "$dir/by_id.out"
"$BIN" inspect "$dir/inbox.yaml" billing.ops --message-id m-2-again --json >"$dir/by_id2.json" 2>&1
check "inspect --message-id of the conflicting copy: the key's record and the conflict" \
	jqok ".key == \"create-invoice:ord-2\" and .status == \"completed\" and (.dead_letters | map(.id) | index($dlc)) != null" "$dir/by_id2.json"
"$BIN" inspect "$dir/inbox.yaml" billing.ops --position "$src:6" >"$dir/by_pos.out" 2>&1
expect_eq "inspect --position: exit 0" "$?" 0
check "  a dead letter without a key" grep -q "dead-lettered without a key" "$dir/by_pos.out"
check "  its id" grep -q "^dead letters \.* $dl6" "$dir/by_pos.out"
"$BIN" inspect "$dir/inbox.yaml" billing.ops --position "$src:4" --json >"$dir/by_pos4.json" 2>&1
check "inspect --position --json: the key of the dead letter there" \
	jqok '.key == "create-invoice:ord-4" and .status == "completed" and (.outbox | length) == 0' "$dir/by_pos4.json"
"$BIN" inspect "$dir/inbox.yaml" billing.ops --message-id nope >"$dir/by_id_none.out" 2>&1
expect_eq "inspect --message-id of no message: exit 1" "$?" 1
check "  says so" grep -q 'for message id "nope"' "$dir/by_id_none.out"
"$BIN" inspect "$dir/inbox.yaml" billing.ops some-key --message-id m-4 >/dev/null 2>&1
expect_eq "inspect KEY and --message-id: usage (2)" "$?" 2

"$BIN" dlq drop "$dir/inbox.yaml" "$dl6" >"$dir/drop.out" 2>&1
expect_eq "drop: exit 0" "$?" 0
expect_eq "drop: gone" "$(q "SELECT count(*) FROM ${tag}dead_letters WHERE id = $dl6")" 0
"$BIN" dlq drop "$dir/inbox.yaml" "$dl6" >/dev/null 2>&1
expect_eq "drop of an unknown id: exit 1" "$?" 1

"$BIN" inspect "$dir/inbox.yaml" billing.ops create-invoice:ord-4 >"$dir/inspect.out" 2>&1
expect_eq "inspect: exit 0" "$?" 0
for f in "status completed" "attempts 1" "fingerprint [0-9a-f]\{64\}" "fence [0-9]" \
	"lease until none" "message id m-4" "created 20" "processed 20" "updated 20"; do
	name=${f% *}
	check "inspect shows $f" grep -q "^$name \.* ${f##* }" "$dir/inspect.out"
done
check "inspect shows the key's dead letter" grep -q "^dead letters \.* $dl4 (replayed)" "$dir/inspect.out"
"$BIN" inspect "$dir/inbox.yaml" billing.ops create-invoice:ord-4 --json >"$dir/inspect.json"
check "inspect --json" jqok '.status == "completed" and .attempts == 1 and .lease_expired == false and (.dead_letters | length) == 1' "$dir/inspect.json"
"$BIN" inspect "$dir/inbox.yaml" billing.ops create-invoice:nope >"$dir/inspect-missing.out" 2>&1
expect_eq "inspect of a missing record: exit 1" "$?" 1
check "inspect of a missing record: says so" grep -q "no inbox record" "$dir/inspect-missing.out"
"$BIN" inspect "$dir/inbox.yaml" nosuch create-invoice:ord-4 >/dev/null 2>&1
expect_eq "inspect of an unknown consumer: exit 2" "$?" 2

# A record held under a lease: processing, lease valid, then expired.
if [ "$KIND" = sqlite ]; then
	q "UPDATE ${tag}inbox SET status = 'processing', lease_until = processed_at - 1000 WHERE key = 'create-invoice:ord-1'"
else
	q "UPDATE ${tag}inbox SET status = 'processing', lease_until = now() - interval '1 second' WHERE key = 'create-invoice:ord-1'"
fi
"$BIN" inspect "$dir/inbox.yaml" billing.ops create-invoice:ord-1 --json >"$dir/lease.json"
check "inspect: an expired lease is shown as expired" jqok '.status == "processing" and .lease_expired == true' "$dir/lease.json"

"$BIN" stats "$dir/inbox.yaml" --json >"$dir/stats.json"
# Replaying what fails again adds no dead letter: the conflict, replayed
# three times, is one dead letter counting four deliveries, still pending.
expect_eq "the conflict: one dead letter" \
	"$(q "SELECT count(*) FROM ${tag}dead_letters WHERE stored_fingerprint IS NOT NULL")" 1
expect_eq "the conflict: four deliveries, pending" \
	"$(q "SELECT deliveries FROM ${tag}dead_letters WHERE id = $dlc AND replayed_at IS NULL")" 4
check "stats --json: dead letters, pending, conflicts, replayed" \
	jqok '.dead_letters == 5 and .pending == 1 and .conflicts == 1 and .replayed == 4 and .processing == 1 and .retention_s == 604800' "$dir/stats.json"
summary
