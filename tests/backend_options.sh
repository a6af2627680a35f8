#!/bin/sh
# A backend left out at build time (INBOX_WITH_KAFKA=OFF,
# INBOX_WITH_NATS=OFF) is really left out: the library and the command
# build without it (lean: only those two targets, -j2, in a temp dir),
# libinbox.so neither links nor calls its client library, inbox.pc and the
# CMake package do not require it, inbox --version does not name it, and
# `inbox run` on a kafka:// source is refused at load (exit 3), naming
# the scheme and listing the sources this build has, without kafka.
#   backend_options.sh SOURCE_DIR
set -u
src=${1:?usage: backend_options.sh SOURCE_DIR}
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
tmp=$(mktemp -d /tmp/inbox-options.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
b=$tmp/build
cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINBOX_TESTS=OFF \
	-DINBOX_WITH_KAFKA=OFF -DINBOX_WITH_NATS=OFF >"$tmp/configure.log" 2>&1
check "configure with Kafka and NATS off" [ $? -eq 0 ]
cmake --build "$b" -j2 --target inbox inbox_cli >"$tmp/build.log" 2>&1
rc=$?
check "the library and the command build" [ $rc -eq 0 ]
[ $rc -eq 0 ] || tail -20 "$tmp/build.log"
lib=$(ls "$b"/libinbox.so.*.*.* 2>/dev/null | head -1)
bin=$b/src/cli/inbox
check "libinbox.so built" [ -n "$lib" ]
check "inbox built" [ -x "$bin" ]

needed=$(readelf -d "$lib" 2>/dev/null | grep NEEDED)
check "libinbox.so needs libpq (still on)" \
	sh -c 'printf "%s\n" "$1" | grep -q "libpq"' - "$needed"
check "libinbox.so does not need librdkafka or libnats" \
	sh -c '! printf "%s\n" "$1" | grep -qE "librdkafka|libnats"' - "$needed"
check "libinbox.so calls no rd_kafka_ or nats function" \
	sh -c '! nm -D --undefined-only "$1" | grep -qE " (rd_kafka_|nats[A-Z_])"' - "$lib"

pc=$b/inbox.pc
check "inbox.pc requires libpq and hiredis" \
	sh -c 'grep "^Requires.private:" "$1" | grep -q "libpq" &&
		grep "^Requires.private:" "$1" | grep -q "hiredis"' - "$pc"
check "inbox.pc does not require rdkafka or libnats" \
	sh -c '! grep "^Requires" "$1" | grep -qE "rdkafka|libnats"' - "$pc"
check "the CMake package does not look for rdkafka or libnats" \
	sh -c '! grep -qE "rdkafka|libnats" "$1"' - "$b/inboxConfig.cmake"
check "the CMake package looks for libpq" \
	grep -q "libpq" "$b/inboxConfig.cmake"

"$bin" --version >"$tmp/version" 2>&1
check "inbox --version names neither librdkafka nor cnats" \
	sh -c '! grep -qE "^(librdkafka|cnats) " "$1"' - "$tmp/version"
check "inbox --version names libpq and hiredis" \
	sh -c 'grep -q "^libpq " "$1" && grep -q "^hiredis " "$1"' - "$tmp/version"

cat >"$tmp/k.yaml" <<CFG
store: sqlite:$tmp/t.db
consumers:
  - name: orders
    source: kafka://127.0.0.1:1/orders?group=g
CFG
"$bin" run "$tmp/k.yaml" --once >"$tmp/out" 2>"$tmp/err"
rc=$?
check "inbox run on a kafka:// source exits 3 (a config error)" [ $rc -eq 3 ]
check "the message names the kafka URL it refuses" \
	grep -q 'unsupported source URL "kafka://' "$tmp/err"
check "the message lists the sources built, kafka and nats not among them" \
	sh -c 'grep -o "sources registered: [^)]*" "$1" | grep -q jsonl &&
		! grep -o "sources registered: [^)]*" "$1" | grep -qE "kafka|nats"' \
	- "$tmp/err"
[ $failed -eq 0 ] || { cat "$tmp/err"; cat "$tmp/version"; }
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
