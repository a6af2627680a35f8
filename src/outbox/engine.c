/*
 * The calls of the dispatcher: libcurl's multi interface, driven by the
 * caller's thread; inbox_dispatcher_run() adds a thread for the store.
 *
 *   ready    claimed rows not started yet — or between a reconcile and
 *            their call. Each pass starts every one its provider admits:
 *            a free slot (this dispatcher's `concurrency`, the provider's
 *            own cap), a token of its rate limit; a row whose provider's
 *            breaker is open, or that asked to hold off (Retry-After), is
 *            put back unperformed, due when the provider takes calls
 *            again; a row whose lease could no longer cover its call is
 *            put back too.
 *   active   transfers in flight on the multi handle. Idempotent requests
 *            share its connections; a non-idempotent one always gets a
 *            fresh connection that is closed after it (libcurl re-sends a
 *            request by itself when a reused connection dies before the
 *            answer: a blind second email).
 *   done     outcomes not committed yet: committed in groups, one
 *            transaction per group. A crash loses at most those: their
 *            rows are still in flight in the store, taken over when the
 *            lease expires as unknown outcomes (the same key again, or a
 *            reconcile).
 *
 * inbox_dispatcher_run() leaves the store to a thread of its own (the
 * store thread below), one request at a time: the outcomes waiting and a
 * claim, in one transaction when both are due — so no call waits for the
 * store, nor times out while a commit waits for a lock, and a slow store
 * gets bigger groups. It commits when 64 outcomes wait, when the oldest
 * has waited COMMIT_DELAY_MS, or when no call is in flight; it claims
 * before the calls in hand end: up to concurrency x the providers in use
 * + a look-ahead of 2 x max(batch, concurrency) rows in hand (enough to
 * ride out a store stall), at least a batch per claim unless a commit
 * goes anyway (a claim per call ending would cost a transaction per
 * row).
 *
 * inbox_dispatcher_run_once() claims one batch and returns when it is
 * done, all in the caller's thread: it commits only while no call is in
 * flight.
 *
 * With concurrency 1 both are the dispatcher of version 1: one row at a
 * time, each outcome committed before the next row starts, the next batch
 * claimed when the last outcome is recorded.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h"
#include "outbox/dispatcher.h"

#define COMMIT_DELAY_MS 5
#define COMMIT_MAX      64
#define CLAIM_MAX       1000
#define SLICE_MS        50    /* longest wait between looks at *stop */
#define ACTIVE_SEEN_MS  10000 /* a provider counts in the window this long */

int inbox__engine_open(inbox_dispatcher *d)
{
	if (inbox__curl_init() < 0)
		return -1;
	CURLM *m = curl_multi_init();
	if (!m)
		return -1;
	d->multi = m;
	/* Idle connections kept for reuse (idempotent requests). */
	long keep = d->o.concurrency < 64 ? 64 : 4L * d->o.concurrency;
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, keep);
	d->cappool = d->o.concurrency + d->batch + COMMIT_MAX;
	d->pool = calloc((size_t)d->cappool, sizeof(*d->pool));
	return d->pool ? 0 : -1;
}

void inbox__engine_close(inbox_dispatcher *d)
{
	for (inbox__job *j = d->active.head; j; j = j->next)
		if (j->x && d->multi)
			curl_multi_remove_handle(d->multi, j->x->curl);
	if (d->multi)
		curl_multi_cleanup(d->multi);
	d->multi = NULL;
}

/* *stop, set by a signal handler or another thread: read atomically. */
static int stop_asked(const inbox_dispatcher *d)
{
	return d->stop && __atomic_load_n(d->stop, __ATOMIC_RELAXED);
}

static int sequential(const inbox_dispatcher *d)
{
	return d->o.concurrency == 1;
}

static inbox__xfer *take_xfer(inbox_dispatcher *d, inbox__job *j)
{
	if (j->x)
		return j->x;
	if (d->npool > 0) {
		j->x = d->pool[--d->npool];
		return j->x;
	}
	inbox__xfer *x = calloc(1, sizeof(*x));
	if (!x || inbox__xfer_init(x) < 0) {
		free(x);
		return NULL;
	}
	j->x = x;
	return x;
}

/* ms left of the row's lease for its work. */
static double lease_left(const inbox_dispatcher *d, const inbox__job *j,
                         double now)
{
	return (double)d->lease_ms - INBOX__LEASE_MARGIN_MS - (now - j->t0);
}

/* The callbacks of the caller: performed here, one at a time. */
static int run_callbacks(inbox_dispatcher *d, inbox__job *j)
{
	if (j->need == INBOX__NEED_RECONCILE && d->o.reconcile) {
		char why[400];
		d->stats.reconciliations++;
		int v = d->o.reconcile(&j->it, d->o.reconcile_payload);
		snprintf(why, sizeof(why), "reconcile callback: %s",
		         v == INBOX_RECONCILE_FOUND       ? "found"
		         : v == INBOX_RECONCILE_NOT_FOUND ? "not found"
		                                          : "undecided");
		if (v != INBOX_RECONCILE_FOUND &&
		    v != INBOX_RECONCILE_NOT_FOUND)
			v = INBOX_RECONCILE_UNKNOWN;
		inbox__jlist_remove(&d->ready, j);
		inbox__job_reconciled(d, j, (inbox_reconcile_verdict)v, why);
		return 1;
	}
	if (j->need != INBOX__NEED_CALL ||
	    (!d->o.perform && strcmp(j->it.kind, "http") == 0))
		return 0;
	inbox_effect_result res;
	memset(&res, 0, sizeof(res));
	d->stats.attempts++;
	inbox__jlist_remove(&d->ready, j);
	if (!d->o.perform) {
		res.outcome = INBOX_EFFECT_PERMANENT;
		snprintf(res.error, sizeof(res.error),
		         "no performer for kind \"%s\"", j->it.kind);
	} else {
		int rc = d->o.perform(&j->it, &res, d->o.perform_payload);
		if (rc < 0) {
			/* The row stays in flight: taken over when its lease
			 * expires, as an unknown outcome. The others are put
			 * back. */
			snprintf(d->errmsg, sizeof(d->errmsg),
			         "outbox: the performer failed: %s",
			         inbox_strerror(rc));
			inbox__job_free(d, j);
			d->fail_rc = rc;
			d->stopping = 1;
			return 1;
		}
	}
	inbox__job_called(d, j, &res);
	return 1;
}

/* Set up and add the transfer of j's next step; 0, or -1 when it could
 * not start (its outcome is then decided, or it is released). */
static int start_transfer(inbox_dispatcher *d, inbox__job *j, int dp)
{
	int reconcile = j->need == INBOX__NEED_RECONCILE;
	inbox__xfer *x = take_xfer(d, j);
	char why[400] = "";
	inbox_effect_result res;
	int bad = !x, nomem = !x;
	if (!bad && reconcile)
		bad = inbox__http_reconcile_setup(
		          x, &j->it, d->o.connect_timeout_ms, d->o.timeout_ms,
		          why, sizeof(why)) < 0;
	else if (!bad)
		bad = inbox__http_call_setup(x, &j->it, d->o.connect_timeout_ms,
		                             d->o.timeout_ms, &res) < 0;
	if (!bad) {
		curl_easy_setopt(x->curl, CURLOPT_PRIVATE, j);
		nomem = bad =
		    curl_multi_add_handle(d->multi, x->curl) != CURLM_OK;
	}
	if (bad && dp >= 0)
		inbox__provider_cancel(d->provs[dp].p, &j->ticket);
	inbox__jlist_remove(&d->ready, j);
	if (bad) {
		if (nomem) { /* try again later */
			inbox__job_release(d, j, 0, "no memory for the call");
		} else if (reconcile) {
			d->stats.reconciliations++;
			inbox__job_reconciled(d, j, INBOX_RECONCILE_UNKNOWN,
			                      why);
		} else {
			d->stats.attempts++;
			inbox__job_called(d, j, &res);
		}
		return -1;
	}
	if (reconcile)
		d->stats.reconciliations++;
	else
		d->stats.attempts++;
	j->busy = dp + 1;
	j->busy_reconcile = reconcile;
	if (dp >= 0)
		d->provs[dp].active++;
	inbox__jlist_push(&d->active, j);
	return 0;
}

/* Start what can start now; *wake_ms: when a waiting row may start (0:
 * no timer, a call ending wakes us). */
static void start_ready(inbox_dispatcher *d, double *wake_ms)
{
	double now = inbox__dispatch_now_ms();
	unsigned pass = ++d->pass;
	inbox__job *j = d->ready.head;
	while (j) {
		inbox__job *next = j->next;
		/* One at a time: the next row after the last one's outcome
		 * is recorded. */
		if (sequential(d) && (d->active.n || d->done.n || d->q.busy))
			break;
		if (d->stopping || stop_asked(d)) {
			inbox__jlist_remove(&d->ready, j);
			inbox__job_release(d, j, 0, NULL);
			j = next;
			continue;
		}
		/* The first step needs room for a reconcile and a call; a
		 * call after a reconcile, for itself. */
		double need =
		    j->started ? (double)d->o.timeout_ms + INBOX__ROW_MARGIN_MS
		               : (double)d->row_budget_ms;
		if (lease_left(d, j, now) < need) {
			inbox__jlist_remove(&d->ready, j);
			inbox__job_release(d, j, 0, NULL);
			j = next;
			continue;
		}
		j->started = 1;
		if (run_callbacks(d, j)) {
			/* A reconcile callback may leave it ready for its
			 * call: it is at the head now, looked at again. */
			if (sequential(d) && d->done.n)
				return; /* its outcome is recorded first */
			j = d->ready.head;
			continue;
		}
		int dp = j->need == INBOX__NEED_RECONCILE ? j->rdp : j->dp;
		if (dp >= 0 && d->provs[dp].full == pass) {
			j = next; /* it said wait to an earlier row of this pass
			           */
			continue;
		}
		if (dp >= 0) {
			int64_t wait = 0;
			const char *why = "";
			inbox__dprov *p = &d->provs[dp];
			p->seen_ms = now;
			inbox__admit a = inbox__provider_acquire(
			    p->p, now, p->active, d->o.concurrency, &j->ticket,
			    &wait, &why);
			if (a == INBOX__REJECT) {
				inbox__jlist_remove(&d->ready, j);
				/* +0-10%: the rows put back do not all
				 * come back at the same instant. */
				wait += wait * (rand_r(&d->rng) % 100) / 1000;
				inbox__job_release(d, j, wait, why);
				j = next;
				continue;
			}
			if (a == INBOX__WAIT) {
				p->full = pass;
				if (wait > 0 &&
				    (*wake_ms == 0 || now + wait < *wake_ms))
					*wake_ms = now + (double)wait;
				j = next;
				continue;
			}
		}
		start_transfer(d, j, dp);
		j = next;
	}
}

/* A transfer ended: its verdict, its provider told, its next step. */
static void transfer_done(inbox_dispatcher *d, CURL *easy, CURLcode cc)
{
	inbox__job *j = NULL;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&j);
	curl_multi_remove_handle(d->multi, easy);
	if (!j)
		return;
	inbox__jlist_remove(&d->active, j);
	double now = inbox__dispatch_now_ms();
	int dp = j->busy - 1;
	j->busy = 0;
	inbox__prov *p = dp >= 0 ? d->provs[dp].p : NULL;
	if (dp >= 0)
		d->provs[dp].active--;
	if (j->busy_reconcile) {
		char why[400];
		long status = 0;
		inbox_reconcile_verdict v = inbox__http_reconcile_result(
		    j->x, (int)cc, &status, why, sizeof(why));
		if (p)
			inbox__provider_release(p, &j->ticket, now,
			                        inbox__provider_verdict(status),
			                        0);
		inbox__job_reconciled(d, j, v, why);
		return;
	}
	inbox_effect_result res;
	inbox__http_call_result(j->x, &j->it, (int)cc, &res);
	curl_off_t us = -1;
	if (p &&
	    curl_easy_getinfo(easy, CURLINFO_TOTAL_TIME_T, &us) == CURLE_OK &&
	    us >= 0)
		inbox__provider_observe(p, (double)us / 1e6);
	if (p)
		inbox__provider_release(
		    p, &j->ticket, now, inbox__provider_verdict(res.status),
		    res.status == 429 || res.status == 503 ? res.retry_after_ms
		                                           : 0);
	inbox__job_called(d, j, &res);
}

static void collect(inbox_dispatcher *d)
{
	int running = 0, left = 0;
	curl_multi_perform(d->multi, &running);
	CURLMsg *m;
	while ((m = curl_multi_info_read(d->multi, &left)))
		if (m->msg == CURLMSG_DONE)
			transfer_done(d, m->easy_handle, m->data.result);
}

/* Wait for the calls in flight, at most until `until_ms` (0: SLICE_MS). */
static void wait_calls(inbox_dispatcher *d, double until_ms)
{
	double now = inbox__dispatch_now_ms();
	double ms = until_ms > 0 ? until_ms - now : SLICE_MS;
	if (ms > SLICE_MS)
		ms = SLICE_MS;
	if (ms < 0)
		ms = 0;
	/* With nothing in flight it still waits, for the timeout or for the
	 * store thread's curl_multi_wakeup(). */
	curl_multi_poll(d->multi, NULL, 0, (int)ms, NULL);
}

static int commit_due(const inbox_dispatcher *d, double now)
{
	if (!d->done.n)
		return 0;
	if (sequential(d) || d->active.n == 0 || d->done.n >= COMMIT_MAX ||
	    d->stopping)
		return 1;
	return now - d->done_since >= COMMIT_DELAY_MS;
}

static int transient(int rc)
{
	return rc == INBOX_ERR_TRANSIENT || rc == INBOX_ERR_CONNECT;
}

/* Give up the rows in hand after a store failure: they stay in flight
 * and are taken over when their lease expires. */
static void abandon(inbox_dispatcher *d)
{
	inbox__jlist *ls[] = {&d->ready, &d->done};
	for (size_t i = 0; i < sizeof(ls) / sizeof(*ls); i++)
		while (ls[i]->head) {
			inbox__job *j = ls[i]->head;
			inbox__jlist_remove(ls[i], j);
			inbox__job_free(d, j);
		}
}

static void begin_work(inbox_dispatcher *d)
{
	d->errmsg[0] = '\0';
	d->stopping = 0;
	d->fail_rc = 0;
}

/* Wait until `until_ms` (0: one slice) or a call ends, then read what
 * ended. */
static void step(inbox_dispatcher *d, double until_ms)
{
	wait_calls(d, until_ms);
	collect(d);
}

static double earliest(double a, double b)
{
	return a == 0 || (b != 0 && b < a) ? b : a;
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
	begin_work(d);
	int rc = inbox__dispatch_claim(d, d->batch, handled);
	if (rc < 0)
		return rc;
	while (d->ready.n || d->active.n || d->done.n) {
		double wake = 0;
		if (rc == INBOX_OK)
			start_ready(d, &wake);
		else
			abandon(d);
		/* Never while calls are in flight: this thread drives them, and
		 * a store that makes it wait (another process holding
		 * SQLite's lock) would make them time out. */
		if (rc == INBOX_OK && d->done.n && !d->active.n) {
			int crc = inbox__dispatch_commit(d, COMMIT_MAX);
			if (crc < 0) {
				rc = crc;
				d->stopping = 1;
			}
			continue;
		}
		if (rc < 0 && !d->active.n) {
			abandon(d);
			break;
		}
		if (d->active.n || d->ready.n)
			step(d, wake);
	}
	if (rc == INBOX_OK)
		rc = d->fail_rc; /* the performer failed */
	d->stopping = 0;
	return rc;
}

/* Rows to have in hand: call slots for each provider in use, and the
 * next batch — no more than the slots can start within a lease. */
static int window(const inbox_dispatcher *d, double now)
{
	int nprov = 0;
	for (int i = 0; i < d->nprovs; i++)
		if (now - d->provs[i].seen_ms < ACTIVE_SEEN_MS)
			nprov++;
	if (nprov < 1)
		nprov = 1;
	long ahead = 2L * d->batch > 2L * d->o.concurrency
	                 ? 2L * d->batch
	                 : 2L * d->o.concurrency;
	long w = (long)d->o.concurrency * nprov + ahead;
	/* The rows each slot could take in turn, each lasting its worst
	 * case, within a lease — or three times the slots: a row that could
	 * not start in time is released at its start, unperformed. */
	long cap = (long)d->o.concurrency * d->fit;
	if (cap < 3L * d->o.concurrency)
		cap = 3L * d->o.concurrency;
	if (cap < d->batch)
		cap = d->batch;
	return (int)(w < cap ? w : cap);
}

static int tick(inbox_dispatcher *d, inbox_dispatch_event ev)
{
	return d->o.on_tick ? d->o.on_tick(d, ev, d->o.tick_payload) : 0;
}

/* How many rows to claim now (0: none). */
static int to_claim(const inbox_dispatcher *d, double now)
{
	int held = d->ready.n + d->active.n;
	if (sequential(d))
		return held || d->done.n || d->q.busy ? 0 : d->batch;
	/* At least a batch: a claim per call ending would cost a
	 * transaction per row. As much as there is room for: while a claim
	 * is under way calls end, so a slow store gets bigger claims. */
	int w = window(d, now);
	int room = w - held;
	if (room >= d->batch || (held == 0 && room > 0))
		return room < CLAIM_MAX ? room : CLAIM_MAX;
	return 0;
}

/* Sleep until `until_ms`, looking at *stop every slice. */
static void pause_until(inbox_dispatcher *d, double until_ms)
{
	while (!stop_asked(d)) {
		double ms = until_ms - inbox__dispatch_now_ms();
		if (ms <= 0)
			break;
		struct timespec ts = {
		    0, (long)((ms < SLICE_MS ? ms : SLICE_MS) * 1e6)};
		nanosleep(&ts, NULL);
	}
}

/* ---- the store thread --------------------------------------------------- */

/* The store work of one request (the store thread, without the lock). */
static void store_work(inbox_dispatcher *d, inbox__job **g, int ng, int want,
                       inbox__jlist *got, double *t0, int *commit_rc,
                       int *claim_rc, char *err, size_t errlen)
{
	*commit_rc = *claim_rc = INBOX_OK;
	/* Both in one transaction when it works; else each on its own. */
	if (ng && want &&
	    inbox__store_commit_claim(d, g, ng, want, got, t0) == INBOX_OK)
		return;
	if (ng)
		*commit_rc = inbox__store_commit(d, g, ng, err, errlen);
	if (want)
		*claim_rc = inbox__store_claim(d, want, got, t0, err, errlen);
}

static void *store_main(void *arg)
{
	inbox_dispatcher *d = arg;
	inbox__storeq *q = &d->q;
	pthread_mutex_lock(&q->mu);
	while (!q->quit) {
		if (!q->asked) {
			pthread_cond_wait(&q->cv, &q->mu);
			continue;
		}
		int ng = q->ng, want = q->want;
		q->asked = 0;
		pthread_mutex_unlock(&q->mu);
		inbox__jlist got = {0};
		double t0 = 0;
		int commit_rc, claim_rc;
		char err[512] = "";
		store_work(d, q->g, ng, want, &got, &t0, &commit_rc, &claim_rc,
		           err, sizeof(err));
		pthread_mutex_lock(&q->mu);
		q->commit_rc = commit_rc;
		q->claim_rc = claim_rc;
		q->claimed = got;
		q->claim_t0 = t0;
		memcpy(q->err, err, sizeof(err));
		q->answered = 1;
		curl_multi_wakeup(d->multi);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

static int store_start(inbox_dispatcher *d)
{
	inbox__storeq *q = &d->q;
	memset(q, 0, sizeof(*q));
	if (pthread_mutex_init(&q->mu, NULL) != 0)
		return -1;
	if (pthread_cond_init(&q->cv, NULL) != 0) {
		pthread_mutex_destroy(&q->mu);
		return -1;
	}
	if (pthread_create(&q->th, NULL, store_main, d) != 0) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		return -1;
	}
	q->running = 1;
	return 0;
}

static void store_stop(inbox_dispatcher *d)
{
	inbox__storeq *q = &d->q;
	if (!q->running)
		return;
	pthread_mutex_lock(&q->mu);
	q->quit = 1;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->th, NULL);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	q->running = 0;
}

/* Ask the store thread to claim `want` rows and to commit the outcomes
 * waiting (up to COMMIT_MAX of them) if `commit`. */
static void store_ask(inbox_dispatcher *d, int want, int commit)
{
	inbox__storeq *q = &d->q;
	pthread_mutex_lock(&q->mu);
	q->want = want;
	q->ng = 0;
	while (commit && q->ng < COMMIT_MAX && d->done.head) {
		inbox__job *j = d->done.head;
		inbox__jlist_remove(&d->done, j);
		q->g[q->ng++] = j;
	}
	q->asked = 1;
	q->busy = 1;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

/* What the store thread answered. */
typedef struct answers {
	int claimed, claim_rc, got, want;
	int committed, commit_rc;
} answers;

/* 1 if an answer was there (taken into *a). */
static int store_take(inbox_dispatcher *d, answers *a)
{
	inbox__storeq *q = &d->q;
	inbox__job *g[INBOX__GROUP_MAX];
	inbox__jlist got = {0};
	double t0 = 0;
	memset(a, 0, sizeof(*a));
	if (!q->busy)
		return 0;
	pthread_mutex_lock(&q->mu);
	if (!q->answered) {
		pthread_mutex_unlock(&q->mu);
		return 0;
	}
	a->claimed = q->want > 0;
	a->want = q->want;
	a->claim_rc = q->claim_rc;
	a->committed = q->ng > 0;
	a->commit_rc = q->commit_rc;
	int ng = q->ng;
	memcpy(g, q->g, (size_t)ng * sizeof(*g));
	got = q->claimed;
	t0 = q->claim_t0;
	if (q->claim_rc < 0 || q->commit_rc < 0)
		memcpy(d->errmsg, q->err, sizeof(d->errmsg));
	q->claimed = (inbox__jlist){0};
	q->answered = 0;
	q->want = q->ng = 0;
	q->busy = 0;
	pthread_mutex_unlock(&q->mu);
	a->got = got.n;
	/* Outcomes first: a row put back may be among those claimed. */
	if (a->committed)
		inbox__dispatch_recorded(d, g, ng);
	if (a->claimed)
		inbox__dispatch_adopt(d, &got, t0);
	return 1;
}

/* ---- the run ------------------------------------------------------------- */

typedef struct run_state {
	int rc;
	int dry; /* the last claim found less than it asked for */
	double next_claim, next_commit;
} run_state;

/* The store thread's answer, and what it means for the run. */
static void answered(inbox_dispatcher *d, run_state *r, double now)
{
	answers a;
	if (!store_take(d, &a))
		return;
	if (a.claimed) {
		r->dry = a.claim_rc < 0 || a.got < a.want;
		if (r->dry)
			r->next_claim = now + (double)d->o.poll_ms;
		if (a.claim_rc < 0 && !transient(a.claim_rc)) {
			r->rc = a.claim_rc;
			d->stopping = 1;
		} else if (a.claim_rc < 0 &&
		           tick(d, INBOX_DISPATCH_STORE_RETRY)) {
			d->stopping = 1;
		}
	}
	if (a.committed) {
		if (a.commit_rc < 0 &&
		    (!transient(a.commit_rc) || d->stopping)) {
			/* Given up: the rows stay in flight. */
			if (r->rc == INBOX_OK)
				r->rc = a.commit_rc;
			d->stopping = 1;
			abandon(d);
		} else if (a.commit_rc < 0) {
			r->next_commit = now + (double)d->o.poll_ms;
			if (tick(d, INBOX_DISPATCH_STORE_RETRY))
				d->stopping = 1;
		} else if (tick(d, INBOX_DISPATCH_PROGRESS)) {
			d->stopping = 1;
		}
	}
}

/* Post what is due to the store thread: outcomes to commit, rows to
 * claim; a commit that goes anyway takes a claim of whatever room there
 * is with it. */
static void ask_store(inbox_dispatcher *d, run_state *r, double now)
{
	if (d->q.busy)
		return;
	int commit = d->done.n && now >= r->next_commit && commit_due(d, now);
	int want = 0;
	if (!d->stopping && now >= r->next_claim) {
		want = to_claim(d, now);
		if (!want && commit && !sequential(d)) {
			int room = window(d, now) - d->ready.n - d->active.n;
			want = room > 0 ? room : 0;
		}
	}
	if (commit || want)
		store_ask(d, want, commit);
}

int inbox_dispatcher_run(inbox_dispatcher *d, volatile sig_atomic_t *stop)
{
	if (!d || !stop)
		return INBOX_ERR_INVALID;
	if (d->st->in_txn)
		return INBOX_ERR_STATE;
	begin_work(d);
	if (store_start(d) < 0) {
		snprintf(d->errmsg, sizeof(d->errmsg),
		         "outbox: cannot start the dispatcher's store thread");
		return INBOX_ERR_NOMEM;
	}
	d->stop = stop;
	run_state r = {.rc = INBOX_OK};
	for (;;) {
		double now = inbox__dispatch_now_ms();
		answered(d, &r, now);
		if (stop_asked(d))
			d->stopping = 1;
		double wake = 0;
		if (r.rc == INBOX_OK)
			start_ready(d, &wake);
		else
			abandon(d);
		now = inbox__dispatch_now_ms();
		ask_store(d, &r, now);
		if (!d->ready.n && !d->active.n && !d->done.n && !d->q.busy) {
			if (d->stopping)
				break;
			if (r.dry) {
				/* The store thread is idle: on_tick may use
				 * the store. */
				if (tick(d, INBOX_DISPATCH_IDLE))
					d->stopping = 1;
				else
					pause_until(d, r.next_claim);
			}
			continue;
		}
		if (!d->q.busy) {
			if (d->done.n)
				wake =
				    earliest(wake, r.next_commit > now
				                       ? r.next_commit
				                       : d->done_since +
				                             COMMIT_DELAY_MS);
			if (!d->stopping && to_claim(d, now) > 0)
				wake = earliest(wake, r.next_claim);
		}
		step(d, wake);
	}
	store_stop(d);
	if (r.rc == INBOX_OK)
		r.rc = d->fail_rc;
	d->stop = NULL;
	d->stopping = 0;
	return r.rc;
}
