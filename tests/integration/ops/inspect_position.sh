#!/bin/sh
# inbox inspect --position finds the inbox record inserted from that
# source position (schema version 6; before, only the dead letters at it
# and an outbox row): for a message applied, one delivered again from the
# same position (a duplicate: a checkpoint lost after the commit), and
# one dead-lettered (its record is dead). The record shows its position,
# in text and in --json. A position with a byte that is not UTF-8 (a file
# name) is kept as the same text on both stores, found by it and by the
# bytes.
#   inspect_position.sh INBOX_BIN sqlite|pg
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
order m-1 ord-1 c1 101 >"$src"        # line 1: applied, then a duplicate
order m-2 ord-2 nobody 102 >>"$src"   # line 2: dead-lettered (no customer)
ops_config "$dir/inbox.yaml" "jsonl:$src?checkpoint=$dir/cp"
check "migrate" ops_migrate "$dir/inbox.yaml"
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run1.log"
expect_eq "run --once: exit 0" "$?" 0
# The checkpoint is lost: lines 1 and 2 come again, from the same
# positions, with a new line 3.
rm -f "$dir/cp"
order m-3 ord-3 c2 103 >>"$src"       # line 3: applied on the second run
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run2.log"
expect_eq "second run --once: exit 0" "$?" 0
expect_eq "ord-1 billed once (line 1 was a duplicate the second time)" \
	"$(q "SELECT count(*) FROM ${tag}invoices WHERE order_id = 'ord-1'")" 1
expect_eq "one dead letter for line 2 (its copy was a duplicate of the dead key)" \
	"$(q "SELECT count(*) FROM ${tag}dead_letters WHERE position = '$src:2'")" 1

# inspect_at LINE KEY STATUS: text and --json of --position SRC:LINE show
# the record of KEY with STATUS and the position.
inspect_at() {
	"$BIN" inspect "$dir/inbox.yaml" billing.ops --position "$src:$1" >"$dir/pos$1.out" 2>&1
	expect_eq "inspect --position line $1: exit 0" "$?" 0
	check "  the record of $2" grep -q "^key \.* $2$" "$dir/pos$1.out"
	check "  status $3" grep -q "^status \.* $3$" "$dir/pos$1.out"
	check "  its position" grep -q "^position \.* $src:$1$" "$dir/pos$1.out"
	"$BIN" inspect "$dir/inbox.yaml" billing.ops --position "$src:$1" --json >"$dir/pos$1.json" 2>&1
	check "  --json: the record with its position" \
		jqok ".key == \"$2\" and .status == \"$3\" and .position == \"$src:$1\"" "$dir/pos$1.json"
}
inspect_at 1 create-invoice:ord-1 completed
inspect_at 2 create-invoice:ord-2 dead
check "  line 2: its dead letter too" grep -q "^dead letters \.* [0-9]" "$dir/pos2.out"
inspect_at 3 create-invoice:ord-3 completed
check "  line 3: no dead letter" grep -q "^dead letters \.* none" "$dir/pos3.out"
# By key, the record shows where it came from.
"$BIN" inspect "$dir/inbox.yaml" billing.ops create-invoice:ord-3 >"$dir/key3.out" 2>&1
check "inspect KEY shows the position" grep -q "^position \.* $src:3$" "$dir/key3.out"
"$BIN" inspect "$dir/inbox.yaml" billing.ops --position "$src:9" >"$dir/pos9.out" 2>&1
expect_eq "inspect --position of a line never read: exit 1" "$?" 1

# A file name with a byte that is not UTF-8 (0xff; the config names it
# through a variable: YAML is UTF-8). The record and the dead letter keep
# the position with the byte as the text \xff, the same on both stores
# (docs/cli.md); --position finds them by that text, as inspect prints
# it, or by the bytes themselves.
odd_raw="$dir/odd$(printf '\377')name.jsonl"
odd_txt="$dir/odd\\xffname.jsonl"
order m-7 ord-7 c1 107 >"$odd_raw"      # line 1: applied
order m-8 ord-8 nobody 108 >>"$odd_raw" # line 2: dead-lettered
ODD_SRC=$odd_raw
export ODD_SRC
ops_config "$dir/odd.yaml" 'jsonl:${ODD_SRC}'"?checkpoint=$dir/odd.cp"
"$BIN" run "$dir/odd.yaml" --once 2>"$dir/odd-run.log"
expect_eq "a file name that is not UTF-8: run --once: exit 0" "$?" 0
# the run's log lines stay JSON, the byte written as the stores keep it
check "  the run's log: every line is JSON" jq -e . "$dir/odd-run.log"
expect_eq "  its dead_letter log line: the position with the byte as \\xff" \
	"$(jq -r 'select(.event == "dead_letter") | .position' "$dir/odd-run.log")" "$odd_txt:2"
expect_eq "  its dead letter keeps the byte as \\xff" \
	"$(q "SELECT position FROM ${tag}dead_letters WHERE key = 'create-invoice:ord-8'")" "$odd_txt:2"
# odd_at NAME POSITION LINE KEY STATUS: --position POSITION (text and
# --json) shows the record of KEY with STATUS, its position as stored.
odd_at() {
	"$BIN" inspect "$dir/odd.yaml" billing.ops --position "$2" >"$dir/$1.out" 2>&1
	expect_eq "inspect --position $1: exit 0" "$?" 0
	check "  the record of $4" grep -q "^key \.* $4$" "$dir/$1.out"
	check "  status $5" grep -q "^status \.* $5$" "$dir/$1.out"
	check "  its position, the byte as \\xff" \
		grep -q -x -F "position ........ $odd_txt:$3" "$dir/$1.out"
	"$BIN" inspect "$dir/odd.yaml" billing.ops --position "$2" --json >"$dir/$1.json" 2>&1
	check "  --json: the record with its position" \
		jq -e --arg p "$odd_txt:$3" ".key == \"$4\" and .position == \$p" "$dir/$1.json"
}
odd_at odd-text "$odd_txt:1" 1 create-invoice:ord-7 completed
odd_at odd-bytes "$odd_raw:1" 1 create-invoice:ord-7 completed
odd_at odd-dead "$odd_txt:2" 2 create-invoice:ord-8 dead
check "  line 2: its dead letter too" grep -q "^dead letters \.* [0-9]" "$dir/odd-dead.out"
odd_at odd-dead-bytes "$odd_raw:2" 2 create-invoice:ord-8 dead
check "  line 2, by its bytes: its dead letter too" grep -q "^dead letters \.* [0-9]" "$dir/odd-dead-bytes.out"
summary
