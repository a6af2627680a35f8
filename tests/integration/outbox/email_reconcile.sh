#!/bin/sh
# An email provider without idempotency. The intent is recorded before
# each call; after an unknown outcome the dispatcher asks the provider
# (GET /email?reference=KEY) before anything else — never a blind re-send:
#   order 1: sent, answered after the client timed out -> found, not re-sent
#   order 2: sent, connection dropped                  -> found, not re-sent
#   order 3: 500 without sending (unknown to us)       -> not found, sent
#   email_reconcile.sh INBOX_BIN PROVIDER_BIN
set -u
BIN=$1
PROV=$2
. "$(dirname "$0")/lib.sh"

dir=$(mktmp)
trap 'stop_provider' EXIT
start_provider "$dir" --slow-ms 1500 --seed 2 || exit 1
orders "$dir/orders.jsonl" 3
outbox_config "$dir/inbox.yaml" "sqlite:$dir/t.db" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/orders.checkpoint" ""
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log"
expect_eq "the consumer reads the orders" "$?" 0

# The email rows are claimed in order: the faults meet orders 1, 2, 3.
pfault email timeout 1
pfault email drop 1
pfault email 500 1
"$BIN" dispatch "$dir/inbox.yaml" --drain --timeout 30s 2>"$dir/dispatch.log"
expect_eq "dispatch --drain exits 0" "$?" 0

expect_eq "one email per order" "$(pstat email.sent)" 3
expect_eq "no order emailed twice" "$(pstat email.orders_emailed_twice)" 0
expect_eq "four sends reached the provider (order 3 twice, 500 first)" \
	"$(pstat email.requests)" 4
expect_eq "three reconcile lookups" "$(pstat email.lookups)" 3
expect_eq "two of them found the email sent" "$(pstat email.found)" 2
expect_eq "every email row done, reconciled once" \
	"$(sqlite3 "$dir/t.db" "SELECT group_concat(state || ':' || reconciliations) FROM outbox WHERE step = 'email' ORDER BY id")" \
	"done:1,done:1,done:1"
expect_eq "no dead letter" "$(sqlite3 "$dir/t.db" "SELECT count(*) FROM dead_letters")" 0
check "the reconciliations were logged" \
	grep -q '"reason":"reconciled: found (HTTP 200)"' "$dir/dispatch.log"
stats=$(grep dispatcher_stopped "$dir/dispatch.log")
case "$stats" in
*'"reconciliations":3,"reconciled_found":2,'*) ok "dispatcher counters: 3 reconciliations, 2 found" ;;
*) fail "dispatcher counters: 3 reconciliations, 2 found" "$stats" ;;
esac
expect_eq "nothing left to do" "$(undone "$dir/inbox.yaml")" 0
summary
