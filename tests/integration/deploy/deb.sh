#!/bin/sh
# make deb (packaging/make-deb.sh, debhelper) builds the three packages
# from a copy of the tree, and they hold what they should: checked with
# dpkg-deb -c / -I / -x and some lint of obvious errors — the daemon,
# library, headers, pkg-config file, CMake package, man page, unit file,
# bash completion and examples where Debian puts them, owned by root,
# nothing under /usr/local or naming the build directory (no RUNPATH),
# shlibs dependencies filled in, the version include/inbox/version.h's;
# the extracted daemon runs, a program compiles and links against the
# extracted headers and library through the extracted inbox.pc, and dpkg
# would install them here (dpkg --dry-run).
#   deb.sh SOURCE_DIR
set -u
SRC=$1
. "$(dirname "$0")/lib.sh"
for c in dpkg-buildpackage dh dpkg-deb fakeroot readelf; do
	command -v $c >/dev/null || { echo "FAIL $c is missing (scripts/install-deps.sh)"; echo "0 passed, 1 failed"; exit 1; }
done
dir=$(mktmp)
version=$(sed -n 's/^#define INBOX_VERSION *"\([0-9.]*\)".*/\1/p' "$SRC/include/inbox/version.h")
arch=$(dpkg --print-architecture)

t0=$(date +%s)
if sh "$SRC/packaging/make-deb.sh" "$dir/out" 2 >"$dir/build.log" 2>&1; then
	ok "make-deb.sh builds the packages ($(($(date +%s) - t0)) s)"
else
	bail "make-deb.sh builds the packages" "$(tail -20 "$dir/build.log")"
fi
for p in inbox libinbox0.1 libinbox-dev; do
	f="$dir/out/${p}_${version}_$arch.deb"
	check "$p $version built" test -f "$f"
	dpkg-deb -c "$f" >"$dir/$p.list" 2>&1
	dpkg-deb -f "$f" >"$dir/$p.control" 2>&1
done
has() { awk '{ print $6 }' "$dir/$1.list" | sed 's|^\./|/|' | grep -qx -- "$2"; }
check "inbox: /usr/bin/inbox" has inbox /usr/bin/inbox
check "inbox: the man page (gzipped)" has inbox /usr/share/man/man1/inbox.1.gz
check "inbox: the unit template" has inbox /lib/systemd/system/inbox@.service
check "inbox: the bash completion" has inbox /usr/share/bash-completion/completions/inbox
for k in kafka rabbitmq redis nats jsonl; do
	check "inbox: examples/$k" has inbox "/usr/share/doc/inbox/examples/$k/inbox.yaml"
done
check "libinbox0.1: the shared library" has libinbox0.1 "/usr/lib/libinbox.so.$version"
check "libinbox0.1: its SONAME link" sh -c "grep -q ' ./usr/lib/libinbox.so.0.1 -> ' '$dir/libinbox0.1.list'"
check "libinbox-dev: the headers" has libinbox-dev /usr/include/inbox/inbox.h
check "libinbox-dev: the pkg-config file" has libinbox-dev /usr/lib/pkgconfig/inbox.pc
check "libinbox-dev: the CMake package" has libinbox-dev /usr/lib/cmake/inbox/inboxConfig.cmake
check "libinbox-dev: the static library and the .so link" \
	sh -c "grep -q ' ./usr/lib/libinbox.a$' '$dir/libinbox-dev.list' && grep -q ' ./usr/lib/libinbox.so -> ' '$dir/libinbox-dev.list'"

# --- lint --------------------------------------------------------------------
for p in inbox libinbox0.1 libinbox-dev; do
	bad=$(awk '$2 != "root/root" { print $2, $6 }' "$dir/$p.list" | head -3)
	expect_eq "$p: every file owned by root/root" "$bad" ""
	bad=$(awk '{ print $6 }' "$dir/$p.list" | grep -E '^\./usr/local|^\./(build|tmp|work)' | head -3)
	expect_eq "$p: nothing under /usr/local or a build path" "$bad" ""
	bad=$(awk '$1 ~ /^.......(w|.w)/ && $1 !~ /^l/ { print $6 }' "$dir/$p.list" | head -3)
	expect_eq "$p: nothing world-writable" "$bad" ""
	expect_eq "$p: Version $version" "$(sed -n 's/^Version: //p' "$dir/$p.control")" "$version"
	check "$p: a Description" grep -q '^Description: ..' "$dir/$p.control"
done
dep() { sed -n 's/^Depends: //p' "$dir/$1.control"; }
for lib in libpq5 librdkafka1 libnats libhiredis0.14 librabbitmq4 libcurl4 libsystemd0 libyaml-0-2 libmicrohttpd12; do
	case "$lib" in
	libsystemd0 | libyaml-0-2 | libmicrohttpd12) p=inbox ;;
	*) p=libinbox0.1 ;;
	esac
	check "$p depends on $lib (shlibs)" sh -c "echo '$(dep $p)' | grep -q '$lib'"
done

# --- extracted: it runs, it links ------------------------------------------------
x="$dir/root"
for p in inbox libinbox0.1 libinbox-dev; do dpkg-deb -x "$dir/out/${p}_${version}_$arch.deb" "$x"; done
bad=$(for f in "$x/usr/bin/inbox" "$x/usr/lib/libinbox.so.$version"; do readelf -d "$f" | grep -E 'RPATH|RUNPATH'; done)
expect_eq "no RPATH/RUNPATH in the binary or the library" "$bad" ""
"$x/usr/bin/inbox" --version >"$dir/version.out" 2>&1
check "the packaged inbox runs: --version says $version" grep -q "^inbox $version" "$dir/version.out"
check "... and every library it needs is found" sh -c "! ldd '$x/usr/bin/inbox' | grep -q 'not found'"
cat >"$dir/hello.c" <<'C'
#include <inbox/inbox.h>
#include <stdio.h>
int main(void)
{
	puts(inbox_strerror(INBOX_OK));
	return 0;
}
C
flags=$(PKG_CONFIG_PATH="$x/usr/lib/pkgconfig" pkg-config --cflags --libs inbox 2>&1)
inc=$(echo "$flags" | tr ' ' '\n' | sed -n 's/^-I//p' | head -1)
check "pkg-config: the extracted inbox.pc points at the extracted headers" test -f "$inc/inbox/inbox.h"
# shellcheck disable=SC2086
if cc -std=c11 -o "$dir/hello" "$dir/hello.c" $flags >"$dir/cc.out" 2>&1 && LD_LIBRARY_PATH="$x/usr/lib" "$dir/hello" >/dev/null; then
	ok "a program builds against the packaged headers and library, and runs"
else
	fail "a program builds against the packaged headers and library, and runs" "$(head -5 "$dir/cc.out")"
fi
if dpkg --dry-run -i "$dir"/out/*.deb >"$dir/dpkg.out" 2>&1; then
	ok "dpkg --dry-run -i: they would install here"
else
	fail "dpkg --dry-run -i: they would install here" "$(tail -5 "$dir/dpkg.out")"
fi
summary
