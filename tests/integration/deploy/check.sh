#!/bin/sh
# inbox check CONFIG [--connect]: what `inbox run` validates at start-up,
# without consuming or writing anything; exit codes as run's (0, 2 usage,
# 3 config, 4 cannot reach). Against the suite's PostgreSQL and Redis:
# good and bad configs, --connect to a store and a source that answer and
# to ones that do not, and nothing written by a check (no inbox tables,
# no setup table, no consumer registered, no Redis group).
#   check.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
need_pg
need_suite_server INBOX_TEST_REDIS_URL Redis redis.sh

dir=$(mktmp)
tag="chk$$_"
stream="chk$$"
trap 'pg_drop_prefix "$tag"; redis-cli -u "$INBOX_TEST_REDIS_URL" DEL "$stream" >/dev/null 2>&1' EXIT
: >"$dir/orders.jsonl"

# cfg FILE STORE SOURCE [AUTO_MIGRATE] [RETENTION] [COLUMN]
cfg() {
	cat >"$1" <<CFG
store: $2
table_prefix: "$tag"
auto_migrate: ${4:-false}
consumers:
  - name: billing.check
    source: $3
    key: "inv:{/orderId}"
    retention: ${5:-7d}
    setup: |
      CREATE TABLE IF NOT EXISTS ${tag}invoices (order_id TEXT PRIMARY KEY);
    effect:
      - sql: INSERT INTO ${tag}invoices (${6:-order_id}) VALUES (\$1)
        params: [/orderId]
CFG
}
pg_tables() { pgq "SELECT count(*) FROM pg_tables WHERE tablename LIKE '${tag}%'"; }
JSONL="jsonl:$dir/orders.jsonl"

# --- without --connect: the file only ---------------------------------
cfg "$dir/good.yaml" "$INBOX_TEST_PG_URL" "$JSONL"
run_rc "$dir/out" "$BIN" check "$dir/good.yaml"
expect_eq "a good config: exit 0" "$rc" 0
check "it says which consumer is valid" grep -q "ok   consumer billing.check: config valid" "$dir/out"

printf 'store: sqlite:x.db\nconsumers:\n  - name: a\n    source: jsonl:x\n    efect: []\n' >"$dir/typo.yaml"
run_rc "$dir/out" "$BIN" check "$dir/typo.yaml"
expect_eq "an unknown key: exit 3 (config error)" "$rc" 3
check "the error has FILE:LINE and a suggestion" grep -q "typo.yaml:5.*effect" "$dir/out"

printf 'store: sqlite:x.db\nconsumers:\n  - name: a\n    source: nosuch://x\n    effect: {sql: "SELECT 1"}\n' >"$dir/scheme.yaml"
run_rc "$dir/out" "$BIN" check "$dir/scheme.yaml"
expect_eq "an unknown source scheme: exit 3" "$rc" 3
run_rc "$dir/out" "$BIN" run "$dir/scheme.yaml" --once
expect_eq "... as inbox run says" "$rc" 3

# Each source's URL is parsed as its open would, connecting to nothing:
# what the daemon would refuse at start is refused here, with the
# source's own reason and never the URL's password.
bad_src() { # NAME SOURCE EXPECT-IN-OUTPUT
	cfg "$dir/src.yaml" "sqlite:$dir/x.db" "\"$2\""
	run_rc "$dir/out" "$BIN" check "$dir/src.yaml"
	expect_eq "$1: exit 3" "$rc" 3
	check "$1: the reason" grep -qF "$3" "$dir/out"
	case "$2" in *Sup3rS3cret*)
		check "$1: no password shown" sh -c "! grep -q Sup3rS3cret '$dir/out'" ;;
	esac
}
bad_src "kafka, a misspelt parameter" "kafka://127.0.0.1:1/orders?grup=billing" \
	'kafka: unknown URL parameter "grup"'
bad_src "kafka, an unknown librdkafka property" \
	"kafka://127.0.0.1:1/orders?rdkafka.no.such.property=1&rdkafka.sasl.password=Sup3rS3cret" \
	"no.such.property"
bad_src "amqp, a client certificate that cannot be read" \
	"amqps://app:Sup3rS3cret@127.0.0.1:1/orders?tls_cert=/nonexistent.pem" \
	'amqp: tls_cert: cannot read "/nonexistent.pem"'
bad_src "redis, an unknown parameter" "redis://:Sup3rS3cret@127.0.0.1:1/orders?group=g&claim_idel=5s" \
	"redis: unknown parameter 'claim_idel'"
bad_src "nats, max_ack_pending under the batch size" \
	"nats://app:Sup3rS3cret@127.0.0.1:1/ORDERS?durable=d&max_ack_pending=10" \
	"max_ack_pending must be at least the batch size"
bad_src "jsonl, stdin with a checkpoint" "jsonl:-?checkpoint=$dir/ck" \
	"stdin has no checkpoint"
check "the error names the file, the line and the consumer" \
	grep -q "src.yaml:[0-9]*: consumer \"billing.check\": source jsonl:-" "$dir/out"
cfg "$dir/src.yaml" "sqlite:$dir/x.db" "\"redis://:Sup3rS3cret@127.0.0.1:1/orders?group=g&claim_idel=5s\"" true
run_rc "$dir/out" "$BIN" run "$dir/src.yaml" --once
expect_eq "... as inbox run refuses it (exit 3)" "$rc" 3
for u in "kafka://127.0.0.1:1/orders?group=billing" "nats://127.0.0.1:1/ORDERS?durable=d" \
	"amqp://127.0.0.1:1/orders" "redis://127.0.0.1:1/orders?group=g"; do
	cfg "$dir/src.yaml" "sqlite:$dir/x.db" "\"$u\""
	run_rc "$dir/out" "$BIN" check "$dir/src.yaml"
	expect_eq "${u%%:*}: a good URL to a port nothing listens on: exit 0 (nothing connected)" "$rc" 0
done

run_rc "$dir/out" "$BIN" check "$dir/good.yaml" --consumer nobody
expect_eq "an unknown --consumer: exit 2 (as run)" "$rc" 2
run_rc "$dir/out" "$BIN" check
expect_eq "no config: exit 2" "$rc" 2
run_rc "$dir/out" "$BIN" check "$dir/nonexistent.yaml"
expect_eq "a missing file: exit 3" "$rc" 3
expect_eq "nothing was created by the checks" "$(pg_tables)" 0

# --- --connect: the store (read-only) ---------------------------------
run_rc "$dir/out" "$BIN" check "$dir/good.yaml" --connect
expect_eq "--connect, tables never migrated (auto_migrate false): exit 4 as run" "$rc" 4
check "... with the 'inbox migrate' hint" grep -q 'hint: run "inbox migrate' "$dir/out"
run_rc "$dir/out.run" "$BIN" run "$dir/good.yaml" --once --connect-timeout 0
expect_eq "... inbox run exits 4 too" "$rc" 4

cfg "$dir/auto.yaml" "$INBOX_TEST_PG_URL" "$JSONL" true
run_rc "$dir/out" "$BIN" check "$dir/auto.yaml" --connect
expect_eq "--connect, auto_migrate true: exit 0 (start-up would create them)" "$rc" 0
check "... and it says so" grep -q "created or upgraded at start-up" "$dir/out"
expect_eq "... and created nothing" "$(pg_tables)" 0

# The tables exist (migrate runs the setup SQL too): drop the setup's
# table, so a check that ran the setup for real would bring it back.
"$BIN" migrate "$dir/good.yaml" >"$dir/migrate.out" 2>&1 || cat "$dir/migrate.out"
pgq "DROP TABLE ${tag}invoices" >/dev/null
ntab=$(pg_tables)
run_rc "$dir/out" "$BIN" check "$dir/good.yaml" --connect
expect_eq "--connect against the suite's PostgreSQL: exit 0" "$rc" 0
check "... store and source reachable" grep -q "store postgresql://.*reachable; source jsonl:.*reachable" "$dir/out"
expect_eq "... the setup SQL ran in a transaction rolled back (no table created)" "$(pg_tables)" "$ntab"
expect_eq "... no consumer registered" "$(pgq "SELECT count(*) FROM ${tag}consumers")" 0

cfg "$dir/col.yaml" "$INBOX_TEST_PG_URL" "$JSONL" false 7d no_such_column
run_rc "$dir/out" "$BIN" check "$dir/col.yaml" --connect
expect_eq "an effect naming a missing column: exit 3" "$rc" 3
check "... FILE:LINE:COL and the database's reason" grep -q "col.yaml:[0-9]*:[0-9]*: .*no_such_column" "$dir/out"

# The retention window is registered by the first run; another one is
# refused at start-up (exit 3): the check says so first.
echo '{"id":"1","orderId":"o1"}' >"$dir/orders.jsonl"
run_rc "$dir/out" "$BIN" run "$dir/good.yaml" --once
expect_eq "a first run registers the window (7d)" "$rc" 0
cfg "$dir/ret.yaml" "$INBOX_TEST_PG_URL" "$JSONL" false 2d
run_rc "$dir/out" "$BIN" check "$dir/ret.yaml" --connect
expect_eq "--connect with another retention window: exit 3" "$rc" 3
check "... naming both windows" grep -q "retention 2d differs from the 7d" "$dir/out"
run_rc "$dir/out" "$BIN" run "$dir/ret.yaml" --once
expect_eq "... as inbox run refuses it" "$rc" 3
run_rc "$dir/out" "$BIN" check "$dir/ret.yaml"
expect_eq "without --connect the file alone is valid (exit 0)" "$rc" 0

# A store that does not answer: nothing listens on the port.
dead=$(echo "$INBOX_TEST_PG_URL" | sed 's/127\.0\.0\.1:[0-9]*/127.0.0.1:1/')
cfg "$dir/dead.yaml" "$dead" "$JSONL"
run_rc "$dir/out" "$BIN" check "$dir/dead.yaml" --connect
expect_eq "--connect, store unreachable: exit 4 at once (no waiting)" "$rc" 4

# --- --connect: the source ---------------------------------------------
cfg "$dir/redis.yaml" "$INBOX_TEST_PG_URL" "$INBOX_TEST_REDIS_URL/$stream?group=g1"
run_rc "$dir/out" "$BIN" check "$dir/redis.yaml" --connect
expect_eq "--connect with the suite's Redis: exit 0" "$rc" 0
redis-cli -u "$INBOX_TEST_REDIS_URL" XADD "$stream" '*' payload '{"id":"r1","orderId":"r1"}' >/dev/null
pending=$(redis-cli -u "$INBOX_TEST_REDIS_URL" XPENDING "$stream" g1 | head -1)
expect_eq "... nothing read from the stream (no pending entry)" "$pending" 0
cfg "$dir/redis-dead.yaml" "$INBOX_TEST_PG_URL" "redis://127.0.0.1:1/$stream?group=g1"
run_rc "$dir/out" "$BIN" check "$dir/redis-dead.yaml" --connect
expect_eq "--connect, source unreachable: exit 4" "$rc" 4
check "... naming the source" grep -q "cannot open source redis://127.0.0.1:1" "$dir/out"
expect_eq "the invoices table holds only the run's row" "$(pgq "SELECT count(*) FROM ${tag}invoices")" 1
summary
