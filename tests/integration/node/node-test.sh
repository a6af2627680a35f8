#!/bin/sh
# node-test.sh BUILD_DIR SOURCE_DIR [asan]
# The binding's node --test suites (bindings/node/test/*.test.js) on the
# copy installed from its packed tarball (lib.sh), against SQLite and
# $INBOX_TEST_PG_URL. node or npm missing is a failure (scripts/
# install-deps.sh provides them), never a skip.
#
# With `asan` (the sanitizer build: BUILD_DIR's libinbox has ASan+UBSan):
# the addon is compiled and linked with the same flags, and node — which
# is not instrumented and cannot load an ASan library on its own: the
# runtime must come first — is started with the compiler's libasan and
# libubsan preloaded (LD_PRELOAD, inherited by the test files' child
# processes). Any ASan or UBSan report aborts the process that hit it
# (halt_on_error, -fno-sanitize-recover), so its test file fails, and is
# written to $tmp/asan.* too: a report fails the run even if a test
# swallowed the crash. Leak detection stays on (LeakSanitizer at the exit
# of each test file's process, no suppression file): node 20 and V8 leave
# nothing LSan reports at exit here (the suites ran clean with it), while
# an addon or library allocation that is never freed is reported (a
# planted leak in the addon's job_free was). Should a node release start
# leaking on its own, add a suppression file for node's frames rather
# than turning detection off.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
mode=${3:-plain}
. "$(dirname "$0")/lib.sh"
[ -n "${INBOX_TEST_PG_URL:-}" ] || bail "INBOX_TEST_PG_URL not set (run through tests/run-suite.sh)"
tmp=$(mktemp -d /tmp/inbox-node.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ "$mode" = asan ]; then
	san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
	asan=$(${CC:-cc} -print-file-name=libasan.so)
	ubsan=$(${CC:-cc} -print-file-name=libubsan.so)
	[ -f "$asan" ] && [ -f "$ubsan" ] || bail "libasan.so / libubsan.so not found by ${CC:-cc} -print-file-name"
	install_binding "$build" "$src" "$tmp" "$san"
	cd "$tmp"
	rc=0
	LD_PRELOAD="$asan $ubsan" \
	ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:log_path=$tmp/asan" \
	UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$tmp/asan" \
	LIBINBOX_MODULE="$mod" node --expose-gc --test --test-reporter=spec \
		"$src"/bindings/node/test/*.test.js || rc=$?
	if ls "$tmp"/asan.* >/dev/null 2>&1; then
		cat "$tmp"/asan.*
		echo "node: a sanitizer report (above)"
		echo "0 passed, 1 failed"
		exit 1
	fi
	exit $rc
fi
install_binding "$build" "$src" "$tmp"
cd "$tmp"
LIBINBOX_MODULE="$mod" node --expose-gc --test --test-reporter=spec \
	"$src"/bindings/node/test/*.test.js
