/*
 * Source registry, URL dispatch, and the poll/settle contract: kept here
 * once for every backend (the way nng's framework serializes and checks
 * a transport's entry points), so a backend's poll and settle only do the
 * broker's work. See <inbox/sys/source.h>.
 */
#include <inbox/sys/source.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/secret.h"
#include "core/internal.h"

#define MAX_SOURCES 32

static const inbox_source_vtable *registry[MAX_SOURCES];
static int nregistered;
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

static void register_builtins_once(void)
{
	for (const inbox_source_vtable *const *p = inbox__builtin_sources; *p;
	     p++)
		inbox_source_register(*p);
}

/* Sources are opened from several threads at once (one per consumer). */
static void register_builtins(void)
{
	pthread_once(&builtins_once, register_builtins_once);
}

static int names(const char *s, const char *url, size_t n)
{
	return s && strlen(s) == n && strncmp(s, url, n) == 0;
}

/* The registered source for url's scheme (before ':'), or NULL: its own
 * scheme, or the second one it declares (vtable version 3: the TLS
 * spelling, amqps:// of amqp, rediss:// of redis, which the source reads
 * again from the URL). */
static const inbox_source_vtable *source_for(const char *url)
{
	const char *colon = url ? strchr(url, ':') : NULL;
	if (!colon)
		return NULL;
	size_t n = (size_t)(colon - url);
	for (int i = 0; i < nregistered; i++) {
		const inbox_source_vtable *vt = registry[i];
		if (names(vt->scheme, url, n) ||
		    (vt->version >= 3 && names(vt->alias, url, n)))
			return vt;
	}
	return NULL;
}

int inbox_source_register(const inbox_source_vtable *vt)
{
	if (!vt || vt->version < 2 ||
	    vt->version > INBOX_SOURCE_VTABLE_VERSION || !vt->scheme ||
	    !vt->open || !vt->close || !vt->poll || !vt->settle)
		return INBOX_ERR_INVALID;
	for (int i = 0; i < nregistered; i++)
		if (strcmp(registry[i]->scheme, vt->scheme) == 0)
			return INBOX_ERR_INVALID;
	if (nregistered == MAX_SOURCES)
		return INBOX_ERR_INVALID;
	registry[nregistered++] = vt;
	return INBOX_OK;
}

/* What the backend wrote to errmsg by itself (or before the handle had
 * its secrets) is scrubbed here too. */
static void scrub(inbox_source *src)
{
	if (src->errmsg[0])
		inbox__secrets_scrub(
		    src->secrets, src->errmsg, sizeof(src->errmsg),
		    strlen(src->errmsg) + 1 == sizeof(src->errmsg));
}

/* What open and check both refuse before a backend sees them: 0, or
 * INBOX_ERR_INVALID (why: the version's reason, when it is that). */
static int bad_options(const inbox_source_options *opts, char *why, size_t len)
{
	if (inbox__vcheck(INBOX__V_SOURCE_OPTIONS, opts->version, why, len) <
	        0 ||
	    !opts->consumer || !*opts->consumer || opts->max_batch == 0)
		return INBOX_ERR_INVALID;
	return 0;
}

/* vt's open or check slot (fn) on url; *out gets the framework's part
 * (vtable, options, the URL's secrets) and its message scrubbed. */
static int
open_by(const inbox_source_vtable *vt,
        int (*fn)(inbox_source **, const char *, const inbox_source_options *),
        inbox_source **out, const char *url, const inbox_source_options *opts)
{
	inbox__secrets *sec = NULL;
	if (inbox__secrets_add_url(&sec, url) < 0) {
		inbox__secrets_free(sec);
		return INBOX_ERR_NOMEM;
	}
	int rc = fn(out, url, opts);
	if (!*out) {
		inbox__secrets_free(sec);
		return rc;
	}
	(*out)->vt = vt;
	(*out)->opts = *opts;
	(*out)->secrets = sec;
	scrub(*out);
	return rc;
}

int inbox_source_open(inbox_source **out, const char *url,
                      const inbox_source_options *opts)
{
	inbox_source_options def = INBOX_SOURCE_OPTIONS_INIT;
	if (!out)
		return INBOX_ERR_INVALID;
	*out = NULL;
	if (!url)
		return INBOX_ERR_URL;
	if (!opts)
		opts = &def;
	if (bad_options(opts, NULL, 0))
		return INBOX_ERR_INVALID;
	register_builtins();
	const inbox_source_vtable *vt = source_for(url);
	if (!vt)
		return INBOX_ERR_URL;
	return open_by(vt, vt->open, out, url, opts);
}

int inbox_source_check(const char *url, const inbox_source_options *opts,
                       char *why, size_t len)
{
	inbox_source_options def = INBOX_SOURCE_OPTIONS_INIT;
	char none[1];
	if (!why || len == 0) {
		why = none;
		len = sizeof(none);
	}
	why[0] = '\0';
	if (bad_options(opts ? opts : &def, why, len))
		return INBOX_ERR_INVALID;
	if (!url) {
		snprintf(why, len, "no URL");
		return INBOX_ERR_URL;
	}
	register_builtins();
	const inbox_source_vtable *vt = source_for(url);
	if (!vt) {
		snprintf(why, len, "no registered source takes this scheme");
		return INBOX_ERR_URL;
	}
	if (vt->version < 4 || !vt->check)
		return INBOX_OK;
	inbox_source *src = NULL;
	int rc = open_by(vt, vt->check, &src, url, opts);
	if (rc < 0)
		snprintf(why, len, "%s",
		         src && src->errmsg[0] ? src->errmsg
		                               : inbox_strerror(rc));
	inbox_source_close(src);
	return rc < 0 ? rc : INBOX_OK;
}

void inbox_source_close(inbox_source *src)
{
	if (!src)
		return;
	inbox__secrets *sec = src->secrets;
	src->vt->close(src);
	inbox__secrets_free(sec);
}

/* Ask the backend's lag slot, at most every INBOX_SOURCE_LAG_EVERY_S
 * (version 3; the struct of a version 2 backend ends before the cache).
 * Whatever it wrote to errmsg is not the poll's error. */
static void refresh_lag(inbox_source *src)
{
	if (src->vt->version < 3 || !src->vt->lag)
		return;
	int64_t now = (int64_t)(inbox__mono_seconds() * 1000.0) + 1;
	int64_t at = __atomic_load_n(&src->lag_at_ms, __ATOMIC_RELAXED);
	if (at > 0 && now - at < (int64_t)(INBOX_SOURCE_LAG_EVERY_S * 1000))
		return;
	int64_t m = -1, b = -1;
	if (src->vt->lag(src, &m, &b) < 0)
		m = b = -1;
	src->errmsg[0] = '\0';
	__atomic_store_n(&src->lag_messages, m < 0 ? -1 : m, __ATOMIC_RELAXED);
	__atomic_store_n(&src->lag_bytes, b < 0 ? -1 : b, __ATOMIC_RELAXED);
	/* the time of the answer: a slow one is not asked again at once */
	__atomic_store_n(&src->lag_at_ms,
	                 (int64_t)(inbox__mono_seconds() * 1000.0) + 1,
	                 __ATOMIC_RELEASE);
}

int inbox_source_lag(const inbox_source *src, int64_t *messages, int64_t *bytes)
{
	int64_t m = -1, b = -1;
	int rc = INBOX_ERR_INVALID;
	if (src) {
		rc = INBOX_OK;
		if (src->vt->version >= 3 &&
		    __atomic_load_n(&src->lag_at_ms, __ATOMIC_ACQUIRE) > 0) {
			m = __atomic_load_n(&src->lag_messages,
			                    __ATOMIC_RELAXED);
			b = __atomic_load_n(&src->lag_bytes, __ATOMIC_RELAXED);
		}
	}
	if (messages)
		*messages = m;
	if (bytes)
		*bytes = b;
	return rc;
}

/* Tokens unique in the process: a delivery of another batch, or of
 * another handle, never matches the batch in hand. */
static uint64_t next_token = 1;

int inbox_source_poll(inbox_source *src, inbox_delivery *out, size_t max,
                      size_t *n, int timeout_ms, int *eof)
{
	int dummy;
	if (!src || !out || !n || max == 0)
		return INBOX_ERR_INVALID;
	*n = 0;
	if (!eof)
		eof = &dummy;
	*eof = 0;
	src->errmsg[0] = '\0';
	if (src->batch_n > 0) {
		inbox_source_seterr(src,
		                    "%s: poll before the previous batch was "
		                    "settled (%zu deliveries in hand)",
		                    src->vt->scheme, src->batch_n);
		return INBOX_ERR_STATE;
	}
	/* out[0].version is the layout of the array (docs/abi.md); the
	 * backend fills deliveries of this library's, zeroed: today the one
	 * version, so in place. */
	unsigned v = out[0].version;
	if (inbox__vcheck(INBOX__V_DELIVERY, v, src->errmsg,
	                  sizeof(src->errmsg)) < 0)
		return INBOX_ERR_INVALID;
	refresh_lag(src);
	int rc = src->vt->poll(src, out, max, n, timeout_ms, eof);
	out[0].version = v;   /* kept whatever the backend did to it */
	if (rc < 0 && *n > 0) /* not the contract: give them back */
		src->vt->settle(src, NULL, *n);
	if (rc < 0 || *n > max) {
		if (rc >= 0) {
			inbox_source_seterr(
			    src,
			    "%s: poll handed out %zu deliveries "
			    "for at most %zu",
			    src->vt->scheme, *n, max);
			rc = INBOX_ERR_SOURCE;
		}
		*n = 0;
		scrub(src);
		return rc;
	}
	if (*n > 0) {
		src->batch_n = *n;
		src->batch_token =
		    __atomic_fetch_add(&next_token, *n, __ATOMIC_RELAXED);
		for (size_t i = 0; i < *n; i++) {
			out[i].version = v;
			out[i].source_token = src->batch_token + i;
		}
	}
	scrub(src);
	return rc;
}

static int batch_matches(const inbox_source *src, const inbox_delivery *d,
                         size_t n)
{
	if (n != src->batch_n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (d[i].source_token != src->batch_token + i)
			return 0;
	return 1;
}

int inbox_source_settle(inbox_source *src, const inbox_delivery *d,
                        const inbox_result *res, size_t n)
{
	if (!src || (n > 0 && !d))
		return INBOX_ERR_INVALID;
	src->errmsg[0] = '\0';
	size_t k = src->batch_n;
	if (k == 0) {
		if (n == 0)
			return INBOX_OK;
		inbox_source_seterr(src, "%s: settle without a polled batch",
		                    src->vt->scheme);
		return INBOX_ERR_STATE;
	}
	if (res && inbox__vcheck(INBOX__V_RESULT, res->version, src->errmsg,
	                         sizeof(src->errmsg)) < 0) {
		/* results this library cannot read: ack nothing */
		src->batch_n = 0;
		src->vt->settle(src, NULL, k);
		return INBOX_ERR_INVALID;
	}
	if (n > 0 && inbox__vcheck(INBOX__V_DELIVERY, d[0].version, src->errmsg,
	                           sizeof(src->errmsg)) < 0) {
		/* deliveries this library cannot read: ack nothing */
		src->batch_n = 0;
		src->vt->settle(src, NULL, k);
		return INBOX_ERR_INVALID;
	}
	int match = batch_matches(src, d, n);
	src->batch_n = 0; /* settled, whatever the backend answers */
	if (!match) {
		/* Not what was handed out: ack nothing, redeliver it all. */
		src->vt->settle(src, NULL, k);
		inbox_source_seterr(src,
		                    "%s: settle does not match the last poll "
		                    "(%zu deliveries, %zu polled): nothing "
		                    "acked, all redelivered",
		                    src->vt->scheme, n, k);
		return INBOX_ERR_INVALID;
	}
	/* Backends read the results at this library's layout: an array of
	 * an older version is widened first. */
	inbox_result *wide = NULL;
	if (res && res->version != INBOX_RESULT_VERSION) {
		size_t stride = inbox__vsize(INBOX__V_RESULT, res->version);
		wide = calloc(k, sizeof(*wide));
		if (!wide) {
			src->vt->settle(src, NULL, k);
			return INBOX_ERR_NOMEM;
		}
		for (size_t i = 0; i < k; i++)
			memcpy(&wide[i],
			       (const char *)(const void *)res + i * stride,
			       stride);
		res = wide;
	}
	int rc = src->vt->settle(src, res, k);
	free(wide);
	scrub(src);
	return rc;
}

const char *inbox_source_errmsg(const inbox_source *src)
{
	return src ? src->errmsg : "no source";
}

void inbox_source_seterr(inbox_source *src, const char *fmt, ...)
{
	/* Scrubbed before it is cut to fit: a secret cut in half would
	 * not be found. */
	char msg[4 * sizeof(src->errmsg)];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	inbox__secrets_scrub(src->secrets, msg, sizeof(msg),
	                     n >= (int)sizeof(msg));
	snprintf(src->errmsg, sizeof(src->errmsg), "%s", msg);
}

const char *inbox_source_scheme(size_t i)
{
	register_builtins();
	return i < (size_t)nregistered ? registry[i]->scheme : NULL;
}

int inbox_source_client_version(size_t i, char *out, size_t len)
{
	register_builtins();
	if (len)
		out[0] = '\0';
	if (i >= (size_t)nregistered)
		return INBOX_ERR_NOTFOUND;
	const inbox_source_vtable *vt = registry[i];
	if (vt->version < 3 || !vt->client_version)
		return 0;
	int n = vt->client_version(out, len);
	return n < 0 ? 0 : n;
}

int inbox_source_known_url(const char *url)
{
	register_builtins();
	return source_for(url) != NULL;
}
