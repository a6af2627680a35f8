/*
 * The source conformance suite: the poll/settle contract (kept once, in
 * src/core/source.c) and what every source promises about acks and
 * redelivery, run through the public API against one source kind
 * (argv[1]: jsonl, kafka, amqp, redis, nats, http). CTest runs it once per
 * source. The brokers are the suite's (tests/run-suite.sh starts them and
 * exports INBOX_TEST_{AMQP,REDIS,NATS}_URL); Kafka is librdkafka's
 * in-process mock cluster. A missing server is a failure, never a skip.
 * HTTP has no broker: a message is a client (libcurl, a thread each) that
 * posts it until it gets an answer that is not 503 or a lost connection,
 * the way a webhook provider retries, so "redelivered" is its retry.
 *
 * Each test gets a fresh place (file, topic, queue, stream) holding the
 * messages it publishes: payloads {"id":"m-N"}, told apart by N.
 */
#include <stdarg.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <hiredis/hiredis.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <nats/nats.h>

#include <inbox/source.h>

#include "../clock.h"
#include "../kafka_mock.h"
#include "test.h"

#define MAX_PAYLOAD 256 /* the sources' max_payload here */
#define RETRY_MS    200 /* their retry_delay_ms */

static int seq;        /* places made so far */
static char tag[64];   /* unique per run */
static char url[1024]; /* the source URL of the current place */

/* ---- one driver per source ---- */

typedef struct driver {
	const char *kind;
	int (*init)(void);
	void (*fini)(void);
	/* A fresh, empty place; sets url. */
	int (*fresh)(void);
	/* Publish a message to the current place: payload text, and the
	 * broker's id of the message (id_len bytes; NULL: none). */
	int (*publish)(const char *payload, const char *id, size_t id_len);
	/* The sources that take an id from the broker (JSONL has none). */
	int broker_ids;
	/* What the source cannot take is refused to its sender at once
	 * (HTTP: 413), never handed over: how many were (NULL: none). */
	int (*refused_at_door)(void);
} driver;

/* ---- JSONL: a file, followed, with its checkpoint ---- */

static char jl_dir[] = "/tmp/inbox-srcconf-XXXXXX";
static char jl_path[300];

static int jl_init(void)
{
	return mkdtemp(jl_dir) ? 0 : -1;
}

static void jl_fini(void)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", jl_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  cannot remove %s\n", jl_dir);
}

static int jl_fresh(void)
{
	snprintf(jl_path, sizeof(jl_path), "%s/p%d.jsonl", jl_dir, seq);
	FILE *f = fopen(jl_path, "w");
	if (!f)
		return -1;
	fclose(f);
	snprintf(url, sizeof(url), "jsonl:%s?follow=1&checkpoint=%s.ckpt",
	         jl_path, jl_path);
	return 0;
}

static int jl_publish(const char *payload, const char *id, size_t id_len)
{
	(void)id;
	(void)id_len;
	FILE *f = fopen(jl_path, "a");
	if (!f)
		return -1;
	int ok = fprintf(f, "%s\n", payload) > 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* ---- Kafka: librdkafka's mock cluster, one partition a topic ---- */

static char topic[96];

static int kf_init(void)
{
	static const char *const conf[] = {"linger.ms", "5", NULL};
	return kafka_mock_start(1, conf);
}

static void kf_fini(void)
{
	kafka_mock_stop();
}

static int kf_fresh(void)
{
	snprintf(topic, sizeof(topic), "%s-%d", tag, seq);
	if (rd_kafka_mock_topic_create(mock, topic, 1, 1) !=
	    RD_KAFKA_RESP_ERR_NO_ERROR)
		return -1;
	snprintf(url, sizeof(url),
	         "kafka://%s/%s?group=g-%s&id_header=message-id"
	         "&rdkafka.session.timeout.ms=3000"
	         "&rdkafka.heartbeat.interval.ms=300&rdkafka.log_level=3",
	         bootstrap, topic, topic);
	return 0;
}

static int kf_publish(const char *payload, const char *id, size_t id_len)
{
	rd_kafka_resp_err_t err =
	    id ? rd_kafka_producev(
	             producer, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
	             RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
	             RD_KAFKA_V_VALUE((void *)payload, strlen(payload)),
	             RD_KAFKA_V_HEADER("message-id", id, (ssize_t)id_len),
	             RD_KAFKA_V_END)
	       : rd_kafka_producev(
	             producer, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
	             RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
	             RD_KAFKA_V_VALUE((void *)payload, strlen(payload)),
	             RD_KAFKA_V_END);
	if (err)
		return -1;
	return rd_kafka_flush(producer, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR
	           ? 0
	           : -1;
}

/* ---- RabbitMQ: a classic durable queue, retry by requeue ---- */

static const char *AMQP_URL;
static amqp_connection_state_t pc;
static char queue[96];

static int am_init(void)
{
	AMQP_URL = getenv("INBOX_TEST_AMQP_URL");
	if (!AMQP_URL || !*AMQP_URL) {
		fprintf(stderr, "INBOX_TEST_AMQP_URL is not set; run through "
		                "tests/run-suite.sh\n");
		return -1;
	}
	char *copy = strdup(AMQP_URL);
	struct amqp_connection_info ci;
	int ok = 0;
	if (!copy || amqp_parse_url(copy, &ci) != AMQP_STATUS_OK)
		goto out;
	pc = amqp_new_connection();
	amqp_socket_t *sock = amqp_tcp_socket_new(pc);
	if (!sock || amqp_socket_open(sock, ci.host, ci.port) != AMQP_STATUS_OK)
		goto out;
	if (amqp_login(pc, ci.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN,
	               ci.user, ci.password)
	        .reply_type != AMQP_RESPONSE_NORMAL)
		goto out;
	amqp_channel_open(pc, 1);
	ok = amqp_get_rpc_reply(pc).reply_type == AMQP_RESPONSE_NORMAL;
out:
	free(copy);
	if (!ok)
		fprintf(stderr, "cannot connect to RabbitMQ at %s\n", AMQP_URL);
	return ok ? 0 : -1;
}

static void am_fini(void)
{
	for (int i = 1; pc && i <= seq; i++) {
		char q[96];
		snprintf(q, sizeof(q), "%s-%d", tag, i);
		amqp_queue_delete(pc, 1, amqp_cstring_bytes(q), 0, 0);
	}
	if (pc) {
		amqp_channel_close(pc, 1, AMQP_REPLY_SUCCESS);
		amqp_connection_close(pc, AMQP_REPLY_SUCCESS);
		amqp_destroy_connection(pc);
	}
}

static int am_fresh(void)
{
	snprintf(queue, sizeof(queue), "%s-%d", tag, seq);
	amqp_queue_declare(pc, 1, amqp_cstring_bytes(queue), 0, 1, 0, 0,
	                   amqp_empty_table);
	if (amqp_get_rpc_reply(pc).reply_type != AMQP_RESPONSE_NORMAL)
		return -1;
	snprintf(url, sizeof(url), "%s/%s?retry=requeue", AMQP_URL, queue);
	return 0;
}

static int am_publish(const char *payload, const char *id, size_t id_len)
{
	amqp_basic_properties_t props;
	memset(&props, 0, sizeof(props));
	props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
	props.delivery_mode = 2;
	if (id) {
		props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
		props.message_id.bytes = (void *)id;
		props.message_id.len = id_len;
	}
	amqp_bytes_t b = {strlen(payload), (void *)payload};
	if (amqp_basic_publish(pc, 1, amqp_cstring_bytes(""),
	                       amqp_cstring_bytes(queue), 0, 0, &props,
	                       b) != AMQP_STATUS_OK)
		return -1;
	/* A round trip: the broker has it before we poll. */
	amqp_queue_declare(pc, 1, amqp_cstring_bytes(queue), 1, 0, 0, 0,
	                   amqp_empty_table);
	return amqp_get_rpc_reply(pc).reply_type == AMQP_RESPONSE_NORMAL ? 0
	                                                                 : -1;
}

/* ---- Redis: a stream, one named member (a restart is that member) ---- */

static const char *REDIS_URL;
static redisContext *rc;
static char stream[96];

static int rd_init(void)
{
	char host[128];
	int port;
	REDIS_URL = getenv("INBOX_TEST_REDIS_URL");
	if (!REDIS_URL || !*REDIS_URL ||
	    sscanf(REDIS_URL, "redis://%127[^:]:%d", host, &port) != 2) {
		fprintf(stderr, "INBOX_TEST_REDIS_URL is not set; run through "
		                "tests/run-suite.sh\n");
		return -1;
	}
	struct timeval tv = {5, 0};
	rc = redisConnectWithTimeout(host, port, tv);
	if (!rc || rc->err) {
		fprintf(stderr, "cannot connect to Redis at %s\n", REDIS_URL);
		return -1;
	}
	return 0;
}

static void rd_fini(void)
{
	for (int i = 1; rc && i <= seq; i++) {
		redisReply *r = redisCommand(rc, "DEL %s-%d", tag, i);
		if (r)
			freeReplyObject(r);
	}
	if (rc)
		redisFree(rc);
}

static int rd_fresh(void)
{
	snprintf(stream, sizeof(stream), "%s-%d", tag, seq);
	snprintf(url, sizeof(url), "%s/%s?group=g&consumer=a&claim_idle=60000",
	         REDIS_URL, stream);
	return 0;
}

static int rd_publish(const char *payload, const char *id, size_t id_len)
{
	redisReply *r =
	    id ? redisCommand(rc, "XADD %s * payload %s id %b", stream, payload,
	                      id, id_len)
	       : redisCommand(rc, "XADD %s * payload %s", stream, payload);
	int ok = r && r->type == REDIS_REPLY_STRING;
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

/* ---- NATS: a JetStream stream and a durable consumer ---- */

static const char *NATS_URL;
static natsConnection *nc;
static jsCtx *js;
static char nstream[96];

static int nt_init(void)
{
	NATS_URL = getenv("INBOX_TEST_NATS_URL");
	if (!NATS_URL || !*NATS_URL) {
		fprintf(stderr, "INBOX_TEST_NATS_URL is not set; run through "
		                "tests/run-suite.sh\n");
		return -1;
	}
	if (natsConnection_ConnectTo(&nc, NATS_URL) != NATS_OK ||
	    natsConnection_JetStream(&js, nc, NULL) != NATS_OK) {
		fprintf(stderr, "cannot connect to NATS at %s\n", NATS_URL);
		return -1;
	}
	return 0;
}

static void nt_fini(void)
{
	for (int i = 1; js && i <= seq; i++) {
		char s[96];
		snprintf(s, sizeof(s), "%s_%d", tag, i);
		js_DeleteStream(js, s, NULL, NULL);
	}
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	nats_Close();
}

static int nt_fresh(void)
{
	/* Stream names hold no '-' or '.'. */
	snprintf(nstream, sizeof(nstream), "%s_%d", tag, seq);
	for (char *p = nstream; *p; p++)
		if (*p == '-')
			*p = '_';
	jsStreamConfig cfg;
	jsStreamConfig_Init(&cfg);
	char subj[128];
	snprintf(subj, sizeof(subj), "%s.>", nstream);
	const char *subjects[1] = {subj};
	cfg.Name = nstream;
	cfg.Subjects = subjects;
	cfg.SubjectsLen = 1;
	jsStreamInfo *si = NULL;
	if (js_AddStream(&si, js, &cfg, NULL, NULL) != NATS_OK)
		return -1;
	jsStreamInfo_Destroy(si);
	snprintf(url, sizeof(url), "%s/%s?durable=d1&ack_wait=1s", NATS_URL,
	         nstream);
	return 0;
}

static int nt_publish(const char *payload, const char *id, size_t id_len)
{
	char subj[128], idz[64];
	natsMsg *m = NULL;
	jsPubAck *pa = NULL;
	snprintf(subj, sizeof(subj), "%s.orders", nstream);
	if (natsMsg_Create(&m, subj, NULL, payload, (int)strlen(payload)) !=
	    NATS_OK)
		return -1;
	if (id) {
		snprintf(idz, sizeof(idz), "%.*s", (int)id_len, id);
		natsMsgHeader_Set(m, "Nats-Msg-Id", idz);
	}
	natsStatus s = js_PublishMsg(&pa, js, m, NULL, NULL);
	jsPubAck_Destroy(pa);
	natsMsg_Destroy(m);
	return s == NATS_OK ? 0 : -1;
}

/* ---- HTTP: a client thread per message, retrying like a provider ---- */

static int hp_port;
static char hp_url[128];
static pthread_mutex_t hp_mu = PTHREAD_MUTEX_INITIALIZER;
static int hp_413; /* answers 413 seen by the clients */
static pthread_t hp_threads[64];
static int hp_nthreads;

static int hp_init(void)
{
	return curl_global_init(CURL_GLOBAL_ALL) == CURLE_OK ? 0 : -1;
}

static void hp_fini(void)
{
	for (int i = 0; i < hp_nthreads; i++)
		pthread_join(hp_threads[i], NULL);
	curl_global_cleanup();
}

/* A free port now (the source is opened, closed and opened again on it). */
static int hp_fresh(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {0};
	socklen_t len = sizeof(a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	hp_port = ntohs(a.sin_port);
	snprintf(hp_url, sizeof(hp_url), "http://127.0.0.1:%d/in", hp_port);
	snprintf(url, sizeof(url),
	         "http://127.0.0.1:%d/in?mode=api&retry_after=1s", hp_port);
	return 0;
}

typedef struct hp_msg {
	char url[128];
	char key[32];
	char *body;
} hp_msg;

static size_t hp_sink(char *p, size_t size, size_t n, void *payload)
{
	(void)p;
	(void)payload;
	return size * n;
}

/* Post until an answer that is not 503 nor a lost connection, for 30 s
 * at most. */
static void *hp_client(void *arg)
{
	hp_msg *m = arg;
	CURL *h = curl_easy_init();
	struct curl_slist *hd = NULL;
	char kh[64];
	snprintf(kh, sizeof(kh), "Idempotency-Key: %s", m->key);
	hd = curl_slist_append(hd, kh);
	int64_t end = now_ms() + 30000;
	while (h && now_ms() < end) {
		long code = 0;
		curl_easy_setopt(h, CURLOPT_URL, m->url);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, m->body);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 20000L);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, hp_sink);
		if (curl_easy_perform(h) == CURLE_OK)
			curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
		if (code == 413) {
			pthread_mutex_lock(&hp_mu);
			hp_413++;
			pthread_mutex_unlock(&hp_mu);
		}
		if (code != 0 && code != 503)
			break;
		usleep(50 * 1000);
	}
	curl_slist_free_all(hd);
	curl_easy_cleanup(h);
	free(m->body);
	free(m);
	return NULL;
}

static int hp_publish(const char *payload, const char *id, size_t id_len)
{
	(void)id;
	(void)id_len;
	static int nkey;
	hp_msg *m = calloc(1, sizeof(*m));
	if (!m || !(m->body = strdup(payload)) ||
	    hp_nthreads == (int)(sizeof(hp_threads) / sizeof(*hp_threads))) {
		if (m)
			free(m->body);
		free(m);
		return -1;
	}
	snprintf(m->url, sizeof(m->url), "%s", hp_url);
	snprintf(m->key, sizeof(m->key), "k-%d-%d", seq, ++nkey);
	return pthread_create(&hp_threads[hp_nthreads++], NULL, hp_client, m)
	           ? -1
	           : 0;
}

static int hp_refused(void)
{
	pthread_mutex_lock(&hp_mu);
	int n = hp_413;
	pthread_mutex_unlock(&hp_mu);
	return n;
}

static const driver drivers[] = {
    {"jsonl", jl_init, jl_fini, jl_fresh, jl_publish, 0, NULL},
    {"kafka", kf_init, kf_fini, kf_fresh, kf_publish, 1, NULL},
    {"amqp", am_init, am_fini, am_fresh, am_publish, 1, NULL},
    {"redis", rd_init, rd_fini, rd_fresh, rd_publish, 1, NULL},
    {"nats", nt_init, nt_fini, nt_fresh, nt_publish, 1, NULL},
    {"http", hp_init, hp_fini, hp_fresh, hp_publish, 0, hp_refused},
};
static const driver *drv;

/* ---- helpers over the public API ---- */

static int fresh(void)
{
	seq++;
	int r = drv->fresh();
	if (r < 0)
		fprintf(stderr, "  cannot make place %d\n", seq);
	return r;
}

static int put(int n)
{
	char p[64];
	snprintf(p, sizeof(p), "{\"id\":\"m-%d\"}", n);
	return drv->publish(p, NULL, 0);
}

static inbox_source *open_src(void)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "conformance";
	o.max_batch = 8;
	o.retry_delay_ms = RETRY_MS;
	o.max_payload = MAX_PAYLOAD;
	inbox_source *s = NULL;
	int r = inbox_source_open(&s, url, &o);
	if (r != INBOX_OK) {
		fprintf(stderr, "  open %s: %s: %s\n", url, inbox_err_name(r),
		        inbox_source_errmsg(s));
		inbox_source_close(s);
		return NULL;
	}
	return s;
}

/* The message number of a delivery ({"id":"m-N"}), -1 if none. */
static int num(const inbox_delivery *d)
{
	char buf[MAX_PAYLOAD + 2];
	size_t len =
	    d->payload_len < sizeof(buf) - 1 ? d->payload_len : sizeof(buf) - 1;
	memcpy(buf, d->payload, len);
	buf[len] = '\0';
	int n = -1;
	const char *p = strstr(buf, "\"m-");
	if (p)
		sscanf(p, "\"m-%d\"", &n);
	return n;
}

/* Why the source refused a delivery, or NULL. (The mark in the id
 * until inbox_delivery has a field of its own for it.) */
static const char *refusal(const inbox_delivery *d)
{
#ifdef INBOX_DELIVERY_REFUSED
	return d->id && d->id[0] == INBOX_DELIVERY_REFUSED ? d->id + 1 : NULL;
#else
	return d->refused;
#endif
}

/* Poll until a batch comes (or ms passed); its size, 0 if none. */
static size_t poll_batch(inbox_source *s, inbox_delivery *d, size_t max, int ms)
{
	int64_t end = now_ms() + ms;
	size_t n = 0;
	do {
		int r = inbox_source_poll(s, d, max, &n, 200, NULL);
		if (r != INBOX_OK) {
			fprintf(stderr, "  poll: %s: %s\n", inbox_err_name(r),
			        inbox_source_errmsg(s));
			n = 0;
		}
	} while (n == 0 && now_ms() < end);
	return n;
}

static void outcomes(inbox_result *res, size_t n, inbox_outcome o)
{
	TEST_RESULTS_INIT(res, n);
	for (size_t i = 0; i < n; i++)
		res[i].outcome = o;
}

/* What a run of polls saw: deliveries per message number. */
#define MAXNUM 16
typedef struct tally {
	int seen[MAXNUM];
	int other; /* not one of ours */
} tally;

/* Poll for ms, settling every batch with `decide(number)`; stop early
 * once every number in want[] (terminated by -1) was seen, after a quiet
 * `linger` ms more. */
static void drain(inbox_source *s, tally *t, int ms, const int *want,
                  int linger, inbox_outcome (*decide)(int))
{
	int64_t end = now_ms() + ms, done_at = 0;
	while (now_ms() < end) {
		inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
		inbox_result res[8];
		size_t n = 0;
		int r = inbox_source_poll(s, d, 8, &n, 100, NULL);
		if (r != INBOX_OK)
			fprintf(stderr, "  poll: %s: %s\n", inbox_err_name(r),
			        inbox_source_errmsg(s));
		for (size_t i = 0; i < n; i++) {
			int k = num(&d[i]);
			if (k >= 0 && k < MAXNUM)
				t->seen[k]++;
			else
				t->other++;
			res[i] = (inbox_result)INBOX_RESULT_INIT;
			res[i].outcome = decide ? decide(k) : INBOX_APPLIED;
		}
		r = inbox_source_settle(s, d, res, n);
		if (r != INBOX_OK)
			fprintf(stderr, "  settle: %s: %s\n", inbox_err_name(r),
			        inbox_source_errmsg(s));
		int all = 1;
		for (const int *w = want; *w >= 0; w++)
			all &= t->seen[*w] > 0;
		if (all && !done_at)
			done_at = now_ms();
		if (all && now_ms() - done_at >= linger)
			break;
	}
}

static const int NONE[] = {-1};

/* ---- the contract ---- */

/* Settle before any poll: nothing to settle is fine, a delivery is not. */
TEST(settle_without_poll_is_state)
{
	ASSERT_OK(fresh());
	inbox_source *s = open_src();
	ASSERT_TRUE(s);
	inbox_delivery d[2] = {INBOX_DELIVERY_INIT};
	ASSERT_OK(inbox_source_settle(s, d, NULL, 0));
	ASSERT_EQ(inbox_source_settle(s, d, NULL, 1), INBOX_ERR_STATE);
	ASSERT_TRUE(strstr(inbox_source_errmsg(s), "without a polled"));
	inbox_source_close(s);
}

/* One batch in hand at a time; a batch is settled once. */
TEST(poll_settle_order)
{
	ASSERT_OK(fresh());
	ASSERT_OK(put(1));
	inbox_source *s = open_src();
	ASSERT_TRUE(s);
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT},
	               e[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4];
	size_t n = poll_batch(s, d, 4, 15000);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(num(&d[0]), 1);
	size_t m = 9;
	ASSERT_EQ(inbox_source_poll(s, e, 4, &m, 10, NULL), INBOX_ERR_STATE);
	ASSERT_EQ(m, 0);
	ASSERT_TRUE(strstr(inbox_source_errmsg(s), "before the previous"));
	/* the batch is still in hand, and settles */
	outcomes(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(s, d, res, n));
	/* twice: nothing in hand any more */
	ASSERT_EQ(inbox_source_settle(s, d, res, n), INBOX_ERR_STATE);
	/* an empty poll leaves nothing to settle */
	ASSERT_OK(inbox_source_poll(s, e, 4, &m, 50, NULL));
	ASSERT_EQ(m, 0);
	ASSERT_OK(inbox_source_settle(s, e, NULL, 0));
	ASSERT_EQ(inbox_source_settle(s, d, res, 1), INBOX_ERR_STATE);
	inbox_source_close(s);
}

/* Settling deliveries that are not the batch in hand (another batch's,
 * a part of it) acks nothing: INVALID, and the batch in hand comes
 * again. */
TEST(settle_of_another_batch_is_invalid)
{
	ASSERT_OK(fresh());
	ASSERT_OK(put(1));
	ASSERT_OK(put(2));
	inbox_source *s = open_src();
	ASSERT_TRUE(s);
	inbox_delivery d1[1] = {INBOX_DELIVERY_INIT},
	               d2[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4];
	ASSERT_EQ(poll_batch(s, d1, 1, 15000), 1);
	int first = num(&d1[0]);
	ASSERT_TRUE(first == 1 || first == 2);
	inbox_delivery old = d1[0];
	outcomes(res, 1, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(s, d1, res, 1));
	size_t n = poll_batch(s, d2, 1, 15000);
	ASSERT_EQ(n, 1);
	int second = num(&d2[0]);
	ASSERT_EQ(second, 3 - first);
	/* the old batch's delivery, though it looks like this one's */
	ASSERT_EQ(inbox_source_settle(s, &old, res, 1), INBOX_ERR_INVALID);
	ASSERT_TRUE(strstr(inbox_source_errmsg(s), "does not match"));
	/* the batch was settled (redelivered), not left in hand */
	ASSERT_EQ(inbox_source_settle(s, d2, res, 1), INBOX_ERR_STATE);
	/* it comes again; then a part of a batch is refused the same way */
	tally t = {{0}, 0};
	n = poll_batch(s, d2, 4, 15000);
	ASSERT_TRUE(n >= 1);
	for (size_t i = 0; i < n; i++)
		t.seen[num(&d2[i]) & (MAXNUM - 1)]++;
	ASSERT_EQ(t.seen[second], 1);
	ASSERT_EQ(t.seen[first], 0);
	if (n == 1) { /* a batch of one has no part: settle none of it */
		ASSERT_EQ(inbox_source_settle(s, d2, res, 0),
		          INBOX_ERR_INVALID);
	} else {
		ASSERT_EQ(inbox_source_settle(s, d2, res, n - 1),
		          INBOX_ERR_INVALID);
	}
	memset(&t, 0, sizeof(t));
	int want[] = {second, -1};
	drain(s, &t, 15000, want, 300, NULL);
	ASSERT_EQ(t.seen[first], 0);
	ASSERT_TRUE(t.seen[second] >= 1);
	inbox_source_close(s);
}

/* Nothing there: poll returns nothing, no eof, within its timeout; it
 * waits rather than spins. ("Up to" timeout_ms: one poll may come back
 * early, e.g. NATS when the expiry of the last pull request is answered
 * late, so five in a row are timed.) */
TEST(empty_poll_waits_its_timeout)
{
	ASSERT_OK(fresh());
	inbox_source *s = open_src();
	ASSERT_TRUE(s);
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	size_t n = 9;
	int eof = 9;
	/* Warm up (a Kafka member joins its group on its first polls). */
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 300, &eof));
	ASSERT_EQ(n, 0);
	int64_t t0 = now_ms();
	for (int i = 0; i < 5; i++) {
		int64_t t1 = now_ms();
		ASSERT_OK(inbox_source_poll(s, d, 4, &n, 200, &eof));
		ASSERT_EQ(n, 0);
		ASSERT_EQ(eof, 0);
		if (now_ms() - t1 > 3000)
			TEST_FAIL_("a 200 ms poll took %lld ms",
			           (long long)(now_ms() - t1));
		ASSERT_OK(inbox_source_settle(s, d, NULL, 0));
	}
	int64_t took = now_ms() - t0;
	if (took < 400)
		TEST_FAIL_("five 200 ms polls took %lld ms (no wait)",
		           (long long)took);
	inbox_source_close(s);
}

static inbox_outcome ack1_retry2(int k)
{
	return k == 2 ? INBOX_RETRY : INBOX_APPLIED;
}

/* An acked message is not delivered again after a restart; one that
 * was not acked (RETRY) is. */
TEST(ack_durable_retry_redelivered_after_restart)
{
	ASSERT_OK(fresh());
	ASSERT_OK(put(1));
	ASSERT_OK(put(2));
	inbox_source *s = open_src();
	ASSERT_TRUE(s);
	tally t = {{0}, 0};
	int want[] = {1, 2, -1};
	drain(s, &t, 15000, want, 0, ack1_retry2);
	ASSERT_EQ(t.seen[1], 1);
	ASSERT_TRUE(t.seen[2] >= 1);
	inbox_source_close(s);
	ASSERT_TRUE((s = open_src()) != NULL);
	memset(&t, 0, sizeof(t));
	int want2[] = {2, -1};
	drain(s, &t, 15000, want2, 500, NULL);
	ASSERT_TRUE(t.seen[2] >= 1);
	ASSERT_EQ(t.seen[1], 0);
	ASSERT_EQ(t.other, 0);
	inbox_source_close(s);
}

/* Closing with a batch in hand: it is the broker's again. */
TEST(close_with_unsettled_redelivers)
{
	ASSERT_OK(fresh());
	ASSERT_OK(put(1));
	inbox_source *s = open_src();
	ASSERT_TRUE(s);
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	size_t n = poll_batch(s, d, 4, 15000);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(num(&d[0]), 1);
	inbox_source_close(s); /* unsettled */
	ASSERT_TRUE((s = open_src()) != NULL);
	tally t = {{0}, 0};
	int want[] = {1, -1};
	drain(s, &t, 15000, want, 300, NULL);
	ASSERT_EQ(t.seen[1], 1);
	inbox_source_close(s);
}

/* Deliveries a source cannot hand over whole (an over-size payload; a
 * broker id that is not UTF-8) come refused, with a reason, and are
 * answered like any other: dead-lettered, acked, not delivered again. */
TEST(refused_deliveries_are_answered)
{
	ASSERT_OK(fresh());
	char big[MAX_PAYLOAD + 64];
	int len = snprintf(big, sizeof(big), "{\"id\":\"m-1\",\"pad\":\"");
	memset(big + len, 'x', MAX_PAYLOAD);
	snprintf(big + len + MAX_PAYLOAD, sizeof(big) - len - MAX_PAYLOAD,
	         "\"}");
	ASSERT_OK(drv->publish(big, NULL, 0));
	int nwant = 1;
	if (drv->broker_ids) {
		ASSERT_OK(drv->publish("{\"id\":\"m-2\"}", "bad\xff\xfe", 5));
		nwant = 2;
	}
	ASSERT_OK(put(3)); /* a good one after them */
	inbox_source *s = open_src();
	ASSERT_TRUE(s);
	int refused = 0, good = 0;
	int64_t end = now_ms() + 15000;
	int want_refused = drv->refused_at_door ? 0 : nwant;
	while ((refused < want_refused || !good ||
	        (drv->refused_at_door && drv->refused_at_door() < nwant)) &&
	       now_ms() < end) {
		inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
		inbox_result res[8];
		size_t n = poll_batch(s, d, 8, 200);
		for (size_t i = 0; i < n; i++) {
			res[i] = (inbox_result)INBOX_RESULT_INIT;
			res[i].outcome = INBOX_APPLIED;
			const char *why = refusal(&d[i]);
			if (why) {
				if (strlen(why) < 10)
					TEST_FAIL_("refused without a reason");
				refused++;
				res[i].outcome = INBOX_DEAD_LETTERED;
			} else if (num(&d[i]) == 3) {
				good++;
			} else {
				TEST_FAIL_("delivery %d not refused",
				           num(&d[i]));
			}
		}
		ASSERT_OK(inbox_source_settle(s, d, res, n));
	}
	if (drv->refused_at_door) {
		/* refused to the sender, never handed over */
		ASSERT_EQ(refused, 0);
		ASSERT_EQ(drv->refused_at_door(), nwant);
	} else {
		ASSERT_EQ(refused, nwant);
	}
	ASSERT_EQ(good, 1);
	inbox_source_close(s);
	ASSERT_TRUE((s = open_src()) != NULL);
	tally t = {{0}, 0};
	drain(s, &t, 1500, NONE, 0, NULL);
	ASSERT_EQ(t.seen[1] + t.seen[2] + t.seen[3] + t.other, 0);
	inbox_source_close(s);
}

int main(int argc, char **argv)
{
	for (size_t i = 0; argc > 1 && i < sizeof(drivers) / sizeof(*drivers);
	     i++)
		if (strcmp(argv[1], drivers[i].kind) == 0)
			drv = &drivers[i];
	if (!drv) {
		fprintf(stderr, "usage: source_conformance "
		                "jsonl|kafka|amqp|redis|nats|http\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	snprintf(tag, sizeof(tag), "srcconf-%ld-%ld", (long)getpid(),
	         (long)time(NULL));
	if (drv->init() < 0) {
		fprintf(stderr, "source_conformance %s: no server\n",
		        drv->kind);
		drv->fini();
		printf("0 passed, 1 failed\n");
		return 1;
	}
	RUN(settle_without_poll_is_state);
	RUN(poll_settle_order);
	RUN(settle_of_another_batch_is_invalid);
	RUN(empty_poll_waits_its_timeout);
	RUN(ack_durable_retry_redelivered_after_restart);
	RUN(close_with_unsettled_redelivers);
	RUN(refused_deliveries_are_answered);
	drv->fini();
	return test_summary();
}
