/* Kafka source: URL parsing into a librdkafka configuration. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/url.h"
#include "source/kafka/kafka.h"

/* Properties the source sets itself and refuses to take from the URL. */
static const char *const owned_props[] = {
    "bootstrap.servers",
    "metadata.broker.list",
    "group.id",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "log.queue", /* our log lines are served by poll (kafka_source.c) */
};

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
	if (from_url && inbox__secret_name(name))
		inbox__source_seterr(
		    &u->ks->base, "kafka: invalid value for rdkafka.%s", name);
	else if (from_url)
		inbox__source_seterr(&u->ks->base, "kafka: rdkafka.%s: %s",
		                     name, err);
	else
		inbox__source_seterr(&u->ks->base, "kafka: %s: %s", name, err);
	return INBOX_ERR_URL;
}

/* rdkafka.PROP=VALUE: any property but those the source owns. */
static int pass_through(url_state *u, const char *prop, const char *value)
{
	for (size_t i = 0; i < sizeof(owned_props) / sizeof(*owned_props); i++)
		if (strcmp(prop, owned_props[i]) == 0) {
			inbox__source_seterr(
			    &u->ks->base,
			    "kafka: rdkafka.%s is set by the source "
			    "(use the URL's host list and group=)",
			    prop);
			return INBOX_ERR_URL;
		}
	return set_prop(u, prop, value, 1);
}

/* One query parameter (an inbox__url_param_fn). */
static int apply_param(const char *name, const char *value, void *payload)
{
	url_state *u = payload;
	kafka_source *ks = u->ks;
	int rc;
	if (strcmp(name, "group") == 0) {
		if (!*value) {
			inbox__source_seterr(&ks->base,
			                     "kafka: group must not be empty");
			return INBOX_ERR_URL;
		}
		return inbox__url_set_str(&u->group, value);
	}
	if (strcmp(name, "id_header") == 0) { /* "id_header=": none */
		free(ks->id_header);
		ks->id_header = NULL;
		u->have_id_header = 1;
		return *value ? inbox__url_set_str(&ks->id_header, value)
		              : INBOX_OK;
	}
	if (strcmp(name, "offset_reset") == 0) {
		if (strcmp(value, "earliest") != 0 &&
		    strcmp(value, "latest") != 0) {
			inbox__source_seterr(
			    &ks->base,
			    "kafka: offset_reset must be "
			    "earliest or latest, not \"%.40s\"",
			    value);
			return INBOX_ERR_URL;
		}
		return inbox__url_set_str(&u->offset_reset, value);
	}
	if (strcmp(name, "instance_id") == 0) { /* "instance_id=": none */
		if (*value && !inbox__kafka_valid_instance_id(value)) {
			inbox__source_seterr(
			    &ks->base, "kafka: instance_id must be 1 to 249 "
			               "letters, digits, '.', '_' or '-'");
			return INBOX_ERR_URL;
		}
		free(ks->instance_id);
		ks->instance_id = NULL;
		ks->instance_given = 1;
		return *value ? inbox__url_set_str(&ks->instance_id, value)
		              : INBOX_OK;
	}
	if (strcmp(name, "open_timeout_ms") == 0) {
		int64_t ms;
		rc = inbox__url_duration_param(&ms, &ks->base, "kafka", name,
		                               value, 1, 0, 600000);
		if (rc == INBOX_OK)
			u->open_timeout_ms = (int)ms;
		return rc;
	}
	if (strncmp(name, "rdkafka.", 8) == 0 && name[8])
		return pass_through(u, name + 8, value);
	inbox__source_seterr(&ks->base,
	                     "kafka: unknown URL parameter \"%.60s\" (known: "
	                     "group, id_header, instance_id, offset_reset, "
	                     "open_timeout_ms, rdkafka.<property>)",
	                     name);
	return INBOX_ERR_URL;
}

/* The settings the source imposes (before the URL's rdkafka.*). The
 * prefetch (queued.min.messages, queued.max.messages.kbytes) stays
 * librdkafka's: a partition whose local queue holds queued.min.messages
 * is not fetched again until the broker thread next looks at it (up to a
 * second later), so a small value starves a consumer that drains its
 * queue faster than that (4 x max_batch gave a third of the throughput
 * of bench/sources' plain loop). */
static int base_conf(url_state *u, const char *brokers)
{
	const char *kv[][2] = {
	    {"bootstrap.servers", brokers},
	    {"enable.auto.commit", "false"},
	    {"enable.auto.offset.store", "false"},
	    {"enable.partition.eof", "false"},
	    {"partition.assignment.strategy", "cooperative-sticky"},
	    {"client.id", "libinbox"},
	    /* librdkafka's log lines are served by the consumer poll, on
	     * the polling thread, never from its own threads (kafka_source.c,
	     * log_cb). */
	    {"log.queue", "true"},
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
	inbox__url parts;
	int rc = INBOX_ERR_URL;
	char *brokers = NULL;
	*conf = NULL;
	if (inbox__url_split(&parts, url, "kafka", 0) < 0) {
		inbox__source_seterr(&ks->base,
		                     "kafka: URL must start with kafka://");
		return INBOX_ERR_URL;
	}
	if (inbox__url_refuse_ambiguous(&ks->base, "kafka", url) < 0)
		return INBOX_ERR_URL;
	/* No user info: credentials go in rdkafka.sasl.* parameters. */
	if (!parts.path || parts.userinfo ||
	    !inbox__url_printable(parts.hosts, parts.hosts_len)) {
		inbox__source_seterr(
		    &ks->base, "kafka: expected kafka://HOST:PORT[,HOST:PORT"
		               "...]/TOPIC[?params]");
		return INBOX_ERR_URL;
	}
	if (!valid_topic(parts.path, parts.path_len)) {
		inbox__source_seterr(&ks->base,
		                     "kafka: missing or invalid topic name "
		                     "(letters, digits, '.', '_', '-'; at most "
		                     "249)");
		return INBOX_ERR_URL;
	}
	brokers = strndup(parts.hosts, parts.hosts_len);
	ks->topic = strndup(parts.path, parts.path_len);
	u.conf = rd_kafka_conf_new();
	if (!brokers || !ks->topic || !u.conf) {
		rc = INBOX_ERR_NOMEM;
		goto out;
	}
	rc = base_conf(&u, brokers);
	if (rc == INBOX_OK && parts.query)
		rc = inbox__url_params(&ks->base, "kafka", parts.query,
		                       parts.query_len, INBOX__URL_NEED_EQ,
		                       apply_param, &u);
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

void inbox__kafka_url_clear(kafka_source *ks)
{
	free(ks->topic);
	free(ks->id_header);
	ks->topic = ks->id_header = NULL;
}
