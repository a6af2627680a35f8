#!/bin/sh
# A consumer with `schema:`: messages violating the JSON Schema become dead
# letters naming the failing path and keyword, before any effect, and the
# consumer goes on; a schema the validator does not fully support (an
# unknown keyword, an unknown format, a remote $ref) or cannot read stops
# the daemon with exit 3 before anything is consumed.
#   schema.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"

dir=$(mktmp)
q() { sqlite3 "$dir/t.db" "$1"; }

# 20 good orders, then three that violate the contract, then 2 more.
gen_orders "$dir/orders.jsonl" 20 0 0
cat >>"$dir/orders.jsonl" <<'EOF'
{"id":"bad-1","type":"order.created","data":{"orderId":"ord-000101","customer":"c1","totalCents":-5}}
{"id":"bad-2","type":"order.created","data":{"orderId":"ord-000102","customer":"c2","totalCents":10,"coupon":"FREE"}}
{"id":"bad-3","type":"order.created","data":{"orderId":"ORD 103","customer":"c3","totalCents":10}}
EOF
gen_orders "$dir/more.jsonl" 2 0 0 21
cat "$dir/more.jsonl" >>"$dir/orders.jsonl"

# Relative to the config file's directory.
cat >"$dir/order.schema.json" <<'EOF'
{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "required": ["id", "type", "data"],
  "properties": {
    "id": {"type": "string", "minLength": 1},
    "type": {"const": "order.created"},
    "data": {
      "type": "object",
      "required": ["orderId", "customer", "totalCents"],
      "additionalProperties": false,
      "properties": {
        "orderId": {"type": "string", "pattern": "^ord-[0-9]{6}$"},
        "customer": {"type": "string"},
        "totalCents": {"type": "integer", "minimum": 0}
      }
    }
  }
}
EOF

cp_file="$dir/cp"
write_config "$dir/base.yaml" "sqlite:$dir/t.db" \
	"jsonl:$dir/orders.jsonl?checkpoint=$cp_file" invoices "" 10 0ms
# with_schema NAME FILE: the base config plus `schema: FILE`.
with_schema() {
	sed "s|^    fingerprint: /data|    fingerprint: /data\n    schema: $2|" \
		"$dir/base.yaml" >"$dir/$1.yaml"
}

with_schema good order.schema.json
"$BIN" run "$dir/good.yaml" --once >"$dir/good.out" 2>&1
expect_eq "run: exit 0" "$?" 0
expect_eq "valid orders applied" "$(q 'SELECT COUNT(*) FROM invoices')" 22
expect_eq "no invalid order applied" \
	"$(q "SELECT COUNT(*) FROM invoices WHERE order_id IN ('ord-000101', 'ord-000102', 'ORD 103')")" 0
expect_eq "three dead letters" "$(q 'SELECT COUNT(*) FROM dead_letters')" 3
expect_eq "minimum violation" \
	"$(q "SELECT reason FROM dead_letters WHERE message_id = 'bad-1'")" \
	"schema violation at /data/totalCents: minimum: -5 is less than 0"
expect_eq "additionalProperties violation" \
	"$(q "SELECT reason FROM dead_letters WHERE message_id = 'bad-2'")" \
	'schema violation at /data: additionalProperties: property "coupon" is not allowed'
expect_eq "pattern violation" \
	"$(q "SELECT reason FROM dead_letters WHERE message_id = 'bad-3'")" \
	'schema violation at /data/orderId: pattern: "ORD 103" does not match "^ord-[0-9]{6}$"'
expect_eq "dead letter keeps the key" \
	"$(q "SELECT key FROM dead_letters WHERE message_id = 'bad-1'")" \
	"create-invoice:ord-000101"
expect_eq "dead letter keeps the payload" \
	"$(q "SELECT payload FROM dead_letters WHERE message_id = 'bad-2'")" \
	"$(sed -n 22p "$dir/orders.jsonl")"
# A schema violation writes no inbox record: inspect shows the key's dead
# letter all the same (before: "no inbox record", exit 1).
"$BIN" inspect "$dir/good.yaml" billing.test create-invoice:ord-000101 >"$dir/inspect.out" 2>&1
expect_eq "inspect of a dead-lettered key without record: exit 0" "$?" 0
dlid=$(q "SELECT id FROM dead_letters WHERE message_id = 'bad-1'")
check "inspect: says there is no record" grep -q "^status \.* no inbox record" "$dir/inspect.out"
check "inspect: lists its dead letter" grep -q "^dead letters \.* $dlid\$" "$dir/inspect.out"
"$BIN" inspect "$dir/good.yaml" billing.test create-invoice:ord-000101 --json >"$dir/inspect.json"
check "inspect --json: status null, one dead letter" \
	jqok '.status == null and (.dead_letters | length) == 1' "$dir/inspect.json"
check "checkpoint written" [ -s "$cp_file" ]

# expect NAME RC PATTERN: run NAME.yaml; exit code, message, nothing read.
expect() {
	rm -f "$cp_file"
	"$BIN" run "$dir/$1.yaml" --once >"$dir/$1.out" 2>&1
	expect_eq "$1: exit $2" "$?" "$2"
	if grep -q -- "$3" "$dir/$1.out"; then
		ok "$1: message"
	else
		fail "$1: message" "want /$3/, got: $(cat "$dir/$1.out")"
	fi
	check "$1: nothing consumed" [ ! -e "$cp_file" ]
}

sed 's|"additionalProperties": false,|"dependentRequired": {"coupon": ["customer"]},|' \
	"$dir/order.schema.json" >"$dir/unsupported.schema.json"
with_schema unsupported unsupported.schema.json
expect unsupported 3 \
	"unsupported.yaml:[0-9]*:[0-9]*: schema: $dir/unsupported.schema.json: schema uses unsupported keyword \"dependentRequired\" at /properties/data"

sed 's|"minLength": 1|"format": "ulid"|' \
	"$dir/order.schema.json" >"$dir/format.schema.json"
with_schema format format.schema.json
expect format 3 'unknown format "ulid" at /properties/id'

sed 's|"customer": {"type": "string"}|"customer": {"$ref": "https://example.com/customer.json"}|' \
	"$dir/order.schema.json" >"$dir/remote.schema.json"
with_schema remote remote.schema.json
expect remote 3 'remote \$ref "https://example.com/customer.json" at /properties/data/properties/customer is not supported'

sed 's|"\^ord-\[0-9\]{6}\$"|"^ord-([0-9]{6}$"|' \
	"$dir/order.schema.json" >"$dir/regex.schema.json"
with_schema regex regex.schema.json
expect regex 3 'invalid regular expression at /properties/data/properties/orderId/pattern'

printf '{"type": "object",' >"$dir/broken.schema.json"
with_schema broken broken.schema.json
expect broken 3 'schema is not valid JSON'

with_schema missing no-such.schema.json
expect missing 3 "schema: cannot read $dir/no-such.schema.json"

summary
