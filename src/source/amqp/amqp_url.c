/* RabbitMQ source: URL parsing (the form is described in amqp_source.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source/amqp/amqp_source.h"

#define SCHEME "amqp://"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Percent-decode [p, p+n) into a new string. NULL with *nomem = 0 on a
 * bad escape or %00, with *nomem = 1 on allocation failure. */
static char *pct_decode(const char *p, size_t n, int *nomem)
{
	char *out = malloc(n + 1);
	size_t j = 0;
	*nomem = 0;
	if (!out) {
		*nomem = 1;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '%') {
			out[j++] = p[i];
			continue;
		}
		int hi = i + 1 < n ? hexval((unsigned char)p[i + 1]) : -1;
		int lo = i + 2 < n ? hexval((unsigned char)p[i + 2]) : -1;
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(out);
			return NULL;
		}
		out[j++] = (char)(hi * 16 + lo);
		i += 2;
	}
	out[j] = '\0';
	return out;
}

/* Decode a URL part into *dst (replacing it); `what` names it in errors. */
static int decode_into(amqp_source *s, char **dst, const char *p, size_t n,
                       const char *what)
{
	int nomem;
	char *v = pct_decode(p, n, &nomem);
	if (!v) {
		if (nomem)
			return INBOX_ERR_NOMEM;
		inbox__source_seterr(&s->base, "amqp: bad %%-escape in the %s",
		                     what);
		return INBOX_ERR_URL;
	}
	free(*dst);
	*dst = v;
	return INBOX_OK;
}

static int parse_int(amqp_source *s, const char *name, const char *value,
                     long min, long max, int *out)
{
	char *end;
	long v = strtol(value, &end, 10);
	if (!*value || *end || v < min || v > max) {
		inbox__source_seterr(&s->base, "amqp: %s must be %ld..%ld",
		                     name, min, max);
		return INBOX_ERR_URL;
	}
	*out = (int)v;
	return INBOX_OK;
}

static int set_string(amqp_source *s, char **dst, const char *name, char *value,
                      int may_be_empty)
{
	if (!may_be_empty && !*value) {
		inbox__source_seterr(&s->base, "amqp: %s must not be empty",
		                     name);
		free(value);
		return INBOX_ERR_URL;
	}
	if (strlen(value) > 255) {
		inbox__source_seterr(&s->base,
		                     "amqp: %s is longer than 255 bytes", name);
		free(value);
		return INBOX_ERR_URL;
	}
	free(*dst);
	*dst = value;
	return INBOX_OK;
}

/* One query parameter; takes `value`. */
static int apply_param(amqp_source *s, const char *name, char *value)
{
	int rc;
	if (strcmp(name, "retry_queue") == 0)
		return set_string(s, &s->retry_queue, name, value, 0);
	if (strcmp(name, "dlx") == 0) {
		rc = set_string(s, &s->dlx, name, value, 1);
		if (rc == INBOX_OK && !*s->dlx) {
			free(s->dlx);
			s->dlx = NULL;
		}
		return rc;
	}
	if (strcmp(name, "retry") == 0) {
		if (strcmp(value, "ttl") == 0)
			s->retry_mode = AMQP_RETRY_TTL;
		else if (strcmp(value, "requeue") == 0)
			s->retry_mode = AMQP_RETRY_REQUEUE;
		else {
			inbox__source_seterr(
			    &s->base,
			    "amqp: retry must be ttl or requeue, "
			    "not \"%.40s\"",
			    value);
			free(value);
			return INBOX_ERR_URL;
		}
		free(value);
		return INBOX_OK;
	}
	if (strcmp(name, "prefetch") == 0)
		rc = parse_int(s, name, value, 1, 65535, &s->prefetch);
	else if (strcmp(name, "declare") == 0)
		rc = parse_int(s, name, value, 0, 1, &s->declare);
	else if (strcmp(name, "heartbeat") == 0)
		rc = parse_int(s, name, value, 0, 65535, &s->heartbeat);
	else if (strcmp(name, "connect_timeout_ms") == 0)
		rc = parse_int(s, name, value, 1, 600000,
		               &s->connect_timeout_ms);
	else if (strcmp(name, "confirm_timeout_ms") == 0)
		rc = parse_int(s, name, value, 1, 600000,
		               &s->confirm_timeout_ms);
	else {
		inbox__source_seterr(
		    &s->base,
		    "amqp: unknown URL parameter \"%.60s\" "
		    "(known: prefetch, retry, retry_queue, dlx, "
		    "declare, heartbeat, connect_timeout_ms, "
		    "confirm_timeout_ms)",
		    name);
		rc = INBOX_ERR_URL;
	}
	free(value);
	return rc;
}

static int parse_query(amqp_source *s, const char *q)
{
	while (*q) {
		const char *amp = strchr(q, '&');
		size_t len = amp ? (size_t)(amp - q) : strlen(q);
		const char *eq = memchr(q, '=', len);
		const char *next = amp ? amp + 1 : q + len;
		if (len == 0) {
			q = next;
			continue;
		}
		if (!eq) {
			inbox__source_seterr(
			    &s->base,
			    "amqp: URL parameter \"%.*s\" lacks "
			    "'='",
			    (int)(len > 60 ? 60 : len), q);
			return INBOX_ERR_URL;
		}
		char *name = NULL, *value = NULL;
		int rc = decode_into(s, &name, q, (size_t)(eq - q),
		                     "URL parameters");
		if (rc == INBOX_OK)
			rc = decode_into(s, &value, eq + 1,
			                 len - (size_t)(eq - q) - 1,
			                 "URL parameters");
		if (rc == INBOX_OK)
			rc = apply_param(s, name, value); /* takes value */
		else
			free(value);
		free(name);
		if (rc < 0)
			return rc;
		q = next;
	}
	return INBOX_OK;
}

/* [USER[:PASS]@]HOST[:PORT] */
static int parse_authority(amqp_source *s, const char *a, size_t n)
{
	const char *at = NULL;
	int rc;
	for (const char *p = a; p < a + n; p++)
		if (*p == '@')
			at = p;
	if (at) {
		const char *colon = memchr(a, ':', (size_t)(at - a));
		size_t ulen = colon ? (size_t)(colon - a) : (size_t)(at - a);
		rc = decode_into(s, &s->user, a, ulen, "user name");
		if (rc == INBOX_OK && colon)
			rc = decode_into(s, &s->pass, colon + 1,
			                 (size_t)(at - colon - 1), "password");
		if (rc < 0)
			return rc;
		n -= (size_t)(at + 1 - a);
		a = at + 1;
	}
	const char *host = a, *port = NULL;
	size_t hlen;
	if (n > 0 && *a == '[') {
		const char *close = memchr(a, ']', n);
		if (!close)
			goto bad;
		host = a + 1;
		hlen = (size_t)(close - host);
		if (close + 1 < a + n) {
			if (close[1] != ':')
				goto bad;
			port = close + 2;
		}
	} else {
		const char *colon = memchr(a, ':', n);
		hlen = colon ? (size_t)(colon - a) : n;
		if (colon)
			port = colon + 1;
	}
	if (hlen == 0)
		goto bad;
	for (size_t i = 0; i < hlen; i++)
		if ((unsigned char)host[i] <= ' ' || host[i] == '%' ||
		    (unsigned char)host[i] >= 0x7f)
			goto bad;
	free(s->host);
	s->host = strndup(host, hlen);
	if (!s->host)
		return INBOX_ERR_NOMEM;
	if (port) {
		size_t plen = (size_t)(a + n - port);
		char buf[8];
		if (plen == 0 || plen > 5)
			goto bad;
		memcpy(buf, port, plen);
		buf[plen] = '\0';
		if (parse_int(s, "the port", buf, 1, 65535, &s->port) < 0)
			return INBOX_ERR_URL;
	}
	return INBOX_OK;
bad:
	inbox__source_seterr(&s->base, "amqp: bad host or port in the URL");
	return INBOX_ERR_URL;
}

/* [VHOST/]QUEUE */
static int parse_path(amqp_source *s, const char *p, size_t n)
{
	const char *slash = memchr(p, '/', n);
	int rc;
	if (slash && memchr(slash + 1, '/', (size_t)(p + n - slash - 1))) {
		inbox__source_seterr(&s->base,
		                     "amqp: too many path segments: expected "
		                     "/VHOST/QUEUE (write '/' inside a name as "
		                     "%%2F)");
		return INBOX_ERR_URL;
	}
	if (slash) {
		rc = decode_into(s, &s->vhost, p, (size_t)(slash - p),
		                 "virtual host");
		if (rc < 0)
			return rc;
		n -= (size_t)(slash + 1 - p);
		p = slash + 1;
	}
	if (!s->vhost || !*s->vhost) {
		free(s->vhost);
		s->vhost = strdup("/");
		if (!s->vhost)
			return INBOX_ERR_NOMEM;
	}
	rc = decode_into(s, &s->queue, p, n, "queue name");
	if (rc < 0)
		return rc;
	if (!*s->queue || strlen(s->queue) > 255) {
		inbox__source_seterr(
		    &s->base, "amqp: missing or too long queue name: "
		              "expected amqp://HOST[:PORT]/[VHOST/]QUEUE");
		return INBOX_ERR_URL;
	}
	return INBOX_OK;
}

static int set_defaults(amqp_source *s, const inbox_source_options *opts)
{
	s->user = strdup("guest");
	s->pass = strdup("guest");
	if (!s->user || !s->pass)
		return INBOX_ERR_NOMEM;
	s->port = 5672;
	s->retry_mode = AMQP_RETRY_TTL;
	s->prefetch = opts->max_batch > 65535 ? 65535 : (int)opts->max_batch;
	if (s->prefetch < 1)
		s->prefetch = 1;
	s->heartbeat = 30;
	s->connect_timeout_ms = 5000;
	s->confirm_timeout_ms = 10000;
	return INBOX_OK;
}

int inbox__amqp_parse_url(amqp_source *s, const char *url,
                          const inbox_source_options *opts)
{
	int rc = set_defaults(s, opts);
	if (rc < 0)
		return rc;
	if (strncmp(url, SCHEME, strlen(SCHEME)) != 0) {
		inbox__source_seterr(
		    &s->base, "amqp: URL must start with amqp:// (amqps is "
		              "not supported)");
		return INBOX_ERR_URL;
	}
	const char *a = url + strlen(SCHEME);
	size_t alen = strcspn(a, "/?#");
	if (a[alen] != '/') {
		inbox__source_seterr(
		    &s->base, "amqp: expected amqp://[USER[:PASSWORD]@]HOST"
		              "[:PORT]/[VHOST/]QUEUE[?params]");
		return INBOX_ERR_URL;
	}
	rc = parse_authority(s, a, alen);
	if (rc < 0)
		return rc;
	const char *path = a + alen + 1;
	size_t plen = strcspn(path, "?#");
	if (path[plen] == '#') {
		inbox__source_seterr(&s->base, "amqp: no '#' fragment allowed");
		return INBOX_ERR_URL;
	}
	rc = parse_path(s, path, plen);
	if (rc == INBOX_OK && path[plen] == '?')
		rc = parse_query(s, path + plen + 1);
	if (rc < 0)
		return rc;
	if (!s->retry_queue) {
		size_t n = strlen(s->queue) + sizeof(".retry");
		s->retry_queue = malloc(n);
		if (!s->retry_queue)
			return INBOX_ERR_NOMEM;
		snprintf(s->retry_queue, n, "%s.retry", s->queue);
	}
	if (strcmp(s->retry_queue, s->queue) == 0) {
		inbox__source_seterr(&s->base,
		                     "amqp: retry_queue must differ from the "
		                     "queue");
		return INBOX_ERR_URL;
	}
	int is_v6 = strchr(s->host, ':') != NULL;
	size_t n = strlen(s->host) + strlen(s->vhost) + 16;
	s->where = malloc(n);
	if (!s->where)
		return INBOX_ERR_NOMEM;
	snprintf(s->where, n, "%s%s%s:%d%s%s", is_v6 ? "[" : "", s->host,
	         is_v6 ? "]" : "", s->port, s->vhost[0] == '/' ? "" : "/",
	         s->vhost);
	size_t mp = opts->max_payload;
	s->limit = mp == 0 || mp >= SIZE_MAX / 2 ? 0 : mp + 1;
	return INBOX_OK;
}
