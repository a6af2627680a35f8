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
# The installed headers are self-contained: each compiles alone, outside
# the tree, as C11 and as C++, and none refers the reader to a file of the
# source tree (src/...) for its contract.
for h in $(cd "$tmp/prefix/include" && find inbox -name '*.h' | sort); do
	printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$tmp/h.c"
	check cc -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only \
		-I"$tmp/prefix/include" "$tmp/h.c"
	if command -v c++ >/dev/null 2>&1; then
		check c++ -x c++ -Wall -Werror -fsyntax-only \
			-I"$tmp/prefix/include" "$tmp/h.c"
	fi
done
check sh -c "! grep -n 'src/[a-z]*/' -r '$tmp/prefix/include/inbox'"
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

# 2. the static library with pkg-config --static: its output lists
# libinbox, every client library (Requires.private) and -lpthread. Linked
# as given, except: the static archive is asked for by its file name
# (-l:libinbox.a, since libinbox.so sits next to it), and the client
# libraries' own private dependencies that have no development link on
# Debian (e.g. -lpgcommon, -lgssapi_krb5: only libfoo.so.N exists) are
# left to their shared libraries, which name them already.
static_libs=$(pkg-config --static --libs inbox)
echo "pkg-config --static --libs inbox: $static_libs"
for l in -linbox -lpthread -lpq -lsqlite3 -ljansson -lcrypto -lrdkafka \
	-lnats -lhiredis -lrabbitmq -lcurl -lpcre2-8 -lmicrohttpd; do
	check sh -c "echo ' $static_libs ' | grep -q -- ' $l '"
done
link=""
dropped=""
for w in $static_libs; do
	case $w in
	-linbox) link="$link -l:libinbox.a" ;;
	-l*)
		n=${w#-l}
		if [ "$(cc -print-file-name=lib$n.so)" != "lib$n.so" ] ||
			[ "$(cc -print-file-name=lib$n.a)" != "lib$n.a" ]; then
			link="$link $w"
		else
			dropped="$dropped $w"
		fi ;;
	*) link="$link $w" ;;
	esac
done
echo "not linkable here (left to the shared libraries):$dropped"
cc -std=c11 -Wall -Werror "$src/examples/quickstart.c" \
	$(pkg-config --static --cflags inbox) $link -o "$tmp/qs_static"
check sh -c "cd '$tmp' && ./qs_static 'sqlite:$tmp/b.db' | grep -q applied"
# static: libinbox is inside the program, not loaded
check sh -c "! readelf -d '$tmp/qs_static' | grep -q 'NEEDED.*libinbox'"

# 3. CMake package: both targets, each program run without the other
# library around (the static one with no LD_LIBRARY_PATH).
cmake_build() { # NAME TARGET [COMPONENTS]
	mkdir -p "$tmp/$1"
	cat >"$tmp/$1/CMakeLists.txt" <<EOC
cmake_minimum_required(VERSION 3.18)
project($1 C)
find_package(inbox REQUIRED ${3:-})
add_executable(qs $src/examples/quickstart.c)
target_link_libraries(qs PRIVATE $2)
EOC
	cmake -S "$tmp/$1" -B "$tmp/$1/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
		>"$tmp/$1.cmake.log" 2>&1 || cat "$tmp/$1.cmake.log"
	cmake --build "$tmp/$1/build" >"$tmp/$1.build.log" 2>&1 ||
		cat "$tmp/$1.cmake.log" "$tmp/$1.build.log"
}
cmake_build proj inbox::inbox
check sh -c "cd '$tmp' && LD_LIBRARY_PATH='$libdir' ./proj/build/qs 'sqlite:$tmp/c.db' | grep -q applied"
check sh -c "readelf -d '$tmp/proj/build/qs' | grep -q 'NEEDED.*libinbox\.so\.'"
cmake_build proj_static inbox::inbox_static "COMPONENTS static"
check sh -c "cd '$tmp' && ./proj_static/build/qs 'sqlite:$tmp/d.db' | grep -q applied"
check sh -c "! readelf -d '$tmp/proj_static/build/qs' | grep -q 'NEEDED.*libinbox'"

# 4. The installed library: its SONAME (docs/abi.md) and the link chain.
soname=$(readelf -d "$(ls "$libdir"/libinbox.so.*.*.* | head -1)" |
	sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
check test -n "$soname"
check test -e "$libdir/$soname"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
