#!/bin/sh
# node-test.sh BUILD_DIR SOURCE_DIR
# The binding's node --test suites (bindings/node/test/*.test.js) on the
# copy installed from its packed tarball (lib.sh), against SQLite and
# $INBOX_TEST_PG_URL. node or npm missing is a failure (scripts/
# install-deps.sh provides them), never a skip.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
. "$(dirname "$0")/lib.sh"
[ -n "${INBOX_TEST_PG_URL:-}" ] || bail "INBOX_TEST_PG_URL not set (run through tests/run-suite.sh)"
tmp=$(mktemp -d /tmp/inbox-node.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
install_binding "$build" "$src" "$tmp"
cd "$tmp"
LIBINBOX_MODULE="$mod" node --expose-gc --test --test-reporter=spec \
	"$src"/bindings/node/test/*.test.js
