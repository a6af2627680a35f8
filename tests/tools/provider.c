/*
 * inbox-test-provider — the outside world for the outbox tests: a payment
 * API that honours Idempotency-Key the way payment APIs do, an email API
 * without idempotency (plus a lookup by reference for reconciliation),
 * fault injection, and counters of what it *really* did.
 *
 *   inbox-test-provider [--port N] [--seed S] [--slow-ms MS]
 *                       [--latency-ms MS]
 *                       [--fault pay:KIND=P,...] [--fault email:KIND=P,...]
 *
 * --latency-ms MS: every /pay and /email request (sends and lookups,
 * faults included) is answered MS after it arrived — the effect is
 * performed at once, the answer waits, the way a slow provider records a
 * send and then answers late. Requests being handled are counted
 * (in_flight, in_flight_max in /stats): how many calls a client really
 * had in flight at once.
 *
 * Prints "port=N" on stdout once listening on 127.0.0.1, then serves until
 * SIGTERM/SIGINT. KIND is one of
 *   timeout  perform the effect, then answer only after MS (default 2500)
 *            — after the client has given up
 *   drop     perform the effect, then close the connection without an
 *            answer
 *   500      answer 500 without performing
 *   429      answer 429 without performing
 *   503      answer 503 without performing
 * with probability P (seeded RNG: --seed). Faults can also be queued for
 * the next requests: POST /control/fault?path=pay&kind=drop&count=1;
 * a queued 429 or 503 may carry a Retry-After header: &retry_after=N
 * (seconds) or &retry_after=date:N (an HTTP-date N seconds ahead).
 *
 * Endpoints
 *   POST /pay     JSON body with orderId, amount. Idempotency-Key required.
 *                 New key: charge (counted per key and per order), answer
 *                 200 {"chargeId":..}. Same key + same body: the stored
 *                 first answer, nothing charged. Same key + other body:
 *                 409.
 *   POST /email   JSON body with orderId (and to). No idempotency: every
 *                 request sends an email, counted per order and per
 *                 reference (the Idempotency-Key header, or the body's
 *                 "reference").
 *   GET  /email?reference=R   200 if an email with that reference was
 *                 sent, 404 otherwise.
 *   GET  /stats   JSON counters (see stats()).
 *   GET  /log     every /pay and /email request so far, in arrival order:
 *                 [{"t":epoch seconds (ms precision),"path":"pay"|"email"|
 *                 "lookup","key":Idempotency-Key or reference,"status":N}]
 *                 (status 0: dropped, or not answered yet).
 *   POST /control/fault?path=pay|email&kind=K&count=N[&retry_after=R]
 *   POST /control/faults-clear   drop the queued faults
 *   POST /control/reset   forget everything
 *
 * Thread per connection: a slow answer never holds up the others.
 */
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../clock.h"
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

/* ---- a small string -> counters map ------------------------------- */

typedef struct entry {
	struct entry *next;
	char *name;
	long count;     /* effects performed */
	long requests;  /* requests seen */
	char *body;     /* /pay: body of the first request */
	char *response; /* /pay: the stored first answer */
} entry;

#define NBUCKETS 4096

typedef struct map {
	entry *b[NBUCKETS];
	long size;
} map;

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % NBUCKETS;
}

static entry *map_get(map *m, const char *name, int create)
{
	unsigned h = hash(name);
	for (entry *e = m->b[h]; e; e = e->next)
		if (strcmp(e->name, name) == 0)
			return e;
	if (!create)
		return NULL;
	entry *e = calloc(1, sizeof(*e));
	if (!e || !(e->name = strdup(name))) {
		fprintf(stderr, "provider: out of memory\n");
		exit(2);
	}
	e->next = m->b[h];
	m->b[h] = e;
	m->size++;
	return e;
}

static void map_clear(map *m)
{
	for (int i = 0; i < NBUCKETS; i++) {
		entry *e = m->b[i];
		while (e) {
			entry *n = e->next;
			free(e->name);
			free(e->body);
			free(e->response);
			free(e);
			e = n;
		}
		m->b[i] = NULL;
	}
	m->size = 0;
}

/* Entries with count > 1, and the largest count. */
static void map_dups(const map *m, long *dups, long *max, long *total)
{
	*dups = *max = *total = 0;
	for (int i = 0; i < NBUCKETS; i++)
		for (const entry *e = m->b[i]; e; e = e->next) {
			if (e->count > 1)
				(*dups)++;
			if (e->count > *max)
				*max = e->count;
			if (e->count > 0)
				(*total)++;
		}
}

/* ---- state -------------------------------------------------------- */

enum { F_NONE, F_TIMEOUT, F_DROP, F_500, F_429, F_503, F_KINDS };
static const char *const fault_names[F_KINDS] = {"none", "timeout", "drop",
                                                 "500",  "429",     "503"};
enum { P_PAY, P_EMAIL, P_PATHS };
static const char *const path_names[P_PATHS] = {"pay", "email"};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static map pay_keys, pay_orders, email_refs, email_orders;
static long charges, replays, conflicts, emails, lookups, found, requests;
static long pay_requests, email_requests;
static long email_reused; /* emails that came on a reused connection */
static long faults[P_PATHS][F_KINDS];
static double prob[P_PATHS][F_KINDS];
static int queued[P_PATHS][F_KINDS]; /* forced faults still to inject */
/* Retry-After of the queued 429/503 of a path: seconds, as a date? */
static int queued_ra[P_PATHS][F_KINDS], queued_ra_date[P_PATHS][F_KINDS];
static unsigned rng = 1;
static int slow_ms = 2500;
static int latency_ms;
static long inflight, inflight_max;

/* The request log (GET /log). */
typedef struct logent {
	double t;
	int path; /* P_PAY, P_EMAIL, P_LOOKUP */
	int status;
	char *key;
} logent;
enum { P_LOOKUP = P_PATHS };
static const char *const log_paths[] = {"pay", "email", "lookup"};
static logent *reqlog;
static long nlog, caplog;

static double now_s(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Under mu: log a request; its index, for log_status(). */
static long log_request(int path, const char *key)
{
	if (nlog == caplog) {
		long cap = caplog ? 2 * caplog : 1024;
		logent *n = realloc(reqlog, (size_t)cap * sizeof(*n));
		if (!n) {
			fprintf(stderr, "provider: out of memory\n");
			exit(2);
		}
		reqlog = n;
		caplog = cap;
	}
	logent *e = &reqlog[nlog];
	e->t = now_s();
	e->path = path;
	e->status = 0;
	e->key = strdup(key ? key : "");
	return nlog++;
}

static void log_status(long i, int status)
{
	pthread_mutex_lock(&mu);
	if (i >= 0 && i < nlog)
		reqlog[i].status = status;
	pthread_mutex_unlock(&mu);
}

/* A /pay or /email request being handled (in_flight in /stats). */
static void enter(void)
{
	pthread_mutex_lock(&mu);
	if (++inflight > inflight_max)
		inflight_max = inflight;
	pthread_mutex_unlock(&mu);
}

static void leave(void)
{
	pthread_mutex_lock(&mu);
	inflight--;
	pthread_mutex_unlock(&mu);
}

static double rnd(void)
{
	return (double)(rand_r(&rng) % 1000000) / 1000000.0;
}

/* Under mu: the fault of this request (queued first, then chance);
 * *ra / *ra_date: the Retry-After of a queued 429/503 (0: none). */
static int pick_fault(int path, int *ra, int *ra_date)
{
	*ra = *ra_date = 0;
	for (int k = 1; k < F_KINDS; k++)
		if (queued[path][k] > 0) {
			queued[path][k]--;
			*ra = queued_ra[path][k];
			*ra_date = queued_ra_date[path][k];
			return k;
		}
	double r = rnd(), acc = 0;
	for (int k = 1; k < F_KINDS; k++) {
		acc += prob[path][k];
		if (r < acc)
			return k;
	}
	return F_NONE;
}

/* ---- HTTP plumbing ------------------------------------------------ */

typedef struct req {
	char *body;
	size_t len;
} req;

/* Retry-After of the next answer() of this thread ("" = none). */
static _Thread_local char retry_after[64];

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status,
                              const char *fmt, ...)
{
	char buf[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    strlen(buf), buf, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	if (retry_after[0])
		MHD_add_response_header(r, "Retry-After", retry_after);
	retry_after[0] = '\0';
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* The Retry-After header of the next answer: N seconds, or the HTTP-date
 * N seconds from now (whole seconds, as the format has). */
static void set_retry_after(int n, int as_date)
{
	if (!as_date) {
		snprintf(retry_after, sizeof(retry_after), "%d", n);
		return;
	}
	time_t t = time(NULL) + n;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(retry_after, sizeof(retry_after), "%a, %d %b %Y %H:%M:%S GMT",
	         &tm);
}

/* An injected 429/503/500 (nothing performed), after the latency. */
static enum MHD_Result refuse(struct MHD_Connection *c, long li, int fault,
                              int ra, int ra_date)
{
	unsigned status = fault == F_500 ? 500 : fault == F_429 ? 429 : 503;
	if (latency_ms)
		sleep_ms(latency_ms);
	if (ra && fault != F_500)
		set_retry_after(ra, ra_date);
	log_status(li, (int)status);
	return answer(c, status, "{\"error\":\"injected %s\"}",
	              fault_names[fault]);
}

/* After the effect: the fault decides how (and whether) we answer. */
static enum MHD_Result deliver(struct MHD_Connection *c, long li, int fault,
                               unsigned status, const char *body)
{
	if (latency_ms)
		sleep_ms(latency_ms);
	if (fault == F_DROP)
		return MHD_NO; /* MHD closes the socket: no answer at all */
	if (fault == F_TIMEOUT)
		sleep_ms(slow_ms);
	log_status(li, (int)status);
	return answer(c, status, "%s", body);
}

static const char *field(json_t *o, const char *name, char *buf, size_t n)
{
	json_t *v = json_object_get(o, name);
	if (json_is_string(v))
		snprintf(buf, n, "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, n, "%lld", (long long)json_integer_value(v));
	else
		return NULL;
	return buf;
}

/* ---- endpoints ----------------------------------------------------- */

/* Requests this connection served before (NOTIFY_CONNECTION context). */
static long *conn_served(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

static enum MHD_Result pay_locked(struct MHD_Connection *c, const req *q,
                                  const char *key, const char *order)
{
	char out[512];
	requests++;
	pay_requests++;
	long li = log_request(P_PAY, key);
	int ra, ra_date;
	int fault = pick_fault(P_PAY, &ra, &ra_date);
	if (fault == F_500 || fault == F_429 || fault == F_503) {
		faults[P_PAY][fault]++;
		pthread_mutex_unlock(&mu);
		return refuse(c, li, fault, ra, ra_date);
	}
	entry *e = map_get(&pay_keys, key, 1);
	e->requests++;
	if (e->body) {
		int same = strlen(e->body) == q->len &&
		           memcmp(e->body, q->body ? q->body : "", q->len) == 0;
		if (same)
			replays++;
		else
			conflicts++;
		snprintf(out, sizeof(out), "%s", e->response);
		if (fault)
			faults[P_PAY][fault]++;
		pthread_mutex_unlock(&mu);
		if (!same) {
			log_status(li, 409);
			return answer(
			    c, 409,
			    "{\"error\":\"Idempotency-Key reused with "
			    "another request body\"}");
		}
		return deliver(c, li, fault, 200, out);
	}
	/* A new key: the charge happens now. */
	e->body = malloc(q->len + 1);
	if (e->body) {
		memcpy(e->body, q->body ? q->body : "", q->len);
		e->body[q->len] = '\0';
	}
	e->count++;
	charges++;
	map_get(&pay_orders, order, 1)->count++;
	snprintf(out, sizeof(out),
	         "{\"chargeId\":\"ch_%ld\",\"orderId\":\"%s\"}", charges,
	         order);
	e->response = strdup(out);
	if (fault)
		faults[P_PAY][fault]++;
	pthread_mutex_unlock(&mu);
	return deliver(c, li, fault, 200, out);
}

static enum MHD_Result pay(struct MHD_Connection *c, const req *q)
{
	const char *key =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
	char order[256];
	json_t *b = json_loadb(q->body ? q->body : "", q->len, 0, NULL);
	if (!key || !*key || !json_is_object(b) ||
	    !field(b, "orderId", order, sizeof(order))) {
		json_decref(b);
		return answer(c, 400,
		              "{\"error\":\"Idempotency-Key and a JSON body "
		              "with orderId are required\"}");
	}
	json_decref(b);
	enter();
	pthread_mutex_lock(&mu);
	enum MHD_Result r = pay_locked(c, q, key, order); /* unlocks */
	leave();
	return r;
}

static enum MHD_Result email_locked(struct MHD_Connection *c, const char *ref,
                                    const char *order)
{
	char out[512];
	requests++;
	email_requests++;
	long *served = conn_served(c);
	if (served && *served > 1)
		email_reused++;
	long li = log_request(P_EMAIL, ref);
	int ra, ra_date;
	int fault = pick_fault(P_EMAIL, &ra, &ra_date);
	if (fault == F_500 || fault == F_429 || fault == F_503) {
		faults[P_EMAIL][fault]++;
		pthread_mutex_unlock(&mu);
		return refuse(c, li, fault, ra, ra_date);
	}
	emails++;
	map_get(&email_orders, order, 1)->count++;
	if (ref && *ref)
		map_get(&email_refs, ref, 1)->count++;
	snprintf(out, sizeof(out), "{\"messageId\":\"em_%ld\"}", emails);
	if (fault)
		faults[P_EMAIL][fault]++;
	pthread_mutex_unlock(&mu);
	return deliver(c, li, fault, 202, out);
}

static enum MHD_Result email_send(struct MHD_Connection *c, const req *q)
{
	const char *ref =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
	char order[256], refbuf[256];
	json_t *b = json_loadb(q->body ? q->body : "", q->len, 0, NULL);
	if (!json_is_object(b) || !field(b, "orderId", order, sizeof(order))) {
		json_decref(b);
		return answer(c, 400, "{\"error\":\"orderId is required\"}");
	}
	if (!ref || !*ref)
		ref = field(b, "reference", refbuf, sizeof(refbuf));
	json_decref(b);
	enter();
	pthread_mutex_lock(&mu);
	enum MHD_Result r = email_locked(c, ref, order); /* unlocks */
	leave();
	return r;
}

static enum MHD_Result email_lookup(struct MHD_Connection *c)
{
	const char *ref =
	    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "reference");
	if (!ref)
		return answer(c, 400, "{\"error\":\"reference= is required\"}");
	enter();
	pthread_mutex_lock(&mu);
	requests++;
	lookups++;
	long li = log_request(P_LOOKUP, ref);
	entry *e = map_get(&email_refs, ref, 0);
	long n = e ? e->count : 0;
	if (n)
		found++;
	pthread_mutex_unlock(&mu);
	if (latency_ms)
		sleep_ms(latency_ms);
	log_status(li, n ? 200 : 404);
	enum MHD_Result r =
	    n ? answer(c, 200, "{\"reference\":\"%s\",\"sent\":%ld}", ref, n)
	      : answer(c, 404, "{\"reference\":\"%s\",\"sent\":0}", ref);
	leave();
	return r;
}

/* GET /log: the request log as a JSON array (any size). */
static enum MHD_Result request_log(struct MHD_Connection *c)
{
	pthread_mutex_lock(&mu);
	size_t cap = 64 + (size_t)nlog * 48, len = 0;
	for (long i = 0; i < nlog; i++)
		cap += strlen(reqlog[i].key) * 6;
	char *buf = malloc(cap);
	if (!buf) {
		pthread_mutex_unlock(&mu);
		return MHD_NO;
	}
	buf[len++] = '[';
	for (long i = 0; i < nlog; i++) {
		const logent *e = &reqlog[i];
		len += (size_t)snprintf(buf + len, cap - len,
		                        "%s{\"t\":%.3f,\"path\":\"%s\","
		                        "\"status\":%d,\"key\":",
		                        i ? "," : "", e->t, log_paths[e->path],
		                        e->status);
		json_t *js = json_string(e->key);
		char *k = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
		json_decref(js);
		len += (size_t)snprintf(buf + len, cap - len, "%s}",
		                        k ? k : "\"\"");
		free(k);
	}
	buf[len++] = ']';
	pthread_mutex_unlock(&mu);
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result ret = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result stats(struct MHD_Connection *c)
{
	long pd, pm, po, ed, em, eo, kd, km, kt, rd, rm, rt;
	pthread_mutex_lock(&mu);
	map_dups(&pay_orders, &pd, &pm, &po);
	map_dups(&email_orders, &ed, &em, &eo);
	map_dups(&pay_keys, &kd, &km, &kt);
	map_dups(&email_refs, &rd, &rm, &rt);
	/* Requests per payment key (replays included): > 1 means a row was
	 * performed more than once, even if the key made it harmless. */
	long kreq = 0;
	for (int i = 0; i < NBUCKETS; i++)
		for (const entry *e = pay_keys.b[i]; e; e = e->next)
			if (e->requests > 1)
				kreq++;
	char f[2][256];
	for (int p = 0; p < P_PATHS; p++)
		snprintf(f[p], sizeof(f[p]),
		         "{\"timeout\":%ld,\"drop\":%ld,\"500\":%ld,"
		         "\"429\":%ld,\"503\":%ld}",
		         faults[p][F_TIMEOUT], faults[p][F_DROP],
		         faults[p][F_500], faults[p][F_429], faults[p][F_503]);
	enum MHD_Result r = answer(
	    c, 200,
	    "{\"requests\":%ld,\"in_flight\":%ld,\"in_flight_max\":%ld,"
	    "\"pay\":{\"requests\":%ld,\"charges\":%ld,\"replays\":%ld,"
	    "\"conflicts\":%ld,\"orders\":%ld,\"orders_charged_twice\":%ld,"
	    "\"max_per_order\":%ld,\"keys\":%ld,\"keys_charged_twice\":%ld,"
	    "\"keys_requested_twice\":%ld,\"faults\":%s},"
	    "\"email\":{\"requests\":%ld,\"sent\":%ld,\"orders\":%ld,"
	    "\"orders_emailed_twice\":%ld,\"max_per_order\":%ld,"
	    "\"references\":%ld,\"references_sent_twice\":%ld,"
	    "\"lookups\":%ld,\"found\":%ld,\"on_reused_connection\":%ld,"
	    "\"faults\":%s}}",
	    requests, inflight, inflight_max, pay_requests, charges, replays,
	    conflicts, po, pd, pm, kt, kd, kreq, f[P_PAY], email_requests,
	    emails, eo, ed, em, rt, rd, lookups, found, email_reused,
	    f[P_EMAIL]);
	pthread_mutex_unlock(&mu);
	return r;
}

static int parse_kind(const char *s)
{
	for (int k = 1; k < F_KINDS; k++)
		if (s && strcmp(s, fault_names[k]) == 0)
			return k;
	return -1;
}

static int parse_path(const char *s)
{
	for (int p = 0; p < P_PATHS; p++)
		if (s && strcmp(s, path_names[p]) == 0)
			return p;
	return -1;
}

static enum MHD_Result control(struct MHD_Connection *c, const char *url)
{
	if (strcmp(url, "/control/reset") == 0) {
		pthread_mutex_lock(&mu);
		map_clear(&pay_keys);
		map_clear(&pay_orders);
		map_clear(&email_refs);
		map_clear(&email_orders);
		charges = replays = conflicts = emails = lookups = found = 0;
		requests = pay_requests = email_requests = email_reused = 0;
		inflight_max = inflight;
		memset(faults, 0, sizeof(faults));
		memset(queued, 0, sizeof(queued));
		for (long i = 0; i < nlog; i++)
			free(reqlog[i].key);
		nlog = 0;
		pthread_mutex_unlock(&mu);
		return answer(c, 200, "{\"reset\":true}");
	}
	if (strcmp(url, "/control/faults-clear") == 0) {
		pthread_mutex_lock(&mu);
		memset(queued, 0, sizeof(queued));
		pthread_mutex_unlock(&mu);
		return answer(c, 200, "{\"cleared\":true}");
	}
	int p = parse_path(
	    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "path"));
	int k = parse_kind(
	    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "kind"));
	const char *n =
	    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "count");
	const char *ra = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
	                                             "retry_after");
	int ra_date = ra && strncmp(ra, "date:", 5) == 0;
	if (strcmp(url, "/control/fault") != 0 || p < 0 || k < 0)
		return answer(c, 400,
		              "{\"error\":\"POST /control/fault?path=pay|email"
		              "&kind=timeout|drop|500|429|503&count=N"
		              "[&retry_after=N|date:N]\"}");
	pthread_mutex_lock(&mu);
	queued[p][k] += n ? atoi(n) : 1;
	queued_ra[p][k] = ra ? atoi(ra + (ra_date ? 5 : 0)) : 0;
	queued_ra_date[p][k] = ra_date;
	pthread_mutex_unlock(&mu);
	return answer(c, 200, "{\"queued\":true}");
}

static enum MHD_Result route(void *cls, struct MHD_Connection *c,
                             const char *url, const char *method,
                             const char *version, const char *upload,
                             size_t *upload_size, void **con_cls)
{
	(void)cls;
	(void)version;
	req *q = *con_cls;
	if (!q) {
		/* First call: headers only. */
		q = calloc(1, sizeof(*q));
		if (!q)
			return MHD_NO;
		*con_cls = q;
		long *served = conn_served(c);
		if (served) {
			pthread_mutex_lock(&mu);
			(*served)++;
			pthread_mutex_unlock(&mu);
		}
		return MHD_YES;
	}
	if (*upload_size) {
		char *nb = realloc(q->body, q->len + *upload_size + 1);
		if (!nb)
			return MHD_NO;
		memcpy(nb + q->len, upload, *upload_size);
		q->body = nb;
		q->len += *upload_size;
		q->body[q->len] = '\0';
		*upload_size = 0;
		return MHD_YES;
	}
	int post = strcmp(method, "POST") == 0;
	if (post && strcmp(url, "/pay") == 0)
		return pay(c, q);
	if (post && strcmp(url, "/email") == 0)
		return email_send(c, q);
	if (!post && strcmp(url, "/email") == 0)
		return email_lookup(c);
	if (!post && strcmp(url, "/stats") == 0)
		return stats(c);
	if (!post && strcmp(url, "/log") == 0)
		return request_log(c);
	if (post && strncmp(url, "/control/", 9) == 0)
		return control(c, url);
	return answer(c, 404, "{\"error\":\"no such endpoint\"}");
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)c;
	(void)toe;
	req *q = *con_cls;
	if (q) {
		free(q->body);
		free(q);
		*con_cls = NULL;
	}
}

/* A connection's counter of requests, for on_reused_connection. */
static void on_connection(void *cls, struct MHD_Connection *c, void **ctx,
                          enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	(void)c;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		*ctx = calloc(1, sizeof(long));
	} else {
		free(*ctx);
		*ctx = NULL;
	}
}

/* "pay:timeout=0.1,drop=0.05" */
static int parse_fault(const char *spec)
{
	const char *colon = strchr(spec, ':');
	char path[16];
	if (!colon || (size_t)(colon - spec) >= sizeof(path))
		return -1;
	memcpy(path, spec, (size_t)(colon - spec));
	path[colon - spec] = '\0';
	int p = parse_path(path);
	if (p < 0)
		return -1;
	char *list = strdup(colon + 1), *save = NULL;
	for (char *t = strtok_r(list, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		if (!eq)
			goto bad;
		*eq = '\0';
		int k = parse_kind(t);
		if (k < 0)
			goto bad;
		prob[p][k] = atof(eq + 1);
	}
	free(list);
	return 0;
bad:
	free(list);
	return -1;
}

int main(int argc, char **argv)
{
	int port = 0;
	unsigned seed = (unsigned)time(NULL);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--slow-ms") && i + 1 < argc)
			slow_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--latency-ms") && i + 1 < argc)
			latency_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--fault") && i + 1 < argc &&
		         parse_fault(argv[i + 1]) == 0)
			i++;
		else {
			fprintf(
			    stderr,
			    "usage: %s [--port N] [--seed S] [--slow-ms MS] "
			    "[--latency-ms MS] [--fault pay|email:timeout=P,"
			    "drop=P,500=P,429=P,503=P]...\n",
			    argv[0]);
			return 2;
		}
	}
	rng = seed ? seed : 1;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	/* Blocked before MHD starts its threads: only sigwait sees them. */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct MHD_Daemon *d = MHD_start_daemon(
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	        MHD_USE_ERROR_LOG,
	    (uint16_t)port, NULL, NULL, route, NULL, MHD_OPTION_SOCK_ADDR,
	    (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, completed,
	    NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)60, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "provider: cannot listen on 127.0.0.1:%d\n",
		        port);
		return 1;
	}
	const union MHD_DaemonInfo *info =
	    MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("port=%u\n", info ? (unsigned)info->port : (unsigned)port);
	fflush(stdout);
	int sig;
	sigwait(&set, &sig);
	/* Connections may be sleeping in a slow answer: do not wait. */
	_exit(0);
}
