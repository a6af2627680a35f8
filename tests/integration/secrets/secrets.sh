#!/bin/sh
# No secret shows, whatever the URL and whatever fails (issue 10, item 2).
# A canary password (with '/', '@', '#', ':' and '%' in it) is planted in
# every URL form of one store or source: user info, percent-encoded with
# upper- and lower-case hex, ?password= and the other secret parameters,
# Kafka's rdkafka.* secret properties, the NATS token, Redis passwords;
# raw where a URL parser would read it otherwise (refused). Then every
# error path is provoked — a wrong password, the server down, an unknown
# host, a bad database or vhost, a bad property — and so is a working
# connection, a daemon with --metrics (/metrics and /healthz scraped
# before and after the credentials stop working under it, and while it
# waits for a store or broker that refuses its password), and every CLI
# command that opens a store. Everything printed, served or written is
# searched for any 4 bytes of any spelling of the canaries.
#   secrets.sh INBOX_BIN pg|kafka|nats|redis|amqp|outbox [KAFKA_MOCK]
set -u
BIN=$1
KIND=$2
MOCK=${3:-}
. "$(dirname "$0")/lib.sh"

# at_exit COMMAND: run COMMAND (a shell command line) when the test ends.
cleanup_steps=""
at_exit() {
	cleanup_steps="$cleanup_steps
$1"
}
secrets_cleanup() {
	stop_daemons
	eval "$cleanup_steps"
	cleanup_steps=""
	return 0
}

# health FILTER FILE: a /healthz body was read and FILTER holds.
health() {
	[ -s "$2" ] && jqok "$1" "$2"
}
exit_trap=secrets_cleanup
trap secrets_cleanup EXIT

secrets_dir
tag="sec$$_"
orders "$dir/data/orders.jsonl"
JSONL="jsonl:$dir/data/orders.jsonl?checkpoint=$dir/data/cp"
FOLLOW="jsonl:$dir/data/orders.jsonl?follow=1&checkpoint=$dir/data/cpf"
SQLITE="sqlite:$dir/data/inbox.db"

# source_case NAME URL: a consumer reading URL fails to start (3 or 4),
# and says nothing of its secrets.
source_case() {
	config "$dir/cfg/$1.yaml" "$SQLITE" "$2"
	cmd "$1" fail run "$dir/cfg/$1.yaml" --once --connect-timeout 1 \
		--metrics 127.0.0.1:0
}

# run_daemon NAME SHOWN BREAK: a daemon on cfg/NAME.yaml starts (its
# start line shows SHOWN, the URL redacted), is scraped, then BREAK (a
# shell command) takes its server or credentials away, and it is scraped
# again before it is stopped.
run_daemon() {
	cmd "$1-migrate" 0 migrate "$dir/cfg/$1.yaml"
	daemon "$1" "$dir/cfg/$1.yaml"
	started "$1" "$2"
	scrape "$1" up
	check "$1: /healthz is ok while it works" health '.status == "ok"' \
		"$dir/out/$1.up.healthz"
	eval "$3"
	sleep 2
	scrape "$1" broken
	sleep 1.5 # the next look at the store opens a new connection
	scrape "$1" broken2
	stop_daemon "$pid"
}

# source_daemon NAME URL SHOWN BREAK: run_daemon with a consumer of URL.
source_daemon() {
	config "$dir/cfg/$1.yaml" "$SQLITE" "$2"
	run_daemon "$1" "$3" "$4"
}

# free_port: a loopback port nothing listens on (below the ephemeral range
# and the suite's brokers).
free_port() {
	while :; do
		_p=$(rand_between 10000 19999)
		ss -tan 2>/dev/null | awk '{ print $4 }' | grep -q ":$_p\$" ||
			{ echo "$_p"; return; }
	done
}

# ---------------------------------------------------------------------------
pg_case() {
	need_pg
	hp=$(echo "$INBOX_TEST_PG_URL" | sed 's|^[a-z]*://[^@]*@\([^/]*\)/.*|\1|')
	db=$(echo "$INBOX_TEST_PG_URL" | sed 's|.*/\([^/?]*\).*|\1|')
	role="inbox_sec_$$"
	SCHEMA=$role
	pgq "CREATE ROLE $role LOGIN PASSWORD '$CANARY' IN ROLE inbox_password_auth" >/dev/null ||
		bail "create a role with a password"
	at_exit "pgq 'DROP OWNED BY $role CASCADE' >/dev/null; pgq 'DROP ROLE IF EXISTS $role' >/dev/null"
	# its own schema; migrate's CREATE SCHEMA IF NOT EXISTS needs CREATE
	pgq "CREATE SCHEMA $role AUTHORIZATION $role" >/dev/null || bail "create its schema"
	pgq "GRANT CREATE ON DATABASE $db TO $role" >/dev/null || bail "grant CREATE"
	pu="postgresql://$role"
	# Working URLs (the role's password is the canary).
	for c in "enc:$pu:$CANARY_ENC@$hp/$db" "low:$pu:$CANARY_ENC_LOW@$hp/$db" \
		"query:$pu@$hp/$db?password=$CANARY_ENC&connect_timeout=5" \
		"rawcolon:$pu:Zq8V%2Fw3%40Kx%237:Jm%259@$hp/$db"; do
		name=pg-${c%%:*}
		config "$dir/cfg/$name.yaml" "${c#*:}" "$JSONL"
		few=few
		[ "$name" = pg-enc ] && few=
		store_commands "$name" "$dir/cfg/$name.yaml" 0 $few
	done
	check "pg: the start line shows the store redacted" \
		grep -q "\"store\":\"postgresql://$role:\*\*\*@$hp/$db\"" \
		"$dir/out/pg-enc-run.out"
	id=$(jq -r 'select(.id != null) | .id' "$dir/out/pg-enc-dlq-list-json.out" 2>/dev/null | head -1)
	[ -n "$id" ] || fail "pg: a dead letter to show" "$(head -3 "$dir/out/pg-enc-dlq-list-json.out")"
	cmd pg-dlq-show 0 dlq show "$dir/cfg/pg-enc.yaml" "${id:-1}"
	cmd pg-dlq-show-json 0 dlq show "$dir/cfg/pg-enc.yaml" "${id:-1}" --json
	cmd pg-dlq-show-raw 0 dlq show "$dir/cfg/pg-enc.yaml" "${id:-1}" --raw
	cmd pg-dlq-replay 1 dlq replay "$dir/cfg/pg-enc.yaml" "${id:-1}"
	# Every way it can fail.
	for c in "wrong:$pu:$WRONG_ENC@$hp/$db" \
		"wrongquery:$pu@$hp/$db?password=$WRONG_ENC&sslpassword=$CANARY_ENC" \
		"down:$pu:$CANARY_ENC@127.0.0.1:1/$db" \
		"unknownhost:$pu:$CANARY_ENC@nosuchhost.invalid:5432/$db" \
		"baddb:$pu:$CANARY_ENC@$hp/nosuchdb_$$" \
		"badprop:$pu:$CANARY_ENC@$hp/$db?no_such_option=1" \
		"badvalue:$pu:$CANARY_ENC@$hp/$db?sslmode=bogus&port=x" \
		"badescape:$pu:Zq8V%2Fw3%40Kx%237%3AJm%9@$hp/$db" \
		"ipv6:postgresql://[::1/$db?password=$CANARY_ENC" \
		"raw:$pu:$CANARY@$hp/$db" \
		"rawslash:$pu:Zq8V/w3%40Kx%237%3AJm%259@$hp/$db" \
		"rawat:$pu:Zq8V%2Fw3@Kx%237%3AJm%259@$hp/$db" \
		"rawhash:$pu:Zq8V%2Fw3%40Kx#7%3AJm%259@$hp/$db" \
		"rawquery:$pu@$hp/$db?password=$CANARY"; do
		name=pg-${c%%:*}
		config "$dir/cfg/$name.yaml" "${c#*:}" "$JSONL"
		case $name in
		pg-wrong | pg-rawat | pg-badescape | pg-ipv6) few= ;;
		*) few=few ;;
		esac
		store_commands "$name" "$dir/cfg/$name.yaml" fail $few
	done
	check "pg: a wrong password is refused by the server" \
		grep -q "password authentication failed" "$dir/out/pg-wrong-stats.out"
	check "pg: a raw '@' is refused before libpq sees it" \
		grep -q "percent-encode" "$dir/out/pg-rawat-stats.out"
	waiting_daemon pg-wrong-waiting "$dir/cfg/pg-wrong.yaml"
	# A daemon whose password stops working under it.
	config "$dir/cfg/pg-daemon.yaml" "$pu:$CANARY_ENC@$hp/$db" "$FOLLOW"
	run_daemon pg-daemon "postgresql://$role:\*\*\*@" \
		"pgq \"ALTER ROLE $role PASSWORD '$WRONG'\" >/dev/null; pgq \"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '$role'\" >/dev/null; echo '{\"id\":\"m-3\",\"data\":{\"orderId\":\"ord-3\",\"customer\":\"c3\"}}' >>'$dir/data/orders.jsonl'"
	check "pg: /healthz shows the password refused" grep -q \
		"password authentication failed" "$dir/out/pg-daemon.broken2.healthz"
	pgq "SELECT row_to_json(d) FROM $role.${tag}dead_letters d" >"$dir/out/pg-dead-letters.rows"
	check "pg: the dead letters were read" test -s "$dir/out/pg-dead-letters.rows"
}

# ---------------------------------------------------------------------------
kafka_case() {
	[ -x "$MOCK" ] || bail "no kafka-mock given"
	rm -f "$dir/mock.in"
	mkfifo "$dir/mock.in" || bail "mkfifo"
	"$MOCK" --stdin-lifetime sec:1 <"$dir/mock.in" >"$dir/mock.out" 2>&1 &
	mock=$!
	exec 9>"$dir/mock.in"
	at_exit "kill -TERM $mock 2>/dev/null; wait $mock 2>/dev/null; exec 9>&-"
	wait_until 15 grep -q '^bootstrap=' "$dir/mock.out" || bail "kafka-mock: $(cat "$dir/mock.out")"
	boot=$(sed -n 's/^bootstrap=//p' "$dir/mock.out")
	secret="rdkafka.sasl.username=u&rdkafka.sasl.password=$CANARY_ENC&rdkafka.ssl.key.password=$WRONG_ENC&rdkafka.sasl.oauthbearer.config=principal%3D$TOKEN&rdkafka.ssl.keystore.password=$CANARY_ENC_LOW&rdkafka.sasl.pass%77ord=$CANARY_ENC"
	short="open_timeout_ms=1000&rdkafka.sasl.password=$CANARY_ENC"
	source_case kafka-badprop "kafka://$boot/sec?$secret&rdkafka.no.such.property=1"
	source_case kafka-badsecretvalue "kafka://$boot/sec?$secret&rdkafka.sasl.oauthbearer.method=$WRONG_ENC"
	# (this librdkafka is built without OIDC: "invalid value")
	source_case kafka-clientsecret "kafka://$boot/sec?$secret&rdkafka.sasl.oauthbearer.client.secret=$TOKEN"
	source_case kafka-badvalue "kafka://$boot/sec?$secret&rdkafka.session.timeout.ms=x"
	source_case kafka-badparam "kafka://$boot/sec?$secret&no_such_param=1"
	source_case kafka-down "kafka://127.0.0.1:1/sec?$short"
	source_case kafka-unknownhost "kafka://nosuchhost.invalid:9092/sec?$short"
	source_case kafka-wrongpassword "kafka://$boot/sec?open_timeout_ms=1000&rdkafka.security.protocol=sasl_plaintext&rdkafka.sasl.mechanism=PLAIN&rdkafka.sasl.username=u&rdkafka.sasl.password=$WRONG_ENC"
	source_case kafka-raw "kafka://$boot/sec?rdkafka.sasl.password=$CANARY"
	source_case kafka-badescape "kafka://$boot/sec?rdkafka.sasl.password=Zq8V%2Fw3%40Kx%237%3AJm%9"
	source_case kafka-userinfo "kafka://u:$CANARY_ENC@$boot/sec"
	check "kafka: the bad property is named" \
		grep -q "no.such.property" "$dir/out/kafka-badprop.out"
	waiting_daemon kafka-wrong-waiting "$dir/cfg/kafka-wrongpassword.yaml"
	source_daemon kafka-daemon "kafka://$boot/sec?group=g$$&$secret" \
		"rdkafka.sasl.password=\*\*\*&rdkafka.ssl.key.password=\*\*\*" \
		"kill -TERM $mock; wait $mock 2>/dev/null"
}

# ---------------------------------------------------------------------------
# nats_server NAME ARGS...: a private nats-server -js in $dir/NAME; sets
# $nport (retried on another port if that one was taken meanwhile).
nats_server() {
	_n=$1
	shift
	mkdir -p "$dir/$_n/js"
	for _try in 1 2 3 4 5; do
		nport=$(free_port)
		: >"$dir/$_n/log"
		nats-server -js -a 127.0.0.1 -p "$nport" -sd "$dir/$_n/js" "$@" \
			>"$dir/$_n/log" 2>&1 &
		eval "${_n}_pid=$!"
		at_exit "kill -TERM $! 2>/dev/null; wait $! 2>/dev/null"
		wait_until 10 grep -q "Server is ready" "$dir/$_n/log" && return 0
	done
	bail "cannot start nats-server: $(tail -3 "$dir/$_n/log")"
}

nats_case() {
	command -v nats-server >/dev/null || bail "nats-server is not installed"
	nats_server tok --auth "$TOKEN"
	tp=$nport
	nats_server usr --user alice --pass "$CANARY"
	up=$nport
	source_case nats-wrongtoken "nats://$WRONG_ENC@127.0.0.1:$tp/S$$?create=1"
	source_case nats-wrongpassword "nats://alice:$WRONG_ENC@127.0.0.1:$up/S$$?create=1"
	source_case nats-tokenasuser "nats://alice:$TOKEN@127.0.0.1:$tp/S$$?create=1"
	source_case nats-down "nats://$TOKEN@127.0.0.1:1/S$$"
	source_case nats-unknownhost "nats://alice:$CANARY_ENC@nosuchhost.invalid:4222/S$$"
	source_case nats-badparam "nats://$TOKEN@127.0.0.1:$tp/S$$?no_such=1&create=1"
	source_case nats-nostream "nats://alice:$CANARY_ENC@127.0.0.1:$up/NoSuch$$"
	source_case nats-raw "nats://alice:$CANARY@127.0.0.1:$up/S$$"
	source_case nats-rawtoken "nats://$CANARY@127.0.0.1:$tp/S$$"
	source_case nats-badescape "nats://alice:Zq8V%2Fw3%40Kx%237%3AJm%9@127.0.0.1:$up/S$$"
	check "nats: a wrong token is refused by the server" \
		grep -qi "authoriz" "$dir/out/nats-wrongtoken.out"
	waiting_daemon nats-wrong-waiting "$dir/cfg/nats-wrongpassword.yaml"
	source_daemon nats-user "nats://alice:$CANARY_ENC@127.0.0.1:$up/U$$?create=1" \
		"nats://alice:\*\*\*@127.0.0.1:$up/U$$" \
		"kill -TERM $usr_pid; wait $usr_pid 2>/dev/null"
	source_daemon nats-token "nats://$TOKEN@127.0.0.1:$tp/T$$?create=1" \
		"nats://\*\*\*@127.0.0.1:$tp/T$$" \
		"kill -TERM $tok_pid; wait $tok_pid 2>/dev/null"
}

# ---------------------------------------------------------------------------
redis_case() {
	need_suite_server INBOX_TEST_REDIS_URL redis-server redis.sh
	hp=${INBOX_TEST_REDIS_URL#redis://}
	user="sec$$"
	redis-cli -u "$INBOX_TEST_REDIS_URL" ACL SETUSER "$user" on ">$CANARY" \
		'~*' '&*' '+@all' >/dev/null || bail "create a user with a password"
	at_exit "redis-cli -u '$INBOX_TEST_REDIS_URL' ACL DELUSER '$user' >/dev/null"
	redis-cli -u "$INBOX_TEST_REDIS_URL" XADD "sec$$" '*' payload \
		'{"id":"m-1","data":{"orderId":"ord-1","customer":"c1"}}' >/dev/null
	good="redis://$user:$CANARY_ENC@$hp/sec$$?group=g$$&drain=1"
	config "$dir/cfg/redis-good.yaml" "$SQLITE" "$good"
	cmd redis-good-migrate 0 migrate "$dir/cfg/redis-good.yaml"
	cmd redis-good 0 run "$dir/cfg/redis-good.yaml" --once --metrics 127.0.0.1:0
	check "redis: the start line shows the source redacted" \
		grep -q "\"source\":\"redis://$user:\*\*\*@$hp/" "$dir/out/redis-good.out"
	source_case redis-wrong "redis://$user:$WRONG_ENC@$hp/sec$$?drain=1"
	source_case redis-defaultuser "redis://:$CANARY_ENC@$hp/sec$$?drain=1"
	source_case redis-bare "redis://$CANARY_ENC@$hp/sec$$?drain=1"
	source_case redis-down "redis://$user:$CANARY_ENC@127.0.0.1:1/s?timeout_ms=500&drain=1"
	source_case redis-unknownhost "redis://$user:$CANARY_ENC@nosuchhost.invalid/s?timeout_ms=500"
	source_case redis-badparam "redis://$user:$CANARY_ENC@$hp/s?no_such=1"
	source_case redis-raw "redis://$user:$CANARY@$hp/s"
	source_case redis-badescape "redis://$user:Zq8V%2Fw3%40Kx%237%3AJm%9@$hp/s"
	check "redis: a wrong password is refused by the server" \
		grep -qi "WRONGPASS\|invalid username-password" "$dir/out/redis-wrong.out"
	waiting_daemon redis-wrong-waiting "$dir/cfg/redis-wrong.yaml"
	source_daemon redis-daemon "redis://$user:$CANARY_ENC@$hp/sec$$?group=d$$" \
		"redis://$user:\*\*\*@$hp/sec$$" \
		"redis-cli -u '$INBOX_TEST_REDIS_URL' ACL SETUSER '$user' resetpass '>$WRONG' >/dev/null; redis-cli -u '$INBOX_TEST_REDIS_URL' CLIENT KILL USER '$user' >/dev/null"
}

# ---------------------------------------------------------------------------
amqp_case() {
	need_suite_server INBOX_TEST_AMQP_URL RabbitMQ rabbitmq.sh
	hp=$(echo "$INBOX_TEST_AMQP_URL" | sed 's|^amqp://[^@]*@\([^/]*\)/.*|\1|')
	user="sec$$"
	ctl() { sh "$INBOX_TEST_AMQP_SCRIPT" ctl "$INBOX_TEST_AMQP_DIR" "$@" >/dev/null 2>&1; }
	ctl add_user "$user" "$CANARY" || bail "create a user with a password"
	at_exit "sh '$INBOX_TEST_AMQP_SCRIPT' ctl '$INBOX_TEST_AMQP_DIR' delete_user '$user' >/dev/null 2>&1"
	ctl set_permissions -p / "$user" '.*' '.*' '.*' || bail "give it the vhost"
	q="sec$$q"
	source_case amqp-wrong "amqp://$user:$WRONG_ENC@$hp/%2f/$q?declare=1"
	source_case amqp-guestwrong "amqp://guest:$CANARY_ENC@$hp/%2f/$q?declare=1"
	source_case amqp-down "amqp://$user:$CANARY_ENC@127.0.0.1:1/%2f/$q?connect_timeout_ms=500"
	source_case amqp-unknownhost "amqp://$user:$CANARY_ENC@nosuchhost.invalid/%2f/$q?connect_timeout_ms=500"
	source_case amqp-badvhost "amqp://$user:$CANARY_ENC@$hp/nosuch$$/$q?declare=1"
	source_case amqp-badparam "amqp://$user:$CANARY_ENC@$hp/%2f/$q?no_such=1"
	source_case amqp-raw "amqp://$user:$CANARY@$hp/%2f/$q"
	source_case amqp-badescape "amqp://$user:Zq8V%2Fw3%40Kx%237%3AJm%9@$hp/%2f/$q"
	check "amqp: a wrong password is refused by the broker" \
		grep -qi "login\|refused" "$dir/out/amqp-wrong.out"
	waiting_daemon amqp-wrong-waiting "$dir/cfg/amqp-wrong.yaml"
	source_daemon amqp-daemon "amqp://$user:$CANARY_ENC@$hp/%2f/$q?declare=1" \
		"amqp://$user:\*\*\*@$hp/%2f/$q" \
		"ctl change_password '$user' '$WRONG'; ctl close_all_connections 'test'"
}

# ---------------------------------------------------------------------------
# The outbox: step URLs carrying the canary in their user info and in
# secret parameters (and a reconcile URL too), every call refused (a port
# nothing listens on), so every row ends in a dead letter whose context
# names the URL; the dispatcher's log lines, `dlq` and `inspect` output,
# --pending, /metrics and /healthz of a daemon dispatching them, the dead
# letters' and the outbox rows' outcome columns. (The outbox rows hold
# the request as configured, URL and headers: they must, to be sent. So
# this store is kept out of data/, and only what the dispatcher wrote of
# its own, the dead letters and each row's last error, is searched.)
outbox_case() {
	mkdir -p "$dir/store"
	db="$dir/store/outbox.db"
	cat >"$dir/cfg/outbox.yaml" <<CFG
store: sqlite:$db
consumers:
  - name: billing.sec
    source: jsonl:$dir/data/orders.jsonl?follow=1&checkpoint=$dir/data/cp
    key: "create-invoice:{/data/orderId}"
    poll_timeout: 100ms
    setup: |
      CREATE TABLE IF NOT EXISTS invoices (order_id TEXT NOT NULL);
    effect:
      - sql: INSERT INTO invoices (order_id) VALUES (\$1)
        params: [/data/orderId]
    outbox:
      - step: notify
        url: "http://u:$CANARY_ENC@127.0.0.1:1/notify?api_key=$TOKEN&sig=1"
        headers: {Authorization: "Bearer $TOKEN"}
        body: {orderId: /data/orderId}
        idempotent: true
      - step: charge
        url: "http://127.0.0.1:1/charge?access_token=$CANARY_ENC_LOW"
        body: {orderId: /data/orderId}
        idempotent: false
        reconcile: {url: "http://u:$WRONG_ENC@127.0.0.1:1/find?ref={key}&token=$TOKEN"}
    dispatch: {max_attempts: 1, connect_timeout: 200ms, backoff: 10ms, poll: 100ms}
CFG
	cmd outbox-migrate 0 migrate "$dir/cfg/outbox.yaml"
	daemon outbox-daemon "$dir/cfg/outbox.yaml" --dispatch
	started outbox-daemon '"source":"jsonl:'
	if wait_until 30 sh -c "\"$BIN\" dlq list \"$dir/cfg/outbox.yaml\" --json 2>/dev/null | grep -c '\"reason\":\"outbox step' | grep -qx 4"; then
		ok "outbox: the four calls ended in dead letters"
	else
		fail "outbox: the four calls ended in dead letters" \
			"$("$BIN" dlq list "$dir/cfg/outbox.yaml" 2>&1 | tail -3 | cut -c1-300)"
	fi
	scrape outbox-daemon dead
	stop_daemon "$pid"
	expect_eq "outbox: the daemon stops on SIGTERM" "$rc" 0
	cmd outbox-dispatch 0 dispatch "$dir/cfg/outbox.yaml" --drain --timeout 5s
	cmd outbox-pending 0 dispatch "$dir/cfg/outbox.yaml" --pending
	cmd outbox-dlq-list 0 dlq list "$dir/cfg/outbox.yaml"
	cmd outbox-dlq-list-json 0 dlq list "$dir/cfg/outbox.yaml" --json
	for id in $(jq -r '.id' "$dir/out/outbox-dlq-list-json.out" 2>/dev/null); do
		cmd "outbox-dlq-show-$id" 0 dlq show "$dir/cfg/outbox.yaml" "$id"
		cmd "outbox-dlq-show-json-$id" 0 dlq show "$dir/cfg/outbox.yaml" "$id" --json
	done
	check "outbox: a dead letter names the URL, redacted" \
		grep -q 'http://u:\*\*\*@127.0.0.1:1/notify?api_key=\*\*\*&sig=1' \
		"$dir/out"/outbox-dlq-show-[0-9]*.out
	cmd outbox-inspect 0 inspect "$dir/cfg/outbox.yaml" billing.sec create-invoice:ord-1
	cmd outbox-inspect-json 0 inspect "$dir/cfg/outbox.yaml" billing.sec \
		create-invoice:ord-2 --json
	cmd outbox-stats 0 stats "$dir/cfg/outbox.yaml" --json
	sq "$db" "SELECT * FROM dead_letters" >"$dir/out/outbox-dead-letters.rows"
	sq "$db" "SELECT id, step, state, last_status, last_error, response FROM outbox" \
		>"$dir/out/outbox-rows.rows"
	check "outbox: the dead letters were read" \
		grep -q "outbox step" "$dir/out/outbox-dead-letters.rows"
	check "outbox: the rows' last errors were read" \
		grep -q "curl" "$dir/out/outbox-rows.rows"
}

case "$KIND" in
pg | kafka | nats | redis | amqp | outbox) "${KIND}_case" ;;
*) bail "unknown kind $KIND" ;;
esac
secret_files "$KIND"
summary
