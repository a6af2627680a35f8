#!/bin/sh
# A password planted in the store URL never shows in what inbox prints —
# stdout or stderr of run, migrate and stats, with debug logs, when the
# connection works (trust auth ignores the password) and when it fails.
#   password.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
need_pg

SECRET=s3cr3t-planted
dir=$(mktmp)
tag="pw$$_"
trap 'pg_drop_prefix "$tag"' EXIT
# postgresql://postgres@127.0.0.1:PORT/db -> postgresql://postgres:SECRET@...
url=$(echo "$INBOX_TEST_PG_URL" | sed "s|://\([^@/:]*\)@|://\1:$SECRET@|")
case "$url" in *"$SECRET"*) ;; *) echo "cannot plant a password in $INBOX_TEST_PG_URL"; exit 1 ;; esac
port=$(echo "$url" | sed -n 's|.*@[^:/]*:\([0-9]*\)/.*|\1|p')
badport=$(echo "$url" | sed "s|:$port/|:1/|")
qurl=$(echo "$INBOX_TEST_PG_URL" | sed "s|\$|?password=$SECRET|")
gen_orders "$dir/orders.jsonl" 50 5 5
src="jsonl:$dir/orders.jsonl?checkpoint=$dir/cp"
write_config "$dir/good.yaml" "$url" "$src" "${tag}invoices" "$tag" 10 0ms
write_config "$dir/query.yaml" "$qurl" "$src" "${tag}invoices" "$tag" 10 0ms
write_config "$dir/down.yaml" "$badport" "$src" "${tag}invoices" "$tag" 10 0ms
sed "s|^store: postgresql://|store: postgresqlx://|" "$dir/good.yaml" >"$dir/scheme.yaml"
sed "s|INSERT INTO ${tag}invoices|INSERT INTO ${tag}nosuch|" "$dir/good.yaml" >"$dir/sqlerr.yaml"

# run CASE EXPECTED_RC inbox-args...: output must not hold the secret.
run() {
	name=$1
	want=$2
	shift 2
	INBOX_LOG_LEVEL=debug "$BIN" "$@" >"$dir/$name.out" 2>&1
	got=$?
	expect_eq "$name: exit $want" "$got" "$want"
	if grep -q "$SECRET" "$dir/$name.out"; then
		fail "$name: the password does not appear" "$(grep "$SECRET" "$dir/$name.out" | head -3)"
	else
		ok "$name: the password does not appear"
	fi
}
run migrate 0 migrate "$dir/good.yaml"
check "migrate: prints the URL redacted" grep -q 'postgres:\*\*\*@' "$dir/migrate.out"
run run 0 run "$dir/good.yaml" --once
check "run: logs the store URL redacted" grep -q 'postgres:\*\*\*@' "$dir/run.out"
run stats 0 stats "$dir/good.yaml"
run query-password 0 run "$dir/query.yaml" --once
run wrong-port-run 4 run "$dir/down.yaml" --once
check "wrong port: says it cannot open the store" grep -q "cannot open store" "$dir/wrong-port-run.out"
run wrong-port-migrate 4 migrate "$dir/down.yaml"
run wrong-port-stats 4 stats "$dir/down.yaml"
run bad-scheme 3 run "$dir/scheme.yaml" --once
run sql-error 3 run "$dir/sqlerr.yaml" --once
summary
