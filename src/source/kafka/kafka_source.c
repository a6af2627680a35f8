/*
 * Kafka source: open/close and the vtable. Polling is in kafka_poll.c,
 * settling in kafka_settle.c; see kafka.h for the behaviour.
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "base/secret.h"
#include "source/kafka/kafka.h"

int inbox__kafka_poll(inbox_source *src, inbox_delivery *out, size_t max,
                      size_t *n, int timeout_ms, int *eof);
int inbox__kafka_settle(inbox_source *src, const inbox_result *res, size_t n);
void inbox__kafka_drop_batch(kafka_source *ks);

/* Served by rd_kafka_consumer_poll() (the main queue is forwarded to the
 * consumer queue), so it runs on the polling thread. */
static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	kafka_source *ks = opaque;
	(void)rk;
	if (err == RD_KAFKA_RESP_ERR__FATAL)
		inbox__kafka_note_fatal(ks);
	else
		inbox__source_seterr(
		    &ks->base, "kafka: %s: %s",
		    rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
	ks->error_seen = 1;
}

/* librdkafka's own log lines (without a log_cb it prints them on stderr)
 * become log lines of ours, scrubbed of the URL's secrets. With log.queue
 * (kafka_url.c) they wait in the main queue and are served by
 * rd_kafka_consumer_poll() or rd_kafka_consumer_close(), so this runs on
 * the polling thread while the source is alive, like error_cb, and a handle
 * left to the process (kafka.h, "Closing") never calls it again.
 * Syslog levels: 0-2 are fatal (error); 3, an error librdkafka retries by
 * itself (a broker connection refused or lost), and 4 are warnings — an
 * infrastructure fault the source rides out, reported in errmsg too. */
static void log_cb(const rd_kafka_t *rk, int level, const char *fac,
                   const char *buf)
{
	int l = level <= 2   ? INBOX_LOG_ERROR
	        : level <= 4 ? INBOX_LOG_WARN
	        : level <= 6 ? INBOX_LOG_INFO
	                     : INBOX_LOG_DEBUG;
	if (!inbox__log_enabled(l))
		return;
	const kafka_source *ks = rd_kafka_opaque(rk);
	char msg[1024];
	snprintf(msg, sizeof(msg), "%s", buf ? buf : "");
	inbox__secrets_scrub(ks ? ks->log_secrets : NULL, msg, sizeof(msg),
	                     buf && strlen(buf) >= sizeof(msg));
	inbox__log(l, ks ? ks->log_consumer : NULL,
	           "\"event\":\"kafka_log\",\"syslog_level\":%d,"
	           "\"facility\":\"%s\",\"client\":\"%s\",\"message\":\"%s\"",
	           level, inbox__log_escape(fac ? fac : ""),
	           inbox__log_escape(rd_kafka_name(rk)),
	           inbox__log_escape(msg));
}

static void commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
	kafka_source *ks = opaque;
	(void)rk;
	inbox__kafka_commit_result(ks, err, offsets);
	if (err == RD_KAFKA_RESP_ERR_NO_ERROR ||
	    err == RD_KAFKA_RESP_ERR__NO_OFFSET)
		return;
	/* Committed again by the next poll; at worst a redelivery follows,
	 * which the inbox drops. */
	inbox__source_seterr(&ks->base,
	                     "kafka: offset commit failed: %s (%d partitions)",
	                     rd_kafka_err2str(err), offsets ? offsets->cnt : 0);
}

/* Wait for a broker to answer a metadata request. */
static int check_connect(kafka_source *ks, int timeout_ms)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_resp_err_t err =
	    rd_kafka_metadata(ks->rk, 0, NULL, &md, timeout_ms);
	if (md)
		rd_kafka_metadata_destroy(md);
	if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
		return INBOX_OK;
	inbox__source_seterr(&ks->base,
	                     "kafka: no broker answered within %d ms: %s",
	                     timeout_ms, rd_kafka_err2str(err));
	return INBOX_ERR_CONNECT;
}

static int subscribe(kafka_source *ks)
{
	rd_kafka_topic_partition_list_t *t =
	    rd_kafka_topic_partition_list_new(1);
	if (!t)
		return INBOX_ERR_NOMEM;
	rd_kafka_topic_partition_list_add(t, ks->topic, RD_KAFKA_PARTITION_UA);
	rd_kafka_resp_err_t err = rd_kafka_subscribe(ks->rk, t);
	rd_kafka_topic_partition_list_destroy(t);
	if (err) {
		inbox__source_seterr(&ks->base, "kafka: subscribe to %s: %s",
		                     ks->topic, rd_kafka_err2str(err));
		return INBOX_ERR_SOURCE;
	}
	return INBOX_OK;
}

/* Open's first half: the handle, its URL parsed into *conf (the URL's
 * rdkafka.* properties each checked by librdkafka as it is set), no
 * client made. *conf is the caller's on success. */
static int prepare(inbox_source **out, const char *url,
                   const inbox_source_options *opts, rd_kafka_conf_t **conf,
                   int *open_timeout_ms)
{
	kafka_source *ks = calloc(1, sizeof(*ks));
	*conf = NULL;
	if (!ks)
		return INBOX_ERR_NOMEM;
	*out = &ks->base;
	ks->member_name_fd = -1;
	ks->retry_delay_ms = opts->retry_delay_ms;
	ks->max_payload = opts->max_payload;
	ks->slots = calloc(opts->max_batch, sizeof(*ks->slots));
	ks->sparts = calloc(opts->max_batch, sizeof(*ks->sparts));
	if (!ks->slots || !ks->sparts)
		return INBOX_ERR_NOMEM; /* close() must not walk NULL slots */
	ks->nslots = opts->max_batch;
	ks->log_consumer = opts->consumer;
	if (inbox__secrets_add_url(&ks->log_secrets, url) < 0)
		return INBOX_ERR_NOMEM;
	return inbox__kafka_parse_url(ks, url, opts, conf, open_timeout_ms);
}

static int kafka_check(inbox_source **out, const char *url,
                       const inbox_source_options *opts)
{
	rd_kafka_conf_t *conf;
	int open_timeout_ms;
	int rc = prepare(out, url, opts, &conf, &open_timeout_ms);
	if (conf)
		rd_kafka_conf_destroy(conf);
	return rc;
}

static int kafka_open(inbox_source **out, const char *url,
                      const inbox_source_options *opts)
{
	rd_kafka_conf_t *conf;
	int open_timeout_ms = 0;
	char err[512];
	int rc = prepare(out, url, opts, &conf, &open_timeout_ms);
	if (rc < 0)
		return rc;
	kafka_source *ks = (kafka_source *)*out;
	if ((rc = inbox__kafka_member_setup(ks, conf, opts->consumer)) < 0) {
		rd_kafka_conf_destroy(conf);
		return rc;
	}
	rd_kafka_conf_set_opaque(conf, ks);
	rd_kafka_conf_set_log_cb(conf, log_cb);
	rd_kafka_conf_set_rebalance_cb(conf, inbox__kafka_rebalance_cb);
	rd_kafka_conf_set_error_cb(conf, error_cb);
	rd_kafka_conf_set_offset_commit_cb(conf, commit_cb);
	ks->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!ks->rk) {
		/* conf is still ours on failure */
		rd_kafka_conf_destroy(conf);
		inbox__source_seterr(&ks->base, "kafka: %s", err);
		return INBOX_ERR_URL;
	}
	rd_kafka_poll_set_consumer(ks->rk);
	/* NULL: the main queue, which now leads to the consumer's. */
	rd_kafka_resp_err_t lerr = rd_kafka_set_log_queue(ks->rk, NULL);
	if (lerr) {
		inbox__source_seterr(&ks->base, "kafka: log queue: %s",
		                     rd_kafka_err2str(lerr));
		return INBOX_ERR_SOURCE;
	}
	if (open_timeout_ms > 0 &&
	    (rc = check_connect(ks, open_timeout_ms)) < 0)
		return rc;
	return subscribe(ks);
}

static void kafka_close(inbox_source *src)
{
	kafka_source *ks = (kafka_source *)src;
	if (ks->rk) {
		/* Whatever was polled and not settled is redelivered. */
		inbox__kafka_drop_batch(ks);
		inbox__kafka_commit_settled(ks, NULL);
		ks->closing = 1;
		int would_abort = inbox__kafka_destroy_would_abort(ks);
		rd_kafka_consumer_close(ks->rk);
		/* See kafka.h, "Closing": left to the process rather than
		 * abort it (unless close() served a first assignment). */
		if (!would_abort || ks->assigned_once)
			rd_kafka_destroy(ks->rk);
		else
			/* Its idle threads would queue log lines nobody
			 * serves any more. */
			rd_kafka_set_log_level(ks->rk, 0);
	}
	inbox__kafka_member_release(ks);
	for (size_t i = 0; i < ks->nslots; i++)
		inbox__buf_free(&ks->slots[i].text);
	free(ks->slots);
	free(ks->sparts);
	for (size_t p = 0; p < ks->nparts; p++)
		free(ks->parts[p].seen);
	free(ks->parts);
	inbox__kafka_url_clear(ks);
	inbox__secrets_free(ks->log_secrets);
	free(ks);
}

const inbox_source_vtable inbox__kafka_source = {
    INBOX_SOURCE_VTABLE_VERSION,
    "kafka",
    kafka_open,
    kafka_close,
    inbox__kafka_poll,
    inbox__kafka_settle,
    inbox__kafka_lag,
    .client_version = inbox__kafka_client_version,
    .check = kafka_check,
};
