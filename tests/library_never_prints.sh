#!/bin/sh
# The library never prints: no object of libinbox (everything but src/cli)
# refers to stdout or stderr, nor to a function that writes to them by
# itself (printf, puts, perror, err/warn, ...); no source outside src/cli
# writes to file descriptor 1 or 2. fprintf/fwrite to a FILE the library
# opened itself stay allowed: without the stdout/stderr symbols they
# cannot reach the terminal. Diagnostics go to the log callback
# (include/inbox/log.h).
#   library_never_prints.sh LIBINBOX.a SOURCE_DIR
set -u
lib=$1
src=$2
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; echo "$2" | sed 's/^/  /'; failed=$((failed + 1)); }

[ -f "$lib" ] || { echo "no library at $lib"; exit 1; }
syms='stdout|stderr|printf|vprintf|__printf_chk|__vprintf_chk|puts|putchar'
syms="$syms|putchar_unlocked|perror|psignal|psiginfo|err|errx|warn|warnx"
syms="$syms|verr|verrx|vwarn|vwarnx|error|error_at_line"
# nm -A -u: "libinbox.a:file.c.o:                 U symbol[@version]"
found=$(nm -A -u "$lib" 2>&1 | awk '{ s = $NF; sub(/@.*/, "", s);
	print $1 " " s }' | grep -E " ($syms)\$")
objs=$(nm -A -u "$lib" 2>/dev/null | grep -c '\.o:')
if [ "$objs" -eq 0 ]; then
	fail "nm reads the library" "no undefined symbols listed in $lib"
elif [ -n "$found" ]; then
	fail "no library object refers to stdout/stderr or a printing function" "$found"
else
	ok "no library object refers to stdout/stderr or a printing function ($objs references checked)"
fi

# The same, read in the sources (also code a build option left out of the
# library above): a call that prints to stdout/stderr, or a printing
# function, anywhere in src/ or include/ outside src/cli. Comments that
# name stderr do not match: they do not call anything.
calls='fprintf *\( *std(err|out)|vfprintf *\( *std(err|out)'
calls="$calls|(fputs|fputc|putc|fwrite|fflush) *\([^;]*std(err|out)"
calls="$calls|(^|[^a-z_0-9.>])(printf|vprintf|puts|putchar|perror|psignal) *\("
prints=$(cd "$src" && grep -rnE "$calls" --include='*.c' --include='*.h' \
	src include | grep -v '^src/cli/')
if [ -n "$prints" ]; then
	fail "no library source prints (fprintf(stderr), printf, puts, perror, ...)" "$prints"
else
	ok "no library source prints (fprintf(stderr), printf, puts, perror, ...)"
fi

fds=$(cd "$src" && grep -rnE 'STD(OUT|ERR)_FILENO|[^a-z_]write\( *[12] *,|fdopen\( *[12] *,' \
	--include='*.c' --include='*.h' src include | grep -v '^src/cli/')
if [ -n "$fds" ]; then
	fail "no library source writes to fd 1 or 2" "$fds"
else
	ok "no library source writes to fd 1 or 2"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
