/* HTTP source: parse http[s]://HOST:PORT/PATH?... (see http.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/url.h"
#include "source/http/http.h"

char *inbox__http_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	inbox__buf b = {0};
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (inbox__buf_append(&b, chunk, n) < 0) {
			fclose(f);
			inbox__buf_free(&b);
			errno = ENOMEM;
			return NULL;
		}
	int bad = ferror(f);
	fclose(f);
	if (bad || inbox__buf_putc(&b, '\0') < 0) {
		inbox__buf_free(&b);
		errno = bad ? EIO : ENOMEM;
		return NULL;
	}
	if (len)
		*len = b.len - 1;
	return b.data;
}

typedef struct parse_ctx {
	http_conf *c;
	inbox_source *src;
} parse_ctx;

static int bad(parse_ctx *x, const char *name, const char *hint)
{
	inbox_source_seterr(x->src, "http: bad value for %s (%s)", name, hint);
	return INBOX_ERR_URL;
}

/* One secret as written: a Standard Webhooks one is "whsec_" + base64
 * of the key, the others are their bytes. Never echoed. */
static int add_secret(parse_ctx *x, const char *v, size_t n)
{
	http_conf *c = x->c;
	while (n > 0 &&
	       (v[n - 1] == '\n' || v[n - 1] == '\r' || v[n - 1] == ' '))
		n--;
	if (n == 0)
		return INBOX_OK;
	http_secret *s =
	    realloc(c->secrets, (c->nsecrets + 1) * sizeof(*c->secrets));
	if (!s)
		return INBOX_ERR_NOMEM;
	c->secrets = s;
	unsigned char *p = malloc(n + 1);
	if (!p)
		return INBOX_ERR_NOMEM;
	memcpy(p, v, n);
	long len = (long)n;
	c->secrets[c->nsecrets].p = p;
	c->secrets[c->nsecrets].n = (size_t)len;
	c->nsecrets++;
	return INBOX_OK;
}

static int secret_file(parse_ctx *x, const char *path)
{
	size_t len;
	char *text = inbox__http_read_file(path, &len);
	if (!text) {
		inbox_source_seterr(x->src, "http: cannot read secret_file: %s",
		                    strerror(errno));
		return INBOX_ERR_IO;
	}
	int rc = INBOX_OK;
	for (char *p = text; rc == INBOX_OK && p < text + len;) {
		char *nl = memchr(p, '\n', (size_t)(text + len - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(text + len - p);
		rc = add_secret(x, p, n);
		p += n + 1;
	}
	free(text);
	return rc;
}

static int mode_param(parse_ctx *x, const char *v)
{
	static const char *const names[] = {"api", "standard", "github",
	                                    "stripe"};
	for (int i = 0; i < 4; i++)
		if (strcmp(v, names[i]) == 0) {
			x->c->mode = (http_mode)i;
			return INBOX_OK;
		}
	return bad(x, "mode", "api, standard, github or stripe");
}

static int dur(parse_ctx *x, const char *k, const char *v, int64_t min,
               int64_t max, int64_t *out)
{
	return inbox__url_duration_param(out, x->src, "http", k, v, 1, min,
	                                 max);
}

static int apply_param(const char *k, const char *v, void *payload)
{
	parse_ctx *x = payload;
	http_conf *c = x->c;
	long long n;
	int64_t ms;
	int rc;
	if (!v)
		v = "";
	if (!strcmp(k, "mode"))
		return mode_param(x, v);
	if (!strcmp(k, "secret"))
		return add_secret(x, v, strlen(v));
	if (!strcmp(k, "secret_file"))
		return secret_file(x, v);
	if (!strcmp(k, "method") || !strcmp(k, "id_header") ||
	    !strcmp(k, "id_pointer") || !strcmp(k, "cert") ||
	    !strcmp(k, "key")) {
		char **dst = k[0] == 'm'   ? &c->method
		             : k[0] == 'c' ? &c->cert_file
		             : k[0] == 'k' ? &c->key_file
		             : k[3] == 'h' ? &c->id_header
		                           : &c->id_pointer;
		if (!*v)
			return bad(x, k, "empty");
		if (!strcmp(k, "id_pointer") && v[0] != '/')
			return bad(x, k, "a JSON pointer, /...");
		return inbox__url_set_str(dst, v);
	}
	if (!strcmp(k, "status")) {
		rc = inbox__url_int_param(&n, x->src, "http", k, v, 200, 299);
		c->status = (int)n;
		return rc;
	}
	if (!strcmp(k, "max_body")) {
		rc = inbox__url_int_param(&n, x->src, "http", k, v, 1,
		                          1LL << 30);
		c->max_body = (size_t)n;
		c->max_body_set = 1;
		return rc;
	}
	if (!strcmp(k, "connections")) {
		rc = inbox__url_int_param(&n, x->src, "http", k, v, 1, 65536);
		c->conn_limit = (unsigned)n;
		return rc;
	}
	if (!strcmp(k, "tolerance")) {
		rc = dur(x, k, v, 1000, 86400000LL * 7, &ms);
		c->tolerance_ms = ms;
		return rc;
	}
	if (!strcmp(k, "answer_within")) {
		rc = dur(x, k, v, 1000, 3600000, &ms);
		c->answer_ms = ms;
		return rc;
	}
	if (!strcmp(k, "replay_cache")) {
		rc = inbox__url_int_param(&n, x->src, "http", k, v, 0, 1000000);
		c->replay_cache = (size_t)n;
		c->replay_set = 1;
		return rc;
	}
	if (!strcmp(k, "replay_cache_ttl")) {
		rc = dur(x, k, v, 0, 3600000, &ms);
		c->replay_ttl_ms = ms;
		c->replay_set = 1;
		return rc;
	}
	if (!strcmp(k, "ack_delay")) {
		rc = dur(x, k, v, 0, 60000, &ms);
		c->ack_delay_ms = ms;
		return rc;
	}
	if (!strcmp(k, "timeout") || !strcmp(k, "body_timeout") ||
	    !strcmp(k, "retry_after")) {
		rc = dur(x, k, v, 1000, 3600000, &ms);
		if (k[0] == 't')
			c->timeout_s = (int)(ms / 1000);
		else if (k[0] == 'b')
			c->body_ms = ms;
		else
			c->retry_after_s = (int)(ms / 1000);
		return rc;
	}
	inbox_source_seterr(
	    x->src,
	    "http: unknown parameter '%.60s' (mode, method, "
	    "id_header, id_pointer, status, max_body, "
	    "connections, timeout, body_timeout, retry_after, "
	    "tolerance, answer_within, secret, secret_file, cert, key, "
	    "replay_cache, replay_cache_ttl, ack_delay)",
	    k);
	return INBOX_ERR_URL;
}

/* HOST:PORT, PORT 0..65535 (0: a free one). */
static int hostport(parse_ctx *x, const char *p, size_t n)
{
	const char *colon = NULL;
	for (size_t i = n; i > 0; i--)
		if (p[i - 1] == ':') {
			colon = p + i - 1;
			break;
		}
	if (!colon || colon == p || memchr(p, '[', n)) {
		inbox_source_seterr(x->src, "http: the address is HOST:PORT "
		                            "(an IPv4 address or a name)");
		return INBOX_ERR_URL;
	}
	long long port;
	if (inbox__url_int(&port, colon + 1, (size_t)(p + n - colon - 1), 0,
	                   65535) < 0) {
		inbox_source_seterr(x->src, "http: the port must be 0..65535");
		return INBOX_ERR_URL;
	}
	x->c->port = (int)port;
	return inbox__url_decode_part(&x->c->host, x->src, "http", "host", p,
	                              (size_t)(colon - p));
}

static int defaults(http_conf *c, const inbox_source_options *opts)
{
	c->status = 200;
	c->max_body = opts->max_payload ? opts->max_payload : 1024 * 1024;
	c->tolerance_ms = 300000;
	c->timeout_s = 10;
	c->body_ms = 30000;
	c->conn_limit = 1024;
	c->retry_after_s = 1;
	c->answer_ms = 10000;
	c->replay_cache = 10000;
	c->replay_ttl_ms = 60000;
	if (inbox__url_set_str(&c->method, "POST") < 0 ||
	    inbox__url_set_str(&c->id_header, "Idempotency-Key") < 0)
		return INBOX_ERR_NOMEM;
	return INBOX_OK;
}

/* A Standard Webhooks secret is "whsec_" and the base64 of the key. */
static int decode_standard(parse_ctx *x)
{
	for (size_t i = 0; i < x->c->nsecrets; i++) {
		http_secret *s = &x->c->secrets[i];
		const char *b = (const char *)s->p;
		size_t bn = s->n;
		if (bn > 6 && memcmp(b, "whsec_", 6) == 0) {
			b += 6;
			bn -= 6;
		}
		unsigned char *k = malloc(bn + 1);
		if (!k)
			return INBOX_ERR_NOMEM;
		long len = inbox__http_b64_decode(k, b, bn);
		memset(s->p, 0, s->n);
		free(s->p);
		s->p = k;
		s->n = len > 0 ? (size_t)len : 0;
		if (len <= 0)
			return bad(x, "secret",
			           "a Standard Webhooks secret is whsec_ and "
			           "base64");
	}
	return INBOX_OK;
}

static int check(parse_ctx *x)
{
	http_conf *c = x->c;
	if (c->mode == HTTP_MODE_STANDARD) {
		int rc = decode_standard(x);
		if (rc < 0)
			return rc;
	}
	if (c->mode != HTTP_MODE_API && c->nsecrets == 0) {
		inbox_source_seterr(x->src,
		                    "http: a webhook route needs at "
		                    "least one secret= or secret_file=");
		return INBOX_ERR_URL;
	}
	if (c->mode == HTTP_MODE_API && c->nsecrets) {
		inbox_source_seterr(x->src, "http: secret= is for webhook "
		                            "modes (standard, github, stripe)");
		return INBOX_ERR_URL;
	}
	if (c->mode != HTTP_MODE_API && c->replay_set) {
		/* a webhook's duplicate is answered 2xx from the store: it
		 * has no stored answer to keep */
		inbox_source_seterr(x->src,
		                    "http: replay_cache= and replay_cache_ttl= "
		                    "are for mode=api");
		return INBOX_ERR_URL;
	}
	if (c->tls != (c->cert_file && c->key_file) &&
	    (c->tls || c->cert_file || c->key_file)) {
		inbox_source_seterr(
		    x->src, c->tls ? "http: https:// needs cert= and key="
		                   : "http: cert= and key= are for "
		                     "https://");
		return INBOX_ERR_URL;
	}
	return INBOX_OK;
}

int inbox__http_conf_parse(http_conf *c, inbox_source *src, const char *url,
                           const inbox_source_options *opts)
{
	parse_ctx x = {c, src};
	inbox__url u;
	memset(c, 0, sizeof(*c));
	c->tls = strncmp(url, "https:", 6) == 0;
	if (inbox__url_split(&u, url, c->tls ? "https" : "http", 0) < 0) {
		inbox_source_seterr(src, "http: the URL is %s://HOST:PORT/PATH",
		                    c->tls ? "https" : "http");
		return INBOX_ERR_URL;
	}
	if (u.userinfo) {
		inbox_source_seterr(src, "http: no user info in the URL");
		return INBOX_ERR_URL;
	}
	int rc = defaults(c, opts);
	if (rc == INBOX_OK)
		rc = hostport(&x, u.hosts, u.hosts_len);
	if (rc == INBOX_OK) {
		char *p = NULL;
		rc = inbox__url_decode_part(&p, src, "http", "path",
		                            u.path ? u.path : "",
		                            u.path ? u.path_len : 0);
		if (rc == INBOX_OK) {
			size_t n = strlen(p);
			c->path = malloc(n + 2);
			if (!c->path)
				rc = INBOX_ERR_NOMEM;
			else
				snprintf(c->path, n + 2, "/%s", p);
		}
		free(p);
	}
	if (rc == INBOX_OK && u.query)
		rc = inbox__url_params(src, "http", u.query, u.query_len,
		                       INBOX__URL_NEED_EQ, apply_param, &x);
	if (rc == INBOX_OK && !c->max_body_set && opts->max_payload) {
		/* the envelope around the body stays within max_payload */
		size_t wrap = 64 + 2 * strlen(c->method) + 6 * strlen(c->path);
		c->max_body =
		    opts->max_payload > wrap ? opts->max_payload - wrap : 1;
	}
	return rc == INBOX_OK ? check(&x) : rc;
}

void inbox__http_conf_free(http_conf *c)
{
	for (size_t i = 0; i < c->nsecrets; i++) {
		/* the key bytes do not outlive the source */
		memset(c->secrets[i].p, 0, c->secrets[i].n);
		free(c->secrets[i].p);
	}
	free(c->secrets);
	free(c->host);
	free(c->path);
	free(c->method);
	free(c->id_header);
	free(c->id_pointer);
	free(c->cert_file);
	free(c->key_file);
	memset(c, 0, sizeof(*c));
}

static int same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

int inbox__http_same_listener(const http_conf *a, const http_conf *b)
{
	return a->port == b->port && same_str(a->host, b->host);
}

const char *inbox__http_listener_differs(const http_conf *a, const http_conf *b)
{
	if (a->tls != b->tls)
		return "http:// and https://";
	if (!same_str(a->cert_file, b->cert_file))
		return "cert";
	if (!same_str(a->key_file, b->key_file))
		return "key";
	if (a->conn_limit != b->conn_limit)
		return "connections";
	if (a->timeout_s != b->timeout_s)
		return "timeout";
	return NULL;
}

int inbox__http_routes_check(const char *url_a, const char *name_a,
                             const char *url_b, const char *name_b, char *why,
                             size_t len)
{
	inbox_source_options o = {0};
	inbox_source *s = calloc(1, sizeof(*s));
	http_conf a = {0}, b = {0};
	if (!s)
		return 0;
	int ok = inbox__http_conf_parse(&a, s, url_a, &o) == INBOX_OK &&
	         inbox__http_conf_parse(&b, s, url_b, &o) == INBOX_OK;
	int rc = 0;
	if (ok && inbox__http_same_listener(&a, &b)) {
		const char *what = inbox__http_listener_differs(&a, &b);
		if (what) {
			snprintf(
			    why, len,
			    "consumers %s and %s share %s:%d but their "
			    "listener options differ (%s); they must agree",
			    name_a, name_b, a.host, a.port, what);
			rc = -1;
		} else if (!strcmp(a.path, b.path) &&
		           !strcmp(a.method, b.method)) {
			snprintf(why, len,
			         "consumers %s and %s both take %s %s on %s:%d",
			         name_a, name_b, a.method, a.path, a.host,
			         a.port);
			rc = -1;
		}
	}
	inbox__http_conf_free(&a);
	inbox__http_conf_free(&b);
	free(s);
	return rc;
}
