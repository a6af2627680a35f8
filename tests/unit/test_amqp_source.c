/*
 * The RabbitMQ source against a real node (started by
 * tests/servers/rabbitmq.sh through run-suite.sh; INBOX_TEST_AMQP_URL):
 * URL errors and password redaction, each message once with id, headers,
 * position and timestamp, a failed batch redelivered with the redelivered
 * flag, RETRY through the TTL retry queue and through requeue, close
 * without settle, the dead-letter exchange, truncation, header
 * conversion, connection loss in settle and in poll, a deleted queue
 * re-declared, batches bounded by max_batch, and end to end through
 * inbox_run with the SQLite store. Queue names are unique per run.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

#include <inbox/source.h>

#include "../clock.h"
#include "source/amqp/amqp_source.h"
#include "test.h"

static const char *AMQP_URL;       /* amqp://guest:guest@127.0.0.1:PORT/%2f */
static amqp_connection_state_t pc; /* the test's own connection */
static char prefix[64];
static char tmpdir[256];
static char *made[64]; /* queues and exchanges to delete at the end */
static int nmade;

/* ------------------------------------------------------------------ */
/* The test's own client                                                 */
/* ------------------------------------------------------------------ */

static int connect_test(void)
{
	char *copy = strdup(AMQP_URL);
	struct amqp_connection_info ci;
	int ok = 0;
	if (!copy || amqp_parse_url(copy, &ci) != AMQP_STATUS_OK)
		goto out;
	pc = amqp_new_connection();
	amqp_socket_t *sock = amqp_tcp_socket_new(pc);
	if (!sock || amqp_socket_open(sock, ci.host, ci.port) != AMQP_STATUS_OK)
		goto out;
	amqp_rpc_reply_t r =
	    amqp_login(pc, ci.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN,
	               ci.user, ci.password);
	if (r.reply_type != AMQP_RESPONSE_NORMAL)
		goto out;
	amqp_channel_open(pc, 1);
	ok = amqp_get_rpc_reply(pc).reply_type == AMQP_RESPONSE_NORMAL;
out:
	free(copy);
	return ok ? 0 : -1;
}

static int rpc_ok(void)
{
	return amqp_get_rpc_reply(pc).reply_type == AMQP_RESPONSE_NORMAL ? 0
	                                                                 : -1;
}

static void name(char *out, size_t len, const char *what)
{
	snprintf(out, len, "%s-%s", prefix, what);
}

static void remember(const char *n)
{
	if (nmade < (int)(sizeof(made) / sizeof(*made)))
		made[nmade++] = strdup(n);
}

static int declare(const char *q)
{
	amqp_queue_declare(pc, 1, amqp_cstring_bytes(q), 0, 1, 0, 0,
	                   amqp_empty_table);
	remember(q);
	return rpc_ok();
}

/* Ready messages in q (-1 if it does not exist: the channel is then
 * reopened). */
static long ready(const char *q)
{
	amqp_queue_declare_ok_t *ok = amqp_queue_declare(
	    pc, 1, amqp_cstring_bytes(q), 1, 0, 0, 0, amqp_empty_table);
	if (ok)
		return (long)ok->message_count;
	amqp_channel_close_ok_t cok = {0};
	amqp_send_method(pc, 1, AMQP_CHANNEL_CLOSE_OK_METHOD, &cok);
	amqp_channel_open(pc, 1);
	return -1;
}

typedef struct pub {
	const char *id;        /* message-id or NULL */
	amqp_table_t *headers; /* or NULL */
	uint64_t timestamp;    /* seconds, 0 = none */
	size_t id_len;         /* bytes of id; 0: strlen(id) */
} pub;

static int publish(const char *q, const char *body, size_t len, const pub *p)
{
	amqp_basic_properties_t props;
	memset(&props, 0, sizeof(props));
	props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
	props.delivery_mode = 2;
	if (p && p->id) {
		props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
		props.message_id = amqp_cstring_bytes(p->id);
		if (p->id_len)
			props.message_id.len = p->id_len;
	}
	if (p && p->headers) {
		props._flags |= AMQP_BASIC_HEADERS_FLAG;
		props.headers = *p->headers;
	}
	if (p && p->timestamp) {
		props._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
		props.timestamp = p->timestamp;
	}
	amqp_bytes_t b = {len, (void *)body};
	return amqp_basic_publish(pc, 1, amqp_cstring_bytes(""),
	                          amqp_cstring_bytes(q), 0, 0, &props,
	                          b) == AMQP_STATUS_OK
	           ? 0
	           : -1;
}

/* Message i: id "m-i", payload {"id":"p-i","n":i}. */
static int publish_range(const char *q, int from, int to)
{
	for (int i = from; i < to; i++) {
		char id[32], body[64];
		snprintf(id, sizeof(id), "m-%d", i);
		int n = snprintf(body, sizeof(body),
		                 "{\"id\":\"p-%d\",\"n\":%d}", i, i);
		pub p = {id, NULL, 0, 0};
		if (publish(q, body, (size_t)n, &p) < 0)
			return -1;
	}
	/* A round trip makes sure the broker has them all. */
	return ready(q) >= 0 ? 0 : -1;
}

static void url_of(char *out, size_t len, const char *q, const char *params)
{
	snprintf(out, len, "%s/%s%s%s", AMQP_URL, q, params ? "?" : "",
	         params ? params : "");
}

static int open_src(inbox_source **s, const char *q, const char *params,
                    size_t max_batch, int retry_delay_ms)
{
	char url[1024];
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "amqp-test";
	o.max_batch = max_batch;
	o.retry_delay_ms = retry_delay_ms;
	url_of(url, sizeof(url), q, params);
	int rc = inbox_source_open(s, url, &o);
	if (rc != INBOX_OK)
		fprintf(stderr, "  (open %s?%s: %s)\n", q, params ? params : "",
		        inbox_source_errmsg(*s));
	return rc;
}

/* What the tests remember of a delivery after settle. */
typedef struct seen {
	char id[64];
	char payload[128];
	char position[128];
	char headers[512];
	int has_headers;
	int64_t ts;
	int32_t count;
} seen;

static void remember_delivery(seen *out, const inbox_delivery *d)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", d->id ? d->id : "(null)");
	snprintf(out->payload, sizeof(out->payload), "%.*s",
	         (int)(d->payload_len < 127 ? d->payload_len : 127),
	         d->payload);
	snprintf(out->position, sizeof(out->position), "%s",
	         d->position ? d->position : "");
	out->has_headers = d->headers != NULL;
	snprintf(out->headers, sizeof(out->headers), "%s",
	         d->headers ? d->headers : "");
	out->ts = d->timestamp_ms;
	out->count = d->delivery_count;
}

/* Poll until `want` deliveries arrived or timeout; settle each batch with
 * `outcome` (0 = settle with res NULL). Returns how many arrived. */
static int collect(inbox_source *s, seen *out, int want, int timeout_ms,
                   inbox_outcome outcome, size_t max)
{
	inbox_delivery d[256] = {INBOX_DELIVERY_INIT};
	inbox_result r[256] = {INBOX_RESULT_INIT};
	int got = 0;
	int64_t end = now_ms() + timeout_ms;
	if (max > 256)
		max = 256;
	while (got < want && now_ms() < end) {
		size_t n = 0;
		int rc = inbox_source_poll(s, d, max, &n, 100, NULL);
		if (rc != INBOX_OK) {
			sleep_ms(50);
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			if (out && got + (int)i < want)
				remember_delivery(&out[got + i], &d[i]);
			r[i] = (inbox_result)INBOX_RESULT_INIT;
			r[i].outcome = outcome;
		}
		if (n)
			inbox_source_settle(s, d, outcome ? r : NULL, n);
		got += (int)n;
	}
	return got;
}

/* Nothing arrives within ms. */
static int quiet(inbox_source *s, int ms)
{
	return collect(s, NULL, 1, ms, INBOX_APPLIED, 10) == 0;
}

/* ------------------------------------------------------------------ */
/* URLs                                                                  */
/* ------------------------------------------------------------------ */

static int open_rc(const char *url, char *err, size_t errlen)
{
	inbox_source *s = NULL;
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "amqp-test";
	int rc = inbox_source_open(&s, url, &o);
	snprintf(err, errlen, "%s", inbox_source_errmsg(s));
	inbox_source_close(s);
	return rc;
}

TEST(url_errors)
{
	static const char *bad[] = {
	    "amqp://127.0.0.1:5672",
	    "amqp://127.0.0.1:5672/",
	    "amqp://127.0.0.1:5672/%2f/",
	    "amqp://127.0.0.1:5672/a/b/c",
	    "amqp://127.0.0.1:99999/q",
	    "amqp://127.0.0.1:x/q",
	    "amqp://:5672/q",
	    "amqp://h/q%zz",
	    "amqp://h/q%00",
	    "amqp://h/q?prefetch=0",
	    "amqp://h/q?prefetch=70000",
	    "amqp://h/q?retry=later",
	    "amqp://h/q?declare=2",
	    "amqp://h/q?nosuch=1",
	    "amqp://h/q?heartbeat",
	    "amqp://h/q?retry_queue=q",
	    "amqp://h/q#frag",
	};
	char err[600];
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		int rc = open_rc(bad[i], err, sizeof(err));
		if (rc != INBOX_ERR_URL)
			TEST_FAIL_("%s: rc %d (%s)", bad[i], rc, err);
		ASSERT_EQ(rc, INBOX_ERR_URL);
		ASSERT_TRUE(strncmp(err, "amqp: ", 6) == 0);
	}
	ASSERT_EQ(open_rc("amqp://h/q?nosuch=1", err, sizeof(err)),
	          INBOX_ERR_URL);
	ASSERT_CONTAINS(err, "nosuch");
}

static void free_parsed(amqp_source *s)
{
	inbox__amqp_url_clear(s);
	memset(s, 0, sizeof(*s));
}

static int parse(amqp_source *s, const char *url)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "amqp-test";
	o.max_batch = 70000;
	memset(s, 0, sizeof(*s));
	return inbox__amqp_parse_url(s, url, &o);
}

TEST(url_parts)
{
	amqp_source s;
	ASSERT_OK(parse(&s, "amqp://h/orders"));
	ASSERT_STREQ(s.host, "h");
	ASSERT_EQ(s.port, 5672);
	ASSERT_STREQ(s.user, "guest");
	ASSERT_STREQ(s.pass, "guest");
	ASSERT_STREQ(s.vhost, "/");
	ASSERT_STREQ(s.queue, "orders");
	ASSERT_STREQ(s.retry_queue, "orders.retry");
	ASSERT_STREQ(s.where, "h:5672/");
	ASSERT_EQ(s.prefetch, 65535); /* 2 x max_batch, capped */
	ASSERT_EQ(s.retry_mode, AMQP_RETRY_TTL);
	ASSERT_EQ(s.declare, 0);
	ASSERT_TRUE(s.dlx == NULL);
	free_parsed(&s);
	/* two batches by default: the next is on its way meanwhile */
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "amqp-test";
	o.max_batch = 100;
	ASSERT_OK(inbox__amqp_parse_url(&s, "amqp://h/orders", &o));
	ASSERT_EQ(s.prefetch, 200);
	free_parsed(&s);
	ASSERT_OK(parse(&s, "amqp://u%3a:p%40ss%2F@[::1]:5673/%2fprod/a%2Fb"
	                    "?prefetch=7&retry=requeue&retry_queue=r%20q"
	                    "&dlx=dead&declare=1&heartbeat=0"
	                    "&connect_timeout_ms=100&confirm_timeout_ms=200"));
	ASSERT_STREQ(s.user, "u:");
	ASSERT_STREQ(s.pass, "p@ss/");
	ASSERT_STREQ(s.host, "::1");
	ASSERT_EQ(s.port, 5673);
	ASSERT_STREQ(s.vhost, "/prod");
	ASSERT_STREQ(s.queue, "a/b");
	ASSERT_STREQ(s.retry_queue, "r q");
	ASSERT_STREQ(s.dlx, "dead");
	ASSERT_STREQ(s.where, "[::1]:5673/prod");
	ASSERT_EQ(s.prefetch, 7);
	ASSERT_EQ(s.retry_mode, AMQP_RETRY_REQUEUE);
	ASSERT_EQ(s.declare, 1);
	ASSERT_EQ(s.heartbeat, 0);
	ASSERT_EQ(s.connect_timeout_ms, 100);
	ASSERT_EQ(s.confirm_timeout_ms, 200);
	free_parsed(&s);
	ASSERT_OK(parse(&s, "amqp://h//q?dlx="));
	ASSERT_STREQ(s.vhost, "/");
	ASSERT_TRUE(s.dlx == NULL);
	free_parsed(&s);
	ASSERT_OK(parse(&s, "amqp://h/vh/q"));
	ASSERT_STREQ(s.vhost, "vh");
	ASSERT_STREQ(s.where, "h:5672/vh");
	free_parsed(&s);
}

/* A raw '@', '/', '?' or '#' in the user info, or a second raw '@': the
 * libraries disagree on where the password ends, so it is refused, with
 * a message that shows no part of it. */
TEST(ambiguous_user_info_refused)
{
	static const char *const urls[] = {
	    "amqp://u:Pa55@w0rdX@h/q",  "amqp://u:Pa55/w0rdX@h/q",
	    "amqp://u:Pa55?w0rdX@h/q",  "amqp://u:Pa55#w0rdX@h/q",
	    "amqp://u:Pa55w0rdX@h/q@x", "amqp://u:Pa55[w0rdX]@h/q",
	};
	for (size_t i = 0; i < sizeof(urls) / sizeof(*urls); i++) {
		amqp_source s;
		ASSERT_EQ(parse(&s, urls[i]), INBOX_ERR_URL);
		ASSERT_CONTAINS(s.base.errmsg, "amqp: ");
		ASSERT_CONTAINS(s.base.errmsg, "percent-encode");
		ASSERT_TRUE(strstr(s.base.errmsg, "Pa55") == NULL);
		ASSERT_TRUE(strstr(s.base.errmsg, "w0rd") == NULL);
		free_parsed(&s);
	}
}

TEST(password_never_in_errmsg)
{
	char err[600];
	/* Nothing listens on port 1. */
	int rc = open_rc("amqp://alice:s3cr3tpw@127.0.0.1:1/%2f/q", err,
	                 sizeof(err));
	ASSERT_EQ(rc, INBOX_ERR_CONNECT);
	ASSERT_CONTAINS(err, "127.0.0.1:1/");
	ASSERT_TRUE(strstr(err, "s3cr3tpw") == NULL);
	/* Wrong password on the real broker. */
	char url[700];
	const char *at = strchr(AMQP_URL, '@');
	ASSERT_TRUE(at != NULL);
	snprintf(url, sizeof(url), "amqp://guest:wr0ngpw%s/q", at);
	rc = open_rc(url, err, sizeof(err));
	ASSERT_EQ(rc, INBOX_ERR_CONNECT);
	ASSERT_CONTAINS(err, "login");
	ASSERT_TRUE(strstr(err, "wr0ngpw") == NULL);
}

TEST(missing_queue_and_declare)
{
	char q[96], err[600], url[700];
	name(q, sizeof(q), "missing");
	url_of(url, sizeof(url), q, NULL);
	ASSERT_EQ(open_rc(url, err, sizeof(err)), INBOX_ERR_SOURCE);
	ASSERT_CONTAINS(err, "NOT_FOUND");
	inbox_source *s = NULL;
	remember(q);
	ASSERT_OK(open_src(&s, q, "declare=1", 10, 1000));
	ASSERT_EQ(ready(q), 0);
	inbox_source_close(s);
	/* A retry queue declared with another TTL is refused clearly. */
	ASSERT_OK(open_src(&s, q, "declare=1", 10, 1000));
	inbox_source_close(s);
	s = NULL;
	int rc = open_src(&s, q, "declare=1", 10, 2000);
	ASSERT_EQ(rc, INBOX_ERR_SOURCE);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "PRECONDITION_FAILED");
	inbox_source_close(s);
	char rq[128];
	snprintf(rq, sizeof(rq), "%s.retry", q);
	remember(rq);
}

/* ------------------------------------------------------------------ */
/* Deliveries                                                            */
/* ------------------------------------------------------------------ */

TEST(each_once_with_ids_positions_headers)
{
	char q[96], pos[160];
	name(q, sizeof(q), "once");
	ASSERT_OK(declare(q));
	amqp_table_entry_t e[2];
	e[0].key = amqp_cstring_bytes("k");
	e[0].value.kind = AMQP_FIELD_KIND_UTF8;
	e[0].value.value.bytes = amqp_cstring_bytes("v");
	e[1].key = amqp_cstring_bytes("n");
	e[1].value.kind = AMQP_FIELD_KIND_I32;
	e[1].value.value.i32 = 7;
	amqp_table_t h = {2, e};
	for (int i = 0; i < 30; i++) {
		char id[32], body[64];
		snprintf(id, sizeof(id), "m-%d", i);
		int n = snprintf(body, sizeof(body), "{\"n\":%d}", i);
		pub p = {id, &h, 1700000000, 0};
		ASSERT_OK(publish(q, body, (size_t)n, &p));
	}
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, q, NULL, 10, 1000));
	seen got[30];
	ASSERT_EQ(collect(s, got, 30, 10000, INBOX_APPLIED, 10), 30);
	for (int i = 0; i < 30; i++) {
		char id[32], body[64];
		snprintf(id, sizeof(id), "m-%d", i);
		snprintf(body, sizeof(body), "{\"n\":%d}", i);
		snprintf(pos, sizeof(pos), "%s/%d", q, i + 1);
		ASSERT_STREQ(got[i].id, id);
		ASSERT_STREQ(got[i].payload, body);
		ASSERT_STREQ(got[i].position, pos);
		ASSERT_STREQ(got[i].headers, "{\"k\":\"v\",\"n\":7}");
		ASSERT_EQ(got[i].ts, 1700000000000LL);
		ASSERT_EQ(got[i].count, 1);
	}
	ASSERT_TRUE(quiet(s, 300));
	inbox_source_close(s);
	ASSERT_EQ(ready(q), 0);
	/* Acked means gone: a new source sees nothing. */
	ASSERT_OK(open_src(&s, q, NULL, 10, 1000));
	ASSERT_TRUE(quiet(s, 400));
	inbox_source_close(s);
}

TEST(batches_bounded_by_max_batch)
{
	char q[96];
	name(q, sizeof(q), "batches");
	ASSERT_OK(declare(q));
	ASSERT_OK(publish_range(q, 0, 250));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, q, NULL, 40, 1000));
	inbox_delivery d[64] = {INBOX_DELIVERY_INIT};
	inbox_result r[64] = {INBOX_RESULT_INIT};
	int got = 0, biggest = 0;
	char *ids = calloc(250, 1);
	int64_t end = now_ms() + 20000;
	while (got < 250 && now_ms() < end) {
		size_t n = 0;
		ASSERT_OK(inbox_source_poll(s, d, 40, &n, 200, NULL));
		for (size_t i = 0; i < n; i++) {
			int k = atoi(d[i].id + 2);
			ASSERT_TRUE(k >= 0 && k < 250);
			ASSERT_EQ(ids[k], 0);
			ids[k] = 1;
			r[i] = (inbox_result)INBOX_RESULT_INIT;
			r[i].outcome = i % 2 ? INBOX_DUPLICATE : INBOX_APPLIED;
		}
		if ((int)n > biggest)
			biggest = (int)n;
		if (n)
			ASSERT_OK(inbox_source_settle(s, d, r, n));
		got += (int)n;
	}
	free(ids);
	ASSERT_EQ(got, 250);
	ASSERT_TRUE(biggest <= 40);
	ASSERT_TRUE(quiet(s, 300));
	inbox_source_close(s);
	ASSERT_EQ(ready(q), 0);
}

TEST(failed_batch_redelivered)
{
	char q[96];
	name(q, sizeof(q), "nack");
	ASSERT_OK(declare(q));
	ASSERT_OK(publish_range(q, 0, 5));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, q, NULL, 10, 1000));
	seen a[5], b[5];
	ASSERT_EQ(collect(s, a, 5, 5000, INBOX_OUTCOME_NONE, 10), 5);
	ASSERT_EQ(collect(s, b, 5, 5000, INBOX_APPLIED, 10), 5);
	for (int i = 0; i < 5; i++) {
		ASSERT_EQ(a[i].count, 1);
		ASSERT_EQ(b[i].count, 2);
		ASSERT_STREQ(b[i].id, a[i].id);
		ASSERT_CONTAINS(b[i].position, " redelivered");
	}
	ASSERT_TRUE(quiet(s, 300));
	inbox_source_close(s);
	ASSERT_EQ(ready(q), 0);
}

/* Settle the first delivery of the next batch with `first`, the rest as
 * APPLIED; returns the first's record. */
static int one_round(inbox_source *s, seen *out, inbox_outcome first,
                     int timeout_ms)
{
	inbox_delivery d[16] = {INBOX_DELIVERY_INIT};
	inbox_result r[16] = {INBOX_RESULT_INIT};
	int64_t end = now_ms() + timeout_ms;
	while (now_ms() < end) {
		size_t n = 0;
		if (inbox_source_poll(s, d, 16, &n, 100, NULL) != INBOX_OK ||
		    n == 0)
			continue;
		remember_delivery(out, &d[0]);
		for (size_t i = 0; i < n; i++) {
			r[i] = (inbox_result)INBOX_RESULT_INIT;
			r[i].outcome = i == 0 ? first : INBOX_APPLIED;
		}
		return inbox_source_settle(s, d, r, n) == INBOX_OK ? (int)n
		                                                   : -1;
	}
	return 0;
}

TEST(retry_through_ttl_queue)
{
	char q[96], rq[128];
	name(q, sizeof(q), "ttl");
	snprintf(rq, sizeof(rq), "%s.retry", q);
	remember(rq);
	ASSERT_OK(declare(q));
	ASSERT_OK(publish_range(q, 0, 1));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, q, NULL, 10, 400));
	seen a, b, c;
	ASSERT_EQ(one_round(s, &a, INBOX_RETRY, 5000), 1);
	int64_t t0 = now_ms();
	ASSERT_EQ(a.count, 1);
	ASSERT_EQ(ready(q), 0); /* the original is acked */
	ASSERT_EQ(one_round(s, &b, INBOX_IN_PROGRESS, 5000), 1);
	int64_t dt = now_ms() - t0;
	ASSERT_TRUE(dt >= 350);
	ASSERT_STREQ(b.id, "m-0");
	ASSERT_STREQ(b.payload, a.payload);
	ASSERT_EQ(b.count, 2);
	ASSERT_CONTAINS(b.headers, "\"x-inbox-attempts\":1");
	ASSERT_CONTAINS(b.headers, "\"x-death\":[");
	ASSERT_TRUE(strstr(b.position, "redelivered") == NULL);
	ASSERT_EQ(one_round(s, &c, INBOX_APPLIED, 5000), 1);
	ASSERT_EQ(c.count, 3);
	ASSERT_CONTAINS(c.headers, "\"x-inbox-attempts\":2");
	ASSERT_TRUE(quiet(s, 600));
	inbox_source_close(s);
	ASSERT_EQ(ready(q), 0);
	ASSERT_EQ(ready(rq), 0);
}

/* The retry queue was deleted under the source: the copy is returned
 * unroutable, so the original is not acked but requeued after the delay
 * (nothing lost), and the stream goes on. */
TEST(retry_copy_returned_falls_back_to_requeue)
{
	char q[96], rq[128];
	name(q, sizeof(q), "returned");
	snprintf(rq, sizeof(rq), "%s.retry", q);
	remember(rq);
	ASSERT_OK(declare(q));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, q, NULL, 10, 300));
	amqp_queue_delete(pc, 1, amqp_cstring_bytes(rq), 0, 0);
	ASSERT_OK(rpc_ok());
	ASSERT_OK(publish_range(q, 0, 1));
	seen a, b;
	ASSERT_EQ(one_round(s, &a, INBOX_RETRY, 5000), 1);
	int64_t t0 = now_ms();
	ASSERT_EQ(one_round(s, &b, INBOX_APPLIED, 5000), 1);
	ASSERT_TRUE(now_ms() - t0 >= 250);
	ASSERT_STREQ(b.id, "m-0");
	ASSERT_EQ(b.count, 2);
	ASSERT_CONTAINS(b.position, " redelivered");
	ASSERT_TRUE(quiet(s, 300));
	inbox_source_close(s);
	ASSERT_EQ(ready(q), 0);
}

TEST(retry_through_requeue)
{
	char q[96];
	name(q, sizeof(q), "requeue");
	ASSERT_OK(declare(q));
	ASSERT_OK(publish_range(q, 0, 3));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, q, "retry=requeue", 10, 300));
	seen a, b;
	int n = one_round(s, &a, INBOX_RETRY, 5000);
	int64_t t0 = now_ms();
	ASSERT_TRUE(n >= 1);
	int rest = 3 - n;
	seen more[3];
	if (rest > 0) /* published ones not in the first batch */
		ASSERT_EQ(collect(s, more, rest, 3000, INBOX_APPLIED, 10),
		          rest);
	ASSERT_EQ(one_round(s, &b, INBOX_APPLIED, 5000), 1);
	ASSERT_TRUE(now_ms() - t0 >= 250);
	ASSERT_STREQ(b.id, a.id);
	ASSERT_EQ(b.count, 2);
	ASSERT_CONTAINS(b.position, " redelivered");
	ASSERT_TRUE(quiet(s, 500));
	inbox_source_close(s);
	ASSERT_EQ(ready(q), 0);
}

/* A quorum queue counts redeliveries itself (x-delivery-count); a copy
 * through the retry queue carries the count on (x-inbox-attempts). */
TEST(quorum_queue_delivery_count)
{
	char q[96], rq[128];
	name(q, sizeof(q), "quorum");
	snprintf(rq, sizeof(rq), "%s.retry", q);
	amqp_table_entry_t e;
	e.key = amqp_cstring_bytes("x-queue-type");
	e.value.kind = AMQP_FIELD_KIND_UTF8;
	e.value.value.bytes = amqp_cstring_bytes("quorum");
	amqp_table_t args = {1, &e};
	amqp_queue_declare(pc, 1, amqp_cstring_bytes(q), 0, 1, 0, 0, args);
	remember(q);
	remember(rq);
	ASSERT_OK(rpc_ok());
	ASSERT_OK(publish_range(q, 0, 1));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, q, NULL, 10, 300));
	seen a[3], b, c;
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(collect(s, &a[i], 1, 5000, INBOX_OUTCOME_NONE, 10),
		          1);
		ASSERT_EQ(a[i].count, i + 1);
	}
	ASSERT_EQ(one_round(s, &b, INBOX_RETRY, 5000), 1);
	ASSERT_EQ(b.count, 4);
	ASSERT_EQ(one_round(s, &c, INBOX_APPLIED, 5000), 1);
	ASSERT_EQ(c.count, 5);
	ASSERT_CONTAINS(c.headers, "\"x-inbox-attempts\":4");
	ASSERT_TRUE(strstr(c.headers, "x-delivery-count") == NULL);
	ASSERT_TRUE(quiet(s, 300));
	inbox_source_close(s);
	ASSERT_EQ(ready(q), 0);
}

TEST(close_without_settle_requeues)
{
	char q[96];
	name(q, sizeof(q), "close");
	ASSERT_OK(declare(q));
	ASSERT_OK(publish_range(q, 0, 5));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, q, NULL, 10, 1000));
	inbox_delivery d[10] = {INBOX_DELIVERY_INIT};
	size_t n = 0, total = 0;
	int64_t end = now_ms() + 5000;
	/* One poll, never settled. */
	while (total == 0 && now_ms() < end) {
		ASSERT_OK(inbox_source_poll(s, d, 10, &n, 200, NULL));
		total = n;
	}
	ASSERT_TRUE(total >= 1);
	inbox_source_close(s);
	ASSERT_OK(open_src(&s, q, NULL, 10, 1000));
	seen got[5];
	ASSERT_EQ(collect(s, got, 5, 5000, INBOX_APPLIED, 10), 5);
	/* The polled ones come back redelivered; so may any that the broker
	 * had already pushed to the closed channel (prefetch 10) without
	 * being polled yet. None is lost, none comes twice. */
	for (size_t i = 0; i < 5; i++) {
		char want[16];
		snprintf(want, sizeof(want), "m-%zu", i); /* queue order kept */
		ASSERT_STREQ(got[i].id, want);
		if (i < total)
			ASSERT_EQ(got[i].count, 2);
		else
			ASSERT_TRUE(got[i].count == 1 || got[i].count == 2);
	}
	ASSERT_TRUE(quiet(s, 300)); /* and nothing a second time */
	inbox_source_close(s);
	ASSERT_EQ(ready(q), 0);
}

TEST(dead_letter_exchange_copy)
{
	char q[96], x[96], dq[96], url[800];
	name(q, sizeof(q), "dlxsrc");
	name(x, sizeof(x), "dlx");
	name(dq, sizeof(dq), "dlxq");
	ASSERT_OK(declare(q));
	ASSERT_OK(declare(dq));
	amqp_exchange_declare(pc, 1, amqp_cstring_bytes(x),
	                      amqp_cstring_bytes("fanout"), 0, 0, 1, 0,
	                      amqp_empty_table);
	ASSERT_OK(rpc_ok());
	amqp_queue_bind(pc, 1, amqp_cstring_bytes(dq), amqp_cstring_bytes(x),
	                amqp_cstring_bytes(""), amqp_empty_table);
	ASSERT_OK(rpc_ok());
	/* A missing exchange is refused at open. */
	char err[600];
	snprintf(url, sizeof(url), "%s/%s?dlx=%s-nosuch", AMQP_URL, q, x);
	ASSERT_EQ(open_rc(url, err, sizeof(err)), INBOX_ERR_SOURCE);
	ASSERT_CONTAINS(err, "NOT_FOUND");
	ASSERT_OK(publish_range(q, 0, 2));
	inbox_source *s = NULL;
	char params[200];
	snprintf(params, sizeof(params), "dlx=%s", x);
	ASSERT_OK(open_src(&s, q, params, 10, 1000));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result r[4] = {INBOX_RESULT_INIT};
	size_t n = 0, got = 0;
	int64_t end = now_ms() + 5000;
	while (got < 2 && now_ms() < end) {
		ASSERT_OK(inbox_source_poll(s, d, 4, &n, 200, NULL));
		for (size_t i = 0; i < n; i++) {
			r[i] = (inbox_result)INBOX_RESULT_INIT;
			int poison = strcmp(d[i].id, "m-0") == 0;
			r[i].outcome =
			    poison ? INBOX_DEAD_LETTERED : INBOX_APPLIED;
			r[i].reason = poison ? "malformed JSON" : NULL;
			r[i].dead_letter_id = poison ? 42 : 0;
		}
		if (n)
			ASSERT_OK(inbox_source_settle(s, d, r, n));
		got += n;
	}
	ASSERT_EQ(got, 2);
	ASSERT_EQ(ready(q), 0);
	ASSERT_EQ(ready(dq), 1);
	amqp_basic_get(pc, 1, amqp_cstring_bytes(dq), 1);
	ASSERT_OK(rpc_ok());
	amqp_message_t m;
	amqp_rpc_reply_t rr = amqp_read_message(pc, 1, &m, 0);
	ASSERT_EQ(rr.reply_type, AMQP_RESPONSE_NORMAL);
	inbox__buf hj = INBOX__BUF_INIT;
	ASSERT_OK(inbox__amqp_table_json(&hj, &m.properties.headers));
	char body[64];
	snprintf(body, sizeof(body), "%.*s", (int)m.body.len,
	         (char *)m.body.bytes);
	amqp_destroy_message(&m);
	ASSERT_STREQ(body, "{\"id\":\"p-0\",\"n\":0}");
	ASSERT_CONTAINS(hj.data, "\"x-inbox-reason\":\"malformed JSON\"");
	ASSERT_CONTAINS(hj.data, "\"x-inbox-dead-letter-id\":42");
	ASSERT_CONTAINS(hj.data, "\"x-inbox-consumer\":\"amqp-test\"");
	inbox__buf_free(&hj);
	/* The exchange disappears: the copy fails (the publish channel is
	 * closed by the broker), the dead letter is acked all the same and
	 * settle says so; the consuming channel is unaffected. */
	amqp_exchange_delete(pc, 1, amqp_cstring_bytes(x), 0);
	ASSERT_OK(rpc_ok());
	ASSERT_OK(publish_range(q, 2, 4));
	got = 0;
	int failures = 0;
	end = now_ms() + 5000;
	while (got < 2 && now_ms() < end) {
		ASSERT_OK(inbox_source_poll(s, d, 4, &n, 200, NULL));
		for (size_t i = 0; i < n; i++) {
			r[i] = (inbox_result)INBOX_RESULT_INIT;
			r[i].outcome = strcmp(d[i].id, "m-2") == 0
			                   ? INBOX_DEAD_LETTERED
			                   : INBOX_APPLIED;
		}
		if (n && inbox_source_settle(s, d, r, n) != INBOX_OK) {
			failures++;
			ASSERT_CONTAINS(inbox_source_errmsg(s),
			                "not published");
		}
		got += n;
	}
	ASSERT_EQ(got, 2);
	ASSERT_EQ(failures, 1);
	ASSERT_TRUE(quiet(s, 300));
	inbox_source_close(s);
	ASSERT_EQ(ready(q), 0);
}

TEST(payload_truncated_and_id_rules)
{
	char q[96];
	name(q, sizeof(q), "trunc");
	ASSERT_OK(declare(q));
	char big[100];
	memset(big, 'a', sizeof(big));
	pub none = {NULL, NULL, 0, 0};
	pub empty = {"", NULL, 0, 0};
	pub nul = {"o-1\0x", NULL, 0, 5};
	pub bad = {"\xc3\x28", NULL, 0, 2};
	ASSERT_OK(publish(q, big, sizeof(big), &none));
	ASSERT_OK(publish(q, "{}", 2, &empty));
	ASSERT_OK(publish(q, "", 0, &none));
	ASSERT_OK(publish(q, "{}", 2, &nul));
	ASSERT_OK(publish(q, "{}", 2, &bad));
	inbox_source *s = NULL;
	char url[800];
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "amqp-test";
	o.max_payload = 10;
	url_of(url, sizeof(url), q, NULL);
	ASSERT_OK(inbox_source_open(&s, url, &o));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result r[4] = {INBOX_RESULT_INIT};
	size_t n = 0, got = 0;
	int64_t end = now_ms() + 5000;
	const char *ids[] = {
	    "payload of 100 bytes exceeds max_payload 10", NULL, NULL,
	    "message id in AMQP property message_id holds a NUL byte at byte "
	    "3 (hex:6f2d310078): cannot be stored as text",
	    "message id in AMQP property message_id is not valid UTF-8 "
	    "(hex:c328): cannot be stored as text"};
	while (got < 5 && now_ms() < end) {
		ASSERT_OK(inbox_source_poll(s, d, 4, &n, 200, NULL));
		for (size_t i = 0; i < n; i++) {
			size_t k = got + i;
			ASSERT_TRUE(d[i].id == NULL);
			if (ids[k])
				ASSERT_STREQ(d[i].refused, ids[k]);
			else
				ASSERT_TRUE(d[i].refused == NULL);
			ASSERT_TRUE(d[i].headers == NULL);
			ASSERT_EQ(d[i].timestamp_ms, 0);
			ASSERT_TRUE(d[i].payload != NULL);
			ASSERT_EQ(d[i].payload_len, k == 0   ? 11
			                            : k == 2 ? 0
			                                     : 2);
			r[i] = (inbox_result)INBOX_RESULT_INIT;
			r[i].outcome = INBOX_DEAD_LETTERED;
		}
		if (n)
			ASSERT_OK(inbox_source_settle(s, d, r, n));
		got += n;
	}
	ASSERT_EQ(got, 5);
	inbox_source_close(s);
}

TEST(headers_as_json)
{
	amqp_table_entry_t inner[2], e[9];
	amqp_field_value_t arr[2];
	static const unsigned char raw[] = {0xff, 0x00, 0x41};
	inner[0].key = amqp_cstring_bytes("queue");
	inner[0].value.kind = AMQP_FIELD_KIND_UTF8;
	inner[0].value.value.bytes = amqp_cstring_bytes("q\"1\n");
	inner[1].key = amqp_cstring_bytes("count");
	inner[1].value.kind = AMQP_FIELD_KIND_I64;
	inner[1].value.value.i64 = 3;
	arr[0].kind = AMQP_FIELD_KIND_TABLE;
	arr[0].value.table = (amqp_table_t){2, inner};
	arr[1].kind = AMQP_FIELD_KIND_BOOLEAN;
	arr[1].value.boolean = 0;
	e[0].key = amqp_cstring_bytes("a");
	e[0].value.kind = AMQP_FIELD_KIND_ARRAY;
	e[0].value.value.array = (amqp_array_t){2, arr};
	e[1].key = amqp_cstring_bytes("bin");
	e[1].value.kind = AMQP_FIELD_KIND_BYTES;
	e[1].value.value.bytes = (amqp_bytes_t){3, (void *)raw};
	e[2].key = amqp_cstring_bytes("dec");
	e[2].value.kind = AMQP_FIELD_KIND_DECIMAL;
	e[2].value.value.decimal = (amqp_decimal_t){2, 5};
	e[3].key = amqp_cstring_bytes("f");
	e[3].value.kind = AMQP_FIELD_KIND_F64;
	e[3].value.value.f64 = 1.5;
	e[4].key = amqp_cstring_bytes("v");
	e[4].value.kind = AMQP_FIELD_KIND_VOID;
	e[5].key = amqp_cstring_bytes("t");
	e[5].value.kind = AMQP_FIELD_KIND_BOOLEAN;
	e[5].value.value.boolean = 1;
	e[6].key = amqp_cstring_bytes("dup");
	e[6].value.kind = AMQP_FIELD_KIND_I8;
	e[6].value.value.i8 = -1;
	e[7].key = amqp_cstring_bytes("dup");
	e[7].value.kind = AMQP_FIELD_KIND_U16;
	e[7].value.value.u16 = 9;
	e[8].key = (amqp_bytes_t){3, (void *)raw}; /* not text: hex */
	e[8].value.kind = AMQP_FIELD_KIND_I8;
	e[8].value.value.i8 = 1;
	amqp_table_t t = {9, e};
	inbox__buf b = INBOX__BUF_INIT;
	ASSERT_OK(inbox__amqp_table_json(&b, &t));
	ASSERT_STREQ(b.data, "{\"a\":[{\"queue\":\"q\\\"1\\n\",\"count\":3},"
	                     "false],\"bin\":\"hex:ff0041\",\"dec\":0.05,"
	                     "\"f\":1.5,\"v\":null,\"t\":true,\"dup\":9,"
	                     "\"hex:ff0041\":1}");
	inbox__buf_free(&b);
}

/* ------------------------------------------------------------------ */
/* Connection loss                                                       */
/* ------------------------------------------------------------------ */

/* Cut the source's TCP connection as a network failure would. */
static int cut(inbox_source *src)
{
	amqp_source *s = (amqp_source *)src;
	if (!s->conn)
		return -1;
	return shutdown(amqp_get_sockfd(s->conn), SHUT_RDWR);
}

TEST(loss_during_settle_redelivers)
{
	char q[96];
	name(q, sizeof(q), "losssettle");
	ASSERT_OK(declare(q));
	ASSERT_OK(publish_range(q, 0, 5));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, q, NULL, 10, 1000));
	inbox_delivery d[10] = {INBOX_DELIVERY_INIT};
	inbox_result r[10] = {INBOX_RESULT_INIT};
	size_t n = 0;
	int64_t end = now_ms() + 5000;
	while (n == 0 && now_ms() < end)
		ASSERT_OK(inbox_source_poll(s, d, 10, &n, 300, NULL));
	ASSERT_TRUE(n >= 1);
	ASSERT_OK(cut(s));
	for (size_t i = 0; i < n; i++) {
		r[i] = (inbox_result)INBOX_RESULT_INIT;
		r[i].outcome = INBOX_APPLIED;
	}
	int rc = inbox_source_settle(s, d, r, n);
	ASSERT_EQ(rc, INBOX_ERR_SOURCE);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "amqp: ");
	/* All five come back, the source having reconnected by itself: the n
	 * polled ones flagged redelivered, and so may be any that the broker
	 * had already pushed to the dead channel (prefetch) but poll had not
	 * returned yet. */
	seen got[5];
	ASSERT_EQ(collect(s, got, 5, 15000, INBOX_APPLIED, 10), 5);
	int redelivered = 0;
	for (int i = 0; i < 5; i++)
		redelivered += got[i].count == 2;
	ASSERT_TRUE(redelivered >= (int)n);
	ASSERT_TRUE(quiet(s, 300));
	inbox_source_close(s);
	ASSERT_EQ(ready(q), 0);
}

TEST(loss_while_idle_reconnects)
{
	char q[96];
	name(q, sizeof(q), "lossidle");
	ASSERT_OK(declare(q));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, q, NULL, 10, 1000));
	ASSERT_TRUE(quiet(s, 200));
	ASSERT_OK(cut(s));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	size_t n = 9;
	ASSERT_EQ(inbox_source_poll(s, d, 4, &n, 200, NULL), INBOX_ERR_SOURCE);
	ASSERT_EQ(n, 0);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "lost");
	ASSERT_OK(publish_range(q, 0, 3));
	seen got[3];
	ASSERT_EQ(collect(s, got, 3, 10000, INBOX_APPLIED, 10), 3);
	ASSERT_STREQ(got[0].id, "m-0");
	/* 2 if the broker handed it to the dead consumer before noticing
	 * the loss (it then requeues it marked redelivered). */
	ASSERT_TRUE(got[0].count == 1 || got[0].count == 2);
	inbox_source_close(s);
	ASSERT_EQ(ready(q), 0);
}

TEST(deleted_queue_redeclared)
{
	char q[96];
	name(q, sizeof(q), "deleted");
	remember(q);
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, q, "declare=1", 10, 1000));
	ASSERT_OK(publish_range(q, 0, 2));
	seen got[2];
	ASSERT_EQ(collect(s, got, 2, 5000, INBOX_APPLIED, 10), 2);
	amqp_queue_delete(pc, 1, amqp_cstring_bytes(q), 0, 0);
	ASSERT_OK(rpc_ok());
	/* The consumer is cancelled; the source reconnects and declares
	 * the queue again. */
	int64_t end = now_ms() + 10000;
	while (ready(q) < 0 && now_ms() < end)
		ASSERT_TRUE(quiet(s, 100));
	ASSERT_EQ(ready(q), 0);
	ASSERT_OK(publish_range(q, 2, 4));
	ASSERT_EQ(collect(s, got, 2, 10000, INBOX_APPLIED, 10), 2);
	ASSERT_STREQ(got[0].id, "m-2");
	inbox_source_close(s);
}

/* ------------------------------------------------------------------ */
/* End to end: inbox_run with the SQLite store                          */
/* ------------------------------------------------------------------ */

#define E2E_N    200
#define E2E_DUPS 30

typedef struct e2e {
	int applied;
	int retried;
	int settled;
	volatile sig_atomic_t *stop;
} e2e;

static int e2e_handler(inbox_txn *t, const inbox_msg *m, void *payload)
{
	e2e *st = payload;
	const char *n = NULL;
	if (inbox_msg_get(m, "/n", &n) != INBOX_OK || !n)
		return INBOX_HANDLER_REJECT;
	if (atoi(n) % 50 == 7 && inbox_msg_attempt(m) == 1) {
		st->retried++;
		return INBOX_HANDLER_RETRY;
	}
	const char *params[] = {n};
	if (inbox_txn_exec(t, "INSERT INTO amqp_effects(n) VALUES ($1)", 1,
	                   params, NULL) != INBOX_OK)
		return INBOX_HANDLER_RETRY;
	st->applied++;
	return INBOX_HANDLER_OK;
}

static void e2e_on_batch(const inbox_delivery *d, const inbox_result *res,
                         size_t n, void *payload)
{
	e2e *st = payload;
	(void)d;
	for (size_t i = 0; i < n; i++)
		if (res[i].outcome == INBOX_APPLIED)
			st->settled++;
	if (st->settled >= E2E_N)
		*st->stop = 1;
}

static int count_row(int ncols, const char *const *v, void *payload)
{
	long long *out = payload;
	for (int i = 0; i < ncols && i < 2; i++)
		out[i] = v[i] ? atoll(v[i]) : -1;
	return 0;
}

TEST(runner_sqlite_end_to_end)
{
	char q[96], url[800], store_url[400];
	name(q, sizeof(q), "e2e");
	ASSERT_OK(declare(q));
	char rq[128];
	snprintf(rq, sizeof(rq), "%s.retry", q);
	remember(rq);
	ASSERT_OK(publish_range(q, 0, E2E_N));
	for (int i = 0; i < E2E_DUPS; i++) /* producer retries */
		ASSERT_OK(publish_range(q, i * 6, i * 6 + 1));
	snprintf(store_url, sizeof(store_url), "sqlite:%s/e2e.db", tmpdir);
	inbox_store *sto = NULL;
	inbox_consumer *c = NULL;
	inbox_source *src = NULL;
	volatile sig_atomic_t stop = 0;
	e2e state = {0, 0, 0, &stop};
	char err[256] = "";
	ASSERT_OK(inbox_store_open(&sto, store_url, NULL));
	ASSERT_OK(inbox_store_exec(sto, "CREATE TABLE amqp_effects(n TEXT)", 0,
	                           NULL, NULL));
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = q;
	co.key_template = "{/id}";
	co.handler = e2e_handler;
	co.handler_payload = &state;
	ASSERT_OK(inbox_consumer_open(&c, sto, &co, err, sizeof(err)));
	inbox_source_options so = INBOX_SOURCE_OPTIONS_INIT;
	so.consumer = q;
	so.max_batch = 32;
	so.retry_delay_ms = 200;
	url_of(url, sizeof(url), q, NULL);
	ASSERT_OK(inbox_source_open(&src, url, &so));
	inbox_runner_options ro = INBOX_RUNNER_OPTIONS_INIT;
	ro.batch_size = 32;
	ro.poll_timeout_ms = 100;
	ro.on_batch = e2e_on_batch;
	ro.payload = &state;
	alarm(60);
	int r = inbox_run(c, src, &ro, &stop);
	alarm(0);
	ASSERT_OK(r);
	inbox_source_close(src);
	inbox_consumer_close(c);
	ASSERT_EQ(state.applied, E2E_N);
	ASSERT_EQ(state.retried, E2E_N / 50);
	long long cnt[2] = {-1, -1};
	ASSERT_OK(inbox_store_query(sto,
	                            "SELECT COUNT(*), COUNT(DISTINCT n) "
	                            "FROM amqp_effects",
	                            0, NULL, count_row, cnt));
	ASSERT_EQ(cnt[0], E2E_N);
	ASSERT_EQ(cnt[1], E2E_N);
	inbox_store_close(sto);
}

static void cleanup(void)
{
	for (int i = 0; i < nmade; i++) {
		amqp_queue_delete(pc, 1, amqp_cstring_bytes(made[i]), 0, 0);
		if (rpc_ok() < 0) { /* not a queue or gone: reopen channel */
			amqp_channel_close_ok_t cok = {0};
			amqp_send_method(pc, 1, AMQP_CHANNEL_CLOSE_OK_METHOD,
			                 &cok);
			amqp_channel_open(pc, 1);
		}
		free(made[i]);
	}
	nmade = 0;
}

int main(void)
{
	AMQP_URL = getenv("INBOX_TEST_AMQP_URL");
	if (!AMQP_URL || !*AMQP_URL) {
		fprintf(stderr, "test_amqp_source: INBOX_TEST_AMQP_URL is not "
		                "set; run the suite through tests/run-suite.sh "
		                "(it starts RabbitMQ via "
		                "tests/servers/rabbitmq.sh)\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	if (connect_test() < 0) {
		fprintf(stderr, "test_amqp_source: cannot connect to %s\n",
		        AMQP_URL);
		printf("0 passed, 1 failed\n");
		return 1;
	}
	snprintf(prefix, sizeof(prefix), "inbox-t%ld-%ld", (long)getpid(),
	         (long)time(NULL));
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/inbox-amqp-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(url_errors);
	RUN(url_parts);
	RUN(ambiguous_user_info_refused);
	RUN(password_never_in_errmsg);
	RUN(missing_queue_and_declare);
	RUN(each_once_with_ids_positions_headers);
	RUN(batches_bounded_by_max_batch);
	RUN(failed_batch_redelivered);
	RUN(retry_through_ttl_queue);
	RUN(retry_copy_returned_falls_back_to_requeue);
	RUN(retry_through_requeue);
	RUN(quorum_queue_delivery_count);
	RUN(close_without_settle_requeues);
	RUN(dead_letter_exchange_copy);
	RUN(payload_truncated_and_id_rules);
	RUN(headers_as_json);
	RUN(loss_during_settle_redelivers);
	RUN(loss_while_idle_reconnects);
	RUN(deleted_queue_redeclared);
	RUN(runner_sqlite_end_to_end);
	cleanup();
	amqp_connection_close(pc, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(pc);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return test_summary();
}
