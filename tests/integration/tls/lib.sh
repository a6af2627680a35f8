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

# --- Kafka (tls_kafka.sh, sasl_kafka.sh) -----------------------------------
# librdkafka's mock cluster has neither TLS nor SASL (rdkafka_mock.h), so
# the Kafka tests put socat in front of it: in a network namespace of its
# own (unshare -n; lo only), socat listens on the mock broker's address
# 127.0.0.1:PORT (and [::1]:PORT) and forwards to a unix socket the test
# serves from its own namespace (the mock itself, or a relay in front of
# it). Every connection the consumer makes there — bootstrap, the group
# coordinator, the partition leader — goes through socat.
#   MOCK, PRODUCE = the kafka-mock and kafka-produce tools, set by the test.

# kafka_setup TAG: tls_dir (its server certificate also for 127.0.0.1),
# tag=TAG, NETNS (how to make a network namespace here; bails without
# one), the mock cluster (one broker, the topic orders; it lives while
# fd 9, its stdin, is open) with 5 orders produced to it; boot is its
# bootstrap address, mport its port.
kafka_setup() {
	command -v socat >/dev/null || bail "socat is not installed (scripts/install-deps.sh)"
	export CERT_SAN="DNS:localhost,IP:127.0.0.1"
	tls_dir
	unset CERT_SAN
	tag=$1
	if [ "$(id -u)" -eq 0 ]; then
		NETNS="unshare -n"
	else
		NETNS="unshare --user --map-root-user -n"
	fi
	$NETNS true 2>/dev/null || bail "cannot make a network namespace ($NETNS)"
	rm -f "$dir/mock.in"
	mkfifo "$dir/mock.in" || bail "mkfifo"
	"$MOCK" --brokers 1 --stdin-lifetime orders:1 <"$dir/mock.in" >"$dir/mock.out" 2>&1 &
	_mock=$!
	exec 9>"$dir/mock.in"
	at_exit "kill -TERM $_mock 2>/dev/null; wait $_mock 2>/dev/null; exec 9>&-"
	wait_until 15 grep -q '^bootstrap=' "$dir/mock.out" || bail "kafka-mock: $(cat "$dir/mock.out")"
	boot=$(sed -n 's/^bootstrap=//p' "$dir/mock.out")
	mport=${boot##*:}
	orders "$dir/data/orders.jsonl" 5
	"$PRODUCE" -q "$boot" orders "$dir/data/orders.jsonl" || bail "produce the orders"
	ok "5 orders produced to the mock cluster"
}

# kafka_ns NAME SECONDS WANT CONFIG SOCKET tls|plain [metrics]: in a
# network namespace where 127.0.0.1:$mport and [::1]:$mport are socat's
# listener — TLS with the test's server certificate (tls; socat asks for
# no client certificate: verify=0) or plain TCP — forwarding to the unix
# socket SOCKET, `inbox run CONFIG --connect-timeout 3` in the background
# until its store has WANT rows or SECONDS passed, then SIGTERM; its
# output in out/NAME.out, its exit status in out/NAME.rc. With metrics,
# its /metrics (127.0.0.1:9464 in the namespace) is scraped while it runs
# into out/NAME.metrics.
kafka_ns() {
	case $6 in
	tls) _listen="OPENSSL-LISTEN" _opts=",cert=$dir/pki/server.pem,key=$dir/pki/server.key,verify=0" ;;
	plain) _listen="TCP-LISTEN" _opts="" ;;
	*) bail "kafka_ns: tls or plain, not $6" ;;
	esac
	_metrics="" _scrape=":"
	if [ "${7:-}" = metrics ]; then
		_metrics="--metrics 127.0.0.1:9464"
		_scrape="curl -s -m 1 http://127.0.0.1:9464/metrics >'$dir/out/$1.metrics.new' 2>/dev/null \
&& [ -s '$dir/out/$1.metrics.new' ] && mv '$dir/out/$1.metrics.new' '$dir/out/$1.metrics'; \
rm -f '$dir/out/$1.metrics.new'"
	fi
	cat >"$dir/cfg/$1.ns.sh" <<NS
ip link set lo up
socat $_listen:$mport,bind=127.0.0.1,reuseaddr,fork$_opts UNIX-CONNECT:$5 2>"$dir/out/socat-$1.err" &
s=\$!
# localhost is ::1 too: the same listener there, so no connection is
# refused whichever address librdkafka tries first (harmless where IPv6
# is off)
socat $_listen:$mport,bind=[::1],pf=ip6,reuseaddr,fork$_opts UNIX-CONNECT:$5 2>"$dir/out/socat6-$1.err" &
s6=\$!
i=0
while ! ss -ltn | grep -q ":$mport "; do sleep 0.05; i=\$((i + 1)); [ \$i -gt 100 ] && break; done
INBOX_LOG_LEVEL=debug "$BIN" run "$4" --connect-timeout 3 $_metrics >"$dir/out/$1.out" 2>&1 &
p=\$!
end=\$((\$(date +%s) + $2))
while kill -0 \$p 2>/dev/null && [ \$(date +%s) -lt \$end ]; do
	$_scrape
	n=\$(sqlite3 "$dir/data/$1.db" "SELECT count(*) FROM ${tag}orders" 2>/dev/null)
	[ "\${n:-0}" -ge $3 ] && break
	sleep 0.2
done
$_scrape
kill -TERM \$p 2>/dev/null
wait \$p
echo \$? >"$dir/out/$1.rc"
kill -TERM \$s \$s6 2>/dev/null
wait \$s \$s6 2>/dev/null
NS
	$NETNS sh "$dir/cfg/$1.ns.sh" </dev/null >/dev/null 2>&1 9>&-
}

# kafka_config NAME PARAMS: cfg/NAME.yaml, a consumer of the orders topic
# (through localhost:$mport, in the namespace: socat's) with PARAMS, its
# store data/NAME.db, migrated.
kafka_config() {
	config "$dir/cfg/$1.yaml" "sqlite:$dir/data/$1.db" \
		"kafka://localhost:$mport/orders?group=g$$$1&offset_reset=earliest&rdkafka.session.timeout.ms=6000&$2"
	"$BIN" migrate "$dir/cfg/$1.yaml" >"$dir/out/$1-migrate.out" 2>&1 ||
		fail "$1: migrate" "$(tail -2 "$dir/out/$1-migrate.out")"
}

# kafka_rows NAME: the orders data/NAME.db has.
kafka_rows() { sq "$dir/data/$1.db" "SELECT count(*) FROM ${tag}orders"; }
