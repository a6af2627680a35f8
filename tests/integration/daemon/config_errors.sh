#!/bin/sh
# Config errors give a clear message naming the problem (and FILE:LINE for
# what is in the file), a non-zero exit (3 config, 4 cannot open, 2 usage)
# before anything is consumed: the JSONL checkpoint is never written.
#   config_errors.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"

dir=$(mktmp)
gen_orders "$dir/orders.jsonl" 20 0 0
cp_file="$dir/cp"
write_config "$dir/good.yaml" "sqlite:$dir/t.db" \
	"jsonl:$dir/orders.jsonl?checkpoint=$cp_file" invoices "" 10 0ms

# variant NAME SED-EXPR: a copy of the good config, edited.
variant() {
	sed "$2" "$dir/good.yaml" >"$dir/$1.yaml"
}

# expect NAME RC PATTERN [inbox args]: run `inbox run NAME.yaml --once`
# (or the given args); check exit code, message and, for a run of an
# existing config, the untouched checkpoint.
expect() {
	name=$1
	want=$2
	pattern=$3
	shift 3
	[ $# -eq 0 ] && set -- run "$dir/$name.yaml" --once
	rm -f "$cp_file"
	"$BIN" "$@" >"$dir/$name.out" 2>&1
	got=$?
	expect_eq "$name: exit $want" "$got" "$want"
	if grep -q -- "$pattern" "$dir/$name.out"; then
		ok "$name: message"
	else
		fail "$name: message" "want /$pattern/, got: $(cat "$dir/$name.out")"
	fi
	# (only where something could have been consumed: a run of an
	# existing config reading the JSONL file with $cp_file)
	if [ "$1" = run ] && [ -f "${2:-}" ]; then
		check "$name: nothing consumed" [ ! -e "$cp_file" ]
	fi
}

variant unknown-key 's|^    batch_size:|    batchsize:|'
expect unknown-key 3 'unknown-key.yaml:8:5: unknown key "batchsize" in consumer (did you mean "batch_size"?)'
variant unknown-top 's|^table_prefix:|tableprefix:|'
expect unknown-top 3 'unknown-top.yaml:2:1: unknown key "tableprefix"'
variant bad-timeout 's|^    batch_size: \(.*\)|    batch_size: \1\n    lock_timeout: soon|'
expect bad-timeout 3 'bad-timeout.yaml:9:19: lock_timeout: "soon" is not a duration'
variant zero-timeout 's|^    batch_size: \(.*\)|    batch_size: \1\n    idle_in_transaction_timeout: 0s|'
expect zero-timeout 3 'zero-timeout.yaml:9:34: idle_in_transaction_timeout: 0s is out of range'
variant low-deliveries 's|^    batch_size: \(.*\)|    batch_size: \1\n    max_deliveries: 2|'
expect low-deliveries 3 'low-deliveries.yaml:9:21: max_deliveries (2) must be at least max_attempts (5): every retry is a delivery too (off: no bound)'
variant bad-deliveries 's|^    batch_size: \(.*\)|    batch_size: \1\n    max_deliveries: never|'
expect bad-deliveries 3 'bad-deliveries.yaml:9:21: max_deliveries'
variant bad-pointer 's|params: \[/data/orderId,|params: [data/orderId,|'
expect bad-pointer 3 'bad-pointer.yaml:[0-9]*:[0-9]*: params: \$1: "data/orderId" is not a JSON pointer'
variant bad-key 's|key: "create-invoice:{/data/orderId}"|key: "create-invoice:{/data/orderId"|'
expect bad-key 3 'bad-key.yaml:6:10: key: bad key template'
variant bad-source-scheme 's|source: jsonl:|source: rabbit:|'
expect bad-source-scheme 3 'bad-source-scheme.yaml:5:13: source: unsupported source URL'
variant bad-store-scheme 's|^store: sqlite:|store: mysql:|'
expect bad-store-scheme 3 'bad-store-scheme.yaml:1:8: store: unsupported store URL'
variant missing-table 's|INSERT INTO invoices|INSERT INTO invoicez|'
expect missing-table 3 'missing-table.yaml:[0-9]*:[0-9]*: consumer "billing.test", effect step 1: the database rejects the SQL: no such table: invoicez'
variant too-few-params 's|params: \[/data/orderId, /data/customer, /data/totalCents\]|params: [/data/orderId, /data/customer]|'
expect too-few-params 3 'too-few-params.yaml:[0-9]*:[0-9]*: effect step 1: the SQL uses \$3 but params lists 2 JSON pointers'
variant unused-param 's|VALUES (\$1, \$2, \$3)|VALUES ($1, $3, $3)|'
expect unused-param 3 'params lists \$2 (/data/customer) but the SQL never uses \$2'
variant two-statements 's|VALUES (\$1, \$2, \$3)|VALUES ($1, $2, $3); DELETE FROM invoices|'
expect two-statements 3 'one SQL statement per step'
variant yaml-syntax 's|^    batch_size: 10|   batch_size: [10|'
expect yaml-syntax 3 'yaml-syntax.yaml:[0-9]*:[0-9]*: YAML syntax error'
variant bad-duration 's|batch_pause: 0ms|batch_pause: 10 parsecs|'
expect bad-duration 3 'batch_pause: "10 parsecs" is not a duration'
variant no-effect '/^    effect:/,$d'
expect no-effect 3 'effect is required'
variant dup-key 's|^    batch_size: 10|    batch_size: 10\n    batch_size: 20|'
expect dup-key 3 'duplicate key "batch_size"'
variant no-store-dir "s|^store: sqlite:.*|store: sqlite:$dir/no/such/dir/t.db|"
expect no-store-dir 4 'cannot open store sqlite:'
variant no-source-file 's|orders.jsonl?|missing.jsonl?|'
expect no-source-file 4 'cannot open source jsonl:'
expect no-such-file 3 'no/such.yaml: cannot open' run "$dir/no/such.yaml"
expect migrate-unknown-key 3 'unknown key "batchsize"' migrate "$dir/unknown-key.yaml"
expect usage 2 'usage: inbox run' run
expect unknown-consumer 2 'no consumer named "nope"' run "$dir/good.yaml" --consumer nope
for v in inf nan 0x10 1e999 -1 10x; do
	expect "drain-timeout-$v" 2 "--drain-timeout: \"$v\" is not a duration" \
		run "$dir/good.yaml" --once --drain-timeout "$v"
done
expect help-unknown 2 'unknown command "nosuch"' help nosuch
expect dlq-id-overflow 2 '"99999999999999999999" is not a dead letter id' \
	dlq show "$dir/good.yaml" 99999999999999999999
expect dlq-limit-junk 2 '--limit: "5x" is not a positive number' \
	dlq list "$dir/good.yaml" --limit 5x
expect demo-orders-junk 2 '--orders: between 10 and 100000' \
	demo --orders 50x --dir "$dir/demo"
if [ -n "${INBOX_TEST_PG_URL:-}" ]; then
	variant pg-missing-table "s|^store: .*|store: $INBOX_TEST_PG_URL|; s|^table_prefix: .*|table_prefix: cfg$$_|; s|invoices|cfg$$_invoices|g; s|INSERT INTO cfg$$_invoices|INSERT INTO cfg$$_invoicez|"
	expect pg-missing-table 3 "effect step 1: the database rejects the SQL: relation \"cfg$$_invoicez\" does not exist"
	pg_drop_prefix "cfg$$_"
fi

# And the good config does consume (the checks above are not vacuous).
rm -f "$cp_file"
"$BIN" run "$dir/good.yaml" --once 2>"$dir/good.out"
expect_eq "good config: exit 0" "$?" 0
check "good config: checkpoint written" [ -e "$cp_file" ]
summary
