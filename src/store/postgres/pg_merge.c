/*
 * PostgreSQL store: runs of one deferred INSERT sent as multi-row INSERTs.
 *
 * A batch's handlers typically issue the same statement once per message
 * (INSERT INTO invoices (order_id, total_cents) VALUES ($1, $2)). Deferred,
 * they travel in one pipeline, but the server still executes each one on
 * its own — bind, executor start and end, a snapshot — which costs about
 * as much as inserting the row itself. Like pgjdbc's reWriteBatchedInserts,
 * a run of N consecutive queued executions of such a statement is sent as
 * a few executions of the same INSERT with a multi-row VALUES list
 * (chunks of 128, 64, ..., 2 rows: a handful of prepared statements per
 * cached statement), rows in the order the handlers issued them.
 *
 * Only a statement of exactly this form is merged, checked on its text
 * when it enters the cache (anything else runs as it is):
 *
 *   INSERT INTO name[.name[.name]] [(col, ...)] VALUES (item, ...)
 *     [ON CONFLICT DO NOTHING] [;]
 *
 * where an item is $n, optionally with a cast (::type), every parameter
 * $1..$n appearing, no comments, no string literals. For the server a
 * multi-row VALUES list in an INSERT is the single-row one repeated: each
 * row's parameters take their types from the target columns alike, rows
 * are inserted in order, row triggers fire per row and see the rows
 * before, a repeated key does nothing under ON CONFLICT DO NOTHING as it
 * would one statement later.
 *
 * What a merge could change is what fires once per statement or sees
 * the statement's other rows: statement-level INSERT triggers, triggers
 * with transition tables, AFTER row triggers (queued to the statement's
 * end, they would see the rows after their own; a foreign key's check is
 * one, harmless unless the key refers to the table itself) and rules. So
 * every pipeline that carries merged rows for a table first takes the
 * table's lock (LOCK TABLE ... IN ROW EXCLUSIVE MODE, the INSERT's own:
 * no CREATE TRIGGER can commit between the check and the insert), then
 * runs a guard that fails when the table has any of them. Its failure —
 * like the failure of any deferred statement — loses the transaction: the
 * batch runs again at once without deferring (pg_store.h), so every
 * statement runs on its own and the triggers fire per statement; the
 * statement is then never merged again by this handle. A merged INSERT
 * that fails (a unique violation in row 37) takes the same way: the
 * re-run gives each handler its own statement's error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_store.h"

static const int sizes[PG_MERGE_SIZES] = {128, 64, 32, 16, 8, 4, 2};

/* ---- recognizing the statement -------------------------------------- */

typedef struct lex {
	const char *s;
	size_t i;
} lex;

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
	       c == '\v';
}

static int ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int ident_char(char c)
{
	return ident_start(c) || (c >= '0' && c <= '9') || c == '$';
}

static void ws(lex *l)
{
	while (is_space(l->s[l->i]))
		l->i++;
}

/* A keyword, case-insensitively, not followed by an identifier
 * character. */
static int kw(lex *l, const char *word)
{
	size_t n = strlen(word);
	for (size_t k = 0; k < n; k++) {
		char c = l->s[l->i + k];
		if (c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		if (c != word[k])
			return 0;
	}
	if (ident_char(l->s[l->i + n]))
		return 0;
	l->i += n;
	return 1;
}

static int punct(lex *l, char c)
{
	if (l->s[l->i] != c)
		return 0;
	l->i++;
	return 1;
}

/* An identifier: plain, or "quoted" ("" inside). */
static int ident(lex *l)
{
	const char *s = l->s;
	if (s[l->i] == '"') {
		size_t i = l->i + 1;
		for (;;) {
			if (!s[i])
				return 0;
			if (s[i] == '"') {
				if (s[i + 1] != '"')
					break;
				i++;
			}
			i++;
		}
		if (i == l->i + 1)
			return 0; /* "" is no name */
		l->i = i + 1;
		return 1;
	}
	if (!ident_start(s[l->i]))
		return 0;
	while (ident_char(s[l->i]))
		l->i++;
	return 1;
}

/* name[.name[.name]] */
static int qualified(lex *l)
{
	int parts = 0;
	do {
		ws(l);
		if (!ident(l))
			return 0;
		ws(l);
	} while (++parts < 3 && punct(l, '.'));
	return 1;
}

/* $n: its number (1..65535), or 0. */
static int param(lex *l)
{
	if (!punct(l, '$'))
		return 0;
	long v = 0;
	size_t start = l->i;
	while (l->s[l->i] >= '0' && l->s[l->i] <= '9' && v <= 65535)
		v = v * 10 + (l->s[l->i++] - '0');
	if (l->i == start || v < 1 || v > 65535 || ident_char(l->s[l->i]))
		return 0;
	return (int)v;
}

/* ::type — a name (qualified, words like "double precision"), with an
 * optional (n[, m]) and [] suffixes. */
static int cast(lex *l)
{
	ws(l);
	if (!(l->s[l->i] == ':' && l->s[l->i + 1] == ':'))
		return 1; /* none */
	l->i += 2;
	ws(l);
	if (!qualified(l))
		return 0;
	while (ident_start(l->s[l->i]) || l->s[l->i] == '"') {
		if (!ident(l))
			return 0;
		ws(l);
	}
	if (punct(l, '(')) {
		do {
			ws(l);
			size_t start = l->i;
			while (l->s[l->i] >= '0' && l->s[l->i] <= '9')
				l->i++;
			if (l->i == start)
				return 0;
			ws(l);
		} while (punct(l, ','));
		if (!punct(l, ')'))
			return 0;
		ws(l);
	}
	while (punct(l, '[')) {
		ws(l);
		if (!punct(l, ']'))
			return 0;
		ws(l);
	}
	return 1;
}

int inbox__pg_merge_parse(const char *sql, pg_merge *m)
{
	memset(m, 0, sizeof(*m));
	lex l = {sql, 0};
	ws(&l);
	if (!kw(&l, "INSERT"))
		return 0;
	ws(&l);
	if (!kw(&l, "INTO"))
		return 0;
	ws(&l);
	size_t target_at = l.i;
	if (!qualified(&l))
		return 0;
	size_t target_end = l.i;
	while (target_end > target_at && is_space(sql[target_end - 1]))
		target_end--;
	if (punct(&l, '(')) {
		do {
			ws(&l);
			if (!ident(&l))
				return 0;
			ws(&l);
		} while (punct(&l, ','));
		if (!punct(&l, ')'))
			return 0;
		ws(&l);
	}
	if (!kw(&l, "VALUES"))
		return 0;
	ws(&l);
	size_t tuple_at = l.i;
	if (!punct(&l, '('))
		return 0;
	unsigned char seen[65536 / 8] = {0};
	int max = 0;
	do {
		ws(&l);
		int n = param(&l);
		if (!n || !cast(&l))
			return 0;
		seen[n / 8] |= (unsigned char)(1u << (n % 8));
		if (n > max)
			max = n;
		ws(&l);
	} while (punct(&l, ','));
	if (!punct(&l, ')'))
		return 0;
	size_t tuple_end = l.i;
	ws(&l);
	if (kw(&l, "ON")) {
		ws(&l);
		if (!kw(&l, "CONFLICT"))
			return 0;
		ws(&l);
		if (!kw(&l, "DO"))
			return 0;
		ws(&l);
		if (!kw(&l, "NOTHING"))
			return 0;
		ws(&l);
	}
	if (punct(&l, ';'))
		ws(&l);
	if (sql[l.i])
		return 0;
	/* Every parameter used: an unused one has no type in a merge. */
	for (int n = 1; n <= max; n++)
		if (!(seen[n / 8] & (1u << (n % 8))))
			return 0;
	m->nparams = max;
	m->tuple_at = tuple_at;
	m->tuple_end = tuple_end;
	m->target_at = target_at;
	m->target_len = target_end - target_at;
	return 1;
}

/* ---- the statements a merge needs ------------------------------------ */

int inbox__pg_merge_rows(const pg_merge *m, int slot)
{
	return slot >= 0 && slot < PG_MERGE_SIZES ? sizes[slot] : 0;
}

/* The INSERT with `rows` rows: the text before and after the VALUES
 * tuple kept, the tuple repeated with its parameters renumbered. */
static int multi_row(const char *sql, const pg_merge *m, int rows,
                     inbox__buf *out)
{
	int bad = inbox__buf_append(out, sql, m->tuple_at);
	for (int r = 0; r < rows && !bad; r++) {
		if (r)
			bad |= inbox__buf_puts(out, ", ");
		size_t from = m->tuple_at;
		for (size_t i = m->tuple_at; i < m->tuple_end && !bad; i++) {
			/* A '$' outside a quoted name starts a parameter (the
			 * recognizer allowed no other). */
			if (sql[i] == '"') {
				size_t j = i + 1;
				while (sql[j] != '"' || sql[j + 1] == '"')
					j += sql[j] == '"' ? 2 : 1;
				i = j;
				continue;
			}
			if (sql[i] != '$' || (i > 0 && ident_char(sql[i - 1])))
				continue;
			bad |= inbox__buf_append(out, sql + from, i - from);
			long n = strtol(sql + i + 1, NULL, 10);
			bad |= inbox__buf_printf(out, "$%ld",
			                         n + (long)r * m->nparams);
			while (sql[i + 1] >= '0' && sql[i + 1] <= '9')
				i++;
			from = i + 1;
		}
		bad |= inbox__buf_append(out, sql + from, m->tuple_end - from);
	}
	bad |= inbox__buf_puts(out, sql + m->tuple_end);
	return bad ? -1 : 0;
}

int inbox__pg_merge_sql(const char *sql, const pg_merge *m, int slot,
                        inbox__buf *out)
{
	inbox__buf_reset(out);
	if (slot == PG_MERGE_LOCK)
		return inbox__buf_puts(out, "LOCK TABLE ") |
		       inbox__buf_append(out, sql + m->target_at,
		                         m->target_len) |
		       inbox__buf_puts(out, " IN ROW EXCLUSIVE MODE");
	if (slot == PG_MERGE_GUARD)
		/* An error when the table (or one of its partitions) has an
		 * INSERT trigger whose effect a merge could change (pg_trigger
		 * tgtype bits: 1 row-level, 2 BEFORE, 4 INSERT, 64 INSTEAD
		 * OF): a statement-level one, one with a transition table, an
		 * AFTER row trigger of the user's (it would see the rows
		 * inserted after its own), a foreign key of the table to
		 * itself (its check would see the rows that follow); or an
		 * INSERT rule (pg_rewrite ev_type '3'). The catalogs are read
		 * only for a table that may have triggers or rules, or
		 * partitions: most tables cost one pg_class look-up per
		 * batch. The error's text is computed at run time, or the
		 * planner would fold the cast (and fail) when nothing is
		 * wrong. */
		return inbox__buf_puts(
		    out,
		    "SELECT CASE WHEN (c.relhastriggers OR c.relhasrules OR"
		    " c.relkind = 'p') AND (EXISTS (SELECT 1 FROM pg_catalog."
		    "pg_trigger t WHERE t.tgrelid IN (SELECT c.oid UNION ALL"
		    " SELECT p.relid FROM pg_catalog.pg_partition_tree(c.oid)"
		    " p) AND t.tgtype & 4 <> 0 AND (t.tgtype & 1 = 0 OR"
		    " t.tgnewtable IS NOT NULL OR (t.tgtype & 66 = 0 AND"
		    " (NOT t.tgisinternal OR EXISTS (SELECT 1 FROM pg_catalog."
		    "pg_constraint k WHERE k.oid = t.tgconstraint AND"
		    " k.confrelid IN (SELECT c.oid UNION ALL SELECT p.relid"
		    " FROM pg_catalog.pg_partition_tree(c.oid) p))))))"
		    " OR EXISTS (SELECT 1 FROM pg_catalog.pg_rewrite w"
		    " WHERE w.ev_class IN (SELECT c.oid UNION ALL SELECT"
		    " p.relid FROM pg_catalog.pg_partition_tree(c.oid) p)"
		    " AND w.ev_type = '3'))"
		    " THEN ('libinbox: not merging the INSERTs into ' ||"
		    " c.relname || ': a statement-level or AFTER trigger, a"
		    " transition table, a foreign key to itself or a rule')"
		    "::int END FROM pg_catalog.pg_class c"
		    " WHERE c.oid = pg_catalog.to_regclass($1)");
	return multi_row(sql, m, inbox__pg_merge_rows(m, slot), out);
}

int inbox__pg_merge_slot_for(const pg_merge *m, int left)
{
	for (int k = 0; k < PG_MERGE_SIZES; k++)
		if (sizes[k] <= left && (long)sizes[k] * m->nparams <= 65535)
			return k;
	return -1;
}
