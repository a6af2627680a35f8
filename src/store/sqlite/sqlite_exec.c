/*
 * Handler statements: exec/query with $1..$n text parameters.
 *
 * A consumer runs the same few statements for every message, so prepared
 * statements are kept in a small LRU cache keyed by the SQL text; a hit
 * costs a string compare per entry and no allocation. A statement that is
 * still being stepped (a query's row callback running the same SQL again)
 * is never reused or evicted: the nested call prepares a private one.
 */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "store/sqlite/sqlite_store.h"

/* A statement lent to one exec/query call. */
typedef struct lent {
	sqlite3_stmt *stmt; /* NULL: the SQL holds no statement */
	int owned;          /* not cached: finalize after use */
} lent;

static int only_one_statement(sq_store *s, const char *tail)
{
	while (*tail) {
		sqlite3_stmt *next = NULL;
		int rc = sqlite3_prepare_v2(s->db, tail, -1, &next, &tail);
		sqlite3_finalize(next);
		if (rc != SQLITE_OK)
			return inbox__sq_fail(s, rc, "exec");
		if (next) {
			inbox__store_seterr(&s->base, "SQLITE_MISUSE",
			                    "exec: one SQL statement per call");
			return INBOX_ERR_STORE;
		}
	}
	return INBOX_OK;
}

static int compile(sq_store *s, const char *sql, sqlite3_stmt **out)
{
	const char *tail = sql;
	*out = NULL;
	/* Skip empty statements (";", comments) in front of the first. */
	while (!*out && *tail) {
		int rc = sqlite3_prepare_v3(
		    s->db, tail, -1, SQLITE_PREPARE_PERSISTENT, out, &tail);
		if (rc != SQLITE_OK)
			return inbox__sq_fail(s, rc, "exec");
	}
	int err = only_one_statement(s, tail);
	if (err) {
		sqlite3_finalize(*out);
		*out = NULL;
	}
	return err;
}

static int lend(sq_store *s, const char *sql, lent *l)
{
	sq_cached *victim = NULL;
	int busy_hit = 0;
	l->stmt = NULL;
	l->owned = 0;
	s->tick++;
	for (int i = 0; i < SQ_CACHE_SIZE; i++) {
		sq_cached *c = &s->cache[i];
		if (c->sql && strcmp(c->sql, sql) == 0) {
			if (!sqlite3_stmt_busy(c->stmt)) {
				c->used = s->tick;
				l->stmt = c->stmt;
				return INBOX_OK;
			}
			busy_hit = 1;
			continue;
		}
		if (c->sql && sqlite3_stmt_busy(c->stmt))
			continue;
		if (!victim ||
		    (victim->sql && (!c->sql || c->used < victim->used)))
			victim = c;
	}
	int err = compile(s, sql, &l->stmt);
	if (err || !l->stmt)
		return err;
	char *key = busy_hit || !victim ? NULL : strdup(sql);
	if (!key) {
		l->owned = 1;
		return INBOX_OK;
	}
	sqlite3_finalize(victim->stmt);
	free(victim->sql);
	victim->sql = key;
	victim->stmt = l->stmt;
	victim->used = s->tick;
	return INBOX_OK;
}

static void give_back(lent *l)
{
	if (!l->stmt)
		return;
	if (l->owned) {
		sqlite3_finalize(l->stmt);
	} else {
		inbox__sq_done(l->stmt);
	}
}

/* Parameter names: "$N" (the public convention), also "?N" and "?".
 * Values are bound as text without copying: they outlive the call, and
 * the bindings are cleared before it returns. */
static int bind_params(sq_store *s, sqlite3_stmt *stmt, int nparams,
                       const char *const *params)
{
	int count = sqlite3_bind_parameter_count(stmt);
	for (int j = 1; j <= count; j++) {
		const char *name = sqlite3_bind_parameter_name(stmt, j);
		long k = j;
		if (name) {
			char *end = NULL;
			if ((name[0] == '$' || name[0] == '?') &&
			    name[1] >= '0' && name[1] <= '9')
				k = strtol(name + 1, &end, 10);
			if (!end || *end) {
				inbox__store_seterr(&s->base, "SQLITE_RANGE",
				                    "parameter %s: use $1..$n",
				                    name);
				return INBOX_ERR_STORE;
			}
		}
		if (k < 1 || k > nparams) {
			inbox__store_seterr(
			    &s->base, "SQLITE_RANGE",
			    "parameter %s has no value (%d given)",
			    name ? name : "?", nparams);
			return INBOX_ERR_STORE;
		}
		const char *v = params[k - 1];
		int rc = v ? sqlite3_bind_text(stmt, j, v, -1, SQLITE_STATIC)
		           : sqlite3_bind_null(stmt, j);
		if (rc != SQLITE_OK)
			return inbox__sq_fail(s, rc, "bind");
	}
	return INBOX_OK;
}

static int prepare_call(sq_store *s, const char *sql, int nparams,
                        const char *const *params, lent *l)
{
	if (!sql || nparams < 0 || (nparams > 0 && !params)) {
		inbox__store_seterr(&s->base, "", "exec: invalid arguments");
		return INBOX_ERR_INVALID;
	}
	if (!s->db) {
		inbox__store_seterr(&s->base, "", "the database is not open");
		return INBOX_ERR_STATE;
	}
	int err = lend(s, sql, l);
	if (!err && l->stmt)
		err = bind_params(s, l->stmt, nparams, params);
	if (err)
		give_back(l);
	return err;
}

int inbox__sq_exec(inbox_store *st, const char *sql, int nparams,
                   const char *const *params, int64_t *rows)
{
	sq_store *s = SQ(st);
	lent l;
	int64_t n = 0;
	int err = prepare_call(s, sql, nparams, params, &l);
	if (err || !l.stmt) {
		if (rows)
			*rows = 0;
		return err;
	}
	/* sqlite3_changes64() keeps the count of the last INSERT/UPDATE/
	 * DELETE: only trust it if this statement changed something. */
	sqlite3_int64 before = sqlite3_total_changes64(s->db);
	int rc, armed = inbox__sq_arm(s);
	while ((rc = sqlite3_step(l.stmt)) == SQLITE_ROW)
		n++;
	inbox__sq_disarm(s, armed);
	if (rc != SQLITE_DONE)
		err = inbox__sq_fail(s, rc, "exec");
	else if (!sqlite3_stmt_readonly(l.stmt))
		n = sqlite3_total_changes64(s->db) != before
		        ? sqlite3_changes64(s->db)
		        : 0;
	give_back(&l);
	if (rows)
		*rows = err ? 0 : n;
	return err;
}

#define ROW_STACK 16

static const char *sq_colname(void *ctx, int col)
{
	return sqlite3_column_name((sqlite3_stmt *)ctx, col);
}

int inbox__sq_query(inbox_store *st, const char *sql, int nparams,
                    const char *const *params, inbox_row_fn fn, void *payload)
{
	sq_store *s = SQ(st);
	lent l;
	int err = prepare_call(s, sql, nparams, params, &l);
	if (err || !l.stmt)
		return err;
	int ncols = sqlite3_column_count(l.stmt);
	const char *stackrow[ROW_STACK];
	/* Per call, not per row; and not a handle-wide buffer, since a row
	 * callback may run a query of its own. */
	const char **row =
	    ncols <= ROW_STACK ? stackrow : malloc(sizeof(*row) * ncols);
	if (!row) {
		give_back(&l);
		inbox__store_seterr(st, "SQLITE_NOMEM", "query: out of memory");
		return INBOX_ERR_NOMEM;
	}
	int rc, armed = inbox__sq_arm(s);
	inbox__row_names names = {sq_colname, l.stmt, ncols, NULL};
	inbox__row_names_push(&names);
	while ((rc = sqlite3_step(l.stmt)) == SQLITE_ROW) {
		for (int i = 0; i < ncols; i++)
			row[i] = (const char *)sqlite3_column_text(l.stmt, i);
		if (fn && fn(ncols, row, payload) != 0) {
			rc = SQLITE_DONE;
			break;
		}
	}
	inbox__row_names_pop(&names);
	inbox__sq_disarm(s, armed);
	if (rc != SQLITE_DONE)
		err = inbox__sq_fail(s, rc, "query");
	if (row != stackrow)
		free(row);
	give_back(&l);
	return err;
}
