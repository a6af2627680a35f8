/*
 * The WHERE clause of an operator's listing (admin_sql.h): the dead
 * letters' and the outbox's filters, each a run of optional terms with
 * their parameters after "id > $1", then the page's order and limit.
 */
#include <stdio.h>

#include "admin/admin_sql.h"

void inbox__admin_filter_init(inbox__admin_filter *w, const char *select,
                              int64_t after_id)
{
	inbox__buf init = INBOX__BUF_INIT;
	w->t = init;
	snprintf(w->after, sizeof(w->after), "%lld", (long long)after_id);
	for (int i = 0; i < INBOX__ADMIN_FILTER_MAX; i++)
		w->p[i] = NULL;
	w->p[0] = w->after;
	w->np = 1;
	w->bad = inbox__buf_puts(&w->t, select) < 0;
	w->bad |= inbox__buf_puts(&w->t, " WHERE id > {i:1}") < 0;
}

/* The next parameter's number, or 0 (and bad) past the last slot. */
static int param(inbox__admin_filter *w, const char *value)
{
	if (w->np == INBOX__ADMIN_FILTER_MAX) {
		w->bad = 1;
		return 0;
	}
	w->p[w->np++] = value;
	return w->np;
}

void inbox__admin_filter_eq(inbox__admin_filter *w, const char *column,
                            const char *value)
{
	if (!value)
		return;
	int n = param(w, value);
	if (n)
		w->bad |=
		    inbox__buf_printf(&w->t, " AND %s = $%d", column, n) < 0;
}

void inbox__admin_filter_if(inbox__admin_filter *w, int on, const char *sql)
{
	if (on)
		w->bad |= inbox__buf_printf(&w->t, " AND %s", sql) < 0;
}

void inbox__admin_filter_older(inbox__admin_filter *w, const char *expr,
                               int64_t seconds)
{
	if (seconds <= 0)
		return;
	snprintf(w->older, sizeof(w->older), "%lld",
	         (long long)(seconds > INBOX__ADMIN_MAX_WINDOW_S
	                         ? INBOX__ADMIN_MAX_WINDOW_S
	                         : seconds));
	int n = param(w, w->older);
	if (n)
		w->bad |= inbox__buf_printf(&w->t, " AND %s < {cutoff:%d}",
		                            expr, n) < 0;
}

int inbox__admin_filter_run(inbox__admin_filter *w, inbox_store *st, int limit,
                            inbox_row_fn fn, void *payload)
{
	inbox__buf b = INBOX__BUF_INIT;
	w->bad |= inbox__buf_puts(&w->t, " ORDER BY id") < 0;
	if (limit > 0)
		w->bad |= inbox__buf_printf(&w->t, " LIMIT %d", limit) < 0;
	int rc = INBOX_ERR_NOMEM;
	if (w->bad)
		inbox__store_seterr(st, "", "out of memory building SQL");
	else
		rc = inbox__admin_sql(&b, st, w->t.data);
	if (rc == INBOX_OK)
		rc = inbox_store_query(st, b.data, w->np, w->p, fn, payload);
	inbox__buf_free(&w->t);
	inbox__buf_free(&b);
	return rc;
}
