/*
 * The built-in performer of outbox effects: the HTTP request of a row and
 * the reconcile query of providers without idempotency, each set up on an
 * easy handle that the dispatcher drives with libcurl's multi interface
 * (engine.c), and the classification of what came back.
 *
 * What matters is telling the three kinds of failure apart:
 *   - certainly not performed: the connection never came up (resolve,
 *     connect, TLS handshake), or the provider answered 408/425/429 — a
 *     plain retry is safe;
 *   - unknown: the request may have reached the provider and we do not
 *     know what it did — a timeout after connecting, a connection dropped
 *     before the answer, a garbled answer; a 5xx from a provider without
 *     idempotency (it may have failed after sending the email);
 *   - refused for good: 409 (idempotency key reused with other
 *     parameters), 422 and the other 4xx, redirects (not followed).
 *
 * libcurl re-sends a request by itself when a *reused* connection dies
 * before any answer byte ("Connection died, retrying a fresh connect"),
 * whatever the method. For an idempotent provider that is harmless (same
 * key); for one without idempotency it would be a blind second email, so
 * those requests always take a fresh connection that is not kept.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/json.h"
#include "base/secret.h"
#include "outbox/engine.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void init_curl(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int inbox__curl_init(void)
{
	pthread_once(&curl_once, init_curl);
	return curl_init_rc == CURLE_OK ? 0 : -1;
}

int inbox__xfer_init(inbox__xfer *x)
{
	memset(x, 0, sizeof(*x));
	if (inbox__curl_init() < 0)
		return -1;
	x->curl = curl_easy_init();
	return x->curl ? 0 : -1;
}

void inbox__xfer_free(inbox__xfer *x)
{
	if (x->curl)
		curl_easy_cleanup(x->curl);
	curl_slist_free_all(x->hdrs);
	inbox__buf_free(&x->body);
	free(x->url);
	memset(x, 0, sizeof(*x));
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	inbox__xfer *x = arg;
	size_t len = size * n;
	x->body_seen += len;
	size_t room = x->body.len < INBOX__HTTP_BODY_MAX
	                  ? INBOX__HTTP_BODY_MAX - x->body.len
	                  : 0;
	if (room && inbox__buf_append(&x->body, p, len < room ? len : room) < 0)
		return 0; /* no memory: abort the transfer */
	return len;
}

/* "Name: value" appended to the list; 0 or -1. */
static int add_header(struct curl_slist **list, const char *name,
                      const char *value)
{
	inbox__buf b = INBOX__BUF_INIT;
	int rc = inbox__buf_printf(&b, "%s: %s", name, value);
	struct curl_slist *n =
	    rc == 0 ? curl_slist_append(*list, b.data) : NULL;
	inbox__buf_free(&b);
	if (!n)
		return -1;
	*list = n;
	return 0;
}

/* The row's headers (JSON object, validated when the row was written),
 * the key header, and defaults. 0 or -1 (no memory / malformed). */
static int build_headers(const inbox_outbox_item *it, struct curl_slist **out)
{
	struct curl_slist *list = NULL;
	int has_type = 0, bad = 0;
	json_t *root = NULL;
	if (it->headers && *it->headers) {
		json_error_t e;
		root = json_loads(it->headers, 0, &e);
		if (!json_is_object(root))
			bad = 1;
	}
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v)
	{
		if (bad)
			break;
		if (!json_is_string(v) ||
		    strpbrk(json_string_value(v), "\r\n")) {
			bad = 1;
			break;
		}
		if (strcasecmp(k, "Content-Type") == 0)
			has_type = 1;
		bad |= add_header(&list, k, json_string_value(v)) < 0;
	}
	json_decref(root);
	const char *kh = it->key_header ? it->key_header : INBOX__KEY_HEADER;
	if (!bad && !has_type)
		bad = add_header(&list, "Content-Type", "application/json");
	if (!bad)
		bad = add_header(&list, kh, it->idempotency_key);
	/* No "Expect: 100-continue" round trip for larger bodies. */
	if (!bad && !(list = curl_slist_append(list, "Expect:")))
		bad = 1;
	if (bad) {
		curl_slist_free_all(list);
		return -1;
	}
	*out = list;
	return 0;
}

/* A clean handle for the next request; the previous one's headers go. */
static void common_options(inbox__xfer *x, const char *url,
                           int64_t connect_timeout_ms, int64_t timeout_ms)
{
	CURL *c = x->curl;
	curl_easy_reset(c);
	curl_slist_free_all(x->hdrs);
	x->hdrs = NULL;
	inbox__buf_reset(&x->body);
	x->body_seen = 0;
	x->errbuf[0] = '\0';
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
	                 (long)connect_timeout_ms);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "libinbox/" INBOX_VERSION);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, x->errbuf);
}

/* libcurl's text for the failed transfer of url, scrubbed of the URL's
 * secrets (its user info, its secret parameters) like every client
 * library's error text we pass on. */
static const char *curl_error(inbox__xfer *x, CURLcode cc, const char *url)
{
	inbox__secrets *s = NULL;
	if (!x->errbuf[0])
		return curl_easy_strerror(cc);
	if (inbox__secrets_add_url(&s, url) < 0)
		snprintf(x->errbuf, sizeof(x->errbuf), "%s (details hidden)",
		         curl_easy_strerror(cc));
	inbox__secrets_scrub(s, x->errbuf, sizeof(x->errbuf), 0);
	inbox__secrets_free(s);
	return x->errbuf;
}

inbox_effect_outcome inbox__http_classify_status(long status, int idempotent)
{
	if (status >= 200 && status < 300)
		return INBOX_EFFECT_DONE;
	if (status == 408 || status == 425 || status == 429)
		return INBOX_EFFECT_RETRY;
	if (status >= 500 && status < 600)
		return idempotent ? INBOX_EFFECT_RETRY : INBOX_EFFECT_UNKNOWN;
	return INBOX_EFFECT_PERMANENT; /* 1xx, 3xx, 4xx, nonsense */
}

static const char *status_hint(long status, int idempotent)
{
	if (status == 409)
		return idempotent ? ": the provider refused the request "
		                    "(idempotency key reused with other "
		                    "parameters, or a conflict)"
		                  : ": conflict";
	if (status == 422)
		return ": the provider cannot process the request";
	if (status == 429)
		return ": rate limited";
	if (status >= 300 && status < 400)
		return ": redirects are not followed";
	if (status >= 500 && !idempotent)
		return ": the provider failed; it may have performed the "
		       "effect (no idempotency): reconcile before any retry";
	return "";
}

/* Transport failures: did the request possibly reach the provider? */
static inbox_effect_outcome classify_error(CURLcode cc, curl_off_t connect_us)
{
	switch (cc) {
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_NOT_BUILT_IN:
	case CURLE_BAD_FUNCTION_ARGUMENT:
		return INBOX_EFFECT_PERMANENT;
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
		return INBOX_EFFECT_RETRY;
	default:
		/* Timed out, dropped, garbled: unknown once connected (this
		 * handle's connections are fresh for non-idempotent rows, so
		 * no connect time means nothing was sent). */
		return connect_us > 0 ? INBOX_EFFECT_UNKNOWN
		                      : INBOX_EFFECT_RETRY;
	}
}

int inbox__http_call_setup(inbox__xfer *x, const inbox_outbox_item *it,
                           int64_t connect_timeout_ms, int64_t timeout_ms,
                           inbox_effect_result *res)
{
	struct curl_slist *hdrs = NULL;
	memset(res, 0, sizeof(*res));
	if (build_headers(it, &hdrs) < 0) {
		res->outcome = INBOX_EFFECT_PERMANENT;
		snprintf(res->error, sizeof(res->error),
		         "malformed headers for the request (or no memory)");
		return -1;
	}
	common_options(x, it->url, connect_timeout_ms, timeout_ms);
	CURL *c = x->curl;
	x->hdrs = hdrs;
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	const char *m = it->method ? it->method : "POST";
	if (strcmp(m, "GET") == 0) {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
		                 (curl_off_t)it->body_len);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, it->body);
		if (strcmp(m, "POST") != 0)
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, m);
	}
	if (!it->idempotent) {
		curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
		curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	}
	return 0;
}

void inbox__http_call_result(inbox__xfer *x, const inbox_outbox_item *it,
                             int result, inbox_effect_result *res)
{
	CURL *c = x->curl;
	CURLcode cc = (CURLcode)result;
	long status = 0;
	curl_off_t connect_us = 0, retry_after = 0;
	memset(res, 0, sizeof(*res));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connect_us);
	res->response = x->body.data ? x->body.data : "";
	res->response_len = x->body.len;
	if (cc != CURLE_OK) {
		res->outcome = classify_error(cc, connect_us);
		snprintf(res->error, sizeof(res->error), "%s (curl %d: %s)%s",
		         res->outcome == INBOX_EFFECT_UNKNOWN
		             ? "outcome unknown"
		         : res->outcome == INBOX_EFFECT_RETRY ? "not sent"
		                                              : "refused",
		         (int)cc, curl_error(x, cc, it->url),
		         res->outcome == INBOX_EFFECT_UNKNOWN && !it->idempotent
		             ? "; the provider may have performed it"
		             : "");
		return;
	}
	res->status = (int)status;
	res->outcome = inbox__http_classify_status(status, it->idempotent);
	/* Seconds or an HTTP-date (libcurl turns a date into seconds from
	 * now; a date in the past may come back negative). */
	if (curl_easy_getinfo(c, CURLINFO_RETRY_AFTER, &retry_after) ==
	        CURLE_OK &&
	    retry_after > 0)
		res->retry_after_ms = retry_after < INT64_MAX / 1000
		                          ? (int64_t)retry_after * 1000
		                          : INT64_MAX;
	if (res->outcome != INBOX_EFFECT_DONE)
		snprintf(res->error, sizeof(res->error), "HTTP %ld%s", status,
		         status_hint(status, it->idempotent));
}

/* The reconcile URL with every {key} replaced. NULL on no memory. */
static char *reconcile_url(const inbox_outbox_item *it)
{
	inbox__buf b = INBOX__BUF_INIT;
	const char *p = it->reconcile_url;
	int bad = 0;
	while (*p && !bad) {
		const char *k = strstr(p, "{key}");
		if (!k) {
			bad = inbox__buf_puts(&b, p);
			break;
		}
		bad = inbox__buf_append(&b, p, (size_t)(k - p)) ||
		      inbox__buf_puts(&b, it->idempotency_key);
		p = k + 5;
	}
	if (bad) {
		inbox__buf_free(&b);
		return NULL;
	}
	return b.data;
}

int inbox__http_reconcile_setup(inbox__xfer *x, const inbox_outbox_item *it,
                                int64_t connect_timeout_ms, int64_t timeout_ms,
                                char *why, size_t len)
{
	struct curl_slist *hdrs = NULL;
	char *url = it->reconcile_url ? reconcile_url(it) : NULL;
	if (!url) {
		snprintf(why, len, "no reconcile URL (or no memory)");
		return -1;
	}
	const char *kh = it->key_header ? it->key_header : INBOX__KEY_HEADER;
	if (add_header(&hdrs, kh, it->idempotency_key) < 0) {
		free(url);
		snprintf(why, len, "out of memory");
		return -1;
	}
	common_options(x, url, connect_timeout_ms, timeout_ms);
	free(x->url);
	x->url = url; /* libcurl keeps its own copy; freed with x */
	x->hdrs = hdrs;
	curl_easy_setopt(x->curl, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(x->curl, CURLOPT_HTTPHEADER, hdrs);
	return 0;
}

inbox_reconcile_verdict inbox__http_reconcile_result(inbox__xfer *x, int result,
                                                     long *status, char *why,
                                                     size_t len)
{
	CURLcode cc = (CURLcode)result;
	*status = 0;
	curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, status);
	if (cc != CURLE_OK) {
		*status = 0;
		snprintf(why, len, "reconcile query failed (curl %d: %s)",
		         (int)cc, curl_error(x, cc, x->url));
		return INBOX_RECONCILE_UNKNOWN;
	}
	if (*status >= 200 && *status < 300) {
		snprintf(why, len, "reconciled: found (HTTP %ld)", *status);
		return INBOX_RECONCILE_FOUND;
	}
	if (*status == 404 || *status == 410) {
		snprintf(why, len, "reconciled: not found (HTTP %ld)", *status);
		return INBOX_RECONCILE_NOT_FOUND;
	}
	snprintf(why, len, "reconcile query answered HTTP %ld", *status);
	return INBOX_RECONCILE_UNKNOWN;
}
