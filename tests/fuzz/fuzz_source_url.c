/*
 * Fuzz target: the source URL parsers. The input, as a C string, goes to
 * the shared pieces of src/core/url.c and to the parse-only entry point of
 * every source (src/source/NAME/NAME_url.c). Checked:
 *   - a split gives the URL back: SCHEME "://" [USERINFO "@"] HOSTS
 *     ["/" PATH] ["?" QUERY] ["#" FRAGMENT], its user info ending where the
 *     documented rule (the last '@' before the first '/' after "//", as in
 *     inbox_redact_url) says, computed here independently;
 *   - parameters, integers, durations and host:port stay in their bounds;
 *   - a parser returns INBOX_OK, INBOX_ERR_URL with a message, or NOMEM,
 *     and its url_clear frees all it filled in (LeakSanitizer);
 *   - a refusal never shows the password: when the URL with its password
 *     changed gives the changed password in its message too, the message
 *     echoes it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/url.h"
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

/* The password span by the documented rule; 0 if there is none. */
static int password_span(const char *url, size_t *from, size_t *to)
{
	const char *sep = strstr(url, "://");
	const char *at = sep ? rule_at(sep + 3) : NULL;
	if (!at)
		return 0;
	const char *colon = memchr(sep + 3, ':', (size_t)(at - sep - 3));
	if (!colon || colon + 1 == at)
		return 0;
	*from = (size_t)(colon + 1 - url);
	*to = (size_t)(at - url);
	return 1;
}

/* Another letter or digit for each letter or digit. */
static char rotate(char c)
{
	if (c >= 'a' && c <= 'z')
		return c == 'z' ? 'a' : c + 1;
	if (c >= 'A' && c <= 'Z')
		return c == 'Z' ? 'A' : c + 1;
	if (c >= '0' && c <= '9')
		return c == '9' ? '0' : c + 1;
	return c;
}

static int occurs_once(const char *hay, const char *needle)
{
	const char *p = strstr(hay, needle);
	return p && !strstr(p + 1, needle);
}

/* Run parse on url. For a source that takes a password (scheme not
 * NULL), where the URL has one (at least 3 characters, one a letter or
 * digit, no '%', once in the URL), run it again with the password
 * changed: two messages that each hold their own password give it away. */
static void check_parser(parse_fn parse, const char *scheme, const char *url)
{
	char msg[600], msg2[600];
	int rc = parse(url, msg, sizeof(msg));
	size_t from, to;
	if (rc != INBOX_ERR_URL || !scheme ||
	    strncmp(url, scheme, strlen(scheme)) != 0 ||
	    !password_span(url, &from, &to) || to - from < 3)
		return;
	size_t n = to - from;
	char *pw = strndup(url + from, n), *url2 = strdup(url);
	CHECK(pw && url2);
	int alnum = 0;
	for (size_t i = 0; i < n; i++) {
		url2[from + i] = rotate(url[from + i]);
		alnum |= url2[from + i] != url[from + i];
	}
	if (alnum && !strchr(pw, '%') && occurs_once(url, pw)) {
		char *pw2 = strndup(url2 + from, n);
		CHECK(pw2 != NULL);
		parse(url2, msg2, sizeof(msg2));
		if (strstr(msg, pw) && strstr(msg2, pw2)) {
			fprintf(stderr, "password shown: %s -> %s\n", url, msg);
			abort();
		}
		free(pw2);
	}
	free(pw);
	free(url2);
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

	static const struct {
		parse_fn parse;
		const char *scheme; /* with user info */
	} parsers[] = {{parse_amqp, "amqp://"},
	               {parse_nats, "nats://"},
	               {parse_kafka, NULL},
	               {parse_redis, "redis://"},
	               {parse_jsonl, NULL}};
	for (size_t i = 0; i < sizeof(parsers) / sizeof(*parsers); i++)
		check_parser(parsers[i].parse, parsers[i].scheme, url);
	free(url);
	return 0;
}
