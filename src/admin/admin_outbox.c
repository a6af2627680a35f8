/*
 * Outbox rows for operators: list (by consumer, key, provider, state,
 * age), one row with its body and response, retry (re-arm), drop, and the
 * purge of done rows.
 *
 * A retry or a drop reads the row, then changes it in one statement
 * guarded by the state and fencing token it read: a dispatcher claiming
 * the row in between (state in_flight, fence + 1) makes the statement
 * change nothing, and the operator is told (BUSY). The idempotency key is
 * never touched: every attempt of a re-armed row still carries the key of
 * the first, so an idempotent provider still performs the effect once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inbox/admin.h>

#include "admin/admin_sql.h"
#include "base/log.h"
#include "base/url.h"

#define OB_COLUMNS                                                             \
	"id, consumer, key, step, idempotency_key, kind, method, target,"      \
	" state, CASE WHEN idempotent THEN 1 ELSE 0 END,"                      \
	" CASE WHEN reconcile_url IS NULL THEN 0 ELSE 1 END, attempts,"        \
	" max_attempts, reconciliations, fence, last_status, last_error,"      \
	" {ms:created_at}, {ms:updated_at}, {ms:next_attempt_at},"             \
	" {ms:lease_until}, {ms:done_at}, {now}"
#define OB_NCOLS 23

/* "pending" -> INBOX_OUTBOX_PENDING..., NONE when unknown (by the public
 * names: admin sits beside the outbox, not above it). */
static inbox_outbox_state state_parse(const char *s)
{
	for (int i = INBOX_OUTBOX_PENDING; s && i <= INBOX_OUTBOX_DEAD; i++)
		if (!strcmp(s, inbox_outbox_state_name((inbox_outbox_state)i)))
			return (inbox_outbox_state)i;
	return INBOX_OUTBOX_NONE;
}

void inbox_admin_outbox_row_free(inbox_admin_outbox_row *r)
{
	if (!r)
		return;
	free(r->consumer);
	free(r->key);
	free(r->step);
	free(r->idempotency_key);
	free(r->kind);
	free(r->method);
	free(r->url);
	free(r->provider);
	free(r->state);
	free(r->last_error);
	free(r->body);
	free(r->response);
	free(r);
}

static void clear(inbox_admin_outbox_row *r)
{
	free(r->consumer);
	free(r->key);
	free(r->step);
	free(r->idempotency_key);
	free(r->kind);
	free(r->method);
	free(r->url);
	free(r->provider);
	free(r->state);
	free(r->last_error);
	memset(r, 0, sizeof(*r));
}

static void fill(inbox_admin_outbox_row *r, const char *const *v, int *oom)
{
	char prov[300];
	r->id = inbox__admin_num(v[0]);
	r->consumer = inbox__admin_dup(v[1], oom);
	r->key = inbox__admin_dup(v[2], oom);
	r->step = inbox__admin_dup(v[3], oom);
	r->idempotency_key = inbox__admin_dup(v[4], oom);
	r->kind = inbox__admin_dup(v[5], oom);
	r->method = inbox__admin_dup(v[6], oom);
	if (v[7]) {
		r->url = inbox_redact_url(v[7]);
		if (!r->url)
			*oom = 1;
		if (inbox_provider_name(v[7], prov, sizeof(prov)) == INBOX_OK)
			r->provider = inbox__admin_dup(prov, oom);
	}
	r->state = inbox__admin_dup(v[8], oom);
	r->idempotent = inbox__admin_num(v[9]) != 0;
	r->reconcilable = inbox__admin_num(v[10]) != 0;
	r->attempts = (int32_t)inbox__admin_num(v[11]);
	r->max_attempts = (int32_t)inbox__admin_num(v[12]);
	r->reconciliations = (int32_t)inbox__admin_num(v[13]);
	r->fence = inbox__admin_num(v[14]);
	r->last_status = (int)inbox__admin_num(v[15]);
	r->last_error = inbox__admin_dup(v[16], oom);
	r->created_at_ms = inbox__admin_num(v[17]);
	r->updated_at_ms = inbox__admin_num(v[18]);
	r->next_attempt_at_ms = inbox__admin_num(v[19]);
	r->lease_until_ms = inbox__admin_num(v[20]);
	r->done_at_ms = inbox__admin_num(v[21]);
	r->now_ms = inbox__admin_num(v[22]);
}

/* ---- list ------------------------------------------------------------- */

typedef struct list_ctx {
	inbox_admin_outbox_fn fn;
	void *payload;
	const char *provider; /* normalized, or NULL */
	int limit, count;
	int oom;
} list_ctx;

static int list_row(int ncols, const char *const *v, void *payload)
{
	list_ctx *x = payload;
	if (ncols < OB_NCOLS)
		return 1;
	inbox_admin_outbox_row r;
	memset(&r, 0, sizeof(r));
	fill(&r, v, &x->oom);
	int stop = x->oom;
	if (!stop && (!x->provider ||
	              (r.provider && strcmp(r.provider, x->provider) == 0))) {
		stop = x->fn(&r, x->payload);
		if (++x->count == x->limit)
			stop = 1;
	}
	clear(&r);
	return stop;
}

int inbox_admin_outbox_list(inbox_store *st, const inbox_admin_outbox_filter *f,
                            inbox_admin_outbox_fn fn, void *payload)
{
	inbox_admin_outbox_filter all = INBOX_ADMIN_OUTBOX_FILTER_INIT;
	if (!st || !fn)
		return INBOX_ERR_INVALID;
	if (!f)
		f = &all;
	if (inbox__vcheck_store(st, INBOX__V_OUTBOX_FILTER, f->version) < 0)
		return INBOX_ERR_INVALID;
	if (f->state && state_parse(f->state) == INBOX_OUTBOX_NONE)
		return inbox__admin_invalid(
		    st, "outbox: unknown state (pending, in_flight, done, "
		        "failed, unknown, dead)");
	char prov[300];
	if (f->provider) {
		/* A name is a URL of itself: "https://h:443" names itself. */
		if (inbox_provider_name(f->provider, prov, sizeof(prov)) < 0)
			return inbox__admin_invalid(
			    st, "outbox: the provider is not an http(s) URL "
			        "(scheme://host[:port])");
	}
	inbox__admin_filter w;
	inbox__admin_filter_init(&w, "SELECT " OB_COLUMNS " FROM {outbox}",
	                         f->after_id);
	inbox__admin_filter_eq(&w, "consumer", f->consumer);
	inbox__admin_filter_eq(&w, "key", f->key);
	inbox__admin_filter_eq(&w, "state", f->state);
	inbox__admin_filter_older(&w, "created_at", f->older_than_seconds);
	list_ctx x = {fn,
	              payload,
	              f->provider ? prov : NULL,
	              f->limit > 0 ? f->limit : -1,
	              0,
	              0};
	/* The provider is read from the URL here, so the limit is kept
	 * here when it filters. */
	int rc = inbox__admin_filter_run(&w, st, f->provider ? 0 : f->limit,
	                                 list_row, &x);
	if (rc == INBOX_OK && x.oom) {
		inbox__store_seterr(st, "", "outbox: out of memory");
		rc = INBOX_ERR_NOMEM;
	}
	return rc;
}

/* ---- one row ------------------------------------------------------------ */

static int get_row(int ncols, const char *const *v, void *payload)
{
	inbox__admin_one *x = payload;
	if (ncols < OB_NCOLS + 2 || x->row)
		return 1;
	inbox_admin_outbox_row *r = calloc(1, sizeof(*r));
	if (!r) {
		x->oom = 1;
		return 1;
	}
	fill(r, v, &x->oom);
	if (!(r->body = inbox__admin_unhex(v[OB_NCOLS], &r->body_len)))
		x->oom = 1;
	if (v[OB_NCOLS + 1] && !(r->response = inbox__admin_unhex(
	                             v[OB_NCOLS + 1], &r->response_len)))
		x->oom = 1;
	x->row = r;
	return 1;
}

int inbox_admin_outbox_get(inbox_store *st, int64_t id, const char *consumer,
                           inbox_admin_outbox_row **out)
{
	if (!out)
		return INBOX_ERR_INVALID;
	*out = NULL;
	if (!st)
		return INBOX_ERR_INVALID;
	inbox__admin_one x = {NULL, 0};
	int rc = inbox__admin_get(st,
	                          "SELECT " OB_COLUMNS
	                          ", {hex:body}, {hex:response} FROM {outbox}",
	                          id, consumer, "outbox row", get_row, &x);
	if (rc != INBOX_OK) {
		inbox_admin_outbox_row_free(x.row);
		return rc;
	}
	*out = x.row;
	return INBOX_OK;
}

/* ---- retry, drop --------------------------------------------------------- */

/* Mark the pending dead letters of row id resolved. */
static int resolve_dead_letters(inbox_store *st, int64_t id)
{
	char pos[48];
	snprintf(pos, sizeof(pos), "outbox:%lld", (long long)id);
	const char *p[1] = {pos};
	inbox__buf b = INBOX__BUF_INIT;
	int rc = inbox__admin_sql(&b, st,
	                          "UPDATE {dead_letters} SET replayed_at ="
	                          " {nowts} WHERE position = $1 AND"
	                          " replayed_at IS NULL");
	if (rc == INBOX_OK)
		rc = inbox_store_exec(st, b.data, 1, p, NULL);
	inbox__buf_free(&b);
	return rc;
}

/* Run tmpl on row r ($1 id, $2 its state, $3 its fence, $4 extra): BUSY
 * when it changed since it was read. */
static int guarded(inbox_store *st, const inbox_admin_outbox_row *r,
                   const char *tmpl, const char *extra, const char *what)
{
	char ids[24], fence[24];
	snprintf(ids, sizeof(ids), "%lld", (long long)r->id);
	snprintf(fence, sizeof(fence), "%lld", (long long)r->fence);
	const char *p[4] = {ids, r->state, fence, extra};
	inbox__buf b = INBOX__BUF_INIT;
	int64_t rows = 0;
	int rc = inbox__admin_sql(&b, st, tmpl);
	if (rc == INBOX_OK)
		rc = inbox_store_exec(st, b.data, extra ? 4 : 3, p, &rows);
	inbox__buf_free(&b);
	if (rc == INBOX_OK && rows == 0) {
		inbox__store_seterr(st, "",
		                    "%s: outbox row %lld changed meanwhile (a "
		                    "dispatcher claimed it?): try again",
		                    what, (long long)r->id);
		return INBOX_ERR_BUSY;
	}
	return rc;
}

static int refuse(inbox_store *st, const inbox_admin_outbox_row *r,
                  const char *what, const char *why)
{
	inbox__store_seterr(st, "", "%s: outbox row %lld is %s: %s", what,
	                    (long long)r->id, r->state, why);
	return INBOX_ERR_INVALID;
}

int inbox_admin_outbox_retry(inbox_store *st, int64_t id, const char *consumer,
                             int flags, inbox_outbox_state *from,
                             inbox_outbox_state *to)
{
	if (!st)
		return INBOX_ERR_INVALID;
	if (st->in_txn)
		return inbox__admin_invalid(
		    st, "outbox retry: a transaction is open on the store");
	inbox_admin_outbox_row *r = NULL;
	int rc = inbox_admin_outbox_get(st, id, consumer, &r);
	if (rc != INBOX_OK)
		return rc;
	inbox_outbox_state was = state_parse(r->state), now = was;
	if (was == INBOX_OUTBOX_IN_FLIGHT)
		rc = refuse(st, r, "retry",
		            "a dispatcher holds it (its lease expires on its "
		            "own and it is taken over)");
	else if (was == INBOX_OUTBOX_DONE)
		rc = refuse(st, r, "retry", "the effect was performed");
	if (rc == INBOX_OK && was == INBOX_OUTBOX_DEAD) {
		int refused = r->last_status >= 400 && r->last_status < 500;
		now = r->idempotent || refused ||
		              (flags & INBOX_ADMIN_RETRY_NOT_PERFORMED)
		          ? INBOX_OUTBOX_FAILED
		          : INBOX_OUTBOX_UNKNOWN;
	}
	if (rc == INBOX_OK)
		rc = guarded(st, r,
		             "UPDATE {outbox} SET state = $4, attempts = 0,"
		             " next_attempt_at = {nowts}, lease_until = NULL,"
		             " updated_at = {nowts} WHERE id = {i:1} AND"
		             " state = $2 AND fence = {i:3}",
		             inbox_outbox_state_name(now), "retry");
	if (rc == INBOX_OK && was == INBOX_OUTBOX_DEAD)
		rc = resolve_dead_letters(st, id);
	if (rc == INBOX_OK) {
		inbox__log(INBOX_LOG_INFO, r->consumer,
		           "\"event\":\"outbox_retried\",\"outbox_id\":%lld,"
		           "\"step\":\"%s\",\"from\":\"%s\",\"to\":\"%s\"",
		           (long long)id, inbox__log_escape(r->step),
		           inbox_outbox_state_name(was),
		           inbox_outbox_state_name(now));
		if (from)
			*from = was;
		if (to)
			*to = now;
	}
	inbox_admin_outbox_row_free(r);
	return rc;
}

int inbox_admin_outbox_drop(inbox_store *st, int64_t id, const char *consumer,
                            inbox_outbox_state *was_out)
{
	if (!st)
		return INBOX_ERR_INVALID;
	if (st->in_txn)
		return inbox__admin_invalid(
		    st, "outbox drop: a transaction is open on the store");
	inbox_admin_outbox_row *r = NULL;
	int rc = inbox_admin_outbox_get(st, id, consumer, &r);
	if (rc != INBOX_OK)
		return rc;
	inbox_outbox_state was = state_parse(r->state);
	if (was == INBOX_OUTBOX_IN_FLIGHT)
		rc = refuse(st, r, "drop", "a dispatcher holds it");
	else if (was == INBOX_OUTBOX_DONE)
		rc = refuse(st, r, "drop",
		            "it is kept for the retention window (`inbox "
		            "purge` removes it after)");
	if (rc == INBOX_OK)
		rc = guarded(st, r,
		             "DELETE FROM {outbox} WHERE id = {i:1} AND"
		             " state = $2 AND fence = {i:3}",
		             NULL, "drop");
	if (rc == INBOX_OK)
		rc = resolve_dead_letters(st, id);
	if (rc == INBOX_OK) {
		inbox__log(INBOX_LOG_WARN, r->consumer,
		           "\"event\":\"outbox_dropped\",\"outbox_id\":%lld,"
		           "\"step\":\"%s\",\"key\":\"%s\",\"state\":\"%s\","
		           "\"idempotency_key\":\"%s\"",
		           (long long)id, inbox__log_escape(r->step),
		           inbox__log_escape(r->key),
		           inbox_outbox_state_name(was),
		           inbox__log_escape(r->idempotency_key));
		if (was_out)
			*was_out = was;
	}
	inbox_admin_outbox_row_free(r);
	return rc;
}

/* ---- purge --------------------------------------------------------------- */

static int first_nums(int ncols, const char *const *v, void *payload)
{
	int64_t *out = payload;
	for (int i = 0; i < ncols && i < 2; i++)
		out[i] = inbox__admin_num(v[i]);
	return 1;
}

int inbox_admin_outbox_purge(inbox_store *st, const char *consumer,
                             int64_t older_than_seconds, int batch_limit,
                             int dry_run, int64_t *deleted)
{
	if (!st || !deleted)
		return INBOX_ERR_INVALID;
	*deleted = 0;
	if (!consumer)
		return inbox__admin_invalid(
		    st, "outbox purge: a consumer is required");
	int64_t reg = 0;
	int rc = inbox__stored_retention(st, consumer, &reg);
	if (rc != INBOX_OK)
		return rc;
	int64_t w = older_than_seconds > 0 ? older_than_seconds : reg;
	if (w <= 0) {
		inbox__store_seterr(st, "",
		                    "outbox purge: consumer \"%s\" has no "
		                    "registered retention window",
		                    consumer);
		return INBOX_ERR_INVALID;
	}
	if (w < reg) {
		inbox__store_seterr(st, "",
		                    "outbox purge: a retention of %llds is "
		                    "shorter than the %llds inbox window "
		                    "consumer \"%s\" registered (a done row "
		                    "stops a replayed message from declaring "
		                    "its effect twice)",
		                    (long long)w, (long long)reg, consumer);
		return INBOX_ERR_INVALID;
	}
	if (w > INBOX__ADMIN_MAX_WINDOW_S)
		w = INBOX__ADMIN_MAX_WINDOW_S;
	if (!dry_run)
		return inbox_outbox_purge(st, consumer, w,
		                          batch_limit > 0 ? batch_limit : 1000,
		                          deleted);
	char win[24];
	snprintf(win, sizeof(win), "%lld", (long long)w);
	const char *p[2] = {consumer, win};
	int64_t got[2] = {0, 0};
	inbox__buf b = INBOX__BUF_INIT;
	rc = inbox__admin_sql(&b, st,
	                      "SELECT count(*) FROM {outbox} WHERE consumer ="
	                      " $1 AND state = 'done' AND done_at <"
	                      " {cutoff:2}");
	if (rc == INBOX_OK)
		rc = inbox_store_query(st, b.data, 2, p, first_nums, got);
	inbox__buf_free(&b);
	*deleted = got[0];
	return rc;
}
