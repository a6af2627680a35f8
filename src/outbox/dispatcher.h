/* The dispatcher's insides, shared by dispatcher.c (options, claims,
 * decisions, commits) and engine.c (the calls, driven by libcurl's multi
 * interface). */
#ifndef INBOX_OUTBOX_DISPATCHER_H
#define INBOX_OUTBOX_DISPATCHER_H

#include <inbox/outbox.h>

#include <pthread.h>
#include <signal.h>

#include "base/buf.h"
#include "outbox/engine.h"

/* Time kept for the store work of a row and for the clocks' disagreement. */
#define INBOX__ROW_MARGIN_MS   500
#define INBOX__LEASE_MARGIN_MS 1000

/* What a claimed row waits for. */
typedef enum inbox__need {
	INBOX__NEED_OUTCOME = 0,   /* decided: its outcome is to be committed */
	INBOX__NEED_RECONCILE = 1, /* a reconcile query, then maybe a call */
	INBOX__NEED_CALL = 2       /* the call */
} inbox__need;

/* One claimed row, from the claim to the commit of its outcome. */
typedef struct inbox__job {
	struct inbox__job *next, *prev; /* its list (ready, active, outcomes) */
	inbox_outbox_item it;           /* strings in the same allocation */
	double t0;        /* ms (mono) before its claim: its lease started
	                     no earlier */
	inbox__need need; /* next step */
	int started;      /* a first step was started (lease checked) */
	int dp, rdp;      /* d->provs of the call and of the reconcile URL,
	                     or -1 (no provider) */
	int busy;         /* a transfer in flight: its d->provs index + 1 */
	int busy_reconcile;
	inbox__ticket ticket;
	inbox__xfer *x; /* its transfer (from the pool), or NULL */
	int reconciled; /* reconcile queries made on this claim */
	/* The outcome. */
	inbox_outbox_state state;
	int64_t retry_in_ms;
	int attempts_delta;
	int released;
	inbox_effect_result res; /* res.response points into resp */
	int has_res;
	inbox__buf resp; /* response excerpt, owned */
	char reason[640];
	int64_t rows;  /* after the commit: 1 recorded, 0 fenced */
	int commit_rc; /* the commit's result for this row */
} inbox__job;

/* A provider as this dispatcher sees it. */
typedef struct inbox__dprov {
	inbox__prov *p;
	int active;     /* this dispatcher's calls in flight to it */
	double seen_ms; /* last row for it (mono ms) */
	unsigned full;  /* the start pass in which it said "wait" */
} inbox__dprov;

/* URLs seen last and their d->provs index (a URL is parsed once). */
#define INBOX__URL_CACHE 8

/* A list of jobs (doubly linked, with a tail). */
typedef struct inbox__jlist {
	inbox__job *head, *tail;
	int n;
} inbox__jlist;

/* Most outcomes committed in one transaction. */
#define INBOX__GROUP_MAX 256

/* inbox_dispatcher_run's store thread: it holds the store while the
 * dispatcher's thread drives the calls, so no call waits for a commit.
 * One request at a time — outcomes to commit and rows to claim, in one
 * transaction when both are asked — and its answer. Under mu, except
 * `busy`, which only the dispatcher's thread reads and writes. */
typedef struct inbox__storeq {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running, quit;
	int busy; /* a request is out (the dispatcher's thread only) */
	/* The request. */
	int asked;
	int want;                        /* rows to claim (0: none) */
	inbox__job *g[INBOX__GROUP_MAX]; /* outcomes to commit */
	int ng;
	/* The answer. */
	int answered;
	int commit_rc, claim_rc;
	inbox__jlist claimed;
	double claim_t0;
	char err[512];
} inbox__storeq;

struct inbox_dispatcher {
	inbox_store *st;
	inbox_dispatcher_options o;
	char *consumer;
	int batch;
	int64_t lease_ms;
	int64_t row_budget_ms;
	int fit; /* rows one call slot can take in a lease, one at a time */
	inbox_outbox_stats stats;
	char errmsg[512];
	unsigned rng;
	volatile sig_atomic_t *stop; /* inbox_dispatcher_run's, or NULL */
	/* Providers. */
	inbox_providers *reg, *own_reg;
	inbox__dprov *provs;
	int nprovs, capprovs;
	char *url_cache[INBOX__URL_CACHE];
	int url_dp[INBOX__URL_CACHE];
	int url_next;
	unsigned pass; /* start passes (inbox__dprov.full) */
	/* The calls. */
	void *multi; /* CURLM * */
	inbox__xfer **pool;
	int npool, cappool;
	/* Rows in hand: claimed and not started (or between a reconcile and
	 * a call), with a transfer in flight, decided and not committed. */
	inbox__jlist ready, active, done;
	double done_since; /* ms: the oldest outcome not committed */
	int stopping;      /* no claim, no start: finish and commit */
	inbox__storeq q;
	int fail_rc; /* the performer's error, once it failed */
};

/* ---- dispatcher.c ------------------------------------------------------- */

double inbox__dispatch_now_ms(void);
void inbox__jlist_push(inbox__jlist *l, inbox__job *j);
void inbox__jlist_push_front(inbox__jlist *l, inbox__job *j);
void inbox__jlist_remove(inbox__jlist *l, inbox__job *j);
void inbox__job_free(inbox_dispatcher *d, inbox__job *j);

/* Store work — by whichever thread holds the store (engine.c's store
 * thread during inbox_dispatcher_run): touches d->st and the jobs given,
 * nothing else of d; errors go to err. */
int inbox__store_claim(inbox_dispatcher *d, int limit, inbox__jlist *got,
                       double *t0, char *err, size_t errlen);
/* One transaction for g[0..n); each job's commit_rc and rows set. */
int inbox__store_commit(inbox_dispatcher *d, inbox__job **g, int n, char *err,
                        size_t errlen);

/* Both in one transaction: the outcomes g[0..n), then a claim of up to
 * `limit` rows (claimed at *t0). On failure nothing is done (the caller
 * does them apart). */
int inbox__store_commit_claim(inbox_dispatcher *d, inbox__job **g, int n,
                              int limit, inbox__jlist *got, double *t0);

/* The dispatcher's thread: claimed rows decided (decide()) and put on
 * d->ready, or on d->done when no call is needed (claimed at t0). */
void inbox__dispatch_adopt(inbox_dispatcher *d, inbox__jlist *got, double t0);
/* The dispatcher's thread, after inbox__store_commit: the recorded rows
 * counted, notified and freed; the others back on d->done. */
void inbox__dispatch_recorded(inbox_dispatcher *d, inbox__job **g, int n);

/* Both in turn, on the dispatcher's thread (run_once). */
int inbox__dispatch_claim(inbox_dispatcher *d, int limit, int *got);

/* Outcomes. */
void inbox__job_release(inbox_dispatcher *d, inbox__job *j, int64_t retry_in_ms,
                        const char *why);
void inbox__job_reconciled(inbox_dispatcher *d, inbox__job *j,
                           inbox_reconcile_verdict v, const char *why);
void inbox__job_called(inbox_dispatcher *d, inbox__job *j,
                       const inbox_effect_result *res);

/* Commit the outcomes on d->done (at most `max`), one transaction for the
 * group, each row under its fence; notify and free them. On a store
 * error the outcomes not recorded stay on d->done. */
int inbox__dispatch_commit(inbox_dispatcher *d, int max);

/* ---- engine.c ----------------------------------------------------------- */

int inbox__engine_open(inbox_dispatcher *d);
void inbox__engine_close(inbox_dispatcher *d);

#endif
