#!/bin/sh
# The whole life of an outbox row and its dead letter, by the operator's
# commands (before: only hand-written SQL could retry a payment that died
# while the provider was down):
#   - charges refused by the provider (HTTP 500, max_attempts 1) end dead;
#     `outbox list` filters them by state, provider, consumer, key, age
#     (text and --json, one object per line), `outbox show` gives the row;
#   - `outbox retry --state dead` re-arms them (idempotent provider:
#     failed, attempts 0, the same idempotency key, dead letters resolved)
#     and the next dispatch charges each order once;
#   - a done or in-flight row is refused; a dead non-idempotent row is
#     re-armed as unknown (reconciled first), or as failed with
#     --not-performed;
#   - `outbox drop` by filter is a dry run without --yes, drops and logs
#     (outbox_dropped) with it;
#   - `inbox purge` removes done outbox rows past the inbox window and
#     resolved dead letters past theirs (--dry-run counts; a shorter
#     outbox retention is refused); pending ones stay;
#   - `dlq drop` by filter (dry run without --yes); --json of purge,
#     migrate, dlq replay.
#   lifecycle.sh INBOX_BIN PROVIDER_BIN sqlite|pg
set -u
BIN=$1
PROV=$2
MODE=$3
. "$(dirname "$0")/lib.sh"
[ "$MODE" = pg ] && need_pg

dir=$(mktmp)
tag="oblife$$_"
if [ "$MODE" = pg ]; then
	store=$INBOX_TEST_PG_URL
	prefix=$tag
	q() { pgq "$1"; }
	ago() { echo "now() - interval '$1 days'"; }
	trap 'stop_provider; pg_drop_prefix "$tag"' EXIT
else
	store="sqlite:$dir/t.db"
	prefix=""
	q() { sq "$dir/t.db" "$1"; }
	ago() { echo "(CAST(strftime('%s','now') AS INTEGER) - $1 * 86400) * 1000"; }
	trap 'stop_provider' EXIT
fi
ob="${prefix}outbox"
dlt="${prefix}dead_letters"
start_provider "$dir" --seed 5 || exit 1
orders "$dir/orders.jsonl" 3
outbox_config "$dir/inbox.yaml" "$store" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/orders.checkpoint" "$prefix" \
	"{max_attempts: 1, timeout: 500ms, connect_timeout: 300ms, backoff: 100ms, lease: 3s, poll: 50ms}"

"$BIN" migrate "$dir/inbox.yaml" --json >"$dir/migrate.json" 2>"$dir/migrate.err"
expect_eq "migrate --json: exit 0" "$?" 0
check "migrate --json: one object naming the consumer and the schema" \
	jqok 'select(.consumer == "billing.order-confirmed.v1") | .schema_version >= 4' "$dir/migrate.json"
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log"
expect_eq "the consumer reads the orders" "$?" 0
pfault pay 500 3
"$BIN" dispatch "$dir/inbox.yaml" --drain --timeout 30s 2>"$dir/dispatch1.log"
expect_eq "three charges dead" "$(q "SELECT count(*) FROM $ob WHERE step = 'charge' AND state = 'dead'")" 3
expect_eq "three emails done" "$(q "SELECT count(*) FROM $ob WHERE step = 'email' AND state = 'done'")" 3

# ---- list, show ----------------------------------------------------------
"$BIN" outbox list "$dir/inbox.yaml" >"$dir/list.out" 2>&1
expect_eq "outbox list: exit 0" "$?" 0
check "list: six rows" grep -q "^(6 outbox rows)" "$dir/list.out"
check "list: a dead charge with its provider and error" \
	grep -Eq "^[0-9]+ +dead +1 .*http://127.0.0.1:$PROV_PORT .*charge .*500" "$dir/list.out"
check "list: every column starts under its header" awk '
	NR == 1 { n = split("STATE|ATTEMPTS|AGE|PROVIDER|CONSUMER|KEY|STEP|LAST ERROR", h, "|")
		for (c = 1; c <= n; c++) at[c] = index($0, h[c]); next }
	/^\(/ { next }
	{ for (c = 1; c <= n; c++)
		if (substr($0, at[c] - 1, 1) != " " || substr($0, at[c], 1) == " ") bad = 1 }
	END { exit bad }' "$dir/list.out"
"$BIN" outbox list "$dir/inbox.yaml" --state dead --json >"$dir/dead.json"
expect_eq "list --state dead --json: 3 objects" "$(jq -s length "$dir/dead.json")" 3
expect_eq "list --json: one object per line" "$(wc -l <"$dir/dead.json" | tr -d ' ')" 3
expect_eq "list --json: steps" "$(jq -r .step "$dir/dead.json" | sort -u)" charge
expect_eq "list --provider (a URL of it): 6" \
	"$("$BIN" outbox list "$dir/inbox.yaml" --provider "http://127.0.0.1:$PROV_PORT/pay?x=1" --json | jq -s length)" 6
expect_eq "list --provider another: 0" \
	"$("$BIN" outbox list "$dir/inbox.yaml" --provider "http://127.0.0.1:1" --json | jq -s length)" 0
expect_eq "list --key: 2 rows" \
	"$("$BIN" outbox list "$dir/inbox.yaml" --key order-confirmed:ord-0002 --json | jq -s length)" 2
expect_eq "list --older-than 1h: none yet" \
	"$("$BIN" outbox list "$dir/inbox.yaml" --older-than 1h --json | jq -s length)" 0
"$BIN" outbox list "$dir/inbox.yaml" --state bogus >"$dir/bogus.out" 2>&1
expect_eq "list --state bogus: usage error (2)" "$?" 2
id1=$(jq -r .id "$dir/dead.json" | head -1)
key1=$(q "SELECT idempotency_key FROM $ob WHERE id = $id1")
"$BIN" outbox show "$dir/inbox.yaml" "$id1" >"$dir/show.out" 2>&1
expect_eq "outbox show: exit 0" "$?" 0
check "show: the idempotency key" grep -q "^idempotency key  *$key1" "$dir/show.out"
check "show: the body" grep -q '"orderId"' "$dir/show.out"
"$BIN" outbox show "$dir/inbox.yaml" "$id1" --json >"$dir/show.json"
check "show --json: state, attempts, body" \
	jqok '.state == "dead" and .attempts == 1 and (.body | fromjson | .currency) == "EUR"' "$dir/show.json"
"$BIN" outbox show "$dir/inbox.yaml" 999999 >/dev/null 2>&1
expect_eq "show of no row: exit 1" "$?" 1
expect_eq "three pending outbox dead letters" \
	"$(q "SELECT count(*) FROM $dlt WHERE position LIKE 'outbox:%' AND replayed_at IS NULL")" 3
expect_eq "dlq list --outbox: the three" \
	"$("$BIN" dlq list "$dir/inbox.yaml" --outbox --json | jq -s length)" 3
expect_eq "dlq list --messages: none" \
	"$("$BIN" dlq list "$dir/inbox.yaml" --messages --json | jq -s length)" 0

# What happened to this message: its record, dead letter, outbox rows.
k1=$(q "SELECT key FROM $ob WHERE id = $id1")
"$BIN" inspect "$dir/inbox.yaml" billing.order-confirmed.v1 "$k1" --json >"$dir/inspect.json" 2>&1
check "inspect KEY --json: the record, its dead letter and both outbox rows" \
	jqok '.status == "completed" and (.dead_letters | length) == 1 and (.outbox | map(.step) | sort) == ["charge", "email"]' "$dir/inspect.json"
"$BIN" inspect "$dir/inbox.yaml" billing.order-confirmed.v1 --position "outbox:$id1" >"$dir/inspect_pos.out" 2>&1
expect_eq "inspect --position outbox:ID: exit 0" "$?" 0
check "  the row's key and its outbox rows" sh -c "grep -q '^key \.* $k1\$' '$dir/inspect_pos.out' &&
	grep -Eq '^outbox \.* .*$id1 charge dead \(1 attempt\)' '$dir/inspect_pos.out'"

# ---- retry ----------------------------------------------------------------
"$BIN" outbox retry "$dir/inbox.yaml" >/dev/null 2>&1
expect_eq "retry without ids or filters: usage (2)" "$?" 2
"$BIN" outbox retry "$dir/inbox.yaml" --state dead --json >"$dir/retry.json" 2>"$dir/retry.err"
expect_eq "retry --state dead: exit 0" "$?" 0
expect_eq "retry --json: three rows, one object per line" "$(wc -l <"$dir/retry.json" | tr -d ' ')" 3
expect_eq "retry: from/to" "$(jq -r '.from + ">" + .to' "$dir/retry.json" | sort -u)" "dead>failed"
expect_eq "retry: rows failed, attempts 0, due" \
	"$(q "SELECT count(*) FROM $ob WHERE step = 'charge' AND state = 'failed' AND attempts = 0")" 3
expect_eq "retry: the idempotency key kept" "$(q "SELECT idempotency_key FROM $ob WHERE id = $id1")" "$key1"
expect_eq "retry: the dead letters resolved" \
	"$(q "SELECT count(*) FROM $dlt WHERE position LIKE 'outbox:%' AND replayed_at IS NULL")" 0
"$BIN" dispatch "$dir/inbox.yaml" --drain --timeout 30s 2>"$dir/dispatch2.log"
expect_eq "after the retry, the charges are done" \
	"$(q "SELECT count(*) FROM $ob WHERE step = 'charge' AND state = 'done'")" 3
expect_eq "each order charged once by the provider" "$(pstat pay.charges)" 3
"$BIN" outbox retry "$dir/inbox.yaml" "$id1" >"$dir/retry_done.out" 2>&1
expect_eq "retry of a done row: exit 1" "$?" 1
check "retry of a done row: says it was performed" grep -q "the effect was performed" "$dir/retry_done.out"
# A non-idempotent effect that died (a 5xx: it may have happened).
e1=$(q "SELECT id FROM $ob WHERE step = 'email' ORDER BY id LIMIT 1")
e2=$(q "SELECT id FROM $ob WHERE step = 'email' ORDER BY id LIMIT 1 OFFSET 1")
q "UPDATE $ob SET state = 'dead', last_status = 500, done_at = NULL WHERE id IN ($e1, $e2)" >/dev/null
"$BIN" outbox retry "$dir/inbox.yaml" "$e1" >"$dir/retry_e1.out" 2>&1
expect_eq "retry of a dead non-idempotent row: exit 0" "$?" 0
expect_eq "  re-armed as unknown (reconciled before any re-send)" \
	"$(q "SELECT state FROM $ob WHERE id = $e1")" unknown
"$BIN" outbox retry "$dir/inbox.yaml" "$e2" --not-performed >/dev/null 2>&1
expect_eq "  with --not-performed: failed (sent again)" "$(q "SELECT state FROM $ob WHERE id = $e2")" failed
q "UPDATE $ob SET state = 'in_flight' WHERE id = $e2" >/dev/null
"$BIN" outbox retry "$dir/inbox.yaml" "$e2" >"$dir/retry_if.out" 2>&1
expect_eq "retry of an in-flight row: exit 1" "$?" 1
check "  says a dispatcher holds it" grep -q "a dispatcher holds it" "$dir/retry_if.out"
expect_eq "  left in flight" "$(q "SELECT state FROM $ob WHERE id = $e2")" in_flight
q "UPDATE $ob SET state = 'dead' WHERE id = $e2" >/dev/null

# ---- drop -----------------------------------------------------------------
"$BIN" outbox drop "$dir/inbox.yaml" --state dead >"$dir/drop_dry.out" 2>&1
expect_eq "drop by filter without --yes: exit 0" "$?" 0
check "  a dry run" grep -q "1 outbox row would be dropped" "$dir/drop_dry.out"
expect_eq "  nothing dropped" "$(q "SELECT count(*) FROM $ob WHERE id = $e2")" 1
INBOX_LOG_LEVEL=info "$BIN" outbox drop "$dir/inbox.yaml" --state dead --yes >"$dir/drop.out" 2>"$dir/drop.log"
expect_eq "drop --state dead --yes: exit 0" "$?" 0
expect_eq "  the row is gone" "$(q "SELECT count(*) FROM $ob WHERE id = $e2")" 0
check "  logged" jqok "select(.event == \"outbox_dropped\") | .outbox_id == $e2" "$dir/drop.log"
"$BIN" outbox drop "$dir/inbox.yaml" "$id1" >"$dir/drop_done.out" 2>&1
expect_eq "drop of a done row: refused (exit 1)" "$?" 1

# ---- purge ------------------------------------------------------------------
# Two done rows done 8 days ago (beyond the 7d window), a resolved dead
# letter resolved 31 days ago, a pending one as old.
q "UPDATE $ob SET done_at = $(ago 8) WHERE step = 'charge' AND id IN (SELECT id FROM $ob WHERE step = 'charge' ORDER BY id LIMIT 2)" >/dev/null
d1=$(q "SELECT id FROM $dlt WHERE position LIKE 'outbox:%' ORDER BY id LIMIT 1")
d2=$(q "SELECT id FROM $dlt WHERE position LIKE 'outbox:%' ORDER BY id LIMIT 1 OFFSET 1")
q "UPDATE $dlt SET replayed_at = $(ago 31) WHERE id = $d1" >/dev/null
q "UPDATE $dlt SET replayed_at = NULL, created_at = $(ago 31), last_seen_at = $(ago 31) WHERE id = $d2" >/dev/null
"$BIN" purge "$dir/inbox.yaml" --dry-run --json >"$dir/purge_dry.json" 2>"$dir/purge_dry.err"
expect_eq "purge --dry-run --json: exit 0" "$?" 0
check "  counts 2 outbox rows and 1 dead letter" \
	jqok '.dry_run and .outbox_rows == 2 and .dead_letters == 1 and .outbox_retention_s == 604800' "$dir/purge_dry.json"
expect_eq "  nothing deleted" "$(q "SELECT count(*) FROM $ob WHERE step = 'charge'")" 3
"$BIN" purge "$dir/inbox.yaml" --outbox-retention 1h >"$dir/purge_short.out" 2>&1
expect_eq "purge --outbox-retention shorter than the window: refused (2)" "$?" 2
check "  says why" grep -q "shorter than the 604800s inbox window" "$dir/purge_short.out"
"$BIN" purge "$dir/inbox.yaml" >"$dir/purge.out" 2>&1
expect_eq "purge: exit 0" "$?" 0
check "purge: says what went" sh -c "grep -q 'deleted 2 done outbox rows older than 7d' '$dir/purge.out' &&
	grep -q 'deleted 1 resolved dead letter older than 30d' '$dir/purge.out'"
expect_eq "  the old done rows are gone, the recent one stays" "$(q "SELECT count(*) FROM $ob WHERE step = 'charge'")" 1
expect_eq "  the resolved dead letter is gone" "$(q "SELECT count(*) FROM $dlt WHERE id = $d1")" 0
expect_eq "  the pending one stays" "$(q "SELECT count(*) FROM $dlt WHERE id = $d2")" 1

# ---- dlq drop by filter, replay --json ------------------------------------------
"$BIN" dlq drop "$dir/inbox.yaml" --outbox --pending >"$dir/dlq_dry.out" 2>&1
expect_eq "dlq drop --outbox --pending without --yes: exit 0" "$?" 0
check "  a dry run" grep -q "would drop 1 dead letter$" "$dir/dlq_dry.out"
expect_eq "  nothing dropped" "$(q "SELECT count(*) FROM $dlt WHERE id = $d2")" 1
"$BIN" dlq drop "$dir/inbox.yaml" --outbox --older-than 30d --yes --json >"$dir/dlq_drop.json" 2>&1
expect_eq "dlq drop --older-than 30d --yes: exit 0" "$?" 0
check "  --json: one dropped" jqok '.dropped == 1' "$dir/dlq_drop.json"
expect_eq "  the old one is gone" "$(q "SELECT count(*) FROM $dlt WHERE id = $d2")" 0
left=$(q "SELECT count(*) FROM $dlt")
"$BIN" dlq drop "$dir/inbox.yaml" >/dev/null 2>&1
expect_eq "dlq drop without ids or filters: usage (2)" "$?" 2
expect_eq "  nothing dropped" "$(q "SELECT count(*) FROM $dlt")" "$left"
dl3=$(q "SELECT id FROM $dlt ORDER BY id LIMIT 1")
"$BIN" dlq replay "$dir/inbox.yaml" "$dl3" --json >"$dir/replay.json" 2>&1
check "dlq replay --json: the refusal as an object" \
	jqok "select(.id == $dl3) | .outcome == \"refused\"" "$dir/replay.json"
# No secret of a row's URL reaches the output (its user's password, a key
# parameter), in any form; the headers are never shown.
q "UPDATE $ob SET target = 'http://svc:Pw0rdS3cr3t@127.0.0.1:$PROV_PORT/pay?api_key=K3yS3cr3t', headers = '{\"Authorization\":\"Bearer T0kS3cr3t\"}' WHERE id = $e1" >/dev/null
for form in "list:" "list:--json" "show:$e1" "show:$e1 --json"; do
	# shellcheck disable=SC2086 # the words of the form
	"$BIN" outbox "${form%%:*}" "$dir/inbox.yaml" ${form#*:} >"$dir/secret.out" 2>&1
	expect_eq "outbox $form: exit 0" "$?" 0
	check "outbox $form: no secret" sh -c "! grep -Eq 'Pw0rdS3cr3t|K3yS3cr3t|T0kS3cr3t' '$dir/secret.out'"
done
check "show --json: the redacted URL" jqok ".url | startswith(\"http://svc:***@127.0.0.1:$PROV_PORT/pay\")" "$dir/secret.out"
summary
