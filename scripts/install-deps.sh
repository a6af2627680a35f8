#!/bin/sh
# Installs the Debian packages libinbox needs to build and test.
# Run as root on Debian 12. Only missing packages are installed.
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
procps"

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
