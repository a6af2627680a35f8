#!/bin/sh
# types.sh BUILD_DIR SOURCE_DIR
# index.d.ts type-checked: the binding installed from its packed tarball
# (lib.sh), typescript and @types/node from npm's cache as
# bindings/node/test/types/package-lock.json pins them (put there by
# scripts/install-deps.sh: the test never reaches the network), then
# `tsc --noEmit --strict` over test/types/api.ts, which must pass (its
# @ts-expect-error lines must each be errors). And the harness itself: the
# same file with one @ts-expect-error removed must fail with that error.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d /tmp/inbox-node-types.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
install_binding "$build" "$src" "$tmp"
mkdir "$tmp/types"
cp "$src/bindings/node/test/types/package.json" "$src/bindings/node/test/types/package-lock.json" \
	"$src/bindings/node/test/types/api.ts" "$tmp/types/"
cd "$tmp/types"
npm ci --offline --no-audit --no-fund --loglevel=error >"$tmp/npm-types.log" 2>&1 ||
	{ cat "$tmp/npm-types.log"; bail "npm ci --offline of test/types failed (its packages are fetched by scripts/install-deps.sh: run make deps as root)"; }
ln -s "$mod" node_modules/libinbox
tsc() {
	node node_modules/typescript/bin/tsc --noEmit --strict --target es2022 \
		--module commonjs --moduleResolution node --types node "$@"
}
passed=0
failed=0
if tsc api.ts >"$tmp/tsc.log" 2>&1; then
	echo "ok   api.ts type-checks against index.d.ts ($(node node_modules/typescript/bin/tsc --version))"
	passed=$((passed + 1))
else
	cat "$tmp/tsc.log"
	echo "FAIL api.ts does not type-check against index.d.ts"
	failed=$((failed + 1))
fi
# the first @ts-expect-error removed: its line's error must fail tsc
awk '!done && /^ *\/\/ @ts-expect-error/ { done = 1; next } { print }' api.ts >broken.ts
if tsc broken.ts >"$tmp/tsc-broken.log" 2>&1; then
	echo "FAIL tsc passed a file with a type error (broken.ts)"
	failed=$((failed + 1))
elif grep -q "broken.ts(.*error TS" "$tmp/tsc-broken.log"; then
	echo "ok   a type error fails tsc: $(grep -m1 'error TS' "$tmp/tsc-broken.log")"
	passed=$((passed + 1))
else
	cat "$tmp/tsc-broken.log"
	echo "FAIL tsc failed on broken.ts without a type error in it"
	failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
