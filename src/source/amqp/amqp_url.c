/* RabbitMQ source: URL parsing (the form is described in amqp_source.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/url.h"
#include "source/amqp/amqp_source.h"

/* The CA bundle of the system (Debian's ca-certificates), used by amqps://
 * without tls_ca: rabbitmq-c loads no default verify paths itself. */
#define AMQP_SYSTEM_CA "/etc/ssl/certs/ca-certificates.crt"

static int int_param(amqp_source *s, const char *name, const char *value,
                     long long min, long long max, int *out)
{
	long long x;
	int rc =
	    inbox__url_int_param(&x, &s->base, "amqp", name, value, min, max);
	if (rc == INBOX_OK)
		*out = (int)x;
	return rc;
}

/* A time: a duration ("30s") or a bare number of `bare_ms` ms; *out in
 * the parameter's own unit (seconds when bare_ms is 1000, else ms). */
static int time_param(amqp_source *s, const char *name, const char *value,
                      int64_t bare_ms, int64_t min_ms, int64_t max_ms, int *out)
{
	int64_t ms;
	int rc = inbox__url_duration_param(&ms, &s->base, "amqp", name, value,
	                                   bare_ms, min_ms, max_ms);
	if (rc == INBOX_OK)
		*out = (int)(bare_ms == 1000 ? (ms + 999) / 1000 : ms);
	return rc;
}

/* A queue or exchange name: 1..255 bytes. */
static int set_name(amqp_source *s, char **dst, const char *name,
                    const char *value)
{
	if (!*value) {
		inbox__source_seterr(&s->base, "amqp: %s must not be empty",
		                     name);
		return INBOX_ERR_URL;
	}
	if (strlen(value) > 255) {
		inbox__source_seterr(&s->base,
		                     "amqp: %s is longer than 255 bytes", name);
		return INBOX_ERR_URL;
	}
	return inbox__url_set_str(dst, value);
}

static int set_retry(amqp_source *s, const char *value)
{
	if (strcmp(value, "ttl") == 0)
		s->retry_mode = AMQP_RETRY_TTL;
	else if (strcmp(value, "requeue") == 0)
		s->retry_mode = AMQP_RETRY_REQUEUE;
	else {
		inbox__source_seterr(&s->base,
		                     "amqp: retry must be ttl or requeue, "
		                     "not \"%.40s\"",
		                     value);
		return INBOX_ERR_URL;
	}
	return INBOX_OK;
}

/* A file the TLS setup reads: it must be readable now (named when not:
 * a path is no secret). */
static int set_file(amqp_source *s, char **dst, const char *name,
                    const char *value)
{
	if (!*value || access(value, R_OK) != 0) {
		inbox__source_seterr(
		    &s->base, "amqp: %s: cannot read \"%.200s\"", name, value);
		return INBOX_ERR_URL;
	}
	return inbox__url_set_str(dst, value);
}

/* tls_* (amqps:// only). */
static int tls_param(amqp_source *s, const char *name, const char *value)
{
	if (!s->tls) {
		inbox__source_seterr(
		    &s->base, "amqp: %.40s is for amqps:// (TLS) URLs", name);
		return INBOX_ERR_URL;
	}
	if (strcmp(name, "tls_ca") == 0)
		return set_file(s, &s->tls_ca, name, value);
	if (strcmp(name, "tls_cert") == 0)
		return set_file(s, &s->tls_cert, name, value);
	if (strcmp(name, "tls_key") == 0)
		return set_file(s, &s->tls_key, name, value);
	if (strcmp(name, "tls_key_password") == 0)
		return inbox__url_set_str(&s->tls_key_pass, value);
	if (strcmp(name, "tls_verify") == 0)
		return int_param(s, name, value, 0, 1, &s->tls_verify);
	inbox__source_seterr(&s->base,
	                     "amqp: unknown TLS parameter \"%.60s\" (known: "
	                     "tls_ca, tls_cert, tls_key, tls_key_password, "
	                     "tls_verify)",
	                     name);
	return INBOX_ERR_URL;
}

/* One query parameter (an inbox__url_param_fn). */
static int apply_param(const char *name, const char *value, void *payload)
{
	amqp_source *s = payload;
	if (strcmp(name, "retry_queue") == 0)
		return set_name(s, &s->retry_queue, name, value);
	if (strcmp(name, "dlx") == 0) { /* "dlx=" (empty): none */
		free(s->dlx);
		s->dlx = NULL;
		return *value ? set_name(s, &s->dlx, name, value) : INBOX_OK;
	}
	if (strcmp(name, "retry") == 0)
		return set_retry(s, value);
	if (strcmp(name, "prefetch") == 0)
		return int_param(s, name, value, 1, 65535, &s->prefetch);
	if (strcmp(name, "declare") == 0)
		return int_param(s, name, value, 0, 1, &s->declare);
	if (strcmp(name, "heartbeat") == 0)
		return time_param(s, name, value, 1000, 0, 65535000,
		                  &s->heartbeat);
	if (strcmp(name, "connect_timeout_ms") == 0)
		return time_param(s, name, value, 1, 1, 600000,
		                  &s->connect_timeout_ms);
	if (strcmp(name, "confirm_timeout_ms") == 0)
		return time_param(s, name, value, 1, 1, 600000,
		                  &s->confirm_timeout_ms);
	if (strncmp(name, "tls_", 4) == 0)
		return tls_param(s, name, value);
	inbox__source_seterr(&s->base,
	                     "amqp: unknown URL parameter \"%.60s\" "
	                     "(known: prefetch, retry, retry_queue, dlx, "
	                     "declare, heartbeat, connect_timeout_ms, "
	                     "confirm_timeout_ms; amqps: tls_ca, tls_cert, "
	                     "tls_key, tls_key_password, tls_verify)",
	                     name);
	return INBOX_ERR_URL;
}

/* [USER[:PASS]@]HOST[:PORT] */
static int parse_authority(amqp_source *s, const inbox__url *u)
{
	int rc;
	if (u->userinfo) {
		rc = inbox__url_userinfo(&s->user, &s->pass, &s->base, "amqp",
		                         u->userinfo, u->userinfo_len);
		if (rc < 0)
			return rc;
	}
	const char *host;
	size_t hlen;
	if (inbox__url_hostport(&host, &hlen, &s->port, u->hosts,
	                        u->hosts_len) < 0 ||
	    !inbox__url_printable(host, hlen) || memchr(host, '%', hlen)) {
		inbox__source_seterr(&s->base,
		                     "amqp: bad host or port in the URL");
		return INBOX_ERR_URL;
	}
	free(s->host);
	s->host = strndup(host, hlen);
	return s->host ? INBOX_OK : INBOX_ERR_NOMEM;
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
		rc = inbox__url_decode_part(&s->vhost, &s->base, "amqp",
		                            "virtual host", p,
		                            (size_t)(slash - p));
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
	rc = inbox__url_decode_part(&s->queue, &s->base, "amqp", "queue name",
	                            p, n);
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
	/* Two batches: the next one is on its way while one is processed. */
	s->prefetch =
	    opts->max_batch > 65535 / 2 ? 65535 : 2 * (int)opts->max_batch;
	if (s->prefetch < 1)
		s->prefetch = 1;
	s->heartbeat = 30;
	s->connect_timeout_ms = 5000;
	s->confirm_timeout_ms = 10000;
	s->tls_verify = 1;
	return INBOX_OK;
}

int inbox__amqp_parse_url(amqp_source *s, const char *url,
                          const inbox_source_options *opts)
{
	inbox__url u;
	int rc = set_defaults(s, opts);
	if (rc < 0)
		return rc;
	s->tls = strncmp(url, "amqps:", 6) == 0;
	if (s->tls)
		s->port = 5671;
	if (inbox__url_split(&u, url, s->tls ? "amqps" : "amqp",
	                     INBOX__URL_FRAGMENT) < 0) {
		inbox__source_seterr(
		    &s->base, "amqp: URL must start with amqp:// or amqps://");
		return INBOX_ERR_URL;
	}
	if (inbox__url_refuse_ambiguous(&s->base, "amqp", url) < 0)
		return INBOX_ERR_URL;
	if (!u.path) {
		inbox__source_seterr(
		    &s->base, "amqp: expected amqp://[USER[:PASSWORD]@]HOST"
		              "[:PORT]/[VHOST/]QUEUE[?params]");
		return INBOX_ERR_URL;
	}
	rc = parse_authority(s, &u);
	if (rc < 0)
		return rc;
	if (u.fragment) {
		inbox__source_seterr(&s->base, "amqp: no '#' fragment allowed");
		return INBOX_ERR_URL;
	}
	rc = parse_path(s, u.path, u.path_len);
	if (rc == INBOX_OK && u.query)
		rc = inbox__url_params(&s->base, "amqp", u.query, u.query_len,
		                       INBOX__URL_NEED_EQ, apply_param, s);
	if (rc < 0)
		return rc;
	if (!s->tls_cert != !s->tls_key) {
		inbox__source_seterr(&s->base, "amqp: tls_cert and tls_key go "
		                               "together (a client certificate "
		                               "and its key)");
		return INBOX_ERR_URL;
	}
	if (s->tls && !s->tls_ca && s->tls_verify &&
	    access(AMQP_SYSTEM_CA, R_OK) == 0)
		rc = inbox__url_set_str(&s->tls_ca, AMQP_SYSTEM_CA);
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
	return INBOX_OK;
}

void inbox__amqp_url_clear(amqp_source *s)
{
	free(s->host);
	free(s->user);
	if (s->pass)
		memset(s->pass, 0, strlen(s->pass));
	free(s->pass);
	if (s->tls_key_pass)
		memset(s->tls_key_pass, 0, strlen(s->tls_key_pass));
	free(s->tls_key_pass);
	free(s->tls_ca);
	free(s->tls_cert);
	free(s->tls_key);
	s->tls_key_pass = s->tls_ca = s->tls_cert = s->tls_key = NULL;
	free(s->vhost);
	free(s->queue);
	free(s->retry_queue);
	free(s->dlx);
	free(s->where);
	s->host = s->user = s->pass = s->vhost = s->queue = NULL;
	s->retry_queue = s->dlx = s->where = NULL;
}
