# Helpers of the TLS tests (sourced; ../common.sh has the checks, the
# closing line and what every group shares): a test PKI made with openssl
# (tests/servers/certs.sh), a consumer config, and the commands' outputs
# kept under $dir/out and searched for the secrets planted in the URLs.
#   BIN = the inbox binary, set by the test.
group=tls
. "${INBOX_IT_DIR:-$(dirname "$0")/..}/common.sh"

# The secrets: a key passphrase and a password, with characters a URL
# parser cares about (percent-encoded where a URL carries them).
KEYPASS='Kp7w/Qz@3x#Lm'
KEYPASS_ENC='Kp7w%2FQz%403x%23Lm'
SASLPASS='Sx9v/Tq@4y#Nb'
SASLPASS_ENC='Sx9v%2FTq%404y%23Nb'

exit_trap=tls_cleanup
cleanup_steps=""
# at_exit COMMAND: run COMMAND (a shell command line) when the test ends.
at_exit() {
	cleanup_steps="$cleanup_steps
$1"
}
tls_cleanup() {
	stop_daemons
	eval "$cleanup_steps"
	cleanup_steps=""
	return 0
}
trap tls_cleanup EXIT

# tls_dir [CN [CLIENT_CN]]: $dir with pki/ (the test CA, a server
# certificate for DNS:CN, a client certificate, its key also encrypted
# with $KEYPASS), cfg/, out/ (what the commands print: searched) and
# data/.
tls_dir() {
	dir=$(mktmp)
	chmod 755 "$dir"
	mkdir -p "$dir/cfg" "$dir/out" "$dir/data"
	sh "$servers/certs.sh" "$dir/pki" "${1:-localhost}" \
		"${2:-inbox-client}" "$KEYPASS" || bail "make the test PKI"
	for _s in "$KEYPASS" "$KEYPASS_ENC" "$SASLPASS" "$SASLPASS_ENC"; do
		printf '%s\n' "$_s"
	done | awk '{ for (i = 1; i + 3 <= length($0); i++) print substr($0, i, 4) }' |
		sort -u >"$dir/cfg/pieces"
}

# no_secret NAME FILE...: no file holds 4 bytes in a row of a secret.
no_secret() {
	_n=$1
	shift
	_hits=$(grep -a -H -n -F -f "$dir/cfg/pieces" "$@" 2>/dev/null | cut -c1-300 | head -3)
	if [ -n "$_hits" ]; then
		fail "$_n: no piece of a secret" "$_hits"
	else
		ok "$_n: no piece of a secret"
	fi
}

# free_port: a loopback port nothing listens on (below the ephemeral
# range, away from the suite's bases).
free_port() {
	while :; do
		_p=$(rand_between 20000 29999)
		ss -tan 2>/dev/null | awk '{ print $4 }' | grep -q ":$_p\$" ||
			{ echo "$_p"; return; }
	done
}

# config FILE STORE SOURCE: one consumer, tls.orders, inserting each
# order into ${tag}orders (tag set by the test).
config() {
	cat >"$1" <<CFG
store: "$2"
table_prefix: "$tag"
consumers:
  - name: tls.orders
    source: "$3"
    key: "order:{/data/orderId}"
    fingerprint: /data
    batch_size: 10
    retry_delay: 100ms
    poll_timeout: 100ms
    max_attempts: 3
    setup: |
      CREATE TABLE IF NOT EXISTS ${tag}orders (order_id TEXT NOT NULL);
    effect:
      - sql: INSERT INTO ${tag}orders (order_id) VALUES (\$1)
        params: [/data/orderId]
CFG
}

# orders FILE N: N orders, one JSON line each.
orders() {
	_i=1
	while [ "$_i" -le "$2" ]; do
		printf '{"id":"m-%s","data":{"orderId":"ord-%s"}}\n' "$_i" "$_i"
		_i=$((_i + 1))
	done >"$1"
}

# cmd NAME WANT ARGS...: `$BIN ARGS...` with debug logs into out/NAME.out;
# it exits WANT; it printed something (else the search proves nothing)
# and no piece of a secret.
cmd() {
	_name=$1
	_want=$2
	shift 2
	INBOX_LOG_LEVEL=debug "$BIN" "$@" >"$dir/out/$_name.out" 2>&1 9>&-
	_rc=$?
	if [ "$_rc" -eq "$_want" ]; then
		ok "$_name: exit $_want"
	else
		fail "$_name: exit $_want" "exit $_rc" \
			"$(tail -3 "$dir/out/$_name.out" | cut -c1-400)"
	fi
	if [ -s "$dir/out/$_name.out" ]; then
		ok "$_name: prints something"
	else
		fail "$_name: prints something"
	fi
	no_secret "$_name" "$dir/out/$_name.out"
}

# says NAME TEXT: out/NAME.out holds TEXT (a fixed string).
says() {
	if grep -q -F -- "$2" "$dir/out/$1.out"; then
		ok "$1: says \"$2\""
	else
		fail "$1: says \"$2\"" "$(tail -3 "$dir/out/$1.out" | cut -c1-400)"
	fi
}
