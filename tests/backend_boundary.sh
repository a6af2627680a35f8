#!/bin/sh
# The stores' and sources' contracts are the only way to a backend (issue
# 12, move 1): outside src/store/ and src/source/, no code in src/,
# include/ or bindings/ (their tests aside)
#   1. writes a backend's kind or scheme as a string ("postgresql",
#      "sqlite:", 'kafka', ...): that is code branching on the backend, or
#      knowing a URL form the registry should tell it;
#   2. includes a client library's header (libpq-fe.h, sqlite3.h,
#      librdkafka/, amqp.h, hiredis/, nats/);
#   3. calls a store's native() handle (inbox_txn_pgconn/_sqlite3 in
#      src/core/txn.c, which hand it out by its C type, aside);
#   4. names a store's table in SQL (inbox__table_name) other than the
#      admin API's templates (src/admin/admin.c), whose dialect comes from
#      the backend;
#   5. in the core (src/core/): writes SQL against a store's table at all
#      (no table name, no admin template: what the core needs of a table
#      is a slot of the store's vtable; src/core/sql.c only defines
#      inbox__table_name for the backends and the admin API);
#   6. compares a backend's kind or scheme (strcmp and the like on a
#      `kind` or `scheme`) other than the registries' lookups by scheme
#      (src/core/store.c, src/core/source.c).
# Comments are not code: they may name backends. The exceptions below are
# each a file and what it may say, with the reason.
#   backend_boundary.sh SOURCE_DIR
set -u
src=${1:-.}
cd "$src" || exit 1
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; echo "$2" | sed 's/^/  /'; failed=$((failed + 1)); }

# The kinds and schemes: the built-in ones, and any a backend's vtable
# names (designated or positional initializers).
kinds="postgresql postgres sqlite jsonl kafka amqp redis nats"
found=$(grep -rhoE '\.(scheme|kind|alias) *= *"[a-z][a-z0-9+.-]*"|_VERSION, *"[a-z][a-z0-9+.-]*"' \
	src/store src/source 2>/dev/null | sed 's/.*"\(.*\)"/\1/')
# http and https, the http:// source's schemes, are every URL's too (the
# outbox's providers, JSON Schema ids): not a backend's name elsewhere.
found=$(printf '%s\n' $found | grep -vxE 'https?')
kinds=$(printf '%s\n' $kinds $found | sort -u | tr '\n' '|' | sed 's/|$//')
[ -n "$kinds" ] || { echo "no backend kinds found"; exit 1; }

files=$(find src include bindings -type f \( -name '*.c' -o -name '*.h' \
	-o -name '*.cc' -o -name '*.cpp' -o -name '*.js' -o -name '*.mjs' \
	-o -name '*.ts' \) -not -path 'src/store/*' -not -path 'src/source/*' \
	-not -path '*/node_modules/*' -not -path '*/test/*' \
	-not -path '*/tests/*' -not -path '*/build*/*' 2>/dev/null | sort)
[ -n "$files" ] || { echo "no sources under $src"; exit 1; }

# Exceptions, "FILE|REGEX" (the REGEX matched against the hit):
#  - src/base/url.c: the secret scrubber recognises the URL forms of the
#    built-in backends before any is opened (a URL that fails to open is
#    still scrubbed from every error);
#  - src/cli/cmd_demo.c: the demo builds its own SQLite URL (it never
#    compares one);
#  - src/outbox/{declare,engine,provider}.c: an outbox step's kind and its
#    provider URL's scheme ("http", "https") are the outbox's own, not a
#    backend's;
#  - src/base/url.c: the scrubber's scheme match (a URL's, given).
allowed='src/base/url.c|"(postgresql|postgres|amqps?|rediss|jsonl|sqlite)"
src/cli/cmd_demo.c|"sqlite:%s"
src/outbox/declare.c|^strcmp\(kind$
src/outbox/engine.c|^strcmp\(j->it\.kind$
src/outbox/provider.c|^strcmp\(scheme, "https?"\) != 0 && strcmp\(scheme$
src/base/url.c|^strncmp\(url, scheme$'

allowed_hit() { # FILE HIT
	printf '%s\n' "$allowed" | while IFS='|' read -r f re; do
		[ "$f" = "$1" ] && printf '%s\n' "$2" | grep -qE -- "$re" && echo y
	done | grep -q y
}

# Code without comments (/* */ across lines, //), line numbers kept.
code() {
	perl -0777 -pe 's{/\*.*?\*/}{ my $c = $&; $c =~ s/[^\n]//g; $c }gse;
		s{(^|[^:"\x27])//[^\n]*}{$1}g' "$1"
}

check() { # NAME REGEX [hits are printed as FILE:LINE:TEXT]
	name=$1
	re=$2
	out=""
	for f in $files; do
		hits=$(code "$f" | grep -nE -- "$re")
		[ -n "$hits" ] || continue
		bad=$(printf '%s\n' "$hits" | while IFS= read -r h; do
			for m in $(printf '%s\n' "$h" | grep -oE -- "$re" |
				tr ' ' '\001'); do
				m=$(printf '%s' "$m" | tr '\001' ' ')
				allowed_hit "$f" "$m" || { echo "$f:$h"; break; }
			done
		done)
		[ -n "$bad" ] && out="$out$bad
"
	done
	if [ -n "$out" ]; then
		fail "$name" "$out"
	else
		ok "$name"
	fi
}

check "no backend kind or scheme as a string outside the backends ($kinds)" \
	"[\"'](${kinds})(:[^\"']*)?[\"']"
check "no client library header outside the backends" \
	'#[[:space:]]*include[[:space:]]*[<"](libpq-fe\.h|libpq/|postgres_ext\.h|sqlite3\.h|librdkafka/|rdkafka\.h|amqp\.h|amqp_[a-z_]*\.h|rabbitmq-c/|hiredis/|hiredis\.h|nats/|nats\.h)'
files_no_txn=$(printf '%s\n' $files | grep -v '^src/core/txn\.c$')
files_save=$files
files=$files_no_txn
check "no store's native handle outside the backends" \
	'(->|\.)native[[:space:]]*\('
files=$(printf '%s\n' $files_save | grep -vE '^src/(admin/admin\.c|core/sql\.c|core/internal\.h)$')
check "no store table named in SQL outside the backends and the admin templates" \
	'inbox__table_name[[:space:]]*\('

files=$(printf '%s\n' $files_save | grep '^src/core/' | grep -vE '^src/core/(sql\.c|internal\.h)$')
check "the core writes no SQL against a store's table (table names, admin templates)" \
	'inbox__table_name[[:space:]]*\(|inbox__admin_sql[[:space:]]*\(|\{(inbox|consumers|dead_letters|outbox|schema_version)\}'
files=src/core/sql.c
check "src/core/sql.c holds no SQL (it names tables for others)" \
	'"[^"]*(SELECT|INSERT|UPDATE|DELETE|FROM|WHERE)[^"]*"'
files=$(printf '%s\n' $files_save | grep -vE '^src/core/(store|source)\.c$')
check "no comparison on a backend's kind or scheme outside the backends and the registries" \
	'(strn?cmp|strn?casecmp|memcmp)[[:space:]]*\([^;]*\b(kind|scheme)\b'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
