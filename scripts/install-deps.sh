#!/bin/sh
# Installs the Debian packages libinbox needs to build and test.
# Run as root on Debian 12. Only missing packages are installed.
#   install-deps.sh          what `make build` and `make test` need
#   install-deps.sh --fuzz   also Clang and its libFuzzer runtime (`make fuzz`)
#
# Every command the Makefile, scripts/, bench/ and tests/ run is either
# in Debian's essential set (a debootstrap minbase has it: coreutils,
# util-linux for flock, runuser, setsid, and unshare, nsenter and setpriv
# (tests/servers/pg.sh PG_PIDNS=1), findutils, grep,
# sed, mawk, diffutils, dash, bash, perl-base, hostname) or comes from a
# package below:
#   build-essential (cc, c++) cmake (ctest) pkg-config git clang-format
#                     the build, format_check, the install test
#   postgresql        postgres, initdb, pg_isready, psql, pgbench
#   sqlite3 kcat redis-server (redis-cli) rabbitmq-server (epmd)
#   nats-server       the test servers and their command-line clients
#   prometheus        promtool (metrics exposition checks)
#   curl jq           the HTTP endpoints' tests
#   bsdutils          script (commands run on a terminal)
#   procps            ps, pgrep (no test needs them; for looking around)
#   iproute2          ss (tests/servers/nats.sh and the NATS and RabbitMQ
#                     tests wait on listening ports with it)
#   clang libclang-rt-14-dev   (--fuzz) `make fuzz`: the compiler and its
#                     libFuzzer runtime
# node/npm (bench/run's seed row) are optional: that row is skipped
# without them.
set -eu

PKGS="build-essential cmake pkg-config git clang-format
libpq-dev postgresql
libsqlite3-dev sqlite3
libjansson-dev libssl-dev libyaml-dev
librdkafka-dev kcat
librabbitmq-dev rabbitmq-server
libhiredis-dev redis-server
libnats-dev nats-server
libcurl4-openssl-dev libmicrohttpd-dev prometheus bsdutils curl jq
libpcre2-dev json-schema-test-suite
procps iproute2"
if [ "${1:-}" = --fuzz ]; then
	PKGS="$PKGS clang libclang-rt-14-dev"
fi

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "install-deps: all packages present"
	exit 0
fi

echo "install-deps: installing:$missing"
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: must run as root to install packages" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
# The server packages start their system services on install; the tests run
# their own instances on other ports, so stop the system ones quietly.
for svc in redis-server rabbitmq-server nats-server postgresql prometheus; do
	if command -v service >/dev/null 2>&1; then
		service "$svc" stop >/dev/null 2>&1 || true
	fi
done
