#!/bin/sh
# node-test.sh BUILD_DIR SOURCE_DIR
# Installs libinbox from BUILD_DIR into a temp prefix, packs
# bindings/node, installs the tarball into a fresh project with
# `npm install --offline` (so nothing can be downloaded: the addon is
# built by its install script against the system's Node-API headers),
# and runs bindings/node/test/*.test.js on that installed copy, against
# SQLite and $INBOX_TEST_PG_URL. node and npm missing is a failure
# (scripts/install-deps.sh provides them), never a skip.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
for t in node npm pkg-config cc; do
	command -v "$t" >/dev/null 2>&1 || { echo "node-test: $t not found (run scripts/install-deps.sh)"; echo "0 passed, 1 failed"; exit 1; }
done
if [ -z "${INBOX_TEST_PG_URL:-}" ]; then
	echo "node-test: INBOX_TEST_PG_URL not set (run through tests/run-suite.sh)"
	echo "0 passed, 1 failed"
	exit 1
fi
tmp=$(mktemp -d /tmp/inbox-node.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
libdir=$(ls -d "$tmp/prefix"/lib* | head -1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
export npm_config_cache="$tmp/npm-cache" npm_config_update_notifier=false
tgz=$(cd "$src/bindings/node" && npm pack --silent --pack-destination "$tmp" | tail -1)
mkdir "$tmp/app"
echo '{ "name": "app", "version": "1.0.0", "private": true }' >"$tmp/app/package.json"
if ! (cd "$tmp/app" && INBOX_NODE_WERROR=1 npm install --offline --no-audit --no-fund \
	--foreground-scripts "$tmp/$tgz" >"$tmp/npm.log" 2>&1); then
	cat "$tmp/npm.log"
	echo "node-test: npm install of the packed tarball failed"
	echo "0 passed, 1 failed"
	exit 1
fi
grep '^libinbox: built' "$tmp/npm.log" || true
mod="$tmp/app/node_modules/libinbox"
[ -f "$mod/build/inbox.node" ] || { echo "node-test: no addon built"; echo "0 passed, 1 failed"; exit 1; }
# the tests run on the installed copy, not on the source tree
cd "$tmp"
LIBINBOX_MODULE="$mod" node --expose-gc --test --test-reporter=spec \
	"$src"/bindings/node/test/*.test.js
