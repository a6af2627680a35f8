#!/bin/sh
# The https:// source: a certificate and key the test makes (openssl), a
# request verified against that certificate, its replay, a plain-HTTP
# client refused, and a missing key file refused at start without
# showing its path.
#   https.sh INBOX_BIN
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
dir=$(mktmp)
store_for sqlite
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/key.pem" \
	-out "$dir/cert.pem" -days 1 -subj /CN=127.0.0.1 \
	-addext "subjectAltName=IP:127.0.0.1" >/dev/null 2>&1 ||
	bail "openssl makes a certificate"
config() { # FILE KEY-FILE
	cat >"$1" <<CFG
store: $store
consumers:
  - name: tls.api
    source: "https://127.0.0.1:0/orders?mode=api&cert=$dir/cert.pem&key=$2"
    setup: |
      CREATE TABLE IF NOT EXISTS orders (id TEXT NOT NULL);
    effect:
      - sql: INSERT INTO orders (id) VALUES (\$1)
        params: [/body/id]
CFG
}
config "$dir/inbox.yaml" "$dir/key.pem"
start_http "$dir/inbox.yaml" "$dir/daemon.log"
U="https://127.0.0.1:$port/orders"
req first --cacert "$dir/cert.pem" -X POST -H 'Idempotency-Key: t1' -d '{"id":"o1"}' "$U"
expect_eq "https: 200 with the test's certificate" "$code" 200
req again --cacert "$dir/cert.pem" -X POST -H 'Idempotency-Key: t1' -d '{"id":"o1"}' "$U"
expect_eq "https: the replay" "$code:$(hdr again Idempotent-Replayed)" 200:true
check "https: the replay byte for byte" cmp -s "$dir/first.b" "$dir/again.b"
expect_eq "https: one effect" "$(count "SELECT COUNT(*) FROM orders")" 1
req untrusted -X POST -H 'Idempotency-Key: t2' -d '{"id":"o2"}' "$U"
expect_eq "https: a client that does not trust the certificate gets nothing" "$code" 000
req plain -X POST -H 'Idempotency-Key: t3' -d '{"id":"o3"}' "http://127.0.0.1:$port/orders"
check "plain HTTP to the TLS port: no 2xx" [ "$code" != 200 ]
expect_eq "nothing from the refused ones" "$(count "SELECT COUNT(*) FROM orders")" 1
stop_daemon "$pid"
expect_eq "SIGTERM: exit 0" "$rc" 0

config "$dir/nokey.yaml" "$dir/missing-key.pem"
"$BIN" run "$dir/nokey.yaml" >"$dir/nokey.out" 2>&1
rc=$?
check "a missing key file: the daemon does not start (exit $rc)" [ "$rc" -ne 0 ]
check "it says which file it could not read" grep -q "cannot read the key file" "$dir/nokey.out"
check "it does not show the key file's path" sh -c "! grep -q missing-key '$dir/nokey.out'"
clean_logs "no error logged by the TLS daemon" "$dir/daemon.log"
summary
