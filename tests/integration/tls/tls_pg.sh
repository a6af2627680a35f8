#!/bin/sh
# PostgreSQL over TLS, sslmode=verify-full (issue 13, item 3): a private
# PostgreSQL with ssl=on and a server certificate for DNS:localhost made
# by the test's own CA (tests/servers/certs.sh), its pg_hba refusing every
# connection without TLS, and one database (certdb) that wants a client
# certificate too. libpq does the work; what is tested is that the store
# URL's sslmode, sslrootcert, sslcert, sslkey and sslpassword reach it,
# that each refusal says why, and that no output shows the key's
# passphrase (sslpassword), while the paths of the files stay visible.
#   tls_pg.sh INBOX_BIN
# Port: a free one picked at run time.
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
tls_dir localhost postgres
tag="tlspg$$_"
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)

# The server's key must belong to the user the server runs as.
mkdir -p "$dir/srv"
cp "$dir/pki/server.pem" "$dir/pki/server.key" "$dir/pki/ca.pem" "$dir/srv/"
if [ "$(id -u)" -eq 0 ]; then
	chown -R postgres "$dir/srv"
fi
chmod 600 "$dir/srv/server.key"
at_exit "sh '$servers/pg.sh' stop '$dir/pgsrv' >/dev/null 2>&1"
export PG_EXTRA_OPTS="-c ssl=on -c ssl_cert_file=$dir/srv/server.pem -c ssl_key_file=$dir/srv/server.key -c ssl_ca_file=$dir/srv/ca.pem -c max_connections=20 -c shared_buffers=16MB"
started=""
for _try in 1 2 3 4 5; do
	port=$(free_port)
	if sh "$servers/pg.sh" start "$dir/pgsrv" "$port" >/dev/null 2>"$dir/out/pg-start.err"; then
		started=1
		break
	fi
done
[ -n "$started" ] || bail "start a PostgreSQL with ssl=on" "$(tail -5 "$dir/out/pg-start.err")"
ok "a PostgreSQL with ssl=on on port $port"

# Only TLS from now on; certdb wants a client certificate (CN = the user).
admin="host=localhost hostaddr=127.0.0.1 port=$port user=postgres dbname=postgres sslmode=require"
"$bindir/psql" "$admin" -X -q -c "CREATE DATABASE certdb" >/dev/null ||
	bail "create certdb"
cat >"$dir/pgsrv/pg/pg_hba.conf" <<HBA
local all all trust
hostnossl all all all reject
hostssl certdb all 127.0.0.1/32 cert
hostssl all all 127.0.0.1/32 trust
HBA
"$bindir/psql" "$admin" -X -q -tA -c "SELECT pg_reload_conf()" >/dev/null ||
	bail "reload pg_hba.conf"
# pg_reload_conf() only signals the server: wait until it refuses a
# connection without TLS (the new pg_hba.conf in force), not 0.3 s, which
# a loaded machine's postmaster can take longer than to re-read it.
plain_refused() {
	! "$bindir/psql" "host=localhost hostaddr=127.0.0.1 port=$port user=postgres dbname=postgres sslmode=disable connect_timeout=5" \
		-X -q -tA -c "SELECT 1" >/dev/null 2>&1
}
wait_until 30 plain_refused || bail "the new pg_hba.conf is in force"

orders "$dir/data/orders.jsonl" 3
JSONL="jsonl:$dir/data/orders.jsonl?checkpoint=$dir/data/cp"
base="postgresql://postgres@localhost:$port/inbox_test?hostaddr=127.0.0.1"
CA=$dir/pki/ca.pem

# store_case NAME WANT URL: migrate against URL exits WANT, showing no
# secret.
store_case() {
	config "$dir/cfg/$1.yaml" "$3" "$JSONL"
	cmd "$1" "$2" migrate "$dir/cfg/$1.yaml"
}

store_case pg-verify-full 0 "$base&sslmode=verify-full&sslrootcert=$CA"
config "$dir/cfg/pg-run.yaml" "$base&sslmode=verify-full&sslrootcert=$CA" "$JSONL"
cmd pg-run 0 run "$dir/cfg/pg-run.yaml" --once
rows=$("$bindir/psql" "$admin dbname=inbox_test" -X -q -tA -c "SELECT count(*) FROM ${tag}orders" 2>&1)
expect_eq "pg: the orders went in over TLS" "$rows" 3
ssl=$("$bindir/psql" "$admin" -X -q -tA -c "SELECT bool_and(ssl) FROM pg_stat_ssl" 2>&1)
expect_eq "pg: every connection uses TLS" "$ssl" t

# Without TLS the server refuses: the cases above did use it.
store_case pg-no-tls 4 "$base&sslmode=disable"
says pg-no-tls "no encryption"

# The wrong CA, the wrong host name: refused, saying why.
store_case pg-wrong-ca 4 "$base&sslmode=verify-full&sslrootcert=$dir/pki/other-ca.pem"
says pg-wrong-ca "certificate verify failed"
store_case pg-wrong-host 4 "postgresql://postgres@127.0.0.1:$port/inbox_test?sslmode=verify-full&sslrootcert=$CA"
says pg-wrong-host "does not match host name"
# verify-ca checks the chain but not the name: the same host passes.
store_case pg-verify-ca 0 "postgresql://postgres@127.0.0.1:$port/inbox_test?sslmode=verify-ca&sslrootcert=$CA"
# A CA file that is not there: libpq says which.
store_case pg-no-ca-file 4 "$base&sslmode=verify-full&sslrootcert=$dir/pki/missing.pem"
says pg-no-ca-file "missing.pem"

# A client certificate whose key is encrypted: sslpassword opens it; the
# passphrase shows nowhere, the key's path does.
cbase="postgresql://postgres@localhost:$port/certdb?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert=$CA&sslcert=$dir/pki/client.pem&sslkey=$dir/pki/client-enc.key"
store_case pg-client-cert 0 "$cbase&sslpassword=$KEYPASS_ENC"
# A libpq keyword/value string is no store URL: refused (exit 3), its
# passphrase hidden in the refusal, the key's path not.
store_case pg-client-cert-kv 3 "host=localhost hostaddr=127.0.0.1 port=$port dbname=certdb user=postgres sslmode=verify-full sslrootcert=$CA sslcert=$dir/pki/client.pem sslkey=$dir/pki/client-enc.key sslpassword='$KEYPASS'"
says pg-client-cert-kv "sslkey=$dir/pki/client-enc.key sslpassword=***"
store_case pg-wrong-keypass 4 "$cbase&sslpassword=$SASLPASS_ENC"
says pg-wrong-keypass "client-enc.key"
store_case pg-no-client-cert 4 "postgresql://postgres@localhost:$port/certdb?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert=$CA"
says pg-no-client-cert "certificate"
# stats prints the store redacted: the passphrase hidden, the paths not.
config "$dir/cfg/pg-stats.yaml" "$cbase&sslpassword=$KEYPASS_ENC" "$JSONL"
cmd pg-stats 0 stats "$dir/cfg/pg-stats.yaml" --json
no_secret "pg: every output" "$dir"/out/*
summary
