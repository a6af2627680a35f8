/*
 * The reads of an operator's listings (admin_sql.h): the WHERE clause of
 * the dead letters' and the outbox's filters, each a run of optional
 * terms with their parameters after "id > $1", then the page's order and
 * limit; and one row read by its id, its bytes as hex.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin_sql.h"
#include "base/url.h"

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

char *inbox__admin_unhex(const char *h, size_t *len)
{
	size_t n = h ? strlen(h) / 2 : 0;
	char *out = malloc(n + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int hi = inbox__hexval((unsigned char)h[2 * i]),
		    lo = inbox__hexval((unsigned char)h[2 * i + 1]);
		out[i] = (char)((hi < 0 ? 0 : hi) * 16 + (lo < 0 ? 0 : lo));
	}
	out[n] = '\0';
	*len = n;
	return out;
}

int inbox__admin_get(inbox_store *st, const char *select, int64_t id,
                     const char *consumer, const char *what, inbox_row_fn fn,
                     inbox__admin_one *x)
{
	char ids[24];
	snprintf(ids, sizeof(ids), "%lld", (long long)id);
	const char *p[2] = {ids, consumer};
	inbox__buf t = INBOX__BUF_INIT, b = INBOX__BUF_INIT;
	int bad = inbox__buf_puts(&t, select) < 0 ||
	          inbox__buf_puts(&t, " WHERE id = {i:1}") < 0 ||
	          (consumer && inbox__buf_puts(&t, " AND consumer = $2") < 0);
	int rc = INBOX_ERR_NOMEM;
	if (bad)
		inbox__store_seterr(st, "", "out of memory building SQL");
	else
		rc = inbox__admin_sql(&b, st, t.data);
	if (rc == INBOX_OK)
		rc = inbox_store_query(st, b.data, consumer ? 2 : 1, p, fn, x);
	inbox__buf_free(&t);
	inbox__buf_free(&b);
	if (rc == INBOX_OK && x->oom) {
		inbox__store_seterr(st, "", "%s: out of memory", what);
		rc = INBOX_ERR_NOMEM;
	}
	if (rc == INBOX_OK && !x->row) {
		inbox__store_seterr(st, "", "no %s %lld%s%s%s", what,
		                    (long long)id, consumer ? " of \"" : "",
		                    consumer ? consumer : "",
		                    consumer ? "\"" : "");
		rc = INBOX_ERR_NOTFOUND;
	}
	return rc;
}
