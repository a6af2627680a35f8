/*
 * The plain Kafka loop (librdkafka): a consumer-group member (auto commit
 * and auto offset store off), rd_kafka_consume_batch_queue of BATCH, the
 * batch through libpq, then the batch's offsets stored and committed
 * asynchronously. PS_KAFKA_PROPS="name=value&..." adds properties (the
 * bench's short session timeouts for the mock cluster).
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plain_sources.h"
#include "workload.h"

static int set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
	char err[256];
	if (rd_kafka_conf_set(conf, k, v, err, sizeof(err)) == RD_KAFKA_CONF_OK)
		return 0;
	fprintf(stderr, "plain_sources: kafka %s: %s\n", k, err);
	return -1;
}

static int set_extra(rd_kafka_conf_t *conf)
{
	const char *e = getenv("PS_KAFKA_PROPS");
	if (!e || !*e)
		return 0;
	char *copy = strdup(e), *save = NULL;
	int rc = 0;
	for (char *kv = strtok_r(copy, "&", &save); kv && rc == 0;
	     kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq)
			continue;
		*eq = '\0';
		rc = set(conf, kv, eq + 1);
	}
	free(copy);
	return rc;
}

int ps_kafka_load(const char *boot, const char *topic, long n)
{
	char err[256];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	if (set(conf, "bootstrap.servers", boot) ||
	    set(conf, "linger.ms", "5") || set(conf, "acks", "all"))
		return -1;
	rd_kafka_t *rk =
	    rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "plain_sources: kafka producer: %s\n", err);
		return -1;
	}
	wl_msg m;
	for (long i = 0; i < n;) {
		wl_message(i, &m);
		rd_kafka_resp_err_t e = rd_kafka_producev(
		    rk, RD_KAFKA_V_TOPIC(topic),
		    RD_KAFKA_V_VALUE(m.json, (size_t)m.len),
		    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
		if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(rk, 10);
			continue;
		}
		if (e) {
			fprintf(stderr, "plain_sources: produce: %s\n",
			        rd_kafka_err2str(e));
			return -1;
		}
		rd_kafka_poll(rk, 0);
		i++;
	}
	if (rd_kafka_flush(rk, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR ||
	    rd_kafka_outq_len(rk) > 0) {
		fprintf(stderr, "plain_sources: produce not delivered\n");
		return -1;
	}
	rd_kafka_destroy(rk);
	return 0;
}

int ps_kafka_run(const char *boot, const char *topic, const char *group,
                 ps_pg *pg, long n, int batch)
{
	char err[256];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	if (set(conf, "bootstrap.servers", boot) ||
	    set(conf, "group.id", group) ||
	    set(conf, "enable.auto.commit", "false") ||
	    set(conf, "enable.auto.offset.store", "false") ||
	    set(conf, "auto.offset.reset", "earliest") || set_extra(conf))
		return -1;
	rd_kafka_t *rk =
	    rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "plain_sources: kafka consumer: %s\n", err);
		return -1;
	}
	rd_kafka_poll_set_consumer(rk);
	rd_kafka_topic_partition_list_t *sub =
	    rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(sub, topic, RD_KAFKA_PARTITION_UA);
	rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, sub);
	rd_kafka_topic_partition_list_destroy(sub);
	if (e) {
		fprintf(stderr, "plain_sources: subscribe: %s\n",
		        rd_kafka_err2str(e));
		return -1;
	}
	rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(rk);
	rd_kafka_message_t **msgs = malloc(sizeof(*msgs) * (size_t)batch);
	if (!msgs)
		return -1;
	int rc = 0;
	while (ps_pg_messages(pg) < n && rc == 0) {
		ssize_t k =
		    rd_kafka_consume_batch_queue(q, 100, msgs, (size_t)batch);
		if (k < 0) {
			fprintf(stderr, "plain_sources: consume failed\n");
			return -1;
		}
		rd_kafka_topic_partition_list_t *offs =
		    rd_kafka_topic_partition_list_new((int)k);
		for (ssize_t i = 0; i < k; i++) {
			rd_kafka_message_t *m = msgs[i];
			if (m->err) {
				if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
					fprintf(stderr, "plain_sources: %s\n",
					        rd_kafka_message_errstr(m));
				continue;
			}
			if (ps_pg_add(pg, m->payload, m->len) < 0)
				rc = -1;
			/* the last of each partition wins: offsets grow */
			rd_kafka_topic_partition_t *p =
			    rd_kafka_topic_partition_list_find(offs, topic,
			                                       m->partition);
			if (!p)
				p = rd_kafka_topic_partition_list_add(
				    offs, topic, m->partition);
			p->offset = m->offset + 1;
		}
		ps_pg_flush(pg);
		/* after the commit */
		if (offs->cnt > 0 && (rd_kafka_offsets_store(rk, offs) ||
		                      rd_kafka_commit(rk, offs, 1))) {
			fprintf(stderr, "plain_sources: commit failed\n");
			rc = -1;
		}
		rd_kafka_topic_partition_list_destroy(offs);
		for (ssize_t i = 0; i < k; i++)
			rd_kafka_message_destroy(msgs[i]);
	}
	free(msgs);
	rd_kafka_queue_destroy(q);
	rd_kafka_commit(rk, NULL, 0);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	return rc;
}
