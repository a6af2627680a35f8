#!/bin/sh
# Make a throwaway TLS test PKI with openssl (P-256 keys, valid 2 days):
#   certs.sh DIR [CN [CLIENT_CN [PASSPHRASE]]]
#   DIR/ca.pem, ca.key          the test CA
#   DIR/server.pem, server.key  the server's certificate, signed by the CA,
#                               for DNS:CN only (default localhost: no IP
#                               address, so a client that connects to
#                               127.0.0.1 and checks the name is refused)
#   DIR/client.pem, client.key  a client certificate (CN CLIENT_CN,
#                               default inbox-client), the key unencrypted
#   DIR/client-enc.key          the same key encrypted with PASSPHRASE
#                               (AES-256; only when one is given)
#   DIR/other-ca.pem            another CA, which signed nothing here: a
#                               client trusting only it must refuse the
#                               server
# CERT_SAN (environment) replaces the server certificate's names
# ("DNS:localhost,IP:127.0.0.1").
# The keys are mode 0600. Nothing outside DIR is read or written.
set -eu
dir=$1
cn=${2:-localhost}
client_cn=${3:-inbox-client}
pass=${4:-}
mkdir -p "$dir"
cd "$dir"
umask 077
key() {
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
		-out "$1" 2>/dev/null
}
ca() {
	key "$1.key"
	openssl req -x509 -new -key "$1.key" -sha256 -days 2 \
		-subj "/CN=$2" -out "$1.pem"
}
# sign NAME CN EXT: NAME.pem for NAME.key, signed by the CA.
sign() {
	printf '%s\n' "$3" >"$1.ext"
	openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr"
	openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key \
		-CAcreateserial -sha256 -days 2 -extfile "$1.ext" \
		-out "$1.pem" 2>/dev/null
	rm -f "$1.csr" "$1.ext"
}
ca ca "inbox test CA"
ca other-ca "inbox other CA"
rm -f other-ca.key
key server.key
sign server "$cn" "subjectAltName=${CERT_SAN:-DNS:$cn}
extendedKeyUsage=serverAuth"
key client.key
sign client "$client_cn" "extendedKeyUsage=clientAuth"
if [ -n "$pass" ]; then
	openssl pkey -in client.key -aes256 -passout "pass:$pass" \
		-out client-enc.key
fi
chmod 644 ca.pem other-ca.pem server.pem client.pem
