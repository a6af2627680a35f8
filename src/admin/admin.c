/*
 * The admin API's common SQL and the read-only views: per-consumer numbers
 * (inbox_admin_stats_read) and one record (inbox_admin_inspect). Dead
 * letters are in admin_dlq.c, purge with progress in admin_purge.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inbox/outbox.h>

#include "admin/admin_sql.h"
#include "base/log.h"
#include "base/url.h" /* inbox__hexval */

int64_t inbox__admin_num(const char *v)
{
	return v ? strtoll(v, NULL, 10) : 0;
}

char *inbox__admin_dup(const char *v, int *oom)
{
	if (!v)
		return NULL;
	char *s = strdup(v);
	if (!s)
		*oom = 1;
	return s;
}

int inbox__admin_invalid(inbox_store *st, const char *what)
{
	inbox__store_seterr(st, "", "%s", what);
	return INBOX_ERR_INVALID;
}

/* The store's spelling of e with the argument (alen bytes at arg, or
 * none), appended to b. INBOX_OK, INBOX_ERR_NOMEM, or INBOX_ERR_STATE
 * (the backend has no dialect: the message is set). */
static int put_expr(inbox__buf *b, inbox_store *st, inbox_sql_expr e,
                    const char *arg, size_t alen)
{
	char small[128], *a = NULL;
	if (arg) {
		a = malloc(alen + 1);
		if (!a)
			return INBOX_ERR_NOMEM;
		memcpy(a, arg, alen);
		a[alen] = '\0';
	}
	int rc = inbox__store_expr(st, e, a, small, sizeof(small));
	if (rc >= 0 && (size_t)rc < sizeof(small)) {
		rc = inbox__buf_puts(b, small) < 0 ? INBOX_ERR_NOMEM : INBOX_OK;
	} else if (rc >= 0) {
		size_t n = (size_t)rc + 1;
		char *big = malloc(n);
		rc = !big ? INBOX_ERR_NOMEM
		          : inbox__store_expr(st, e, a, big, n);
		if (rc >= 0)
			rc = (size_t)rc < n && inbox__buf_puts(b, big) == 0
			         ? INBOX_OK
			         : INBOX_ERR_NOMEM;
		free(big);
	}
	free(a);
	return rc;
}

/* One {name} or {name:arg} placeholder. */
static int expand_one(inbox__buf *b, inbox_store *st, const char *name,
                      size_t nlen, const char *arg, size_t alen)
{
#define IS(s) (nlen == sizeof(s) - 1 && memcmp(name, s, nlen) == 0)
	static const struct {
		const char *name;
		inbox_sql_expr e;
	} exprs[] = {{"now", INBOX_SQL_NOW_MS},    {"nowts", INBOX_SQL_NOW_TS},
	             {"ms", INBOX_SQL_MS},         {"i", INBOX_SQL_INT_PARAM},
	             {"cutoff", INBOX_SQL_CUTOFF}, {"hex", INBOX_SQL_HEX},
	             {"len", INBOX_SQL_LEN}};
	if (IS("inbox") || IS("dead_letters") || IS("consumers") ||
	    IS("inbox_generations") || IS("outbox")) {
		char t[32];
		memcpy(t, name, nlen);
		t[nlen] = '\0';
		return inbox__table_name(b, st, t) < 0 ? INBOX_ERR_NOMEM
		                                       : INBOX_OK;
	}
	for (size_t i = 0; i < sizeof(exprs) / sizeof(*exprs); i++)
		if (strlen(exprs[i].name) == nlen &&
		    memcmp(exprs[i].name, name, nlen) == 0)
			return put_expr(b, st, exprs[i].e, arg, alen);
#undef IS
	/* Not a placeholder: copy it as it was. */
	return inbox__buf_printf(b, "{%.*s%s%.*s}", (int)nlen, name,
	                         arg ? ":" : "", (int)alen, arg ? arg : "") < 0
	           ? INBOX_ERR_NOMEM
	           : INBOX_OK;
}

int inbox__admin_sql(inbox__buf *b, inbox_store *st, const char *tmpl)
{
	int rc = INBOX_OK;
	inbox__buf_reset(b);
	for (const char *p = tmpl; *p && rc == INBOX_OK;) {
		const char *end = p[0] == '{' ? strchr(p, '}') : NULL;
		if (!end) {
			size_t n = strcspn(p + 1, "{") + 1;
			if (inbox__buf_append(b, p, n) < 0)
				rc = INBOX_ERR_NOMEM;
			p += n;
			continue;
		}
		const char *name = p + 1;
		const char *colon = memchr(name, ':', (size_t)(end - name));
		size_t nlen = (size_t)((colon ? colon : end) - name);
		const char *arg = colon ? colon + 1 : NULL;
		size_t alen = colon ? (size_t)(end - arg) : 0;
		rc = expand_one(b, st, name, nlen, arg, alen);
		p = end + 1;
	}
	if (rc == INBOX_OK && inbox__buf_puts(b, "") < 0)
		rc = INBOX_ERR_NOMEM;
	if (rc == INBOX_ERR_NOMEM)
		inbox__store_seterr(st, "", "out of memory building SQL");
	return rc;
}

/* ---- stats ------------------------------------------------------------ */

static int status_row(int ncols, const char *const *v, void *payload)
{
	inbox_admin_stats *s = payload;
	if (ncols < 2 || !v[0])
		return 0;
	int64_t n = inbox__admin_num(v[1]);
	if (!strcmp(v[0], "completed"))
		s->completed = n;
	else if (!strcmp(v[0], "processing"))
		s->processing = n;
	else if (!strcmp(v[0], "failed"))
		s->failed = n;
	else if (!strcmp(v[0], "dead"))
		s->dead = n;
	s->records += n;
	return 0;
}

/* Up to 8 integer columns of a one-row result; NULL reads as -1. */
typedef struct ints {
	int64_t v[8];
	int rows;
} ints;

static int ints_row(int ncols, const char *const *v, void *payload)
{
	ints *r = payload;
	for (int i = 0; i < ncols && i < 8; i++)
		r->v[i] = v[i] ? strtoll(v[i], NULL, 10) : -1;
	r->rows++;
	return 1; /* one row is all we read */
}

static int query_ints(inbox_store *st, inbox__buf *b, const char *tmpl, int np,
                      const char *const *p, ints *out)
{
	int rc = inbox__admin_sql(b, st, tmpl);
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < 8; i++)
		out->v[i] = -1;
	if (rc == INBOX_OK)
		rc = inbox_store_query(st, b->data, np, p, ints_row, out);
	return rc;
}

/* OUTBOX: the single place that reads the outbox's pending count and
 * oldest age (include/inbox/outbox.h). A store without an outbox (a
 * backend without the slots, or tables not migrated to schema 2 yet on a
 * store opened without auto-migration) reads -1 ("absent"), not an error:
 * the inbox numbers are still worth showing. */
static void outbox_numbers(inbox_store *st, const char *consumer,
                           int64_t *pending, int64_t *oldest_age_ms)
{
	double age = 0;
	*oldest_age_ms = -1;
	if (inbox_outbox_pending(st, consumer, pending, &age) != INBOX_OK) {
		*pending = -1;
		inbox__store_clearerr(st);
	} else if (*pending > 0) {
		*oldest_age_ms = (int64_t)(age * 1000.0);
	}
}

/* Ages from the oldest processed and created timestamps and the clock
 * (epoch ms; < 0: none). Clamped at 0: a record written a moment after
 * the clock was read is not from the future. */
static void set_ages(inbox_admin_stats *out, int64_t processed, int64_t created,
                     int64_t now)
{
	if (processed >= 0)
		out->oldest_age_ms = now > processed ? now - processed : 0;
	if (created >= 0)
		out->oldest_created_age_ms = now > created ? now - created : 0;
}

static int retention_read(inbox_store *st, const char *consumer,
                          inbox_admin_stats *out)
{
	int64_t stored = 0; /* the store's slot (vtable version 7) */
	int rc = inbox__stored_retention(st, consumer, &stored);
	if (rc == INBOX_OK && stored > 0)
		out->retention_seconds = stored;
	return rc;
}

/* ---- estimates (inbox_admin_stats_estimate) ---------------------------- */

static int plan_row(int ncols, const char *const *v, void *payload)
{
	int64_t *rows = payload;
	const char *at =
	    ncols > 0 && v[0] ? strstr(v[0], "\"Plan Rows\":") : NULL;
	if (at) {
		char *end;
		double d = strtod(at + strlen("\"Plan Rows\":"), &end);
		if (end != at + strlen("\"Plan Rows\":") && d >= 0 && d < 9e18)
			*rows = (int64_t)(d + 0.5);
	}
	return 1;
}

/* The planner's estimate of the rows the SELECT `tmpl` (np parameters)
 * returns into *rows, or -1 when the store gives none (a backend without
 * INBOX_SQL_EXPLAIN_ROWS): INBOX_OK either way, or the query's error. */
static int estimate_rows(inbox_store *st, inbox__buf *b, const char *tmpl,
                         int np, const char *const *p, int64_t *rows)
{
	char pre[64];
	*rows = -1;
	if (st->vt->version < 6 || !st->vt->sql_expr)
		return INBOX_OK;
	int n = st->vt->sql_expr(st, INBOX_SQL_EXPLAIN_ROWS, NULL, pre,
	                         sizeof(pre));
	if (n <= 0 || (size_t)n >= sizeof(pre))
		return INBOX_OK;
	inbox__buf t = INBOX__BUF_INIT;
	int rc = inbox__buf_puts(&t, pre) < 0 || inbox__buf_puts(&t, tmpl) < 0
	             ? INBOX_ERR_NOMEM
	             : inbox__admin_sql(b, st, t.data);
	inbox__buf_free(&t);
	if (rc == INBOX_OK)
		rc = inbox_store_query(st, b->data, np, p, plan_row, rows);
	return rc;
}

/* A count of the rows of {inbox} `where` selects (np parameters): exact
 * when cap <= 0; else the planner's estimate when it is at least cap
 * (*est set), and otherwise exact, up to cap rows at most (a wrong
 * estimate never makes it a full count). */
static int capped_count(inbox_store *st, inbox__buf *b, const char *where,
                        int np, const char *const *p, int64_t cap,
                        int64_t *count, int *est)
{
	char q[512];
	ints r;
	*est = 0;
	if (cap > 0) {
		int64_t e;
		snprintf(q, sizeof(q), "SELECT 1 FROM {inbox} WHERE %s", where);
		int rc = estimate_rows(st, b, q, np, p, &e);
		if (rc < 0)
			return rc;
		if (e >= cap) {
			*count = e;
			*est = 1;
			return INBOX_OK;
		}
		snprintf(q, sizeof(q),
		         "SELECT count(*) FROM (SELECT 1 FROM {inbox} WHERE %s"
		         " LIMIT %lld) s",
		         where, (long long)cap);
	} else {
		snprintf(q, sizeof(q), "SELECT count(*) FROM {inbox} WHERE %s",
		         where);
	}
	int rc = query_ints(st, b, q, np, p, &r);
	if (rc == INBOX_OK)
		*count = r.v[0] > 0 ? r.v[0] : 0;
	return rc;
}

/* Records past the window (retention_seconds > 0): exact, or, with
 * cap > 0, exact up to cap. Only completed and dead records have a
 * processed_at, so the range scan of the (consumer, processed_at) index
 * is the whole predicate. */
static int expired_read(inbox_store *st, inbox__buf *b, const char *consumer,
                        inbox_admin_stats *out, int64_t cap, unsigned *est)
{
	char win[24];
	int64_t w = out->retention_seconds;
	snprintf(win, sizeof(win), "%lld",
	         (long long)(w > INBOX__ADMIN_MAX_WINDOW_S
	                         ? INBOX__ADMIN_MAX_WINDOW_S
	                         : w));
	const char *p[2] = {consumer, win};
	int e = 0;
	int rc =
	    capped_count(st, b,
	                 "consumer = $1 AND status IN ('completed', 'dead')"
	                 " AND processed_at < {cutoff:2}",
	                 2, p, cap, &out->expired, &e);
	if (e && est)
		*est |= INBOX_ADMIN_EST_EXPIRED;
	return rc;
}

static int rest_read(inbox_store *st, inbox__buf *bp, const char *consumer,
                     inbox_admin_stats *out);

int inbox_admin_stats_read(inbox_store *st, const char *consumer,
                           inbox_admin_stats *out)
{
	if (!st || !out)
		return INBOX_ERR_INVALID;
	if (inbox__vbegin_store(st, INBOX__V_ADMIN_STATS, out) < 0)
		return INBOX_ERR_INVALID;
	out->oldest_age_ms = out->oldest_created_age_ms = -1;
	out->outbox_pending = out->outbox_oldest_age_ms = -1;
	if (!consumer)
		return inbox__admin_invalid(st,
		                            "stats: a consumer is required");
	if (st->in_txn)
		return INBOX_ERR_STATE;
	const char *p[2] = {consumer, NULL};
	inbox__buf b = INBOX__BUF_INIT;
	ints r;
	int rc = inbox__admin_sql(&b, st,
	                          "SELECT status, count(*) FROM {inbox}"
	                          " WHERE consumer = $1 GROUP BY status");
	if (rc == INBOX_OK)
		rc = inbox_store_query(st, b.data, 1, p, status_row, out);
	if (rc == INBOX_OK)
		rc = query_ints(st, &b,
		                "SELECT {ms:min(processed_at)},"
		                " {ms:min(created_at)}, {now}"
		                " FROM {inbox} WHERE consumer = $1",
		                1, p, &r);
	if (rc == INBOX_OK && r.rows == 1)
		set_ages(out, r.v[0], r.v[1], r.v[2]);
	if (rc == INBOX_OK)
		rc = retention_read(st, consumer, out);
	if (rc == INBOX_OK && out->retention_seconds > 0)
		rc = expired_read(st, &b, consumer, out, 0, NULL);
	if (rc == INBOX_OK)
		rc = rest_read(st, &b, consumer, out);
	inbox__buf_free(&b);
	return rc;
}

static int rest_read(inbox_store *st, inbox__buf *bp, const char *consumer,
                     inbox_admin_stats *out)
{
	const char *p[1] = {consumer};
	ints r;
	int rc = INBOX_OK;
	inbox__buf b = *bp;
	if (rc == INBOX_OK)
		rc = query_ints(st, &b,
		                "SELECT count(*), count(stored_fingerprint),"
		                " count(replayed_at) FROM {dead_letters}"
		                " WHERE consumer = $1",
		                1, p, &r);
	if (rc == INBOX_OK && r.rows == 1) {
		out->dead_letters = r.v[0] > 0 ? r.v[0] : 0;
		out->conflicts = r.v[1] > 0 ? r.v[1] : 0;
		out->replayed = r.v[2] > 0 ? r.v[2] : 0;
		out->dead_letters_pending = out->dead_letters - out->replayed;
	}
	if (rc == INBOX_OK)
		outbox_numbers(st, consumer, &out->outbox_pending,
		               &out->outbox_oldest_age_ms);
	*bp = b;
	return rc;
}

int inbox_admin_stats_estimate(inbox_store *st, const char *consumer,
                               int64_t exact_below, inbox_admin_stats *out,
                               unsigned *estimated)
{
	unsigned none;
	if (!estimated)
		estimated = &none;
	*estimated = 0;
	if (exact_below <= 0)
		return inbox_admin_stats_read(st, consumer, out);
	if (!st || !out)
		return INBOX_ERR_INVALID;
	if (inbox__vbegin_store(st, INBOX__V_ADMIN_STATS, out) < 0)
		return INBOX_ERR_INVALID;
	out->oldest_age_ms = out->oldest_created_age_ms = -1;
	out->outbox_pending = out->outbox_oldest_age_ms = -1;
	if (!consumer)
		return inbox__admin_invalid(st,
		                            "stats: a consumer is required");
	if (st->in_txn)
		return INBOX_ERR_STATE;
	const char *p[1] = {consumer};
	inbox__buf b = INBOX__BUF_INIT;
	int64_t total = -1, dead = -1;
	int rc = estimate_rows(
	    st, &b, "SELECT 1 FROM {inbox} WHERE consumer = $1", 1, p, &total);
	if (rc != INBOX_OK || total < exact_below) {
		/* small (or no estimate): every number exact */
		inbox__buf_free(&b);
		return rc != INBOX_OK
		           ? rc
		           : inbox_admin_stats_read(st, consumer, out);
	}
	*estimated |= INBOX_ADMIN_EST_RECORDS;
	/* Exact: the records without a processed_at (processing, failed),
	 * a range of the (consumer, processed_at) index. */
	inbox_admin_stats open = {0};
	rc = inbox__admin_sql(&b, st,
	                      "SELECT status, count(*) FROM {inbox}"
	                      " WHERE consumer = $1 AND processed_at IS NULL"
	                      " GROUP BY status");
	if (rc == INBOX_OK)
		rc = inbox_store_query(st, b.data, 1, p, status_row, &open);
	out->processing = open.processing;
	out->failed = open.failed;
	if (rc == INBOX_OK)
		rc = estimate_rows(st, &b,
		                   "SELECT 1 FROM {inbox} WHERE consumer = $1"
		                   " AND status = 'dead'",
		                   1, p, &dead);
	if (rc == INBOX_OK) {
		out->dead = dead > 0 ? dead : 0;
		if (total < open.records + out->dead)
			total = open.records + out->dead;
		out->records = total;
		out->completed = total - open.records - out->dead;
	}
	/* Exact: the oldest processed record (the index's first entry).
	 * The oldest created one is the older of the oldest unprocessed
	 * record's and the oldest processed one's creation: a record
	 * created earlier but processed later is missed (documented). */
	ints r;
	if (rc == INBOX_OK)
		rc = query_ints(
		    st, &b,
		    "SELECT {ms:min(processed_at)}, {now},"
		    " (SELECT {ms:min(created_at)} FROM {inbox}"
		    "  WHERE consumer = $1 AND processed_at IS NULL),"
		    " (SELECT {ms:created_at} FROM {inbox}"
		    "  WHERE consumer = $1 AND processed_at IS NOT NULL"
		    "  ORDER BY processed_at LIMIT 1)"
		    " FROM {inbox} WHERE consumer = $1",
		    1, p, &r);
	if (rc == INBOX_OK && r.rows == 1) {
		int64_t c = r.v[2];
		if (r.v[3] >= 0 && (c < 0 || r.v[3] < c))
			c = r.v[3];
		set_ages(out, r.v[0], c, r.v[1]);
	}
	if (rc == INBOX_OK)
		rc = retention_read(st, consumer, out);
	if (rc == INBOX_OK && out->retention_seconds > 0)
		rc =
		    expired_read(st, &b, consumer, out, exact_below, estimated);
	if (rc == INBOX_OK)
		rc = rest_read(st, &b, consumer, out);
	inbox__buf_free(&b);
	return rc;
}

static int generations_read(inbox_store *st, inbox_admin_generations *out,
                            int64_t cap, unsigned *estimated);

int inbox_admin_generations_read(inbox_store *st, inbox_admin_generations *out)
{
	return generations_read(st, out, 0, NULL);
}

int inbox_admin_generations_estimate(inbox_store *st, int64_t exact_below,
                                     inbox_admin_generations *out,
                                     unsigned *estimated)
{
	unsigned none;
	if (!estimated)
		estimated = &none;
	*estimated = 0;
	return generations_read(st, out, exact_below > 0 ? exact_below : 0,
	                        estimated);
}

static int generations_read(inbox_store *st, inbox_admin_generations *out,
                            int64_t cap, unsigned *estimated)
{
	if (!st || !out)
		return INBOX_ERR_INVALID;
	if (inbox__vbegin_store(st, INBOX__V_ADMIN_GENERATIONS, out) < 0)
		return INBOX_ERR_INVALID;
	if (st->in_txn)
		return INBOX_ERR_STATE;
	/* A backend without seal keeps one table and no generations. */
	if (st->vt->version < 3 || !st->vt->seal)
		return INBOX_OK;
	inbox__buf b = INBOX__BUF_INIT;
	ints r = {0};
	int rc = query_ints(
	    st, &b,
	    "SELECT count(*), count(sealed_at),"
	    " count(sealed_at) - count(bloom), coalesce(sum(nkeys), 0),"
	    " coalesce(sum(octet_length(bloom)), 0), max(gen),"
	    " {ms:max(created_at)}, {now} FROM {inbox_generations}",
	    0, NULL, &r);
	if (rc == INBOX_OK && r.rows == 1) {
		out->count = r.v[0];
		out->sealed = r.v[1];
		out->unfiltered = r.v[2];
		out->sealed_keys = r.v[3];
		out->filter_bytes = r.v[4];
		out->newest = r.v[5];
		out->newest_age_ms =
		    r.v[6] >= 0 && r.v[7] > r.v[6] ? r.v[7] - r.v[6] : 0;
		char g[24];
		snprintf(g, sizeof(g), "%lld", (long long)out->newest);
		const char *p[1] = {g};
		int e = 0;
		rc = capped_count(st, &b, "gen = {i:1}", 1, p, cap,
		                  &out->newest_records, &e);
		if (e && estimated)
			*estimated |= INBOX_ADMIN_EST_NEWEST;
	}
	if (rc != INBOX_OK) {
		/* Not migrated to generations (or gone): not an error for
		 * the numbers beside it. */
		out->count = -1;
		inbox__store_clearerr(st);
		rc = INBOX_OK;
	}
	inbox__buf_free(&b);
	return rc;
}

int64_t inbox_admin_headroom_ms(const inbox_admin_stats *s)
{
	if (!s || !inbox__vsize(INBOX__V_ADMIN_STATS, s->version) ||
	    s->retention_seconds <= 0 || s->oldest_age_ms < 0)
		return INT64_MAX;
	int64_t w = s->retention_seconds > INBOX__ADMIN_MAX_WINDOW_S
	                ? INBOX__ADMIN_MAX_WINDOW_S
	                : s->retention_seconds;
	return w * 1000 - s->oldest_age_ms;
}

/* ---- one record -------------------------------------------------------- */

typedef struct record_read {
	inbox_admin_record *r;
	int oom;
} record_read;

static int record_row(int ncols, const char *const *v, void *payload)
{
	record_read *rr = payload;
	if (ncols < 12 || rr->r)
		return 1;
	inbox_admin_record *r = calloc(1, sizeof(*r));
	if (!r) {
		rr->oom = 1;
		return 1;
	}
	r->consumer = inbox__admin_dup(v[0], &rr->oom);
	r->key = inbox__admin_dup(v[1], &rr->oom);
	r->status = inbox__admin_dup(v[2], &rr->oom);
	r->fingerprint = inbox__admin_dup(v[3], &rr->oom);
	r->message_id = inbox__admin_dup(v[4], &rr->oom);
	r->attempts = (int32_t)inbox__admin_num(v[5]);
	r->fence = inbox__admin_num(v[6]);
	r->lease_until_ms = inbox__admin_num(v[7]);
	r->created_at_ms = inbox__admin_num(v[8]);
	r->processed_at_ms = inbox__admin_num(v[9]);
	r->updated_at_ms = inbox__admin_num(v[10]);
	r->now_ms = inbox__admin_num(v[11]);
	r->lease_expired = r->status && !strcmp(r->status, "processing") &&
	                   r->lease_until_ms > 0 &&
	                   r->lease_until_ms < r->now_ms;
	if (ncols >= 15) {
		/* the stored result, as hex text whatever the store */
		if (v[12]) {
			size_t n = strlen(v[12]) / 2;
			r->result = malloc(n + 1);
			if (!r->result)
				rr->oom = 1;
			for (size_t i = 0; r->result && i < n; i++) {
				int hi =
				    inbox__hexval((unsigned char)v[12][2 * i]);
				int lo = inbox__hexval(
				    (unsigned char)v[12][2 * i + 1]);
				r->result[i] = (char)((hi < 0 ? 0 : hi) * 16 +
				                      (lo < 0 ? 0 : lo));
			}
			if (r->result) {
				r->result[n] = '\0';
				r->result_len = n;
			}
		}
		r->result_type = inbox__admin_dup(v[13], &rr->oom);
		r->outcome = inbox__admin_dup(v[14], &rr->oom);
	}
	if (ncols >= 16)
		r->position = inbox__admin_dup(v[15], &rr->oom);
	rr->r = r;
	return 1;
}

int inbox_admin_inspect(inbox_store *st, const char *consumer, const char *key,
                        inbox_admin_record **out)
{
	if (!out)
		return INBOX_ERR_INVALID;
	*out = NULL;
	if (!st)
		return INBOX_ERR_INVALID;
	if (!consumer || !key)
		return inbox__admin_invalid(
		    st, "inspect: a consumer and a key are required");
	const char *p[2] = {consumer, key};
	inbox__buf b = INBOX__BUF_INIT;
	record_read rr = {NULL, 0};
	int rc = inbox__admin_sql(
	    &b, st,
	    "SELECT consumer, key, status, fingerprint, message_id, attempts,"
	    " fence, {ms:lease_until}, {ms:created_at}, {ms:processed_at},"
	    " {ms:updated_at}, {now}, CASE WHEN result IS NULL THEN NULL"
	    " ELSE {hex:result} END, result_type, outcome, position"
	    " FROM {inbox} WHERE consumer = $1 AND key = $2");
	if (rc == INBOX_OK)
		rc = inbox_store_query(st, b.data, 2, p, record_row, &rr);
	inbox__buf_free(&b);
	if (rc == INBOX_OK && rr.oom) {
		inbox__store_seterr(st, "", "inspect: out of memory");
		rc = INBOX_ERR_NOMEM;
	}
	if (rc == INBOX_OK && !rr.r) {
		inbox__store_seterr(st, "", "no inbox record for this key");
		return INBOX_ERR_NOTFOUND;
	}
	if (rc != INBOX_OK) {
		inbox_admin_record_free(rr.r);
		return rc;
	}
	*out = rr.r;
	return INBOX_OK;
}

void inbox_admin_record_free(inbox_admin_record *r)
{
	if (!r)
		return;
	free(r->consumer);
	free(r->key);
	free(r->status);
	free(r->fingerprint);
	free(r->message_id);
	free(r->result);
	free(r->result_type);
	free(r->outcome);
	free(r->position);
	free(r);
}

int inbox_admin_set_retention(inbox_store *st, const char *consumer,
                              int64_t seconds, int64_t *previous)
{
	if (!st)
		return INBOX_ERR_INVALID;
	if (!consumer || seconds <= 0 || seconds > INBOX__ADMIN_MAX_WINDOW_S)
		return inbox__admin_invalid(st, "set retention: a consumer and "
		                                "a window > 0 are required");
	if (st->in_txn)
		return inbox__admin_invalid(st, "set retention: a transaction "
		                                "is open on the store");
	int64_t old = 0;
	int rc = inbox__stored_retention(st, consumer, &old);
	char win[24];
	snprintf(win, sizeof(win), "%lld", (long long)seconds);
	const char *p[2] = {consumer, win};
	inbox__buf b = INBOX__BUF_INIT;
	int64_t rows = 0;
	if (rc == INBOX_OK)
		rc = inbox__admin_sql(
		    &b, st,
		    "UPDATE {consumers} SET retention_seconds ="
		    " {i:2}, updated_at = {nowts} WHERE name = $1");
	if (rc == INBOX_OK)
		rc = inbox_store_exec(st, b.data, 2, p, &rows);
	if (rc == INBOX_OK && rows == 0) {
		rc = inbox__admin_sql(
		    &b, st,
		    "INSERT INTO {consumers} (name,"
		    " retention_seconds, created_at, updated_at)"
		    " VALUES ($1, {i:2}, {nowts}, {nowts})");
		if (rc == INBOX_OK)
			rc = inbox_store_exec(st, b.data, 2, p, NULL);
	}
	inbox__buf_free(&b);
	if (rc != INBOX_OK)
		return rc;
	if (previous)
		*previous = old;
	inbox__log(INBOX_LOG_INFO, consumer,
	           "\"event\":\"retention_changed\",\"from_s\":%lld,"
	           "\"to_s\":%lld",
	           (long long)old, (long long)seconds);
	return INBOX_OK;
}

/* ---- a message by its id or position ------------------------------------ */

typedef struct keys {
	char **v;
	int n;
	int null_key; /* a dead letter without a key was found */
	int oom;
} keys;

static int key_row(int ncols, const char *const *v, void *payload)
{
	keys *k = payload;
	if (ncols < 1)
		return 1;
	if (!v[0]) {
		k->null_key = 1;
		return 0;
	}
	for (int i = 0; i < k->n; i++)
		if (!strcmp(k->v[i], v[0]))
			return 0;
	char **nv = realloc(k->v, (size_t)(k->n + 1) * sizeof(*nv));
	char *d = strdup(v[0]);
	if (!nv || !d) {
		free(d);
		if (nv)
			k->v = nv;
		k->oom = 1;
		return 1;
	}
	k->v = nv;
	k->v[k->n++] = d;
	return 0;
}

int inbox_admin_find_keys(inbox_store *st, const char *consumer,
                          const char *message_id, const char *position,
                          inbox_admin_key_fn fn, void *payload, int *found)
{
	if (found)
		*found = 0;
	if (!st || !fn)
		return INBOX_ERR_INVALID;
	if (!consumer || (!message_id && !position))
		return inbox__admin_invalid(st, "inspect: a consumer and a "
		                                "message id or a position are "
		                                "required");
	static const char *const by_id[] = {
	    "SELECT key FROM {inbox} WHERE consumer = $1 AND message_id = $2",
	    "SELECT key FROM {dead_letters} WHERE consumer = $1 AND"
	    " message_id = $2 ORDER BY id",
	    NULL};
	/* Like by message id, the records by position scan the consumer's
	 * (the column is not indexed: docs/schema.md). */
	static const char *const by_pos[] = {
	    "SELECT key FROM {inbox} WHERE consumer = $1 AND position = $2",
	    "SELECT key FROM {dead_letters} WHERE consumer = $1 AND"
	    " position = $2 ORDER BY id",
	    NULL};
	const char *const *qs = message_id ? by_id : by_pos;
	/* the records' and dead letters' text of it (the core's): a
	 * position with bytes that are not UTF-8 is found as it came, or
	 * as inspect printed it */
	inbox__buf pb = INBOX__BUF_INIT;
	if (!message_id && !(position = inbox__position_text(position, &pb))) {
		inbox__store_seterr(st, "", "inspect: out of memory");
		return INBOX_ERR_NOMEM;
	}
	const char *p[2] = {consumer, message_id ? message_id : position};
	inbox__buf b = INBOX__BUF_INIT;
	keys k = {NULL, 0, 0, 0};
	int rc = INBOX_OK;
	for (int i = 0; qs[i] && rc == INBOX_OK; i++) {
		rc = inbox__admin_sql(&b, st, qs[i]);
		if (rc == INBOX_OK)
			rc = inbox_store_query(st, b.data, 2, p, key_row, &k);
	}
	/* "outbox:ID": the row's key, when it is the consumer's. */
	if (rc == INBOX_OK && !message_id && !strncmp(position, "outbox:", 7)) {
		const char *q[2] = {consumer, position + 7};
		char *end;
		strtoll(q[1], &end, 10);
		if (*q[1] && !*end) {
			rc = inbox__admin_sql(&b, st,
			                      "SELECT key FROM {outbox} WHERE"
			                      " consumer = $1 AND id = {i:2}");
			if (rc == INBOX_OK)
				rc = inbox_store_query(st, b.data, 2, q,
				                       key_row, &k);
		}
	}
	inbox__buf_free(&b);
	inbox__buf_free(&pb);
	if (rc == INBOX_OK && k.oom) {
		inbox__store_seterr(st, "", "inspect: out of memory");
		rc = INBOX_ERR_NOMEM;
	}
	int n = 0, stop = 0;
	for (int i = 0; rc == INBOX_OK && i < k.n && !stop; i++, n++)
		stop = fn(k.v[i], payload);
	if (rc == INBOX_OK && k.null_key && !stop) {
		fn(NULL, payload);
		n++;
	}
	for (int i = 0; i < k.n; i++)
		free(k.v[i]);
	free(k.v);
	if (found)
		*found = n;
	return rc;
}
