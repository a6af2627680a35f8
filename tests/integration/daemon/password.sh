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
url=$(plant_secret "$INBOX_TEST_PG_URL")
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

run_redacted migrate 0 migrate "$dir/good.yaml"
check "migrate: prints the URL redacted" grep -q 'postgres:\*\*\*@' "$dir/migrate.out"
run_redacted run 0 run "$dir/good.yaml" --once
check "run: logs the store URL redacted" grep -q 'postgres:\*\*\*@' "$dir/run.out"
run_redacted stats 0 stats "$dir/good.yaml"
run_redacted query-password 0 run "$dir/query.yaml" --once
run_redacted wrong-port-run 4 run "$dir/down.yaml" --once --connect-timeout 1s
check "wrong port: says it cannot open the store" grep -q "cannot open store" "$dir/wrong-port-run.out"
run_redacted wrong-port-migrate 4 migrate "$dir/down.yaml"
run_redacted wrong-port-stats 4 stats "$dir/down.yaml"
run_redacted bad-scheme 3 run "$dir/scheme.yaml" --once
run_redacted sql-error 3 run "$dir/sqlerr.yaml" --once
summary
