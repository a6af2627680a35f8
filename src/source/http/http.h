/*
 * HTTP source: an HTTP(S) ingress that is an inbox (docs/http.md).
 *
 *   http://HOST:PORT/PATH?mode=api|standard|github|stripe&...
 *   https://HOST:PORT/PATH?cert=FILE&key=FILE&...
 *
 * One source is one route: METHOD PATH on the listener of HOST:PORT (port
 * 0: a free one, logged as the event "http_listening"). Sources whose
 * URLs name the same host and port (0 included) share one listener: the
 * first to open it starts it, the last to close stops it, and the
 * listener's own options (https, cert, key, connections, timeout) must
 * agree. A request is dispatched by path and method; no route: 404; the
 * path with another method: 405 with Allow. Each
 * accepted request is a delivery whose payload is the envelope
 *   {"method":"POST","route":"/PATH","body":BODY}
 * (BODY the request's JSON body as sent), whose id is the idempotency key
 * (mode api: the Idempotency-Key header, or id_header=, or id_pointer= in
 * the body) or the webhook's delivery id (webhook-id, X-GitHub-Delivery,
 * the Stripe event's "id"). The consumer's default fingerprint is over
 * the whole envelope: method, route and canonical body.
 *
 * The connection is suspended until the batch holding the request is
 * settled, after the commit: the response is the ack. Requests arriving
 * while a batch commits wait together for the next poll: one transaction
 * for all of them (group commit). What is refused before anything is
 * recorded is answered at once on the HTTP thread: 400 (no key, not
 * JSON), 401 (bad signature, counted), 404, 405, 409 (the key is in
 * flight here), 413 (body over max_body).
 *
 * Internal to src/source/http.
 */
#ifndef INBOX_SOURCE_HTTP_H
#define INBOX_SOURCE_HTTP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <inbox/sys/source.h>

#include "base/buf.h"

typedef enum http_mode {
	HTTP_MODE_API = 0,  /* idempotent API requests */
	HTTP_MODE_STANDARD, /* Standard Webhooks (webhook-id/-timestamp/-sig) */
	HTTP_MODE_GITHUB,   /* X-Hub-Signature-256, X-GitHub-Delivery */
	HTTP_MODE_STRIPE    /* Stripe-Signature t=,v1= */
} http_mode;

typedef struct http_secret {
	unsigned char *p; /* the HMAC key's bytes */
	size_t n;
} http_secret;

typedef struct http_conf {
	int tls;
	char *host; /* decoded; "127.0.0.1" by default */
	int port;   /* 0: a free one */
	char *path; /* the route, starting with '/' */
	http_mode mode;
	char *method;          /* the one method taken (default POST) */
	char *id_header;       /* api: default Idempotency-Key */
	char *id_pointer;      /* api: the key from the body instead */
	int status;            /* api: the status of an applied request */
	size_t max_body;       /* bytes; over it: 413 */
	int max_body_set;      /* given in the URL */
	int64_t tolerance_ms;  /* webhooks: timestamp tolerance */
	int timeout_s;         /* idle connection timeout (headers, body) */
	int64_t body_ms;       /* the whole body within this, else 408 */
	unsigned conn_limit;   /* connections at once */
	int retry_after_s;     /* Retry-After of 409 and 503 */
	int64_t ack_delay_ms;  /* tests: a pause between commit and answers */
	int64_t answer_ms;     /* a request waits at most this for its commit */
	size_t replay_cache;   /* api: answers kept for replays (0: none) */
	int64_t replay_ttl_ms; /* api: each kept at most this (0: none) */
	int replay_set;        /* replay_cache or its ttl given in the URL */
	http_secret *secrets;  /* webhooks: any one verifies (rotation) */
	size_t nsecrets;
	char *cert_file, *key_file; /* https */
} http_conf;

/* One request, from its first byte until MHD says it is done. */
typedef struct http_req {
	struct MHD_Connection *conn;
	struct http_source *hs;
	int state; /* HTTP_REQ_* */
	int64_t t0_ms;
	int64_t timestamp_ms; /* wall clock at acceptance */
	inbox__buf body;
	int too_big;
	char *key;      /* the delivery's id */
	inbox__buf env; /* the payload envelope */
	char *headers;  /* JSON object of the headers kept */
	/* the answer */
	unsigned status;
	inbox__buf resp;
	const char *resp_type;
	inbox__buf xhdr; /* stored headers: "name\0value\0"... */
	int replay;
	int cacheable;  /* an applied record's answer (http_cache.c) */
	char *type_own; /* resp_type when it is the request's own copy */
	int early;      /* answered by the watchdog while its batch ran */
	int orphan;     /* MHD finished it while in a batch: settle frees */
	int retry_after;
	const char *outcome; /* for the log */
	char *allow;         /* a 405's Allow (NULL: hs's method) */
	struct http_req *next;
} http_req;

enum {
	HTTP_REQ_RECEIVING = 0,
	HTTP_REQ_QUEUED,
	HTTP_REQ_IN_BATCH,
	HTTP_REQ_ANSWERED
};

/* Counters, by status class (index status / 100 - 1: 1xx..5xx). */
typedef struct http_counters {
	uint64_t by_class[5];
	uint64_t bad_signatures;
	uint64_t replays;
} http_counters;

/* The replay cache of a route (http_cache.c), under its source's mu. */
typedef struct http_cached http_cached;
typedef struct http_cache {
	size_t max;
	int64_t ttl_ms;
	http_cached **buckets; /* nbuckets, a power of two */
	size_t nbuckets, n;
	size_t bytes; /* kept: at most CACHE_MAX_BYTES (http_cache.c) */
	http_cached *fhead, *ftail; /* oldest first */
	uint64_t hits;
	/* mixed into every key's hash, drawn at init: the keys are the
	 * clients' (Idempotency-Key), a chain is bounded all the same */
	uint64_t seed;
} http_cache;

/* A closed route of a listener that goes on: its requests get 503 with
 * Retry-After (its consumer stops or restarts), never 404. */
typedef struct http_gone {
	char *path, *method;
	int retry_after_s;
	struct http_gone *next;
} http_gone;

/* One listener (host:port), shared by its routes. Under the listeners'
 * lock (http_source.c): routes, dead, refs. */
typedef struct http_listener {
	/* the first route's host, port (as configured: 0 a free one) and
	 * listener options (inbox__http_listener_differs); nothing else */
	http_conf lc;
	char *owner; /* that route's consumer, for the messages */
	struct MHD_Daemon *mhd;
	char *cert_pem, *key_pem;
	char address[80];           /* "127.0.0.1:8080" as bound */
	struct http_source *routes; /* open */
	struct http_source *dead;   /* closed, MHD may still finish theirs */
	struct http_gone *gone;     /* closed routes: 503 while it lives */
	int refs;
	struct http_listener *next;
} http_listener;

typedef struct http_source {
	inbox_source base;
	http_conf conf;
	http_listener *lis;
	struct http_source *next_route; /* in lis->routes or lis->dead */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	http_req *qhead, *qtail; /* accepted, waiting for a poll */
	size_t qlen;
	http_req **batch; /* handed out by the last poll */
	size_t nbatch, batch_cap;
	int closing;
	pthread_t watchdog; /* answers what waits past answer_within */
	int watching;
	pthread_cond_t wd_cv;
	size_t live;                   /* requests MHD has not finished */
	http_counters ctr;             /* under mu */
	http_cache cache;              /* under mu */
	struct http_source *next_open; /* the registry of open sources */
} http_source;

/* http_url.c: parse url into c (freed by http_conf_free); the reason in
 * src's errmsg. INBOX_OK, INBOX_ERR_URL, INBOX_ERR_NOMEM, INBOX_ERR_IO (a
 * secret or certificate file unreadable). */
int inbox__http_conf_parse(http_conf *c, inbox_source *src, const char *url,
                           const inbox_source_options *opts);
void inbox__http_conf_free(http_conf *c);
/* Whether a and b name the same listener (host and port as written), and
 * then which of its options differ ("cert", "timeout"...; NULL: none). */
int inbox__http_same_listener(const http_conf *a, const http_conf *b);
const char *inbox__http_listener_differs(const http_conf *a,
                                         const http_conf *b);
/* For `inbox check`: 0 when the routes of url_a (consumer name_a) and
 * url_b (name_b) can be open at once (other listeners, or one listener
 * they agree on with distinct routes); -1 and why (naming both
 * consumers, never a secret) when not. URLs that do not parse: 0 (their
 * open reports it). */
int inbox__http_routes_check(const char *url_a, const char *name_a,
                             const char *url_b, const char *name_b, char *why,
                             size_t len);
/* The whole of a file (NUL-terminated), or NULL (errno set). */
char *inbox__http_read_file(const char *path, size_t *len);

/* http_sig.c: verify a webhook request of mode c->mode. 1 verified, 0
 * not (why: a static text, never a secret), -1 NOMEM. `hdr` looks a
 * header up by name (NULL when absent). now_ms: the wall clock. */
typedef const char *(*http_hdr_fn)(void *payload, const char *name);
int inbox__http_verify(const http_conf *c, http_hdr_fn hdr, void *payload,
                       const char *body, size_t n, int64_t now_ms,
                       const char **why);
/* Base64 (standard alphabet, padding optional) of [s, s+n) into out,
 * which holds at least n bytes. The length, or -1 if it is not base64. */
long inbox__http_b64_decode(unsigned char *out, const char *s, size_t n);

/* http_reply.c: the answer to r (NULL: the transaction failed) into
 * req's resp, status and headers. */
void inbox__http_reply(const http_conf *c, http_req *req,
                       const inbox_result *r);
/* A problem+json (RFC 9457) answer of status with title and detail. */
void inbox__http_problem(http_req *req, unsigned status, const char *title,
                         const char *detail);

/* http_cache.c (under the source's mu): init and free; get fills req's
 * answer (a replay) from an entry of its key whose envelope and headers
 * are req's bytes and returns 1, else 0; put keeps req's answer when
 * req->cacheable (its batch committed). */
/* The hash of key in c (seeded per cache); its low bits pick the
 * bucket. */
uint64_t inbox__http_cache_hash(const http_cache *c, const char *key);
void inbox__http_cache_init(http_cache *c, size_t max, int64_t ttl_ms);
void inbox__http_cache_free(http_cache *c);
int inbox__http_cache_get(http_cache *c, http_req *req);
void inbox__http_cache_put(http_cache *c, const http_req *req);

/* http_metrics.c: the registry of open sources, for the metrics. */
void inbox__http_registry_add(http_source *hs);
void inbox__http_registry_remove(http_source *hs);

#endif
