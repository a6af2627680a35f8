#!/bin/sh
# inbox --version: the command's and the library's version (the one
# include/inbox/version.h names), then one "name version" line per client
# library, each with a version number.
#   cli_version.sh INBOX_BIN SOURCE_DIR
set -u
bin=$1
src=$2
passed=0
failed=0
check() {
	name=$1
	shift
	if "$@"; then
		echo "ok   $name"
		passed=$((passed + 1))
	else
		echo "FAIL $name"
		failed=$((failed + 1))
	fi
}
tmp=$(mktemp -d /tmp/inbox-version.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

want=$(sed -n 's/^#define INBOX_VERSION *"\([0-9.]*\)".*/\1/p' \
	"$src/include/inbox/version.h")
"$bin" --version >"$tmp/out" 2>"$tmp/err"
check "exit 0" [ $? -eq 0 ]
check "nothing on stderr" [ ! -s "$tmp/err" ]
check "the version header names a version" [ -n "$want" ]
check "first line: inbox $want" [ "$(sed -n 1p "$tmp/out")" = "inbox $want" ]
check "second line: libinbox $want" \
	[ "$(sed -n 2p "$tmp/out")" = "libinbox $want" ]
for lib in libpq sqlite librdkafka librabbitmq hiredis cnats libcurl \
	jansson pcre2 openssl libyaml libmicrohttpd; do
	check "$lib and its version" grep -qE "^$lib [0-9]+\.[0-9]+" "$tmp/out"
done
"$bin" version >"$tmp/out2" 2>&1
check "inbox version: the same" cmp -s "$tmp/out" "$tmp/out2"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
