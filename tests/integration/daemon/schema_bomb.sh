#!/bin/sh
# Schema bombs through `inbox run`: a tree schema (node = oneOf [folder,
# group], children before kind) that a naive validator takes hours on
# for a 1 KB message, a catastrophic pattern in patternProperties and in
# anyOf. The good orders before and behind them are applied; the valid
# bomb is applied; the others are dead letters with their reasons; the
# whole run takes seconds (it is killed after 60).
#   schema_bomb.sh INBOX_BIN sqlite|pg
set -u
BIN=$1
MODE=$2
. "$(dirname "$0")/lib.sh"
[ "$MODE" = pg ] && need_pg

dir=$(mktmp)
tag="bomb$$_"

cat >"$dir/order.schema.json" <<'EOF'
{
  "type": "object",
  "required": ["id", "type", "data"],
  "properties": {
    "id": {"type": "string"},
    "type": {"const": "order.created"},
    "data": {
      "type": "object",
      "required": ["orderId", "customer", "totalCents"],
      "properties": {
        "orderId": {"type": "string", "pattern": "^ord-[0-9]{6}$"},
        "customer": {"type": "string"},
        "totalCents": {"type": "integer", "minimum": 0}
      }
    },
    "tree": {"$ref": "#/definitions/node"},
    "labels": {
      "patternProperties": {"^(a+)+$": {"type": "integer"}},
      "additionalProperties": {"type": "integer"}
    },
    "note": {"type": "string", "anyOf": [{"pattern": "^(a+)+$"}, {"maxLength": 1000}]}
  },
  "definitions": {
    "node": {"oneOf": [{"$ref": "#/definitions/folder"}, {"$ref": "#/definitions/group"}]},
    "folder": {"type": "object", "required": ["kind"], "properties": {
      "children": {"type": "array", "items": {"$ref": "#/definitions/node"}},
      "kind": {"const": "folder"}}},
    "group": {"type": "object", "required": ["kind"], "properties": {
      "children": {"type": "array", "items": {"$ref": "#/definitions/node"}},
      "kind": {"const": "group"}}}
  }
}
EOF

# order N [EXTRA]: an order-created line, EXTRA members appended.
order() {
	printf '{"id":"m%d","type":"order.created","data":{"orderId":"ord-%06d","customer":"c%d","totalCents":%d}%s}\n' \
		"$1" "$1" "$1" $((100 + $1)) "${2:-}"
}
# tree DEPTH LAST: a chain of DEPTH groups, children first, the innermost
# of kind LAST.
tree() {
	awk -v d="$1" -v last="$2" 'BEGIN {
		for (i = 0; i < d; i++) printf "{\"children\":[";
		for (i = 0; i < d; i++) printf "],\"kind\":\"%s\"}", i ? "group" : last;
	}'
}
labels=$(awk 'BEGIN { for (i = 0; i < 40; i++) printf "%s\"aaaaaaaaaaaaaaaaab%d\":1", i ? "," : "", i }')
note=$(awk 'BEGIN { for (i = 0; i < 40; i++) printf "a"; printf "b" }')

src="$dir/orders.jsonl"
for i in 1 2 3 4 5; do order "$i"; done >"$src"
order 6 ",\"tree\":$(tree 36 group)" >>"$src"   # valid: applied
order 7 ",\"tree\":$(tree 36 other)" >>"$src"   # the innermost kind is wrong
order 8 ",\"labels\":{$labels}" >>"$src"        # 40 names of 250,000 steps
order 9 ",\"note\":\"$note\"" >>"$src"          # 2^40 steps to match
for i in 10 11 12 13 14 15; do order "$i"; done >>"$src"
echo "# bomb lines: $(sed -n 6,9p "$src" | awk '{ printf "%d ", length($0) }')bytes"

if [ "$MODE" = pg ]; then
	store=$INBOX_TEST_PG_URL
	prefix=$tag
	q() { pgq "$1"; }
	trap 'pg_drop_prefix "$tag"' EXIT
else
	store="sqlite:$dir/t.db"
	prefix=""
	q() { sq "$dir/t.db" "$1"; }
fi
write_config "$dir/base.yaml" "$store" "jsonl:$src?checkpoint=$dir/cp" \
	"${prefix}invoices" "$prefix" 10 0ms
sed "s|^    fingerprint: /data|    fingerprint: /data\n    schema: order.schema.json|" \
	"$dir/base.yaml" >"$dir/inbox.yaml"

t0=$(now_ms)
timeout 60 "$BIN" run "$dir/inbox.yaml" --once >"$dir/run.out" 2>&1
rc=$?
ms=$(($(now_ms) - t0))
echo "# inbox run --once: exit $rc after $ms ms"
expect_eq "run: finishes, exit 0 (124: killed after 60 s)" "$rc" 0
check "run: within 30 s" [ "$ms" -lt 30000 ]
expect_eq "the good orders and the valid tree are applied" \
	"$(q "SELECT COUNT(*) FROM ${prefix}invoices")" 12
expect_eq "the orders behind the bombs are applied" \
	"$(q "SELECT COUNT(*) FROM ${prefix}invoices WHERE order_id >= 'ord-000010'")" 6
expect_eq "the valid tree is applied" \
	"$(q "SELECT COUNT(*) FROM ${prefix}invoices WHERE order_id = 'ord-000006'")" 1
expect_eq "three dead letters" \
	"$(q "SELECT COUNT(*) FROM ${prefix}dead_letters")" 3
reason() { q "SELECT reason FROM ${prefix}dead_letters WHERE message_id = '$1'"; }
expect_eq "wrong kind at the bottom: a violation" "$(reason m7)" \
	"schema violation at /tree: oneOf: matches none of the 2 schemas"
case "$(reason m8)" in
"schema validation exceeded "*" steps (the budget of a message of "*" bytes): too costly to validate against this schema"*)
	ok "patternProperties: the step budget" ;;
*) fail "patternProperties: the step budget" "got: $(reason m8)" ;;
esac
case "$(reason m9)" in
"schema validation stopped: pattern: \"aaaa"*"\" is too costly to match against \"^(a+)+\$\""*)
	ok "pattern in anyOf: stopped, not matched" ;;
*) fail "pattern in anyOf: stopped, not matched" "got: $(reason m9)" ;;
esac
summary
