# The chaos harness's helpers (sourced by cell.sh after the integration
# tests' common.sh, directly or through a group's lib.sh): the stream of
# orders with its bad messages, the daemons' config, the sources' servers
# and their faults, the store's faults, the checker and the figures.
# POSIX sh (dash). Every time is in epoch milliseconds (now_ms); the rows
# the effect writes carry the store's clock in the same unit (at_ms).
tab=$(printf '\t')

# --- The stream --------------------------------------------------------------

# gen_stream FILE ORDERS BAD: ORDERS order-created events as common.sh's
# order_stream makes them (a tenth more exact copies of earlier events —
# redeliveries — and a twentieth producer retries: a new message id, the
# same order), and BAD malformed messages plus BAD the effect rejects
# (totalCents < 0 breaks the table's CHECK), interleaved; half the
# malformed ones come twice (the same bytes), a third of the rejected ones
# twice and a third again under a new id (a producer retry). One
# "ID<TAB>PAYLOAD" line per message. The orders are ord-N, the malformed
# bad-N, the rejected rej-N: their numbers never repeat.
gen_stream() {
	order_stream "$2" $(($2 / 10)) $(($2 / 20)) |
		awk -v nbad="$3" -v seed="${orders_seed:-42}" '
	function id(l) {
		return match(l, /"id":"[^"]*"/) ? substr(l, RSTART + 6, RLENGTH - 7) : ""
	}
	function emit(l) { print id(l) "\t" l }
	BEGIN { srand(seed + 1) }
	{ v[nv++] = $0 }
	END {
		# the bad ones and their copies, each at a random position
		# after the original
		for (i = 1; i <= nbad; i++) {
			m = sprintf("{\"id\":\"bad-%06d\",\"type\":\"order.created\",\"data\":{\"orderId\":\"bad-%06d\",\"customer\":\"c%d\"", i, i, i % 97)
			r = sprintf("{\"id\":\"rej-%06d\",\"type\":\"order.created\",\"data\":{\"orderId\":\"rej-%06d\",\"customer\":\"c%d\",\"totalCents\":-%d}}", i, i, i % 97, i)
			pm = int(rand() * nv); at[pm] = at[pm] "\n" m
			if (rand() < 0.5) { p = pm + int(rand() * (nv - pm)); at[p] = at[p] "\n" m }
			pr = int(rand() * nv); at[pr] = at[pr] "\n" r
			x = rand()
			if (x < 1 / 3) { p = pr + int(rand() * (nv - pr)); at[p] = at[p] "\n" r }
			else if (x < 2 / 3) {
				p = pr + int(rand() * (nv - pr))
				rr = r; sub(/"id":"rej-[0-9]*"/, sprintf("\"id\":\"rej-%06d-retry\"", i), rr)
				at[p] = at[p] "\n" rr
			}
		}
		for (i = 0; i < nv; i++) {
			if (i in at) {
				n = split(substr(at[i], 2), b, "\n")
				for (k = 1; k <= n; k++) emit(b[k])
			}
			emit(v[i])
		}
	}' >"$1"
}

# expected FILE DIR: what the checker expects of the stream in FILE:
# DIR/valid (one orderId a line, sorted) and DIR/bad ("ID KIND", KIND
# malformed or rejected).
expected() {
	grep -o '"orderId":"ord-[0-9]*"' "$1" | cut -d'"' -f4 | sort -u >"$2/valid"
	{
		grep -o '^bad-[0-9]*' "$1" | sort -u | sed 's/$/ malformed/'
		grep -o '"orderId":"rej-[0-9]*"' "$1" | cut -d'"' -f4 |
			sort -u | sed 's/$/ rejected/'
	} >"$2/bad"
}

# --- The daemons' config -----------------------------------------------------

# chaos_config FILE STORE_URL SOURCE_URL PREFIX WHO: one consumer billing
# orders into ${PREFIX}invoices (as the integration tests do): no unique
# constraint (a double effect shows as two rows), a CHECK that refuses a
# negative total (the rejected messages), and per row WHO applied it and
# when (at_ms, the store's clock).
chaos_config() {
	case "$2" in
	postgres*) _at="(extract(epoch FROM clock_timestamp()) * 1000)::bigint" ;;
	*) _at="CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)" ;;
	esac
	cat >"$1" <<CFG
store: "$2"
table_prefix: "$4"
consumers:
  - name: billing.chaos
    source: "$3"
    key: "create-invoice:{/data/orderId}"
    fingerprint: /data
    batch_size: ${CHAOS_BATCH:-20}
    retry_delay: 100ms
    poll_timeout: 100ms
    max_attempts: ${CHAOS_MAX_ATTEMPTS:-5}
    lease: ${CHAOS_LEASE:-2s}
    setup: |
      CREATE TABLE IF NOT EXISTS ${4}invoices (
        order_id    TEXT    NOT NULL,
        customer    TEXT    NOT NULL,
        total_cents INTEGER NOT NULL CHECK (total_cents >= 0),
        who         TEXT    NOT NULL,
        at_ms       BIGINT  NOT NULL DEFAULT ($_at)
      );
    effect:
      - sql: |
          INSERT INTO ${4}invoices (order_id, customer, total_cents, who)
          VALUES (\$1, \$2, \$3, '$5')
        params: [/data/orderId, /data/customer, /data/totalCents]
CFG
}

# --- Ports -------------------------------------------------------------------

# port_free PORT...: nobody listens on any of them (a bind test).
port_free() {
	perl -MIO::Socket::INET -e '
		for (@ARGV) {
			IO::Socket::INET->new(Listen => 1, ReuseAddr => 1,
			    LocalAddr => "127.0.0.1:$_") or exit 1;
		}' "$@"
}

# free_port_with OFFSET...: a port P in 20000-28999 with P and P+OFFSET
# free, for each OFFSET.
free_port_with() {
	while :; do
		_p=$(rand_between 20000 28999)
		_ps=$_p
		for _o in "$@"; do _ps="$_ps $((_p + _o))"; done
		# shellcheck disable=SC2086
		port_free $_ps && { echo "$_p"; return; }
	done
}

# --- The sources -------------------------------------------------------------
# For each source: src_start (its server, private to the cell), src_url N
# (daemon N's source URL), src_publish CHUNK ATTEMPT (0 when every
# message of CHUNK was accepted), src_crash / src_recover (a broker
# outage: kill -9, then start again on the same data), src_drained
# (nothing left to deliver or to acknowledge), src_stop.

src_start() {
	case "$SOURCE" in
	jsonl)
		: >"$dir/orders.jsonl"
		;;
	kafka)
		start_mock orders:4
		;;
	amqp)
		_port=$(free_port_with 1000 2000 3000 3009)
		sh "$servers/rabbitmq.sh" start "$dir/rmq" "$_port" >"$dir/rmq.env" ||
			return 1
		AMQP="amqp://guest:guest@127.0.0.1:$_port/%2f"
		;;
	redis)
		R=$(private_redis "$dir/redis") || return 1
		;;
	nats)
		start_nats
		;;
	esac
}

src_url() {
	case "$SOURCE" in
	jsonl) echo "jsonl:$dir/orders.jsonl?follow=1&checkpoint=$dir/d$1.checkpoint" ;;
	kafka) echo "kafka://$BOOT/orders?group=billing&$GROUP_OPTS" ;;
	amqp) echo "$AMQP/orders?declare=1" ;;
	redis) echo "$R/orders?group=billing&claim_idle=2000" ;;
	nats) echo "$NATS_URL/ORDERS?durable=billing&ack_wait=2s&create=1" ;;
	esac
}

# src_publish CHUNK ATTEMPT: a retried publish gives the messages new
# message ids (a producer retry); the payloads stay the same.
src_publish() {
	_c=$1
	_a=$2
	case "$SOURCE" in
	jsonl)
		# one write (a chunk is far below cat's buffer): the followers
		# never see half a line
		cut -f2- "$_c" >"$_c.lines" && cat "$_c.lines" >>"$dir/orders.jsonl"
		;;
	kafka)
		# KEY = ID: the partitioner spreads the producer retries of an
		# order over other partitions (other group members)
		awk -F'\t' -v a="$_a" '{ i = a > 1 ? $1 "-r" a : $1; print i "\t" i "\t" $2 }' \
			"$_c" >"$_c.kafka" &&
			"$PRODUCE" -q -K -i "$BOOT" orders "$_c.kafka" 9>&- 2>>"$dir/producer.err"
		;;
	amqp)
		cut -f2- "$_c" |
			"$PUB" "$AMQP" publish orders --message-id-prefix "${_c##*/}.$_a." \
				>/dev/null 2>>"$dir/producer.err"
		;;
	redis)
		# redis-cli exits 0 whatever the server answered: count the
		# entry ids it printed
		_n=$(wc -l <"$_c")
		_got=$(awk -F'\t' '{ printf("XADD orders * payload '\''%s'\''\n", $2) }' "$_c" |
			redis-cli -u "$R" 2>>"$dir/producer.err" | grep -c '^[0-9]*-[0-9]*$')
		[ "$_got" -eq "$_n" ]
		;;
	nats)
		cut -f2- "$_c" >"$_c.lines" &&
			"$PUB" pub "$NATS_URL" ORDERS "$_c.lines" "${_c##*/}.$_a" \
				>/dev/null 2>>"$dir/producer.err"
		;;
	esac
}

src_crash() {
	case "$SOURCE" in
	kafka)
		echo down >&9
		wait_until 10 grep -qx down "$dir/mock.out"
		sed -i '/^down$/d' "$dir/mock.out"
		;;
	amqp) sh "$servers/rabbitmq.sh" kill "$dir/rmq" ;;
	redis) sh "$servers/redis.sh" kill "$dir/redis" ;;
	nats) sh "$servers/nats.sh" kill "$dir/nats" ;;
	esac
}

src_recover() {
	case "$SOURCE" in
	kafka)
		echo up >&9
		wait_until 10 grep -qx up "$dir/mock.out"
		sed -i '/^up$/d' "$dir/mock.out"
		;;
	amqp) sh "$servers/rabbitmq.sh" restart "$dir/rmq" >>"$dir/rmq.out" 2>&1 ;;
	redis) sh "$servers/redis.sh" restart "$dir/redis" ;;
	nats) sh "$servers/nats.sh" restart "$dir/nats" >/dev/null ;;
	esac
}

src_drained() {
	case "$SOURCE" in
	jsonl)
		_size=$(wc -c <"$dir/orders.jsonl")
		for _i in $(seq 1 "$DAEMONS"); do
			[ "$(ckpt_pos "$dir/d$_i.checkpoint" 1)" = "$_size" ] ||
				return 1
		done
		;;
	kafka)
		# no lag figure without a Kafka admin client here: the caller
		# waits for the logs to go quiet instead
		return 0
		;;
	amqp)
		[ "$(ready orders)" = 0 ] && [ "$(ready orders.retry)" = 0 ]
		;;
	redis)
		# XINFO GROUPS: lag 0 (every entry read) and nothing pending
		rcli "$R" XINFO GROUPS orders 2>/dev/null |
			awk 'p == "pending" { pe = $0 } p == "lag" { la = $0 } { p = $0 }
			     END { exit !(pe == "0" && la == "0") }'
		;;
	nats)
		case "$("$PUB" info "$NATS_URL" ORDERS billing 2>&1)" in
		*"pending=0 ack_pending=0 "*) return 0 ;;
		*) return 1 ;;
		esac
		;;
	esac
}

# src_died: the source's server ended by itself (not by our faults);
# sets died_why. Not in a subshell (it reaps the server). Only the Kafka
# mock: it keeps its log in memory, so what it held goes with it and
# cannot come back (librdkafka's mock, 2.0.2 as today's, aborts on
# `!member->resp` in rd_kafka_mock_cgrp_member_add when a member sends
# JoinGroup again while its first one is still parked, as one may after
# a SIGCONT). The other servers write to disk and the outages start them
# again.
src_died() {
	case "$SOURCE" in
	kafka)
		[ -n "$mock_pid" ] && ! alive "$mock_pid" || return 1
		wait "$mock_pid" 2>/dev/null
		_st=$?
		mock_pid=""
		died_why="kafka-mock exited with status $_st: $(tail -1 "$dir/mock.err" 2>/dev/null)"
		;;
	*) return 1 ;;
	esac
}

src_stop() {
	case "$SOURCE" in
	amqp) sh "$servers/rabbitmq.sh" stop "$dir/rmq" >/dev/null 2>&1 ;;
	redis) sh "$servers/redis.sh" stop "$dir/redis" >/dev/null 2>&1 ;;
	esac
	# kafka's mock and nats-server: their group's cleanup stops them
	return 0
}

# --- The store ---------------------------------------------------------------

# q SQL: one statement on the cell's store, values separated by tabs.
q() {
	if [ "$STORE" = sqlite ]; then
		sqlite3 -separator "$tab" -cmd ".timeout 10000" "$dir/t.db" "$1"
	else
		psql "$INBOX_TEST_PG_URL" -X -q -tA -F "$tab" -v ON_ERROR_STOP=1 -c "$1"
	fi
}

# pg_mode_next: how the next PostgreSQL start runs (CHAOS_PG_NS: 0 plain,
# 1 in a PID namespace, random (default) either, half the time).
pg_mode_next() {
	case "${CHAOS_PG_NS:-random}" in
	0) echo plain ;;
	1) echo ns ;;
	*) if [ "$(rand_between 0 1)" -eq 1 ]; then echo ns; else echo plain; fi ;;
	esac
}

# pg_up [MODE]: start PostgreSQL if it is down, as MODE (plain or ns)
# says, or pg_mode_next; prints the mode.
pg_up() {
	[ "$(sh "$here/pgfault.sh" mode "$CHAOS_PG_DIR")" != down ] && return 0
	_m=${1:-$(pg_mode_next)}
	sh "$here/pgfault.sh" start "$CHAOS_PG_DIR" "$CHAOS_PG_PORT" "$_m" >/dev/null &&
		echo "$_m"
}

# pg_terminate: pg_terminate_backend on some (each with probability 1/2,
# at least one) of the other client connections to the database; prints
# how many.
pg_terminate() {
	pgq "WITH c AS (SELECT pid, row_number() OVER (ORDER BY random()) n
	                FROM pg_stat_activity
	                WHERE datname = current_database()
	                  AND backend_type = 'client backend'
	                  AND pid <> pg_backend_pid())
	     SELECT count(pg_terminate_backend(pid)) FROM c
	     WHERE n = 1 OR random() < 0.5" 2>/dev/null || echo 0
}

# --- The checker -------------------------------------------------------------

# check_cell DIR: compares what the store holds with DIR/valid and
# DIR/bad; writes DIR/check ("name=value" lines) and DIR/problems (the
# first offenders of each kind).
check_cell() {
	q "SELECT order_id, who, at_ms FROM ${prefix}invoices" >"$1/rows"
	if [ "$STORE" = sqlite ]; then
		_pl="CAST(payload AS TEXT)" _chr=char
	else
		_pl="encode(payload, 'escape')" _chr=chr
	fi
	q "SELECT COALESCE(key, ''),
	          replace(replace(reason, $_chr(10), ' '), $_chr(9), ' '),
	          replace(replace($_pl, $_chr(10), ' '), $_chr(9), ' ')
	   FROM ${prefix}dead_letters" >"$1/dls"
	awk -F'\t' -v probs="$1/problems" '
	function problem(s) { if (np[s]++ < 5) print s >> probs }
	FILENAME ~ /\/valid$/ { V[$1] = 1; nv++; next }
	FILENAME ~ /\/bad$/ { split($0, f, " "); B[f[1]] = f[2]; nb++; next }
	FILENAME ~ /\/rows$/ {
		R[$1]++
		if (!($1 in V)) { unexpected++; problem("row for an order not valid: " $1) }
		next
	}
	FILENAME ~ /\/dls$/ {
		found++
		who = ""
		if (match($1, /(ord|rej|bad)-[0-9]+/)) who = substr($1, RSTART, RLENGTH)
		else if (match($3, /"orderId":"(ord|rej|bad)-[0-9]+"/)) who = substr($3, RSTART + 11, RLENGTH - 12)
		else if (match($3, /(ord|rej|bad)-[0-9]+/)) who = substr($3, RSTART, RLENGTH)
		if (who in V) { valid_dl++; problem("valid order dead-lettered: " who ": " $2); next }
		if (!(who in B)) { unknown_dl++; problem("dead letter of an unknown message: " $1 " " $2); next }
		D[who]++
		ok = B[who] == "malformed" ? ($2 ~ /JSON/) : (tolower($2) ~ /check constraint/)
		if (!ok) { bad_reason++; problem("dead letter of " who " (" B[who] ") with reason: " $2) }
		next
	}
	END {
		for (k in V) if (!(k in R)) { lost++; problem("lost: " k) }
		for (k in R) if (R[k] > 1 && (k in V)) { doubled += R[k] - 1; doubled_keys++; problem("doubled: " k " x" R[k]) }
		for (k in B) {
			if (!(k in D)) { dl_missing++; problem("no dead letter for " k " (" B[k] ")") }
			else if (D[k] > 1) { dl_extra += D[k] - 1; problem(D[k] " dead letters for " k " (" B[k] ")") }
		}
		printf("valid=%d\nlost=%d\ndoubled=%d\ndoubled_keys=%d\nunexpected=%d\n", nv, lost, doubled, doubled_keys, unexpected)
		printf("dl_expected=%d\ndl_found=%d\ndl_missing=%d\ndl_extra=%d\n", nb, found, dl_missing, dl_extra)
		printf("dl_bad_reason=%d\nvalid_in_dl=%d\nunknown_dl=%d\n", bad_reason, valid_dl, unknown_dl)
	}' "$1/valid" "$1/bad" "$1/rows" "$1/dls" >"$1/check"
}

# recovery DIR: for each outage in DIR/faults ("KIND START END [WHO]"),
# the time from its end to the first row applied after it (the store's
# clock, at_ms), and for each SIGSTOP the time from its start to the
# first row another daemon applied; writes DIR/recovery (one line per
# fault: KIND START END MS, MS "-" when no row came after it) and prints
# "KIND:n=N,max=MS,p50=MS" per kind, separated by ";".
recovery() {
	sort -t"$tab" -k3,3n "$1/rows" | awk -F'\t' -v out="$1/recovery" '
	BEGIN { nf = 0; n = 0 }
	FILENAME ~ /\/faults$/ {
		split($0, fl, " ")
		fk[nf] = fl[1]; fs[nf] = fl[2]; fe[nf] = fl[3]; fw[nf] = fl[4]; nf++
		next
	}
	{ at[n] = $3; who[n] = $2; n++ }
	END {
		for (i = 0; i < nf; i++) {
			ms = "-"
			if (fk[i] == "sigstop") {
				for (j = 0; j < n; j++)
					if (at[j] >= fs[i] && who[j] != fw[i]) { ms = at[j] - fs[i]; break }
			} else {
				for (j = 0; j < n; j++)
					if (at[j] >= fe[i]) { ms = at[j] - fe[i]; break }
			}
			print fk[i], fs[i], fe[i], ms > out
			if (ms != "-") { v[fk[i], c[fk[i]]++] = ms; kinds[fk[i]] = 1 }
		}
		for (k in kinds) {
			m = c[k]
			# insertion sort: a few dozen values at most
			for (a = 1; a < m; a++) {
				x = v[k, a]
				for (b = a - 1; b >= 0 && v[k, b] > x; b--) v[k, b + 1] = v[k, b]
				v[k, b + 1] = x
			}
			printf("%s%s:n=%d,max=%d,p50=%d", sep, k, m, v[k, m - 1], v[k, int((m - 1) / 2)])
			sep = ";"
		}
	}' "$1/faults" -
}
