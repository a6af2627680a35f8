/* Redis source: parse redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/STREAM?... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/url.h"
#include "source/redis/redis.h"

#define MAX_ID 999999999999999999LL

/* A valid stream id for XGROUP CREATE: "$", "0", MS or MS-SEQ. */
static int valid_start(const char *s)
{
	if (strcmp(s, "$") == 0)
		return 1;
	const char *dash = strchr(s, '-');
	size_t a = dash ? (size_t)(dash - s) : strlen(s);
	long long x;
	if (inbox__url_int(&x, s, a, 0, MAX_ID) < 0)
		return 0;
	return !dash ||
	       inbox__url_int(&x, dash + 1, strlen(dash + 1), 0, MAX_ID) == 0;
}

static int bad_value(redis_source *rs, const char *k, const char *hint)
{
	inbox__source_seterr(&rs->base, "redis: bad value for %s (%s)", k,
	                     hint);
	return INBOX_ERR_URL;
}

/* One query parameter (an inbox__url_param_fn); "k" alone is "k=". */
static int apply_param(const char *k, const char *v, void *payload)
{
	redis_source *rs = payload;
	if (!v)
		v = "";
	if (strcmp(k, "group") == 0 || strcmp(k, "consumer") == 0) {
		if (!*v)
			return bad_value(rs, k, "empty");
		return inbox__url_set_str(
		    k[0] == 'g' ? &rs->group : &rs->consumer, v);
	}
	if (strcmp(k, "claim_idle") == 0 || strcmp(k, "timeout_ms") == 0) {
		int64_t ms;
		int rc = inbox__url_duration_param(
		    &ms, &rs->base, "redis", k, v, 1, 1,
		    k[0] == 'c' ? 86400000LL * 365 : 3600000);
		if (rc == INBOX_OK && k[0] == 'c')
			rs->claim_idle_ms = ms;
		else if (rc == INBOX_OK)
			rs->timeout_ms = (int)ms;
		return rc;
	}
	if (strcmp(k, "drain") == 0) {
		if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
			return bad_value(rs, k, "0 or 1");
		rs->drain = v[0] == '1';
		return INBOX_OK;
	}
	if (strcmp(k, "start") == 0) {
		if (!valid_start(v))
			return bad_value(rs, k, "0, $ or a stream id");
		return inbox__url_set_str(&rs->start, v);
	}
	inbox__source_seterr(&rs->base,
	                     "redis: unknown parameter '%.60s' "
	                     "(group, consumer, claim_idle, start, "
	                     "timeout_ms, drain)",
	                     k);
	return INBOX_ERR_URL;
}

/* [USER]:PASSWORD of [a, a+n). */
static int parse_userinfo(redis_source *rs, const char *a, size_t n)
{
	if (!memchr(a, ':', n)) {
		inbox__source_seterr(&rs->base, "redis: user info without a "
		                                "password (use :PASSWORD@ or "
		                                "USER:PASSWORD@)");
		return INBOX_ERR_URL;
	}
	int rc = inbox__url_userinfo(&rs->user, &rs->password, &rs->base,
	                             "redis", a, n);
	if (rc == INBOX_OK && !*rs->user) { /* ":PASSWORD@": AUTH PASSWORD */
		free(rs->user);
		rs->user = NULL;
	}
	return rc;
}

/* HOST[:PORT] or [V6][:PORT] of [h, h+n). */
static int parse_hostport(redis_source *rs, const char *h, size_t n)
{
	const char *host;
	size_t hlen;
	rs->port = 6379;
	if (inbox__url_hostport(&host, &hlen, &rs->port, h, n) < 0 ||
	    !inbox__url_printable(host, hlen)) {
		inbox__source_seterr(&rs->base,
		                     "redis: bad host or port in the URL "
		                     "(HOST[:PORT] or [IPv6][:PORT])");
		return INBOX_ERR_URL;
	}
	rs->host = strndup(host, hlen);
	return rs->host ? INBOX_OK : INBOX_ERR_NOMEM;
}

/* [DB/]STREAM of [p, p+n) (the path). */
static int parse_path(redis_source *rs, const char *p, size_t n)
{
	const char *slash = memchr(p, '/', n);
	long long db;
	rs->db = -1;
	if (slash && slash + 1 < p + n &&
	    inbox__url_int(&db, p, (size_t)(slash - p), 0, 1000000) == 0) {
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
	return inbox__url_decode_part(&rs->stream, &rs->base, "redis",
	                              "stream name", p, n);
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

int inbox__redis_parse_url(redis_source *rs, const char *url,
                           const char *consumer)
{
	inbox__url u;
	if (strncmp(url, "rediss:", 7) == 0) {
		inbox__source_seterr(
		    &rs->base,
		    "redis: rediss:// (TLS) is not supported: hiredis 0.14 "
		    "has no TLS; reach Redis over a private network, or "
		    "through a local TLS tunnel (stunnel, spiped) with "
		    "redis://127.0.0.1:PORT/... (see docs/config.md, TLS)");
		return INBOX_ERR_URL;
	}
	if (inbox__url_split(&u, url, "redis", 0) < 0) {
		inbox__source_seterr(&rs->base, "redis: URL must start with "
		                                "redis://");
		return INBOX_ERR_URL;
	}
	if (inbox__url_refuse_ambiguous(&rs->base, "redis", url) < 0)
		return INBOX_ERR_URL;
	if (!u.path)
		return parse_path(rs, "", 0); /* "missing stream" */
	int rc = u.userinfo ? parse_userinfo(rs, u.userinfo, u.userinfo_len)
	                    : INBOX_OK;
	if (rc == INBOX_OK)
		rc = parse_hostport(rs, u.hosts, u.hosts_len);
	if (rc == INBOX_OK)
		rc = parse_path(rs, u.path, u.path_len);
	if (rc == INBOX_OK && u.query)
		rc = inbox__url_params(&rs->base, "redis", u.query, u.query_len,
		                       0, apply_param, rs);
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

void inbox__redis_url_clear(redis_source *rs)
{
	free(rs->host);
	free(rs->user);
	free(rs->password);
	free(rs->stream);
	free(rs->group);
	free(rs->consumer);
	free(rs->start);
	free(rs->label);
	rs->host = rs->user = rs->password = rs->stream = NULL;
	rs->group = rs->consumer = rs->start = rs->label = NULL;
}
