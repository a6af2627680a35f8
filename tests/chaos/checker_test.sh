#!/bin/sh
# The chaos harness's own checks, without servers (part of make test, a
# second or so): the stream generator makes what it promises, and the
# checker and the recovery figures count what a store holds — a perfect
# store gives zeros, a store with a lost order, a doubled order, a row
# for a rejected order, a valid order dead-lettered, a bad message
# dead-lettered twice or with the wrong reason, or not at all, gives
# exactly those counts.
#   checker_test.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
INBOX_IT_DIR=$(cd "$here/../integration" && pwd)
group=chaos
. "$INBOX_IT_DIR/common.sh"
. "$here/lib.sh"
dir=$(mktmp)
STORE=sqlite
prefix=""

# --- The stream ---------------------------------------------------------------
orders_seed=7 gen_stream "$dir/stream" 1000 10
expected "$dir/stream" "$dir"
expect_eq "1000 valid orders expected" "$(wc -l <"$dir/valid" | tr -d ' ')" 1000
expect_eq "20 bad messages expected" "$(wc -l <"$dir/bad" | tr -d ' ')" 20
expect_eq "10 of them malformed" "$(grep -c ' malformed$' "$dir/bad")" 10
lines=$(wc -l <"$dir/stream" | tr -d ' ')
# 1000 + 100 copies + 50 retries + 10..20 malformed + 10..20 rejected
check "the stream has the copies and retries ($lines lines)" \
	[ "$lines" -ge 1170 -a "$lines" -le 1190 ]
check "every line is ID<TAB>PAYLOAD with the payload's id" \
	sh -c "awk -F'\t' 'NF != 2 || index(\$2, \"\\\"id\\\":\\\"\" \$1 \"\\\"\") == 0 { exit 1 }' '$dir/stream'"
cut -f2- "$dir/stream" >"$dir/payloads"
bad_json=$(jq -R 'try (fromjson | "ok") catch "bad"' "$dir/payloads" | grep -c bad)
expect_eq "only the malformed lines are not JSON" "$bad_json" \
	"$(grep -c '"id":"bad-' "$dir/payloads")"
check "some malformed message comes twice, the same bytes" \
	[ "$(grep '"id":"bad-' "$dir/payloads" | sort | uniq -d | wc -l)" -ge 1 ]
check "some rejected order comes again under a new id" \
	grep -q '"id":"rej-[0-9]*-retry"' "$dir/payloads"
check "the rejected ones have a negative total" \
	sh -c "! grep '\"id\":\"rej-' '$dir/payloads' | grep -vq '\"totalCents\":-'"
orders_seed=7 gen_stream "$dir/stream2" 1000 10
check "the same seed gives the same stream" cmp -s "$dir/stream" "$dir/stream2"

# --- The checker on a store ------------------------------------------------------
# perfect STORE: one row per valid order, one dead letter per bad message
# with its reason (from the stream, as a correct consumer would leave it)
sq "$dir/t.db" "CREATE TABLE invoices (order_id TEXT, customer TEXT,
	total_cents INTEGER, who TEXT, at_ms BIGINT);
	CREATE TABLE dead_letters (key TEXT, reason TEXT, payload BLOB)"
awk -F'\t' '
	match($2, /"orderId":"ord-[0-9]*"/) {
		o = substr($2, RSTART + 11, RLENGTH - 12)
		if (!(o in seen)) { seen[o] = 1; printf("INSERT INTO invoices VALUES (%c%s%c, %cc%c, 1, %cd1%c, %d);\n", 39, o, 39, 39, 39, 39, 39, 1000 + n++) }
		next
	}
	$1 ~ /^bad-/ && !($1 in seen) {
		seen[$1] = 1
		printf("INSERT INTO dead_letters VALUES (NULL, %cmalformed JSON: end of file%c, %c%s%c);\n", 39, 39, 39, $2, 39)
	}
	match($2, /"orderId":"rej-[0-9]*"/) {
		o = substr($2, RSTART + 11, RLENGTH - 12)
		if (!(o in seen)) { seen[o] = 1; printf("INSERT INTO dead_letters VALUES (%ccreate-invoice:%s%c, %ceffect step 1: CHECK constraint failed%c, %c%s%c);\n", 39, o, 39, 39, 39, 39, $2, 39) }
	}' "$dir/stream" >"$dir/perfect.sql"
sq "$dir/t.db" ".read $dir/perfect.sql"
check_cell "$dir"
expect_eq "a perfect store: nothing wrong" \
	"$(grep -v '^valid=\|^dl_expected=\|^dl_found=' "$dir/check" | tr '\n' ' ')" \
	"lost=0 doubled=0 doubled_keys=0 unexpected=0 dl_missing=0 dl_extra=0 dl_bad_reason=0 valid_in_dl=0 unknown_dl=0 "
expect_eq "a perfect store: 20 dead letters found" "$(grep '^dl_found=' "$dir/check")" dl_found=20

# now break it, one way each
sq "$dir/t.db" "DELETE FROM invoices WHERE order_id = 'ord-000010';
	INSERT INTO invoices VALUES ('ord-000020', 'c', 1, 'd2', 5000);
	INSERT INTO invoices VALUES ('ord-000021', 'c', 1, 'd2', 5001);
	INSERT INTO invoices VALUES ('ord-000021', 'c', 1, 'd3', 5002);
	INSERT INTO invoices VALUES ('rej-000001', 'c', -1, 'd1', 5003);
	INSERT INTO dead_letters VALUES ('create-invoice:ord-000030', 'max attempts (5) reached', '{}');
	INSERT INTO dead_letters SELECT key, reason, payload FROM dead_letters
		WHERE CAST(payload AS TEXT) LIKE '%bad-000002%';
	UPDATE dead_letters SET reason = 'connection lost'
		WHERE key = 'create-invoice:rej-000003';
	DELETE FROM dead_letters WHERE key = 'create-invoice:rej-000004';
	INSERT INTO dead_letters VALUES (NULL, 'malformed JSON', 'garbage');"
: >"$dir/problems"
check_cell "$dir"
. "$dir/check"
expect_eq "lost: the deleted order" "$lost" 1
expect_eq "doubled: three extra rows" "$doubled" 3
expect_eq "doubled: on two orders" "$doubled_keys" 2
expect_eq "unexpected: the rejected order's row" "$unexpected" 1
expect_eq "valid_in_dl: the dead-lettered order" "$valid_in_dl" 1
expect_eq "dl_extra: the malformed message's second dead letter" "$dl_extra" 1
expect_eq "dl_bad_reason: the rejected one with another reason" "$dl_bad_reason" 1
expect_eq "dl_missing: the rejected one without a dead letter" "$dl_missing" 1
expect_eq "unknown_dl: a dead letter of no message sent" "$unknown_dl" 1
check "problems name the lost order" grep -q 'lost: ord-000010' "$dir/problems"
check "problems name the doubled order" grep -q 'doubled: ord-000021 x3' "$dir/problems"

# --- Recovery figures ----------------------------------------------------------------
printf 'pg_restart 4000 4500 plain\nbroker_restart 4600 4990\nsigstop 1000 5000 d1\npg_restart 6000 6100 ns\n' \
	>"$dir/faults"
rec=$(recovery "$dir")
expect_eq "recovery: first row after each outage's end, first row of another daemon after a SIGSTOP" \
	"$(sort "$dir/recovery" | tr '\n' ' ')" \
	"broker_restart 4600 4990 10 pg_restart 4000 4500 500 pg_restart 6000 6100 - sigstop 1000 5000 4000 "
case ";$rec;" in
*";pg_restart:n=1,max=500,p50=500;"*) ok "recovery: per kind, faults with no row after them left out" ;;
*) fail "recovery: per kind, faults with no row after them left out" "$rec" ;;
esac
summary
