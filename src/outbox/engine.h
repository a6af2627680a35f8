/* Internal names shared by the files of src/outbox/: the HTTP transfers of
 * outbox effects (http.c), the providers' limits and breakers
 * (provider.c), and the dispatcher (dispatcher.c, engine.c). */
#ifndef INBOX_OUTBOX_ENGINE_H
#define INBOX_OUTBOX_ENGINE_H

#include <inbox/outbox.h>

#include <stdint.h>

#include "base/buf.h"

/* Default header carrying the idempotency key. */
#define INBOX__KEY_HEADER "Idempotency-Key"
/* Most of a response kept in memory (the rest is read and dropped). */
#define INBOX__HTTP_BODY_MAX (64 * 1024)
/* Room for libcurl's error text (CURL_ERROR_SIZE). */
#define INBOX__HTTP_ERRBUF 256

/* ---- one HTTP transfer (http.c) ---------------------------------------- */

/* An easy handle with what one request needs; reused from request to
 * request (its connection cache is the multi handle's). */
typedef struct inbox__xfer {
	void *curl;              /* CURL * */
	struct curl_slist *hdrs; /* request headers, freed by _done */
	inbox__buf body;         /* response body, capped */
	size_t body_seen;        /* bytes received, including dropped */
	char *url;               /* reconcile URL ({key} replaced) */
	char errbuf[INBOX__HTTP_ERRBUF];
} inbox__xfer;

/* Initialize libcurl, once per process. 0 or -1. */
int inbox__curl_init(void);

/* Initialize libcurl (once per process) and x's easy handle. 0 or -1. */
int inbox__xfer_init(inbox__xfer *x);
void inbox__xfer_free(inbox__xfer *x);

/* Set x up for the row's request: the key header, connect and total
 * timeouts, no redirects, http/https only; a non-idempotent request goes
 * on a fresh connection that is not kept, so libcurl never re-sends it by
 * itself. Returns 0, or -1 with res filled (PERMANENT: malformed headers
 * or no memory): then nothing is to be sent. */
int inbox__http_call_setup(inbox__xfer *x, const inbox_outbox_item *it,
                           int64_t connect_timeout_ms, int64_t timeout_ms,
                           inbox_effect_result *res);

/* The outcome of the call x carried, from libcurl's result `cc` (a
 * CURLcode): fills *res (res->response points into x until x is set up
 * again). */
void inbox__http_call_result(inbox__xfer *x, const inbox_outbox_item *it,
                             int cc, inbox_effect_result *res);

/* Set x up for the row's reconcile query (GET reconcile_url, {key} = the
 * idempotency key). 0, or -1 (no URL, no memory: the reason in why). */
int inbox__http_reconcile_setup(inbox__xfer *x, const inbox_outbox_item *it,
                                int64_t connect_timeout_ms, int64_t timeout_ms,
                                char *why, size_t len);

/* The verdict of the reconcile query x carried: 2xx FOUND, 404/410
 * NOT_FOUND, anything else (including no answer) UNKNOWN, with the reason
 * in why; *status = the HTTP status or 0. */
inbox_reconcile_verdict inbox__http_reconcile_result(inbox__xfer *x, int cc,
                                                     long *status, char *why,
                                                     size_t len);

/* Classify an HTTP status for a request to an (non-)idempotent provider. */
inbox_effect_outcome inbox__http_classify_status(long status, int idempotent);

/* ---- providers (provider.c) -------------------------------------------- */

/* One provider's state; lives as long as its registry. */
typedef struct inbox__prov inbox__prov;

/* "scheme://host:port" of an http(s) URL (lower case, the default port
 * filled in; user, path and query left out) into out. 0, or -1 when the
 * URL cannot be parsed or the name does not fit. */
int inbox__provider_name(const char *url, char *out, size_t len);

/* The provider of `url` in r, created with r's settings on first use;
 * NULL when the URL has no provider (not http(s), unparsable) or on no
 * memory. Thread-safe. */
inbox__prov *inbox__provider_get(inbox_providers *r, const char *url);

/* What a dispatcher may do with a call to a provider now. */
typedef enum inbox__admit {
	INBOX__ADMIT = 0, /* go: a slot (and a token) is taken */
	INBOX__WAIT = 1,  /* not now: ask again in *wait_ms (0: when a call of
	                     this dispatcher ends) */
	INBOX__REJECT = 2 /* the breaker is open or the provider asked us to
	                     hold off (Retry-After): put the row back for
	                     *wait_ms */
} inbox__admit;

/* A call taken by inbox__provider_acquire, handed back to _release. */
typedef struct inbox__ticket {
	uint64_t gen;    /* breaker generation the call started in */
	int trial;       /* the half-open trial call */
	int rate_waited; /* zero it before the first acquire of a call: the
	                    rate limit's wait is counted once per call */
} inbox__ticket;

/* Ask for a call to p, for a dispatcher that has `mine` calls in flight
 * to it and may have `my_limit`. `now_ms` is inbox__mono_seconds() in ms.
 * *why (on REJECT) is a static text. Thread-safe. */
inbox__admit inbox__provider_acquire(inbox__prov *p, double now_ms, int mine,
                                     int my_limit, inbox__ticket *t,
                                     int64_t *wait_ms, const char **why);

/* How a call ended, for the breaker. */
typedef enum inbox__verdict {
	INBOX__CALL_OK = 0,    /* an answer that shows the provider works */
	INBOX__CALL_FAILED = 1 /* no answer, 5xx, 408/429 */
} inbox__verdict;

/* Hand the call back; retry_after_ms > 0: the provider asked (429/503
 * with Retry-After) that nothing be sent before that long. Thread-safe. */
void inbox__provider_release(inbox__prov *p, const inbox__ticket *t,
                             double now_ms, inbox__verdict v,
                             int64_t retry_after_ms);

/* A call's duration (seconds) into the provider's histogram
 * (inbox_provider_info, version 2). Thread-safe. */
void inbox__provider_observe(inbox__prov *p, double seconds);

/* A call that was admitted but never started (no memory): the slot back,
 * no verdict. */
void inbox__provider_cancel(inbox__prov *p, const inbox__ticket *t);

/* The breaker verdict of an HTTP status (0: no answer). */
inbox__verdict inbox__provider_verdict(long status);

#endif
