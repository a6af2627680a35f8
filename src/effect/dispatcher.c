/*
 * The outbox dispatcher: claim due rows, perform or reconcile each, commit
 * each outcome.
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
 *   finish    one transaction per row, accepted only with the claim's
 *             fence: done, failed or unknown (due again after a backoff),
 *             or dead with a dead letter in the same transaction.
 *
 * The lease covers the batch: the batch is shrunk so that every row's
 * worst case (reconcile + call) fits, and a row that could no longer make
 * it (a slow store, a stop request) is released unperformed.
 */
#include <inbox/outbox.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/json.h"
#include "core/outbox.h"
#include "effect/effect.h"

/* Time kept for the store work of a row and for the clocks' disagreement. */
#define ROW_MARGIN_MS    500
#define LEASE_MARGIN_MS  1000
#define DEFAULT_LEASE_MS 60000
#define FINISH_TRIES     4

typedef struct claimed {
	inbox_outbox_item it; /* strings point into the same allocation */
} claimed;

struct inbox_dispatcher {
	inbox_store *st;
	inbox_dispatcher_options o;
	char *consumer;
	int batch;
	int64_t lease_ms;
	int64_t row_budget_ms;
	inbox__http http;
	inbox_outbox_stats stats;
	char errmsg[512];
	claimed **items;
	int nitems;
	unsigned rng;
	volatile sig_atomic_t *stop; /* inbox_dispatcher_run's, or NULL */
};

/* ---- options ------------------------------------------------------- */

static int check_options(inbox_dispatcher *d, const inbox_dispatcher_options *o,
                         char *err, size_t errlen)
{
	if (o->batch < 1 || o->batch > 1000 || o->max_attempts < 1 ||
	    o->connect_timeout_ms < 1 || o->timeout_ms < 1 ||
	    o->backoff_ms < 0 || o->max_backoff_ms < o->backoff_ms ||
	    o->lease_ms < 0 || o->poll_ms < 1) {
		snprintf(err, errlen,
		         "batch (1-1000), max_attempts, timeouts and poll must "
		         "be positive; backoff <= max_backoff");
		return INBOX_ERR_INVALID;
	}
	/* A row may need a reconcile query and a call, each bounded by the
	 * total timeout. */
	d->row_budget_ms = 2 * o->timeout_ms + ROW_MARGIN_MS;
	d->lease_ms = o->lease_ms;
	if (!d->lease_ms) {
		d->lease_ms = DEFAULT_LEASE_MS;
		if (d->lease_ms < d->row_budget_ms + LEASE_MARGIN_MS)
			d->lease_ms = d->row_budget_ms + LEASE_MARGIN_MS;
	}
	if (d->lease_ms < d->row_budget_ms + LEASE_MARGIN_MS) {
		snprintf(
		    err, errlen,
		    "lease (%lld ms) must cover a reconcile and a call: at "
		    "least 2 x timeout + %d ms = %lld ms",
		    (long long)d->lease_ms, ROW_MARGIN_MS + LEASE_MARGIN_MS,
		    (long long)(d->row_budget_ms + LEASE_MARGIN_MS));
		return INBOX_ERR_INVALID;
	}
	int64_t fit = (d->lease_ms - LEASE_MARGIN_MS) / d->row_budget_ms;
	d->batch = o->batch < fit ? o->batch : (int)fit;
	return INBOX_OK;
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
	if (!st || !o || o->version < 1) {
		snprintf(err, errlen, "store and options are required");
		return INBOX_ERR_INVALID;
	}
	if (!inbox__outbox_supported(st)) {
		snprintf(err, errlen, "this store backend has no outbox");
		return INBOX_ERR_STATE;
	}
	inbox_dispatcher *d = calloc(1, sizeof(*d));
	if (!d)
		return INBOX_ERR_NOMEM;
	int rc = check_options(d, o, err, errlen);
	if (rc < 0) {
		free(d);
		return rc;
	}
	d->st = st;
	d->o = *o;
	d->consumer = o->consumer ? strdup(o->consumer) : NULL;
	d->o.consumer = d->consumer;
	d->items = calloc((size_t)d->batch, sizeof(*d->items));
	d->rng = (unsigned)getpid() ^ (unsigned)inbox__now_ms();
	if ((o->consumer && !d->consumer) || !d->items ||
	    inbox__http_init(&d->http, o->connect_timeout_ms, o->timeout_ms) <
	        0) {
		snprintf(err, errlen, "out of memory (or libcurl failed)");
		inbox_dispatcher_close(d);
		return INBOX_ERR_NOMEM;
	}
	*out = d;
	return INBOX_OK;
}

static void drop_items(inbox_dispatcher *d)
{
	for (int i = 0; i < d->nitems; i++)
		free(d->items[i]);
	d->nitems = 0;
}

void inbox_dispatcher_close(inbox_dispatcher *d)
{
	if (!d)
		return;
	drop_items(d);
	free(d->items);
	inbox__http_free(&d->http);
	free(d->consumer);
	free(d);
}

void inbox_dispatcher_stats(const inbox_dispatcher *d, inbox_outbox_stats *out)
{
	if (d && out)
		*out = d->stats;
}

const char *inbox_dispatcher_errmsg(const inbox_dispatcher *d)
{
	return d ? d->errmsg : "no dispatcher";
}

static void set_err(inbox_dispatcher *d, int rc, const char *what)
{
	snprintf(d->errmsg, sizeof(d->errmsg), "%s: %s%s%s", what,
	         inbox_strerror(rc), d->st->errmsg[0] ? ": " : "",
	         d->st->errmsg);
}

/* ---- claiming ------------------------------------------------------ */

/* One allocation: the struct, then every string and the body. */
static claimed *copy_item(const inbox_outbox_item *src)
{
	const char *const strs[] = {
	    src->consumer,   src->key,          src->step, src->idempotency_key,
	    src->kind,       src->method,       src->url,  src->headers,
	    src->key_header, src->reconcile_url};
	enum { NSTR = sizeof(strs) / sizeof(*strs) };
	size_t need = sizeof(claimed) + src->body_len + 1;
	for (size_t i = 0; i < NSTR; i++)
		need += strs[i] ? strlen(strs[i]) + 1 : 0;
	claimed *c = malloc(need);
	if (!c)
		return NULL;
	c->it = *src;
	char *p = (char *)(c + 1);
	const char **dst[NSTR] = {&c->it.consumer,   &c->it.key,
	                          &c->it.step,       &c->it.idempotency_key,
	                          &c->it.kind,       &c->it.method,
	                          &c->it.url,        &c->it.headers,
	                          &c->it.key_header, &c->it.reconcile_url};
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
	c->it.body = p;
	/* Columns that cannot be NULL in the table. */
	if (!c->it.consumer || !c->it.key || !c->it.step ||
	    !c->it.idempotency_key || !c->it.kind || !c->it.method ||
	    !c->it.url) {
		free(c);
		return NULL;
	}
	return c;
}

static int on_claimed(const inbox_outbox_item *row, void *payload)
{
	inbox_dispatcher *d = payload;
	if (d->nitems >= d->batch)
		return 0; /* cannot happen: the limit is the batch */
	claimed *c = copy_item(row);
	if (!c)
		return -1;
	d->items[d->nitems++] = c;
	return 0;
}

static int claim(inbox_dispatcher *d)
{
	inbox_store *st = d->st;
	drop_items(d);
	inbox__store_clearerr(st);
	int rc = st->vt->begin(st);
	if (rc < 0)
		return rc;
	rc = st->vt->outbox_claim(st, d->consumer, d->batch, d->lease_ms,
	                          on_claimed, d);
	if (rc == INBOX_OK)
		rc = st->vt->commit(st);
	if (rc < 0) {
		if (st->in_txn)
			st->vt->rollback(st);
		drop_items(d); /* nothing was claimed */
	}
	return rc;
}

/* ---- finishing ----------------------------------------------------- */

static int64_t backoff_ms(inbox_dispatcher *d, int32_t attempts,
                          int64_t retry_after_ms)
{
	int64_t ms = d->o.backoff_ms;
	for (int32_t i = 1; i < attempts && ms < d->o.max_backoff_ms; i++)
		ms *= 2;
	if (ms > d->o.max_backoff_ms)
		ms = d->o.max_backoff_ms;
	/* +-20%, so rows that failed together do not return together. */
	double j = 0.8 + 0.4 * ((double)(rand_r(&d->rng) % 1000) / 1000.0);
	ms = (int64_t)((double)ms * j);
	if (retry_after_ms > ms)
		ms = retry_after_ms < d->o.max_backoff_ms ? retry_after_ms
		                                          : d->o.max_backoff_ms;
	return ms;
}

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
	json_object_set_new(o, "url", json_string(it->url));
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

static int write_dead_letter(inbox_dispatcher *d, const inbox_outbox_item *it,
                             const inbox_effect_result *res, const char *reason)
{
	char pos[48];
	snprintf(pos, sizeof(pos), "outbox:%lld", (long long)it->id);
	char *ctx = dl_context(it, res, reason);
	inbox_dead_letter dl = {
	    .consumer = it->consumer,
	    .key = it->key,
	    .message_id = NULL,
	    .payload = it->body,
	    .payload_len = it->body_len,
	    .headers = ctx,
	    .position = pos,
	    .attempts = it->attempts,
	    .reason = reason,
	};
	int64_t id;
	int rc = d->st->vt->dead_letter(d->st, &dl, &id);
	free(ctx);
	return rc;
}

static void notify(inbox_dispatcher *d, const inbox_outbox_item *it,
                   const inbox_effect_result *res, inbox_outbox_state state,
                   const char *reason)
{
	if (d->o.on_event)
		d->o.on_event(it, res, state, reason, d->o.event_payload);
}

/* Commit the row's outcome under the claim's fence; a dead row gets its
 * dead letter in the same transaction. Transient store errors are tried
 * again: the call already happened, and losing its outcome would cost a
 * reconcile or a repeat after the lease. */
static int finish(inbox_dispatcher *d, const inbox_outbox_item *it,
                  inbox_outbox_state state, int64_t retry_in_ms,
                  const inbox_effect_result *res, const char *reason,
                  int reconciled, int attempts_delta)
{
	inbox_store *st = d->st;
	inbox_outbox_finish f = {
	    .id = it->id,
	    .fence = it->fence,
	    .state = state,
	    .retry_in_ms = retry_in_ms,
	    .last_status = res ? res->status : 0,
	    .last_error = state == INBOX_OUTBOX_DONE ? NULL : reason,
	    .reconciled = reconciled,
	    .attempts_delta = attempts_delta,
	};
	if (res && state == INBOX_OUTBOX_DONE) {
		f.response = res->response ? res->response : "";
		f.response_len = res->response_len < INBOX__OUTBOX_RESPONSE_MAX
		                     ? res->response_len
		                     : INBOX__OUTBOX_RESPONSE_MAX;
	}
	int rc = INBOX_OK;
	int64_t rows = 0;
	for (int t = 0; t < FINISH_TRIES; t++) {
		inbox__store_clearerr(st);
		rows = 0;
		rc = st->vt->begin(st);
		if (rc == INBOX_OK)
			rc = st->vt->outbox_finish(st, &f, &rows);
		if (rc == INBOX_OK && rows == 1 && state == INBOX_OUTBOX_DEAD)
			rc = write_dead_letter(d, it, res, reason);
		if (rc == INBOX_OK)
			rc = st->vt->commit(st);
		if (rc < 0 && st->in_txn)
			st->vt->rollback(st);
		if (rc != INBOX_ERR_TRANSIENT)
			break;
		struct timespec ts = {0, (long)(20 << t) * 1000000L};
		nanosleep(&ts, NULL);
	}
	if (rc < 0) {
		set_err(d, rc, "outbox: recording an outcome");
		return rc;
	}
	if (rows == 0) {
		/* The lease expired and another claim owns the row now. */
		d->stats.fenced++;
		notify(d, it, res, INBOX_OUTBOX_IN_FLIGHT,
		       "fenced: the lease expired and the row was claimed "
		       "again; this outcome was not recorded");
		return INBOX_OK;
	}
	switch (state) {
	case INBOX_OUTBOX_DONE:
		d->stats.done++;
		break;
	case INBOX_OUTBOX_DEAD:
		d->stats.dead_letters++;
		break;
	default:
		break;
	}
	notify(d, it, res, state, reason);
	return INBOX_OK;
}

/* ---- one row ------------------------------------------------------- */

static int32_t max_attempts(const inbox_dispatcher *d,
                            const inbox_outbox_item *it)
{
	return it->max_attempts > 0 ? it->max_attempts : d->o.max_attempts;
}

static int dead(inbox_dispatcher *d, const inbox_outbox_item *it,
                const inbox_effect_result *res, int reconciled, const char *fmt,
                const char *detail)
{
	char reason[600];
	snprintf(reason, sizeof(reason), "outbox step %s: ", it->step);
	size_t n = strlen(reason);
	snprintf(reason + n, sizeof(reason) - n, fmt, detail);
	return finish(d, it, INBOX_OUTBOX_DEAD, 0, res, reason, reconciled, 0);
}

static inbox_reconcile_verdict reconcile(inbox_dispatcher *d,
                                         const inbox_outbox_item *it, char *why,
                                         size_t len)
{
	d->stats.reconciliations++;
	if (d->o.reconcile) {
		int v = d->o.reconcile(it, d->o.reconcile_payload);
		snprintf(why, len, "reconcile callback: %s",
		         v == INBOX_RECONCILE_FOUND       ? "found"
		         : v == INBOX_RECONCILE_NOT_FOUND ? "not found"
		                                          : "undecided");
		if (v != INBOX_RECONCILE_FOUND &&
		    v != INBOX_RECONCILE_NOT_FOUND)
			v = INBOX_RECONCILE_UNKNOWN;
		return (inbox_reconcile_verdict)v;
	}
	return inbox__http_reconcile(&d->http, it, why, len);
}

static int perform(inbox_dispatcher *d, const inbox_outbox_item *it,
                   inbox_effect_result *res)
{
	d->stats.attempts++;
	if (d->o.perform)
		return d->o.perform(it, res, d->o.perform_payload);
	if (strcmp(it->kind, "http") != 0) {
		memset(res, 0, sizeof(*res));
		res->outcome = INBOX_EFFECT_PERMANENT;
		snprintf(res->error, sizeof(res->error),
		         "no performer for kind \"%s\"", it->kind);
		return 0;
	}
	return inbox__http_perform(&d->http, it, res);
}

/* Perform the row and record what came of it. */
static int attempt(inbox_dispatcher *d, const inbox_outbox_item *it,
                   int reconciled)
{
	inbox_effect_result res;
	memset(&res, 0, sizeof(res));
	int rc = perform(d, it, &res);
	if (rc < 0) {
		snprintf(d->errmsg, sizeof(d->errmsg),
		         "outbox: the performer failed: %s",
		         inbox_strerror(rc));
		return rc;
	}
	int32_t max = max_attempts(d, it);
	char reason[400];
	snprintf(reason, sizeof(reason), "%s",
	         res.error[0] ? res.error : "failed");
	switch (res.outcome) {
	case INBOX_EFFECT_DONE:
		return finish(d, it, INBOX_OUTBOX_DONE, 0, &res, NULL,
		              reconciled, 0);
	case INBOX_EFFECT_RETRY:
	case INBOX_EFFECT_UNKNOWN: {
		int unknown = res.outcome == INBOX_EFFECT_UNKNOWN;
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
			return dead(d, it, &res, reconciled, "%s", why);
		}
		d->stats.retries++;
		return finish(
		    d, it, unknown ? INBOX_OUTBOX_UNKNOWN : INBOX_OUTBOX_FAILED,
		    backoff_ms(d, it->attempts, res.retry_after_ms), &res,
		    reason, reconciled, 0);
	}
	default:
		return dead(d, it, &res, reconciled, "%s", reason);
	}
}

static int handle(inbox_dispatcher *d, const inbox_outbox_item *it)
{
	int32_t max = max_attempts(d, it);
	int unknown = it->state == INBOX_OUTBOX_UNKNOWN ||
	              it->state == INBOX_OUTBOX_IN_FLIGHT;
	if (it->state == INBOX_OUTBOX_IN_FLIGHT) {
		d->stats.lease_expired++;
		d->stats.unknown_outcomes++;
	}
	if (unknown && !it->idempotent) {
		if (!d->o.reconcile && !it->reconcile_url)
			return dead(
			    d, it, NULL, 0, "%s",
			    "outcome unknown, the provider has no "
			    "idempotency and no reconcile is configured: "
			    "not re-sent (check with the provider)");
		char why[400];
		inbox_reconcile_verdict v = reconcile(d, it, why, sizeof(why));
		if (v == INBOX_RECONCILE_FOUND) {
			d->stats.reconciled_found++;
			return finish(d, it, INBOX_OUTBOX_DONE, 0, NULL, why, 1,
			              0);
		}
		if (v == INBOX_RECONCILE_UNKNOWN) {
			if (it->attempts >= max)
				return dead(
				    d, it, NULL, 1,
				    "max attempts reached, outcome still "
				    "unknown: %s",
				    why);
			return finish(d, it, INBOX_OUTBOX_UNKNOWN,
			              backoff_ms(d, it->attempts, 0), NULL, why,
			              1, 0);
		}
		d->stats.reconciled_not_found++;
		if (it->attempts > max)
			return dead(d, it, NULL, 1, "max attempts reached (%s)",
			            why);
		/* Not performed: send it now, with the same key. */
		return attempt(d, it, 1);
	}
	if (it->attempts > max)
		return dead(d, it, NULL, 0, "max attempts reached%s",
		            unknown ? "; the last outcome is unknown" : "");
	return attempt(d, it, 0);
}

static double mono_ms(void)
{
	return inbox__mono_seconds() * 1000.0;
}

int inbox_dispatcher_run_once(inbox_dispatcher *d, int *handled)
{
	int dummy;
	if (!handled)
		handled = &dummy;
	*handled = 0;
	if (!d)
		return INBOX_ERR_INVALID;
	if (d->st->in_txn)
		return INBOX_ERR_STATE;
	d->errmsg[0] = '\0';
	/* The lease started no earlier than this. */
	double t0 = mono_ms();
	int rc = claim(d);
	if (rc < 0) {
		set_err(d, rc, "outbox: claiming rows");
		return rc;
	}
	*handled = d->nitems;
	d->stats.claimed += (uint64_t)d->nitems;
	for (int i = 0; i < d->nitems && rc == INBOX_OK; i++) {
		const inbox_outbox_item *it = &d->items[i]->it;
		double left =
		    (double)d->lease_ms - LEASE_MARGIN_MS - (mono_ms() - t0);
		if ((d->stop && *d->stop) || left < (double)d->row_budget_ms) {
			/* Give it back as it was, without counting a try. */
			inbox_outbox_state back =
			    it->state == INBOX_OUTBOX_IN_FLIGHT
			        ? INBOX_OUTBOX_UNKNOWN
			        : it->state;
			rc = finish(d, it, back, 0, NULL,
			            "released unperformed", 0, -1);
			d->stats.released++;
			continue;
		}
		rc = handle(d, it);
	}
	drop_items(d);
	return rc;
}

int inbox_dispatcher_run(inbox_dispatcher *d, volatile sig_atomic_t *stop)
{
	if (!d || !stop)
		return INBOX_ERR_INVALID;
	d->stop = stop;
	int rc = INBOX_OK;
	while (!*stop) {
		int n = 0;
		rc = inbox_dispatcher_run_once(d, &n);
		if (rc < 0 && rc != INBOX_ERR_TRANSIENT &&
		    rc != INBOX_ERR_CONNECT)
			break;
		if (rc < 0 || n == 0) {
			rc = INBOX_OK;
			for (int64_t slept = 0; slept < d->o.poll_ms && !*stop;
			     slept += 50) {
				int64_t ms = d->o.poll_ms - slept < 50
				                 ? d->o.poll_ms - slept
				                 : 50;
				struct timespec ts = {0, (long)ms * 1000000L};
				nanosleep(&ts, NULL);
			}
		}
	}
	d->stop = NULL;
	return rc;
}
