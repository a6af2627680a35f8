/*
 * libinbox — effects outside the transaction: the outbox and its
 * dispatcher.
 *
 * Charging a card, sending an email or calling a partner cannot be rolled
 * back, so a handler never does it directly. It *declares* the effect with
 * inbox_txn_outbox_add(): an outbox row written in the same transaction as
 * the inbox record, so the effect is recorded exactly when the message is
 * (a rolled-back handler leaves no row, a redelivered message finds its
 * key in the inbox and adds nothing). A dispatcher then performs the rows:
 *
 *   - every row carries an idempotency key derived deterministically from
 *     (consumer, inbox key, step) — never random — sent as the
 *     Idempotency-Key header of every attempt, so a provider that honours
 *     it performs the effect once however often it is called;
 *   - claiming a row commits the *intent* (state in_flight, attempts + 1,
 *     a lease and a fencing token) before the call; no transaction is held
 *     across the network;
 *   - an outcome that cannot be known (timeout, dropped connection,
 *     dispatcher killed mid-call) is an UNKNOWN outcome: an idempotent
 *     provider is called again with the *same* key; for a provider without
 *     idempotency the effect is first *reconciled* (a status URL queried
 *     with the key, or a C callback): found -> done, not found -> sent
 *     again, undecided -> asked again later. Never a blind re-send;
 *   - a permanent refusal (HTTP 409/422 and other 4xx: the key was reused
 *     with other parameters, the request is invalid) or max attempts ends
 *     the row as `dead` with a dead letter carrying the context.
 *
 * Row states: pending -> in_flight -> done | failed | unknown | dead;
 * failed and unknown rows become due again after a backoff; an in_flight
 * row whose lease expired is taken over as unknown.
 *
 * Several dispatchers may run on one store (threads or processes): a row
 * is claimed by one of them at a time (PostgreSQL FOR UPDATE SKIP LOCKED,
 * SQLite's write lock), and a completion is accepted only with the
 * fencing token of the current claim.
 *
 * A dispatcher keeps many calls in flight at once (libcurl's multi
 * interface, up to `concurrency` per provider) and commits their outcomes
 * in groups, one transaction per group, each row still under its own
 * fence. A provider is a URL's scheme, host and port; per provider it
 * honours Retry-After, opens a circuit breaker when every call fails, and
 * keeps to a rate limit when one is set (inbox_providers).
 *
 * Thread safety: like every libinbox handle, a dispatcher is used by one
 * thread at a time, on a store handle it borrows exclusively. A provider
 * registry (inbox_providers) is thread-safe and may be shared by the
 * dispatchers of several threads.
 */
#ifndef INBOX_OUTBOX_H
#define INBOX_OUTBOX_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "inbox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Declaring effects (inside a handler)                                 */
/* ------------------------------------------------------------------ */

/* Length of an idempotency key: lower-case hex SHA-256 (64 characters). */
#define INBOX_OUTBOX_KEY_LEN 64

/* The idempotency key of step `step` of the message whose inbox key is
 * `key` in consumer `consumer`: lower-case hex SHA-256 of
 * consumer "\0" key "\0" step, written with its NUL into out[65].
 * Deterministic: the same three strings always give the same key, in
 * every process and every version of the library (the key is also stored
 * in the row, so a row keeps its key whatever happens). Fixed-length and
 * URL-safe, within the 255 characters payment APIs accept.
 * INBOX_ERR_INVALID if an argument is NULL. */
INBOX_API int inbox_outbox_key(const char *consumer, const char *key,
                               const char *step,
                               char out[INBOX_OUTBOX_KEY_LEN + 1]);

/* One external effect to perform after the commit. Zero-initialize with
 * INBOX_OUTBOX_EFFECT_INIT and set what you need. Every string is copied
 * into the row; none is kept after the call. */
typedef struct inbox_outbox_effect {
	unsigned version; /* INBOX_OUTBOX_EFFECT_VERSION */
	/* Name of the step, unique among the effects of one message
	 * ("charge", "email"): 1-100 printable characters without spaces.
	 * Required. The row is unique per (consumer, key, step): adding the
	 * same step again for the same message adds nothing. */
	const char *step;
	/* What performs it: "http" (default when NULL) is performed by the
	 * built-in libcurl performer; any other kind needs
	 * inbox_dispatcher_options.perform. */
	const char *kind;
	/* HTTP method, "POST" when NULL. */
	const char *method;
	/* Target URL (http:// or https:// for kind "http"). Required. */
	const char *url;
	/* Extra request headers as a JSON object of strings
	 * ({"Authorization": "Bearer ..."}), or NULL. "Content-Type" defaults
	 * to application/json. */
	const char *headers;
	/* Request body bytes (NULL/0: empty). */
	const char *body;
	size_t body_len;
	/* Non-zero when the provider honours the idempotency key (performs
	 * once per key and answers repeats with the first response): unknown
	 * outcomes are then retried with the same key. Zero: the provider has
	 * no idempotency; unknown outcomes are reconciled before any retry. */
	int idempotent;
	/* For non-idempotent providers: a URL answering whether the effect
	 * with this key happened — "{key}" is replaced by the idempotency key
	 * (e.g. "https://mail.example/messages?reference={key}"). GET; 2xx =
	 * it happened, 404/410 = it did not, anything else = ask later. NULL
	 * and no reconcile callback: an unknown outcome is dead-lettered for
	 * an operator to decide, never re-sent. */
	const char *reconcile_url;
	/* Header carrying the idempotency key, "Idempotency-Key" when NULL.
	 * It is sent on non-idempotent calls too, as the reference the
	 * reconcile URL looks up. */
	const char *key_header;
	/* Attempts before the row is dead-lettered; 0 = the dispatcher's. */
	int max_attempts;
} inbox_outbox_effect;

#define INBOX_OUTBOX_EFFECT_VERSION 1
#define INBOX_OUTBOX_EFFECT_INIT                                               \
	{                                                                      \
		INBOX_OUTBOX_EFFECT_VERSION, NULL, NULL, NULL, NULL, NULL,     \
		    NULL, 0, 0, NULL, NULL, 0                                  \
	}

/* Inside a handler: write an outbox row for effect `e` in the handler's
 * transaction (under its savepoint: a RETRY or REJECT verdict removes it,
 * the batch's commit publishes it). `idempotency_key` (may be NULL)
 * receives the row's key, for handlers that also store it in their own
 * tables. `*added` (may be NULL) is 1 if the row was written, 0 if the
 * step already had a row for this message (kept as it was). Works in
 * inbox_lease_complete() handlers too.
 * Errors: INVALID (bad effect), STATE (the store has no outbox: a backend
 * older than vtable version 2), STORE/TRANSIENT (the handler should return
 * RETRY; a handler returning OK after a failed call is treated as RETRY). */
INBOX_API int
inbox_txn_outbox_add(inbox_txn *t, const inbox_outbox_effect *e,
                     char idempotency_key[INBOX_OUTBOX_KEY_LEN + 1],
                     int *added);

/* ------------------------------------------------------------------ */
/* Rows as the dispatcher sees them                                     */
/* ------------------------------------------------------------------ */

typedef enum inbox_outbox_state {
	INBOX_OUTBOX_NONE = 0,
	INBOX_OUTBOX_PENDING = 1,   /* written, never claimed (or released) */
	INBOX_OUTBOX_IN_FLIGHT = 2, /* claimed: the intent is recorded */
	INBOX_OUTBOX_DONE = 3,      /* performed (or reconciled as performed) */
	INBOX_OUTBOX_FAILED = 4,    /* certainly not performed: retry later */
	INBOX_OUTBOX_UNKNOWN = 5,   /* may have been performed: same key, or
	                               reconcile first */
	INBOX_OUTBOX_DEAD = 6       /* given up: a dead letter was written */
} inbox_outbox_state;

/* Static name as stored: "pending", "in_flight", "done", "failed",
 * "unknown", "dead"; "none" otherwise. */
INBOX_API const char *inbox_outbox_state_name(inbox_outbox_state s);

/* A claimed row, given to callbacks. Every pointer is borrowed and valid
 * during the callback only. */
typedef struct inbox_outbox_item {
	int64_t id;
	const char *consumer;
	const char *key; /* the message's inbox key */
	const char *step;
	const char *idempotency_key; /* 64 hex characters */
	const char *kind;
	const char *method;
	const char *url;
	const char *headers;    /* JSON object text or NULL */
	const char *key_header; /* NULL = "Idempotency-Key" */
	const char *body;
	size_t body_len;
	int idempotent;
	const char *reconcile_url; /* or NULL */
	int32_t max_attempts;      /* 0 = the dispatcher's */
	/* State before this claim: PENDING, FAILED, UNKNOWN, or IN_FLIGHT
	 * when the previous claim's lease expired (its holder died or
	 * overran mid-call: the outcome is unknown). */
	inbox_outbox_state state;
	int32_t attempts; /* claims so far, this one included */
	int64_t fence;    /* fencing token of this claim */
	int32_t reconciliations;
	int last_status; /* HTTP status of the last attempt, or 0 */
} inbox_outbox_item;

/* ------------------------------------------------------------------ */
/* Performing and reconciling                                            */
/* ------------------------------------------------------------------ */

/* What one attempt came to. */
typedef enum inbox_effect_outcome {
	INBOX_EFFECT_DONE = 1,     /* performed (HTTP 2xx) */
	INBOX_EFFECT_RETRY = 2,    /* certainly not performed, or the provider
	                              asks to try again (connect failure,
	                              408/425/429; 5xx on idempotent
	                              providers): retry with backoff */
	INBOX_EFFECT_UNKNOWN = 3,  /* may have been performed (timeout after
	                              the request was sent, dropped connection;
	                              5xx on non-idempotent providers) */
	INBOX_EFFECT_PERMANENT = 4 /* refused for good (409, 422, other 4xx,
	                              3xx, malformed request): dead letter */
} inbox_effect_outcome;

typedef struct inbox_effect_result {
	inbox_effect_outcome outcome;
	int status;             /* HTTP status, 0 when none came */
	int64_t retry_after_ms; /* provider's Retry-After, 0 when none */
	char error[256];        /* why (for logs and dead letters) */
	/* Response body (an excerpt is kept in the row); borrowed until the
	 * perform call returns. */
	const char *response;
	size_t response_len;
} inbox_effect_result;

/* A performer: run the effect of `it` and fill *res. Return 0, or a
 * negative inbox_err when the dispatcher itself must stop (the row is then
 * left in flight and becomes UNKNOWN when its lease expires). Must bound
 * its own duration by the dispatcher's timeout. */
typedef int (*inbox_perform_fn)(const inbox_outbox_item *it,
                                inbox_effect_result *res, void *payload);

typedef enum inbox_reconcile_verdict {
	INBOX_RECONCILE_FOUND = 1,     /* the effect happened: done */
	INBOX_RECONCILE_NOT_FOUND = 2, /* it did not: safe to send (same key) */
	INBOX_RECONCILE_UNKNOWN = 3    /* cannot tell now: ask again later */
} inbox_reconcile_verdict;

/* A reconciler: decide whether the effect of `it` (an UNKNOWN outcome of a
 * non-idempotent provider) happened. Returns an inbox_reconcile_verdict. */
typedef int (*inbox_reconcile_fn)(const inbox_outbox_item *it, void *payload);

/* Called after each row's outcome is committed (or refused: `state` is
 * then IN_FLIGHT and the row belongs to a newer claim). `res` is NULL when
 * no attempt was made (reconciled as found, released). For logs. */
typedef void (*inbox_outbox_event_fn)(const inbox_outbox_item *it,
                                      const inbox_effect_result *res,
                                      inbox_outbox_state state,
                                      const char *reason, void *payload);

/* ------------------------------------------------------------------ */
/* The dispatcher                                                        */
/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* Providers: calls in flight, rate limits, circuit breakers             */
/* ------------------------------------------------------------------ */

/* A provider is what the scheme, host and port of a URL name
 * ("https://api.pay.example:443"; the user, path and query are not part
 * of it): every row whose URL, and every reconcile query whose URL, has
 * them is a call to that provider. A registry holds, per provider, the
 * calls in flight, its circuit breaker, its rate limit and the hold a
 * Retry-After asked for. Each dispatcher uses one: its own (the default),
 * or one shared by several dispatchers (inbox_dispatcher_options
 * .providers), so that one process keeps one limit and one breaker per
 * provider whatever the number of consumers. Limits are per registry:
 * two processes keeping to 50 calls/s each send up to 100. */
typedef struct inbox_providers inbox_providers;

typedef struct inbox_provider_options {
	unsigned version; /* INBOX_PROVIDER_OPTIONS_VERSION */
	/* Calls in flight at once to the provider, over every dispatcher
	 * sharing the registry; 0 = no cap beyond each dispatcher's own
	 * `concurrency`. */
	int concurrency;
	/* Calls started per second (a token bucket), 0 = no limit; `burst`
	 * calls may start at once after a quiet spell (0 = 1). A call that
	 * must wait waits in the dispatcher; a row that could not start
	 * within its lease is put back, due when its turn comes. */
	double rate;
	int burst;
	/* Circuit breaker: `breaker_failures` consecutive failed calls (no
	 * answer, HTTP 5xx, 408, 429) open it (0 = never): no call is made
	 * for breaker_open_ms, the provider's rows are put back unperformed
	 * (no attempt counted), due when it half-opens; then one trial call
	 * goes: an answer closes it, a failure opens it again for twice as
	 * long, at most breaker_max_open_ms. Defaults 10, 5000, 60000. */
	int breaker_failures;
	int64_t breaker_open_ms;
	int64_t breaker_max_open_ms;
} inbox_provider_options;

#define INBOX_PROVIDER_OPTIONS_VERSION 1
#define INBOX_PROVIDER_OPTIONS_INIT                                            \
	{                                                                      \
		INBOX_PROVIDER_OPTIONS_VERSION, 0, 0.0, 0, 10, 5000, 60000     \
	}

/* A registry whose providers get `defaults` (NULL: the INIT values) until
 * inbox_providers_set() says otherwise. Errors: INVALID (a negative or
 * out-of-range setting, a version 0 or newer than
 * INBOX_PROVIDER_OPTIONS_VERSION), NOMEM. */
INBOX_API int inbox_providers_open(inbox_providers **out,
                                   const inbox_provider_options *defaults);

/* Settings for the provider of `url` (its scheme, host and port: any
 * path is ignored), for calls started from now on. Errors: INVALID (not
 * an http(s) URL, a bad setting), NOMEM. Thread-safe. */
INBOX_API int inbox_providers_set(inbox_providers *r, const char *url,
                                  const inbox_provider_options *o);

/* The name of the provider of `url` ("scheme://host:port", host in lower
 * case, the default port written out) into out[len] — the `provider`
 * label on /metrics. INBOX_ERR_INVALID if url is not an http(s) URL with
 * a host, or the name does not fit. */
INBOX_API int inbox_provider_name(const char *url, char *out, size_t len);

/* What a provider's breaker and pauses do, for logs. */
typedef enum inbox_provider_event {
	INBOX_PROVIDER_OPENED = 1,    /* the breaker opened; ms: for how long */
	INBOX_PROVIDER_HALF_OPEN = 2, /* its open time is over: a trial goes */
	INBOX_PROVIDER_CLOSED = 3,    /* the trial was answered: calls go */
	INBOX_PROVIDER_HELD = 4       /* a Retry-After pause began; ms: its
	                                 length */
} inbox_provider_event;

typedef void (*inbox_provider_event_fn)(const char *provider,
                                        inbox_provider_event ev, int64_t ms,
                                        void *payload);

/* Call fn (NULL: none) on those events, from the dispatcher thread that
 * caused them, with no lock of the registry held. Set it before the
 * registry is used. Errors: INVALID. */
INBOX_API int inbox_providers_on_event(inbox_providers *r,
                                       inbox_provider_event_fn fn,
                                       void *payload);

/* Free the registry. Every dispatcher using it must be closed first.
 * NULL is a no-op. */
INBOX_API void inbox_providers_close(inbox_providers *r);

typedef enum inbox_breaker_state {
	INBOX_BREAKER_CLOSED = 0,   /* calls go */
	INBOX_BREAKER_OPEN = 1,     /* no call until the open time is over */
	INBOX_BREAKER_HALF_OPEN = 2 /* one trial call decides */
} inbox_breaker_state;

/* One provider as it is now, and its counters since the registry opened.
 * Versioned: the library allocates them (inbox_providers_info) in the
 * version the caller asks for. */
/* Upper bounds (seconds) of the call duration histogram's buckets
 * (inbox_provider_info, version 2); the last is +Inf. */
#define INBOX_CALL_BUCKETS 12
INBOX_API extern const double inbox_call_bounds[INBOX_CALL_BUCKETS];

typedef struct inbox_provider_info {
	unsigned version; /* INBOX_PROVIDER_INFO_VERSION */
	const char *name; /* "scheme://host:port" */
	inbox_breaker_state breaker;
	int in_flight;         /* calls in flight now */
	uint64_t calls;        /* calls started (requests and reconciles) */
	uint64_t failures;     /* calls that failed (see breaker_failures) */
	uint64_t opens;        /* times the breaker opened */
	uint64_t trials;       /* half-open trial calls */
	uint64_t rejected;     /* rows put back: breaker open, or held */
	uint64_t rate_limited; /* calls that waited for the rate limit */
	uint64_t retry_after;  /* answers with a Retry-After honoured */
	/* ---- version 2 ---- */
	/* How long the dispatchers' HTTP calls to the provider took (the
	 * request, from connecting to the last byte of the answer or the
	 * failure; reconcile queries and callbacks not counted), seconds:
	 * cumulative buckets by inbox_call_bounds, their sum and count. */
	uint64_t call_buckets[INBOX_CALL_BUCKETS];
	double call_seconds_sum;
	uint64_t call_count;
} inbox_provider_info;

#define INBOX_PROVIDER_INFO_VERSION 2

/* A snapshot of every provider the registry has seen, in the order they
 * were first used: *out is one allocation (names included), free() it;
 * *n entries, each of version `version` (pass INBOX_PROVIDER_INFO_VERSION)
 * and of that version's size, so out[i] indexes it. Errors: INVALID
 * (also an unknown version), NOMEM. Thread-safe. */
INBOX_API int inbox_providers_info(inbox_providers *r, unsigned version,
                                   inbox_provider_info **out, size_t *n);

/* ------------------------------------------------------------------ */
/* The dispatcher                                                        */
/* ------------------------------------------------------------------ */

typedef struct inbox_dispatcher inbox_dispatcher;

/* What inbox_dispatcher_run() tells its on_tick callback. */
typedef enum inbox_dispatch_event {
	INBOX_DISPATCH_PROGRESS = 1,   /* a group of outcomes was committed */
	INBOX_DISPATCH_IDLE = 2,       /* nothing in hand, nothing due: it
	                                  pauses poll_ms next */
	INBOX_DISPATCH_STORE_RETRY = 3 /* a transient store error (see
	                                  inbox_dispatcher_errmsg): tried
	                                  again after poll_ms */
} inbox_dispatch_event;

/* Return non-zero to end inbox_dispatcher_run() (as *stop would). */
typedef int (*inbox_dispatch_tick_fn)(inbox_dispatcher *d,
                                      inbox_dispatch_event ev, void *payload);

typedef struct inbox_dispatcher_options {
	unsigned version; /* INBOX_DISPATCHER_OPTIONS_VERSION */
	/* Only this consumer's rows; NULL = every consumer's. */
	const char *consumer;
	/* Rows claimed per transaction (default 8). Lowered when the lease
	 * cannot cover that many calls. */
	int batch;
	/* Attempts (claims) before a row is dead-lettered, for rows that
	 * carry none (default 8). */
	int max_attempts;
	/* Per call: connect timeout and total timeout (default 2000 and
	 * 10000 ms). A reconcile query gets the same. */
	int64_t connect_timeout_ms;
	int64_t timeout_ms;
	/* Retry delay after the first failed attempt, doubled each attempt
	 * (with +-20% jitter), at most max_backoff_ms (defaults 500, 60000).
	 * A provider's Retry-After is honoured up to max_backoff_ms. */
	int64_t backoff_ms;
	int64_t max_backoff_ms;
	/* Lease of a claimed row (default 0: 60 s, or more when the timeout
	 * asks for it). It must cover a reconcile and a call: at least
	 * 2 x timeout_ms + 1.5 s. A row whose dispatcher dies is taken over
	 * when it expires, as an unknown outcome. Rows whose call could no
	 * longer finish inside the lease are released unperformed. */
	int64_t lease_ms;
	/* inbox_dispatcher_run(): pause when nothing is due (default 200). */
	int64_t poll_ms;
	/* Performer for kinds other than "http", or to replace the built-in
	 * libcurl one. NULL = built-in (kind "http" only). */
	inbox_perform_fn perform;
	void *perform_payload;
	/* Reconciler for non-idempotent rows; NULL = GET the row's
	 * reconcile_url. */
	inbox_reconcile_fn reconcile;
	void *reconcile_payload;
	/* Outcome notifications, or NULL. */
	inbox_outbox_event_fn on_event;
	void *event_payload;
	/* ---- version 2 ---- */
	/* Calls in flight at once to one provider (default 32, at most
	 * 10000). 1: one row at a time, each outcome committed on its own —
	 * the dispatcher of version 1. A `perform` callback is called one
	 * row at a time whatever this says. */
	int concurrency;
	/* Per-provider limits, breakers and rate limits, shared with other
	 * dispatchers (borrowed: it must outlive this dispatcher); NULL: a
	 * registry of this dispatcher's own, with the defaults. */
	inbox_providers *providers;
	/* inbox_dispatcher_run(): progress notifications, or NULL. */
	inbox_dispatch_tick_fn on_tick;
	void *tick_payload;
} inbox_dispatcher_options;

#define INBOX_DISPATCHER_OPTIONS_VERSION 2
#define INBOX_DISPATCHER_OPTIONS_INIT                                          \
	{                                                                      \
		INBOX_DISPATCHER_OPTIONS_VERSION, NULL, 8, 8, 2000, 10000,     \
		    500, 60000, 0, 200, NULL, NULL, NULL, NULL, NULL, NULL,    \
		    32, NULL, NULL, NULL                                       \
	}

/* Create a dispatcher on `st` (borrowed: it must outlive the dispatcher,
 * and nothing else may use it meanwhile). Initializes libcurl once per
 * process. Errors: INVALID (bad option; the reason in err), STATE (the
 * store has no outbox), NOMEM. */
INBOX_API int inbox_dispatcher_open(inbox_dispatcher **out, inbox_store *st,
                                    const inbox_dispatcher_options *opts,
                                    char *err, size_t errlen);
INBOX_API void inbox_dispatcher_close(inbox_dispatcher *d);

/* Claim at most one batch of due rows (committed before any call),
 * perform or reconcile them — up to `concurrency` calls at once per
 * provider — and commit their outcomes, in groups; return when every
 * claimed row is finished. *handled (may be NULL) = rows claimed (0:
 * nothing was due). Store errors return STORE or TRANSIENT (detail in
 * inbox_dispatcher_errmsg); rows left in flight are taken over when their
 * lease expires. */
INBOX_API int inbox_dispatcher_run_once(inbox_dispatcher *d, int *handled);

/* Perform rows as they come due until *stop becomes non-zero (or on_tick
 * asks to stop): claims keep up to `concurrency` calls in flight per
 * provider, the next rows claimed before the calls in hand end, and
 * outcomes are committed in groups as calls end. On stop no row is
 * claimed or started any more, rows claimed but not started are put back,
 * the calls in flight finish (bounded by the timeout) and their outcomes
 * are committed. Transient store errors are retried after poll_ms (the
 * outcomes in hand are kept); other errors are returned. With
 * concurrency 1 it is the loop of inbox_dispatcher_run_once. */
INBOX_API int inbox_dispatcher_run(inbox_dispatcher *d,
                                   volatile sig_atomic_t *stop);

/* Counters since the dispatcher was opened. Versioned (<inbox/inbox.h>,
 * "Versioned structs"): set `version` (INBOX_OUTBOX_STATS_INIT). */
typedef struct inbox_outbox_stats {
	unsigned version;          /* INBOX_OUTBOX_STATS_VERSION */
	uint64_t claimed;          /* rows claimed */
	uint64_t attempts;         /* calls made to providers */
	uint64_t done;             /* rows completed (performed or found) */
	uint64_t retries;          /* attempts that will be retried */
	uint64_t unknown_outcomes; /* attempts whose outcome was unknown,
	                              plus leases found expired mid-call */
	uint64_t lease_expired;    /* rows taken over after a lease expired */
	uint64_t reconciliations;  /* reconcile queries made */
	uint64_t reconciled_found; /* ... that found the effect done */
	uint64_t reconciled_not_found;
	uint64_t dead_letters; /* rows given up */
	uint64_t fenced;       /* late outcomes refused (lease lost) */
	uint64_t released;     /* claimed rows given back unperformed */
} inbox_outbox_stats;

#define INBOX_OUTBOX_STATS_VERSION 1
#define INBOX_OUTBOX_STATS_INIT                                                \
	{                                                                      \
		.version = INBOX_OUTBOX_STATS_VERSION                          \
	}

/* The fields of out->version. INBOX_ERR_INVALID for NULL or an unknown
 * version (the reason in inbox_dispatcher_errmsg()). */
INBOX_API int inbox_dispatcher_stats(const inbox_dispatcher *d,
                                     inbox_outbox_stats *out);

/* Last error of the dispatcher ("" if none). */
INBOX_API const char *inbox_dispatcher_errmsg(const inbox_dispatcher *d);

/* ------------------------------------------------------------------ */
/* Inspecting the outbox (outside a transaction)                         */
/* ------------------------------------------------------------------ */

/* Versioned: set `version` (INBOX_OUTBOX_COUNTS_INIT). */
typedef struct inbox_outbox_counts {
	unsigned version; /* INBOX_OUTBOX_COUNTS_VERSION */
	int64_t pending;  /* state pending */
	int64_t in_flight;
	int64_t failed;
	int64_t unknown;
	int64_t dead;
	/* Age in seconds of the oldest row not yet done or dead (0 if none). */
	double oldest_age_seconds;
} inbox_outbox_counts;

#define INBOX_OUTBOX_COUNTS_VERSION 1
#define INBOX_OUTBOX_COUNTS_INIT                                               \
	{                                                                      \
		.version = INBOX_OUTBOX_COUNTS_VERSION                         \
	}

/* Rows by state for `consumer` (NULL = all), into the fields of
 * out->version (an unknown one: INVALID). Done rows are not counted
 * (they are the bulk of the table; counting them would scan it). */
INBOX_API int inbox_outbox_counts_get(inbox_store *st, const char *consumer,
                                      inbox_outbox_counts *out);

/* For metrics: *pending = rows not yet done or dead (pending, in flight,
 * failed, unknown); *oldest_age_seconds = age of the oldest of them (0 if
 * none). Either pointer may be NULL. */
INBOX_API int inbox_outbox_pending(inbox_store *st, const char *consumer,
                                   int64_t *pending,
                                   double *oldest_age_seconds);

/* Delete done rows of `consumer` (NULL = all) completed more than
 * `older_than_seconds` ago, at most `batch_limit` per statement (0 =
 * 1000). Keep them at least as long as the consumer's inbox retention: a
 * row's unique (consumer, key, step) is what stops a replayed message
 * from declaring its effect twice. Dead rows are kept (their dead letter
 * refers to them). */
INBOX_API int inbox_outbox_purge(inbox_store *st, const char *consumer,
                                 int64_t older_than_seconds, int batch_limit,
                                 int64_t *deleted);

#ifdef __cplusplus
}
#endif

#endif /* INBOX_OUTBOX_H */
