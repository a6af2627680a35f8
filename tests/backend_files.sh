#!/bin/sh
# What a new backend touches (docs/abi.md, "Backends"), checked on every
# backend in the tree: its folder (src/store/NAME, src/source/NAME) with a
# CMakeLists.txt calling inbox_backend() (its sources, its pkg-config
# module, its INBOX_WITH_* option if it has one), and one line in the
# built-in list (src/store/builtin.c, src/source/builtin.c), under its
# option. Its vtable is named nowhere else in src/, include/ or bindings/,
# and its module is not in the top-level CMakeLists.txt. (That nothing
# else compares its kind or includes its client library is
# backend_boundary.sh's.) And every backend is run by its conformance
# suite (tests/conformance/CMakeLists.txt: conformance_NAME for a store,
# NAME in the source suite's foreach for a source).
#   backend_files.sh SOURCE_DIR
set -u
root=${1:?usage: backend_files.sh SOURCE_DIR}
cd "$root" || exit 1
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() {
	echo "FAIL $*"
	failed=$((failed + 1))
}
n=0
for dir in src/store/*/ src/source/*/; do
	dir=${dir%/}
	kind=${dir#src/}
	kind=${kind%%/*} # store or source
	list=src/$kind/builtin.c
	n=$((n + 1))
	cm=$dir/CMakeLists.txt
	if [ ! -f "$cm" ] || ! grep -q '^inbox_backend(' "$cm"; then
		bad "$dir: no CMakeLists.txt calling inbox_backend()"
		continue
	fi
	ok
	opt=$(sed -n 's/^inbox_backend(\([A-Z_]*\).*/\1/p' "$cm")
	vts=$(grep -rhoE "^const inbox_${kind}_vtable inbox__[a-z0-9_]+ =" \
		"$dir" | sed 's/.*\(inbox__[a-z0-9_]*\) =/\1/')
	if [ "$(printf '%s\n' $vts | grep -c .)" -ne 1 ]; then
		bad "$dir: not exactly one vtable defined (${vts:-none})"
		continue
	fi
	ok
	vt=$vts
	lines=$(grep -c "&$vt," "$list")
	[ "$lines" -eq 1 ] && ok || bad "$dir: $vt is not listed once in $list"
	if [ "$opt" != ON ]; then
		grep -q "option($opt " "$cm" && ok ||
			bad "$dir: $opt is not declared in $cm"
		# the line of the list sits under #ifdef OPT
		awk -v o="$opt" -v v="&$vt," '
			$1 == "#ifdef" {cur = $2} $1 == "#endif" {cur = ""}
			index($0, v) {found = (cur == o)} END {exit !found}' \
			"$list" && ok || bad "$dir: $vt is not under #ifdef $opt in $list"
	fi
	others=$(grep -rlw "$vt" src include bindings 2>/dev/null |
		grep -v "^$dir/" | grep -v "^$list\$" | grep -v '/test/' |
		grep -v '/node_modules/')
	[ -z "$others" ] && ok || bad "$dir: $vt named outside its folder: $others"
	for m in $(sed -n 's/.*PKG \(.*\) SOURCES.*/\1/p' "$cm"); do
		if grep -q "$m" CMakeLists.txt; then
			bad "$dir: $m is in the top-level CMakeLists.txt"
		else
			ok
		fi
	done
done
conf=tests/conformance/CMakeLists.txt
for dir in src/store/*/ src/source/*/; do
	dir=${dir%/}
	name=${dir##*/}
	case $dir in
	src/store/*) grep -q "NAME conformance_$name" "$conf" ;;
	*) grep '^foreach(kind ' "$conf" | grep -qw "$name" ;;
	esac && ok || bad "$dir: not run by its conformance suite ($conf)"
done
[ $n -ge 7 ] && ok || bad "only $n backend folders found"
echo "backend_files: $n backends"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
