#!/bin/sh
# docs/abi.md's rule for structs, checked on the public headers: every
# struct include/inbox/*.h defines either starts with `unsigned version`
# and has its row in the table of docs/abi.md ("Structs and vtables"),
# or is named in its list of structs not versioned (and then carries no
# version). The backend interface (include/inbox/sys/) is versioned by
# its vtables instead and is not looked at.
# Usage: abi_structs.sh SOURCE_DIR. Prints "N passed, N failed".
set -u
root=${1:?usage: abi_structs.sh SOURCE_DIR}
doc="$root/docs/abi.md"
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
	echo "FAIL $*"
	fail=$((fail + 1))
}

# The list of structs not versioned: from "Not versioned" to the next
# paragraph that is not a list item.
exempt=$(awk '/^Not versioned, and why:/ {on = 1; next}
	on && /^[^- ]/ {exit} on {print}' "$doc")
[ -n "$exempt" ] || bad "docs/abi.md: no \"Not versioned, and why:\" list"

# NAME FIRST-MEMBER for each typedef struct of the public headers.
structs=$(for h in "$root"/include/inbox/*.h; do
	awk '/^typedef struct [a-z_0-9]+ \{/ {name = $3; want = 1; next}
	want && NF {sub(/^[ \t]+/, ""); print name " " $0; want = 0}' "$h"
done)
[ -n "$structs" ] || bad "no struct found in include/inbox/*.h"

n=0
while read -r name first; do
	[ -n "$name" ] || continue
	n=$((n + 1))
	in_table=0
	grep -q "^| \`$name\` |" "$doc" && in_table=1
	exempted=0
	printf '%s\n' "$exempt" | grep -q "\`$name\`" && exempted=1
	case "$first" in
	"unsigned version;"*)
		if [ $in_table = 1 ]; then ok; else
			bad "$name is versioned but has no row in docs/abi.md's table"
		fi
		;;
	*)
		if [ $exempted = 1 ]; then ok; else
			bad "$name does not start with 'unsigned version' and docs/abi.md does not say why (first member: $first)"
		fi
		;;
	esac
done <<LIST
$structs
LIST
echo "abi_structs: $n structs"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
