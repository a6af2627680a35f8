/* librdkafka's mock cluster for the tests (one copy, header-only): the
 * cluster's book-keeping handle, the cluster, its bootstrap address, and
 * an ordinary producer connected to it. Each test file gets its own. */
#ifndef INBOX_TESTS_KAFKA_MOCK_H
#define INBOX_TESTS_KAFKA_MOCK_H

#include <stdio.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

static rd_kafka_t *mock_rk;           /* the cluster's book-keeping handle */
static rd_kafka_mock_cluster_t *mock; /* the cluster */
static rd_kafka_t *producer;          /* a separate, ordinary client */
static char bootstrap[512];

/* Start a cluster of `brokers` and the producer, configured with the
 * NULL-ended key/value pairs of `conf` beside bootstrap.servers and
 * log_level 3. 0 or -1. */
static inline int kafka_mock_start(int brokers, const char *const *conf)
{
	char err[512];
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_conf_set(c, "log_level", "3", NULL, 0);
	mock_rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	if (!mock_rk || !(mock = rd_kafka_mock_cluster_new(mock_rk, brokers)))
		return -1;
	snprintf(bootstrap, sizeof(bootstrap), "%s",
	         rd_kafka_mock_cluster_bootstraps(mock));
	c = rd_kafka_conf_new();
	if (rd_kafka_conf_set(c, "bootstrap.servers", bootstrap, err,
	                      sizeof(err)) != RD_KAFKA_CONF_OK)
		return -1;
	rd_kafka_conf_set(c, "log_level", "3", NULL, 0);
	for (; conf && conf[0]; conf += 2)
		if (rd_kafka_conf_set(c, conf[0], conf[1], err, sizeof(err)) !=
		    RD_KAFKA_CONF_OK)
			return -1;
	producer = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	return producer ? 0 : -1;
}

static inline void kafka_mock_stop(void)
{
	if (producer)
		rd_kafka_destroy(producer);
	if (mock)
		rd_kafka_mock_cluster_destroy(mock);
	if (mock_rk)
		rd_kafka_destroy(mock_rk);
	producer = mock_rk = NULL;
	mock = NULL;
}

#endif
