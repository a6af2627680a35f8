#!/bin/sh
# A password planted in the store URL (user:PASSWORD@ and ?password=)
# never shows in anything the operator commands print — stats, purge,
# dlq list/show/replay/drop, inspect, and /metrics, /healthz and the logs
# of `inbox run` — with debug logs, when the connection works (trust auth
# ignores the password) and when it fails (nothing on the port).
#   password.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
need_pg
KIND=pg
SECRET=0ps-s3cr3t-planted
dir=$(mktmp)
tag="opspw$$_"
trap ops_cleanup EXIT

url=$(plant_secret "$INBOX_TEST_PG_URL")
case "$url" in *"$SECRET"*) ;; *) echo "cannot plant a password in $INBOX_TEST_PG_URL"; exit 1 ;; esac
port=$(echo "$url" | sed -n 's|.*@[^:/]*:\([0-9]*\)/.*|\1|p')
badport=$(echo "$url" | sed "s|:$port/|:1/|")
qurl="$INBOX_TEST_PG_URL?password=$SECRET"
qbad=$(echo "$qurl" | sed "s|:$port/|:1/|")

src="$dir/orders.jsonl"
: >"$src"
for i in 1 2 3; do order "m-$i" "ord-$i" c1 $((100 + i)) >>"$src"; done
order m-4 ord-4 ghost 104 >>"$src"
ops_config "$dir/good.yaml" "jsonl:$src?checkpoint=$dir/cp" billing.ops "$url"
ops_config "$dir/query.yaml" "jsonl:$src?checkpoint=$dir/cp" billing.ops "$qurl"
ops_config "$dir/down.yaml" "jsonl:$src?checkpoint=$dir/cp" billing.ops "$badport"
ops_config "$dir/qdown.yaml" "jsonl:$src?checkpoint=$dir/cp" billing.ops "$qbad"
check "migrate" ops_migrate "$dir/good.yaml"

# Working connection.
LOG_LEVEL=debug
if ops_start_daemon "$dir/good.yaml" "$dir/daemon.log"; then
	applied() { [ "$(q "SELECT count(*) FROM ${tag}invoices")" = 3 ]; }
	check "run --metrics: the 3 good orders applied" wait_until 20 applied
	get /metrics >"$dir/metrics.out"
	expect_eq "run --metrics: /metrics answers 200" "$http_status" 200
	get /healthz >"$dir/healthz.out"
	expect_eq "run --metrics: /healthz answers 200" "$http_status" 200
	ops_stop_daemon
	for f in daemon.log metrics.out healthz.out; do
		if grep -q "$SECRET" "$dir/$f"; then
			fail "run --metrics: no password in $f" "$(grep "$SECRET" "$dir/$f" | head -2)"
		else
			ok "run --metrics: no password in $f"
		fi
	done
	check "daemon log shows the store redacted" grep -q 'postgres:\*\*\*@' "$dir/daemon.log"
else
	fail "run --metrics starts" "$(tail -3 "$dir/daemon.log")"
fi
dl=$(q "SELECT id FROM ${tag}dead_letters WHERE key = 'create-invoice:ord-4'")
run_redacted stats 0 stats "$dir/good.yaml"
check "stats prints the store redacted" grep -q 'postgres:\*\*\*@' "$dir/stats.out"
run_redacted stats-json 0 stats "$dir/good.yaml" --json
run_redacted purge-dry 0 purge "$dir/good.yaml" --dry-run
run_redacted purge 0 purge "$dir/good.yaml"
run_redacted dlq-list 0 dlq list "$dir/good.yaml"
run_redacted dlq-show 0 dlq show "$dir/good.yaml" "$dl"
run_redacted dlq-replay 1 dlq replay "$dir/good.yaml" "$dl"
run_redacted dlq-drop 0 dlq drop "$dir/good.yaml" "$dl"
run_redacted inspect 0 inspect "$dir/good.yaml" billing.ops create-invoice:ord-1
run_redacted query-stats 0 stats "$dir/query.yaml"
run_redacted query-dlq-list 0 dlq list "$dir/query.yaml"
run_redacted query-inspect 1 inspect "$dir/query.yaml" billing.ops create-invoice:nope

# Nothing listening: every command fails to connect (exit 4; inbox run
# after --connect-timeout, as it waits otherwise) and says so
# with the URL redacted.
for cfg in down qdown; do
	run_redacted "$cfg-stats" 4 stats "$dir/$cfg.yaml"
	run_redacted "$cfg-purge" 4 purge "$dir/$cfg.yaml"
	run_redacted "$cfg-purge-dry" 4 purge "$dir/$cfg.yaml" --dry-run
	run_redacted "$cfg-dlq-list" 4 dlq list "$dir/$cfg.yaml"
	run_redacted "$cfg-dlq-show" 4 dlq show "$dir/$cfg.yaml" 1
	run_redacted "$cfg-dlq-replay" 4 dlq replay "$dir/$cfg.yaml" 1
	run_redacted "$cfg-dlq-drop" 4 dlq drop "$dir/$cfg.yaml" 1
	run_redacted "$cfg-inspect" 4 inspect "$dir/$cfg.yaml" billing.ops k
	run_redacted "$cfg-run-metrics" 4 run "$dir/$cfg.yaml" --once --connect-timeout 1s --metrics 127.0.0.1:0
done
check "down: says it cannot open the store" grep -q "cannot open store" "$dir/down-dlq-list.out"
summary
