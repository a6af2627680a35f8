#!/bin/sh
# The ABI is the public headers: libinbox.so exports exactly the functions
# and variables declared in include/inbox/ (with INBOX_API, export.h), no
# internal symbol (inbox__* outside the headers, sch__*, the backends'),
# and every declared one is defined and exported. Its SONAME follows
# docs/abi.md: libinbox.so.0.MINOR while the major version is 0, then
# libinbox.so.MAJOR.
# No exported name has an internal prefix (inbox__, sch__); a backend
# written against the helpers' old inbox__ names still builds and links.
#   abi_exports.sh LIBINBOX.so SOURCE_DIR [CC [CFLAGS]]
# (CFLAGS: the sanitizer flags the library was built with, if any.)
# The declared set is read from the headers themselves (preprocessed, so
# comments and macros do not count): every top-level declaration that is
# not a typedef, from a file under include/inbox/.
set -u
lib=$1
src=$(cd "$2" && pwd)
cc=${3:-cc}
cflags=${4:-}
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; echo "$2" | sed 's/^/  /'; failed=$((failed + 1)); }
tmp=$(mktemp -d /tmp/inbox-abi.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

[ -f "$lib" ] || { echo "no library at $lib"; exit 1; }

# Every installed header, in one translation unit.
(cd "$src/include" && find inbox -name '*.h' | sort) |
	sed 's/.*/#include <&>/' >"$tmp/all.c"
"$cc" -std=c11 -E -I"$src/include" "$tmp/all.c" >"$tmp/all.i" ||
	{ echo "the public headers do not preprocess"; exit 1; }

# The names declared at file scope in include/inbox/*: functions (the
# identifier before the first '(') and variables (the last identifier).
perl -e '
	my ($keep, $text) = (0, "");
	while (<STDIN>) {
		if (/^# \d+ "([^"]*)"/) { $keep = ($1 =~ m{/include/inbox/}); next; }
		next if /^#/;
		$text .= $_ if $keep;
	}
	# attributes (INBOX_API expanded) are not names
	$text =~ s/__attribute__\s*\(\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\)//g;
	my ($depth, $stmt, %names) = (0, "");
	for my $c (split //, $text) {
		$depth++ if $c eq "{";
		$depth-- if $c eq "}";
		if ($c eq ";" && $depth == 0) {
			(my $s = $stmt) =~ s/\s+/ /g;
			$stmt = "";
			$s =~ s/^ //;
			$s =~ s/^extern "C" //;
			next if $s =~ /^typedef\b/ or $s !~ /\w/;
			# a struct/enum definition alone: no name declared
			next if $s =~ /^(struct|union|enum)\b[^(]*$/ && $s !~ /^\S+ \S+ \**\w+$/;
			if ($s =~ /^[^(]*?\b([A-Za-z_]\w*)\s*\(/) { $names{$1} = 1; }
			elsif ($s =~ /\b([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*$/) { $names{$1} = 1; }
			next;
		}
		$stmt .= $c if $depth == 0 && $c ne "}";
	}
	print "$_\n" for sort keys %names;
' <"$tmp/all.i" | LC_ALL=C sort >"$tmp/declared"

# What the shared library exports (defined, in its dynamic symbol table),
# without the linker's own markers and AddressSanitizer's ODR indicators
# (__odr_asan.NAME, one per exported variable in the ASan build).
nm -D --defined-only "$lib" | awk '{ s = $NF; sub(/@.*/, "", s); print s }' |
	grep -vxE '_init|_fini|_edata|_end|__bss_start|__odr_asan[._].*' |
	LC_ALL=C sort -u >"$tmp/exported"

nd=$(wc -l <"$tmp/declared")
ne=$(wc -l <"$tmp/exported")
if [ "$nd" -lt 50 ]; then
	fail "the headers' declarations are read" "only $nd names found"
else
	ok "the headers declare $nd functions and variables"
fi
extra=$(LC_ALL=C comm -13 "$tmp/declared" "$tmp/exported")
if [ -n "$extra" ]; then
	fail "nothing exported that the headers do not declare ($(echo "$extra" | wc -l) of $ne)" "$extra"
else
	ok "nothing exported that the headers do not declare ($ne exported)"
fi
missing=$(LC_ALL=C comm -23 "$tmp/declared" "$tmp/exported")
if [ -n "$missing" ]; then
	fail "every declaration is exported (INBOX_API, and defined)" "$missing"
else
	ok "every declaration is exported (INBOX_API, and defined)"
fi
# Each public declaration carries INBOX_API itself (not only by luck of
# a default visibility): with INBOX_API defined away, none is marked.
unmarked=$(cd "$src/include" && grep -rnE '^[A-Za-z_][^;{}()]*[ *]\**(inbox_\w+|inbox__\w+) *(\(|\[)' inbox |
	grep -vE ':[0-9]+:(INBOX_API |typedef |#)')
if [ -n "$unmarked" ]; then
	fail "every declaration in the headers starts with INBOX_API" "$unmarked"
else
	ok "every declaration in the headers starts with INBOX_API"
fi

internal=$(grep -E '^(inbox__|sch__)' "$tmp/exported")
if [ -n "$internal" ]; then
	fail "no exported name has an internal prefix (inbox__, sch__)" "$internal"
else
	ok "no exported name has an internal prefix (inbox__, sch__)"
fi

# A backend's calls, by the public names and the old ones, linked against
# the shared library and run.
cat >"$tmp/backend.c" <<'EOC'
#include <string.h>

#include <inbox/sys/source.h>
#include <inbox/sys/store.h>
/* Not run (no store or source here): linked, so every name resolves. */
void backend_errors(inbox_store *st, inbox_source *src)
{
	inbox_store_seterr(st, "42P01", "no table %s", "t");
	inbox__store_seterr(st, NULL, "lost: %d", 1);
	inbox_store_clearerr(st);
	inbox__store_clearerr(st);
	inbox_source_seterr(src, "gone: %s", "x");
	inbox__source_seterr(src, "gone");
}
int main(void)
{
	return inbox_status_parse("dead") != INBOX_ST_DEAD ||
	       inbox__status_parse("failed") != INBOX_ST_FAILED ||
	       strcmp(inbox_status_name(INBOX_ST_COMPLETED), "completed") ||
	       strcmp(inbox__status_name(INBOX_ST_DEAD), "dead");
}
EOC
libdir=$(dirname "$lib")
# shellcheck disable=SC2086
if "$cc" -std=c11 -Wall -Werror $cflags -I"$src/include" "$tmp/backend.c" \
	-L"$libdir" -l:"$(basename "$lib")" -Wl,-rpath,"$libdir" \
	-o "$tmp/backend" >"$tmp/backend.log" 2>&1 && "$tmp/backend"; then
	ok "a backend's helpers link by their public and their old names"
else
	fail "a backend's helpers link by their public and their old names" \
		"$(cat "$tmp/backend.log")"
fi

ver() { sed -n "s/^#define INBOX_VERSION_$1 *\([0-9]*\)$/\1/p" \
	"$src/include/inbox/version.h"; }
major=$(ver MAJOR)
minor=$(ver MINOR)
if [ "$major" = 0 ]; then want=libinbox.so.0.$minor; else want=libinbox.so.$major; fi
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
if [ -n "$major" ] && [ "$soname" = "$want" ]; then
	ok "SONAME $soname (version $major.$minor)"
else
	fail "SONAME is $want (docs/abi.md)" "it is '$soname', the version '$major.$minor'"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
