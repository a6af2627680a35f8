/* URL syntax shared by the sources and by inbox_redact_url (see url.h). */
#include "base/url.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* "WHO: message" into src's errmsg; INBOX_ERR_URL. Written here rather
 * than through inbox__source_seterr so that this file links without the
 * source registry (inbox_redact_url and its fuzz target use it too). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
fail(inbox_source *src, const char *who, const char *fmt, ...)
{
	char msg[sizeof(src->errmsg)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(src->errmsg, sizeof(src->errmsg), "%s: %s", who, msg);
	return INBOX_ERR_URL;
}

int inbox__hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int inbox__url_decode(char **out, const char *p, size_t n)
{
	char *d = malloc(n + 1);
	size_t j = 0;
	*out = NULL;
	if (!d)
		return INBOX_ERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '%') {
			d[j++] = p[i];
			continue;
		}
		int hi =
		    i + 1 < n ? inbox__hexval((unsigned char)p[i + 1]) : -1;
		int lo =
		    i + 2 < n ? inbox__hexval((unsigned char)p[i + 2]) : -1;
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

const char *inbox__url_userinfo_end(const char *auth)
{
	const char *at = NULL;
	for (const char *p = auth; *p && *p != '/'; p++)
		if (*p == '@')
			at = p;
	return at;
}

int inbox__url_split(inbox__url *out, const char *url, const char *scheme,
                     unsigned flags)
{
	int frag = (flags & INBOX__URL_FRAGMENT) != 0;
	size_t sl = strlen(scheme);
	memset(out, 0, sizeof(*out));
	if (strncmp(url, scheme, sl) != 0 || strncmp(url + sl, "://", 3) != 0)
		return INBOX_ERR_URL;
	const char *p = url + sl + 3;
	const char *at = inbox__url_userinfo_end(p);
	if (at) {
		out->userinfo = p;
		out->userinfo_len = (size_t)(at - p);
		p = at + 1;
	}
	out->hosts = p;
	out->hosts_len = strcspn(p, frag ? "/?#" : "/?");
	p += out->hosts_len;
	if (*p == '/') {
		out->path = ++p;
		out->path_len = strcspn(p, frag ? "?#" : "?");
		p += out->path_len;
	}
	if (*p == '?') {
		out->query = ++p;
		out->query_len = strcspn(p, frag ? "#" : "");
		p += out->query_len;
	}
	if (*p == '#') {
		out->fragment = ++p;
		out->fragment_len = strlen(p);
	}
	return INBOX_OK;
}

int inbox__url_hostport(const char **host, size_t *hlen, int *port,
                        const char *p, size_t n)
{
	const char *end = p + n, *colon = NULL;
	if (n > 0 && p[0] == '[') {
		const char *rb = memchr(p, ']', n);
		if (!rb)
			return -1;
		*host = p + 1;
		*hlen = (size_t)(rb - p - 1);
		if (rb + 1 < end) {
			if (rb[1] != ':')
				return -1;
			colon = rb + 1;
		}
	} else {
		colon = memchr(p, ':', n);
		*host = p;
		*hlen = colon ? (size_t)(colon - p) : n;
	}
	if (*hlen == 0)
		return -1;
	if (colon) {
		long long x;
		if (inbox__url_int(&x, colon + 1, (size_t)(end - colon - 1), 1,
		                   65535) < 0)
			return -1;
		*port = (int)x;
	}
	return 0;
}

int inbox__url_printable(const char *p, size_t n)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] <= ' ' || (unsigned char)p[i] >= 0x7f)
			return 0;
	return 1;
}

int inbox__url_int(long long *out, const char *p, size_t n, long long min,
                   long long max)
{
	int neg = n > 0 && p[0] == '-' && min < 0;
	size_t i = neg ? 1 : 0;
	long long x = 0;
	if (i == n)
		return -1;
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		int d = p[i] - '0';
		if (x > (LLONG_MAX - d) / 10)
			return -1;
		x = x * 10 + d;
	}
	if (neg)
		x = -x;
	if (x < min || x > max)
		return -1;
	*out = x;
	return 0;
}

int inbox__url_duration_ms(int64_t *out, const char *v, int unit_required)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} units[] = {
	    {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"", 1}};
	size_t digits = strspn(v, "0123456789");
	long long x;
	if (inbox__url_int(&x, v, digits, 0, LLONG_MAX) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++) {
		if (strcmp(v + digits, units[i].unit) != 0)
			continue;
		if (!units[i].unit[0] && unit_required && x != 0)
			return -1;
		if (x > INT64_MAX / 1000000 / units[i].ms)
			return -1;
		*out = (int64_t)x * units[i].ms;
		return 0;
	}
	return -1;
}

int inbox__url_set_str(char **dst, const char *v)
{
	char *s = strdup(v);
	if (!s)
		return INBOX_ERR_NOMEM;
	free(*dst);
	*dst = s;
	return INBOX_OK;
}

int inbox__url_decode_part(char **dst, inbox_source *src, const char *who,
                           const char *what, const char *p, size_t n)
{
	char *v;
	int rc = inbox__url_decode(&v, p, n);
	if (rc == INBOX_ERR_URL)
		return fail(src, who, "bad %%-escape in the %s", what);
	if (rc < 0)
		return rc;
	free(*dst);
	*dst = v;
	return INBOX_OK;
}

int inbox__url_userinfo(char **user, char **pass, inbox_source *src,
                        const char *who, const char *p, size_t n)
{
	const char *colon = memchr(p, ':', n);
	size_t ulen = colon ? (size_t)(colon - p) : n;
	int rc = inbox__url_decode_part(user, src, who, "user info", p, ulen);
	if (rc == INBOX_OK && colon)
		rc = inbox__url_decode_part(pass, src, who, "user info",
		                            colon + 1, n - ulen - 1);
	return rc;
}

int inbox__url_int_param(long long *out, inbox_source *src, const char *who,
                         const char *name, const char *v, long long min,
                         long long max)
{
	if (inbox__url_int(out, v, strlen(v), min, max) < 0)
		return fail(src, who, "%s must be %lld..%lld", name, min, max);
	return INBOX_OK;
}

int inbox__url_duration_param(int64_t *out, inbox_source *src, const char *who,
                              const char *name, const char *v, int64_t bare_ms,
                              int64_t min_ms, int64_t max_ms)
{
	int64_t ms = -1;
	long long x;
	size_t n = strlen(v);
	if (n > 0 && strspn(v, "0123456789") == n) {
		if (inbox__url_int(&x, v, n, 0, LLONG_MAX) == 0 &&
		    x <= INT64_MAX / bare_ms)
			ms = (int64_t)x * bare_ms;
	} else if (inbox__url_duration_ms(&ms, v, 1) < 0) {
		ms = -1;
	}
	if (ms < min_ms || ms > max_ms)
		return fail(src, who,
		            "bad value for %s: '%.40s' (a duration from %lldms "
		            "to %lldms: 500ms, 30s, 5m; a bare number is %s)",
		            name, v, (long long)min_ms, (long long)max_ms,
		            bare_ms == 1000 ? "seconds" : "milliseconds");
	*out = ms;
	return INBOX_OK;
}

/* One half of a parameter, decoded or copied. */
static int param_part(char **out, const char *p, size_t n, unsigned flags)
{
	if (!(flags & INBOX__URL_RAW))
		return inbox__url_decode(out, p, n);
	*out = strndup(p, n);
	return *out ? INBOX_OK : INBOX_ERR_NOMEM;
}

/* One non-empty KEY[=VALUE] of [p, p+len). */
static int one_param(inbox_source *src, const char *who, const char *p,
                     size_t len, unsigned flags, inbox__url_param_fn fn,
                     void *payload)
{
	const char *eq = memchr(p, '=', len);
	size_t klen = eq ? (size_t)(eq - p) : len;
	char *key = NULL, *value = NULL;
	if (!eq && (flags & INBOX__URL_NEED_EQ))
		return fail(src, who, "URL parameter \"%.*s\" lacks '='",
		            (int)(len > 60 ? 60 : len), p);
	int rc = param_part(&key, p, klen, flags);
	if (rc == INBOX_OK && eq)
		rc = param_part(&value, eq + 1, len - klen - 1, flags);
	if (rc == INBOX_ERR_URL)
		rc = fail(src, who, "bad %%-escape in URL parameter \"%.*s\"",
		          (int)(klen > 60 ? 60 : klen), p);
	else if (rc == INBOX_OK)
		rc = fn(key, value, payload);
	free(key);
	free(value);
	return rc;
}

int inbox__url_params(inbox_source *src, const char *who, const char *q,
                      size_t n, unsigned flags, inbox__url_param_fn fn,
                      void *payload)
{
	const char *end = q + n;
	while (q < end) {
		const char *amp = memchr(q, '&', (size_t)(end - q));
		size_t len = amp ? (size_t)(amp - q) : (size_t)(end - q);
		if (len > 0) {
			int rc =
			    one_param(src, who, q, len, flags, fn, payload);
			if (rc < 0)
				return rc;
		}
		q = amp ? amp + 1 : end;
	}
	return INBOX_OK;
}

/* ---- What is secret ----------------------------------------------------- */

/* Words that make a parameter's value secret (see url.h). */
static const char *const secret_words[] = {
    "pass", "pwd",  "secret", "token",  "key",
    "cred", "auth", "jaas",   "config", "signature",
};

/* Names that hold a secret word but name a file: the path is no secret
 * (and an error about the file should show which one). The key itself,
 * its passphrase, rdkafka's ssl.key.pem, stay secret. */
static int names_a_file(const char *name, size_t n)
{
	static const char *const files[] = {"sslkey", "tls_key"};
	static const char suffix[] = ".location";
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++)
		if (strcasecmp(name, files[i]) == 0)
			return 1;
	return n > sizeof(suffix) - 1 &&
	       strcasecmp(name + n - (sizeof(suffix) - 1), suffix) == 0;
}

int inbox__secret_name(const char *name)
{
	size_t n = strlen(name);
	if (names_a_file(name, n))
		return 0;
	for (size_t w = 0; w < sizeof(secret_words) / sizeof(*secret_words);
	     w++) {
		size_t wl = strlen(secret_words[w]);
		for (size_t i = 0; i + wl <= n; i++)
			if (strncasecmp(name + i, secret_words[w], wl) == 0)
				return 1;
	}
	return 0;
}

int inbox__url_secret_name(const char *p, size_t n)
{
	char *name;
	/* A name that does not decode: as written (a parser that takes
	 * names literally sees that). */
	if (inbox__url_decode(&name, p, n) != INBOX_OK &&
	    !(name = strndup(p, n)))
		return 1; /* no memory: hide it */
	int secret = inbox__secret_name(name);
	free(name);
	return secret;
}

static int scheme_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
}

/* The length of the SCHEME at the start of url (a letter, then letters,
 * digits, '+', '-' or '.'), followed by ':'; 0 if there is none. */
static size_t scheme_len(const char *url)
{
	size_t i = 0;
	if (!((url[0] >= 'a' && url[0] <= 'z') ||
	      (url[0] >= 'A' && url[0] <= 'Z')))
		return 0;
	while (scheme_char(url[i]))
		i++;
	return url[i] == ':' ? i : 0;
}

/* The length of "SCHEME://" at the start of url, 0 if it has none. */
static size_t scheme_prefix(const char *url)
{
	size_t i = scheme_len(url);
	return i && strncmp(url + i, "://", 3) == 0 ? i + 3 : 0;
}

/* 1 if the scheme [s, s+n) is one of names (NULL-terminated). */
static int scheme_in(const char *s, size_t n, const char *const *names)
{
	for (; *names; names++)
		if (strlen(*names) == n && strncmp(s, *names, n) == 0)
			return 1;
	return 0;
}

/* Schemes whose bare user info ("scheme://NAME@host") is a user name. */
static const char *const bare_name[] = {"postgresql", "postgres", "amqp",
                                        "amqps", NULL};
/* Schemes with no authority at all: "jsonl://x" is the path "//x". (A
 * "sqlite://u:p@h" is refused by the store, but hidden all the same.) */
static const char *const no_authority[] = {"jsonl", NULL};

/* The user info of the authority at auth (just past "://"), the scheme
 * [sch, sch+slen) before it. */
static int userinfo_secret(const char *url, const char *auth, const char *sch,
                           size_t slen, inbox__url_span_fn fn, void *payload)
{
	if (*auth == '/' || scheme_in(sch, slen, no_authority))
		return 0; /* no authority: "sqlite:///path" */
	const char *at = strrchr(auth, '@');
	if (!at)
		return 0;
	size_t n = (size_t)(at - auth);
	const char *colon = memchr(auth, ':', n);
	/* Ambiguous (refused by inbox__url_check): any of it may be the
	 * secret, "nats://TO/KEN@h" as much as "x://u:p@ss@h". */
	int odd = strcspn(auth, "/?#@[]") < n;
	if (colon && !odd) {
		size_t from = (size_t)(colon + 1 - url),
		       to = (size_t)(at - url);
		return from < to ? fn(from, to, payload) : 0;
	}
	if (n == 0 || (!odd && scheme_in(sch, slen, bare_name)))
		return 0;
	return fn((size_t)(auth - url), (size_t)(at - url), payload);
}

/* The end of a libpq keyword/value value starting at v: a quoted '...'
 * (backslash escapes) or up to white space. */
static size_t kv_value_end(const char *url, size_t v, size_t n)
{
	size_t e = v;
	if (url[v] != '\'') {
		while (e < n && !isspace((unsigned char)url[e]))
			e++;
		return e;
	}
	for (e = v + 1; e < n && url[e] != '\''; e++)
		if (url[e] == '\\' && e + 1 < n)
			e++;
	return e < n ? e + 1 : e;
}

/* Parameters. In a URL: from its first '?' on, a name after each '&' (or
 * that '?'), up to '=' (a '#' ends the query for some parsers, not for
 * others: it is taken as part of the name or value, so that more is
 * secret); the value up to the next '&' or the end. In a libpq
 * keyword/value string: a name at the start or after white space, up to
 * '='; the value up to white space, or a quoted '...'. */
static int param_secrets(const char *url, int kv, inbox__url_span_fn fn,
                         void *payload)
{
	size_t n = strlen(url);
	const char *q = kv ? url : strchr(url, '?');
	if (!q)
		return 0;
	for (size_t i = (size_t)(q - url) + !kv; i < n; i++) {
		char prev = i > 0 ? url[i - 1] : ' ';
		if (kv ? !isspace((unsigned char)prev)
		       : prev != '&' && url + i - 1 != q)
			continue;
		size_t k = i;
		while (k < n && url[k] != '=' &&
		       (kv ? !isspace((unsigned char)url[k]) : url[k] != '&'))
			k++;
		if (k == i || k == n || url[k] != '=' ||
		    !inbox__url_secret_name(url + i, k - i))
			continue;
		size_t v = k + 1, e = v;
		if (kv)
			e = kv_value_end(url, v, n);
		else
			while (e < n && url[e] != '&')
				e++;
		if (e > v) {
			int rc = fn(v, e, payload);
			if (rc)
				return rc;
		}
		i = e > i ? e - 1 : i;
	}
	return 0;
}

/* A string that starts with SCHEME "://", or with jsonl: or sqlite:, is
 * that URL. Anything else no parser takes, but an error may quote it: it
 * is read as a libpq keyword/value string (when it has no scheme) and, if
 * it holds a "://" somewhere, as a URL from there too, so that what
 * either reading would call secret is hidden. */
int inbox__url_secrets(const char *url, inbox__url_span_fn fn, void *payload)
{
	static const char *const path_urls[] = {"jsonl", "sqlite", NULL};
	size_t lead = scheme_len(url);
	const char *sep = NULL;
	if (lead && strncmp(url + lead, "://", 3) == 0)
		sep = url + lead;
	else if (!lead || !scheme_in(url, lead, path_urls))
		sep = strstr(url, "://");
	int rc = 0;
	if (sep) /* a "://" further on has no known scheme before it */
		rc = userinfo_secret(url, sep + 3, url,
		                     sep == url + lead ? lead : 0, fn, payload);
	if (rc == 0 && (lead || sep))
		rc = param_secrets(url, 0, fn, payload);
	if (rc == 0 && !lead)
		rc = param_secrets(url, 1, fn, payload);
	return rc;
}

int inbox__url_check(const char *url, const char **why)
{
	size_t prefix = scheme_prefix(url);
	const char *auth = url + prefix, *at;
	*why = NULL;
	if (!prefix || *auth == '/' || !(at = strchr(auth, '@')))
		return 0;
	if (strchr(at + 1, '@'))
		*why = "more than one '@' in the URL, which client libraries "
		       "split differently: percent-encode each one but the "
		       "'@' that ends the user info (%40)";
	else if (strcspn(auth, "/?#[]") < (size_t)(at - auth))
		*why =
		    "a '/', '?', '#', '[' or ']' before the '@' (in the user "
		    "info, or an '@' after the host), which client "
		    "libraries split differently: percent-encode it (%2F "
		    "%3F %23 %5B %5D %40)";
	return *why ? -1 : 0;
}

int inbox__url_refuse_ambiguous(inbox_source *src, const char *who,
                                const char *url)
{
	const char *why;
	if (inbox__url_check(url, &why) == 0)
		return INBOX_OK;
	return fail(src, who, "%s", why);
}
