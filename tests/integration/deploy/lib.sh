# Helpers of the deployment tests (sourced; ../common.sh has the checks
# and the closing line): inbox check, /livez and /readyz, sd_notify, the
# examples, the dashboard and alert rules, the shell completion, the
# Debian package.
group=deploy
. "${INBOX_IT_DIR:-$(dirname "$0")/..}/common.sh"

# run_rc OUT COMMAND...: run it, stdout and stderr into OUT; its status
# in $rc.
run_rc() {
	_out=$1
	shift
	"$@" >"$_out" 2>&1
	rc=$?
}

# own_pg DIR: a throwaway PostgreSQL of the test's own (tests/servers/
# pg.sh), so the test may stop it: its URL in own_pg_url, its port in
# own_pg_port. Ports after the suite's base (+9, +19, ...: pg.sh refuses
# one in use, so a few are tried).
own_pg() {
	_base=${INBOX_TEST_PORT_BASE:-$((30000 + $$ % 1000 * 10))}
	own_pg_url=""
	for _try in 9 19 29 39 49 59; do
		own_pg_port=$((_base + _try))
		if own_pg_url=$(sh "$servers/pg.sh" start "$1" "$own_pg_port" 2>"$1.err"); then
			return 0
		fi
		own_pg_url=""
	done
	cat "$1.err"
	return 1
}
