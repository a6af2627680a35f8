/*
 * The Kafka source against librdkafka's in-process mock cluster (3
 * brokers on loopback): every message once, offsets committed, RETRY and
 * failed batches redelivered in order after the delay, a consumer group
 * split between two sources and handed over on close, truncation, headers,
 * URL errors; then end to end through inbox_run with a real store.
 *
 * Mock quirk: a group's first join waits ~3 s (initial rebalance delay),
 * later rebalances up to session.timeout.ms - 1 s, hence the short
 * session timeout in every URL.
 */
#include <ctype.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <sqlite3.h>

#include <inbox/inbox.h>
#include <inbox/source.h>

#include "../clock.h"
#include "../kafka_mock.h"
#include "source/kafka/kafka.h"
#include "test.h"

#define GROUP_OPTS                                                             \
	"&rdkafka.session.timeout.ms=3000&rdkafka.heartbeat.interval.ms=300"   \
	"&rdkafka.log_level=3"

static char tmpdir[] = "/tmp/inbox-kafka-XXXXXX";

static int start_cluster(void)
{
	static const char *const conf[] = {
	    "linger.ms", "5", "reconnect.backoff.max.ms", "300", NULL};
	return kafka_mock_start(3, conf);
}

static void stop_cluster(void)
{
	kafka_mock_stop();
}

/* Message i of a topic: partition i % parts, header message-id "m-i",
 * payload {"id":"p-i","n":i}. */
static int produce_range(const char *topic, int parts, int from, int to)
{
	for (int i = from; i < to; i++) {
		char id[32], payload[64];
		snprintf(id, sizeof(id), "m-%d", i);
		snprintf(payload, sizeof(payload), "{\"id\":\"p-%d\",\"n\":%d}",
		         i, i);
		rd_kafka_resp_err_t err = rd_kafka_producev(
		    producer, RD_KAFKA_V_TOPIC(topic),
		    RD_KAFKA_V_PARTITION(i % parts),
		    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		    RD_KAFKA_V_VALUE(payload, strlen(payload)),
		    RD_KAFKA_V_HEADER("message-id", id, -1), RD_KAFKA_V_END);
		if (err)
			return -1;
	}
	return rd_kafka_flush(producer, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR
	           ? 0
	           : -1;
}

static int make_topic(const char *topic, int parts)
{
	return rd_kafka_mock_topic_create(mock, topic, parts, 1) ==
	               RD_KAFKA_RESP_ERR_NO_ERROR
	           ? 0
	           : -1;
}

static int open_src(inbox_source **s, const char *topic, const char *group,
                    const char *extra, int retry_delay_ms, size_t max_payload)
{
	char url[1024];
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "kafka-test";
	o.max_batch = 50;
	o.retry_delay_ms = retry_delay_ms;
	o.max_payload = max_payload;
	const char *dbg = getenv("KAFKA_TEST_URL_EXTRA"); /* e.g. debug */
	snprintf(url, sizeof(url), "kafka://%s/%s?group=%s%s%s%s", bootstrap,
	         topic, group, GROUP_OPTS, extra ? extra : "", dbg ? dbg : "");
	int rc = inbox_source_open(s, url, &o);
	if (rc != INBOX_OK)
		fprintf(stderr, "  open %s: %s\n", url,
		        *s ? inbox_source_errmsg(*s) : inbox_err_name(rc));
	return rc;
}

/* One delivery as the test saw it. */
typedef struct seen {
	int n; /* message number, from the id header */
	int part;
	long long off;
	int count;
	int64_t at;
} seen;

typedef struct log_t {
	seen *v;
	size_t len, cap;
} log_t;

static void log_add(log_t *l, const inbox_delivery *d)
{
	if (l->len == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 256;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
	}
	seen *s = &l->v[l->len++];
	char topic[64];
	s->n = -1;
	if (d->id)
		sscanf(d->id, "m-%d", &s->n);
	s->part = -1;
	s->off = -1;
	if (d->position)
		sscanf(d->position, "%63[^/]/%d/%lld", topic, &s->part,
		       &s->off);
	s->count = d->delivery_count;
	s->at = now_ms();
}

/* Decides each delivery's outcome. */
typedef inbox_outcome (*decide_fn)(const inbox_delivery *d, void *arg);

static inbox_outcome applied(const inbox_delivery *d, void *arg)
{
	(void)d;
	(void)arg;
	return INBOX_APPLIED;
}

/* Poll once and settle; returns deliveries seen, or -1 on error. */
static int round_trip(inbox_source *s, log_t *l, decide_fn decide, void *arg,
                      int timeout_ms)
{
	inbox_delivery d[64] = {INBOX_DELIVERY_INIT};
	inbox_result r[64] = {INBOX_RESULT_INIT};
	size_t n = 0;
	int rc = inbox_source_poll(s, d, 64, &n, timeout_ms, NULL);
	if (rc != INBOX_OK && rc != INBOX_ERR_SOURCE) {
		fprintf(stderr, "  poll: %s: %s\n", inbox_err_name(rc),
		        inbox_source_errmsg(s));
		return -1;
	}
	memset(r, 0, sizeof(r));
	r[0].version = INBOX_RESULT_VERSION;
	for (size_t i = 0; i < n; i++) {
		log_add(l, &d[i]);
		r[i].outcome = decide(&d[i], arg);
	}
	if (n && inbox_source_settle(s, d, r, n) != INBOX_OK)
		fprintf(stderr, "  settle: %s\n", inbox_source_errmsg(s));
	return (int)n;
}

/* Poll until `want` deliveries were logged or deadline_ms passed. */
static void drain(inbox_source *s, log_t *l, size_t want, decide_fn decide,
                  void *arg, int deadline_ms)
{
	int64_t end = now_ms() + deadline_ms;
	while (l->len < want && now_ms() < end)
		if (round_trip(s, l, decide, arg, 200) < 0)
			return;
}

/* ------------------------------------------------------------------ */

TEST(bad_url)
{
	inbox_source *s = NULL;
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "kafka-test";
	static const char *const bad[] = {
	    "kafka://",
	    "kafka://127.0.0.1:9/",
	    "kafka:///topic",
	    "kafka://127.0.0.1:9/bad topic",
	    "kafka://user:pw@127.0.0.1:9/t",
	    "kafka://127.0.0.1:9/t?group=",
	    "kafka://127.0.0.1:9/t?offset_reset=middle",
	    "kafka://127.0.0.1:9/t?nope=1",
	    "kafka://127.0.0.1:9/t?group",
	    "kafka://127.0.0.1:9/t?group=%zz",
	    "kafka://127.0.0.1:9/t?rdkafka.group.id=x",
	    "kafka://127.0.0.1:9/t?rdkafka.enable.auto.commit=true",
	    "kafka://127.0.0.1:9/t?rdkafka.no.such.property=1",
	    "kafka://127.0.0.1:9/t?rdkafka.session.timeout.ms=abc",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		int rc = inbox_source_open(&s, bad[i], &o);
		if (rc != INBOX_ERR_URL) {
			TEST_FAIL_("%s: %s", bad[i], inbox_err_name(rc));
			inbox_source_close(s);
			return;
		}
		if (s) {
			ASSERT_TRUE(strlen(inbox_source_errmsg(s)) > 0);
			inbox_source_close(s);
		}
		s = NULL;
	}
	ASSERT_EQ(inbox_source_open(&s, "kafka://h:1/t?bogus=1", &o),
	          INBOX_ERR_URL);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "bogus");
	inbox_source_close(s);
	/* secrets are never echoed */
	ASSERT_EQ(
	    inbox_source_open(&s,
	                      "kafka://h:1/t?rdkafka.sasl.password=hunter2"
	                      "&rdkafka.ssl.key.password=s3cr3t&x=1",
	                      &o),
	    INBOX_ERR_URL);
	ASSERT_TRUE(strstr(inbox_source_errmsg(s), "hunter2") == NULL);
	ASSERT_TRUE(strstr(inbox_source_errmsg(s), "s3cr3t") == NULL);
	inbox_source_close(s);
	ASSERT_EQ(inbox_source_open(&s,
	                            "kafka://h:1/t?rdkafka.security.protocol=XX"
	                            "&rdkafka.sasl.password=hunter2",
	                            &o),
	          INBOX_ERR_URL);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "security.protocol");
	inbox_source_close(s);
	/* valid: every parameter, no connection check */
	ASSERT_OK(inbox_source_open(&s,
	                            "kafka://127.0.0.1:1,127.0.0.1:2/t.x_y-z"
	                            "?group=g%2Fx&id_header=&offset_reset="
	                            "latest&open_timeout_ms=0"
	                            "&rdkafka.client.id=c%20d",
	                            &o));
	inbox_source_close(s);
	/* nothing listens on port 1 */
	ASSERT_EQ(inbox_source_open(
	              &s, "kafka://127.0.0.1:1/t?open_timeout_ms=300", &o),
	          INBOX_ERR_CONNECT);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "no broker");
	inbox_source_close(s);
}

/* 300 messages over 3 partitions: each exactly once, positions and ids
 * right; a reopened member of the group sees only what came after. */
TEST(each_once_and_committed)
{
	const char *topic = "t-once";
	inbox_source *s = NULL;
	log_t l = {0};
	ASSERT_OK(make_topic(topic, 3));
	ASSERT_OK(produce_range(topic, 3, 0, 300));
	ASSERT_OK(open_src(&s, topic, "g-once", NULL, 200, 1024 * 1024));
	drain(s, &l, 300, applied, NULL, 20000);
	inbox_source_close(s);
	s = NULL;
	ASSERT_EQ(l.len, 300);
	int count[300] = {0};
	for (size_t i = 0; i < l.len; i++) {
		seen *e = &l.v[i];
		ASSERT_TRUE(e->n >= 0 && e->n < 300);
		count[e->n]++;
		ASSERT_EQ(e->part, e->n % 3);
		ASSERT_EQ(e->off, e->n / 3);
		ASSERT_EQ(e->count, 1);
	}
	for (int i = 0; i < 300; i++)
		ASSERT_EQ(count[i], 1);

	/* Same group again: the committed offsets hold, only new ones come. */
	l.len = 0;
	ASSERT_OK(open_src(&s, topic, "g-once", NULL, 200, 1024 * 1024));
	ASSERT_OK(produce_range(topic, 3, 300, 303));
	drain(s, &l, 3, applied, NULL, 15000);
	/* a little longer: nothing else may trickle in */
	for (int i = 0; i < 3; i++)
		round_trip(s, &l, applied, NULL, 100);
	inbox_source_close(s);
	ASSERT_EQ(l.len, 3);
	for (size_t i = 0; i < l.len; i++)
		ASSERT_TRUE(l.v[i].n >= 300 && l.v[i].n < 303);
	free(l.v);
}

/* Delivery fields: payload, id, headers JSON, timestamp. */
TEST(delivery_fields)
{
	const char *topic = "t-fields";
	inbox_source *s = NULL;
	ASSERT_OK(make_topic(topic, 1));
	char big[2000];
	memset(big, 'x', sizeof(big));
	big[0] = '"';
	big[sizeof(big) - 1] = '"';
	const unsigned char bin[3] = {0xff, 0x00, 0x41};
	ASSERT_EQ(rd_kafka_producev(
	              producer, RD_KAFKA_V_TOPIC(topic),
	              RD_KAFKA_V_VALUE("{\"id\":\"x1\"}", 11),
	              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
	              RD_KAFKA_V_HEADER("message-id", "first", -1),
	              RD_KAFKA_V_HEADER("message-id", "hdr-1", -1),
	              RD_KAFKA_V_HEADER("bin", bin, 3),
	              RD_KAFKA_V_HEADER("nul", NULL, 0),
	              RD_KAFKA_V_HEADER("q\"", "a\\b\n", -1),
	              RD_KAFKA_V_HEADER("\xc3\x28", "v", -1), RD_KAFKA_V_END),
	          0);
	ASSERT_EQ(rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic),
	                            RD_KAFKA_V_VALUE(big, sizeof(big)),
	                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
	                            RD_KAFKA_V_END),
	          0);
	/* ids that cannot be text: a NUL byte, invalid UTF-8; empty */
	ASSERT_EQ(
	    rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic),
	                      RD_KAFKA_V_VALUE("{\"id\":\"order-1\"}", 16),
	                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
	                      RD_KAFKA_V_HEADER("message-id", "order-1\0x", 9),
	                      RD_KAFKA_V_END),
	    0);
	ASSERT_EQ(
	    rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic),
	                      RD_KAFKA_V_VALUE("{\"id\":\"x4\"}", 11),
	                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
	                      RD_KAFKA_V_HEADER("message-id", "\xc3\x28", 2),
	                      RD_KAFKA_V_END),
	    0);
	ASSERT_EQ(rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic),
	                            RD_KAFKA_V_VALUE("{\"id\":\"x5\"}", 11),
	                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
	                            RD_KAFKA_V_HEADER("message-id", "", 0),
	                            RD_KAFKA_V_END),
	          0);
	ASSERT_EQ(rd_kafka_flush(producer, 10000), 0);
	ASSERT_OK(open_src(&s, topic, "g-fields", NULL, 200, 100));
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	inbox_result r[8] = {INBOX_RESULT_INIT};
	size_t n = 0;
	int64_t end = now_ms() + 15000;
	while (n < 5 && now_ms() < end) {
		int rc = inbox_source_poll(s, d, 8, &n, 200, NULL);
		if (rc != INBOX_OK && rc != INBOX_ERR_SOURCE)
			break;
		if (n > 0 && n < 5) /* want all in one batch: put them back */
			inbox_source_settle(s, d, NULL, n);
	}
	size_t got = n;
	ASSERT_EQ(got, 5);
	ASSERT_STREQ(d[0].id, "hdr-1");
	ASSERT_EQ(d[0].payload_len, 11);
	ASSERT_TRUE(memcmp(d[0].payload, "{\"id\":\"x1\"}", 11) == 0);
	ASSERT_STREQ(d[0].position, "t-fields/0/0");
	ASSERT_STREQ(d[0].headers,
	             "{\"message-id\":\"hdr-1\",\"bin\":\"hex:ff0041\","
	             "\"nul\":null,\"q\\\"\":\"a\\\\b\\n\","
	             "\"hex:c328\":\"v\"}");
	ASSERT_TRUE(d[0].timestamp_ms > 1600000000000LL);
	ASSERT_TRUE(d[0].delivery_count >= 1);
	/* over max_payload: truncated to max_payload + 1, refused with its
	 * real size, no headers */
	ASSERT_EQ(d[1].payload_len, 101);
	ASSERT_STREQ(d[1].refused,
	             "payload of 2000 bytes exceeds max_payload 100");
	ASSERT_TRUE(d[1].headers == NULL);
	ASSERT_STREQ(d[1].position, "t-fields/0/1");
	/* never cut at the NUL, nor replaced by the payload's id */
	ASSERT_STREQ(d[2].refused,
	             "message id in Kafka header \"message-id\" "
	             "holds a NUL byte at byte 7 "
	             "(hex:6f726465722d310078): cannot be stored as "
	             "text");
	ASSERT_STREQ(d[2].headers,
	             "{\"message-id\":\"hex:6f726465722d310078\"}");
	ASSERT_STREQ(d[3].refused,
	             "message id in Kafka header \"message-id\" is "
	             "not valid UTF-8 (hex:c328): cannot be stored as "
	             "text");
	ASSERT_TRUE(d[4].id == NULL); /* empty: no id, the payload's */
	/* a second poll before settle is refused */
	inbox_delivery d2[2] = {INBOX_DELIVERY_INIT};
	ASSERT_EQ(inbox_source_poll(s, d2, 2, &n, 0, NULL), INBOX_ERR_STATE);
	memset(r, 0, sizeof(r));
	r[0].version = INBOX_RESULT_VERSION;
	for (int i = 0; i < 5; i++)
		r[i].outcome = INBOX_DEAD_LETTERED;
	ASSERT_OK(inbox_source_settle(s, d, r, 5));
	inbox_source_close(s);
}

/* RETRY of one message: it and the later ones of its partition come again
 * after the delay, in order; the other partitions are unaffected. */
typedef struct retry_arg {
	int done;
	int64_t settled_at;
} retry_arg;

static inbox_outcome retry_p1_o4(const inbox_delivery *d, void *arg)
{
	retry_arg *ra = arg;
	if (!ra->done && d->position && !strcmp(d->position, "t-retry/1/4")) {
		ra->done = 1;
		ra->settled_at = now_ms();
		return INBOX_RETRY;
	}
	return INBOX_APPLIED;
}

TEST(retry_redelivers_in_order)
{
	const char *topic = "t-retry";
	inbox_source *s = NULL;
	log_t l = {0};
	retry_arg ra = {0, 0};
	const int delay = 400;
	ASSERT_OK(make_topic(topic, 3));
	ASSERT_OK(produce_range(topic, 3, 0, 30));
	ASSERT_OK(open_src(&s, topic, "g-retry", NULL, delay, 1024 * 1024));
	/* 30 + the redelivered tail of partition 1 */
	int64_t end = now_ms() + 20000;
	for (;;) {
		int p1_last = 0;
		for (size_t i = 0; i < l.len; i++)
			if (l.v[i].part == 1 && l.v[i].off == 9)
				p1_last++;
		if ((ra.done && p1_last && l.len >= 30 &&
		     l.v[l.len - 1].at > ra.settled_at + delay) ||
		    now_ms() > end)
			break;
		round_trip(s, &l, retry_p1_o4, &ra, 200);
	}
	/* a little more: nothing further */
	for (int i = 0; i < 3; i++)
		round_trip(s, &l, applied, NULL, 100);
	inbox_source_close(s);
	ASSERT_TRUE(ra.done);
	/* partitions 0 and 2: offsets 0..9 exactly once, in order */
	for (int p = 0; p <= 2; p += 2) {
		long long next = 0;
		for (size_t i = 0; i < l.len; i++)
			if (l.v[i].part == p) {
				ASSERT_EQ(l.v[i].off, next);
				ASSERT_EQ(l.v[i].count, 1);
				next++;
			}
		ASSERT_EQ(next, 10);
	}
	/* partition 1: 0..k, then 4..9; the second copies counted */
	long long seq[64];
	int cnt[64], ns = 0;
	int64_t second_at = 0;
	for (size_t i = 0; i < l.len && ns < 64; i++)
		if (l.v[i].part == 1) {
			if (ns > 0 && l.v[i].off == 4 && seq[ns - 1] >= 4)
				second_at = l.v[i].at;
			cnt[ns] = l.v[i].count;
			seq[ns++] = l.v[i].off;
		}
	int k = 0;
	while (k + 1 < ns && seq[k + 1] == seq[k] + 1)
		k++;
	long long last_first = seq[k];
	ASSERT_TRUE(last_first >= 4);
	ASSERT_EQ(ns, (int)last_first + 1 + 6);
	for (int i = 0; i <= k; i++) {
		ASSERT_EQ(seq[i], i);
		ASSERT_EQ(cnt[i], 1);
	}
	for (int i = k + 1; i < ns; i++) {
		ASSERT_EQ(seq[i], 4 + (i - k - 1));
		ASSERT_EQ(cnt[i], seq[i] <= last_first ? 2 : 1);
	}
	/* not before the retry delay */
	ASSERT_TRUE(second_at >= ra.settled_at + delay - 20);
	free(l.v);
}

/* settle(NULL): the transaction failed, the whole batch comes again. */

TEST(failed_batch_redelivered)
{
	const char *topic = "t-null";
	inbox_source *s = NULL;
	log_t l = {0};
	ASSERT_OK(make_topic(topic, 3));
	ASSERT_OK(produce_range(topic, 3, 0, 9));
	ASSERT_OK(open_src(&s, topic, "g-null", NULL, 100, 1024 * 1024));
	inbox_delivery d[64] = {INBOX_DELIVERY_INIT};
	size_t n = 0;
	int64_t end = now_ms() + 15000;
	while (n == 0 && now_ms() < end)
		inbox_source_poll(s, d, 64, &n, 200, NULL);
	ASSERT_TRUE(n > 0);
	int firsts[9] = {0};
	for (size_t i = 0; i < n; i++) {
		int m = -1;
		sscanf(d[i].id, "m-%d", &m);
		ASSERT_TRUE(m >= 0 && m < 9);
		firsts[m] = 1;
	}
	ASSERT_OK(inbox_source_settle(s, d, NULL, n));
	drain(s, &l, 9, applied, NULL, 10000);
	for (int i = 0; i < 3; i++)
		round_trip(s, &l, applied, NULL, 100);
	inbox_source_close(s);
	ASSERT_EQ(l.len, 9);
	int count[9] = {0};
	for (size_t i = 0; i < l.len; i++) {
		ASSERT_TRUE(l.v[i].n >= 0 && l.v[i].n < 9);
		count[l.v[i].n]++;
		ASSERT_EQ(l.v[i].count, firsts[l.v[i].n] ? 2 : 1);
	}
	for (int i = 0; i < 9; i++)
		ASSERT_EQ(count[i], 1);
	free(l.v);
}

/* Two sources in one group share the partitions; together each message
 * once. Closing one hands its partitions to the other, which starts after
 * what was committed. */
static void group_test(const char *topic, const char *extra)
{
	inbox_source *a = NULL, *b = NULL;
	log_t la = {0}, lb = {0};
	ASSERT_OK(make_topic(topic, 4));
	ASSERT_OK(open_src(&a, topic, topic, extra, 100, 1024 * 1024));
	ASSERT_OK(open_src(&b, topic, topic, extra, 100, 1024 * 1024));
	/* let both join (the first rebalance waits ~3 s) */
	int64_t end = now_ms() + 4500;
	while (now_ms() < end) {
		round_trip(a, &la, applied, NULL, 100);
		round_trip(b, &lb, applied, NULL, 100);
	}
	ASSERT_OK(produce_range(topic, 4, 0, 400));
	end = now_ms() + 20000;
	while (la.len + lb.len < 400 && now_ms() < end) {
		round_trip(a, &la, applied, NULL, 100);
		round_trip(b, &lb, applied, NULL, 100);
	}
	ASSERT_EQ(la.len + lb.len, 400);
	ASSERT_TRUE(la.len > 0);
	ASSERT_TRUE(lb.len > 0);
	int count[600] = {0};
	int owner[4] = {0}; /* 1 = a, 2 = b */
	for (size_t i = 0; i < la.len; i++) {
		count[la.v[i].n]++;
		owner[la.v[i].part] |= 1;
	}
	for (size_t i = 0; i < lb.len; i++) {
		count[lb.v[i].n]++;
		owner[lb.v[i].part] |= 2;
	}
	for (int i = 0; i < 400; i++)
		ASSERT_EQ(count[i], 1);
	for (int p = 0; p < 4; p++)
		ASSERT_TRUE(owner[p] == 1 || owner[p] == 2);

	/* a leaves; b takes over its partitions after the rebalance */
	inbox_source_close(a);
	ASSERT_OK(produce_range(topic, 4, 400, 600));
	size_t before = lb.len;
	end = now_ms() + 20000;
	while (lb.len < before + 200 && now_ms() < end)
		round_trip(b, &lb, applied, NULL, 200);
	for (int i = 0; i < 3; i++)
		round_trip(b, &lb, applied, NULL, 100);
	inbox_source_close(b);
	if (getenv("KDEBUG"))
		for (size_t i = before; i < lb.len; i++)
			fprintf(stderr, "b: n=%d p=%d o=%lld c=%d\n", lb.v[i].n,
			        lb.v[i].part, lb.v[i].off, lb.v[i].count);
	ASSERT_EQ(lb.len, before + 200);
	for (size_t i = before; i < lb.len; i++) {
		ASSERT_TRUE(lb.v[i].n >= 400 && lb.v[i].n < 600);
		count[lb.v[i].n]++;
	}
	for (int i = 0; i < 600; i++)
		ASSERT_EQ(count[i], 1);
	free(la.v);
	free(lb.v);
}

/* cooperative-sticky, the source's default */
TEST(group_split_and_handover)
{
	group_test("t-group-coop", NULL);
}

/* eager (range): every rebalance revokes and reassigns everything */
TEST(group_split_and_handover_eager)
{
	group_test("t-group-eager",
	           "&rdkafka.partition.assignment.strategy=range");
}

/* All brokers down for a while: poll reports it and carries on; once they
 * are back, consumption resumes where it was. */
TEST(broker_outage)
{
	const char *topic = "t-outage";
	inbox_source *s = NULL;
	log_t l = {0};
	ASSERT_OK(make_topic(topic, 3));
	ASSERT_OK(produce_range(topic, 3, 0, 30));
	ASSERT_OK(open_src(&s, topic, "g-outage",
	                   "&rdkafka.reconnect.backoff.max.ms=300", 100,
	                   1024 * 1024));
	drain(s, &l, 30, applied, NULL, 15000);
	ASSERT_EQ(l.len, 30);
	ASSERT_EQ(rd_kafka_mock_broker_set_down(mock, -1), 0);
	int errors = 0;
	char last[512] = "";
	int64_t end = now_ms() + 2000;
	while (now_ms() < end) {
		inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
		size_t n = 0;
		int rc = inbox_source_poll(s, d, 8, &n, 200, NULL);
		ASSERT_TRUE(rc == INBOX_OK || rc == INBOX_ERR_SOURCE);
		ASSERT_EQ(n, 0);
		if (rc == INBOX_ERR_SOURCE) {
			errors++;
			snprintf(last, sizeof(last), "%s",
			         inbox_source_errmsg(s));
		}
	}
	ASSERT_EQ(rd_kafka_mock_broker_set_up(mock, -1), 0);
	ASSERT_TRUE(errors > 0);
	ASSERT_CONTAINS(last, "kafka: ");
	ASSERT_OK(produce_range(topic, 3, 30, 60));
	drain(s, &l, 60, applied, NULL, 20000);
	for (int i = 0; i < 3; i++)
		round_trip(s, &l, applied, NULL, 100);
	inbox_source_close(s);
	ASSERT_EQ(l.len, 60);
	int count[60] = {0};
	for (size_t i = 0; i < l.len; i++)
		count[l.v[i].n]++;
	for (int i = 0; i < 60; i++)
		ASSERT_EQ(count[i], 1);
	free(l.v);
}

/* The group.instance.id a source joins with (static membership). */
static const char *instance_of(inbox_source *s)
{
	return ((kafka_source *)s)->instance_id;
}

static int open_as(inbox_source **s, const char *consumer, const char *query)
{
	char url[1024];
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = consumer;
	snprintf(url, sizeof(url), "kafka://127.0.0.1:1/t?open_timeout_ms=0%s",
	         query);
	int rc = inbox_source_open(s, url, &o);
	if (rc != INBOX_OK)
		fprintf(stderr, "  open %s: %s\n", url,
		        *s ? inbox_source_errmsg(*s) : inbox_err_name(rc));
	return rc;
}

/* Static membership: ids derived from host and consumer, one per live
 * member on this host and group, given back when it closes; given ones
 * taken as they are; instance_id= (empty) is dynamic membership. */
TEST(instance_ids)
{
	inbox_source *a = NULL, *b = NULL, *c = NULL, *d = NULL;
	char host[256], want[600];
	ASSERT_EQ(gethostname(host, sizeof(host)), 0);
	for (char *h = host; *h; h++)
		if (!isalnum((unsigned char)*h) && !strchr("._-", *h))
			*h = '_';
	snprintf(want, sizeof(want), "%s-billing.kafka", host);
	ASSERT_OK(open_as(&a, "billing.kafka", "&group=g1"));
	ASSERT_STREQ(instance_of(a), want);
	ASSERT_OK(open_as(&b, "billing.kafka", "&group=g1"));
	snprintf(want, sizeof(want), "%s-billing.kafka-1", host);
	ASSERT_STREQ(instance_of(b), want);
	/* another group: ids only need to differ within one */
	ASSERT_OK(open_as(&d, "billing.kafka", "&group=g2"));
	snprintf(want, sizeof(want), "%s-billing.kafka", host);
	ASSERT_STREQ(instance_of(d), want);
	inbox_source_close(d);
	d = NULL;
	/* a's id is free again once a is gone: its restart gets it back */
	inbox_source_close(a);
	ASSERT_OK(open_as(&c, "billing.kafka", "&group=g1"));
	ASSERT_STREQ(instance_of(c), want);
	inbox_source_close(b);
	inbox_source_close(c);
	/* characters Kafka refuses; a name too long for an id */
	ASSERT_OK(open_as(&a, "bill ing/x\xc3\xa9", ""));
	snprintf(want, sizeof(want), "%s-bill_ing_x__", host);
	ASSERT_STREQ(instance_of(a), want);
	inbox_source_close(a);
	char lng[400];
	memset(lng, 'n', sizeof(lng) - 1);
	lng[sizeof(lng) - 1] = '\0';
	ASSERT_OK(open_as(&a, lng, ""));
	ASSERT_TRUE(inbox__kafka_valid_instance_id(instance_of(a)));
	ASSERT_TRUE(strlen(instance_of(a)) <= 245);
	ASSERT_OK(open_as(&b, lng, ""));
	ASSERT_TRUE(inbox__kafka_valid_instance_id(instance_of(b)));
	ASSERT_TRUE(strcmp(instance_of(a), instance_of(b)) != 0);
	inbox_source_close(a);
	inbox_source_close(b);
	/* given: as it is, twice (the caller's business); none */
	ASSERT_OK(open_as(&a, "c", "&instance_id=pod-0.billing"));
	ASSERT_STREQ(instance_of(a), "pod-0.billing");
	ASSERT_OK(open_as(&b, "c", "&instance_id=pod-0.billing"));
	ASSERT_STREQ(instance_of(b), "pod-0.billing");
	inbox_source_close(a);
	inbox_source_close(b);
	ASSERT_OK(open_as(&a, "c", "&rdkafka.group.instance.id=raw-1"));
	ASSERT_STREQ(instance_of(a), "raw-1");
	inbox_source_close(a);
	ASSERT_OK(open_as(&a, "c", "&instance_id="));
	ASSERT_TRUE(instance_of(a) == NULL);
	inbox_source_close(a);
	char q[300] = "&instance_id=";
	memset(q + 13, 'n', 250); /* one too many */
	q[263] = '\0';
	const char *const bad[] = {"&instance_id=a/b", "&instance_id=%20x", q};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		a = NULL;
		ASSERT_EQ(open_as(&a, "c", bad[i]), INBOX_ERR_URL);
		ASSERT_CONTAINS(inbox_source_errmsg(a), "instance_id");
		inbox_source_close(a);
	}
}

/* librdkafka < 2.3.0 aborts the process when it destroys a cooperative
 * member that a JoinGroup gave an assignor but no SyncGroup ever assigned
 * (librdkafka issue 4312) — a daemon stopped during its first rebalance.
 * Every SyncGroup refused, the source is closed once its JoinGroup came
 * back (the mock's first join waits ~3 s): close() must return. */
TEST(close_before_first_assignment)
{
	const char *topic = "t-unassigned";
	inbox_source *s = NULL;
	log_t l = {0};
	rd_kafka_resp_err_t refuse[40];
	for (size_t i = 0; i < sizeof(refuse) / sizeof(*refuse); i++)
		refuse[i] = RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS;
	ASSERT_OK(make_topic(topic, 2));
	ASSERT_OK(produce_range(topic, 2, 0, 10));
	rd_kafka_mock_push_request_errors_array(
	    mock, 14 /* SyncGroup */, sizeof(refuse) / sizeof(*refuse), refuse);
	ASSERT_OK(open_src(&s, topic, "g-unassigned", NULL, 100, 1024 * 1024));
	int64_t end = now_ms() + 5000;
	while (now_ms() < end)
		round_trip(s, &l, applied, NULL, 100);
	inbox_source_close(s);
	rd_kafka_mock_clear_request_errors(mock, 14);
	ASSERT_EQ(l.len, 0); /* never assigned indeed */
	free(l.v);
}

/* A static member that another one with its id fenced off (a fatal
 * error in librdkafka: the handle is dead) stops: poll() answers
 * INBOX_ERR_CONFIG, which the runner does not retry, naming the id. The
 * mock cluster never fences (it ignores instance ids): librdkafka's test
 * hook raises the error. */
TEST(fenced_member_stops)
{
	const char *topic = "t-fenced";
	inbox_source *s = NULL;
	log_t l = {0};
	ASSERT_OK(make_topic(topic, 2));
	ASSERT_OK(produce_range(topic, 2, 0, 10));
	ASSERT_OK(open_src(&s, topic, "g-fenced", "&instance_id=fence-me", 100,
	                   1024 * 1024));
	drain(s, &l, 10, applied, NULL, 15000);
	ASSERT_EQ(l.len, 10);
	ASSERT_EQ(rd_kafka_test_fatal_error(
	              ((kafka_source *)s)->rk,
	              RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID, "test: fenced"),
	          RD_KAFKA_RESP_ERR_NO_ERROR);
	int rc = INBOX_OK;
	int64_t end = now_ms() + 5000;
	while (rc != INBOX_ERR_CONFIG && now_ms() < end) {
		inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
		size_t n = 0;
		rc = inbox_source_poll(s, d, 8, &n, 100, NULL);
		ASSERT_EQ(n, 0);
	}
	ASSERT_EQ(rc, INBOX_ERR_CONFIG);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "\"fence-me\"");
	ASSERT_CONTAINS(inbox_source_errmsg(s), "instance_id");
	inbox_source_close(s);
	free(l.v);
}

/* ------------------------------------------------------------------ */
/* End to end: Kafka -> inbox_run -> store                               */
/* ------------------------------------------------------------------ */

#define E2E_N    200 /* distinct messages */
#define E2E_DUPS 20  /* producer-retry copies (same id, same payload) */

typedef struct e2e {
	int retried;  /* the handler's one RETRY happened */
	long settled; /* distinct positions settled as ackable */
	long applied;
	unsigned char done[3][128]; /* [partition][offset] settled */
	volatile sig_atomic_t stop;
} e2e;

static int e2e_handler(inbox_txn *t, const inbox_msg *m, void *payload)
{
	e2e *st = payload;
	const char *id = inbox_msg_id(m);
	if (!st->retried && id && strcmp(id, "m-7") == 0) {
		st->retried = 1;
		inbox_txn_set_reason(t, "test: transient");
		return INBOX_HANDLER_RETRY;
	}
	const char *params[1] = {id};
	if (inbox_txn_exec(t,
	                   "CREATE TABLE IF NOT EXISTS kafka_effects (id TEXT)",
	                   0, NULL, NULL) != INBOX_OK ||
	    inbox_txn_exec(t, "INSERT INTO kafka_effects (id) VALUES ($1)", 1,
	                   params, NULL) != INBOX_OK)
		return INBOX_HANDLER_RETRY;
	return INBOX_HANDLER_OK;
}

static void e2e_on_batch(const inbox_delivery *d, const inbox_result *res,
                         size_t n, void *payload)
{
	e2e *st = payload;
	/* A message after a RETRY in its partition is redelivered even
	 * though it committed: count positions, not results. */
	for (size_t i = 0; i < n; i++) {
		char topic[64];
		int p = -1;
		long long o = -1;
		sscanf(d[i].position, "%63[^/]/%d/%lld", topic, &p, &o);
		if (inbox_outcome_ackable(res[i].outcome) && p >= 0 && p < 3 &&
		    o >= 0 && o < 128 && !st->done[p][o]) {
			st->done[p][o] = 1;
			st->settled++;
		}
		if (res[i].outcome == INBOX_APPLIED)
			st->applied++;
	}
	if (st->settled >= E2E_N + E2E_DUPS)
		st->stop = 1;
}

/* rows and distinct ids in kafka_effects */
static int count_rows(const char *store_url, long *rows, long *distinct)
{
	const char *sql = "SELECT COUNT(*), COUNT(DISTINCT id) FROM "
	                  "kafka_effects";
	*rows = *distinct = -1;
	if (strncmp(store_url, "sqlite:", 7) == 0) {
		sqlite3 *h;
		sqlite3_stmt *st;
		if (sqlite3_open(store_url + 7, &h) != SQLITE_OK)
			return -1;
		if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
			if (sqlite3_step(st) == SQLITE_ROW) {
				*rows = sqlite3_column_int64(st, 0);
				*distinct = sqlite3_column_int64(st, 1);
			}
			sqlite3_finalize(st);
		}
		sqlite3_close(h);
		return *rows < 0 ? -1 : 0;
	}
	PGconn *pg = PQconnectdb(store_url);
	if (PQstatus(pg) == CONNECTION_OK) {
		PGresult *r = PQexec(pg, sql);
		if (PQresultStatus(r) == PGRES_TUPLES_OK) {
			*rows = atol(PQgetvalue(r, 0, 0));
			*distinct = atol(PQgetvalue(r, 0, 1));
		}
		PQclear(r);
	}
	PQfinish(pg);
	return *rows < 0 ? -1 : 0;
}

static void pg_drop_effects(const char *url)
{
	PGconn *pg = PQconnectdb(url);
	if (PQstatus(pg) == CONNECTION_OK) {
		PQclear(PQexec(pg, "SET client_min_messages = warning"));
		PQclear(PQexec(pg, "DROP TABLE IF EXISTS kafka_effects"));
	}
	PQfinish(pg);
}

static void run_e2e(const char *store_url, const char *topic)
{
	inbox_store *st = NULL;
	inbox_consumer *c = NULL;
	inbox_source *src = NULL;
	e2e state;
	memset(&state, 0, sizeof(state));
	char err[256] = "";
	ASSERT_OK(make_topic(topic, 3));
	ASSERT_OK(produce_range(topic, 3, 0, E2E_N));
	/* producer retries: the same messages again */
	ASSERT_OK(produce_range(topic, 3, 0, E2E_DUPS));
	int rc = inbox_store_open(&st, store_url, NULL);
	if (rc != INBOX_OK) {
		TEST_FAIL_("store open: %s: %s", inbox_err_name(rc),
		           st ? inbox_store_errmsg(st) : "");
		inbox_store_close(st);
		return;
	}
	/* one consumer per run: a reused database keeps older records */
	char name[96];
	snprintf(name, sizeof(name), "%s-%ld-%lld", topic, (long)getpid(),
	         (long long)time(NULL));
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = name;
	co.handler = e2e_handler;
	co.handler_payload = &state;
	rc = inbox_consumer_open(&c, st, &co, err, sizeof(err));
	if (rc != INBOX_OK) {
		TEST_FAIL_("consumer open: %s: %s", inbox_err_name(rc), err);
		inbox_store_close(st);
		return;
	}
	rc = open_src(&src, topic, topic, NULL, 100, co.max_payload);
	if (rc != INBOX_OK) {
		TEST_FAIL_("source open: %s", inbox_err_name(rc));
		inbox_source_close(src);
		inbox_consumer_close(c);
		inbox_store_close(st);
		return;
	}
	inbox_runner_options ro = INBOX_RUNNER_OPTIONS_INIT;
	ro.batch_size = 50;
	ro.poll_timeout_ms = 100;
	ro.on_batch = e2e_on_batch;
	ro.payload = &state;
	/* a watchdog: the runner stops by itself once all were settled */
	alarm(40);
	rc = inbox_run(c, src, &ro, &state.stop);
	alarm(0);
	inbox_source_close(src);
	inbox_consumer_close(c);
	inbox_store_close(st);
	ASSERT_OK(rc);
	ASSERT_TRUE(state.retried);
	ASSERT_EQ(state.applied, E2E_N);
	long rows, distinct;
	ASSERT_OK(count_rows(store_url, &rows, &distinct));
	ASSERT_EQ(rows, E2E_N);
	ASSERT_EQ(distinct, E2E_N);
}

TEST(runner_sqlite)
{
	char url[600];
	snprintf(url, sizeof(url), "sqlite:%s/k.db", tmpdir);
	run_e2e(url, "t-e2e-sqlite");
}

TEST(runner_postgres)
{
	const char *pg = getenv("INBOX_TEST_PG_URL");
	if (!pg || !*pg) {
		printf("skip runner_postgres (INBOX_TEST_PG_URL not set)\n");
		return;
	}
	pg_drop_effects(pg);
	run_e2e(pg, "t-e2e-pg");
	pg_drop_effects(pg);
}

int main(int argc, char **argv)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	if (start_cluster() < 0) {
		fprintf(stderr, "cannot start the mock Kafka cluster\n");
		return 1;
	}
	/* argv[1], if given, runs only the tests whose name contains it */
	const char *only = argc > 1 ? argv[1] : NULL;
#define RUN_SOME(name)                                                         \
	if (!only || strstr(#name, only))                                      \
	RUN(name)
	RUN_SOME(bad_url);
	RUN_SOME(each_once_and_committed);
	RUN_SOME(delivery_fields);
	RUN_SOME(retry_redelivers_in_order);
	RUN_SOME(failed_batch_redelivered);
	RUN_SOME(group_split_and_handover);
	RUN_SOME(group_split_and_handover_eager);
	RUN_SOME(broker_outage);
	RUN_SOME(instance_ids);
	RUN_SOME(close_before_first_assignment);
	RUN_SOME(fenced_member_stops);
	RUN_SOME(runner_sqlite);
	RUN_SOME(runner_postgres);
	stop_cluster();
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return test_summary();
}
