#!/bin/sh
# Secrets out of the config file (issue 13, item 3): a store URL whose
# password comes from ${VAR} or from ${file:PATH} connects to PostgreSQL
# as a role that must give it (scram-sha-256, the suite's
# inbox_password_auth group), and the consumer runs; an unset variable is
# refused before anything is opened (exit 3, naming it: the literal is
# never sent); a wrong password from a file is refused by the server
# (exit 4). Neither password ever shows in what inbox prints.
#   config_secrets.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
need_pg

SECRET="Cfg5ecret$$x"
WRONG="Wr0ngPw$$y"
dir=$(mktmp)
tag="cfgsec$$_"
role="inbox_cfgsec_$$"
hp=$(echo "$INBOX_TEST_PG_URL" | sed 's|^[a-z]*://[^@]*@\([^/]*\)/.*|\1|')
db=$(echo "$INBOX_TEST_PG_URL" | sed 's|.*/\([^/?]*\).*|\1|')
cleanup() {
	pgq "DROP OWNED BY $role CASCADE" >/dev/null 2>&1
	pgq "DROP ROLE IF EXISTS $role" >/dev/null 2>&1
}
trap cleanup EXIT
pgq "CREATE ROLE $role LOGIN PASSWORD '$SECRET' IN ROLE inbox_password_auth" >/dev/null ||
	bail "create a role with a password"
pgq "CREATE SCHEMA $role AUTHORIZATION $role" >/dev/null || bail "create its schema"

gen_orders "$dir/orders.jsonl" 20 0 0
printf '%s\n' "$SECRET" >"$dir/pgpass"
printf '%s\n' "$WRONG" >"$dir/wrongpass"
printf 'postgresql://%s:%s@%s/%s\n' "$role" "$SECRET" "$hp" "$db" >"$dir/pgurl"
# (single quotes: ${...} reaches the file as written, for inbox to expand)
write_config "$dir/env.yaml" "postgresql://$role:"'${INBOX_T_PGPW}'"@$hp/$db" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/cp-env" "${tag}env" "$tag" 10 0ms billing.env
write_config "$dir/file.yaml" "postgresql://$role:"'${file:pgpass}'"@$hp/$db" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/cp-file" "${tag}file" "$tag" 10 0ms billing.file
write_config "$dir/url.yaml" '${file:pgurl}' \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/cp-url" "${tag}url" "$tag" 10 0ms billing.url
write_config "$dir/wrong.yaml" "postgresql://$role:"'${file:wrongpass}'"@$hp/$db" \
	"jsonl:$dir/orders.jsonl?checkpoint=$dir/cp-wrong" "${tag}wrong" "$tag" 10 0ms billing.wrong

rows() { pgq "SELECT count(*) FROM $role.$1"; }

export INBOX_T_PGPW="$SECRET"
run_redacted env-migrate 0 migrate "$dir/env.yaml"
run_redacted env-run 0 run "$dir/env.yaml" --once
expect_eq "env: the consumer ran as the role" "$(rows "${tag}env")" 20
run_redacted file-run 0 run "$dir/file.yaml" --once
expect_eq "file: the consumer ran as the role" "$(rows "${tag}file")" 20
run_redacted url-run 0 run "$dir/url.yaml" --once
expect_eq "url from a file: the consumer ran" "$(rows "${tag}url")" 20
run_redacted file-stats 0 stats "$dir/file.yaml"

unset INBOX_T_PGPW
run_redacted unset-run 3 run "$dir/env.yaml" --once
check "unset: names the variable at its place" \
	grep -q 'env.yaml:1:8: ${INBOX_T_PGPW}: the environment variable is not set' \
	"$dir/unset-run.out"
run_redacted unset-migrate 3 migrate "$dir/env.yaml"

run_redacted wrong-run 4 run "$dir/wrong.yaml" --once --connect-timeout 2s
check "wrong: the server refused the password" \
	grep -q "cannot open store" "$dir/wrong-run.out"
if grep -q "$WRONG" "$dir/wrong-run.out"; then
	fail "wrong: the wrong password does not appear" "$(grep "$WRONG" "$dir/wrong-run.out" | head -3)"
else
	ok "wrong: the wrong password does not appear"
fi
check "wrong: nothing consumed" [ ! -e "$dir/cp-wrong" ]
summary
