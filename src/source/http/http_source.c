/*
 * HTTP source: the listener (libmicrohttpd, one internal thread, suspend
 * and resume) and the source's open/close/poll/settle. See http.h.
 *
 * Threads: MHD's thread runs on_request and on_done; the consumer's
 * thread runs poll and settle. They meet under hs->mu: the queue of
 * accepted requests, the batch in hand, the counters. A request's
 * connection is suspended from its acceptance until settle (or close)
 * has put its answer in place, then resumed: MHD calls on_request once
 * more and the answer is queued there.
 */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/json.h"
#include "base/log.h"
#include "source/common.h"
#include "source/http/http.h"

#define MAX_KEY 255

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void req_free(http_req *req)
{
	if (!req)
		return;
	inbox__buf_free(&req->body);
	inbox__buf_free(&req->env);
	inbox__buf_free(&req->resp);
	inbox__buf_free(&req->xhdr);
	free(req->key);
	free(req->headers);
	free(req->allow);
	free(req->type_own);
	free(req);
}

static void count_and_log(http_source *hs, http_req *req, const char *url)
{
	if (!hs) { /* no route: counted by none */
		inbox__log(INBOX_LOG_INFO, NULL,
		           "\"event\":\"http_request\",\"path\":\"%s\","
		           "\"status\":%u,\"outcome\":\"refused\"",
		           inbox__log_escape(url ? url : ""), req->status);
		return;
	}
	unsigned cls = req->status / 100;
	pthread_mutex_lock(&hs->mu);
	if (cls >= 1 && cls <= 5)
		hs->ctr.by_class[cls - 1]++;
	if (req->replay)
		hs->ctr.replays++;
	pthread_mutex_unlock(&hs->mu);
	if (!inbox__log_enabled(INBOX_LOG_INFO))
		return;
	inbox__log(INBOX_LOG_INFO, hs->base.opts.consumer,
	           "\"event\":\"http_request\",\"route\":\"%s\","
	           "\"status\":%u,\"outcome\":\"%s\",\"replay\":%s,"
	           "\"ms\":%lld",
	           inbox__log_escape(hs->conf.path), req->status,
	           req->outcome ? req->outcome : "refused",
	           req->replay ? "true" : "false",
	           (long long)(inbox__src_mono_ms() - req->t0_ms));
}

static enum MHD_Result queue_answer(http_source *hs, http_req *req,
                                    const char *url)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    req->resp.len, req->resp.data, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
	                        req->resp_type ? req->resp_type
	                                       : "application/json");
	/* the stored headers, as the first processing made them */
	for (size_t i = 0, len = req->xhdr.len; i < len;) {
		const char *name = req->xhdr.data + i;
		size_t nl = strnlen(name, len - i);
		if (i + nl + 1 >= len)
			break;
		const char *value = name + nl + 1;
		size_t vl = strnlen(value, len - i - nl - 1);
		if (i + nl + 1 + vl >= len)
			break;
		MHD_add_response_header(r, name, value);
		i += nl + vl + 2;
	}
	if (req->replay)
		MHD_add_response_header(r, "Idempotent-Replayed", "true");
	if (req->retry_after > 0) {
		char b[16];
		snprintf(b, sizeof(b), "%d", req->retry_after);
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, b);
	}
	if (req->status == 405)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
		                        req->allow ? req->allow
		                                   : hs->conf.method);
	enum MHD_Result rc = MHD_queue_response(req->conn, req->status, r);
	MHD_destroy_response(r);
	if (!req->early) /* one of the watchdog's stays in its batch */
		req->state = HTTP_REQ_ANSWERED;
	count_and_log(hs, req, url);
	return rc;
}

/* Refused on the HTTP thread, before anything is recorded. */
static enum MHD_Result refuse(http_source *hs, http_req *req, unsigned status,
                              const char *title, const char *detail)
{
	inbox__http_problem(req, status, title, detail);
	if (hs && (status == 409 || status == 503))
		req->retry_after = hs->conf.retry_after_s;
	return queue_answer(hs, req, NULL);
}

static const char *hdr_of(void *payload, const char *name)
{
	return MHD_lookup_connection_value(payload, MHD_HEADER_KIND, name);
}

/* The key of an accepted request into req->key; NULL detail when found,
 * else why not (static). */
static const char *find_key(http_source *hs, http_req *req, json_t *body)
{
	const http_conf *c = &hs->conf;
	const char *k = NULL;
	switch (c->mode) {
	case HTTP_MODE_API:
		if (c->id_pointer) {
			json_t *v = inbox__pointer_get(body, c->id_pointer);
			k = json_is_string(v) ? json_string_value(v) : NULL;
		} else {
			k = hdr_of(req->conn, c->id_header);
		}
		break;
	case HTTP_MODE_STANDARD:
		k = hdr_of(req->conn, "webhook-id");
		break;
	case HTTP_MODE_GITHUB:
		k = hdr_of(req->conn, "X-GitHub-Delivery");
		break;
	case HTTP_MODE_STRIPE: {
		json_t *v = inbox__pointer_get(body, "/id");
		k = json_is_string(v) ? json_string_value(v) : NULL;
		break;
	}
	}
	if (!k || !*k)
		return c->mode == HTTP_MODE_API
		           ? "the idempotency key is missing"
		           : "the delivery id is missing";
	size_t n = strlen(k);
	if (n > MAX_KEY || !inbox__utf8_valid(k, n))
		return "the key is longer than 255 bytes or not UTF-8";
	req->key = strdup(k);
	return req->key ? NULL : "out of memory";
}

/* {"method":M,"route":R,"body":BODY}: BODY as sent, which parsed as one
 * JSON document (so nothing of it can reach the envelope's own names). */
static int envelope(http_source *hs, http_req *req, const char *method)
{
	inbox__buf *e = &req->env;
	int rc = inbox__buf_puts(e, "{\"method\":");
	rc |= inbox__src_json_text(e, method, strlen(method), 0);
	rc |= inbox__buf_puts(e, ",\"route\":");
	rc |= inbox__src_json_text(e, hs->conf.path, strlen(hs->conf.path), 0);
	rc |= inbox__buf_puts(e, ",\"body\":");
	rc |= inbox__buf_append(e, req->body.data, req->body.len);
	rc |= inbox__buf_puts(e, "}");
	inbox__buf *h = &(inbox__buf){0};
	const char *ct = hdr_of(req->conn, MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *ua = hdr_of(req->conn, MHD_HTTP_HEADER_USER_AGENT);
	rc |= inbox__buf_puts(h, "{\"content-type\":");
	rc |= inbox__src_json_text(h, ct ? ct : "", ct ? strlen(ct) : 0, 0);
	rc |= inbox__buf_puts(h, ",\"user-agent\":");
	rc |= inbox__src_json_text(h, ua ? ua : "", ua ? strlen(ua) : 0, 0);
	rc |= inbox__buf_puts(h, "}");
	rc |= inbox__buf_putc(h, '\0');
	req->headers = h->data;
	return rc < 0 ? -1 : 0;
}

static int key_in_flight(http_source *hs, const char *key)
{
	for (http_req *q = hs->qhead; q; q = q->next)
		if (strcmp(q->key, key) == 0)
			return 1;
	for (size_t i = 0; i < hs->nbatch; i++)
		if (strcmp(hs->batch[i]->key, key) == 0)
			return 1;
	return 0;
}

/* The whole request is in: verify, find the key, queue it. */
static enum MHD_Result accept_req(http_source *hs, http_req *req,
                                  const char *method)
{
	const char *why;
	if (hs->conf.mode != HTTP_MODE_API) {
		int v = inbox__http_verify(&hs->conf, hdr_of, req->conn,
		                           req->body.data, req->body.len,
		                           wall_ms(), &why);
		if (v < 0)
			return refuse(hs, req, 503, "Temporarily unavailable",
			              "out of memory");
		if (v == 0) {
			pthread_mutex_lock(&hs->mu);
			hs->ctr.bad_signatures++;
			pthread_mutex_unlock(&hs->mu);
			inbox__log(INBOX_LOG_WARN, hs->base.opts.consumer,
			           "\"event\":\"http_bad_signature\","
			           "\"route\":\"%s\",\"error\":\"%s\"",
			           inbox__log_escape(hs->conf.path), why);
			return refuse(hs, req, 401, "Bad signature", why);
		}
	}
	json_t *j = NULL;
	char err[256];
	int rc = inbox__json_parse(req->body.data ? req->body.data : "",
	                           req->body.len, &j, err, sizeof(err));
	if (rc == INBOX_ERR_NOMEM)
		return refuse(hs, req, 503, "Temporarily unavailable",
		              "out of memory");
	if (rc < 0)
		return refuse(hs, req, 400, "The body is not JSON", err);
	why = find_key(hs, req, j);
	json_decref(j);
	if (why)
		return refuse(hs, req, 400, "Bad request", why);
	if (envelope(hs, req, method) < 0)
		return refuse(hs, req, 503, "Temporarily unavailable",
		              "out of memory");
	inbox__buf_free(&req->body);
	req->timestamp_ms = wall_ms();
	pthread_mutex_lock(&hs->mu);
	if (hs->closing || key_in_flight(hs, req->key)) {
		int closing = hs->closing;
		pthread_mutex_unlock(&hs->mu);
		if (closing)
			return refuse(hs, req, 503, "Shutting down",
			              "retry later");
		return refuse(hs, req, 409, "Request in progress",
		              "a request with this key is being processed; "
		              "retry later");
	}
	/* the same request as one applied and committed: its answer
	 * now, from memory (http_cache.c) */
	if (inbox__http_cache_get(&hs->cache, req)) {
		pthread_mutex_unlock(&hs->mu);
		return queue_answer(hs, req, NULL);
	}
	MHD_suspend_connection(req->conn);
	req->state = HTTP_REQ_QUEUED;
	if (hs->qtail)
		hs->qtail->next = req;
	else
		hs->qhead = req;
	hs->qtail = req;
	hs->qlen++;
	pthread_cond_signal(&hs->cv);
	pthread_mutex_unlock(&hs->mu);
	return MHD_YES;
}

/* ---- the listeners ---------------------------------------------------- */

/* The open listeners; lock order: lis_mu, then a route's mu. */
static pthread_mutex_t lis_mu = PTHREAD_MUTEX_INITIALIZER;
static http_listener *lis_head;

/* Under lis_mu: the route of METHOD PATH on lis, or NULL with *path_of
 * the first route of PATH (NULL: none) and *allow (malloc'ed, or NULL)
 * the methods PATH has. */
static http_source *route_of(http_listener *lis, const char *url,
                             const char *method, http_source **path_of,
                             char **allow, const http_gone **gone)
{
	inbox__buf a = {0};
	*allow = NULL;
	*path_of = NULL;
	*gone = NULL;
	for (http_source *r = lis->routes; r; r = r->next_route) {
		if (strcmp(r->conf.path, url) != 0)
			continue;
		if (strcmp(r->conf.method, method) == 0)
			return r;
		if (!*path_of)
			*path_of = r;
		if (a.len)
			inbox__buf_puts(&a, ", ");
		inbox__buf_puts(&a, r->conf.method);
	}
	for (const http_gone *g = lis->gone; g && !a.len; g = g->next)
		if (!strcmp(g->path, url) && !strcmp(g->method, method))
			*gone = g;
	if (a.len && inbox__buf_putc(&a, '\0') == 0)
		*allow = a.data;
	else
		inbox__buf_free(&a);
	return NULL;
}

/* Under lis_mu: forget the closed route METHOD PATH (reopened), or
 * remember it (closing; gone NULL: out of memory, then 404 it is). */
static void forget_gone(http_listener *lis, const char *path,
                        const char *method)
{
	for (http_gone **p = &lis->gone; *p; p = &(*p)->next)
		if (!strcmp((*p)->path, path) &&
		    !strcmp((*p)->method, method)) {
			http_gone *g = *p;
			*p = g->next;
			free(g->path);
			free(g->method);
			free(g);
			return;
		}
}

static void remember_gone(http_listener *lis, const http_conf *c)
{
	http_gone *g = calloc(1, sizeof(*g));
	if (g) {
		g->path = strdup(c->path);
		g->method = strdup(c->method);
		g->retry_after_s = c->retry_after_s;
	}
	if (!g || !g->path || !g->method) {
		if (g) {
			free(g->path);
			free(g->method);
		}
		free(g);
		return;
	}
	g->next = lis->gone;
	lis->gone = g;
}

/* The first call for a request: route, method, declared size. A 405 is
 * counted by the (first) route of its path; a 404 by none. */
static enum MHD_Result start_req(http_source *hs, http_req *req,
                                 const char *url)
{
	if (!hs) {
		if (req->status != 503)
			inbox__http_problem(req, 404, "Not found",
			                    "no such route");
		return queue_answer(NULL, req, url);
	}
	if (req->allow)
		return refuse(hs, req, 405, "Method not allowed", NULL);
	const char *cl = hdr_of(req->conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > hs->conf.max_body)
		return refuse(hs, req, 413, "Body too large",
		              "the body is over the route's max_body");
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
	http_listener *lis = cls;
	http_req *req = *con_cls;
	(void)version;
	if (!req) {
		req = calloc(1, sizeof(*req));
		if (!req)
			return MHD_NO;
		req->conn = conn;
		req->t0_ms = inbox__src_mono_ms();
		*con_cls = req;
		http_source *path_of;
		const http_gone *gone;
		pthread_mutex_lock(&lis_mu);
		http_source *hs =
		    route_of(lis, url, method, &path_of, &req->allow, &gone);
		if (!hs && !path_of && gone) {
			inbox__http_problem(
			    req, 503, "Shutting down",
			    "this route is stopped; retry later");
			req->retry_after = gone->retry_after_s;
		}
		if (!hs)
			hs = path_of; /* a 405 (req->allow), or NULL: 404 */
		if (hs) { /* counted live before a close can miss it */
			pthread_mutex_lock(&hs->mu);
			hs->live++;
			pthread_mutex_unlock(&hs->mu);
		}
		pthread_mutex_unlock(&lis_mu);
		req->hs = hs;
		return start_req(hs, req, url);
	}
	http_source *hs = req->hs;
	if (!hs) /* answered at once; MHD asks again for the rest */
		return MHD_YES;
	if (req->state == HTTP_REQ_ANSWERED || req->early)
		return queue_answer(hs, req, NULL);
	if (req->state != HTTP_REQ_RECEIVING)
		return MHD_YES;
	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (inbox__src_mono_ms() - req->t0_ms > hs->conf.body_ms)
			return MHD_NO; /* a slow client: hang up */
		/* MHD cannot answer in the middle of a body: what is over
		 * the limit is read and dropped (within body_timeout), then
		 * refused */
		if (req->too_big || req->body.len + n > hs->conf.max_body) {
			req->too_big = 1;
			inbox__buf_free(&req->body);
			return MHD_YES;
		}
		if (inbox__buf_append(&req->body, upload_data, n) < 0)
			return MHD_NO;
		return MHD_YES;
	}
	if (req->too_big)
		return refuse(hs, req, 413, "Body too large",
		              "the body is over the route's max_body");
	return accept_req(hs, req, method);
}

static void on_done(void *cls, struct MHD_Connection *conn, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
	http_req *req = *con_cls;
	(void)cls;
	(void)conn;
	(void)toe;
	if (!req)
		return;
	*con_cls = NULL;
	http_source *hs = req->hs;
	if (!hs) {
		req_free(req);
		return;
	}
	pthread_mutex_lock(&hs->mu);
	hs->live--;
	/* one the watchdog answered while its batch runs: the batch's
	 * deliveries still point into it */
	int held = req->state == HTTP_REQ_IN_BATCH;
	if (held) {
		req->orphan = 1;
		req->conn = NULL;
	}
	/* for answer_all_held (closing), which waits for none live; the
	 * poll waits on the same condition variable: woken whenever the
	 * last request in flight ended (a replay answered from the cache,
	 * on a quiet route) it cost the consumer's thread two context
	 * switches for nothing */
	if (hs->live == 0 && hs->closing)
		pthread_cond_broadcast(&hs->cv);
	pthread_mutex_unlock(&hs->mu);
	/* otherwise never while queued or in a batch: a suspended
	 * connection is only finished after its resume */
	if (!held)
		req_free(req);
}

/* ---- open / close ---------------------------------------------------- */

static int resolve(http_source *hs, struct sockaddr_storage *ss)
{
	struct addrinfo hints = {0}, *ai = NULL;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	int rc = getaddrinfo(hs->conf.host, NULL, &hints, &ai);
	if (rc != 0 || !ai) {
		inbox_source_seterr(&hs->base,
		                    "http: cannot resolve the host: %s",
		                    gai_strerror(rc));
		return INBOX_ERR_URL;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(hs->conf.port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(hs->conf.port);
	return INBOX_OK;
}

static int load_tls(http_source *hs, http_listener *lis)
{
	if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) {
		inbox_source_seterr(&hs->base, "http: this libmicrohttpd has "
		                               "no TLS support");
		return INBOX_ERR_SOURCE;
	}
	lis->cert_pem = inbox__http_read_file(hs->conf.cert_file, NULL);
	if (lis->cert_pem)
		lis->key_pem = inbox__http_read_file(hs->conf.key_file, NULL);
	if (!lis->cert_pem || !lis->key_pem) {
		inbox_source_seterr(
		    &hs->base, "http: cannot read the %s file: %s",
		    lis->cert_pem ? "key" : "cert", strerror(errno));
		return INBOX_ERR_IO;
	}
	return INBOX_OK;
}

static void on_done(void *cls, struct MHD_Connection *conn, void **con_cls,
                    enum MHD_RequestTerminationCode toe);

/* Start lis's daemon with hs's (the first route's) options. */
static int listen_on(http_source *hs, http_listener *lis)
{
	struct sockaddr_storage ss;
	int rc = resolve(hs, &ss);
	if (rc < 0)
		return rc;
	unsigned flags =
	    MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (hs->conf.tls) {
		if ((rc = load_tls(hs, lis)) < 0)
			return rc;
		flags |= MHD_USE_TLS;
	}
	struct MHD_OptionItem tls[] = {
	    {hs->conf.tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0,
	     lis->cert_pem},
	    {MHD_OPTION_HTTPS_MEM_KEY, 0, lis->key_pem},
	    {MHD_OPTION_END, 0, NULL}};
	lis->mhd = MHD_start_daemon(
	    flags, (uint16_t)hs->conf.port, NULL, NULL, on_request, lis,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_CONNECTION_LIMIT, hs->conf.conn_limit,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)hs->conf.timeout_s,
	    MHD_OPTION_NOTIFY_COMPLETED, on_done, lis, MHD_OPTION_ARRAY, tls,
	    MHD_OPTION_END);
	if (!lis->mhd) {
		inbox_source_seterr(
		    &hs->base, "http: cannot listen on %s:%d: %s",
		    hs->conf.host, hs->conf.port, strerror(errno));
		return INBOX_ERR_CONNECT;
	}
	const union MHD_DaemonInfo *di =
	    MHD_get_daemon_info(lis->mhd, MHD_DAEMON_INFO_BIND_PORT);
	snprintf(lis->address, sizeof(lis->address),
	         ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", hs->conf.host,
	         di ? di->port : (unsigned)hs->conf.port);
	return INBOX_OK;
}

static void listener_free(http_listener *lis)
{
	if (!lis)
		return;
	if (lis->mhd)
		MHD_stop_daemon(lis->mhd); /* on_done for what is left */
	for (http_source *d = lis->dead, *next; d; d = next) {
		next = d->next_route;
		inbox__http_cache_free(&d->cache);
		inbox__http_conf_free(&d->conf);
		free(d->batch);
		pthread_cond_destroy(&d->cv);
		pthread_cond_destroy(&d->wd_cv);
		pthread_mutex_destroy(&d->mu);
		free(d);
	}
	while (lis->gone)
		forget_gone(lis, lis->gone->path, lis->gone->method);
	inbox__http_conf_free(&lis->lc);
	free(lis->owner);
	free(lis->cert_pem);
	if (lis->key_pem)
		memset(lis->key_pem, 0, strlen(lis->key_pem));
	free(lis->key_pem);
	free(lis);
}

static char *dup_or_null(const char *s, int *fail)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		*fail = 1;
	return d;
}

/* Join the listener of hs's host:port (starting it when it is the
 * first), as the route METHOD PATH. */
static int join_listener(http_source *hs)
{
	const http_conf *c = &hs->conf;
	const char *me = hs->base.opts.consumer ? hs->base.opts.consumer : "";
	pthread_mutex_lock(&lis_mu);
	http_listener *lis = lis_head;
	while (lis && !inbox__http_same_listener(&lis->lc, c))
		lis = lis->next;
	int rc = INBOX_OK;
	if (lis) {
		const char *what = inbox__http_listener_differs(&lis->lc, c);
		http_source *taken = NULL;
		for (http_source *r = lis->routes; r && !what;
		     r = r->next_route)
			if (strcmp(r->conf.path, c->path) == 0 &&
			    strcmp(r->conf.method, c->method) == 0)
				taken = r;
		if (what) {
			inbox_source_seterr(
			    &hs->base,
			    "http: consumers %s and %s share %s:%d but their "
			    "listener options differ (%s); they must agree",
			    lis->owner, me, c->host, c->port, what);
			rc = INBOX_ERR_URL;
		} else if (taken) {
			inbox_source_seterr(
			    &hs->base,
			    "http: the route %s %s on %s:%d is consumer %s's "
			    "already",
			    c->method, c->path, c->host, c->port,
			    taken->base.opts.consumer
			        ? taken->base.opts.consumer
			        : "");
			rc = INBOX_ERR_URL;
		}
	} else {
		int fail = 0;
		lis = calloc(1, sizeof(*lis));
		if (lis) {
			lis->lc.host = dup_or_null(c->host, &fail);
			lis->lc.port = c->port;
			lis->lc.tls = c->tls;
			lis->lc.cert_file = dup_or_null(c->cert_file, &fail);
			lis->lc.key_file = dup_or_null(c->key_file, &fail);
			lis->lc.conn_limit = c->conn_limit;
			lis->lc.timeout_s = c->timeout_s;
			lis->owner = dup_or_null(me, &fail);
		}
		if (!lis || fail)
			rc = INBOX_ERR_NOMEM;
		else
			rc = listen_on(hs, lis);
		if (rc < 0) {
			listener_free(lis);
			lis = NULL;
		} else {
			lis->next = lis_head;
			lis_head = lis;
		}
	}
	if (rc == INBOX_OK) {
		forget_gone(lis, c->path, c->method);
		lis->refs++;
		hs->next_route = lis->routes;
		lis->routes = hs;
		hs->lis = lis;
	}
	pthread_mutex_unlock(&lis_mu);
	return rc;
}

static void http_close(inbox_source *src);
static void *watchdog_main(void *arg);

/* The check slot, and open's first half: the route, its URL parsed
 * (a webhook's secret_file read); nothing listened on, the cert and key
 * files not read (the listener reads them). */
static int http_check(inbox_source **out, const char *url,
                      const inbox_source_options *opts)
{
	http_source *hs = calloc(1, sizeof(*hs));
	if (!hs)
		return INBOX_ERR_NOMEM;
	*out = &hs->base;
	hs->base.opts = *opts;
	pthread_mutex_init(&hs->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&hs->cv, &ca);
	pthread_cond_init(&hs->wd_cv, &ca);
	pthread_condattr_destroy(&ca);
	int rc = inbox__http_conf_parse(&hs->conf, &hs->base, url, opts);
	if (rc == INBOX_OK)
		inbox__http_cache_init(
		    &hs->cache,
		    hs->conf.mode == HTTP_MODE_API ? hs->conf.replay_cache : 0,
		    hs->conf.replay_ttl_ms);
	return rc;
}

static int http_open(inbox_source **out, const char *url,
                     const inbox_source_options *opts)
{
	int rc = http_check(out, url, opts);
	http_source *hs = (http_source *)*out;
	if (rc == INBOX_OK)
		rc = join_listener(hs);
	if (rc < 0)
		return rc;
	hs->watching = 1;
	if (pthread_create(&hs->watchdog, NULL, watchdog_main, hs) != 0) {
		hs->watching = 0;
		inbox_source_seterr(&hs->base, "http: cannot start a thread");
		return INBOX_ERR_NOMEM;
	}
	inbox__http_registry_add(hs);
	inbox__log(INBOX_LOG_INFO, opts->consumer,
	           "\"event\":\"http_listening\",\"address\":\"%s\","
	           "\"route\":\"%s\",\"tls\":%s",
	           inbox__log_escape(hs->lis->address),
	           inbox__log_escape(hs->conf.path),
	           hs->conf.tls ? "true" : "false");
	return INBOX_OK;
}

/* Answer every request still held (503: nothing of theirs is known to
 * be stored by us; a retry finds out), resume them and give MHD a moment
 * to send the answers before it stops. */
static void answer_all_held(http_source *hs)
{
	pthread_mutex_lock(&hs->mu);
	hs->closing = 1;
	http_req *q = hs->qhead;
	hs->qhead = hs->qtail = NULL;
	hs->qlen = 0;
	for (size_t i = 0; i < hs->nbatch; i++) {
		http_req *req = hs->batch[i];
		if (req->orphan) {
			req_free(req);
		} else if (req->early) {
			req->state = HTTP_REQ_ANSWERED;
		} else {
			req->next = q;
			q = req;
		}
	}
	hs->nbatch = 0;
	pthread_mutex_unlock(&hs->mu);
	while (q) {
		http_req *next = q->next;
		inbox__http_reply(&hs->conf, q, NULL);
		q->state = HTTP_REQ_ANSWERED;
		MHD_resume_connection(q->conn);
		q = next;
	}
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += 1;
	pthread_mutex_lock(&hs->mu);
	while (hs->live > 0 &&
	       pthread_cond_timedwait(&hs->cv, &hs->mu, &dl) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&hs->mu);
}

/* ---- the watchdog: nobody waits past answer_within ------------------- */

#define WD_MAX 64 /* answered per round (a round is 200 ms) */

/* Under hs->mu: answer what waits too long into todo (at most WD_MAX).
 * Still queued: nothing of it was processed (503, nothing stored). In
 * the batch the runner is retrying (a database outage): its outcome is
 * not known yet; it stays in the batch (so its key stays in flight:
 * 409) and its retry after the commit gets the stored answer. */
static size_t overdue(http_source *hs, struct MHD_Connection **todo)
{
	int64_t now = inbox__src_mono_ms();
	size_t k = 0;
	for (http_req **pp = &hs->qhead; *pp && k < WD_MAX;) {
		http_req *r = *pp;
		if (now - r->t0_ms <= hs->conf.answer_ms) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		hs->qlen--;
		r->next = NULL;
		inbox__http_problem(r, 503, "Temporarily unavailable",
		                    "nothing was stored; retry later");
		r->retry_after = hs->conf.retry_after_s;
		r->outcome = "timeout";
		r->state = HTTP_REQ_ANSWERED;
		todo[k++] = r->conn;
	}
	hs->qtail = NULL;
	for (http_req *r = hs->qhead; r; r = r->next)
		hs->qtail = r;
	for (size_t i = 0; i < hs->nbatch && k < WD_MAX; i++) {
		http_req *r = hs->batch[i];
		if (r->early || now - r->t0_ms <= hs->conf.answer_ms)
			continue;
		inbox__http_problem(r, 503, "Temporarily unavailable",
		                    "the outcome is not known yet; retry with "
		                    "the same key");
		r->retry_after = hs->conf.retry_after_s;
		r->outcome = "timeout";
		r->replay = 0;
		r->early = 1;
		todo[k++] = r->conn;
	}
	return k;
}

static void *watchdog_main(void *arg)
{
	http_source *hs = arg;
	struct MHD_Connection *todo[WD_MAX];
	pthread_mutex_lock(&hs->mu);
	while (hs->watching) {
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_nsec += 200 * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&hs->wd_cv, &hs->mu, &dl);
		if (!hs->watching)
			break;
		size_t k = overdue(hs, todo);
		pthread_mutex_unlock(&hs->mu);
		for (size_t i = 0; i < k; i++)
			MHD_resume_connection(todo[i]);
		pthread_mutex_lock(&hs->mu);
	}
	pthread_mutex_unlock(&hs->mu);
	return NULL;
}

static void stop_watchdog(http_source *hs)
{
	if (!hs->watching)
		return;
	pthread_mutex_lock(&hs->mu);
	hs->watching = 0;
	pthread_cond_signal(&hs->wd_cv);
	pthread_mutex_unlock(&hs->mu);
	pthread_join(hs->watchdog, NULL);
}

static void route_free(http_source *hs)
{
	inbox__http_cache_free(&hs->cache);
	inbox__http_conf_free(&hs->conf);
	free(hs->batch);
	pthread_cond_destroy(&hs->cv);
	pthread_cond_destroy(&hs->wd_cv);
	pthread_mutex_destroy(&hs->mu);
	free(hs);
}

/* Leave the listener: new requests to the route get 404 from now on,
 * the held ones their answer; the last route stops the listener. */
static void http_close(inbox_source *src)
{
	http_source *hs = (http_source *)src;
	http_listener *lis = hs->lis;
	if (!lis) {
		route_free(hs);
		return;
	}
	inbox__http_registry_remove(hs);
	pthread_mutex_lock(&lis_mu);
	for (http_source **p = &lis->routes; *p; p = &(*p)->next_route)
		if (*p == hs) {
			*p = hs->next_route;
			break;
		}
	remember_gone(lis, &hs->conf);
	pthread_mutex_unlock(&lis_mu);
	stop_watchdog(hs);
	answer_all_held(hs);
	pthread_mutex_lock(&lis_mu);
	int last = --lis->refs == 0;
	if (last)
		for (http_listener **p = &lis_head; *p; p = &(*p)->next)
			if (*p == lis) {
				*p = lis->next;
				break;
			}
	pthread_mutex_lock(&hs->mu);
	int busy = hs->live > 0; /* MHD finishes them: free it after */
	pthread_mutex_unlock(&hs->mu);
	if (busy) {
		hs->next_route = lis->dead;
		lis->dead = hs;
	}
	pthread_mutex_unlock(&lis_mu);
	if (last)
		listener_free(lis);
	if (!busy)
		route_free(hs);
}

/* ---- poll / settle --------------------------------------------------- */

static void wait_for_queue(http_source *hs, int timeout_ms)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	while (!hs->qhead && timeout_ms > 0 &&
	       pthread_cond_timedwait(&hs->cv, &hs->mu, &dl) != ETIMEDOUT)
		;
}

static int http_poll(inbox_source *src, inbox_delivery *out, size_t max,
                     size_t *n, int timeout_ms, int *eof)
{
	http_source *hs = (http_source *)src;
	pthread_mutex_lock(&hs->mu);
	if (hs->batch_cap < max) {
		http_req **b = realloc(hs->batch, max * sizeof(*b));
		if (!b) {
			pthread_mutex_unlock(&hs->mu);
			return INBOX_ERR_NOMEM;
		}
		hs->batch = b;
		hs->batch_cap = max;
	}
	wait_for_queue(hs, timeout_ms);
	size_t k = 0;
	while (hs->qhead && k < max) {
		http_req *req = hs->qhead;
		hs->qhead = req->next;
		hs->qlen--;
		req->next = NULL;
		req->state = HTTP_REQ_IN_BATCH;
		hs->batch[k++] = req;
	}
	if (!hs->qhead)
		hs->qtail = NULL;
	hs->nbatch = k;
	pthread_mutex_unlock(&hs->mu);
	for (size_t i = 0; i < k; i++) {
		http_req *req = hs->batch[i];
		memset(&out[i], 0, sizeof(out[i]));
		out[i].id = req->key;
		out[i].payload = req->env.data;
		out[i].payload_len = req->env.len;
		out[i].headers = req->headers;
		out[i].position = hs->conf.path;
		out[i].timestamp_ms = req->timestamp_ms;
		out[i].delivery_count = 1;
	}
	*n = k;
	return INBOX_OK;
}

/* MHD is never called under hs->mu from this thread (it takes its own
 * locks, which its thread may hold when it calls on_done). A suspended
 * connection stays until resumed, so req->conn is valid up to then. */
static int http_settle(inbox_source *src, const inbox_result *res, size_t n)
{
	http_source *hs = (http_source *)src;
	pthread_mutex_lock(&hs->mu);
	for (size_t i = 0; i < n; i++) /* the watchdog's are answered */
		if (!hs->batch[i]->early) {
			inbox__http_reply(&hs->conf, hs->batch[i],
			                  res ? &res[i] : NULL);
			if (res) /* committed */
				inbox__http_cache_put(&hs->cache, hs->batch[i]);
		}
	pthread_mutex_unlock(&hs->mu);
	/* committed, not answered yet: where tests stage a crash */
	inbox__src_sleep_ms(hs->conf.ack_delay_ms);
	size_t k = 0;
	pthread_mutex_lock(&hs->mu);
	hs->nbatch = 0;
	for (size_t i = 0; i < n; i++) {
		http_req *req = hs->batch[i];
		if (req->orphan) {
			req_free(req);
		} else if (req->early) {
			req->state = HTTP_REQ_ANSWERED; /* resumed already */
		} else {
			req->state = HTTP_REQ_ANSWERED;
			hs->batch[k++] = req; /* to resume */
		}
	}
	pthread_mutex_unlock(&hs->mu);
	for (size_t i = 0; i < k; i++)
		MHD_resume_connection(hs->batch[i]->conn);
	return INBOX_OK;
}

static int http_client_version(char *out, size_t len)
{
	return snprintf(out, len, "libmicrohttpd %s", MHD_get_version());
}

const inbox_source_vtable inbox__http_source = {
    INBOX_SOURCE_VTABLE_VERSION,
    "http",
    http_open,
    http_close,
    http_poll,
    http_settle,
    NULL, /* lag: requests wait in no queue of their own */
    .client_version = http_client_version,
    .alias = "https", /* http_open reads the scheme again */
    .check = http_check,
};
