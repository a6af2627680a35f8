/*
 * The outbox dispatcher: claim due rows, decide what each needs, record
 * what came of it. The calls themselves are made by engine.c.
 *
 *   claim     one short transaction: the rows become in_flight with
 *             attempts + 1, a lease and a new fencing token. That commit
 *             is the recorded intent; no transaction is open during a call.
 *   decide    per row, from the state before the claim:
 *               pending, failed          -> perform
 *               unknown, expired lease   -> idempotent provider: perform
 *                                           again with the same key;
 *                                           otherwise reconcile first
 *               attempts > max           -> no call: dead (after a
 *                                           reconcile, for non-idempotent)
 *   finish    outcomes are committed in groups — one transaction for the
 *             outcomes in hand — each row accepted only with its claim's
 *             fence: done, failed or unknown (due again after a backoff),
 *             or dead with a dead letter in the same transaction. A row
 *             that a newer claim owns is refused alone (fenced); the
 *             others of the group are recorded.
 *
 * A row is started only while its lease can still cover its worst case (a
 * reconcile query and a call, each bounded by the total timeout); a row
 * that could no longer make it (a slow store, a wait for its provider, a
 * stop request) is released unperformed, without counting an attempt.
 */
#include <inbox/outbox.h>

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "core/internal.h"
#include "outbox/dispatcher.h"
#include "outbox/outbox.h"

#define DEFAULT_LEASE_MS 60000
#define FINISH_TRIES     4
#define MAX_CONCURRENCY  10000

double inbox__dispatch_now_ms(void)
{
	return inbox__mono_seconds() * 1000.0;
}

/* ---- lists ------------------------------------------------------------- */

void inbox__jlist_push(inbox__jlist *l, inbox__job *j)
{
	j->next = NULL;
	j->prev = l->tail;
	if (l->tail)
		l->tail->next = j;
	else
		l->head = j;
	l->tail = j;
	l->n++;
}

void inbox__jlist_push_front(inbox__jlist *l, inbox__job *j)
{
	j->prev = NULL;
	j->next = l->head;
	if (l->head)
		l->head->prev = j;
	else
		l->tail = j;
	l->head = j;
	l->n++;
}

void inbox__jlist_remove(inbox__jlist *l, inbox__job *j)
{
	if (j->prev)
		j->prev->next = j->next;
	else
		l->head = j->next;
	if (j->next)
		j->next->prev = j->prev;
	else
		l->tail = j->prev;
	j->next = j->prev = NULL;
	l->n--;
}

/* ---- options ------------------------------------------------------------ */

static int check_options(inbox_dispatcher *d, const inbox_dispatcher_options *o,
                         char *err, size_t errlen)
{
	if (o->batch < 1 || o->batch > 1000 || o->max_attempts < 1 ||
	    o->connect_timeout_ms < 1 || o->timeout_ms < 1 ||
	    o->backoff_ms < 0 || o->max_backoff_ms < o->backoff_ms ||
	    o->lease_ms < 0 || o->poll_ms < 1 || o->concurrency < 1 ||
	    o->concurrency > MAX_CONCURRENCY) {
		snprintf(err, errlen,
		         "batch (1-1000), concurrency (1-%d), max_attempts, "
		         "timeouts and poll must be positive; backoff <= "
		         "max_backoff",
		         MAX_CONCURRENCY);
		return INBOX_ERR_INVALID;
	}
	/* A row may need a reconcile query and a call, each bounded by the
	 * total timeout. */
	d->row_budget_ms = 2 * o->timeout_ms + INBOX__ROW_MARGIN_MS;
	d->lease_ms = o->lease_ms;
	if (!d->lease_ms) {
		d->lease_ms = DEFAULT_LEASE_MS;
		if (d->lease_ms < d->row_budget_ms + INBOX__LEASE_MARGIN_MS)
			d->lease_ms = d->row_budget_ms + INBOX__LEASE_MARGIN_MS;
	}
	if (d->lease_ms < d->row_budget_ms + INBOX__LEASE_MARGIN_MS) {
		snprintf(
		    err, errlen,
		    "lease (%lld ms) must cover a reconcile and a call: at "
		    "least 2 x timeout + %d ms = %lld ms",
		    (long long)d->lease_ms,
		    INBOX__ROW_MARGIN_MS + INBOX__LEASE_MARGIN_MS,
		    (long long)(d->row_budget_ms + INBOX__LEASE_MARGIN_MS));
		return INBOX_ERR_INVALID;
	}
	/* Rows one call slot can take in turn within a lease: one at a time
	 * the batch must fit; with more slots, that many times more. */
	int64_t fit = (d->lease_ms - INBOX__LEASE_MARGIN_MS) / d->row_budget_ms;
	d->fit = fit < 1000 ? (int)fit : 1000;
	int64_t most = fit * o->concurrency;
	d->batch = o->batch < most ? o->batch : (int)most;
	return INBOX_OK;
}

/* The caller's options, as much of them as its version has. */
static void copy_options(inbox_dispatcher_options *dst,
                         const inbox_dispatcher_options *src)
{
	inbox_dispatcher_options def = INBOX_DISPATCHER_OPTIONS_INIT;
	*dst = def;
	memcpy(dst, src,
	       inbox__vsize(INBOX__V_DISPATCHER_OPTIONS, src->version));
}

int inbox_dispatcher_open(inbox_dispatcher **out, inbox_store *st,
                          const inbox_dispatcher_options *o, char *err,
                          size_t errlen)
{
	char dummy[8];
	if (!err) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	if (errlen)
		err[0] = '\0';
	if (!out)
		return INBOX_ERR_INVALID;
	*out = NULL;
	if (!st || !o) {
		snprintf(err, errlen, "store and options are required");
		return INBOX_ERR_INVALID;
	}
	if (inbox__vcheck(INBOX__V_DISPATCHER_OPTIONS, o->version, err,
	                  errlen) < 0)
		return INBOX_ERR_INVALID;
	if (!inbox__outbox_supported(st)) {
		snprintf(err, errlen, "this store backend has no outbox");
		return INBOX_ERR_STATE;
	}
	inbox_dispatcher *d = calloc(1, sizeof(*d));
	if (!d)
		return INBOX_ERR_NOMEM;
	copy_options(&d->o, o);
	int rc = check_options(d, &d->o, err, errlen);
	if (rc < 0) {
		free(d);
		return rc;
	}
	d->st = st;
	d->consumer = o->consumer ? strdup(o->consumer) : NULL;
	d->o.consumer = d->consumer;
	d->rng = (unsigned)getpid() ^ (unsigned)inbox__now_ms();
	if (!d->o.providers)
		inbox_providers_open(&d->own_reg, NULL);
	d->reg = d->o.providers ? d->o.providers : d->own_reg;
	if ((o->consumer && !d->consumer) || !d->reg ||
	    inbox__engine_open(d) < 0) {
		snprintf(err, errlen, "out of memory (or libcurl failed)");
		inbox_dispatcher_close(d);
		return INBOX_ERR_NOMEM;
	}
	*out = d;
	return INBOX_OK;
}

void inbox__job_free(inbox_dispatcher *d, inbox__job *j)
{
	if (!j)
		return;
	if (j->x) {
		if (d->npool < d->cappool)
			d->pool[d->npool++] = j->x;
		else {
			inbox__xfer_free(j->x);
			free(j->x);
		}
	}
	inbox__buf_free(&j->resp);
	free(j);
}

void inbox_dispatcher_close(inbox_dispatcher *d)
{
	if (!d)
		return;
	inbox__engine_close(d);
	inbox__jlist *ls[] = {&d->ready, &d->active, &d->done};
	for (size_t i = 0; i < sizeof(ls) / sizeof(*ls); i++)
		while (ls[i]->head) {
			inbox__job *j = ls[i]->head;
			inbox__jlist_remove(ls[i], j);
			inbox__job_free(d, j);
		}
	for (int i = 0; i < d->npool; i++) {
		inbox__xfer_free(d->pool[i]);
		free(d->pool[i]);
	}
	free(d->pool);
	free(d->provs);
	for (int i = 0; i < INBOX__URL_CACHE; i++)
		free(d->url_cache[i]);
	inbox_providers_close(d->own_reg);
	free(d->consumer);
	free(d);
}

int inbox_dispatcher_stats(const inbox_dispatcher *d, inbox_outbox_stats *out)
{
	if (!d || !out)
		return INBOX_ERR_INVALID;
	/* the message goes on the handle, as for every call on it */
	inbox_dispatcher *md = (inbox_dispatcher *)d;
	if (inbox__vcheck(INBOX__V_OUTBOX_STATS, out->version, md->errmsg,
	                  sizeof(md->errmsg)) < 0)
		return INBOX_ERR_INVALID;
	inbox__vfill(INBOX__V_OUTBOX_STATS, out, &d->stats);
	return INBOX_OK;
}

const char *inbox_dispatcher_errmsg(const inbox_dispatcher *d)
{
	return d ? d->errmsg : "no dispatcher";
}

/* ---- claiming ----------------------------------------------------------- */

/* One allocation: the job, then every string and the body. */
static inbox__job *copy_item(const inbox_outbox_item *src)
{
	const char *const strs[] = {
	    src->consumer,   src->key,          src->step, src->idempotency_key,
	    src->kind,       src->method,       src->url,  src->headers,
	    src->key_header, src->reconcile_url};
	enum { NSTR = sizeof(strs) / sizeof(*strs) };
	size_t need = sizeof(inbox__job) + src->body_len + 1;
	for (size_t i = 0; i < NSTR; i++)
		need += strs[i] ? strlen(strs[i]) + 1 : 0;
	inbox__job *j = calloc(1, need);
	if (!j)
		return NULL;
	j->it = *src;
	char *p = (char *)(j + 1);
	const char **dst[NSTR] = {&j->it.consumer,   &j->it.key,
	                          &j->it.step,       &j->it.idempotency_key,
	                          &j->it.kind,       &j->it.method,
	                          &j->it.url,        &j->it.headers,
	                          &j->it.key_header, &j->it.reconcile_url};
	for (size_t i = 0; i < NSTR; i++) {
		if (!strs[i]) {
			*dst[i] = NULL;
			continue;
		}
		size_t n = strlen(strs[i]) + 1;
		memcpy(p, strs[i], n);
		*dst[i] = p;
		p += n;
	}
	if (src->body_len)
		memcpy(p, src->body, src->body_len);
	p[src->body_len] = '\0';
	j->it.body = p;
	/* Columns that cannot be NULL in the table. */
	if (!j->it.consumer || !j->it.key || !j->it.step ||
	    !j->it.idempotency_key || !j->it.kind || !j->it.method ||
	    !j->it.url) {
		free(j);
		return NULL;
	}
	return j;
}

typedef struct claim_ctx {
	inbox__jlist got;
	int limit;
} claim_ctx;

static int on_claimed(const inbox_outbox_item *row, void *payload)
{
	claim_ctx *c = payload;
	if (c->got.n >= c->limit)
		return 0; /* cannot happen: the limit is the claim's */
	inbox__job *j = copy_item(row);
	if (!j)
		return -1;
	inbox__jlist_push(&c->got, j);
	return 0;
}

/* This dispatcher's entry for the provider of url; -1 when none. */
static int dprov_lookup(inbox_dispatcher *d, const char *url, double now)
{
	inbox__prov *p = url ? inbox__provider_get(d->reg, url) : NULL;
	if (!p)
		return -1;
	for (int i = 0; i < d->nprovs; i++)
		if (d->provs[i].p == p) {
			d->provs[i].seen_ms = now;
			return i;
		}
	if (d->nprovs == d->capprovs) {
		int cap = d->capprovs ? 2 * d->capprovs : 8;
		inbox__dprov *n = realloc(d->provs, (size_t)cap * sizeof(*n));
		if (!n)
			return -1;
		d->provs = n;
		d->capprovs = cap;
	}
	d->provs[d->nprovs] = (inbox__dprov){.p = p, .seen_ms = now};
	return d->nprovs++;
}

static int dprov_of(inbox_dispatcher *d, const char *url, double now)
{
	if (!url)
		return -1;
	for (int i = 0; i < INBOX__URL_CACHE; i++)
		if (d->url_cache[i] && strcmp(d->url_cache[i], url) == 0) {
			int dp = d->url_dp[i];
			if (dp >= 0)
				d->provs[dp].seen_ms = now;
			return dp;
		}
	int dp = dprov_lookup(d, url, now);
	char *copy = strdup(url);
	if (copy) {
		int i = d->url_next;
		d->url_next = (i + 1) % INBOX__URL_CACHE;
		free(d->url_cache[i]);
		d->url_cache[i] = copy;
		d->url_dp[i] = dp;
	}
	return dp;
}

static int32_t max_attempts(const inbox_dispatcher *d,
                            const inbox_outbox_item *it)
{
	return it->max_attempts > 0 ? it->max_attempts : d->o.max_attempts;
}

static void set_dead(inbox_dispatcher *d, inbox__job *j,
                     const inbox_effect_result *res, const char *fmt,
                     const char *detail);

/* What a freshly claimed row needs first, or its outcome. */
static void decide(inbox_dispatcher *d, inbox__job *j)
{
	const inbox_outbox_item *it = &j->it;
	int32_t max = max_attempts(d, it);
	int unknown = it->state == INBOX_OUTBOX_UNKNOWN ||
	              it->state == INBOX_OUTBOX_IN_FLIGHT;
	if (it->state == INBOX_OUTBOX_IN_FLIGHT) {
		d->stats.lease_expired++;
		d->stats.unknown_outcomes++;
	}
	if (unknown && !it->idempotent) {
		if (!d->o.reconcile && !it->reconcile_url)
			set_dead(d, j, NULL, "%s",
			         "outcome unknown, the provider has no "
			         "idempotency and no reconcile is configured: "
			         "not re-sent (check with the provider)");
		else
			j->need = INBOX__NEED_RECONCILE;
		return;
	}
	if (it->attempts > max)
		set_dead(d, j, NULL, "max attempts reached%s",
		         unknown ? "; the last outcome is unknown" : "");
	else
		j->need = INBOX__NEED_CALL;
}

/* err[len]: what went wrong, with the store's message. */
static void store_err(inbox_store *st, int rc, const char *what, char *err,
                      size_t len)
{
	snprintf(err, len, "%s: %s%s%s", what, inbox_strerror(rc),
	         st->errmsg[0] ? ": " : "", st->errmsg);
}

int inbox__store_claim(inbox_dispatcher *d, int limit, inbox__jlist *got,
                       double *t0, char *err, size_t errlen)
{
	inbox_store *st = d->st;
	claim_ctx c = {.limit = limit};
	*t0 = inbox__dispatch_now_ms();
	inbox__store_clearerr(st);
	int rc = st->vt->begin(st);
	if (rc == INBOX_OK)
		rc = st->vt->outbox_claim(st, d->consumer, limit, d->lease_ms,
		                          on_claimed, &c);
	if (rc == INBOX_OK)
		rc = st->vt->commit(st);
	if (rc < 0) {
		if (st->in_txn)
			st->vt->rollback(st);
		while (c.got.head) { /* nothing was claimed */
			inbox__job *j = c.got.head;
			inbox__jlist_remove(&c.got, j);
			free(j);
		}
		store_err(st, rc, "outbox: claiming rows", err, errlen);
		return rc;
	}
	*got = c.got;
	return INBOX_OK;
}

void inbox__dispatch_adopt(inbox_dispatcher *d, inbox__jlist *got, double t0)
{
	d->stats.claimed += (uint64_t)got->n;
	while (got->head) {
		inbox__job *j = got->head;
		inbox__jlist_remove(got, j);
		j->t0 = t0;
		j->dp = dprov_of(d, j->it.url, t0);
		j->rdp = j->it.reconcile_url
		             ? dprov_of(d, j->it.reconcile_url, t0)
		             : -1;
		decide(d, j);
		if (j->need == INBOX__NEED_OUTCOME) {
			if (!d->done.n)
				d->done_since = t0;
			inbox__jlist_push(&d->done, j);
		} else {
			inbox__jlist_push(&d->ready, j);
		}
	}
}

int inbox__dispatch_claim(inbox_dispatcher *d, int limit, int *got)
{
	inbox__jlist l = {0};
	double t0;
	*got = 0;
	int rc =
	    inbox__store_claim(d, limit, &l, &t0, d->errmsg, sizeof(d->errmsg));
	if (rc < 0)
		return rc;
	*got = l.n;
	inbox__dispatch_adopt(d, &l, t0);
	return INBOX_OK;
}

/* ---- outcomes ------------------------------------------------------------ */

static int64_t backoff_ms(inbox_dispatcher *d, int32_t attempts,
                          int64_t retry_after_ms)
{
	int64_t ms = d->o.backoff_ms;
	for (int32_t i = 1; i < attempts && ms < d->o.max_backoff_ms; i++)
		ms *= 2;
	if (ms > d->o.max_backoff_ms)
		ms = d->o.max_backoff_ms;
	/* +-20%, so rows that failed together do not return together. */
	double jt = 0.8 + 0.4 * ((double)(rand_r(&d->rng) % 1000) / 1000.0);
	ms = (int64_t)((double)ms * jt);
	if (retry_after_ms > ms)
		ms = retry_after_ms < d->o.max_backoff_ms ? retry_after_ms
		                                          : d->o.max_backoff_ms;
	return ms;
}

/* The job's outcome is decided: onto d->done. */
static void outcome(inbox_dispatcher *d, inbox__job *j,
                    inbox_outbox_state state, int64_t retry_in_ms,
                    const inbox_effect_result *res, const char *reason)
{
	j->need = INBOX__NEED_OUTCOME;
	j->state = state;
	j->retry_in_ms = retry_in_ms;
	j->has_res = res != NULL;
	if (res) {
		j->res = *res;
		size_t n = res->response_len < INBOX__OUTBOX_RESPONSE_MAX
		               ? res->response_len
		               : INBOX__OUTBOX_RESPONSE_MAX;
		inbox__buf_reset(&j->resp);
		if (n && inbox__buf_append(&j->resp, res->response, n) < 0)
			n = 0; /* no memory: the excerpt is left out */
		j->res.response = j->resp.data ? j->resp.data : "";
		j->res.response_len = n;
	}
	snprintf(j->reason, sizeof(j->reason), "%s", reason ? reason : "");
	if (!d->done.n)
		d->done_since = inbox__dispatch_now_ms();
}

static void set_dead(inbox_dispatcher *d, inbox__job *j,
                     const inbox_effect_result *res, const char *fmt,
                     const char *detail)
{
	char reason[640];
	snprintf(reason, sizeof(reason), "outbox step %s: ", j->it.step);
	size_t n = strlen(reason);
	snprintf(reason + n, sizeof(reason) - n, fmt, detail);
	outcome(d, j, INBOX_OUTBOX_DEAD, 0, res, reason);
}

void inbox__job_release(inbox_dispatcher *d, inbox__job *j, int64_t retry_in_ms,
                        const char *why)
{
	/* Given back as it was, without counting a try. */
	inbox_outbox_state back = j->it.state == INBOX_OUTBOX_IN_FLIGHT
	                              ? INBOX_OUTBOX_UNKNOWN
	                              : j->it.state;
	char reason[300];
	snprintf(reason, sizeof(reason), "released unperformed%s%s",
	         why && *why ? ": " : "", why ? why : "");
	outcome(d, j, back, retry_in_ms, NULL, reason);
	j->attempts_delta = -1;
	j->released = 1;
	d->stats.released++;
	inbox__jlist_push(&d->done, j);
}

void inbox__job_reconciled(inbox_dispatcher *d, inbox__job *j,
                           inbox_reconcile_verdict v, const char *why)
{
	const inbox_outbox_item *it = &j->it;
	int32_t max = max_attempts(d, it);
	j->reconciled = 1;
	if (v == INBOX_RECONCILE_FOUND) {
		d->stats.reconciled_found++;
		outcome(d, j, INBOX_OUTBOX_DONE, 0, NULL, why);
	} else if (v == INBOX_RECONCILE_UNKNOWN) {
		if (it->attempts >= max)
			set_dead(
			    d, j, NULL,
			    "max attempts reached, outcome still unknown: %s",
			    why);
		else
			outcome(d, j, INBOX_OUTBOX_UNKNOWN,
			        backoff_ms(d, it->attempts, 0), NULL, why);
	} else {
		d->stats.reconciled_not_found++;
		if (it->attempts > max)
			set_dead(d, j, NULL, "max attempts reached (%s)", why);
		else
			j->need = INBOX__NEED_CALL; /* not performed: send it
			                               now, with the same key */
	}
	if (j->need == INBOX__NEED_OUTCOME)
		inbox__jlist_push(&d->done, j);
	else
		inbox__jlist_push_front(&d->ready, j);
}

void inbox__job_called(inbox_dispatcher *d, inbox__job *j,
                       const inbox_effect_result *res)
{
	const inbox_outbox_item *it = &j->it;
	int32_t max = max_attempts(d, it);
	char reason[400];
	snprintf(reason, sizeof(reason), "%s",
	         res->error[0] ? res->error : "failed");
	switch (res->outcome) {
	case INBOX_EFFECT_DONE:
		outcome(d, j, INBOX_OUTBOX_DONE, 0, res, NULL);
		break;
	case INBOX_EFFECT_RETRY:
	case INBOX_EFFECT_UNKNOWN: {
		int unknown = res->outcome == INBOX_EFFECT_UNKNOWN;
		if (unknown)
			d->stats.unknown_outcomes++;
		/* A non-idempotent effect that may have happened is
		 * reconciled at the next claim even past max attempts (a
		 * read never hurts): a sent email ends done, not dead. */
		int reconcilable = unknown && !it->idempotent &&
		                   (d->o.reconcile || it->reconcile_url);
		if (it->attempts >= max && !reconcilable) {
			char why[500];
			snprintf(why, sizeof(why),
			         "max attempts (%d) reached%s: %s", (int)max,
			         unknown ? ", last outcome unknown" : "",
			         reason);
			set_dead(d, j, res, "%s", why);
			break;
		}
		d->stats.retries++;
		outcome(d, j,
		        unknown ? INBOX_OUTBOX_UNKNOWN : INBOX_OUTBOX_FAILED,
		        backoff_ms(d, it->attempts, res->retry_after_ms), res,
		        reason);
		break;
	}
	default:
		set_dead(d, j, res, "%s", reason);
		break;
	}
	inbox__jlist_push(&d->done, j);
}

/* ---- committing ---------------------------------------------------------- */

/* Context of a dead letter, as a JSON object (malloc'ed) or NULL. */
static char *dl_context(const inbox_outbox_item *it,
                        const inbox_effect_result *res, const char *reason)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "outbox_id", json_integer(it->id));
	json_object_set_new(o, "step", json_string(it->step));
	json_object_set_new(o, "idempotency_key",
	                    json_string(it->idempotency_key));
	json_object_set_new(o, "kind", json_string(it->kind));
	json_object_set_new(o, "method", json_string(it->method));
	/* Its user info and secret parameters hidden, as in every other
	 * output: the letter is shown by `inbox dlq show`. */
	char *url = inbox_redact_url(it->url);
	json_object_set_new(o, "url", json_string(url ? url : "(hidden)"));
	free(url);
	json_object_set_new(o, "idempotent", json_boolean(it->idempotent));
	json_object_set_new(o, "attempts", json_integer(it->attempts));
	json_object_set_new(o, "reconciliations",
	                    json_integer(it->reconciliations));
	json_object_set_new(o, "reason", json_string(reason));
	if (res && res->status)
		json_object_set_new(o, "last_status",
		                    json_integer(res->status));
	else if (it->last_status)
		json_object_set_new(o, "last_status",
		                    json_integer(it->last_status));
	if (res && res->response_len) {
		size_t n = res->response_len < 1024 ? res->response_len : 1024;
		json_t *s = json_stringn_nocheck(res->response, n);
		/* A binary answer is left out rather than mangled. */
		if (s && inbox__utf8_valid(res->response, n))
			json_object_set_new(o, "response", s);
		else
			json_decref(s);
	}
	char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return text;
}

static int write_dead_letter(inbox_dispatcher *d, const inbox__job *j)
{
	const inbox_outbox_item *it = &j->it;
	const inbox_effect_result *res = j->has_res ? &j->res : NULL;
	char pos[48];
	snprintf(pos, sizeof(pos), "outbox:%lld", (long long)it->id);
	char *ctx = dl_context(it, res, j->reason);
	inbox_dead_letter dl = {
	    .consumer = it->consumer,
	    .key = it->key,
	    .message_id = NULL,
	    .payload = it->body,
	    .payload_len = it->body_len,
	    .headers = ctx,
	    .position = pos,
	    .attempts = it->attempts,
	    .reason = j->reason,
	};
	int64_t id;
	int rc = d->st->vt->dead_letter(d->st, &dl, &id);
	free(ctx);
	return rc;
}

/* The row's outcome under its claim's fence; a dead row gets its dead
 * letter in the same transaction. In the open transaction. */
static int finish_row(inbox_dispatcher *d, inbox__job *j)
{
	const inbox_effect_result *res = j->has_res ? &j->res : NULL;
	inbox_outbox_finish f = {
	    .id = j->it.id,
	    .fence = j->it.fence,
	    .state = j->state,
	    .retry_in_ms = j->retry_in_ms,
	    .last_status = res ? res->status : 0,
	    .last_error = j->state == INBOX_OUTBOX_DONE ? NULL : j->reason,
	    .reconciled = j->reconciled,
	    .attempts_delta = j->attempts_delta,
	};
	if (res && j->state == INBOX_OUTBOX_DONE) {
		f.response = res->response ? res->response : "";
		f.response_len = res->response_len;
	}
	j->rows = 0;
	int rc = d->st->vt->outbox_finish(d->st, &f, &j->rows);
	if (rc == INBOX_OK && j->rows == 1 && j->state == INBOX_OUTBOX_DEAD)
		rc = write_dead_letter(d, j);
	return rc;
}

/* One transaction for jobs g[0..n-1]. Transient store errors are tried
 * again: the calls already happened, and losing their outcomes would cost
 * a reconcile or a repeat after the lease. */
static int commit_group(inbox_dispatcher *d, inbox__job **g, int n)
{
	inbox_store *st = d->st;
	int rc = INBOX_OK;
	for (int t = 0; t < FINISH_TRIES; t++) {
		inbox__store_clearerr(st);
		rc = st->vt->begin(st);
		for (int i = 0; i < n && rc == INBOX_OK; i++)
			rc = finish_row(d, g[i]);
		if (rc == INBOX_OK)
			rc = st->vt->commit(st);
		if (rc < 0 && st->in_txn)
			st->vt->rollback(st);
		if (rc != INBOX_ERR_TRANSIENT)
			break;
		struct timespec ts = {0, (long)(20 << t) * 1000000L};
		nanosleep(&ts, NULL);
	}
	return rc;
}

static void notify(inbox_dispatcher *d, const inbox__job *j,
                   inbox_outbox_state state, const char *reason)
{
	if (d->o.on_event)
		d->o.on_event(&j->it, j->has_res ? &j->res : NULL, state,
		              reason, d->o.event_payload);
}

/* After the commit: counters, the event, and the job is freed. */
static void recorded(inbox_dispatcher *d, inbox__job *j)
{
	if (j->rows == 0) {
		/* The lease expired and another claim owns the row now. */
		d->stats.fenced++;
		notify(d, j, INBOX_OUTBOX_IN_FLIGHT,
		       "fenced: the lease expired and the row was claimed "
		       "again; this outcome was not recorded");
	} else {
		if (j->state == INBOX_OUTBOX_DONE)
			d->stats.done++;
		else if (j->state == INBOX_OUTBOX_DEAD)
			d->stats.dead_letters++;
		notify(d, j, j->state,
		       j->state == INBOX_OUTBOX_DONE && j->has_res ? NULL
		                                                   : j->reason);
	}
	inbox__job_free(d, j);
}

int inbox__store_commit(inbox_dispatcher *d, inbox__job **g, int n, char *err,
                        size_t errlen)
{
	for (int i = 0; i < n; i++)
		g[i]->commit_rc = INBOX_OK;
	int rc = commit_group(d, g, n);
	if (rc < 0 && rc != INBOX_ERR_TRANSIENT && rc != INBOX_ERR_CONNECT &&
	    n > 1) {
		/* One row may be what fails (its dead letter, say): record the
		 * others each on its own. */
		int first = INBOX_OK;
		for (int i = 0; i < n; i++) {
			int r = commit_group(d, &g[i], 1);
			g[i]->commit_rc = r;
			if (r < 0 && first == INBOX_OK) {
				first = r;
				store_err(d->st, r,
				          "outbox: recording outcomes", err,
				          errlen);
			}
		}
		return first;
	}
	if (rc < 0) {
		for (int i = 0; i < n; i++)
			g[i]->commit_rc = rc;
		store_err(d->st, rc, "outbox: recording outcomes", err, errlen);
	}
	return rc;
}

static void free_list(inbox__jlist *l)
{
	while (l->head) {
		inbox__job *j = l->head;
		inbox__jlist_remove(l, j);
		free(j);
	}
}

int inbox__store_commit_claim(inbox_dispatcher *d, inbox__job **g, int n,
                              int limit, inbox__jlist *got, double *t0)
{
	inbox_store *st = d->st;
	int rc = INBOX_OK;
	for (int t = 0; t < FINISH_TRIES; t++) {
		claim_ctx c = {.limit = limit};
		*t0 = inbox__dispatch_now_ms();
		inbox__store_clearerr(st);
		rc = st->vt->begin(st);
		for (int i = 0; i < n && rc == INBOX_OK; i++)
			rc = finish_row(d, g[i]);
		if (rc == INBOX_OK)
			rc = st->vt->outbox_claim(st, d->consumer, limit,
			                          d->lease_ms, on_claimed, &c);
		if (rc == INBOX_OK)
			rc = st->vt->commit(st);
		if (rc == INBOX_OK) {
			*got = c.got;
			for (int i = 0; i < n; i++)
				g[i]->commit_rc = INBOX_OK;
			return INBOX_OK;
		}
		if (st->in_txn)
			st->vt->rollback(st);
		free_list(&c.got);
		if (rc != INBOX_ERR_TRANSIENT)
			break;
		struct timespec ts = {0, (long)(20 << t) * 1000000L};
		nanosleep(&ts, NULL);
	}
	return rc;
}

void inbox__dispatch_recorded(inbox_dispatcher *d, inbox__job **g, int n)
{
	int kept = 0;
	/* Those not recorded go back, in their order, for the next try. */
	for (int i = n - 1; i >= 0; i--) {
		if (g[i]->commit_rc < 0) {
			inbox__jlist_push_front(&d->done, g[i]);
			kept = 1;
		}
	}
	for (int i = 0; i < n; i++)
		if (g[i]->commit_rc == INBOX_OK)
			recorded(d, g[i]);
	if (kept)
		d->done_since = inbox__dispatch_now_ms();
}

int inbox__dispatch_commit(inbox_dispatcher *d, int max)
{
	inbox__job *g[INBOX__GROUP_MAX];
	int n = 0;
	if (max > INBOX__GROUP_MAX)
		max = INBOX__GROUP_MAX;
	while (n < max && d->done.head) {
		g[n] = d->done.head;
		inbox__jlist_remove(&d->done, g[n]);
		n++;
	}
	if (!n)
		return INBOX_OK;
	int rc = inbox__store_commit(d, g, n, d->errmsg, sizeof(d->errmsg));
	inbox__dispatch_recorded(d, g, n);
	return rc;
}
