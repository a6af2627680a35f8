/*
 * Declared effects (include/inbox/decl.h): checked without a database when
 * added (inbox__decl_sql_check), against the database before the consumer
 * runs (inbox_decl_prepare), and run per message in the inbox's
 * transaction (inbox_decl_handler).
 */
#include "effect/decl.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/json.h"
#include "core/internal.h"

/* ---- static SQL checks --------------------------------------------- */

static int ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$';
}

/* Skip a comment or quoted section starting at p; returns the position
 * after it, or p when there is none there. */
static const char *skip_quoted(const char *start, const char *p)
{
	if (p[0] == '-' && p[1] == '-') {
		while (*p && *p != '\n')
			p++;
		return p;
	}
	if (p[0] == '/' && p[1] == '*') {
		int depth = 1; /* PostgreSQL nests block comments */
		p += 2;
		while (*p && depth) {
			if (p[0] == '/' && p[1] == '*') {
				depth++;
				p += 2;
			} else if (p[0] == '*' && p[1] == '/') {
				depth--;
				p += 2;
			} else {
				p++;
			}
		}
		return p;
	}
	if (*p == '\'' || *p == '"' || *p == '`') {
		/* E'...' strings (PostgreSQL) take backslash escapes */
		int esc = *p == '\'' && p > start &&
		          (p[-1] == 'E' || p[-1] == 'e') &&
		          (p - 1 == start || !ident_char(p[-2]));
		char q = *p++;
		while (*p) {
			if (esc && *p == '\\' && p[1]) {
				p += 2;
			} else if (*p == q && p[1] == q) {
				p += 2;
			} else if (*p == q) {
				return p + 1;
			} else {
				p++;
			}
		}
		return p;
	}
	if (*p == '$' && !isdigit((unsigned char)p[1])) {
		/* PostgreSQL dollar quoting: $tag$ ... $tag$ */
		const char *t = p + 1;
		while (*t && (isalnum((unsigned char)*t) || *t == '_'))
			t++;
		if (*t != '$')
			return p;
		size_t tl = (size_t)(t - p) + 1;
		const char *end;
		for (end = t + 1; *end; end++)
			if (strncmp(end, p, tl) == 0)
				return end + tl;
		return end;
	}
	return p;
}

static const char *skip_space(const char *p)
{
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if ((p[0] == '-' && p[1] == '-') ||
		    (p[0] == '/' && p[1] == '*'))
			p = skip_quoted(p, p);
		else
			return p;
	}
}

static int is_txn_control(const char *p)
{
	static const char *const words[] = {
	    "BEGIN",   "COMMIT", "ROLLBACK", "END",    "SAVEPOINT",
	    "RELEASE", "START",  "ABORT",    "VACUUM", NULL};
	p = skip_space(p);
	size_t n = 0;
	while (isalpha((unsigned char)p[n]))
		n++;
	for (const char *const *w = words; *w; w++)
		if (strlen(*w) == n && strncasecmp(p, *w, n) == 0)
			return 1;
	return 0;
}

int inbox__decl_sql_check(const char *sql, int nparams,
                          const char *const *params, char *why, size_t len)
{
	unsigned char used[INBOX_DECL_MAX_PARAMS + 1] = {0};
	int maxn = 0;
	if (!*skip_space(sql)) {
		snprintf(why, len, "the SQL is empty");
		return -1;
	}
	if (is_txn_control(sql)) {
		snprintf(
		    why, len,
		    "transaction control (BEGIN/COMMIT/ROLLBACK/...) is not "
		    "allowed: the effect runs inside the inbox's "
		    "transaction");
		return -1;
	}
	for (const char *p = sql; *p;) {
		const char *q = skip_quoted(sql, p);
		if (q != p) {
			p = q;
			continue;
		}
		if (*p == ';') {
			if (*skip_space(p + 1)) {
				snprintf(
				    why, len,
				    "one SQL statement per step: split the "
				    "statements into several \"- sql:\" "
				    "steps");
				return -1;
			}
			p++;
			continue;
		}
		if (*p == '$' && isdigit((unsigned char)p[1]) &&
		    (p == sql || !ident_char(p[-1]))) {
			char *end;
			errno = 0;
			long n = strtol(p + 1, &end, 10);
			if (n < 1 || n > INBOX_DECL_MAX_PARAMS || errno) {
				snprintf(why, len,
				         "placeholder $%.10s is out of range "
				         "($1..$%d)",
				         p + 1, INBOX_DECL_MAX_PARAMS);
				return -1;
			}
			used[n] = 1;
			if (n > maxn)
				maxn = (int)n;
			p = end;
			continue;
		}
		p++;
	}
	if (maxn > nparams) {
		snprintf(why, len,
		         "the SQL uses $%d but params lists %d JSON pointer%s "
		         "(one per $N, in order)",
		         maxn, nparams, nparams == 1 ? "" : "s");
		return -1;
	}
	for (int i = 1; i <= nparams; i++)
		if (!used[i]) {
			snprintf(
			    why, len,
			    "params lists $%d (%s) but the SQL never uses $%d",
			    i, params[i - 1], i);
			return -1;
		}
	return 0;
}

/* ---- against the database ------------------------------------------ */

/* The store runs it (inbox_store_exec_setup: serialized across the
 * daemons starting together). 0, INBOX_ERR_STORE (the SQL's fault) or
 * INBOX_ERR_TRANSIENT (the database went away), with the message. */
int inbox__decl_setup_run(inbox_store *st, const char *sql, char *err,
                          size_t len)
{
	int rc = inbox_store_exec_setup(st, sql);
	if (rc < 0)
		snprintf(err, len, "%s", inbox_store_errmsg(st));
	return rc < 0 ? rc : 0;
}

/* Prepare without running. 0, INBOX_ERR_STORE (rejected) or
 * INBOX_ERR_TRANSIENT (the database went away), with the message. */
static int prepare(inbox_store *st, const char *sql, char *err, size_t len)
{
	int rc = inbox_store_check_sql(st, sql, NULL);
	if (rc < 0)
		snprintf(err, len, "%s", inbox_store_errmsg(st));
	return rc < 0 ? rc : 0;
}

/* The upsert's table and columns must exist. */
static char *upsert_probe(const inbox__decl_step *s)
{
	inbox__buf b = INBOX__BUF_INIT;
	int bad = inbox__buf_puts(&b, "SELECT ");
	bad |= inbox__quote_ident(&b, s->key_column);
	bad |= inbox__buf_puts(&b, ", ");
	bad |= inbox__quote_ident(&b, s->version_column);
	for (int i = 0; i < s->nset; i++) {
		bad |= inbox__buf_puts(&b, ", ");
		bad |= inbox__quote_ident(&b, s->set_columns[i]);
	}
	bad |= inbox__buf_puts(&b, " FROM ");
	bad |= inbox__quote_dotted(&b, s->table);
	bad |= inbox__buf_puts(&b, " LIMIT 0");
	if (bad) {
		inbox__buf_free(&b);
		return NULL;
	}
	return b.data;
}

int inbox_decl_prepare(const inbox_decl *d, inbox_store *st, int *step,
                       char *err, size_t len)
{
	char why[600];
	int rc;
	if (step)
		*step = 0;
	if (err && len)
		err[0] = '\0';
	if (!d || !st) {
		if (err && len)
			snprintf(err, len, "no declaration or no store");
		return INBOX_ERR_INVALID;
	}
	if (d->setup &&
	    (rc = inbox__decl_setup_run(st, d->setup, why, sizeof(why)))) {
		if (err && len)
			snprintf(err, len, "%s", why);
		return rc;
	}
	for (int i = 0; i < d->nsteps; i++) {
		const inbox__decl_step *s = &d->steps[i];
		if (step)
			*step = i + 1;
		if (s->kind == INBOX__DECL_SQL) {
			if ((rc = prepare(st, s->sql, why, sizeof(why))) == 0)
				continue;
			if (err && len)
				snprintf(err, len,
				         "the database rejects the SQL: %s",
				         why);
			return rc;
		}
		char *probe = upsert_probe(s);
		if (!probe) {
			if (err && len)
				snprintf(err, len,
				         "bad upsert table name \"%s\"",
				         s->table);
			return INBOX_ERR_INVALID;
		}
		rc = prepare(st, probe, why, sizeof(why));
		free(probe);
		if (rc == 0)
			continue;
		if (err && len)
			snprintf(err, len, "upsert into \"%s\": %s", s->table,
			         why);
		return rc;
	}
	if (step)
		*step = 0;
	return 0;
}

/* ---- the handler ----------------------------------------------------- */

/* Permanent database errors: the same message will fail the same way. */
static int permanent(const char *code)
{
	if (strlen(code) == 5 &&
	    (strncmp(code, "22", 2) == 0 || strncmp(code, "23", 2) == 0))
		return 1; /* data exception, integrity constraint violation */
	return strncmp(code, "SQLITE_CONSTRAINT", 17) == 0 ||
	       strcmp(code, "SQLITE_MISMATCH") == 0 ||
	       strcmp(code, "SQLITE_TOOBIG") == 0;
}

static int db_failed(inbox_txn *t, int rc, int step)
{
	inbox_store *st = inbox_txn_store(t);
	const char *code = inbox_store_errcode(st);
	char reason[600];
	snprintf(reason, sizeof(reason), "effect step %d: %s%s%s%s", step,
	         inbox_store_errmsg(st), *code ? " (" : "", code,
	         *code ? ")" : "");
	inbox_txn_set_reason(t, reason);
	if (rc == INBOX_ERR_TRANSIENT || !permanent(code))
		return INBOX_HANDLER_RETRY;
	return INBOX_HANDLER_REJECT;
}

/* Fetch the value at `ptr`; NULL for JSON null. -1 after setting the
 * reason ("WHAT[ $N] (PTR) is missing") when absent, or when a string
 * holds U+0000: bound as a C string it would be cut there, and the effect
 * would store another value than the message's; n > 0 numbers an effect
 * parameter. The reason is only built on those paths. */
static int param(inbox_txn *t, const inbox_msg *m, const char *ptr,
                 const char *what, int n, const char **out)
{
	int rc = inbox_msg_get(m, ptr, out);
	if (rc == INBOX_OK)
		return 0;
	char num[16] = "", reason[400];
	if (n > 0)
		snprintf(num, sizeof(num), " $%d", n);
	if (rc == INBOX_ERR_NOTFOUND)
		snprintf(reason, sizeof(reason), "%s%s (%s) is missing", what,
		         num, ptr);
	else if (rc == INBOX_ERR_NUL)
		snprintf(reason, sizeof(reason),
		         "%s%s: U+0000 in %s: cannot be stored as text", what,
		         num, ptr);
	else
		snprintf(reason, sizeof(reason), "%s%s (%s): %s", what, num,
		         ptr, inbox_strerror(rc));
	inbox_txn_set_reason(t, reason);
	return -1;
}

static int run_sql(inbox_txn *t, const inbox_msg *m, const inbox__decl_step *s,
                   int step, json_t **row)
{
	const char *vals[INBOX_DECL_MAX_PARAMS];
	for (int i = 0; i < s->nparams; i++)
		if (param(t, m, s->params[i], "effect parameter", i + 1,
		          &vals[i]) < 0)
			return INBOX_HANDLER_REJECT;
	if (!row || !s->returns) {
		int rc = inbox_txn_exec(t, s->sql, s->nparams, vals, NULL);
		return rc < 0 ? db_failed(t, rc, step) : INBOX_HANDLER_OK;
	}
	/* the declared result reads its first row (RETURNING) */
	inbox__decl_row r = {NULL, 0, 0};
	int rc = inbox_txn_query(t, s->sql, s->nparams, vals,
	                         inbox__decl_row_fn, &r);
	if (rc < 0) {
		json_decref(r.row);
		return db_failed(t, rc, step);
	}
	if (r.nomem || r.bad_text) {
		char why[160];
		snprintf(why, sizeof(why),
		         r.bad_text ? "effect step %d returned a text that is "
		                      "not UTF-8: no JSON result"
		                    : "effect step %d: out of memory keeping "
		                      "its row",
		         step);
		inbox_txn_set_reason(t, why);
		return r.bad_text ? INBOX_HANDLER_REJECT : INBOX_HANDLER_RETRY;
	}
	*row = r.row;
	return INBOX_HANDLER_OK;
}

static int run_upsert(inbox_txn *t, const inbox_msg *m,
                      const inbox__decl_step *s, int step)
{
	const char *key, *ver, *vals[INBOX_DECL_MAX_PARAMS];
	char reason[400];
	if (param(t, m, s->key_value, "upsert key", 0, &key) < 0 ||
	    param(t, m, s->version_value, "upsert version", 0, &ver) < 0)
		return INBOX_HANDLER_REJECT;
	if (!key) {
		snprintf(reason, sizeof(reason), "upsert key (%s) is null",
		         s->key_value);
		inbox_txn_set_reason(t, reason);
		return INBOX_HANDLER_REJECT;
	}
	char *end = NULL;
	errno = 0;
	long long version = ver ? strtoll(ver, &end, 10) : 0;
	if (!ver || !*ver || *end || errno) {
		snprintf(reason, sizeof(reason),
		         "upsert version (%s) must be an integer",
		         s->version_value);
		inbox_txn_set_reason(t, reason);
		return INBOX_HANDLER_REJECT;
	}
	for (int i = 0; i < s->nset; i++) {
		const char *ptr = s->set_values[i];
		if (param(t, m, ptr, "upsert value", 0, &vals[i]) < 0)
			return INBOX_HANDLER_REJECT;
	}
	int rc = inbox_txn_upsert_versioned(
	    t, s->table, s->key_column, key, s->version_column, version,
	    s->nset, (const char *const *)s->set_columns, vals, NULL);
	return rc < 0 ? db_failed(t, rc, step) : INBOX_HANDLER_OK;
}

int inbox_decl_handler(inbox_txn *t, const inbox_msg *m, void *payload)
{
	const inbox_decl *d = payload;
	if (!d) {
		/* A consumer opened without its declaration: no message's
		 * fault, none is lost. */
		inbox_txn_set_reason(t, "no declaration (handler_payload)");
		return INBOX_HANDLER_RETRY;
	}
	/* Filters (when:): a message no step wants is skipped — recorded
	 * (a redelivery is a duplicate), acked, counted, no effect. */
	int ran = 0, h = inbox__decl_holds(&d->when, m);
	if (h < 0)
		goto nomem;
	if (!h) {
		inbox_txn_mark_skipped(t);
		return INBOX_HANDLER_OK;
	}
	/* The rows the declared result reads, per step (NULL: a step that
	 * did not run for this message, or returned no row). */
	json_t **rows = NULL;
	if ((d->result || d->headers) && d->nsteps > 0 &&
	    !(rows = calloc((size_t)d->nsteps, sizeof(*rows))))
		goto nomem;
	int v = INBOX_HANDLER_OK;
	for (int i = 0; i < d->nsteps && v == INBOX_HANDLER_OK; i++) {
		const inbox__decl_step *s = &d->steps[i];
		if ((h = inbox__decl_holds(&s->when, m)) < 0)
			break;
		if (!h)
			continue;
		ran++;
		v = s->kind == INBOX__DECL_SQL
		        ? run_sql(t, m, s, i + 1, rows ? &rows[i] : NULL)
		        : run_upsert(t, m, s, i + 1);
	}
	/* External effects: outbox rows in the same transaction. */
	if (h >= 0 && v == INBOX_HANDLER_OK && d->noutbox)
		v = inbox__decl_outbox_run(t, m, d, &ran);
	if (h >= 0 && v == INBOX_HANDLER_OK) {
		if (!ran && d->nsteps + d->noutbox > 0)
			inbox_txn_mark_skipped(t);
		else if (d->result || d->headers)
			v = inbox__decl_result_run(t, m, d, rows);
	}
	for (int i = 0; rows && i < d->nsteps; i++)
		json_decref(rows[i]);
	free(rows);
	if (h < 0)
		goto nomem;
	return v;
nomem:
	/* never the message's fault: the batch is run again */
	inbox_txn_set_reason(t, "out of memory evaluating a filter");
	return INBOX_HANDLER_RETRY;
}
