#!/bin/sh
# `inbox demo` runs without a server in well under 20 s, kills the daemon
# mid-stream, and ends with one invoice per order; its config is the one
# shipped in examples/demo/inbox.yaml.
#   demo.sh INBOX_BIN SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$(dirname "$0")/lib.sh"

dir=$(mktmp)
t0=$(now_ms)
"$BIN" demo --dir "$dir/demo" >"$dir/out" 2>&1
rc=$?
t1=$(now_ms)
expect_eq "demo exits 0" "$rc" 0
check "demo takes < 20 s ($((t1 - t0)) ms)" [ $((t1 - t0)) -lt 20000 ]
for want in "messages read ........ 235" "applied .............. 200" \
	"conflicts ............ 1" "dead letters ......... 3" \
	"invoices created ..... 200" "killed with SIGKILL once mid-stream"; do
	if grep -qF "$want" "$dir/out"; then ok "summary: $want"; else fail "summary: $want" "$(cat "$dir/out")"; fi
done
expect_eq "one invoice per order in the database" \
	"$(sqlite3 "$dir/demo/billing.db" "SELECT COUNT(*) || '/' || COUNT(DISTINCT order_id) FROM invoices")" "200/200"
"$BIN" demo --print-config | cmp -s - "$SRC/examples/demo/inbox.yaml"
expect_eq "the demo's config is examples/demo/inbox.yaml" "$?" 0
# The shipped config runs as documented, from any directory.
cp "$dir/demo/orders.jsonl" "$dir/orders.jsonl"
cp "$SRC/examples/demo/inbox.yaml" "$dir/inbox.yaml"
(cd / && "$BIN" run "$dir/inbox.yaml" --once 2>"$dir/run.log")
expect_eq "examples/demo/inbox.yaml runs (paths relative to the file)" "$?" 0
expect_eq "... and bills every order once" \
	"$(sqlite3 "$dir/billing.db" 'SELECT COUNT(*) FROM invoices')" 200
summary
