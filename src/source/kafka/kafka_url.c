/* Kafka source: URL parsing into a librdkafka configuration. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source/kafka/kafka.h"

#define SCHEME "kafka://"

/* Properties the source sets itself and refuses to take from the URL. */
static const char *const owned_props[] = {
    "bootstrap.servers",  "metadata.broker.list",     "group.id",
    "enable.auto.commit", "enable.auto.offset.store",
};

/* Property names whose values must never be echoed. */
static int secret_prop(const char *name)
{
	static const char *const words[] = {"password",  "secret", "key",
	                                    "token",     "jaas",   "config",
	                                    "credential"};
	for (size_t i = 0; i < sizeof(words) / sizeof(*words); i++)
		if (strstr(name, words[i]))
			return 1;
	return 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Percent-decode [s, s+n) into a new string; NULL on a bad escape (or
 * NOMEM: *nomem set). */
static char *pct_decode(const char *s, size_t n, int *nomem)
{
	char *out = malloc(n + 1);
	size_t j = 0;
	if (!out) {
		*nomem = 1;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			out[j++] = s[i];
			continue;
		}
		int hi = i + 1 < n ? hexval(s[i + 1]) : -1;
		int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
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

static int valid_topic(const char *t, size_t n)
{
	if (n == 0 || n > 249)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)t[i];
		if (!isalnum(c) && c != '.' && c != '_' && c != '-')
			return 0;
	}
	return !(n == 1 && t[0] == '.') && !(n == 2 && !strncmp(t, "..", 2));
}

static int valid_brokers(const char *b, size_t n)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)b[i];
		/* no user info, no spaces, no controls */
		if (c <= ' ' || c == '@' || c >= 0x7f)
			return 0;
	}
	return 1;
}

typedef struct url_state {
	kafka_source *ks;
	rd_kafka_conf_t *conf;
	char *group;
	char *offset_reset;
	int open_timeout_ms;
	int have_id_header;
} url_state;

static int set_prop(url_state *u, const char *name, const char *value,
                    int from_url)
{
	char err[256];
	if (rd_kafka_conf_set(u->conf, name, value, err, sizeof(err)) ==
	    RD_KAFKA_CONF_OK)
		return INBOX_OK;
	if (from_url && secret_prop(name))
		inbox__source_seterr(
		    &u->ks->base, "kafka: invalid value for rdkafka.%s", name);
	else if (from_url)
		inbox__source_seterr(&u->ks->base, "kafka: rdkafka.%s: %s",
		                     name, err);
	else
		inbox__source_seterr(&u->ks->base, "kafka: %s: %s", name, err);
	return INBOX_ERR_URL;
}

/* One query parameter name=value (both decoded). */
static int apply_param(url_state *u, const char *name, char *value)
{
	kafka_source *ks = u->ks;
	if (strcmp(name, "group") == 0) {
		if (!*value) {
			inbox__source_seterr(&ks->base,
			                     "kafka: group must not be empty");
			free(value);
			return INBOX_ERR_URL;
		}
		free(u->group);
		u->group = value;
		return INBOX_OK;
	}
	if (strcmp(name, "id_header") == 0) {
		free(ks->id_header);
		ks->id_header = *value ? value : NULL;
		if (!*value)
			free(value);
		u->have_id_header = 1;
		return INBOX_OK;
	}
	if (strcmp(name, "offset_reset") == 0) {
		if (strcmp(value, "earliest") != 0 &&
		    strcmp(value, "latest") != 0) {
			inbox__source_seterr(
			    &ks->base,
			    "kafka: offset_reset must be "
			    "earliest or latest, not \"%.40s\"",
			    value);
			free(value);
			return INBOX_ERR_URL;
		}
		free(u->offset_reset);
		u->offset_reset = value;
		return INBOX_OK;
	}
	if (strcmp(name, "open_timeout_ms") == 0) {
		char *end;
		long v = strtol(value, &end, 10);
		if (!*value || *end || v < 0 || v > 600000) {
			inbox__source_seterr(&ks->base,
			                     "kafka: open_timeout_ms must be "
			                     "0..600000");
			free(value);
			return INBOX_ERR_URL;
		}
		u->open_timeout_ms = (int)v;
		free(value);
		return INBOX_OK;
	}
	if (strncmp(name, "rdkafka.", 8) == 0 && name[8]) {
		const char *prop = name + 8;
		for (size_t i = 0;
		     i < sizeof(owned_props) / sizeof(*owned_props); i++)
			if (strcmp(prop, owned_props[i]) == 0) {
				inbox__source_seterr(
				    &ks->base,
				    "kafka: rdkafka.%s is set by the source "
				    "(use the URL's host list and group=)",
				    prop);
				free(value);
				return INBOX_ERR_URL;
			}
		int rc = set_prop(u, prop, value, 1);
		free(value);
		return rc;
	}
	inbox__source_seterr(&ks->base,
	                     "kafka: unknown URL parameter \"%.60s\" (known: "
	                     "group, id_header, offset_reset, open_timeout_ms, "
	                     "rdkafka.<property>)",
	                     name);
	free(value);
	return INBOX_ERR_URL;
}

/* Parse "a=b&c=d..." (the part after '?'). */
static int parse_query(url_state *u, const char *q)
{
	while (*q) {
		const char *amp = strchr(q, '&');
		size_t len = amp ? (size_t)(amp - q) : strlen(q);
		const char *eq = memchr(q, '=', len);
		int nomem = 0;
		if (len == 0) {
			q = amp ? amp + 1 : q + len;
			continue;
		}
		if (!eq) {
			inbox__source_seterr(&u->ks->base,
			                     "kafka: URL parameter \"%.*s\" "
			                     "lacks '='",
			                     (int)(len > 60 ? 60 : len), q);
			return INBOX_ERR_URL;
		}
		char *name = pct_decode(q, (size_t)(eq - q), &nomem);
		char *value =
		    name
		        ? pct_decode(eq + 1, len - (size_t)(eq - q) - 1, &nomem)
		        : NULL;
		if (!name || !value) {
			free(name);
			free(value);
			if (nomem)
				return INBOX_ERR_NOMEM;
			inbox__source_seterr(&u->ks->base,
			                     "kafka: bad %%-escape in URL "
			                     "parameter");
			return INBOX_ERR_URL;
		}
		int rc = apply_param(u, name, value); /* takes value */
		free(name);
		if (rc < 0)
			return rc;
		q = amp ? amp + 1 : q + len;
	}
	return INBOX_OK;
}

/* The settings the source imposes (before the URL's rdkafka.*). */
static int base_conf(url_state *u, const char *brokers,
                     const inbox_source_options *opts)
{
	char num[32];
	size_t qmin = opts->max_batch * 4;
	if (qmin < 100)
		qmin = 100;
	if (qmin > 100000)
		qmin = 100000;
	snprintf(num, sizeof(num), "%zu", qmin);
	const char *kv[][2] = {
	    {"bootstrap.servers", brokers},
	    {"enable.auto.commit", "false"},
	    {"enable.auto.offset.store", "false"},
	    {"enable.partition.eof", "false"},
	    {"partition.assignment.strategy", "cooperative-sticky"},
	    {"queued.min.messages", num},
	    {"client.id", "libinbox"},
	};
	for (size_t i = 0; i < sizeof(kv) / sizeof(*kv); i++) {
		int rc = set_prop(u, kv[i][0], kv[i][1], 0);
		if (rc < 0)
			return rc;
	}
	return INBOX_OK;
}

static int finish_conf(url_state *u, const inbox_source_options *opts)
{
	int rc =
	    set_prop(u, "group.id", u->group ? u->group : opts->consumer, 0);
	if (rc == INBOX_OK)
		rc =
		    set_prop(u, "auto.offset.reset",
		             u->offset_reset ? u->offset_reset : "earliest", 0);
	if (rc == INBOX_OK && !u->have_id_header) {
		u->ks->id_header = strdup("message-id");
		if (!u->ks->id_header)
			rc = INBOX_ERR_NOMEM;
	}
	return rc;
}

int inbox__kafka_parse_url(kafka_source *ks, const char *url,
                           const inbox_source_options *opts,
                           rd_kafka_conf_t **conf, int *open_timeout_ms)
{
	url_state u = {ks, NULL, NULL, NULL, 10000, 0};
	int rc = INBOX_ERR_URL;
	char *brokers = NULL;
	*conf = NULL;
	if (strncmp(url, SCHEME, strlen(SCHEME)) != 0) {
		inbox__source_seterr(&ks->base,
		                     "kafka: URL must start with kafka://");
		return INBOX_ERR_URL;
	}
	const char *hosts = url + strlen(SCHEME);
	const char *slash = strchr(hosts, '/');
	const char *qmark = strchr(hosts, '?');
	if (!slash || (qmark && qmark < slash) ||
	    !valid_brokers(hosts, (size_t)(slash - hosts))) {
		inbox__source_seterr(
		    &ks->base, "kafka: expected kafka://HOST:PORT[,HOST:PORT"
		               "...]/TOPIC[?params]");
		return INBOX_ERR_URL;
	}
	const char *topic = slash + 1;
	size_t tlen = qmark ? (size_t)(qmark - topic) : strlen(topic);
	if (!valid_topic(topic, tlen)) {
		inbox__source_seterr(&ks->base,
		                     "kafka: missing or invalid topic name "
		                     "(letters, digits, '.', '_', '-'; at most "
		                     "249)");
		return INBOX_ERR_URL;
	}
	brokers = strndup(hosts, (size_t)(slash - hosts));
	ks->topic = strndup(topic, tlen);
	u.conf = rd_kafka_conf_new();
	if (!brokers || !ks->topic || !u.conf) {
		rc = INBOX_ERR_NOMEM;
		goto out;
	}
	rc = base_conf(&u, brokers, opts);
	if (rc == INBOX_OK && qmark)
		rc = parse_query(&u, qmark + 1);
	if (rc == INBOX_OK)
		rc = finish_conf(&u, opts);
out:
	free(brokers);
	free(u.group);
	free(u.offset_reset);
	if (rc == INBOX_OK) {
		*conf = u.conf;
		*open_timeout_ms = u.open_timeout_ms;
	} else if (u.conf) {
		rd_kafka_conf_destroy(u.conf);
	}
	return rc;
}
