/* NATS source: URL parsing (the syntax is described in nats_source.h). */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/url.h"
#include "source/nats/nats_source.h"

#define SCHEME "nats://"

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

/* ack_wait, in_progress_interval or ack_timeout: a duration with a
 * unit; only in_progress_interval may be 0. */
static int set_duration(nats_source *ns, const char *name, const char *value)
{
	int64_t d;
	if (inbox__url_duration_ms(&d, value, 1) < 0 ||
	    (d == 0 && strcmp(name, "in_progress_interval") != 0)) {
		inbox__source_seterr(&ns->base,
		                     "nats: %s must be a positive duration "
		                     "with a unit (500ms, 30s, 2m)",
		                     name);
		return INBOX_ERR_URL;
	}
	if (name[0] == 'i')
		ns->in_progress_ms = d;
	else if (strcmp(name, "ack_wait") == 0)
		ns->ack_wait_ms = d;
	else
		ns->ack_timeout_ms = d;
	return INBOX_OK;
}

/* tls=, tls_ca=, tls_cert=, tls_key=, tls_hostname=, tls_verify=: any
 * of them turns TLS on. A file must be readable now (named when not: a
 * path is no secret). */
static int tls_param(nats_source *ns, const char *name, const char *value)
{
	char **file = NULL;
	if (strcmp(name, "tls") == 0 || strcmp(name, "tls_verify") == 0) {
		if (strcmp(value, "0") != 0 && strcmp(value, "1") != 0) {
			inbox__source_seterr(&ns->base,
			                     "nats: %s must be 0 or 1", name);
			return INBOX_ERR_URL;
		}
		if (name[3] == '\0')
			ns->tls = value[0] == '1';
		else
			ns->tls_verify = value[0] == '1';
		return INBOX_OK;
	}
	if (strcmp(name, "tls_hostname") == 0) {
		if (!inbox__url_printable(value, strlen(value)))
			return bad(ns, "tls_hostname must be a host name");
		return inbox__url_set_str(&ns->tls_hostname, value);
	}
	if (strcmp(name, "tls_ca") == 0)
		file = &ns->tls_ca;
	else if (strcmp(name, "tls_cert") == 0)
		file = &ns->tls_cert;
	else if (strcmp(name, "tls_key") == 0)
		file = &ns->tls_key;
	if (!file) {
		inbox__source_seterr(&ns->base,
		                     "nats: unknown TLS parameter \"%.60s\" "
		                     "(known: tls, tls_ca, tls_cert, tls_key, "
		                     "tls_hostname, tls_verify)",
		                     name);
		return INBOX_ERR_URL;
	}
	if (!*value || access(value, R_OK) != 0) {
		inbox__source_seterr(
		    &ns->base, "nats: %s: cannot read \"%.200s\"", name, value);
		return INBOX_ERR_URL;
	}
	return inbox__url_set_str(file, value);
}

/* One query parameter (an inbox__url_param_fn). */
static int apply_param(const char *name, const char *value, void *payload)
{
	nats_source *ns = payload;
	long long x;
	if (strcmp(name, "durable") == 0)
		return valid_name(value)
		           ? inbox__url_set_str(&ns->durable, value)
		           : bad(ns, "durable must be 1-255 letters, digits, "
		                     "'_' or '-'");
	if (strcmp(name, "subject") == 0)
		return valid_subject(value)
		           ? inbox__url_set_str(&ns->subject, value)
		           : bad(ns, "invalid subject filter");
	if (strcmp(name, "create") == 0) {
		if (strcmp(value, "0") != 0 && strcmp(value, "1") != 0)
			return bad(ns, "create must be 0 or 1");
		ns->create = value[0] == '1';
		return INBOX_OK;
	}
	if (strcmp(name, "ack_wait") == 0 ||
	    strcmp(name, "in_progress_interval") == 0 ||
	    strcmp(name, "ack_timeout") == 0)
		return set_duration(ns, name, value);
	if (strcmp(name, "max_deliver") == 0) {
		if (inbox__url_int(&x, value, strlen(value), -1, INT_MAX) < 0 ||
		    x == 0)
			return bad(ns, "max_deliver must be -1 (unlimited) or "
			               "a positive number");
		ns->max_deliver = x;
		return INBOX_OK;
	}
	if (strcmp(name, "max_ack_pending") == 0) {
		if (inbox__url_int(&x, value, strlen(value), 1, INT_MAX) < 0)
			return bad(ns,
			           "max_ack_pending must be a positive number");
		ns->max_ack_pending = x;
		return INBOX_OK;
	}
	if (strncmp(name, "tls", 3) == 0 && (!name[3] || name[3] == '_'))
		return tls_param(ns, name, value);
	inbox__source_seterr(&ns->base,
	                     "nats: unknown URL parameter \"%.60s\" (known: "
	                     "durable, subject, create, ack_wait, "
	                     "max_deliver, max_ack_pending, "
	                     "in_progress_interval, ack_timeout, tls, "
	                     "tls_ca, tls_cert, tls_key, tls_hostname, "
	                     "tls_verify)",
	                     name);
	return INBOX_ERR_URL;
}

/* "user:pass" or "token" (before the '@'). */
static int parse_userinfo(nats_source *ns, const char *s, size_t n)
{
	if (!memchr(s, ':', n))
		return inbox__url_decode_part(&ns->token, &ns->base, "nats",
		                              "token", s, n);
	return inbox__url_userinfo(&ns->user, &ns->password, &ns->base, "nats",
	                           s, n);
}

/* "host:port,host:port" -> servers[] ("nats://host:port") and hosts. */
static int parse_hosts(nats_source *ns, const char *s, size_t n)
{
	if (n == 0)
		return bad(ns,
		           "no server in the URL (nats://HOST:PORT/STREAM)");
	if (!inbox__url_printable(s, n))
		return bad(ns, "invalid server list");
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
	inbox__url u;
	if (inbox__url_split(&u, url, "nats", INBOX__URL_FRAGMENT) < 0)
		return bad(ns, "URL must start with " SCHEME);
	if (inbox__url_refuse_ambiguous(&ns->base, "nats", url) < 0)
		return INBOX_ERR_URL;
	if (!u.path)
		return bad(ns,
		           "no stream in the URL (nats://HOST:PORT/STREAM)");
	int rc = u.userinfo ? parse_userinfo(ns, u.userinfo, u.userinfo_len)
	                    : INBOX_OK;
	if (rc == INBOX_OK)
		rc = parse_hosts(ns, u.hosts, u.hosts_len);
	if (rc == INBOX_OK)
		rc = inbox__url_decode_part(&ns->stream, &ns->base, "nats",
		                            "stream", u.path, u.path_len);
	if (rc < 0)
		return rc;
	if (!valid_name(ns->stream))
		return bad(ns, "the stream name must be 1-255 letters, digits, "
		               "'_' or '-'");
	ns->in_progress_ms = -1; /* not given */
	ns->tls = -1;
	ns->tls_verify = 1;
	if (u.query) {
		rc = inbox__url_params(&ns->base, "nats", u.query, u.query_len,
		                       INBOX__URL_NEED_EQ, apply_param, ns);
		if (rc < 0)
			return rc;
	}
	int tls_any = ns->tls_ca || ns->tls_cert || ns->tls_key ||
	              ns->tls_hostname || !ns->tls_verify;
	if (ns->tls == 0 && tls_any)
		return bad(ns, "tls=0 with tls_* parameters");
	ns->tls = ns->tls == 1 || tls_any;
	if (!ns->tls_cert != !ns->tls_key)
		return bad(ns, "tls_cert and tls_key go together (a client "
		               "certificate and its key)");
	if (!ns->durable) {
		rc = default_durable(ns, opts->consumer);
		if (rc < 0)
			return rc;
	}
	if (ns->in_progress_ms < 0)
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

void inbox__nats_url_clear(nats_source *ns)
{
	for (int i = 0; i < ns->nservers; i++)
		free(ns->servers[i]);
	free(ns->servers);
	free(ns->hosts);
	free(ns->user);
	free(ns->password);
	free(ns->token);
	free(ns->stream);
	free(ns->durable);
	free(ns->subject);
	free(ns->tls_ca);
	free(ns->tls_cert);
	free(ns->tls_key);
	free(ns->tls_hostname);
	ns->tls_ca = ns->tls_cert = ns->tls_key = ns->tls_hostname = NULL;
	ns->servers = NULL;
	ns->nservers = 0;
	ns->hosts = ns->user = ns->password = ns->token = NULL;
	ns->stream = ns->durable = ns->subject = NULL;
}

natsStatus inbox__nats_tls_options(nats_source *ns)
{
	natsStatus s = natsOptions_SetSecure(ns->nopts, true);
	if (s == NATS_OK && ns->tls_ca)
		s = natsOptions_LoadCATrustedCertificates(ns->nopts,
		                                          ns->tls_ca);
	if (s == NATS_OK && ns->tls_cert)
		s = natsOptions_LoadCertificatesChain(ns->nopts, ns->tls_cert,
		                                      ns->tls_key);
	if (s == NATS_OK && ns->tls_hostname)
		s = natsOptions_SetExpectedHostname(ns->nopts,
		                                    ns->tls_hostname);
	if (s == NATS_OK && !ns->tls_verify)
		s = natsOptions_SkipServerVerification(ns->nopts, true);
	return s;
}
