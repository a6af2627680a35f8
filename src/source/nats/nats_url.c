/* NATS source: URL parsing (the syntax is described in nats_source.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source/nats/nats_source.h"

#define SCHEME "nats://"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Percent-decode [s, s+n) into a new string. NULL with *nomem = 0 on a bad
 * escape (or an encoded NUL), with *nomem = 1 on allocation failure. */
static char *pct_decode(const char *s, size_t n, int *nomem)
{
	char *out = malloc(n + 1);
	size_t j = 0;
	*nomem = 0;
	if (!out) {
		*nomem = 1;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			out[j++] = s[i];
			continue;
		}
		int hi = i + 1 < n ? hexval((unsigned char)s[i + 1]) : -1;
		int lo = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
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

/* Stream and durable names: letters, digits, '_' and '-'. */
static int valid_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 255)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!isalnum(c) && c != '_' && c != '-')
			return 0;
	}
	return 1;
}

/* A subject: tokens separated by '.', no whitespace or controls. */
static int valid_subject(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || s[0] == '.' || s[n - 1] == '.' || strstr(s, ".."))
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return 0;
	return 1;
}

static int bad(nats_source *ns, const char *msg)
{
	inbox__source_seterr(&ns->base, "nats: %s", msg);
	return INBOX_ERR_URL;
}

/* "30s", "500ms", "2m", "1h" or "0" -> milliseconds; -1 if invalid. */
static int64_t parse_duration(const char *v)
{
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (end == v || x < 0 || errno || !isdigit((unsigned char)*v))
		return -1;
	int64_t mul;
	if (strcmp(end, "ms") == 0)
		mul = 1;
	else if (strcmp(end, "s") == 0)
		mul = 1000;
	else if (strcmp(end, "m") == 0)
		mul = 60000;
	else if (strcmp(end, "h") == 0)
		mul = 3600000;
	else if (*end == '\0' && x == 0)
		mul = 1;
	else
		return -1;
	if (x > (long long)(INT64_MAX / 1000000 / mul)) /* fits in ns */
		return -1;
	return (int64_t)x * mul;
}

static int parse_int(const char *v, long long lo, long long hi, long long *out)
{
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (!*v || *end || errno || x < lo || x > hi)
		return -1;
	*out = x;
	return 0;
}

static int set_str(char **dst, char *value)
{
	free(*dst);
	*dst = value;
	return INBOX_OK;
}

/* One query parameter; takes value (decoded, malloc'ed). */
static int apply_param(nats_source *ns, const char *name, char *value,
                       int *have_ipi)
{
	long long x;
	int64_t d;
	if (strcmp(name, "durable") == 0) {
		if (!valid_name(value)) {
			free(value);
			return bad(ns, "durable must be 1-255 letters, digits, "
			               "'_' or '-'");
		}
		return set_str(&ns->durable, value);
	}
	if (strcmp(name, "subject") == 0) {
		if (!valid_subject(value)) {
			free(value);
			return bad(ns, "invalid subject filter");
		}
		return set_str(&ns->subject, value);
	}
	if (strcmp(name, "create") == 0) {
		int ok = strcmp(value, "0") == 0 || strcmp(value, "1") == 0;
		ns->create = value[0] == '1';
		free(value);
		return ok ? INBOX_OK : bad(ns, "create must be 0 or 1");
	}
	if (strcmp(name, "ack_wait") == 0 ||
	    strcmp(name, "in_progress_interval") == 0 ||
	    strcmp(name, "ack_timeout") == 0) {
		d = parse_duration(value);
		free(value);
		if (d < 0 || (d == 0 && strcmp(name, "in_progress_interval"))) {
			inbox__source_seterr(
			    &ns->base,
			    "nats: %s must be a positive duration "
			    "with a unit (500ms, 30s, 2m)",
			    name);
			return INBOX_ERR_URL;
		}
		if (name[0] == 'i') {
			ns->in_progress_ms = d;
			*have_ipi = 1;
		} else if (strcmp(name, "ack_wait") == 0) {
			ns->ack_wait_ms = d;
		} else {
			ns->ack_timeout_ms = d;
		}
		return INBOX_OK;
	}
	if (strcmp(name, "max_deliver") == 0) {
		int rc = parse_int(value, -1, INT_MAX, &x);
		free(value);
		if (rc < 0 || x == 0)
			return bad(ns, "max_deliver must be -1 (unlimited) or "
			               "a positive number");
		ns->max_deliver = x;
		return INBOX_OK;
	}
	if (strcmp(name, "max_ack_pending") == 0) {
		int rc = parse_int(value, 1, INT_MAX, &x);
		free(value);
		if (rc < 0)
			return bad(ns,
			           "max_ack_pending must be a positive number");
		ns->max_ack_pending = x;
		return INBOX_OK;
	}
	free(value);
	inbox__source_seterr(&ns->base,
	                     "nats: unknown URL parameter \"%.60s\" (known: "
	                     "durable, subject, create, ack_wait, "
	                     "max_deliver, max_ack_pending, "
	                     "in_progress_interval, ack_timeout)",
	                     name);
	return INBOX_ERR_URL;
}

static int parse_query(nats_source *ns, const char *q, int *have_ipi)
{
	while (*q) {
		size_t len = strcspn(q, "&");
		const char *eq = memchr(q, '=', len);
		if (len == 0) {
			q++;
			continue;
		}
		if (!eq)
			return bad(ns, "URL parameter without '=' (name=value "
			               "expected)");
		int nomem;
		char *name = pct_decode(q, (size_t)(eq - q), &nomem);
		char *value =
		    name
		        ? pct_decode(eq + 1, len - (size_t)(eq - q) - 1, &nomem)
		        : NULL;
		if (!name || !value) {
			free(name);
			return nomem
			           ? INBOX_ERR_NOMEM
			           : bad(ns, "bad %-escape in a URL parameter");
		}
		int rc = apply_param(ns, name, value, have_ipi);
		free(name);
		if (rc < 0)
			return rc;
		q += len;
		if (*q == '&')
			q++;
	}
	return INBOX_OK;
}

/* "user:pass" or "token" (before the '@'). */
static int parse_userinfo(nats_source *ns, const char *s, size_t n)
{
	const char *colon = memchr(s, ':', n);
	int nomem;
	if (!colon) {
		ns->token = pct_decode(s, n, &nomem);
		if (!ns->token)
			return nomem ? INBOX_ERR_NOMEM
			             : bad(ns, "bad %-escape in the token");
		return INBOX_OK;
	}
	ns->user = pct_decode(s, (size_t)(colon - s), &nomem);
	if (ns->user)
		ns->password =
		    pct_decode(colon + 1, n - (size_t)(colon - s) - 1, &nomem);
	if (!ns->user || !ns->password)
		return nomem ? INBOX_ERR_NOMEM
		             : bad(ns, "bad %-escape in the user info");
	return INBOX_OK;
}

/* "host:port,host:port" -> servers[] ("nats://host:port") and hosts. */
static int parse_hosts(nats_source *ns, const char *s, size_t n)
{
	if (n == 0)
		return bad(ns,
		           "no server in the URL (nats://HOST:PORT/STREAM)");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= ' ' || c >= 0x7f || c == '@' || c == '/' || c == '?')
			return bad(ns, "invalid server list");
	}
	ns->hosts = strndup(s, n);
	size_t count = 1;
	for (size_t i = 0; i < n; i++)
		count += s[i] == ',';
	ns->servers = calloc(count, sizeof(*ns->servers));
	if (!ns->hosts || !ns->servers)
		return INBOX_ERR_NOMEM;
	const char *p = s, *end = s + n;
	while (p <= end) {
		const char *c = memchr(p, ',', (size_t)(end - p));
		size_t len = c ? (size_t)(c - p) : (size_t)(end - p);
		if (len == 0)
			return bad(ns, "empty entry in the server list");
		int hasport = memchr(p, ':', len) != NULL;
		char *u = malloc(len + sizeof(SCHEME) + 6);
		if (!u)
			return INBOX_ERR_NOMEM;
		snprintf(u, len + sizeof(SCHEME) + 6, SCHEME "%.*s%s", (int)len,
		         p, hasport ? "" : ":4222");
		ns->servers[ns->nservers++] = u;
		p += len + 1;
	}
	return INBOX_OK;
}

static int default_durable(nats_source *ns, const char *consumer)
{
	ns->durable = strdup(consumer);
	if (!ns->durable)
		return INBOX_ERR_NOMEM;
	for (char *p = ns->durable; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
			*p = '_';
	if (strlen(ns->durable) > 255)
		ns->durable[255] = '\0';
	return INBOX_OK;
}

int inbox__nats_parse_url(nats_source *ns, const char *url,
                          const inbox_source_options *opts)
{
	if (strncmp(url, SCHEME, strlen(SCHEME)) != 0)
		return bad(ns, "URL must start with " SCHEME);
	const char *auth = url + strlen(SCHEME);
	size_t alen = strcspn(auth, "/?#");
	if (auth[alen] != '/')
		return bad(ns,
		           "no stream in the URL (nats://HOST:PORT/STREAM)");
	const char *at = NULL;
	for (const char *p = auth; p < auth + alen; p++)
		if (*p == '@')
			at = p;
	int rc;
	if (at) {
		rc = parse_userinfo(ns, auth, (size_t)(at - auth));
		if (rc < 0)
			return rc;
	}
	const char *hosts = at ? at + 1 : auth;
	rc = parse_hosts(ns, hosts, (size_t)(auth + alen - hosts));
	if (rc < 0)
		return rc;
	const char *path = auth + alen + 1;
	size_t plen = strcspn(path, "?#");
	int nomem;
	ns->stream = pct_decode(path, plen, &nomem);
	if (!ns->stream)
		return nomem ? INBOX_ERR_NOMEM
		             : bad(ns, "bad %-escape in the stream");
	if (!valid_name(ns->stream))
		return bad(ns, "the stream name must be 1-255 letters, digits, "
		               "'_' or '-'");
	int have_ipi = 0;
	if (path[plen] == '?') {
		const char *q = path + plen + 1;
		char *qs = strndup(q, strcspn(q, "#"));
		if (!qs)
			return INBOX_ERR_NOMEM;
		rc = parse_query(ns, qs, &have_ipi);
		free(qs);
		if (rc < 0)
			return rc;
	}
	if (!ns->durable) {
		rc = default_durable(ns, opts->consumer);
		if (rc < 0)
			return rc;
	}
	if (!have_ipi)
		ns->in_progress_ms = ns->ack_wait_ms / 3;
	long long floor =
	    opts->max_batch > 500 ? 2LL * (long long)opts->max_batch : 1000;
	if (floor > INT_MAX)
		floor = INT_MAX;
	if (ns->max_ack_pending == 0)
		ns->max_ack_pending = floor;
	else if (ns->max_ack_pending < (long long)opts->max_batch)
		return bad(ns,
		           "max_ack_pending must be at least the batch size");
	return INBOX_OK;
}
