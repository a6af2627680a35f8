#!/bin/sh
# install-test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$(cd "$2" && pwd)
tmp=$(mktemp -d /tmp/inbox-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
check() {
	if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $*"; fi
}

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
libdir=$(ls -d "$tmp/prefix"/lib* | head -1)
for f in include/inbox/inbox.h include/inbox/sys/store.h; do
	check test -f "$tmp/prefix/$f"
done
check test -f "$(ls "$libdir"/libinbox.so* | head -1)"
check test -f "$(ls "$libdir"/libinbox.a | head -1)"
check test -f "$(ls "$libdir"/pkgconfig/inbox.pc)"

# 1. pkg-config, shared library
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c11 -Wall -Werror "$src/examples/quickstart.c" \
	$(pkg-config --cflags --libs inbox) -o "$tmp/qs_pc"
out=$(cd "$tmp" && LD_LIBRARY_PATH="$libdir" ./qs_pc "sqlite:$tmp/a.db")
echo "$out"
check sh -c "echo '$out' | grep -q 'create-invoice:o-1 *applied'"
check sh -c "echo '$out' | grep -q 'create-invoice:o-1 *duplicate'"
# again: the inbox is in the database, so everything is a duplicate now
out2=$(cd "$tmp" && LD_LIBRARY_PATH="$libdir" ./qs_pc "sqlite:$tmp/a.db")
check sh -c "! echo '$out2' | grep -q applied"
# and not because it printed nothing: the same order, now a duplicate
check sh -c "echo '$out2' | grep -q 'create-invoice:o-1 *duplicate'"

# 2. the static library (its dependencies stay shared: Debian ships no
# static libpq dependencies such as libpgcommon)
deps=$(pkg-config --print-requires-private inbox | awk '{print $1}')
cc -std=c11 "$src/examples/quickstart.c" \
	$(pkg-config --cflags inbox) "$libdir/libinbox.a" \
	$(pkg-config --libs $deps) -lpthread -o "$tmp/qs_static"
check sh -c "cd '$tmp' && ./qs_static 'sqlite:$tmp/b.db' | grep -q applied"

# 3. CMake package
mkdir -p "$tmp/proj"
cat >"$tmp/proj/CMakeLists.txt" <<EOC
cmake_minimum_required(VERSION 3.18)
project(qs C)
find_package(inbox REQUIRED)
add_executable(qs $src/examples/quickstart.c)
target_link_libraries(qs PRIVATE inbox::inbox)
EOC
cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/cmake.log" 2>&1 || cat "$tmp/cmake.log"
cmake --build "$tmp/proj/build" >"$tmp/build.log" 2>&1 || { cat "$tmp/cmake.log" "$tmp/build.log"; }
check sh -c "cd '$tmp' && LD_LIBRARY_PATH='$libdir' ./proj/build/qs 'sqlite:$tmp/c.db' | grep -q applied"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
