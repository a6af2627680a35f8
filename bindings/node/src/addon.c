/*
 * libinbox for Node.js: a Node-API addon over the public C API
 * (<inbox/inbox.h>, <inbox/admin.h>, <inbox/outbox.h>) only.
 *
 * Threads. Every native handle (an Inbox's admin store, or one consumer's
 * own store + consumer) owns one worker thread. The main thread never
 * calls the library: it queues a job and returns; the worker runs it and
 * posts the result back through a thread-safe function, whose callback
 * (on the main thread) settles the job's promise. A handler runs on the
 * worker inside the library's transaction: the worker posts a "handler"
 * event to the main thread, which calls the JS handler, and then waits on
 * the handle's transaction queue, executing the requests the JS handler
 * sends (query, exec, upsert, outbox) on the connection that holds the
 * transaction, until the handler's "done" arrives with its verdict. The
 * event loop never waits for the database.
 *
 * Lifetime. While a job is pending the thread-safe function is ref'ed
 * (the process stays alive) and the JS object is held strongly; when idle
 * both are released, so an Inbox or consumer that is no longer referenced
 * is garbage-collected: its finalizer queues a close, the worker closes
 * the library's handles and exits, and the memory is freed once both the
 * finalizer and the worker are done.
 */
#define NAPI_VERSION 8
#include <node_api.h>

#include <inbox/admin.h>
#include <inbox/inbox.h>
#include <inbox/outbox.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* Small helpers                                                        */
/* ------------------------------------------------------------------ */

#define NAPI_OK(call)                                                          \
	do {                                                                   \
		if ((call) != napi_ok)                                         \
			return throw_last(env);                                \
	} while (0)

static napi_value throw_last(napi_env env)
{
	const napi_extended_error_info *info = NULL;
	bool pending = false;
	napi_is_exception_pending(env, &pending);
	if (!pending) {
		napi_get_last_error_info(env, &info);
		napi_throw_error(env, "INBOX_ERR_INVALID",
		                 info && info->error_message
		                     ? info->error_message
		                     : "invalid argument");
	}
	return NULL;
}

static char *xstrdup(const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s);
	char *d = malloc(n + 1);
	if (d)
		memcpy(d, s, n + 1);
	return d;
}

static char *xmemdup(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		if (n)
			memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

/* ------------------------------------------------------------------ */
/* Jobs                                                                 */
/* ------------------------------------------------------------------ */

enum op {
	OP_OPEN = 1,
	OP_CLOSE,
	OP_EXEC,
	OP_QUERY,
	OP_PROCESS,
	OP_BATCH,
	OP_STATS,
	OP_ADMIN_STATS,
	OP_DLQ_LIST,
	OP_DLQ_GET,
	OP_DLQ_REPLAY,
	OP_DLQ_DROP,
	OP_INSPECT,
	OP_PURGE,
	OP_SCHEMA_VERSION,
	OP_LEASE_ACQUIRE,
	OP_LEASE_EXTEND,
	OP_LEASE_COMPLETE,
	OP_LEASE_FAIL,
	OP_LEASE_FREE,
	OP_DISPATCH_ONCE,
	OP_OUTBOX_COUNTS,
	OP_DISPATCH_RUN,
	/* transaction requests (only while a handler runs) */
	T_EXEC = 100,
	T_QUERY,
	T_UPSERT,
	T_OUTBOX,
	T_DONE,
	T_RESULT /* trx.setResult(): s0 content type, s1 the bytes as hex */
};

typedef struct rowset {
	int ncols;
	size_t nvals, cap;
	char **vals;  /* nrows * ncols, NULL = SQL NULL */
	char **names; /* ncols column names (inbox_row_column_name) */
} rowset;

typedef struct res_copy {
	inbox_outcome outcome;
	int32_t attempts;
	char *key;
	char *reason;
	int64_t dead_letter_id;
	/* the stored result (inbox_result version 2) */
	char *result; /* result_len bytes, or NULL */
	size_t result_len;
	char *result_type;
	inbox_outcome first_outcome;
} res_copy;

typedef struct dl_copy {
	inbox_admin_dead_letter dl; /* strings owned (strdup'ed) */
} dl_copy;

#define JOB_NI 16
#define JOB_NF 8

typedef struct job {
	struct job *next;
	int op;
	uint32_t id; /* 0: nobody waits for the result */
	/* inputs */
	char *s[6];
	int nparams;
	char **params;
	/* numbers: as many as the call's arrays hold, up to these (the
	 * rest 0); sizes and lengths that may pass 2^31 travel in f */
	int64_t i[JOB_NI];
	double f[JOB_NF];
	inbox_delivery *d;
	size_t nd;
	int has_handler;
	/* outputs */
	int rc;
	char *err;     /* message of a failure (never a password) */
	char *errcode; /* SQLSTATE / SQLite code name, or NULL */
	res_copy *res; /* nd results (1 for process) */
	rowset rows;
	int64_t out_i[4];
	char *out_s;
	inbox_stats stats;
	inbox_admin_stats astats;
	inbox_admin_record *record;
	dl_copy *dls;
	size_t ndl, capdl;
	inbox_outbox_stats ostats;
	inbox_outbox_counts counts;
} job;

/* A handler call posted to the main thread. */
typedef struct hcall {
	uint32_t job_id;
	int64_t index;
	int attempt;
	char *key, *id, *fp, *payload;
	size_t len;
} hcall;

/* What the thread-safe function carries. */
/* An outbox row's outcome from a running dispatcher, for
 * dispatcher.events() (copied: the item is borrowed). */
typedef struct oevent {
	int64_t id;
	char *consumer, *key, *step, *idempotency_key, *url, *reason, *error;
	int32_t attempts;
	inbox_outbox_state state;
	int attempted; /* an attempt was made: outcome and status say how */
	inbox_effect_outcome outcome;
	int status;
} oevent;

typedef struct ev {
	int kind; /* 0: a job finished; 1: a handler call; 2: an outbox event;
	             3: a pass's handler calls (nh of them, in h) */
	job *j;
	hcall *h;
	oevent *o;
	size_t nh;
	uint32_t pass;
} ev;

typedef struct queue {
	job *head, *tail;
} queue;

typedef struct lease_ent {
	struct lease_ent *next;
	int64_t id;
	inbox_lease *l;
} lease_ent;

typedef struct handle {
	/* touched by the worker only */
	inbox_store *st;
	inbox_consumer *c;
	inbox_txn *txn;      /* while a handler runs */
	uint32_t cur_job;    /* the job running (its handler calls) */
	int cur_has_handler; /* whether JS gave that job a handler */
	/* the batch's pass whose handlers were posted at once (c_hook), or
	 * 0: c_handler posts each message itself (a lease's handler) */
	uint32_t pass;
	uint32_t pass_seq; /* passes posted so far: each pass a new tag */
	int64_t pass_next; /* the index in the pass of the next c_handler */
	int pass_unposted; /* the pass's post failed: its handlers RETRY */
	lease_ent *leases;
	int64_t next_lease;
	/* shared, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	queue jobs, txq;
	/* requests pushed on txq so far: the worker waiting for a handler's
	 * next request watches it before it sleeps on cv (see txq_wait) */
	atomic_uint txq_pushed;
	/* held around every call on the tsfn and by tsfn_finalize: not mu,
	 * which the main thread takes to queue jobs (the worker posting
	 * while holding mu made the main thread wait for it) */
	pthread_mutex_t tmu;
	int closing; /* a close was queued: the worker ends after it */
	/* a running dispatcher (OP_DISPATCH_RUN): set by the main thread,
	 * read by inbox_dispatcher_run() on the worker */
	volatile sig_atomic_t stop;
	/* dispatcher.events() has a reader: post each row's outcome (set by
	 * the main thread, read by the dispatcher's on_event) */
	volatile sig_atomic_t events;
	inbox_outbox_stats dstats; /* under mu: its counters so far */
	int running;               /* under mu */
	/* main thread only */
	napi_threadsafe_function tsfn;
	napi_ref self; /* strong while jobs are pending, weak otherwise */
	int pending;
	int closed;      /* close() queued: no more jobs */
	int js_gone;     /* the JS object was finalized */
	int worker_gone; /* the tsfn was finalized (written under mu and
	                    tmu) */
	int exited;      /* under mu: the worker left its loop */
	pthread_t thread;
} handle;

static void rowset_free(rowset *r)
{
	for (size_t k = 0; k < r->nvals; k++)
		free(r->vals[k]);
	free(r->vals);
	for (int k = 0; r->names && k < r->ncols; k++)
		free(r->names[k]);
	free(r->names);
	memset(r, 0, sizeof *r);
}

static void dl_free_fields(inbox_admin_dead_letter *d)
{
	free(d->consumer);
	free(d->key);
	free(d->message_id);
	free(d->payload);
	free(d->headers);
	free(d->position);
	free(d->reason);
	free(d->fingerprint);
	free(d->stored_fingerprint);
}

static void job_free(job *j)
{
	if (!j)
		return;
	for (int k = 0; k < 6; k++)
		free(j->s[k]);
	for (int k = 0; k < j->nparams; k++)
		free(j->params[k]);
	free(j->params);
	for (size_t k = 0; k < j->nd; k++) {
		free((char *)j->d[k].id);
		free((char *)j->d[k].payload);
		free((char *)j->d[k].headers);
		free((char *)j->d[k].position);
	}
	free(j->d);
	free(j->err);
	free(j->errcode);
	if (j->res) {
		size_t n = j->nd ? j->nd : 1;
		for (size_t k = 0; k < n; k++) {
			free(j->res[k].key);
			free(j->res[k].reason);
			free(j->res[k].result);
			free(j->res[k].result_type);
		}
		free(j->res);
	}
	rowset_free(&j->rows);
	free(j->out_s);
	inbox_admin_record_free(j->record);
	for (size_t k = 0; k < j->ndl; k++)
		dl_free_fields(&j->dls[k].dl);
	free(j->dls);
	free(j);
}

static void hcall_fields_free(hcall *h)
{
	free(h->key);
	free(h->id);
	free(h->fp);
	free(h->payload);
}

static void hcall_free(hcall *h)
{
	if (!h)
		return;
	hcall_fields_free(h);
	free(h);
}

/* A pass's handler calls (ev kind 3). */
static void hcalls_free(hcall *a, size_t n)
{
	for (size_t k = 0; a && k < n; k++)
		hcall_fields_free(&a[k]);
	free(a);
}

static void q_push(queue *q, job *j)
{
	j->next = NULL;
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
}

static job *q_pop(queue *q)
{
	job *j = q->head;
	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
		j->next = NULL;
	}
	return j;
}

/* ------------------------------------------------------------------ */
/* Worker side                                                          */
/* ------------------------------------------------------------------ */

/* The worker's calls on the thread-safe function. Once Node has
 * finalized it (tsfn_finalize: the environment is being torn down, the
 * process is ending) it is freed, and a call would touch freed memory:
 * the check and the call are made under mu, which tsfn_finalize takes to
 * say so. The queue is unbounded, so a call never waits for the main
 * thread while holding mu. */
static napi_status tsfn_post(handle *h, void *data)
{
	pthread_mutex_lock(&h->tmu);
	napi_status st =
	    h->worker_gone ? napi_closing
	                   : napi_call_threadsafe_function(h->tsfn, data,
	                                                   napi_tsfn_blocking);
	pthread_mutex_unlock(&h->tmu);
	return st;
}

static void oevent_free(oevent *o)
{
	if (!o)
		return;
	free(o->consumer);
	free(o->key);
	free(o->step);
	free(o->idempotency_key);
	free(o->url);
	free(o->reason);
	free(o->error);
	free(o);
}

/* Free an event nobody will read. */
static void ev_drop(ev *e)
{
	if (e->kind == 0)
		job_free(e->j);
	else if (e->kind == 1)
		hcall_free(e->h);
	else if (e->kind == 3)
		hcalls_free(e->h, e->nh);
	else
		oevent_free(e->o);
	free(e);
}

static void post(handle *h, ev *e)
{
	if (tsfn_post(h, e) != napi_ok)
		ev_drop(e); /* the environment is going away */
}

static void finish(handle *h, job *j)
{
	ev *e = calloc(1, sizeof *e);
	if (!e) {
		job_free(j);
		return;
	}
	e->kind = 0;
	e->j = j;
	post(h, e);
}

/* Record the failure rc of a call on the store (or the consumer). */
static void fail_store(handle *h, job *j, int rc)
{
	j->rc = rc;
	const char *m = h->st ? inbox_store_errmsg(h->st) : "";
	const char *c = h->st ? inbox_store_errcode(h->st) : "";
	j->err = xstrdup(m && *m ? m : inbox_strerror(rc));
	j->errcode = c && *c ? xstrdup(c) : NULL;
}

static void fail_consumer(handle *h, job *j, int rc)
{
	j->rc = rc;
	const char *m = h->c ? inbox_consumer_errmsg(h->c) : "";
	if (!m || !*m)
		m = h->st ? inbox_store_errmsg(h->st) : "";
	const char *c = h->st ? inbox_store_errcode(h->st) : "";
	j->err = xstrdup(m && *m ? m : inbox_strerror(rc));
	j->errcode = c && *c ? xstrdup(c) : NULL;
}

static void copy_result(res_copy *dst, const inbox_result *r)
{
	dst->outcome = r->outcome;
	dst->attempts = r->attempts;
	dst->key = xstrdup(r->key);
	dst->reason = xstrdup(r->reason);
	dst->dead_letter_id = r->dead_letter_id;
	dst->result = r->result ? xmemdup(r->result, r->result_len) : NULL;
	dst->result_len = dst->result ? r->result_len : 0;
	dst->result_type = dst->result ? xstrdup(r->result_type) : NULL;
	dst->first_outcome = r->first_outcome;
}

static int hexval(int c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

/* trx.setResult(): the bytes come as hex (any bytes, through strings). */
static int set_result_hex(inbox_txn *txn, const char *type, const char *hex)
{
	size_t n = hex ? strlen(hex) : 0;
	if (n % 2)
		return INBOX_ERR_INVALID;
	char *b = malloc(n / 2 + 1);
	if (!b)
		return INBOX_ERR_NOMEM;
	for (size_t k = 0; k < n / 2; k++) {
		int hi = hexval(hex[2 * k]), lo = hexval(hex[2 * k + 1]);
		if (hi < 0 || lo < 0) {
			free(b);
			return INBOX_ERR_INVALID;
		}
		b[k] = (char)(hi * 16 + lo);
	}
	int rc = inbox_txn_set_result(txn, type, b, n / 2);
	free(b);
	return rc;
}

static int row_cb(int ncols, const char *const *values, void *payload)
{
	rowset *r = payload;
	if (r->nvals == 0 && r->cap == 0) {
		r->ncols = ncols;
		r->names =
		    calloc(ncols > 0 ? (size_t)ncols : 1, sizeof *r->names);
		if (!r->names)
			return 1;
		for (int k = 0; k < ncols; k++) {
			const char *n = inbox_row_column_name(k);
			r->names[k] = xstrdup(n ? n : "?column?");
		}
	}
	if (ncols != r->ncols)
		return 1;
	if (r->nvals + (size_t)ncols > r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		while (cap < r->nvals + (size_t)ncols)
			cap *= 2;
		char **v = realloc(r->vals, cap * sizeof *v);
		if (!v)
			return 1;
		r->vals = v;
		r->cap = cap;
	}
	for (int k = 0; k < ncols; k++)
		r->vals[r->nvals++] = values[k] ? xstrdup(values[k]) : NULL;
	return 0;
}

static void run_txn_request(handle *h, job *j)
{
	int rc;
	int64_t rows = 0;
	switch (j->op) {
	case T_EXEC:
		rc = inbox_txn_exec(h->txn, j->s[0], j->nparams,
		                    (const char *const *)j->params,
		                    j->i[0] ? NULL : &rows);
		j->out_i[0] = rows;
		break;
	case T_QUERY:
		rc = inbox_txn_query(h->txn, j->s[0], j->nparams,
		                     (const char *const *)j->params, row_cb,
		                     &j->rows);
		break;
	case T_UPSERT: {
		/* s0 table, s1 key column, s2 key value, s3 version column;
		 * params: ncols column names then ncols values */
		int n = j->nparams / 2, applied = 0;
		rc = inbox_txn_upsert_versioned(
		    h->txn, j->s[0], j->s[1], j->s[2], j->s[3], j->i[0], n,
		    (const char *const *)j->params,
		    (const char *const *)j->params + n, &applied);
		j->out_i[0] = applied;
		break;
	}
	case T_OUTBOX: {
		inbox_outbox_effect e = INBOX_OUTBOX_EFFECT_INIT;
		char key[INBOX_OUTBOX_KEY_LEN + 1] = "";
		int added = 0;
		/* params: step kind method url headers body reconcile_url
		 * key_header */
		const char *const *p = (const char *const *)j->params;
		e.step = p[0];
		e.kind = p[1];
		e.method = p[2];
		e.url = p[3];
		e.headers = p[4];
		e.body = p[5];
		e.body_len = (size_t)j->i[1];
		e.reconcile_url = p[6];
		e.key_header = p[7];
		e.idempotent = (int)j->i[0];
		e.max_attempts = (int)j->i[2];
		rc = inbox_txn_outbox_add(h->txn, &e, key, &added);
		j->out_i[0] = added;
		j->out_s = xstrdup(key);
		break;
	}
	case T_RESULT:
		rc = set_result_hex(h->txn, j->s[0], j->s[1]);
		if (rc < 0) { /* the call's own error, not the store's */
			j->rc = rc;
			j->err =
			    xstrdup(rc == INBOX_ERR_TOO_LARGE
			                ? "the result exceeds the consumer's "
			                  "maxResultBytes"
			                : inbox_strerror(rc));
			rc = 0;
		}
		break;
	default:
		rc = INBOX_ERR_INVALID;
	}
	if (rc < 0)
		fail_store(h, j, rc);
	if (j->id)
		finish(h, j);
	else
		job_free(j); /* nobody waits: a deferred exec (the library
		                treats a failed one as RETRY) */
}

static int64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* How long the worker watches for a handler's next request before it
 * sleeps on cv. A handler's requests and its verdict usually come within
 * microseconds of the event that caused them (the message posted, the
 * answer to its previous request): sleeping and being woken costs about
 * as much again per request on a virtual machine (a futex wake of an
 * idle vCPU), twice per message. The watch costs this thread's CPU only
 * while a handler runs; a handler that awaits something else (a timer,
 * the network) finds it asleep. */
#ifndef TXQ_SPIN_NS
#define TXQ_SPIN_NS 100000
#endif

/* The next request of the running handler, waiting for it. */
static job *txq_wait(handle *h)
{
	unsigned seen =
	    atomic_load_explicit(&h->txq_pushed, memory_order_acquire);
	int64_t until = 0;
	for (unsigned k = 0;; k++) {
		pthread_mutex_lock(&h->mu);
		job *j = q_pop(&h->txq);
		pthread_mutex_unlock(&h->mu);
		if (j)
			return j;
		if (k == 0)
			until = mono_ns() + TXQ_SPIN_NS;
		else if (mono_ns() >= until)
			break;
		/* watch the counter, not the queue: no lock while spinning */
		for (int n = 0; n < 256; n++) {
			if (atomic_load_explicit(&h->txq_pushed,
			                         memory_order_acquire) != seen)
				break;
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		}
		seen =
		    atomic_load_explicit(&h->txq_pushed, memory_order_acquire);
#ifndef TXQ_NO_YIELD
		/* between rounds of ~10 us, a thread waiting for this CPU
		 * (the main thread, the server, anyone on a busy machine)
		 * runs first */
		sched_yield();
#endif
	}
	pthread_mutex_lock(&h->mu);
	while (!h->txq.head)
		pthread_cond_wait(&h->cv, &h->mu);
	job *j = q_pop(&h->txq);
	pthread_mutex_unlock(&h->mu);
	return j;
}

/* Copy what JS is told of a message. 0, or -1 out of memory. */
static int hcall_fill(handle *h, hcall *hc, const inbox_msg *msg)
{
	const inbox_delivery *d = inbox_msg_delivery(msg);
	size_t len = 0;
	const char *p = inbox_msg_payload(msg, &len);
	uint64_t tok = d ? d->source_token : 0;
	hc->job_id = h->cur_job;
	hc->index = (int64_t)tok;
	hc->attempt = inbox_msg_attempt(msg);
	hc->key = xstrdup(inbox_msg_key(msg));
	hc->id = xstrdup(inbox_msg_id(msg));
	hc->fp = xstrdup(inbox_msg_fingerprint(msg));
	hc->payload = xmemdup(p ? p : "", p ? len : 0);
	hc->len = p ? len : 0;
	return hc->key && hc->id && hc->fp && hc->payload ? 0 : -1;
}

/* The consumer's on_handlers hook: post the pass's handler calls to the
 * main thread at once (one wake of it per pass, not one per message). JS
 * runs them one after another, tagging each request and verdict with
 * the pass and the message's place in it; c_handler serves message k's
 * requests until k's verdict. A pass run again (the batch rolled back)
 * gets a new tag: what is left of the old pass is thrown away. */
static void c_hook(const inbox_msg *const *msgs, size_t n, void *payload)
{
	handle *h = payload;
	h->pass = 0;
	if (!h->cur_has_handler)
		return; /* c_handler answers OK without JS */
	if (++h->pass_seq == 0)
		h->pass_seq = 1;
	h->pass = h->pass_seq;
	h->pass_next = 0;
	h->pass_unposted = 1;
	hcall *a = calloc(n, sizeof *a);
	ev *e = calloc(1, sizeof *e);
	if (!a || !e) {
		free(a);
		free(e);
		return;
	}
	for (size_t k = 0; k < n; k++)
		if (hcall_fill(h, &a[k], msgs[k]) < 0) {
			hcalls_free(a, n);
			free(e);
			return;
		}
	e->kind = 3;
	e->h = a;
	e->nh = n;
	e->pass = h->pass;
	if (tsfn_post(h, e) != napi_ok) {
		hcalls_free(a, n);
		free(e);
		return;
	}
	h->pass_unposted = 0;
}

/* A request of a pass (or of a message of it) that is over: refused. */
static void drop_stale(handle *h, job *j)
{
	if (!j->id) {
		job_free(j);
		return;
	}
	j->rc = INBOX_ERR_STATE;
	j->err = xstrdup("the handler's transaction is over (its batch "
	                 "was rolled back and is run again)");
	finish(h, j);
}

/* Whether request j belongs to the message c_handler serves now. */
static int is_current(const handle *h, const job *j, int64_t k)
{
	return (uint32_t)j->f[6] == h->pass && (int64_t)j->f[7] == k;
}

/* The C handler: hand the message to JS (or find it handed over with its
 * pass, by c_hook), serve its requests, return its verdict. */
static int c_handler(inbox_txn *txn, const inbox_msg *msg, void *payload)
{
	handle *h = payload;
	if (!h->cur_has_handler)
		return INBOX_HANDLER_OK;
	int64_t k = -1; /* this message's place in the pass */
	if (h->pass) {
		k = h->pass_next++;
		if (h->pass_unposted) {
			inbox_txn_set_reason(txn, "out of memory: the handler "
			                          "was not called");
			return INBOX_HANDLER_RETRY;
		}
	} else {
		hcall *hc = calloc(1, sizeof *hc);
		ev *e = calloc(1, sizeof *e);
		if (!hc || !e || hcall_fill(h, hc, msg) < 0) {
			hcall_free(hc);
			free(e);
			return INBOX_HANDLER_RETRY;
		}
		e->kind = 1;
		e->h = hc;
		if (tsfn_post(h, e) != napi_ok) {
			hcall_free(hc);
			free(e);
			return INBOX_HANDLER_RETRY;
		}
	}
	h->txn = txn;
	int verdict = INBOX_HANDLER_RETRY;
	for (;;) {
		job *j = txq_wait(h);
		if (h->pass && !is_current(h, j, k)) {
			drop_stale(h, j);
			continue;
		}
		if (j->op == T_DONE) {
			verdict = (int)j->i[0];
			if (j->s[0])
				inbox_txn_set_reason(txn, j->s[0]);
			if (j->i[1])
				inbox_txn_mark_stale(txn);
			job_free(j);
			break;
		}
		run_txn_request(h, j);
	}
	h->txn = NULL;
	return verdict;
}

/* After a batch: requests left of a pass that was rolled back (its
 * handlers still running in JS when the batch ended) are refused. */
static void drain_stale(handle *h)
{
	for (;;) {
		pthread_mutex_lock(&h->mu);
		job *j = q_pop(&h->txq);
		pthread_mutex_unlock(&h->mu);
		if (!j)
			break;
		drop_stale(h, j);
	}
}

static lease_ent *lease_find(handle *h, int64_t id, lease_ent ***prevp)
{
	lease_ent **pp = &h->leases;
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			if (prevp)
				*prevp = pp;
			return *pp;
		}
	return NULL;
}

static void lease_drop(handle *h, int64_t id)
{
	lease_ent **pp = NULL;
	lease_ent *le = lease_find(h, id, &pp);
	if (le) {
		*pp = le->next;
		inbox_lease_free(le->l);
		free(le);
	}
}

static int dlq_cb(const inbox_admin_dead_letter *dl, void *payload)
{
	job *j = payload;
	if (j->ndl == j->capdl) {
		size_t cap = j->capdl ? j->capdl * 2 : 16;
		dl_copy *n = realloc(j->dls, cap * sizeof *n);
		if (!n)
			return 1;
		j->dls = n;
		j->capdl = cap;
	}
	inbox_admin_dead_letter *d = &j->dls[j->ndl++].dl;
	*d = *dl;
	d->consumer = xstrdup(dl->consumer);
	d->key = xstrdup(dl->key);
	d->message_id = xstrdup(dl->message_id);
	d->payload = dl->payload ? xmemdup(dl->payload, dl->payload_len) : NULL;
	d->headers = xstrdup(dl->headers);
	d->position = xstrdup(dl->position);
	d->reason = xstrdup(dl->reason);
	d->fingerprint = xstrdup(dl->fingerprint);
	d->stored_fingerprint = xstrdup(dl->stored_fingerprint);
	return 0;
}

static void run_open(handle *h, job *j)
{
	/* s0 url, s1 table prefix, s2 pg schema; i0 auto_migrate,
	 * i1 busy timeout, i2 lock timeout, i3 statement timeout;
	 * consumer: s3 name, s4 key template, s5 fingerprint pointer;
	 * params[0] id pointer, params[1] json schema; i4 retention,
	 * i5 max attempts, i6 replay policy, i7 batch timeout; f0 lease
	 * ms, f1 max payload, f2 max result bytes (0: the defaults) */
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = j->s[1];
	so.schema = j->s[2];
	so.auto_migrate = (int)j->i[0];
	if (j->i[1] > 0)
		so.busy_timeout_ms = (int)j->i[1];
	so.lock_timeout_ms = j->i[2];
	so.statement_timeout_ms = j->i[3];
	int rc = inbox_store_open(&h->st, j->s[0], &so);
	if (rc < 0) {
		fail_store(h, j, rc);
		inbox_store_close(h->st);
		h->st = NULL;
		return;
	}
	if (!j->s[3])
		return;
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = j->s[3];
	co.key_template = j->s[4];
	co.fingerprint_pointer = j->s[5];
	co.id_pointer = j->nparams > 0 ? j->params[0] : NULL;
	co.json_schema = j->nparams > 1 ? j->params[1] : NULL;
	if (j->i[4] > 0)
		co.retention_seconds = j->i[4];
	if (j->i[5] > 0)
		co.max_attempts = (int)j->i[5];
	if (j->f[0] > 0)
		co.lease_ms = (int64_t)j->f[0];
	if (j->f[1] > 0)
		co.max_payload = (size_t)j->f[1];
	if (j->f[2] > 0)
		co.max_result_bytes = (size_t)j->f[2];
	co.replay_policy = (inbox_replay_policy)j->i[6];
	co.batch_timeout_ms = j->i[7];
	co.handler = c_handler;
	co.handler_payload = h;
	co.on_handlers = c_hook;
	char err[512] = "";
	rc = inbox_consumer_open(&h->c, h->st, &co, err, sizeof err);
	if (rc < 0) {
		if (*err) {
			j->rc = rc;
			j->err = xstrdup(err);
		} else {
			fail_store(h, j, rc);
		}
		inbox_store_close(h->st);
		h->st = NULL;
		h->c = NULL;
	}
}

/* s0 consumer; i0 timeout, i1 connect timeout, i2 backoff, i3 max
 * attempts, i4 batch, i5 poll ms, i6 concurrency (0: defaults) */
static void dispatcher_options(inbox_dispatcher_options *o, const job *j)
{
	o->consumer = j->s[0];
	if (j->i[0] > 0)
		o->timeout_ms = j->i[0];
	if (j->i[1] > 0)
		o->connect_timeout_ms = j->i[1];
	if (j->i[2] > 0)
		o->backoff_ms = j->i[2];
	if (j->i[3] > 0)
		o->max_attempts = (int)j->i[3];
	if (j->i[4] > 0)
		o->batch = (int)j->i[4];
	if (j->i[5] > 0)
		o->poll_ms = j->i[5];
	if (j->i[6] > 0)
		o->concurrency = (int)j->i[6];
}

/* Publishes the counters (stats() reads them while it runs) and tells
 * inbox_dispatcher_run() whether stop() was called. */
static int dispatch_tick(inbox_dispatcher *d, inbox_dispatch_event ev,
                         void *payload)
{
	handle *h = payload;
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	inbox_dispatcher_stats(d, &s);
	pthread_mutex_lock(&h->mu);
	h->dstats = s;
	pthread_mutex_unlock(&h->mu);
	return h->stop != 0;
}

/* A row's outcome committed: posted to dispatcher.events()'s readers,
 * only while there are some (h->events). The URL is redacted (a token in
 * it never reaches JS logs). */
static void dispatch_event(const inbox_outbox_item *it,
                           const inbox_effect_result *res,
                           inbox_outbox_state state, const char *reason,
                           void *payload)
{
	handle *h = payload;
	if (!h->events)
		return;
	ev *e = calloc(1, sizeof *e);
	oevent *o = calloc(1, sizeof *o);
	if (!e || !o) {
		free(e);
		free(o);
		return;
	}
	o->id = it->id;
	o->consumer = xstrdup(it->consumer);
	o->key = xstrdup(it->key);
	o->step = xstrdup(it->step);
	o->idempotency_key = xstrdup(it->idempotency_key);
	o->url = it->url ? inbox_redact_url(it->url) : NULL;
	o->reason = xstrdup(reason);
	o->attempts = it->attempts;
	o->state = state;
	if (res) {
		o->attempted = 1;
		o->outcome = res->outcome;
		o->status = res->status;
		o->error = res->error[0] ? xstrdup(res->error) : NULL;
	}
	e->kind = 2;
	e->o = o;
	post(h, e);
}

/* A running dispatcher on this handle's own store and thread (a libuv
 * pool thread would be held for as long as it runs): until stop(). */
static void run_dispatcher(handle *h, job *j)
{
	inbox_dispatcher_options o = INBOX_DISPATCHER_OPTIONS_INIT;
	inbox_dispatcher *d = NULL;
	char err[512] = "";
	dispatcher_options(&o, j);
	o.on_tick = dispatch_tick;
	o.tick_payload = h;
	o.on_event = dispatch_event;
	o.event_payload = h;
	int rc = inbox_dispatcher_open(&d, h->st, &o, err, sizeof err);
	if (rc < 0) {
		j->rc = rc;
		j->err = xstrdup(*err ? err : inbox_strerror(rc));
		return;
	}
	pthread_mutex_lock(&h->mu);
	memset(&h->dstats, 0, sizeof h->dstats);
	h->dstats.version = INBOX_OUTBOX_STATS_VERSION;
	h->running = 1;
	pthread_mutex_unlock(&h->mu);
	rc = inbox_dispatcher_run(d, &h->stop);
	j->ostats.version = INBOX_OUTBOX_STATS_VERSION;
	inbox_dispatcher_stats(d, &j->ostats);
	pthread_mutex_lock(&h->mu);
	h->dstats = j->ostats;
	h->running = 0;
	pthread_mutex_unlock(&h->mu);
	if (rc < 0) {
		j->rc = rc;
		j->err = xstrdup(inbox_dispatcher_errmsg(d));
	}
	inbox_dispatcher_close(d);
}

static void run_job(handle *h, job *j)
{
	int rc = 0;
	if (!h->st && j->op != OP_OPEN && j->op != OP_CLOSE) {
		j->rc = INBOX_ERR_STATE;
		j->err = xstrdup("the handle is not open");
		return;
	}
	if (!h->c &&
	    (j->op == OP_PROCESS || j->op == OP_BATCH || j->op == OP_STATS ||
	     j->op == OP_DLQ_REPLAY || j->op == OP_LEASE_ACQUIRE)) {
		j->rc = INBOX_ERR_STATE;
		j->err = xstrdup("not a consumer handle");
		return;
	}
	switch (j->op) {
	case OP_OPEN:
		run_open(h, j);
		return;
	case OP_CLOSE:
		while (h->leases)
			lease_drop(h, h->leases->id);
		inbox_consumer_close(h->c);
		inbox_store_close(h->st);
		h->c = NULL;
		h->st = NULL;
		return;
	case OP_EXEC: {
		int64_t rows = 0;
		rc = inbox_store_exec(h->st, j->s[0], j->nparams,
		                      (const char *const *)j->params, &rows);
		j->out_i[0] = rows;
		break;
	}
	case OP_QUERY:
		rc = inbox_store_query(h->st, j->s[0], j->nparams,
		                       (const char *const *)j->params, row_cb,
		                       &j->rows);
		break;
	case OP_PROCESS:
	case OP_BATCH: {
		j->res = calloc(j->nd, sizeof *j->res);
		inbox_result *r = calloc(j->nd, sizeof *r);
		if (!j->res || !r) {
			free(r);
			rc = INBOX_ERR_NOMEM;
			break;
		}
		r[0].version = INBOX_RESULT_VERSION;
		for (size_t k = 0; k < j->nd; k++)
			j->d[k].source_token = k; /* the handler's msg.index */
		if (j->op == OP_PROCESS)
			rc = inbox_consumer_process(h->c, j->d, r);
		else
			rc = inbox_consumer_process_batch(h->c, j->d, j->nd, r);
		if (rc >= 0)
			for (size_t k = 0; k < j->nd; k++)
				copy_result(&j->res[k], &r[k]);
		free(r);
		if (rc < 0) {
			fail_consumer(h, j, rc);
			return;
		}
		return;
	}
	case OP_STATS:
		j->stats.version = INBOX_STATS_VERSION;
		inbox_consumer_stats(h->c, &j->stats);
		return;
	case OP_ADMIN_STATS:
		j->astats.version = INBOX_ADMIN_STATS_VERSION;
		rc = inbox_admin_stats_read(h->st, j->s[0], &j->astats);
		break;
	case OP_DLQ_LIST: {
		inbox_admin_dlq_filter f = INBOX_ADMIN_DLQ_FILTER_INIT;
		f.consumer = j->s[0];
		f.key = j->s[1];
		f.after_id = j->i[0];
		f.limit = (int)j->i[1];
		f.pending_only = (int)j->i[2];
		f.messages_only = (int)j->i[3];
		rc = inbox_admin_dlq_list(h->st, &f, dlq_cb, j);
		break;
	}
	case OP_DLQ_GET: {
		inbox_admin_dead_letter *dl = NULL;
		rc = inbox_admin_dlq_get(h->st, j->i[0], j->s[0], &dl);
		if (rc >= 0) {
			dlq_cb(dl, j);
			inbox_admin_dead_letter_free(dl);
		}
		break;
	}
	case OP_DLQ_REPLAY: {
		inbox_result r = INBOX_RESULT_INIT;
		j->nd = 0;
		j->res = calloc(1, sizeof *j->res);
		if (!j->res) {
			rc = INBOX_ERR_NOMEM;
			break;
		}
		rc = inbox_admin_dlq_replay(h->st, h->c, j->i[0], &r);
		if (rc >= 0)
			copy_result(j->res, &r);
		if (rc < 0) {
			fail_consumer(h, j, rc);
			return;
		}
		return;
	}
	case OP_DLQ_DROP:
		rc = inbox_admin_dlq_drop(h->st, j->i[0]);
		break;
	case OP_INSPECT:
		rc = inbox_admin_inspect(h->st, j->s[0], j->s[1], &j->record);
		if (rc == INBOX_ERR_NOTFOUND)
			return; /* null */
		break;
	case OP_PURGE: {
		int64_t deleted = 0;
		rc = inbox_admin_purge(h->st, j->s[0], j->i[0], (int)j->i[1],
		                       (int)j->i[2], NULL, NULL, &deleted);
		j->out_i[0] = deleted;
		break;
	}
	case OP_SCHEMA_VERSION: {
		int v = 0;
		rc = inbox_store_schema_version(h->st, &v);
		j->out_i[0] = v;
		break;
	}
	case OP_LEASE_ACQUIRE: {
		/* a duplicate carries the key's stored result, as a
		 * processing call's does */
		inbox_lease *l = NULL;
		inbox_result r = INBOX_RESULT_INIT;
		j->res = calloc(1, sizeof *j->res);
		if (!j->res) {
			rc = INBOX_ERR_NOMEM;
			break;
		}
		rc = inbox_lease_acquire_result(h->c, j->d, &l, &r);
		if (rc >= 0)
			copy_result(j->res, &r);
		if (rc >= 0 && l) {
			lease_ent *le = calloc(1, sizeof *le);
			if (!le) {
				inbox_lease_free(l);
				rc = INBOX_ERR_NOMEM;
				break;
			}
			le->l = l;
			le->id = ++h->next_lease;
			le->next = h->leases;
			h->leases = le;
			j->out_i[1] = le->id;
			j->out_i[2] = inbox_lease_fence(l);
		}
		if (rc < 0) {
			fail_consumer(h, j, rc);
			return;
		}
		return;
	}
	case OP_LEASE_EXTEND:
	case OP_LEASE_COMPLETE:
	case OP_LEASE_FAIL: {
		lease_ent *le = lease_find(h, j->i[0], NULL);
		if (!le) {
			j->rc = INBOX_ERR_STATE;
			j->err = xstrdup("the lease was completed, failed or "
			                 "released already");
			return;
		}
		if (j->op == OP_LEASE_EXTEND) {
			rc = inbox_lease_extend(le->l);
		} else if (j->op == OP_LEASE_FAIL) {
			rc = inbox_lease_fail(le->l, j->s[0]);
			if (rc >= 0 || rc == INBOX_ERR_FENCED)
				lease_drop(h, j->i[0]);
		} else {
			inbox_outcome o = INBOX_OUTCOME_NONE;
			rc = inbox_lease_complete(
			    le->l, j->has_handler ? c_handler : NULL, h, &o);
			j->out_i[0] = o;
			if (rc >= 0 || rc == INBOX_ERR_FENCED)
				lease_drop(h, j->i[0]);
		}
		break;
	}
	case OP_LEASE_FREE:
		lease_drop(h, j->i[0]);
		return;
	case OP_DISPATCH_RUN:
		run_dispatcher(h, j);
		return;
	case OP_DISPATCH_ONCE: {
		inbox_dispatcher_options o = INBOX_DISPATCHER_OPTIONS_INIT;
		inbox_dispatcher *d = NULL;
		char err[512] = "";
		dispatcher_options(&o, j);
		rc = inbox_dispatcher_open(&d, h->st, &o, err, sizeof err);
		if (rc < 0) {
			j->rc = rc;
			j->err = xstrdup(*err ? err : inbox_strerror(rc));
			return;
		}
		int handled = 0;
		rc = inbox_dispatcher_run_once(d, &handled);
		j->out_i[0] = handled;
		j->ostats.version = INBOX_OUTBOX_STATS_VERSION;
		inbox_dispatcher_stats(d, &j->ostats);
		if (rc < 0) {
			j->rc = rc;
			j->err = xstrdup(inbox_dispatcher_errmsg(d));
		}
		inbox_dispatcher_close(d);
		return;
	}
	case OP_OUTBOX_COUNTS:
		j->counts.version = INBOX_OUTBOX_COUNTS_VERSION;
		rc = inbox_outbox_counts_get(h->st, j->s[0], &j->counts);
		break;
	default:
		rc = INBOX_ERR_INVALID;
	}
	if (rc < 0)
		fail_store(h, j, rc);
}

static void *worker_main(void *arg)
{
	handle *h = arg;
	for (;;) {
		pthread_mutex_lock(&h->mu);
		while (!h->jobs.head)
			pthread_cond_wait(&h->cv, &h->mu);
		job *j = q_pop(&h->jobs);
		pthread_mutex_unlock(&h->mu);
		int op = j->op;
		h->cur_job = j->id;
		h->cur_has_handler = j->has_handler;
		h->pass = 0;
		run_job(h, j);
		/* a batch (process, processBatch, a replay) may have posted
		 * passes: none is current now, and what is left of them is
		 * refused */
		h->pass = 0;
		drain_stale(h);
		if (j->id)
			finish(h, j);
		else
			job_free(j);
		if (op == OP_CLOSE)
			break;
	}
	pthread_mutex_lock(&h->mu);
	if (!h->worker_gone)
		napi_release_threadsafe_function(h->tsfn, napi_tsfn_release);
	h->exited = 1;
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Main-thread side: converting results                                 */
/* ------------------------------------------------------------------ */

static napi_value str_or_null(napi_env env, const char *s)
{
	napi_value v;
	if (s)
		napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
	else
		napi_get_null(env, &v);
	return v;
}

static void set(napi_env env, napi_value o, const char *k, napi_value v)
{
	napi_set_named_property(env, o, k, v);
}

static void set_str(napi_env env, napi_value o, const char *k, const char *s)
{
	set(env, o, k, str_or_null(env, s));
}

static void set_num(napi_env env, napi_value o, const char *k, double d)
{
	napi_value v;
	napi_create_double(env, d, &v);
	set(env, o, k, v);
}

static void set_bool(napi_env env, napi_value o, const char *k, int b)
{
	napi_value v;
	napi_get_boolean(env, b != 0, &v);
	set(env, o, k, v);
}

static napi_value make_error(napi_env env, int rc, const char *msg,
                             const char *sqlstate)
{
	napi_value code, m, err;
	napi_create_string_utf8(env, inbox_err_name(rc), NAPI_AUTO_LENGTH,
	                        &code);
	napi_create_string_utf8(env, msg && *msg ? msg : inbox_strerror(rc),
	                        NAPI_AUTO_LENGTH, &m);
	napi_create_error(env, code, m, &err);
	set_num(env, err, "errno", rc);
	if (sqlstate)
		set_str(env, err, "detailCode", sqlstate);
	return err;
}

static napi_value result_obj(napi_env env, const res_copy *r)
{
	napi_value o;
	napi_create_object(env, &o);
	set_str(env, o, "outcome", inbox_outcome_name(r->outcome));
	set_bool(env, o, "ackable", inbox_outcome_ackable(r->outcome));
	set_num(env, o, "attempts", r->attempts);
	set_str(env, o, "key", r->key);
	set_str(env, o, "reason", r->reason);
	if (r->dead_letter_id)
		set_num(env, o, "deadLetterId", (double)r->dead_letter_id);
	else
		set(env, o, "deadLetterId", str_or_null(env, NULL));
	/* the stored result, raw: lib/index.js decodes it by its type */
	if (r->result) {
		napi_value b;
		void *data = NULL;
		napi_create_buffer_copy(env, r->result_len,
		                        r->result_len ? r->result : "", &data,
		                        &b);
		set(env, o, "resultBytes", b);
	} else {
		set(env, o, "resultBytes", str_or_null(env, NULL));
	}
	set_str(env, o, "resultType", r->result_type);
	set_str(env, o, "firstOutcome",
	        r->first_outcome ? inbox_outcome_name(r->first_outcome) : NULL);
	return o;
}

/* { rows, rowCount, fields: [{ name }] }: each row an object keyed by
 * column name (a repeated name: the last column wins, as in pg), or with
 * as_arrays an array of the column texts in order. */
static napi_value rows_obj(napi_env env, const rowset *r, int as_arrays)
{
	napi_value o, arr, fields, names[64];
	size_t nrows = r->ncols ? r->nvals / (size_t)r->ncols : 0;
	napi_value *nv = names;
	if (!as_arrays && r->ncols > 64 &&
	    !(nv = malloc((size_t)r->ncols * sizeof *nv)))
		as_arrays = 1;
	napi_create_object(env, &o);
	napi_create_array_with_length(env, (size_t)r->ncols, &fields);
	for (int c = 0; c < r->ncols && r->names; c++) {
		napi_value f, n;
		napi_create_object(env, &f);
		napi_create_string_utf8(env, r->names[c], NAPI_AUTO_LENGTH, &n);
		set(env, f, "name", n);
		napi_set_element(env, fields, (uint32_t)c, f);
		if (!as_arrays)
			nv[c] = n;
	}
	napi_create_array_with_length(env, nrows, &arr);
	for (size_t i = 0; i < nrows; i++) {
		napi_value row;
		const size_t base = i * (size_t)r->ncols;
		if (as_arrays)
			napi_create_array_with_length(env, (size_t)r->ncols,
			                              &row);
		else
			napi_create_object(env, &row);
		for (int c = 0; c < r->ncols; c++) {
			napi_value v =
			    str_or_null(env, r->vals[base + (size_t)c]);
			if (as_arrays)
				napi_set_element(env, row, (uint32_t)c, v);
			else
				napi_set_property(env, row, nv[c], v);
		}
		napi_set_element(env, arr, (uint32_t)i, row);
	}
	if (nv != names)
		free(nv);
	set(env, o, "rows", arr);
	set_num(env, o, "rowCount", (double)nrows);
	set(env, o, "fields", fields);
	return o;
}

static napi_value dl_obj(napi_env env, const inbox_admin_dead_letter *d)
{
	napi_value o;
	napi_create_object(env, &o);
	set_num(env, o, "id", (double)d->id);
	set_str(env, o, "consumer", d->consumer);
	set_str(env, o, "key", d->key);
	set_str(env, o, "messageId", d->message_id);
	if (d->payload) {
		napi_value b;
		void *data = NULL;
		napi_create_buffer_copy(env, d->payload_len, d->payload, &data,
		                        &b);
		set(env, o, "payload", b);
	} else {
		set(env, o, "payload", str_or_null(env, NULL));
	}
	set_num(env, o, "payloadLength", (double)d->payload_len);
	set_str(env, o, "headers", d->headers);
	set_str(env, o, "position", d->position);
	set_num(env, o, "attempts", d->attempts);
	set_str(env, o, "reason", d->reason);
	set_str(env, o, "fingerprint", d->fingerprint);
	set_str(env, o, "storedFingerprint", d->stored_fingerprint);
	set_num(env, o, "createdAt", (double)d->created_at_ms);
	set_num(env, o, "replayedAt", (double)d->replayed_at_ms);
	set_num(env, o, "deliveries", (double)d->deliveries);
	set_num(env, o, "lastSeenAt", (double)d->last_seen_at_ms);
	return o;
}

static napi_value outbox_stats_obj(napi_env env, const inbox_outbox_stats *s)
{
	napi_value o;
	napi_create_object(env, &o);
	set_num(env, o, "claimed", (double)s->claimed);
	set_num(env, o, "attempts", (double)s->attempts);
	set_num(env, o, "done", (double)s->done);
	set_num(env, o, "retries", (double)s->retries);
	set_num(env, o, "unknownOutcomes", (double)s->unknown_outcomes);
	set_num(env, o, "leaseExpired", (double)s->lease_expired);
	set_num(env, o, "reconciliations", (double)s->reconciliations);
	set_num(env, o, "deadLetters", (double)s->dead_letters);
	set_num(env, o, "fenced", (double)s->fenced);
	set_num(env, o, "released", (double)s->released);
	return o;
}

static napi_value job_value(napi_env env, job *j)
{
	napi_value o = NULL;
	switch (j->op) {
	case OP_EXEC:
	case T_EXEC:
		napi_create_object(env, &o);
		set_num(env, o, "rowCount", (double)j->out_i[0]);
		return o;
	case OP_QUERY:
	case T_QUERY:
		return rows_obj(env, &j->rows, j->i[0] != 0);
	case T_UPSERT:
		napi_get_boolean(env, j->out_i[0] != 0, &o);
		return o;
	case T_OUTBOX:
		napi_create_object(env, &o);
		set_str(env, o, "idempotencyKey", j->out_s);
		set_bool(env, o, "added", (int)j->out_i[0]);
		return o;
	case OP_PROCESS:
	case OP_DLQ_REPLAY:
		return result_obj(env, &j->res[0]);
	case OP_BATCH:
		napi_create_array_with_length(env, j->nd, &o);
		for (size_t k = 0; k < j->nd; k++)
			napi_set_element(env, o, (uint32_t)k,
			                 result_obj(env, &j->res[k]));
		return o;
	case OP_STATS: {
		const inbox_stats *s = &j->stats;
		napi_create_object(env, &o);
		set_num(env, o, "applied", (double)s->applied);
		set_num(env, o, "duplicates", (double)s->duplicates);
		set_num(env, o, "conflicts", (double)s->conflicts);
		set_num(env, o, "stale", (double)s->stale);
		set_num(env, o, "retries", (double)s->retries);
		set_num(env, o, "deadLetters", (double)s->dead_letters);
		set_num(env, o, "leaseTakeovers", (double)s->lease_takeovers);
		set_num(env, o, "inProgress", (double)s->in_progress);
		set_num(env, o, "fenced", (double)s->fenced);
		set_num(env, o, "batches", (double)s->batches);
		set_num(env, o, "messages", (double)s->messages);
		set_num(env, o, "transientRetries",
		        (double)s->transient_retries);
		set_num(env, o, "processingSecondsSum",
		        s->processing_seconds_sum);
		set_num(env, o, "processingCount", (double)s->processing_count);
		return o;
	}
	case OP_ADMIN_STATS: {
		const inbox_admin_stats *s = &j->astats;
		napi_create_object(env, &o);
		set_num(env, o, "records", (double)s->records);
		set_num(env, o, "completed", (double)s->completed);
		set_num(env, o, "processing", (double)s->processing);
		set_num(env, o, "failed", (double)s->failed);
		set_num(env, o, "dead", (double)s->dead);
		set_num(env, o, "oldestAgeMs", (double)s->oldest_age_ms);
		set_num(env, o, "retentionSeconds",
		        (double)s->retention_seconds);
		set_num(env, o, "expired", (double)s->expired);
		set_num(env, o, "deadLetters", (double)s->dead_letters);
		set_num(env, o, "deadLettersPending",
		        (double)s->dead_letters_pending);
		set_num(env, o, "conflicts", (double)s->conflicts);
		set_num(env, o, "replayed", (double)s->replayed);
		set_num(env, o, "outboxPending", (double)s->outbox_pending);
		return o;
	}
	case OP_DLQ_LIST:
		napi_create_array_with_length(env, j->ndl, &o);
		for (size_t k = 0; k < j->ndl; k++)
			napi_set_element(env, o, (uint32_t)k,
			                 dl_obj(env, &j->dls[k].dl));
		return o;
	case OP_DLQ_GET:
		return j->ndl ? dl_obj(env, &j->dls[0].dl)
		              : str_or_null(env, NULL);
	case OP_INSPECT: {
		const inbox_admin_record *r = j->record;
		if (!r)
			return str_or_null(env, NULL);
		napi_create_object(env, &o);
		set_str(env, o, "consumer", r->consumer);
		set_str(env, o, "key", r->key);
		set_str(env, o, "status", r->status);
		set_str(env, o, "fingerprint", r->fingerprint);
		set_str(env, o, "messageId", r->message_id);
		set_num(env, o, "attempts", r->attempts);
		set_num(env, o, "fence", (double)r->fence);
		set_num(env, o, "leaseUntil", (double)r->lease_until_ms);
		set_bool(env, o, "leaseExpired", r->lease_expired);
		set_num(env, o, "createdAt", (double)r->created_at_ms);
		set_num(env, o, "processedAt", (double)r->processed_at_ms);
		return o;
	}
	case OP_PURGE:
	case OP_SCHEMA_VERSION:
		napi_create_double(env, (double)j->out_i[0], &o);
		return o;
	case OP_LEASE_ACQUIRE:
		/* a result object (lib/index.js decodes its stored result)
		 * with the lease's id and fence when acquired */
		o = result_obj(env, j->res);
		if (j->out_i[1]) {
			set_num(env, o, "lease", (double)j->out_i[1]);
			set_num(env, o, "fence", (double)j->out_i[2]);
		}
		return o;
	case OP_LEASE_COMPLETE:
		napi_create_string_utf8(
		    env, inbox_outcome_name((inbox_outcome)j->out_i[0]),
		    NAPI_AUTO_LENGTH, &o);
		return o;
	case OP_DISPATCH_ONCE:
		o = outbox_stats_obj(env, &j->ostats);
		set_num(env, o, "handled", (double)j->out_i[0]);
		return o;
	case OP_DISPATCH_RUN:
		return outbox_stats_obj(env, &j->ostats);
	case OP_OUTBOX_COUNTS: {
		const inbox_outbox_counts *c = &j->counts;
		napi_create_object(env, &o);
		set_num(env, o, "pending", (double)c->pending);
		set_num(env, o, "inFlight", (double)c->in_flight);
		set_num(env, o, "failed", (double)c->failed);
		set_num(env, o, "unknown", (double)c->unknown);
		set_num(env, o, "dead", (double)c->dead);
		set_num(env, o, "oldestAgeSeconds", c->oldest_age_seconds);
		return o;
	}
	default:
		napi_get_undefined(env, &o);
		return o;
	}
}

static void maybe_free(handle *h)
{
	pthread_mutex_lock(&h->mu);
	int exited = h->exited;
	pthread_mutex_unlock(&h->mu);
	/* a worker still waiting (the environment torn down with the
	 * handle open) keeps its memory: the process is ending */
	if (h->js_gone && h->worker_gone && exited) {
		pthread_mutex_destroy(&h->mu);
		pthread_mutex_destroy(&h->tmu);
		pthread_cond_destroy(&h->cv);
		free(h);
	}
}

static void job_settled(napi_env env, handle *h, int op)
{
	if (op >= T_EXEC)
		return;
	if (--h->pending == 0) {
		uint32_t rc = 0;
		if (h->tsfn)
			napi_unref_threadsafe_function(env, h->tsfn);
		if (h->self)
			napi_reference_unref(env, h->self, &rc);
	}
}

/* The thread-safe function's callback: dispatch(obj, kind, id, a, b). */
/* The message a handler call hands to JS. */
static napi_value hcall_obj(napi_env env, const hcall *hc)
{
	napi_value m, p;
	napi_create_object(env, &m);
	set_num(env, m, "index", (double)hc->index);
	set_num(env, m, "attempt", hc->attempt);
	set_str(env, m, "key", hc->key);
	set_str(env, m, "id", hc->id);
	set_str(env, m, "fingerprint", hc->fp);
	napi_create_string_utf8(env, hc->payload, hc->len, &p);
	set(env, m, "payload", p);
	return m;
}

static void call_js(napi_env env, napi_value dispatch, void *context,
                    void *data)
{
	handle *h = context;
	ev *e = data;
	if (!env) { /* torn down */
		ev_drop(e);
		return;
	}
	napi_value obj = NULL, undef, argv[5];
	napi_get_undefined(env, &undef);
	if (h->self)
		napi_get_reference_value(env, h->self, &obj);
	if (e->kind == 0) {
		job *j = e->j;
		if (obj) {
			napi_create_uint32(env, 0, &argv[1]);
			napi_create_uint32(env, j->id, &argv[2]);
			if (j->rc < 0) {
				argv[3] =
				    make_error(env, j->rc, j->err, j->errcode);
				argv[4] = undef;
			} else {
				napi_get_null(env, &argv[3]);
				argv[4] = job_value(env, j);
			}
			argv[0] = obj;
			napi_call_function(env, undef, dispatch, 5, argv, NULL);
		}
		job_settled(env, h, j->op);
		job_free(j);
	} else if (e->kind == 2) {
		oevent *oe = e->o;
		if (obj) {
			napi_value m;
			napi_create_object(env, &m);
			set_num(env, m, "id", (double)oe->id);
			set_str(env, m, "consumer", oe->consumer);
			set_str(env, m, "key", oe->key);
			set_str(env, m, "step", oe->step);
			set_str(env, m, "idempotencyKey", oe->idempotency_key);
			set_str(env, m, "url", oe->url);
			set_str(env, m, "state",
			        inbox_outbox_state_name(oe->state));
			set_num(env, m, "attempts", oe->attempts);
			static const char *const names[] = {
			    NULL, "done", "retry", "unknown", "permanent"};
			set_str(env, m, "outcome",
			        oe->attempted && oe->outcome >= 1 &&
			                oe->outcome <= 4
			            ? names[oe->outcome]
			            : NULL);
			if (oe->attempted && oe->status)
				set_num(env, m, "status", oe->status);
			else
				set(env, m, "status", str_or_null(env, NULL));
			set_str(env, m, "error", oe->error);
			set_str(env, m, "reason", oe->reason);
			argv[0] = obj;
			napi_create_uint32(env, 2, &argv[1]);
			napi_create_uint32(env, 0, &argv[2]);
			argv[3] = undef;
			argv[4] = m;
			napi_call_function(env, undef, dispatch, 5, argv, NULL);
		}
		oevent_free(oe);
	} else if (e->kind == 3) {
		if (obj) {
			napi_value arr;
			napi_create_array_with_length(env, e->nh, &arr);
			for (size_t k = 0; k < e->nh; k++)
				napi_set_element(env, arr, (uint32_t)k,
				                 hcall_obj(env, &e->h[k]));
			argv[0] = obj;
			napi_create_uint32(env, 3, &argv[1]);
			napi_create_uint32(env, e->h[0].job_id, &argv[2]);
			argv[3] = arr;
			napi_create_uint32(env, e->pass, &argv[4]);
			napi_call_function(env, undef, dispatch, 5, argv, NULL);
		}
		hcalls_free(e->h, e->nh);
	} else {
		hcall *hc = e->h;
		if (obj) {
			napi_value m = hcall_obj(env, hc);
			argv[0] = obj;
			napi_create_uint32(env, 1, &argv[1]);
			napi_create_uint32(env, hc->job_id, &argv[2]);
			argv[3] = m;
			argv[4] = undef;
			napi_call_function(env, undef, dispatch, 5, argv, NULL);
		}
		hcall_free(hc);
	}
	free(e);
	/* an exception thrown by the dispatcher is reported by Node as an
	 * uncaught exception; the JS side never throws here */
}

static void tsfn_finalize(napi_env env, void *data, void *hint)
{
	handle *h = data;
	/* the worker may still run (a close queued by js_finalize while the
	 * environment goes away): it must not touch the tsfn from now on */
	pthread_mutex_lock(&h->mu);
	pthread_mutex_lock(&h->tmu);
	h->worker_gone = 1;
	h->tsfn = NULL;
	pthread_mutex_unlock(&h->tmu);
	pthread_mutex_unlock(&h->mu);
	maybe_free(h);
}

static void js_finalize(napi_env env, void *data, void *hint)
{
	handle *h = data;
	if (h->self) {
		napi_delete_reference(env, h->self);
		h->self = NULL;
	}
	h->js_gone = 1;
	if (!h->closed && !h->worker_gone) {
		/* not closed: close it now; nobody waits for the answer */
		job *j = calloc(1, sizeof *j);
		if (j) {
			j->op = OP_CLOSE;
			pthread_mutex_lock(&h->mu);
			q_push(&h->jobs, j);
			pthread_cond_broadcast(&h->cv);
			pthread_mutex_unlock(&h->mu);
			h->closed = 1;
		}
	}
	maybe_free(h);
}

/* ------------------------------------------------------------------ */
/* Main-thread side: argument parsing                                   */
/* ------------------------------------------------------------------ */

static int is_nullish(napi_env env, napi_value v)
{
	napi_valuetype t;
	if (!v || napi_typeof(env, v, &t) != napi_ok)
		return 1;
	return t == napi_undefined || t == napi_null;
}

/* A string (UTF-8, copied), a Buffer (bytes, copied) or null. *len gets
 * the length. Returns 0, or -1 with a JS exception pending. */
static int get_bytes(napi_env env, napi_value v, char **out, size_t *len)
{
	*out = NULL;
	if (len)
		*len = 0;
	if (is_nullish(env, v))
		return 0;
	napi_valuetype t;
	napi_typeof(env, v, &t);
	if (t == napi_string) {
		size_t n = 0;
		if (napi_get_value_string_utf8(env, v, NULL, 0, &n) != napi_ok)
			return -1;
		char *s = malloc(n + 1);
		if (!s)
			return -1;
		napi_get_value_string_utf8(env, v, s, n + 1, &n);
		*out = s;
		if (len)
			*len = n;
		return 0;
	}
	bool isbuf = false;
	napi_is_buffer(env, v, &isbuf);
	if (isbuf) {
		void *data = NULL;
		size_t n = 0;
		napi_get_buffer_info(env, v, &data, &n);
		*out = xmemdup(data, n);
		if (len)
			*len = n;
		return *out ? 0 : -1;
	}
	napi_throw_type_error(env, "INBOX_ERR_INVALID",
	                      "expected a string or a Buffer");
	return -1;
}

/* A C string: a string without U+0000, or null. */
static int get_cstr(napi_env env, napi_value v, char **out)
{
	size_t n = 0;
	if (get_bytes(env, v, out, &n) < 0)
		return -1;
	if (*out && strlen(*out) != n) {
		free(*out);
		*out = NULL;
		napi_throw_error(env, "INBOX_ERR_NUL",
		                 "text holds U+0000: not a C string");
		return -1;
	}
	return 0;
}

static int64_t get_i64(napi_env env, napi_value v)
{
	int64_t x = 0;
	if (!is_nullish(env, v))
		napi_get_value_int64(env, v, &x);
	return x;
}

static double get_f64(napi_env env, napi_value v)
{
	double x = 0;
	if (!is_nullish(env, v))
		napi_get_value_double(env, v, &x);
	return x;
}

/* params: an array of strings / null (JS converts numbers etc.). */
static int get_params(napi_env env, napi_value v, job *j)
{
	if (is_nullish(env, v))
		return 0;
	uint32_t n = 0;
	if (napi_get_array_length(env, v, &n) != napi_ok) {
		napi_throw_type_error(env, "INBOX_ERR_INVALID",
		                      "params must be an array");
		return -1;
	}
	j->params = calloc(n ? n : 1, sizeof *j->params);
	if (!j->params)
		return -1;
	for (uint32_t k = 0; k < n; k++) {
		napi_value e;
		napi_get_element(env, v, k, &e);
		j->nparams = (int)k + 1;
		if (get_cstr(env, e, &j->params[k]) < 0)
			return -1;
	}
	j->nparams = (int)n;
	return 0;
}

/* A delivery: [id, payload, headers, position, timestamp, count]. */
static int get_delivery(napi_env env, napi_value v, inbox_delivery *d)
{
	napi_value e[6];
	for (uint32_t k = 0; k < 6; k++)
		if (napi_get_element(env, v, k, &e[k]) != napi_ok) {
			napi_throw_type_error(env, "INBOX_ERR_INVALID",
			                      "bad delivery");
			return -1;
		}
	char *id = NULL, *payload = NULL, *headers = NULL, *pos = NULL;
	size_t plen = 0, idlen = 0;
	if (get_bytes(env, e[0], &id, &idlen) < 0 ||
	    get_bytes(env, e[1], &payload, &plen) < 0 ||
	    get_cstr(env, e[2], &headers) < 0 ||
	    get_cstr(env, e[3], &pos) < 0) {
		free(id);
		free(payload);
		free(headers);
		free(pos);
		return -1;
	}
	if (id && strlen(id) != idlen) {
		/* an id holding U+0000: refused, dead-lettered with why */
		free(id);
		id = NULL;
		d->refused = "message id holds U+0000";
	}
	d->version = INBOX_DELIVERY_VERSION;
	d->id = id;
	d->payload = payload ? payload : xstrdup("");
	d->payload_len = plen;
	d->headers = headers;
	d->position = pos;
	d->timestamp_ms = get_i64(env, e[4]);
	d->delivery_count = (int32_t)get_i64(env, e[5]);
	return 0;
}

static handle *unwrap(napi_env env, napi_value v)
{
	handle *h = NULL;
	if (napi_unwrap(env, v, (void **)&h) != napi_ok)
		return NULL;
	return h;
}

static void enqueue(napi_env env, handle *h, job *j)
{
	if (j->op < T_EXEC) {
		if (h->pending++ == 0) {
			uint32_t rc = 0;
			napi_ref_threadsafe_function(env, h->tsfn);
			napi_reference_ref(env, h->self, &rc);
		}
	}
	pthread_mutex_lock(&h->mu);
	if (j->op >= T_EXEC) {
		q_push(&h->txq, j);
		atomic_fetch_add_explicit(&h->txq_pushed, 1,
		                          memory_order_release);
	} else {
		q_push(&h->jobs, j);
	}
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

/* ------------------------------------------------------------------ */
/* Exports                                                              */
/* ------------------------------------------------------------------ */

/* new Handle(dispatch): a handle with its worker thread (not yet open). */
static napi_value js_handle_new(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1], self, name;
	NAPI_OK(napi_get_cb_info(env, info, &argc, argv, &self, NULL));
	handle *h = calloc(1, sizeof *h);
	if (!h) {
		napi_throw_error(env, "INBOX_ERR_NOMEM", "out of memory");
		return NULL;
	}
	pthread_mutex_init(&h->mu, NULL);
	pthread_mutex_init(&h->tmu, NULL);
	pthread_cond_init(&h->cv, NULL);
	napi_create_string_utf8(env, "libinbox", NAPI_AUTO_LENGTH, &name);
	if (napi_create_threadsafe_function(env, argv[0], NULL, name, 0, 1, h,
	                                    tsfn_finalize, h, call_js,
	                                    &h->tsfn) != napi_ok) {
		free(h);
		return throw_last(env);
	}
	napi_unref_threadsafe_function(env, h->tsfn);
	if (napi_wrap(env, self, h, js_finalize, NULL, &h->self) != napi_ok) {
		napi_release_threadsafe_function(h->tsfn, napi_tsfn_abort);
		return throw_last(env);
	}
	/* weak until a job is pending */
	uint32_t rc = 0;
	napi_reference_unref(env, h->self, &rc);
	if (pthread_create(&h->thread, NULL, worker_main, h) != 0) {
		h->closed = 1;
		napi_throw_error(env, "INBOX_ERR_NOMEM",
		                 "cannot start a worker thread");
		return NULL;
	}
	pthread_detach(h->thread);
	return self;
}

/* handle.call(op, id, strings[6], params, ints[<= JOB_NI],
 *             floats[<= JOB_NF], deliveries, hasHandler) */
static napi_value js_call(napi_env env, napi_callback_info info)
{
	size_t argc = 8;
	napi_value argv[8], self;
	NAPI_OK(napi_get_cb_info(env, info, &argc, argv, &self, NULL));
	handle *h = unwrap(env, self);
	if (!h) {
		napi_throw_error(env, "INBOX_ERR_STATE", "not a handle");
		return NULL;
	}
	job *j = calloc(1, sizeof *j);
	if (!j) {
		napi_throw_error(env, "INBOX_ERR_NOMEM", "out of memory");
		return NULL;
	}
	uint32_t op = 0, id = 0;
	napi_get_value_uint32(env, argv[0], &op);
	napi_get_value_uint32(env, argv[1], &id);
	j->op = (int)op;
	j->id = id;
	if (h->closed && j->op < T_EXEC) {
		job_free(j);
		napi_throw_error(env, "INBOX_ERR_STATE", "closed");
		return NULL;
	}
	for (uint32_t k = 0; k < 6 && !is_nullish(env, argv[2]); k++) {
		napi_value e;
		napi_get_element(env, argv[2], k, &e);
		if (get_cstr(env, e, &j->s[k]) < 0)
			goto fail;
	}
	if (get_params(env, argv[3], j) < 0)
		goto fail;
	uint32_t ni = 0, nf = 0;
	if (!is_nullish(env, argv[4]))
		napi_get_array_length(env, argv[4], &ni);
	if (!is_nullish(env, argv[5]))
		napi_get_array_length(env, argv[5], &nf);
	if (ni > JOB_NI || nf > JOB_NF) {
		job_free(j);
		napi_throw_error(env, "INBOX_ERR_INVALID",
		                 "too many numbers for one call");
		return NULL;
	}
	for (uint32_t k = 0; k < ni; k++) {
		napi_value e;
		napi_get_element(env, argv[4], k, &e);
		j->i[k] = get_i64(env, e);
	}
	for (uint32_t k = 0; k < nf; k++) {
		napi_value e;
		napi_get_element(env, argv[5], k, &e);
		j->f[k] = get_f64(env, e);
	}
	if (!is_nullish(env, argv[6])) {
		uint32_t n = 0;
		napi_get_array_length(env, argv[6], &n);
		j->d = calloc(n ? n : 1, sizeof *j->d);
		if (!j->d)
			goto fail;
		for (uint32_t k = 0; k < n; k++) {
			napi_value e;
			napi_get_element(env, argv[6], k, &e);
			if (get_delivery(env, e, &j->d[k]) < 0)
				goto fail;
			j->nd = k + 1;
		}
	}
	bool hh = false;
	if (!is_nullish(env, argv[7]))
		napi_get_value_bool(env, argv[7], &hh);
	j->has_handler = hh;
	if (j->op == OP_CLOSE)
		h->closed = 1;
	if (j->op == OP_DISPATCH_RUN)
		h->stop = 0; /* before it is queued: a stop() after counts */
	enqueue(env, h, j);
	return NULL;
fail:
	job_free(j);
	return NULL;
}

/* handle.wantEvents(on): whether a running dispatcher posts each row's
 * outcome (dispatcher.events() has a reader). */
static napi_value js_events(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1], self;
	NAPI_OK(napi_get_cb_info(env, info, &argc, argv, &self, NULL));
	handle *h = unwrap(env, self);
	bool on = false;
	if (!h || argc < 1 ||
	    napi_get_value_bool(env, argv[0], &on) != napi_ok) {
		napi_throw_error(env, "INBOX_ERR_INVALID", "wantEvents(bool)");
		return NULL;
	}
	h->events = on;
	return NULL;
}

/* handle.stop(): a running dispatcher stops claiming rows; its run ends
 * once the calls in flight finish (the run's promise settles then). */
static napi_value js_stop(napi_env env, napi_callback_info info)
{
	napi_value self;
	NAPI_OK(napi_get_cb_info(env, info, NULL, NULL, &self, NULL));
	handle *h = unwrap(env, self);
	if (h)
		h->stop = 1;
	return NULL;
}

/* handle.dispatcherStats(): the running (or last) dispatcher's counters,
 * with running: true/false. */
static napi_value js_dispatcher_stats(napi_env env, napi_callback_info info)
{
	napi_value self;
	NAPI_OK(napi_get_cb_info(env, info, NULL, NULL, &self, NULL));
	handle *h = unwrap(env, self);
	if (!h) {
		napi_throw_error(env, "INBOX_ERR_STATE", "not a handle");
		return NULL;
	}
	pthread_mutex_lock(&h->mu);
	inbox_outbox_stats s = h->dstats;
	int running = h->running;
	pthread_mutex_unlock(&h->mu);
	napi_value o = outbox_stats_obj(env, &s);
	set_bool(env, o, "running", running);
	return o;
}

static napi_value js_err_name(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1], v;
	NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	int32_t rc = 0;
	napi_get_value_int32(env, argv[0], &rc);
	napi_create_string_utf8(env, inbox_err_name(rc), NAPI_AUTO_LENGTH, &v);
	return v;
}

static napi_value js_outbox_key(napi_env env, napi_callback_info info)
{
	size_t argc = 3;
	napi_value argv[3], v;
	NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	char *a = NULL, *b = NULL, *c = NULL;
	char out[INBOX_OUTBOX_KEY_LEN + 1];
	if (get_cstr(env, argv[0], &a) < 0 || get_cstr(env, argv[1], &b) < 0 ||
	    get_cstr(env, argv[2], &c) < 0) {
		free(a);
		free(b);
		free(c);
		return NULL;
	}
	int rc = inbox_outbox_key(a, b, c, out);
	free(a);
	free(b);
	free(c);
	if (rc < 0) {
		napi_throw(env, make_error(env, rc, NULL, NULL));
		return NULL;
	}
	napi_create_string_utf8(env, out, NAPI_AUTO_LENGTH, &v);
	return v;
}

static napi_value js_fingerprint(napi_env env, napi_callback_info info)
{
	size_t argc = 2;
	napi_value argv[2], v;
	NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	char *json = NULL, *ptr = NULL;
	size_t len = 0;
	if (get_bytes(env, argv[0], &json, &len) < 0 ||
	    get_cstr(env, argv[1], &ptr) < 0) {
		free(json);
		return NULL;
	}
	char hex[65], err[256] = "";
	int rc = inbox_fingerprint(json ? json : "", len, ptr ? ptr : "", hex,
	                           err, sizeof err);
	free(json);
	free(ptr);
	if (rc < 0) {
		napi_throw(env, make_error(env, rc, err, NULL));
		return NULL;
	}
	napi_create_string_utf8(env, hex, NAPI_AUTO_LENGTH, &v);
	return v;
}

static napi_value js_redact(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1], v;
	NAPI_OK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	char *u = NULL;
	if (get_cstr(env, argv[0], &u) < 0)
		return NULL;
	char *r = inbox_redact_url(u ? u : "");
	free(u);
	napi_create_string_utf8(env, r ? r : "", NAPI_AUTO_LENGTH, &v);
	free(r);
	return v;
}

static napi_value init(napi_env env, napi_value exports)
{
	napi_property_descriptor methods[] = {
	    {"call", NULL, js_call, NULL, NULL, NULL, napi_default, NULL},
	    {"stop", NULL, js_stop, NULL, NULL, NULL, napi_default, NULL},
	    {"wantEvents", NULL, js_events, NULL, NULL, NULL, napi_default,
	     NULL},
	    {"dispatcherStats", NULL, js_dispatcher_stats, NULL, NULL, NULL,
	     napi_default, NULL},
	};
	napi_value cls, v;
	NAPI_OK(napi_define_class(env, "Handle", NAPI_AUTO_LENGTH,
	                          js_handle_new, NULL, 4, methods, &cls));
	napi_set_named_property(env, exports, "Handle", cls);
	napi_property_descriptor fns[] = {
	    {"errName", NULL, js_err_name, NULL, NULL, NULL, napi_default,
	     NULL},
	    {"outboxKey", NULL, js_outbox_key, NULL, NULL, NULL, napi_default,
	     NULL},
	    {"fingerprint", NULL, js_fingerprint, NULL, NULL, NULL,
	     napi_default, NULL},
	    {"redactUrl", NULL, js_redact, NULL, NULL, NULL, napi_default,
	     NULL},
	};
	NAPI_OK(napi_define_properties(env, exports, 4, fns));
	napi_create_string_utf8(env, INBOX_VERSION, NAPI_AUTO_LENGTH, &v);
	napi_set_named_property(env, exports, "version", v);
	return exports;
}

NAPI_MODULE(inbox, init)
