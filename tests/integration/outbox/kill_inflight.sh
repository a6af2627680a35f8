#!/bin/sh
# A dispatcher SIGKILLed with many calls in flight loses nothing and sends
# nothing twice: 100 orders (a charge, idempotent, and an email, without
# idempotency, reconciled by reference) on PostgreSQL, a provider that
# performs each request at once and answers 800 ms later. `inbox
# dispatch` is killed once the provider holds 20 or more of its calls;
# those effects happen anyway, the dispatcher never learns it. A second
# dispatcher takes the rows over when their leases expire: the charges
# are sent again with the same keys (the provider answers from its stored
# first response), the emails are reconciled first — found, so not sent
# again. At the end every order is charged once and emailed once, every
# row is done, and the takeovers and reconciliations did happen.
#   kill_inflight.sh INBOX_BIN PROVIDER_BIN
set -u
BIN=$1
PROV=$2
. "$(dirname "$0")/lib.sh"
need_pg

ORDERS=100
dir=$(mktmp)
tag="obkill$$_"
dpid=""
cleanup() {
	[ -n "$dpid" ] && kill -KILL "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
	dpid=""
	stop_provider
	pg_drop_prefix "$tag"
}
exit_trap=cleanup
trap cleanup EXIT
start_provider "$dir" --latency-ms 800 --seed 17 || exit 1
orders "$dir/orders.jsonl" $ORDERS
outbox_config "$dir/inbox.yaml" "$INBOX_TEST_PG_URL" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/orders.checkpoint" "$tag" \
	"{timeout: 2s, connect_timeout: 1s, backoff: 100ms, max_backoff: 500ms, lease: 6s, poll: 50ms}"
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log"
expect_eq "the consumer reads the orders" "$?" 0

"$BIN" dispatch "$dir/inbox.yaml" 2>"$dir/a.log" &
dpid=$!
many() { [ "$(pstat in_flight)" -ge 20 ]; }
check "the provider holds 20 calls or more of the dispatcher" wait_until 20 many
held=$(pstat in_flight)
kill -KILL "$dpid" 2>/dev/null
wait "$dpid" 2>/dev/null
expect_eq "SIGKILL with $held calls in flight" "$?" 137
dpid=""
inflight=$(pgq "SELECT count(*) FROM ${tag}outbox WHERE state = 'in_flight'")
echo "# killed with $held calls at the provider, $inflight rows in flight in the store"
check "rows were left in flight" [ "$inflight" -ge 20 ]
idle() { [ "$(pstat in_flight)" = 0 ]; }
wait_until 10 idle # the provider finishes what it was given

"$BIN" dispatch "$dir/inbox.yaml" --drain --timeout 90s 2>"$dir/b.log"
expect_eq "a second dispatcher drains the outbox" "$?" 0
expect_eq "every row done" \
	"$(pgq "SELECT count(*) FROM ${tag}outbox WHERE state = 'done'")" $((2 * ORDERS))
expect_eq "dead letters" "$(pgq "SELECT count(*) FROM ${tag}dead_letters")" 0
expect_eq "each order charged once" "$(pstat pay.charges)" $ORDERS
expect_eq "no order charged twice" "$(pstat pay.orders_charged_twice)" 0
expect_eq "no 409 (same keys, same bodies)" "$(pstat pay.conflicts)" 0
expect_eq "each order emailed once" "$(pstat email.sent)" $ORDERS
expect_eq "no order emailed twice" "$(pstat email.orders_emailed_twice)" 0
expect_eq "no reference sent twice" "$(pstat email.references_sent_twice)" 0
stopped=$(grep '"event":"dispatcher_stopped"' "$dir/b.log")
field() { printf '%s' "$stopped" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
echo "# second dispatcher: lease_expired $(field lease_expired), reconciliations $(field reconciliations), found $(field reconciled_found); provider: $(curl -s "http://127.0.0.1:$PROV_PORT/stats" | jq -c '{pay: .pay | {requests, replays}, email: .email | {requests, lookups, found}}')"
check "the second dispatcher took rows over (lease_expired > 0)" \
	[ "$(field lease_expired)" -gt 0 ]
check "it reconciled emails and found some sent (reconciled_found > 0)" \
	[ "$(field reconciled_found)" -gt 0 ]
expect_eq "every reconcile query reached the provider" \
	"$(field reconciliations)" "$(pstat email.lookups)"
check "charges in flight at the kill were sent again with their keys (replays > 0)" \
	[ "$(pstat pay.replays)" -gt 0 ]
summary
