/* The transaction handle handlers write through. */
#include <stdio.h>
#include <string.h>

#include "core/consumer.h"

void inbox__txn_init(inbox_txn *t, inbox_consumer *c, inbox_msg *m)
{
	memset(t, 0, sizeof(*t));
	t->c = c;
	t->st = c->st;
	t->msg = m;
}

void inbox__txn_failed(inbox_txn *t, int rc)
{
	if (rc >= 0)
		return;
	t->failed = 1;
	t->nomem |= rc == INBOX_ERR_NOMEM;
	if (!t->infra_err &&
	    (rc == INBOX_ERR_TRANSIENT || rc == INBOX__ERR_REDO))
		t->infra_err = rc;
}

/* The native handle, if the backend says it is a `type` (by the C type,
 * not the store's kind: any backend built on libpq hands out a PGconn). */
static void *native_of(inbox_txn *t, const char *type)
{
	if (!t)
		return NULL;
	const inbox_store_vtable *vt = t->st->vt;
	if (vt->version < 6 || !vt->native_type ||
	    strcmp(vt->native_type, type) != 0)
		return NULL;
	return vt->native(t->st);
}

struct pg_conn *inbox_txn_pgconn(inbox_txn *t)
{
	return native_of(t, "PGconn");
}

struct sqlite3 *inbox_txn_sqlite3(inbox_txn *t)
{
	return native_of(t, "sqlite3");
}

inbox_store *inbox_txn_store(inbox_txn *t)
{
	return t ? t->st : NULL;
}

int inbox_txn_exec(inbox_txn *t, const char *sql, int nparams,
                   const char *const *params, int64_t *rows)
{
	if (!t || !sql || nparams < 0 || (nparams > 0 && !params))
		return INBOX_ERR_INVALID;
	/* rows == NULL tells the store the count is not needed: it may
	 * then send the statement later, pipelined with the batch's others
	 * (PostgreSQL; see inbox.h). */
	int rc = t->st->vt->exec(t->st, sql, nparams, params, rows);
	inbox__txn_failed(t, rc);
	return rc;
}

int inbox_txn_query(inbox_txn *t, const char *sql, int nparams,
                    const char *const *params, inbox_row_fn fn, void *payload)
{
	if (!t || !sql || !fn || nparams < 0 || (nparams > 0 && !params))
		return INBOX_ERR_INVALID;
	int rc = t->st->vt->query(t->st, sql, nparams, params, fn, payload);
	inbox__txn_failed(t, rc);
	return rc;
}

void inbox_txn_mark_stale(inbox_txn *t)
{
	if (t)
		t->stale = 1;
}

void inbox_txn_mark_skipped(inbox_txn *t)
{
	if (t)
		t->skipped = 1;
}

void inbox_txn_set_reason(inbox_txn *t, const char *reason)
{
	if (t && reason)
		snprintf(t->reason, sizeof(t->reason), "%s", reason);
}

int inbox_txn_set_result(inbox_txn *t, const char *content_type,
                         const void *data, size_t len)
{
	if (!t || (!data && len > 0))
		return INBOX_ERR_INVALID;
	if (content_type) {
		size_t n = strlen(content_type);
		if (n > 255)
			return INBOX_ERR_INVALID;
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)content_type[i] < 0x20 ||
			    content_type[i] == 0x7f)
				return INBOX_ERR_INVALID;
	}
	if (!t->result || t->st->vt->version < 7 || !t->st->vt->set_result)
		return INBOX_ERR_STATE;
	if (len > t->max_result)
		return INBOX_ERR_TOO_LARGE;
	inbox__stored *r = t->result;
	inbox__buf_reset(&r->data);
	inbox__buf_reset(&r->type);
	r->set = 0;
	/* an empty append still allocates: data is never NULL once set */
	if (inbox__buf_append(&r->data, len ? data : "", len) < 0 ||
	    (content_type && inbox__buf_puts(&r->type, content_type) < 0))
		return INBOX_ERR_NOMEM;
	r->has_type = content_type != NULL;
	r->set = 1;
	return INBOX_OK;
}

#define MAX_UPSERT_COLS 62

int inbox_txn_upsert_versioned(inbox_txn *t, const char *table,
                               const char *key_column, const char *key_value,
                               const char *version_column, int64_t version,
                               int ncols, const char *const *columns,
                               const char *const *values, int *applied)
{
	if (!t || !table || !key_column || !key_value || !version_column ||
	    ncols < 0 || ncols > MAX_UPSERT_COLS ||
	    (ncols > 0 && (!columns || !values)))
		return INBOX_ERR_INVALID;
	const char *dot = strchr(table, '.');
	if (dot && (dot == table || !dot[1]))
		return INBOX_ERR_INVALID; /* "a." or ".a" */
	inbox__buf b = INBOX__BUF_INIT;
	int bad = 0;
	bad |= inbox__buf_puts(&b, "INSERT INTO ");
	bad |= inbox__quote_dotted(&b, table);
	bad |= inbox__buf_puts(&b, " AS cur (");
	bad |= inbox__quote_ident(&b, key_column);
	bad |= inbox__buf_puts(&b, ", ");
	bad |= inbox__quote_ident(&b, version_column);
	for (int i = 0; i < ncols; i++) {
		bad |= inbox__buf_puts(&b, ", ");
		bad |= inbox__quote_ident(&b, columns[i]);
	}
	bad |= inbox__buf_puts(&b, ") VALUES ($1, CAST($2 AS BIGINT)");
	for (int i = 0; i < ncols; i++)
		bad |= inbox__buf_printf(&b, ", $%d", i + 3);
	bad |= inbox__buf_puts(&b, ") ON CONFLICT (");
	bad |= inbox__quote_ident(&b, key_column);
	bad |= inbox__buf_puts(&b, ") DO UPDATE SET ");
	bad |= inbox__quote_ident(&b, version_column);
	bad |= inbox__buf_puts(&b, " = EXCLUDED.");
	bad |= inbox__quote_ident(&b, version_column);
	for (int i = 0; i < ncols; i++) {
		bad |= inbox__buf_puts(&b, ", ");
		bad |= inbox__quote_ident(&b, columns[i]);
		bad |= inbox__buf_puts(&b, " = EXCLUDED.");
		bad |= inbox__quote_ident(&b, columns[i]);
	}
	bad |= inbox__buf_puts(&b, " WHERE cur.");
	bad |= inbox__quote_ident(&b, version_column);
	bad |= inbox__buf_puts(&b, " < EXCLUDED.");
	bad |= inbox__quote_ident(&b, version_column);
	if (bad) { /* only an allocation can fail now */
		inbox__buf_free(&b);
		t->failed = t->nomem = 1;
		return INBOX_ERR_NOMEM;
	}
	const char *params[MAX_UPSERT_COLS + 2];
	char vbuf[24];
	snprintf(vbuf, sizeof(vbuf), "%lld", (long long)version);
	params[0] = key_value;
	params[1] = vbuf;
	for (int i = 0; i < ncols; i++)
		params[i + 2] = values[i];
	int64_t rows = 0;
	int rc = inbox_txn_exec(t, b.data, ncols + 2, params, &rows);
	inbox__buf_free(&b);
	if (rc < 0)
		return rc;
	if (applied)
		*applied = rows > 0;
	if (rows == 0)
		t->stale = 1;
	return INBOX_OK;
}
