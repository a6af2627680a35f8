/* The sources' lag (inbox_source_lag, the vtable's lag slot, version 3)
 * against the suite's servers (INBOX_TEST_REDIS_URL, INBOX_TEST_NATS_URL,
 * INBOX_TEST_AMQP_URL; Kafka on librdkafka's mock cluster; JSONL on a
 * temp file): publish N, consume K, and the lag the framework refreshes
 * at the next poll shows the N - K remaining. And the framework's part:
 * the slot is asked at most every INBOX_SOURCE_LAG_EVERY_S, its failure
 * is not the poll's, a version 2 backend registers with the lag unknown.
 * A missing server is a failure, never a skip. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <hiredis/hiredis.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <nats/nats.h>

#include <inbox/inbox.h>
#include <inbox/source.h>
#include <inbox/sys/source.h>

#include "kafka_mock.h"
#include "test.h"

#define N 20
#define K 7

static char prefix[48];

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inbox_source *open_url(const char *url)
{
	inbox_source *s = NULL;
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "lag.test";
	o.max_batch = 50;
	int rc = inbox_source_open(&s, url, &o);
	if (rc != INBOX_OK) {
		fprintf(stderr, "  open %s: %s %s\n", url, inbox_err_name(rc),
		        s ? inbox_source_errmsg(s) : "");
		inbox_source_close(s);
		return NULL;
	}
	return s;
}

/* Poll (at most `max` a time) until `want` deliveries were taken, each
 * batch acked; the number taken. */
static size_t take(inbox_source *s, size_t want, size_t max, int timeout_ms)
{
	inbox_delivery d[50];
	TEST_DELIVERIES_INIT(d, 50);
	inbox_result res[50];
	size_t got = 0;
	int64_t end = mono_ms() + timeout_ms;
	while (got < want && mono_ms() < end) {
		size_t n = 0;
		size_t m = want - got < max ? want - got : max;
		if (inbox_source_poll(s, d, m, &n, 100, NULL) < 0)
			fprintf(stderr, "  poll: %s\n", inbox_source_errmsg(s));
		if (n == 0)
			continue;
		TEST_RESULTS_INIT(res, n);
		for (size_t i = 0; i < n; i++)
			res[i].outcome = INBOX_APPLIED;
		if (inbox_source_settle(s, d, res, n) < 0)
			fprintf(stderr, "  settle: %s\n",
			        inbox_source_errmsg(s));
		got += n;
	}
	return got;
}

/* The lag as the next poll after the cache's age refreshes it: wait
 * the refresh interval out, poll once (at most one delivery, acked). */
static void lag_now(inbox_source *s, int64_t *messages, int64_t *bytes)
{
	usleep((useconds_t)(INBOX_SOURCE_LAG_EVERY_S * 1000000) + 100000);
	inbox_delivery d[1] = {INBOX_DELIVERY_INIT};
	size_t n = 0;
	inbox_source_poll(s, d, 1, &n, 50, NULL);
	if (n) {
		inbox_result r = INBOX_RESULT_INIT;
		r.outcome = INBOX_RETRY; /* not taken: redelivered */
		inbox_source_settle(s, d, &r, n);
	}
	inbox_source_lag(s, messages, bytes);
}

/* ---- the framework ---- */

typedef struct fake {
	struct inbox_source base;
	int lag_calls;
	int fail;
} fake;

static int fake_open(inbox_source **out, const char *url,
                     const inbox_source_options *opts)
{
	(void)url;
	(void)opts;
	*out = calloc(1, sizeof(fake));
	return *out ? INBOX_OK : INBOX_ERR_NOMEM;
}
static void fake_close(inbox_source *s)
{
	free(s);
}
static int fake_poll(inbox_source *s, inbox_delivery *out, size_t max,
                     size_t *n, int timeout_ms, int *eof)
{
	(void)s;
	(void)out;
	(void)max;
	(void)n;
	(void)timeout_ms;
	(void)eof;
	return INBOX_OK;
}
static int fake_settle(inbox_source *s, const inbox_result *res, size_t n)
{
	(void)s;
	(void)res;
	(void)n;
	return INBOX_OK;
}
static int fake_lag(inbox_source *s, int64_t *messages, int64_t *bytes)
{
	fake *f = (fake *)s;
	f->lag_calls++;
	if (f->fail) {
		inbox_source_seterr(s, "lag: broker said no");
		return INBOX_ERR_SOURCE;
	}
	*messages = 40 + f->lag_calls;
	*bytes = 7;
	return INBOX_OK;
}

static const inbox_source_vtable fake3 = {
    INBOX_SOURCE_VTABLE_VERSION,
    "lagfake",
    fake_open,
    fake_close,
    fake_poll,
    fake_settle,
    fake_lag,
    .client_version = NULL,
};
/* Built against version 2: no lag slot (the field is there only
 * because this file is compiled with the newer header). */
static const inbox_source_vtable fake2 = {
    2,         "lagfake2",  fake_open, fake_close,
    fake_poll, fake_settle, NULL,      .client_version = NULL,
};
static const inbox_source_vtable fake1 = {
    1,         "lagfake1",  fake_open, fake_close,
    fake_poll, fake_settle, NULL,      .client_version = NULL,
};

TEST(framework_rate_limit_and_versions)
{
	ASSERT_OK(inbox_source_register(&fake3));
	ASSERT_OK(inbox_source_register(&fake2));
	ASSERT_EQ(inbox_source_register(&fake1), INBOX_ERR_INVALID);
	inbox_source *s = open_url("lagfake:x");
	ASSERT_TRUE(s != NULL);
	int64_t m = 0, b = 0;
	ASSERT_OK(inbox_source_lag(s, &m, &b));
	ASSERT_EQ(m, -1); /* not asked yet */
	ASSERT_EQ(b, -1);
	inbox_delivery d[1] = {INBOX_DELIVERY_INIT};
	size_t n;
	for (int i = 0; i < 50; i++)
		ASSERT_OK(inbox_source_poll(s, d, 1, &n, 0, NULL));
	ASSERT_EQ(((fake *)s)->lag_calls, 1); /* 50 polls, one ask */
	ASSERT_OK(inbox_source_lag(s, &m, &b));
	ASSERT_EQ(m, 41);
	ASSERT_EQ(b, 7);
	/* a failing slot: the lag becomes unknown, the poll is fine */
	((fake *)s)->fail = 1;
	usleep((useconds_t)(INBOX_SOURCE_LAG_EVERY_S * 1000000) + 50000);
	ASSERT_OK(inbox_source_poll(s, d, 1, &n, 0, NULL));
	ASSERT_EQ(((fake *)s)->lag_calls, 2);
	ASSERT_STREQ(inbox_source_errmsg(s), "");
	ASSERT_OK(inbox_source_lag(s, &m, &b));
	ASSERT_EQ(m, -1);
	ASSERT_EQ(b, -1);
	inbox_source_close(s);
	ASSERT_EQ(inbox_source_lag(NULL, &m, &b), INBOX_ERR_INVALID);
	s = open_url("lagfake2:x");
	ASSERT_TRUE(s != NULL);
	ASSERT_OK(inbox_source_poll(s, d, 1, &n, 0, NULL));
	ASSERT_OK(inbox_source_lag(s, &m, &b));
	ASSERT_EQ(m, -1);
	inbox_source_close(s);
}

/* ---- JSONL: bytes behind ---- */

TEST(jsonl_bytes_behind)
{
	char dir[] = "/tmp/inbox-lag-XXXXXX", path[128], url[400];
	ASSERT_TRUE(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/in.jsonl", dir);
	FILE *f = fopen(path, "w");
	ASSERT_TRUE(f != NULL);
	size_t line = 0;
	for (int i = 0; i < N; i++)
		line = (size_t)fprintf(f, "{\"id\":\"m-%02d\"}\n", i);
	fclose(f);
	snprintf(url, sizeof(url), "jsonl:%s?follow=1&checkpoint=%s/cp", path,
	         dir);
	inbox_source *s = open_url(url);
	ASSERT_TRUE(s != NULL);
	ASSERT_EQ(take(s, K, K, 5000), K);
	int64_t m, b;
	lag_now(s, &m, &b);
	ASSERT_EQ(m, -1);
	ASSERT_EQ(b, (int64_t)((N - K) * line));
	ASSERT_EQ(take(s, N - K, 50, 5000), N - K);
	lag_now(s, &m, &b);
	ASSERT_EQ(b, 0);
	inbox_source_close(s);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ASSERT_EQ(system(cmd), 0);
}

/* ---- Redis Streams ---- */

TEST(redis_group_lag)
{
	const char *base = getenv("INBOX_TEST_REDIS_URL");
	ASSERT_TRUE(base != NULL && *base);
	char host[128], stream[96], url[400];
	int port;
	ASSERT_EQ(sscanf(base, "redis://%127[^:]:%d", host, &port), 2);
	struct timeval tv = {5, 0};
	redisContext *rc = redisConnectWithTimeout(host, port, tv);
	ASSERT_TRUE(rc && !rc->err);
	snprintf(stream, sizeof(stream), "%s-redis", prefix);
	snprintf(url, sizeof(url), "%s/%s?group=g", base, stream);
	inbox_source *s = open_url(url); /* creates the group at its end */
	ASSERT_TRUE(s != NULL);
	for (int i = 0; i < N; i++) {
		redisReply *r =
		    redisCommand(rc, "XADD %s * payload {}", stream);
		ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING);
		freeReplyObject(r);
	}
	ASSERT_EQ(take(s, K, K, 5000), K);
	int64_t m, b;
	lag_now(s, &m, &b);
	ASSERT_EQ(m, N - K);
	ASSERT_EQ(take(s, N - K, 50, 5000), N - K);
	lag_now(s, &m, &b);
	ASSERT_EQ(m, 0);
	inbox_source_close(s);
	freeReplyObject(redisCommand(rc, "DEL %s", stream));
	redisFree(rc);
}

/* ---- NATS JetStream ---- */

TEST(nats_num_pending)
{
	const char *base = getenv("INBOX_TEST_NATS_URL");
	ASSERT_TRUE(base != NULL && *base);
	char stream[96], url[400], subj[128];
	snprintf(stream, sizeof(stream), "lag_%d", (int)getpid());
	snprintf(url, sizeof(url), "%s/%s?create=1&durable=d1", base, stream);
	inbox_source *s = open_url(url);
	ASSERT_TRUE(s != NULL);
	natsConnection *nc = NULL;
	jsCtx *js = NULL;
	ASSERT_EQ(natsConnection_ConnectTo(&nc, base), NATS_OK);
	ASSERT_EQ(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
	snprintf(subj, sizeof(subj), "%s.orders", stream);
	for (int i = 0; i < N; i++)
		ASSERT_EQ(js_Publish(NULL, js, subj, "{}", 2, NULL, NULL),
		          NATS_OK);
	ASSERT_EQ(take(s, K, K, 8000), K);
	int64_t m, b;
	lag_now(s, &m, &b);
	ASSERT_EQ(m, N - K);
	ASSERT_EQ(take(s, N - K, 50, 8000), N - K);
	lag_now(s, &m, &b);
	ASSERT_EQ(m, 0);
	inbox_source_close(s);
	js_DeleteStream(js, stream, NULL, NULL);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
}

/* ---- RabbitMQ ---- */

TEST(amqp_queue_depth)
{
	const char *base = getenv("INBOX_TEST_AMQP_URL");
	ASSERT_TRUE(base != NULL && *base);
	char *copy = strdup(base), q[96], url[400];
	struct amqp_connection_info ci;
	ASSERT_EQ(amqp_parse_url(copy, &ci), AMQP_STATUS_OK);
	amqp_connection_state_t pc = amqp_new_connection();
	amqp_socket_t *sock = amqp_tcp_socket_new(pc);
	ASSERT_EQ(amqp_socket_open(sock, ci.host, ci.port), AMQP_STATUS_OK);
	ASSERT_EQ(amqp_login(pc, ci.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN,
	                     ci.user, ci.password)
	              .reply_type,
	          AMQP_RESPONSE_NORMAL);
	amqp_channel_open(pc, 1);
	ASSERT_EQ(amqp_get_rpc_reply(pc).reply_type, AMQP_RESPONSE_NORMAL);
	snprintf(q, sizeof(q), "%s-amqp", prefix);
	amqp_queue_declare(pc, 1, amqp_cstring_bytes(q), 0, 1, 0, 0,
	                   amqp_empty_table);
	ASSERT_EQ(amqp_get_rpc_reply(pc).reply_type, AMQP_RESPONSE_NORMAL);
	for (int i = 0; i < N; i++)
		ASSERT_EQ(amqp_basic_publish(pc, 1, amqp_cstring_bytes(""),
		                             amqp_cstring_bytes(q), 0, 0, NULL,
		                             amqp_cstring_bytes("{}")),
		          AMQP_STATUS_OK);
	amqp_queue_declare(pc, 1, amqp_cstring_bytes(q), 1, 0, 0, 0,
	                   amqp_empty_table); /* a round trip: all there */
	/* prefetch=1: at most one message is on its way to this consumer
	 * (pushed, not in the queue's ready count) */
	snprintf(url, sizeof(url), "%s/%s?prefetch=1", base, q);
	inbox_source *s = open_url(url);
	ASSERT_TRUE(s != NULL);
	ASSERT_EQ(take(s, K, K, 8000), K);
	int64_t m, b;
	lag_now(s, &m, &b);
	ASSERT_TRUE(m == N - K || m == N - K - 1);
	ASSERT_EQ(take(s, N - K, 50, 8000), N - K);
	lag_now(s, &m, &b);
	ASSERT_EQ(m, 0);
	inbox_source_close(s);
	amqp_queue_delete(pc, 1, amqp_cstring_bytes(q), 0, 0);
	amqp_channel_close(pc, 1, AMQP_REPLY_SUCCESS);
	amqp_connection_close(pc, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(pc);
	free(copy);
}

/* ---- Kafka (mock cluster) ---- */

TEST(kafka_consumer_lag)
{
	static const char *const conf[] = {"linger.ms", "5", NULL};
	char url[1024], topic[64];
	ASSERT_EQ(kafka_mock_start(1, conf), 0);
	snprintf(topic, sizeof(topic), "lag-%d", (int)getpid());
	ASSERT_EQ(rd_kafka_mock_topic_create(mock, topic, 2, 1),
	          RD_KAFKA_RESP_ERR_NO_ERROR);
	for (int i = 0; i < N; i++)
		ASSERT_EQ(rd_kafka_producev(
		              producer, RD_KAFKA_V_TOPIC(topic),
		              RD_KAFKA_V_PARTITION(i % 2),
		              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		              RD_KAFKA_V_VALUE("{}", 2), RD_KAFKA_V_END),
		          RD_KAFKA_RESP_ERR_NO_ERROR);
	ASSERT_EQ(rd_kafka_flush(producer, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
	snprintf(url, sizeof(url),
	         "kafka://%s/%s?group=lag&rdkafka.session.timeout.ms=3000"
	         "&rdkafka.heartbeat.interval.ms=300&rdkafka.log_level=3",
	         bootstrap, topic);
	inbox_source *s = open_url(url);
	ASSERT_TRUE(s != NULL);
	ASSERT_EQ(take(s, K, K, 15000), K);
	int64_t m, b;
	lag_now(s, &m, &b);
	ASSERT_EQ(m, N - K);
	ASSERT_EQ(take(s, N - K, 50, 15000), N - K);
	lag_now(s, &m, &b);
	ASSERT_EQ(m, 0);
	inbox_source_close(s);
	kafka_mock_stop();
}

int main(void)
{
	snprintf(prefix, sizeof(prefix), "inbox-lag-%d", (int)getpid());
	RUN(framework_rate_limit_and_versions);
	RUN(jsonl_bytes_behind);
	RUN(redis_group_lag);
	RUN(nats_num_pending);
	RUN(amqp_queue_depth);
	RUN(kafka_consumer_lag);
	return test_summary();
}
