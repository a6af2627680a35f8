#!/bin/sh
# `inbox dlq replay` of an outbox effect's dead letter: a charge that
# failed its one allowed attempt (HTTP 500, max_attempts 1) is
# dead-lettered with its request;
# replaying it through the consumer is refused with the reason, and the
# summary counts it as refused (before: "1 not found"); `replay --all`
# says there is one such dead letter pending (before: "no pending dead
# letters" while `stats` showed one).
#   dlq_replay.sh INBOX_BIN PROVIDER_BIN
set -u
BIN=$1
PROV=$2
. "$(dirname "$0")/lib.sh"

dir=$(mktmp)
trap 'stop_provider' EXIT
start_provider "$dir" --seed 3 || exit 1
orders "$dir/orders.jsonl" 2
outbox_config "$dir/inbox.yaml" "sqlite:$dir/t.db" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/orders.checkpoint" "" \
	"{max_attempts: 1, timeout: 500ms, connect_timeout: 300ms, backoff: 100ms, lease: 3s, poll: 50ms}"
"$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log"
expect_eq "the consumer reads the orders" "$?" 0
pfault pay 500 1
"$BIN" dispatch "$dir/inbox.yaml" --drain --timeout 30s 2>"$dir/dispatch.log"
dl=$(sqlite3 "$dir/t.db" "SELECT id FROM dead_letters WHERE position LIKE 'outbox:%'")
check "the refused charge is a dead letter ($dl)" [ -n "$dl" ]

"$BIN" dlq replay "$dir/inbox.yaml" "$dl" >"$dir/replay.out" 2>&1
expect_eq "replay of it: exit 1" "$?" 1
check "replay: the refusal says why" \
	grep -q "is a failed outbox effect" "$dir/replay.out"
check "replay: counted as refused, not as not found" \
	grep -q "0 not found, 1 refused" "$dir/replay.out"

"$BIN" dlq replay "$dir/inbox.yaml" --all >"$dir/all.out" 2>&1
expect_eq "replay --all: exit 0 (nothing to replay)" "$?" 0
check "replay --all: names the pending outbox dead letter" \
	grep -q "1 pending dead letter of failed outbox effects" "$dir/all.out"
summary
