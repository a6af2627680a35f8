# Sourced by bench/run: the PostgreSQL ceiling, a bare libpq loop
# (bench/plain_pg) doing libinbox's durable work as cheaply as a program
# can, and what it costs per message on both sides.
#
# plain_ceiling: three runs of plain_pg on $url, $N messages, batch 100 —
#   parsing and fingerprinting each message as a hand-written consumer
#   must (the ceiling: $ceiling, its CPU in $plain_cpu / $plain_srv),
#   handed the fields ready-made (the bare durable work), and deciding the
#   effect in SQL (one statement per batch: a bound for effects SQL alone
#   can express, not the ceiling).
# cpu_note LINE: "CPU/msg client X µs, server Y µs" of a RESULT line.
cpu_note() {
	printf 'CPU/msg client %s µs, server %s µs' "$(field client_cpu_us "$1")" "$(field server_cpu_us "$1")"
}
plain_pg_run() { # NAME NOTE ARGS...
	_name=$1 _note=$2
	shift 2
	if "$build/bench/plain_pg" "$url" "$N" 100 "$@" >"$tmp/plain_pg.out"; then
		_line=$(grep '^RESULT' "$tmp/plain_pg.out") || _line="RESULT counts=WRONG rate=0"
	else
		_line="RESULT counts=WRONG rate=0"
	fi
	record "$_name" "$(field rate "$_line")" "$(field counts "$_line")" "$_note; $(cpu_note "$_line")"
	last=$_line
}
plain_ceiling() {
	plain_pg_run "ceiling: plain libpq loop, batch 100" "parses (jansson) and fingerprints each message; prepared, binary arrays, pipelined, 2 round trips per batch"
	ceiling=$(field rate "$last")
	plain_cpu=$(field client_cpu_us "$last")
	plain_srv=$(field server_cpu_us "$last")
	plain_pg_run "plain libpq loop, fields pre-extracted" "no parsing, no hashing: the bare durable work" --pre-extracted
	plain_pg_run "plain libpq loop, effect decided in SQL" "claim and invoices in one statement: 1 round trip per batch" --one-statement
}
