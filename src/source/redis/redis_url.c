/* Redis source: parse redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/STREAM?... */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "source/redis/redis.h"

#define SCHEME "redis://"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Percent-decode [s, s+n) into a new string. INBOX_OK, URL (a bad escape
 * or an encoded NUL) or NOMEM. */
static int pct_decode(const char *s, size_t n, char **out)
{
	char *d = malloc(n + 1);
	size_t j = 0;
	if (!d)
		return INBOX_ERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			d[j++] = s[i];
			continue;
		}
		int hi = i + 1 < n ? hexval((unsigned char)s[i + 1]) : -1;
		int lo = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(d);
			return INBOX_ERR_URL;
		}
		d[j++] = (char)(hi * 16 + lo);
		i += 2;
	}
	d[j] = '\0';
	*out = d;
	return INBOX_OK;
}

/* A decimal in [min, max] from [v, v+n). 0 or -1. */
static int parse_int(const char *v, size_t n, long long min, long long max,
                     long long *out)
{
	if (n == 0 || n > 18)
		return -1;
	long long x = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	if (x < min || x > max)
		return -1;
	*out = x;
	return 0;
}

static int keyis(const char *k, size_t klen, const char *name)
{
	return strlen(name) == klen && strncmp(k, name, klen) == 0;
}

/* A valid stream id for XGROUP CREATE: "$", "0", MS or MS-SEQ. */
static int valid_start(const char *s)
{
	if (strcmp(s, "$") == 0)
		return 1;
	const char *dash = strchr(s, '-');
	size_t a = dash ? (size_t)(dash - s) : strlen(s);
	long long x;
	if (parse_int(s, a, 0, 999999999999999999LL, &x) < 0)
		return 0;
	return !dash || parse_int(dash + 1, strlen(dash + 1), 0,
	                          999999999999999999LL, &x) == 0;
}

static int set_str(char **dst, const char *v, size_t n)
{
	char *s = NULL;
	int rc = pct_decode(v, n, &s);
	if (rc < 0)
		return rc;
	free(*dst);
	*dst = s;
	return INBOX_OK;
}

static int bad_value(redis_source *rs, const char *k, size_t klen,
                     const char *hint)
{
	inbox__source_seterr(&rs->base, "redis: bad value for %.*s (%s)",
	                     (int)klen, k, hint);
	return INBOX_ERR_URL;
}

/* One "key=value" of the query. */
static int parse_param(redis_source *rs, const char *p, size_t n)
{
	const char *eq = memchr(p, '=', n);
	size_t klen = eq ? (size_t)(eq - p) : n;
	const char *v = eq ? eq + 1 : p + n;
	size_t vlen = eq ? n - klen - 1 : 0;
	long long x;
	int rc;

	if (keyis(p, klen, "group") || keyis(p, klen, "consumer")) {
		char **dst = p[0] == 'g' ? &rs->group : &rs->consumer;
		if (vlen == 0)
			return bad_value(rs, p, klen, "empty");
		rc = set_str(dst, v, vlen);
		if (rc == INBOX_ERR_URL)
			return bad_value(rs, p, klen, "bad percent-escape");
		return rc;
	}
	if (keyis(p, klen, "claim_idle")) {
		if (parse_int(v, vlen, 1, 86400000LL * 365, &x) < 0)
			return bad_value(rs, p, klen, "milliseconds > 0");
		rs->claim_idle_ms = x;
		return INBOX_OK;
	}
	if (keyis(p, klen, "timeout_ms")) {
		if (parse_int(v, vlen, 1, 3600000, &x) < 0)
			return bad_value(rs, p, klen,
			                 "milliseconds, 1..3600000");
		rs->timeout_ms = (int)x;
		return INBOX_OK;
	}
	if (keyis(p, klen, "drain")) {
		if (vlen == 1 && (v[0] == '0' || v[0] == '1')) {
			rs->drain = v[0] == '1';
			return INBOX_OK;
		}
		return bad_value(rs, p, klen, "0 or 1");
	}
	if (keyis(p, klen, "start")) {
		rc = set_str(&rs->start, v, vlen);
		if (rc == INBOX_OK && !valid_start(rs->start))
			rc = INBOX_ERR_URL;
		if (rc == INBOX_ERR_URL)
			return bad_value(rs, p, klen, "0, $ or a stream id");
		return rc;
	}
	inbox__source_seterr(&rs->base,
	                     "redis: unknown parameter '%.*s' "
	                     "(group, consumer, claim_idle, start, "
	                     "timeout_ms, drain)",
	                     (int)klen, p);
	return INBOX_ERR_URL;
}

/* USER:PASSWORD of [a, a+n). */
static int parse_userinfo(redis_source *rs, const char *a, size_t n)
{
	const char *colon = memchr(a, ':', n);
	if (!colon) {
		inbox__source_seterr(&rs->base, "redis: user info without a "
		                                "password (use :PASSWORD@ or "
		                                "USER:PASSWORD@)");
		return INBOX_ERR_URL;
	}
	size_t ulen = (size_t)(colon - a);
	int rc = INBOX_OK;
	if (ulen > 0)
		rc = set_str(&rs->user, a, ulen);
	if (rc == INBOX_OK)
		rc = set_str(&rs->password, colon + 1, n - ulen - 1);
	if (rc == INBOX_ERR_URL)
		inbox__source_seterr(&rs->base, "redis: bad percent-escape in "
		                                "the user info");
	return rc;
}

/* HOST[:PORT] or [V6][:PORT] of [h, h+n). */
static int parse_hostport(redis_source *rs, const char *h, size_t n)
{
	const char *host = h, *port = NULL;
	size_t hlen = n;
	if (n > 0 && h[0] == '[') {
		const char *rb = memchr(h, ']', n);
		if (!rb)
			goto bad;
		host = h + 1;
		hlen = (size_t)(rb - h - 1);
		if (rb + 1 < h + n) {
			if (rb[1] != ':')
				goto bad;
			port = rb + 2;
		}
	} else {
		const char *colon = memchr(h, ':', n);
		if (colon) {
			hlen = (size_t)(colon - h);
			port = colon + 1;
		}
	}
	if (hlen == 0)
		goto bad;
	rs->host = malloc(hlen + 1);
	if (!rs->host)
		return INBOX_ERR_NOMEM;
	memcpy(rs->host, host, hlen);
	rs->host[hlen] = '\0';
	rs->port = 6379;
	if (port) {
		long long x;
		if (parse_int(port, (size_t)(h + n - port), 1, 65535, &x) < 0)
			goto bad;
		rs->port = (int)x;
	}
	return INBOX_OK;
bad:
	inbox__source_seterr(&rs->base, "redis: bad host or port in the URL "
	                                "(HOST[:PORT] or [IPv6][:PORT])");
	return INBOX_ERR_URL;
}

/* [/DB]/STREAM of [p, p+n), p just past the first '/'. */
static int parse_path(redis_source *rs, const char *p, size_t n)
{
	const char *slash = memchr(p, '/', n);
	long long db;
	rs->db = -1;
	if (slash && slash + 1 < p + n &&
	    parse_int(p, (size_t)(slash - p), 0, 1000000, &db) == 0) {
		rs->db = (int)db;
		n -= (size_t)(slash + 1 - p);
		p = slash + 1;
	}
	if (n == 0) {
		inbox__source_seterr(&rs->base, "redis: missing stream in the "
		                                "URL (redis://HOST[:PORT][/DB]"
		                                "/STREAM?group=G)");
		return INBOX_ERR_URL;
	}
	int rc = set_str(&rs->stream, p, n);
	if (rc == INBOX_ERR_URL)
		inbox__source_seterr(&rs->base, "redis: bad percent-escape in "
		                                "the stream name");
	return rc;
}

static char *default_consumer(void)
{
	char host[256];
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "host");
	host[sizeof(host) - 1] = '\0';
	char *s = malloc(strlen(host) + 24);
	if (s)
		sprintf(s, "%s-%ld", host, (long)getpid());
	return s;
}

static int parse_query(redis_source *rs, const char *q)
{
	while (*q) {
		const char *amp = strchr(q, '&');
		size_t n = amp ? (size_t)(amp - q) : strlen(q);
		if (n > 0) {
			int rc = parse_param(rs, q, n);
			if (rc < 0)
				return rc;
		}
		q += n + (amp ? 1 : 0);
	}
	return INBOX_OK;
}

int inbox__redis_parse_url(redis_source *rs, const char *url,
                           const char *consumer)
{
	if (strncmp(url, SCHEME, strlen(SCHEME)) != 0) {
		inbox__source_seterr(&rs->base, "redis: URL must start with "
		                                "redis://");
		return INBOX_ERR_URL;
	}
	const char *auth = url + strlen(SCHEME);
	const char *q = strchr(auth, '?');
	const char *end = q ? q : auth + strlen(auth);
	const char *slash = memchr(auth, '/', (size_t)(end - auth));
	if (!slash)
		return parse_path(rs, end, 0);
	/* The user info ends at the last '@' before the first '/'. */
	const char *at = NULL;
	for (const char *p = auth; p < slash; p++)
		if (*p == '@')
			at = p;
	int rc = INBOX_OK;
	if (at)
		rc = parse_userinfo(rs, auth, (size_t)(at - auth));
	const char *hp = at ? at + 1 : auth;
	if (rc == INBOX_OK)
		rc = parse_hostport(rs, hp, (size_t)(slash - hp));
	if (rc == INBOX_OK)
		rc = parse_path(rs, slash + 1, (size_t)(end - slash - 1));
	if (rc == INBOX_OK && q)
		rc = parse_query(rs, q + 1);
	if (rc < 0)
		return rc;

	if (!rs->consumer) {
		rs->consumer = default_consumer();
		rs->consumer_generated = 1;
	}
	if (!rs->group)
		rs->group = strdup(consumer);
	if (!rs->start)
		rs->start = strdup("0");
	size_t ll = strlen(rs->host) + strlen(rs->stream) + 48;
	rs->label = malloc(ll);
	if (!rs->consumer || !rs->group || !rs->start || !rs->label)
		return INBOX_ERR_NOMEM;
	snprintf(rs->label, ll,
	         strchr(rs->host, ':') ? "redis://[%s]:%d/%s"
	                               : "redis://%s:%d/%s",
	         rs->host, rs->port, rs->stream);
	return INBOX_OK;
}
