/*
 * Fuzz target: the source URL parsers and the definition of what is
 * secret in a URL. The input, as a C string, goes to the shared pieces of
 * src/base/url.c and to the parse-only entry point of every source
 * (src/source/NAME/NAME_url.c). Checked:
 *   - a split gives the URL back: SCHEME "://" [USERINFO "@"] HOSTS
 *     ["/" PATH] ["?" QUERY] ["#" FRAGMENT], its user info ending where the
 *     documented rule (the last '@' before the first '/' after "//") says,
 *     computed here independently;
 *   - a URL that inbox__url_check accepts has one user info for every
 *     client library: libpq's (the first '@' before the first '/'),
 *     cnats's (the last '@' of the URL) and ours are the same '@';
 *   - the secret spans (inbox__url_secrets) cover whatever libpq, cnats
 *     or rabbitmq-c would take for the password (or for the token of a
 *     bare nats:// user info), however ambiguous the URL;
 *   - parameters, integers, durations and host:port stay in their bounds;
 *   - a parser returns INBOX_OK, INBOX_ERR_URL with a message, or NOMEM,
 *     and its url_clear frees all it filled in (LeakSanitizer);
 *   - no output depends on a secret: the URL with every letter and digit
 *     of its secret spans changed (each within its class, hex digits
 *     staying hex digits, %-escapes left alone) has the same secret
 *     spans, the same redaction (inbox_redact_url), and from every parser
 *     the same result and the same message, byte for byte. A message
 *     that quoted any piece of a secret would differ; one that only
 *     happens to contain the same letters ("able" in "durable") does not.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inbox/inbox.h>

#include "base/url.h"
#include "source/amqp/amqp_source.h"
#include "source/jsonl/jsonl.h"
#include "source/kafka/kafka.h"
#include "source/nats/nats_source.h"
#include "source/redis/redis.h"

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "fuzz_source_url: check failed: %s\n", \
			        #c);                                           \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the shared pieces ------------------------------------------------ */

static void put(char *out, size_t *len, const char *pre, const char *p,
                size_t n)
{
	if (!p)
		return;
	memcpy(out + *len, pre, strlen(pre));
	*len += strlen(pre);
	memcpy(out + *len, p, n);
	*len += n;
}

/* The '@' ending the user info by the documented rule, NULL if none. */
static const char *rule_at(const char *auth)
{
	const char *slash = strchr(auth, '/');
	const char *end = slash ? slash : auth + strlen(auth);
	const char *at = NULL;
	for (const char *p = auth; p < end; p++)
		if (*p == '@')
			at = p;
	return at;
}

static void check_split(const char *url, unsigned flags)
{
	const char *sep = strstr(url, "://");
	if (!sep || sep - url > 32)
		return;
	char scheme[33];
	memcpy(scheme, url, (size_t)(sep - url));
	scheme[sep - url] = '\0';
	inbox__url u;
	CHECK(inbox__url_split(&u, url, scheme, flags) == INBOX_OK);
	/* The parts tile the URL. */
	size_t n = strlen(url), len = 0;
	char *back = malloc(n + 1);
	CHECK(back != NULL);
	put(back, &len, "", url, (size_t)(sep + 3 - url));
	put(back, &len, "", u.userinfo, u.userinfo_len);
	put(back, &len, u.userinfo ? "@" : "", u.hosts, u.hosts_len);
	put(back, &len, "/", u.path, u.path_len);
	put(back, &len, "?", u.query, u.query_len);
	put(back, &len, "#", u.fragment, u.fragment_len);
	CHECK(len == n && memcmp(back, url, n) == 0);
	free(back);
	/* Where each part ends. */
	const char *at = rule_at(sep + 3);
	CHECK(at == inbox__url_userinfo_end(sep + 3));
	CHECK(at ? u.userinfo == sep + 3 && u.userinfo + u.userinfo_len == at
	         : u.userinfo == NULL);
	const char *stop = flags & INBOX__URL_FRAGMENT ? "/?#" : "/?";
	CHECK(strcspn(u.hosts, stop) == u.hosts_len);
	CHECK(!u.path || strcspn(u.path, stop + 1) == u.path_len);
	CHECK(!u.fragment || (flags & INBOX__URL_FRAGMENT));
	/* Another scheme is refused. */
	CHECK(strcmp(scheme, "x-other") == 0 ||
	      inbox__url_split(&u, url, "x-other", flags) == INBOX_ERR_URL);
}

typedef struct param_check {
	unsigned flags;
	size_t count;
} param_check;

static int on_param(const char *key, const char *value, void *payload)
{
	param_check *pc = payload;
	CHECK(key != NULL);
	CHECK(value || !(pc->flags & INBOX__URL_NEED_EQ));
	if (pc->flags & INBOX__URL_RAW) {
		CHECK(!strchr(key, '&') && !strchr(key, '='));
		CHECK(!value || !strchr(value, '&'));
	}
	pc->count++;
	return INBOX_OK;
}

static void check_params(const char *q)
{
	static const unsigned flags[] = {0, INBOX__URL_NEED_EQ, INBOX__URL_RAW,
	                                 INBOX__URL_RAW | INBOX__URL_NEED_EQ};
	size_t amps = 0;
	for (const char *p = q; *p; p++)
		amps += *p == '&';
	for (size_t i = 0; i < sizeof(flags) / sizeof(*flags); i++) {
		inbox_source src;
		memset(&src, 0, sizeof(src));
		param_check pc = {flags[i], 0};
		int rc = inbox__url_params(&src, "fuzz", q, strlen(q), flags[i],
		                           on_param, &pc);
		CHECK(rc == INBOX_OK || rc == INBOX_ERR_URL ||
		      rc == INBOX_ERR_NOMEM);
		CHECK(rc != INBOX_ERR_URL ||
		      strncmp(src.errmsg, "fuzz: ", 6) == 0);
		CHECK(rc != INBOX_OK || pc.count <= amps + 1);
		CHECK(!(flags[i] & INBOX__URL_RAW) || rc != INBOX_ERR_URL ||
		      (flags[i] & INBOX__URL_NEED_EQ));
	}
}

static void check_values(const char *s)
{
	size_t n = strlen(s);
	char *d;
	int rc = inbox__url_decode(&d, s, n);
	CHECK(rc == INBOX_OK || rc == INBOX_ERR_URL || rc == INBOX_ERR_NOMEM);
	if (rc == INBOX_OK) {
		CHECK(strlen(d) <= n);
		CHECK(strchr(s, '%') || strcmp(d, s) == 0);
		free(d);
	}
	long long x;
	if (inbox__url_int(&x, s, n, -5, 70000) == 0)
		CHECK(x >= -5 && x <= 70000);
	if (inbox__url_int(&x, s, n, 0, 10) == 0)
		CHECK(x >= 0 && x <= 10 && s[0] != '-');
	int64_t ms;
	if (inbox__url_duration_ms(&ms, s, 1) == 0)
		CHECK(ms >= 0 && ms <= INT64_MAX / 1000000);
	if (inbox__url_duration_ms(&ms, s, 0) == 0)
		CHECK(ms >= 0 && ms <= INT64_MAX / 1000000);
	const char *host;
	size_t hlen;
	int port = -1;
	if (inbox__url_hostport(&host, &hlen, &port, s, n) == 0) {
		CHECK(hlen > 0 && host >= s && host + hlen <= s + n);
		CHECK(port == -1 || (port >= 1 && port <= 65535));
	}
}

/* ---- the sources' parsers --------------------------------------------- */

static inbox_source_options options(void)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "fuzz.consumer";
	return o;
}

/* INBOX_OK, or INBOX_ERR_URL with a message, or NOMEM; the message is
 * copied to msg. */
static void check_rc(const char *who, int rc, const inbox_source *src,
                     char *msg, size_t len)
{
	if (rc != INBOX_OK && rc != INBOX_ERR_URL && rc != INBOX_ERR_NOMEM) {
		fprintf(stderr, "%s: rc %d (%s)\n", who, rc, src->errmsg);
		abort();
	}
	CHECK(rc != INBOX_ERR_URL ||
	      strncmp(src->errmsg, who, strlen(who)) == 0);
	snprintf(msg, len, "%s", src->errmsg);
}

static int parse_amqp(const char *url, char *msg, size_t len)
{
	inbox_source_options o = options();
	amqp_source *s = calloc(1, sizeof(*s));
	CHECK(s != NULL);
	int rc = inbox__amqp_parse_url(s, url, &o);
	check_rc("amqp: ", rc, &s->base, msg, len);
	if (rc == INBOX_OK)
		CHECK(*s->host && *s->queue && *s->vhost && s->where &&
		      s->port >= 1 && s->port <= 65535 &&
		      strcmp(s->queue, s->retry_queue) != 0);
	inbox__amqp_url_clear(s);
	free(s);
	return rc;
}

static int parse_nats(const char *url, char *msg, size_t len)
{
	inbox_source_options o = options();
	nats_source *ns = calloc(1, sizeof(*ns));
	CHECK(ns != NULL);
	ns->ack_wait_ms = 30000; /* as ns_open */
	ns->ack_timeout_ms = 5000;
	ns->max_deliver = -1;
	int rc = inbox__nats_parse_url(ns, url, &o);
	check_rc("nats: ", rc, &ns->base, msg, len);
	if (rc == INBOX_OK)
		CHECK(ns->nservers > 0 && *ns->stream && *ns->durable &&
		      ns->in_progress_ms >= 0 && ns->max_ack_pending > 0);
	inbox__nats_url_clear(ns);
	free(ns);
	return rc;
}

static int parse_kafka(const char *url, char *msg, size_t len)
{
	inbox_source_options o = options();
	kafka_source *ks = calloc(1, sizeof(*ks));
	CHECK(ks != NULL);
	rd_kafka_conf_t *conf = NULL;
	int timeout = -1;
	int rc = inbox__kafka_parse_url(ks, url, &o, &conf, &timeout);
	check_rc("kafka: ", rc, &ks->base, msg, len);
	CHECK((rc == INBOX_OK) == (conf != NULL));
	if (rc == INBOX_OK) {
		CHECK(*ks->topic && timeout >= 0 && timeout <= 600000);
		rd_kafka_conf_destroy(conf);
	}
	inbox__kafka_url_clear(ks);
	free(ks);
	return rc;
}

static int parse_redis(const char *url, char *msg, size_t len)
{
	redis_source *rs = calloc(1, sizeof(*rs));
	CHECK(rs != NULL);
	rs->db = -1; /* as rs_open */
	rs->claim_idle_ms = 30000;
	rs->timeout_ms = 5000;
	int rc = inbox__redis_parse_url(rs, url, "fuzz.consumer");
	check_rc("redis: ", rc, &rs->base, msg, len);
	if (rc == INBOX_OK)
		CHECK(*rs->host && *rs->stream && *rs->group && rs->label &&
		      rs->port >= 1 && rs->port <= 65535);
	inbox__redis_url_clear(rs);
	free(rs);
	return rc;
}

static int parse_jsonl(const char *url, char *msg, size_t len)
{
	jl_source *s = calloc(1, sizeof(*s));
	CHECK(s != NULL);
	int rc = inbox__jl_parse_url(s, url, "fuzz.consumer");
	check_rc("jsonl: ", rc, &s->base, msg, len);
	if (rc == INBOX_OK)
		CHECK(*s->path && s->label && (s->is_stdin || s->ckpt_tmp));
	inbox__jl_url_clear(s);
	free(s);
	return rc;
}

typedef int (*parse_fn)(const char *url, char *msg, size_t len);

/* ---- what is secret ---------------------------------------------------- */

#define MAXLEN 4096 /* longer inputs skip the span checks */

/* mark[i] = 1 where url[i] is inside a secret span. */
static int mark_span(size_t from, size_t to, void *payload)
{
	char *mark = payload;
	CHECK(from < to);
	memset(mark + from, 1, to - from);
	return 0;
}

static void secret_marks(const char *url, char *mark)
{
	memset(mark, 0, strlen(url) + 1);
	CHECK(inbox__url_secrets(url, mark_span, mark) == 0);
}

/* [from, to) is all marked. */
static void covered(const char *mark, const char *url, const char *from,
                    const char *to, const char *who)
{
	for (const char *p = from; p < to; p++)
		if (!mark[p - url]) {
			fprintf(stderr,
			        "%s's password not hidden: %s (at %d)\n", who,
			        url, (int)(p - url));
			abort();
		}
}

/* url starts with SCHEME "://" (sep): a letter, then letters, digits,
 * '+', '-' or '.'. Anything else is read as a libpq key=value string. */
static int scheme_ok(const char *url, const char *sep)
{
	if (!sep || sep == url)
		return 0;
	for (const char *p = url; p < sep; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (p > url && ((*p >= '0' && *p <= '9') || *p == '+' ||
		                   *p == '-' || *p == '.'))))
			return 0;
	return 1;
}

/* Whatever each client library takes for the password is hidden. The
 * rules are those of their parsers (libpq conninfo_uri_parse_options,
 * cnats natsUrl_Create, rabbitmq-c amqp_parse_url), written here
 * independently of src/base/url.c. */
static void check_coverage(const char *url, const char *mark)
{
	const char *sep = strstr(url, "://");
	if (!scheme_ok(url, sep) || sep[3] == '/' ||
	    strncmp(url, "jsonl:", 6) == 0) /* jsonl:PATH: no user info */
		return;
	const char *auth = sep + 3;
	/* libpq: the first '@' before any '/'; password after the first
	 * ':' before it. */
	const char *a = auth;
	while (*a && *a != '@' && *a != '/')
		a++;
	if (*a == '@') {
		const char *c = memchr(auth, ':', (size_t)(a - auth));
		if (c)
			covered(mark, url, c + 1, a, "libpq");
	}
	/* cnats: the last '@' of the URL; password after the first ':',
	 * or the whole user info as a token. */
	const char *last = strrchr(auth, '@');
	if (last) {
		const char *c = memchr(auth, ':', (size_t)(last - auth));
		if (c)
			covered(mark, url, c + 1, last, "cnats");
		else if (strncmp(url, "nats://", 7) == 0)
			covered(mark, url, auth, last, "cnats token");
	}
	/* rabbitmq-c: HOST ':' PORT '@' means USER ':' PASSWORD '@', each
	 * ended by the first of ":@/?#[]". */
	size_t u = strcspn(auth, ":@/?#[]");
	if (auth[u] == ':') {
		const char *pw = auth + u + 1;
		size_t n = strcspn(pw, ":@/?#[]");
		if (pw[n] == '@')
			covered(mark, url, pw, pw + n, "rabbitmq-c");
	}
}

/* An accepted URL has one user info for every library. */
static void check_unambiguous(const char *url)
{
	const char *why = NULL;
	const char *sep = strstr(url, "://");
	if (inbox__url_check(url, &why) < 0) {
		CHECK(why && strlen(why) > 10 && scheme_ok(url, sep));
		return;
	}
	if (!scheme_ok(url, sep) || sep[3] == '/')
		return;
	const char *auth = sep + 3, *a = auth;
	while (*a && *a != '@' && *a != '/')
		a++;
	const char *libpq = *a == '@' ? a : NULL;
	const char *cnats = strrchr(auth, '@');
	const char *ours = inbox__url_userinfo_end(auth);
	CHECK(libpq == ours && cnats == ours);
	CHECK(!ours || strcspn(auth, "/?#[]") > (size_t)(ours - auth));
}

/* The next letter or digit of the same class: digits and the hex letters
 * a-f, A-F stay hex digits, g-z and G-Z stay non-hex letters. */
static char rotate(char c)
{
	static const char *const classes[] = {"0123456789", "abcdef", "ABCDEF",
	                                      "ghijklmnopqrstuvwxyz",
	                                      "GHIJKLMNOPQRSTUVWXYZ"};
	for (size_t i = 0; i < sizeof(classes) / sizeof(*classes); i++) {
		const char *p = strchr(classes[i], c);
		if (c && p)
			return p[1] ? p[1] : classes[i][0];
	}
	return c;
}

/* url with every letter and digit of its secret spans rotated, except
 * the two characters after a '%'. NULL when nothing changed. */
static char *rotated(const char *url, const char *mark)
{
	size_t n = strlen(url);
	char *r = strdup(url);
	int changed = 0;
	CHECK(r != NULL);
	for (size_t i = 0; i < n; i++) {
		if (url[i] == '%') {
			i += 2;
			continue;
		}
		if (mark[i] && rotate(url[i]) != url[i]) {
			r[i] = rotate(url[i]);
			changed = 1;
		}
	}
	if (!changed) {
		free(r);
		return NULL;
	}
	return r;
}

/* Same result, same message. */
static void check_parser(parse_fn parse, const char *url, const char *url2)
{
	char msg[600], msg2[600];
	int rc = parse(url, msg, sizeof(msg));
	if (!url2)
		return;
	int rc2 = parse(url2, msg2, sizeof(msg2));
	if (rc == rc2 && strcmp(msg, msg2) != 0) {
		fprintf(stderr,
		        "a secret shows:\n  %s\n  -> %s\nand with it changed:\n"
		        "  %s\n  -> %s\n",
		        url, msg, url2, msg2);
		abort();
	}
}

/* The redaction does not depend on the secrets either, and hides them. */
static void check_redaction(const char *url, const char *url2, const char *mark)
{
	char *red = inbox_redact_url(url);
	CHECK(red != NULL);
	size_t n = strlen(url), marked = 0;
	for (size_t i = 0; i < n; i++)
		marked += mark[i] != 0;
	CHECK(marked > 0 || strcmp(red, url) == 0);
	CHECK(strlen(red) <= n - marked + 3 * marked);
	if (url2) {
		char *red2 = inbox_redact_url(url2);
		CHECK(red2 != NULL);
		if (strcmp(red, red2) != 0) {
			fprintf(stderr, "redaction shows a secret: %s -> %s\n",
			        url, red);
			abort();
		}
		free(red2);
	}
	free(red);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *url = malloc(size + 1);
	if (!url)
		return 0;
	memcpy(url, data, size);
	url[size] = '\0';

	check_split(url, 0);
	check_split(url, INBOX__URL_FRAGMENT);
	const char *q = strchr(url, '?');
	check_params(q ? q + 1 : url);
	check_values(url);
	check_unambiguous(url);

	char *url2 = NULL;
	size_t n = strlen(url); /* the input as a C string */
	if (n <= MAXLEN) {
		char mark[MAXLEN + 1], mark2[MAXLEN + 1];
		secret_marks(url, mark);
		check_coverage(url, mark);
		url2 = rotated(url, mark);
		if (url2) { /* the same spans, or nothing to compare */
			secret_marks(url2, mark2);
			if (memcmp(mark, mark2, n) != 0) {
				free(url2);
				url2 = NULL;
			}
		}
		check_redaction(url, url2, mark);
	}
	static const parse_fn parsers[] = {parse_amqp, parse_nats, parse_kafka,
	                                   parse_redis, parse_jsonl};
	for (size_t i = 0; i < sizeof(parsers) / sizeof(*parsers); i++)
		check_parser(parsers[i], url, url2);
	free(url2);
	free(url);
	return 0;
}
