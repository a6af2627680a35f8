#!/bin/sh
# The man page and the CLI reference come from one source, the command
# table of src/cli/main.c and each command's --help (src/cli/gendocs.c):
#   - the committed docs/inbox.1 and docs/cli.md are what `inbox gen-docs`
#     writes (after changing a command: `make docs`, commit both);
#   - every command `inbox --help` lists, and every cmd_NAME.c, is in the
#     man page (its own .SS) and in cli.md (synopsis and reference);
#   - every option a command parses (the "--name" literals of its
#     strcmp() calls and option tables in src/cli/cmd_NAME.c) is in its
#     --help, in the man page and in cli.md.
# (Before: `inbox dispatch` and `run --dispatch` were missing from both.)
#   cli_docs.sh INBOX_BIN SOURCE_DIR
set -u
bin=$1
src=$2
passed=0
failed=0
ok() { passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }
tmp=$(mktemp -d /tmp/inbox-docs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
man=$src/docs/inbox.1
md=$src/docs/cli.md

if "$bin" gen-docs man >"$tmp/inbox.1" && diff -u "$man" "$tmp/inbox.1" >"$tmp/man.diff"; then
	ok
else
	fail "docs/inbox.1 is not what \`inbox gen-docs man\` writes (run \`make docs\`):"
	head -20 "$tmp/man.diff"
fi
if "$bin" gen-docs md <"$md" >"$tmp/cli.md" && diff -u "$md" "$tmp/cli.md" >"$tmp/md.diff"; then
	ok
else
	fail "docs/cli.md's generated blocks are stale (run \`make docs\`):"
	head -20 "$tmp/md.diff"
fi

# The commands: those of `inbox --help` and those with a cmd_NAME.c.
"$bin" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }' >"$tmp/listed"
[ -s "$tmp/listed" ] || fail "inbox --help lists no command"
for f in "$src"/src/cli/cmd_*.c; do
	n=$(basename "$f" .c)
	n=${n#cmd_}
	if grep -qx "$n" "$tmp/listed"; then ok; else fail "cmd_$n.c: \"$n\" is not in main.c's command table"; fi
done
# Synopsis lines of cli.md: between its BEGIN/END synopsis markers.
sed -n '/^<!-- BEGIN synopsis/,/^<!-- END synopsis/p' "$md" >"$tmp/md.synopsis"
for n in $(cat "$tmp/listed"); do
	if grep -q "^\.SS \"inbox $n\"$" "$man"; then ok; else fail "inbox $n: no section in docs/inbox.1"; fi
	if grep -q "^inbox $n\( \|$\)" "$tmp/md.synopsis"; then ok; else fail "inbox $n: not in docs/cli.md's synopsis"; fi
	if grep -q "^### \`inbox $n\`$" "$md"; then ok; else fail "inbox $n: not in docs/cli.md's reference"; fi
	f=$src/src/cli/cmd_$n.c
	[ -f "$f" ] || continue
	"$bin" "$n" --help >"$tmp/help" 2>&1
	# The options it parses: strcmp(x, "--opt") and {"--opt", ...} table rows.
	opts=$(grep -oE '(strcmp\([^,]+, *|\{)"--[a-z][a-z-]*"' "$f" | grep -oE -- '--[a-z][a-z-]*' | sort -u)
	for o in $opts; do
		roff=$(printf '%s' "$o" | sed 's/-/\\\\-/g')
		if grep -q -- "$o\\b" "$tmp/help"; then ok; else fail "inbox $n parses $o: not in its --help"; fi
		if grep -q -- "$roff" "$man"; then ok; else fail "inbox $n $o: not in docs/inbox.1"; fi
		if grep -q -- "$o" "$md"; then ok; else fail "inbox $n $o: not in docs/cli.md"; fi
	done
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
