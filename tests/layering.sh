#!/bin/sh
# The layers of src/ (README.md, "Layout"), from the bottom:
#
#   0 base      buf json url log secret util sql quoting: nothing above it
#   1 schema    JSON Schema validation             -> base
#   2 core      consumer msg txn lease keytmpl runner, the store and
#               source registries and contracts    -> schema, base
#   3 admin     stats, dead letters, purge, metrics -> core (the contract)
#   3 outbox    declaration, engine, dispatcher, HTTP, providers -> core
#   4 source, store  the registrations and shared helpers of the
#               backends (src/source/*.c|h, src/store/*.c)
#   5 store/NAME, source/NAME   one backend each  -> the layers below
#   6 effect    declared effects (steps, upserts, outbox steps)
#   7 cli       the inbox command
#
# A file may include a header of a lower layer or of its own unit, never
# one of a higher layer nor of another unit of the same layer (admin and
# outbox do not know each other; a backend does not know another). The one
# exception is the registration of the built-in backends,
# src/source/builtin.c and src/store/builtin.c, which name each one.
#   layering.sh SOURCE_DIR
set -u
src=$1/src
[ -d "$src" ] || { echo "no source tree at $src"; exit 1; }
passed=0
failed=0

# unit PATH (relative to src/): the unit a file or an included header is in
unit() {
	case $1 in
	store/*/*) echo "${1%/*}" ;;
	source/*/*) echo "${1%/*}" ;;
	source/*) echo source ;;
	store/*) echo store ;;
	*/*) echo "${1%%/*}" ;;
	*) echo "?" ;;
	esac
}
rank() {
	case $1 in
	base) echo 0 ;;
	schema) echo 1 ;;
	core) echo 2 ;;
	admin | outbox) echo 3 ;;
	source | store) echo 4 ;;
	store/* | source/*) echo 5 ;;
	effect) echo 6 ;;
	cli) echo 7 ;;
	*) echo 99 ;;
	esac
}

bad=""
files=$(cd "$src" && find . -name '*.c' -o -name '*.h' | sed 's|^\./||' | sort)
nfiles=0
for f in $files; do
	nfiles=$((nfiles + 1))
	fu=$(unit "$f")
	fr=$(rank "$fu")
	if [ "$fr" = 99 ]; then
		bad="$bad
$f: not in a known layer ($fu)"
		continue
	fi
	for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src/$f"); do
		case $h in
		*/*) ;;
		*) continue ;; # beside the file: its own unit
		esac
		hu=$(unit "$h")
		hr=$(rank "$hu")
		[ "$hu" = "$fu" ] && continue
		[ "$f" = source/builtin.c ] && [ "${hu%%/*}" = source ] && continue
		[ "$f" = store/builtin.c ] && [ "${hu%%/*}" = store ] && continue
		if [ "$hr" -ge "$fr" ]; then
			bad="$bad
$f ($fu, layer $fr) includes $h ($hu, layer $hr)"
		fi
	done
done

if [ "$nfiles" -lt 50 ]; then
	echo "FAIL the tree was read ($nfiles files under $src)"
	failed=$((failed + 1))
else
	echo "ok   the tree was read ($nfiles files)"
	passed=$((passed + 1))
fi
if [ -n "$bad" ]; then
	echo "FAIL no file includes across or up the layers:$bad" | sed '2,$s/^/  /'
	failed=$((failed + 1))
else
	echo "ok   no file includes across or up the layers"
	passed=$((passed + 1))
fi
# The library's names are the library's: no cli_* name (the command's
# prefix) is defined or called outside src/cli.
clin=$(cd "$src" && grep -rnE '\bcli_[a-z0-9_]+[[:space:]]*\(' --include='*.c' \
	--include='*.h' . | grep -v '^\./cli/' | grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/\*|\*)')
if [ -n "$clin" ]; then
	echo "FAIL no cli_ name in the library:" && printf '%s\n' "$clin" | sed 's/^/  /'
	failed=$((failed + 1))
else
	echo "ok   no cli_ name in the library"
	passed=$((passed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
