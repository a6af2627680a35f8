/*
 * The NATS JetStream source against a real nats-server -js, whose URL is
 * in INBOX_TEST_NATS_URL (tests/run-suite.sh starts one through
 * tests/servers/nats.sh). Each test uses its own stream (create=1), so
 * tests and parallel runs never see each other's messages.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <nats/nats.h>

#include <inbox/sys/source.h>

#include "../clock.h"
#include "source/nats/nats_source.h"
#include "test.h"

static const char *NATS_URL; /* nats://127.0.0.1:PORT */
static int seq;

static void new_stream(char *out, size_t len)
{
	snprintf(out, len, "inbox_t_%d_%d", (int)getpid(), ++seq);
}

/* ---- a publisher on its own connection ---- */

typedef struct pub {
	natsConnection *nc;
	jsCtx *js;
} pub;

static int pub_open(pub *p)
{
	memset(p, 0, sizeof(*p));
	if (natsConnection_ConnectTo(&p->nc, NATS_URL) != NATS_OK)
		return -1;
	if (natsConnection_JetStream(&p->js, p->nc, NULL) != NATS_OK)
		return -1;
	return 0;
}

static void pub_close(pub *p)
{
	jsCtx_Destroy(p->js);
	natsConnection_Destroy(p->nc);
}

/* Publish payload to STREAM.orders, with a Nats-Msg-Id if id != NULL.
 * The stream must exist (open a source with create=1 first). */
static int publish(pub *p, const char *stream, const char *id,
                   const char *payload)
{
	char subj[128];
	natsMsg *m = NULL;
	jsPubAck *pa = NULL;
	snprintf(subj, sizeof(subj), "%s.orders", stream);
	if (natsMsg_Create(&m, subj, NULL, payload, (int)strlen(payload)) !=
	    NATS_OK)
		return -1;
	if (id)
		natsMsgHeader_Set(m, "Nats-Msg-Id", id);
	natsMsgHeader_Set(m, "X-Trace", "t-1");
	natsStatus s = js_PublishMsg(&pa, p->js, m, NULL, NULL);
	jsPubAck_Destroy(pa);
	natsMsg_Destroy(m);
	return s == NATS_OK ? 0 : -1;
}

/* ---- sources ---- */

static int open_src(inbox_source **src, const char *stream, const char *extra,
                    int retry_delay_ms, size_t max_payload)
{
	char url[512];
	snprintf(url, sizeof(url), "%s/%s?create=1&durable=d1%s%s", NATS_URL,
	         stream, extra && *extra ? "&" : "", extra ? extra : "");
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "test.nats";
	o.max_batch = 50;
	o.retry_delay_ms = retry_delay_ms;
	o.max_payload = max_payload;
	int rc = inbox_source_open(src, url, &o);
	if (rc != 0) {
		fprintf(stderr, "  open %s: %d %s\n", url, rc,
		        inbox_source_errmsg(*src));
		inbox_source_close(*src);
		*src = NULL;
	}
	return rc;
}

/* Poll until at least `want` deliveries came in one batch or timeout. */
static size_t poll_for(inbox_source *src, inbox_delivery *d, size_t max,
                       size_t want, int timeout_ms)
{
	int64_t end = now_ms() + timeout_ms;
	size_t n = 0;
	(void)want;
	while (now_ms() < end) {
		int rc = inbox_source_poll(src, d, max, &n, 200, NULL);
		if (rc != 0)
			fprintf(stderr, "  poll: %d %s\n", rc,
			        inbox_source_errmsg(src));
		if (n > 0)
			return n;
	}
	return 0;
}

static int settle_all(inbox_source *src, const inbox_delivery *d, size_t n,
                      inbox_outcome o)
{
	inbox_result res[64] = {INBOX_RESULT_INIT};
	for (size_t i = 0; i < n; i++) {
		res[i] = (inbox_result)INBOX_RESULT_INIT;
		res[i].outcome = o;
	}
	return inbox_source_settle(src, d, res, n);
}

/* ---- tests ---- */

TEST(url_errors)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "c";
	const char *bad[] = {
	    "nats://127.0.0.1:1",                 /* no stream */
	    "nats://127.0.0.1:1/",                /* empty stream */
	    "nats://127.0.0.1:1/a.b",             /* dot in stream */
	    "nats://127.0.0.1:1/S?bogus=1",       /* unknown parameter */
	    "nats://127.0.0.1:1/S?ack_wait=30",   /* duration without unit */
	    "nats://127.0.0.1:1/S?ack_wait=0",    /* zero ack_wait */
	    "nats://127.0.0.1:1/S?max_deliver=0", /* zero */
	    "nats://127.0.0.1:1/S?durable=a.b",   /* dot in durable */
	    "nats://127.0.0.1:1/S?create=yes",    /* not 0/1 */
	    "nats://127.0.0.1:1/S?max_ack_pending=1", /* < batch */
	    "nats://u:p%zz@127.0.0.1:1/S",            /* bad escape */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		inbox_source *src = NULL;
		int rc = inbox_source_open(&src, bad[i], &o);
		if (rc != INBOX_ERR_URL)
			fprintf(stderr, "  %s -> %d %s\n", bad[i], rc,
			        inbox_source_errmsg(src));
		ASSERT_EQ(rc, INBOX_ERR_URL);
		ASSERT_TRUE(inbox_source_errmsg(src)[0] != '\0');
		inbox_source_close(src);
	}
}

TEST(password_never_in_errmsg)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "c";
	inbox_source *src = NULL;
	/* Nothing listens on port 1: connect fails. */
	int rc = inbox_source_open(
	    &src, "nats://alice:s3cr%65tpw@127.0.0.1:1/S?create=1", &o);
	ASSERT_EQ(rc, INBOX_ERR_CONNECT);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "127.0.0.1:1");
	ASSERT_TRUE(strstr(inbox_source_errmsg(src), "s3cr") == NULL);
	inbox_source_close(src);
	/* A wrong password against the real server (no auth there: the
	 * server accepts; the message text must still not hold it). */
	char url[256];
	char stream[64];
	new_stream(stream, sizeof(stream));
	snprintf(url, sizeof(url),
	         "nats://bob:hunter2@%s/%s?create=1&"
	         "bogus=1",
	         NATS_URL + strlen("nats://"), stream);
	rc = inbox_source_open(&src, url, &o);
	ASSERT_EQ(rc, INBOX_ERR_URL);
	ASSERT_TRUE(strstr(inbox_source_errmsg(src), "hunter2") == NULL);
	inbox_source_close(src);
}

TEST(missing_stream_without_create)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "c";
	char url[256], stream[64];
	new_stream(stream, sizeof(stream));
	snprintf(url, sizeof(url), "%s/%s", NATS_URL, stream);
	inbox_source *src = NULL;
	int rc = inbox_source_open(&src, url, &o);
	ASSERT_EQ(rc, INBOX_ERR_SOURCE);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "no such stream");
	inbox_source_close(src);
}

TEST(each_once_with_positions)
{
	char stream[64];
	new_stream(stream, sizeof(stream));
	inbox_source *src = NULL;
	ASSERT_OK(open_src(&src, stream, "ack_wait=1s", 100, 0));
	pub p;
	ASSERT_OK(pub_open(&p));
	int64_t wall = (int64_t)time(NULL) * 1000;
	for (int i = 1; i <= 20; i++) {
		char id[32], body[64];
		snprintf(id, sizeof(id), "m-%d", i);
		snprintf(body, sizeof(body), "{\"id\":\"x\",\"n\":%d}", i);
		ASSERT_OK(publish(&p, stream, id, body));
	}
	inbox_delivery d[64] = {INBOX_DELIVERY_INIT};
	int seen[21] = {0};
	int got = 0;
	int64_t end = now_ms() + 5000;
	while (got < 20 && now_ms() < end) {
		size_t n = poll_for(src, d, 64, 1, 1000);
		for (size_t i = 0; i < n; i++) {
			int k = 0;
			ASSERT_TRUE(d[i].id != NULL);
			ASSERT_EQ(sscanf(d[i].id, "m-%d", &k), 1);
			ASSERT_TRUE(k >= 1 && k <= 20);
			seen[k]++;
			char pos[96];
			snprintf(pos, sizeof(pos), "%s/%d", stream, k);
			ASSERT_STREQ(d[i].position, pos);
			ASSERT_EQ(d[i].delivery_count, 1);
			ASSERT_EQ(d[i].source_token, d[0].source_token + i);
			ASSERT_TRUE(d[i].timestamp_ms >= wall - 5000 &&
			            d[i].timestamp_ms <= wall + 60000);
			ASSERT_CONTAINS(d[i].headers, "\"Nats-Msg-Id\":\"m-");
			ASSERT_CONTAINS(d[i].headers, "\"X-Trace\":\"t-1\"");
			char body[64];
			snprintf(body, sizeof(body), "{\"id\":\"x\",\"n\":%d}",
			         k);
			ASSERT_EQ(d[i].payload_len, strlen(body));
			ASSERT_TRUE(
			    memcmp(d[i].payload, body, d[i].payload_len) == 0);
		}
		ASSERT_OK(settle_all(src, d, n, INBOX_APPLIED));
		got += (int)n;
	}
	ASSERT_EQ(got, 20);
	for (int k = 1; k <= 20; k++)
		ASSERT_EQ(seen[k], 1);
	/* Acked (confirmed): nothing comes back after ack_wait. */
	size_t n = poll_for(src, d, 64, 1, 2000);
	ASSERT_EQ(n, 0);
	inbox_source_close(src);
	pub_close(&p);
}

TEST(retry_naks_with_delay)
{
	char stream[64];
	new_stream(stream, sizeof(stream));
	inbox_source *src = NULL;
	ASSERT_OK(open_src(&src, stream, "ack_wait=10s", 800, 0));
	pub p;
	ASSERT_OK(pub_open(&p));
	ASSERT_OK(publish(&p, stream, "r-1", "{\"id\":\"r-1\"}"));
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	size_t n = poll_for(src, d, 8, 1, 3000);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(d[0].delivery_count, 1);
	ASSERT_OK(settle_all(src, d, n, INBOX_RETRY));
	int64_t t0 = now_ms();
	n = poll_for(src, d, 8, 1, 5000);
	int64_t dt = now_ms() - t0;
	ASSERT_EQ(n, 1);
	ASSERT_EQ(d[0].delivery_count, 2);
	ASSERT_STREQ(d[0].id, "r-1");
	/* After about the delay, long before ack_wait. */
	if (dt < 600 || dt > 3000)
		fprintf(stderr, "  redelivered after %lld ms\n", (long long)dt);
	ASSERT_TRUE(dt >= 600 && dt <= 3000);
	/* IN_PROGRESS is redelivered the same way; then res NULL too. */
	ASSERT_OK(settle_all(src, d, n, INBOX_IN_PROGRESS));
	n = poll_for(src, d, 8, 1, 5000);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(d[0].delivery_count, 3);
	ASSERT_OK(inbox_source_settle(src, d, NULL, n));
	n = poll_for(src, d, 8, 1, 5000);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(d[0].delivery_count, 4);
	ASSERT_OK(settle_all(src, d, n, INBOX_APPLIED));
	n = poll_for(src, d, 8, 1, 1500);
	ASSERT_EQ(n, 0);
	inbox_source_close(src);
	pub_close(&p);
}

TEST(unsettled_close_redelivers_after_ack_wait)
{
	char stream[64];
	new_stream(stream, sizeof(stream));
	inbox_source *src = NULL;
	ASSERT_OK(open_src(&src, stream, "ack_wait=1s", 100, 0));
	pub p;
	ASSERT_OK(pub_open(&p));
	for (int i = 0; i < 3; i++) {
		char id[16];
		snprintf(id, sizeof(id), "u-%d", i);
		ASSERT_OK(publish(&p, stream, id, "{\"id\":\"u\"}"));
	}
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	size_t n = 0, total = 0;
	int64_t end = now_ms() + 3000;
	while (total < 3 && now_ms() < end) {
		/* collect the three without settling: close holds them */
		n = poll_for(src, d, 8, 3, 500);
		total += n;
		if (total < 3 && n > 0)
			break; /* cannot poll again without settling */
	}
	ASSERT_EQ(total, 3);
	inbox_source_close(src); /* a crash, as far as the server knows */
	int64_t t0 = now_ms();
	ASSERT_OK(open_src(&src, stream, "ack_wait=1s", 100, 0));
	total = 0;
	end = now_ms() + 5000;
	while (total < 3 && now_ms() < end) {
		n = poll_for(src, d, 8, 3, 1000);
		for (size_t i = 0; i < n; i++)
			ASSERT_EQ(d[i].delivery_count, 2);
		total += n;
		ASSERT_OK(settle_all(src, d, n, INBOX_DUPLICATE));
	}
	ASSERT_EQ(total, 3);
	ASSERT_TRUE(now_ms() - t0 >= 500); /* not before ack_wait */
	inbox_source_close(src);
	pub_close(&p);
}

TEST(term_for_dead_letters)
{
	char stream[64];
	new_stream(stream, sizeof(stream));
	inbox_source *src = NULL;
	ASSERT_OK(open_src(&src, stream, "ack_wait=1s", 100, 0));
	pub p;
	ASSERT_OK(pub_open(&p));
	ASSERT_OK(publish(&p, stream, "dl-1", "not json"));
	ASSERT_OK(publish(&p, stream, "dl-2", "{\"id\":\"dl-2\"}"));
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	size_t got = 0;
	int64_t end = now_ms() + 3000;
	while (got < 2 && now_ms() < end) {
		size_t n = poll_for(src, d, 8, 2, 1000);
		inbox_result res[8] = {INBOX_RESULT_INIT};
		for (size_t i = 0; i < n; i++)
			res[i].outcome = strcmp(d[i].id, "dl-1") == 0
			                     ? INBOX_DEAD_LETTERED
			                     : INBOX_CONFLICT;
		ASSERT_OK(inbox_source_settle(src, d, res, n));
		got += n;
	}
	ASSERT_EQ(got, 2);
	/* Terminated: never again, not even after ack_wait. */
	size_t n = poll_for(src, d, 8, 1, 2500);
	ASSERT_EQ(n, 0);
	inbox_source_close(src);
	pub_close(&p);
}

/* A second source on the same durable polls while the first holds its
 * batch for hold_ms; returns what the second received. */
static size_t steal_while_held(const char *extra, int hold_ms)
{
	char stream[64];
	new_stream(stream, sizeof(stream));
	inbox_source *a = NULL, *b = NULL;
	size_t stolen = 0;
	if (open_src(&a, stream, extra, 100, 0) != 0)
		return 999;
	if (open_src(&b, stream, extra, 100, 0) != 0) {
		inbox_source_close(a);
		return 999;
	}
	pub p;
	if (pub_open(&p) != 0 || publish(&p, stream, "slow-1", "{}") != 0)
		return 999;
	inbox_delivery da[4] = {INBOX_DELIVERY_INIT},
	               db[4] = {INBOX_DELIVERY_INIT};
	size_t n = poll_for(a, da, 4, 1, 3000);
	if (n != 1)
		return 998;
	/* "the handler" of a runs hold_ms; b polls meanwhile */
	int64_t end = now_ms() + hold_ms;
	while (now_ms() < end) {
		size_t m = 0;
		inbox_source_poll(b, db, 4, &m, 200, NULL);
		if (m > 0) {
			stolen += m;
			settle_all(b, db, m, INBOX_IN_PROGRESS);
		}
	}
	settle_all(a, da, n, INBOX_APPLIED);
	inbox_source_close(a);
	inbox_source_close(b);
	pub_close(&p);
	return stolen;
}

TEST(in_progress_keeps_ack_wait)
{
	/* ack_wait 2 s, a 5 s handler: InProgress every ~667 ms keeps the
	 * message away from the other client. */
	ASSERT_EQ(steal_while_held("ack_wait=2s", 5000), 0);
	/* Control: without InProgress it is redelivered meanwhile. */
	size_t stolen =
	    steal_while_held("ack_wait=2s&in_progress_interval=0", 5000);
	ASSERT_TRUE(stolen >= 1 && stolen < 900);
}

TEST(payload_truncated_and_no_id)
{
	char stream[64];
	new_stream(stream, sizeof(stream));
	inbox_source *src = NULL;
	ASSERT_OK(open_src(&src, stream, NULL, 100, 16));
	pub p;
	ASSERT_OK(pub_open(&p));
	char big[200];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ASSERT_OK(publish(&p, stream, NULL, big));
	/* a repeated header becomes an array */
	natsMsg *m = NULL;
	char subj[96];
	snprintf(subj, sizeof(subj), "%s.orders", stream);
	ASSERT_EQ(natsMsg_Create(&m, subj, NULL, "{}", 2), NATS_OK);
	natsMsgHeader_Add(m, "X-Multi", "a\"1");
	natsMsgHeader_Add(m, "X-Multi", "b");
	ASSERT_EQ(js_PublishMsg(NULL, p.js, m, NULL, NULL), NATS_OK);
	natsMsg_Destroy(m);
	/* an id that is not UTF-8: refused, never replaced by the payload's */
	ASSERT_OK(publish(&p, stream, "\xc3\x28", "[]"));
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	size_t got = 0;
	int64_t end = now_ms() + 3000;
	while (got < 3 && now_ms() < end) {
		size_t n = poll_for(src, d, 8, 3, 1000);
		for (size_t i = 0; i < n; i++) {
			if (d[i].payload_len > 2) {
				ASSERT_EQ(d[i].payload_len, 17);
				ASSERT_STREQ(d[i].refused,
				             "payload of 199 bytes exceeds "
				             "max_payload 16");
			} else if (d[i].payload[0] == '[') {
				ASSERT_STREQ(
				    d[i].refused,
				    "message id in NATS header "
				    "\"Nats-Msg-Id\" is not valid UTF-8 "
				    "(hex:c328): cannot be stored as text");
			} else {
				ASSERT_TRUE(d[i].id == NULL);
				ASSERT_STREQ(
				    d[i].headers,
				    "{\"X-Multi\":[\"a\\\"1\",\"b\"]}");
			}
		}
		ASSERT_OK(settle_all(src, d, n, INBOX_APPLIED));
		got += n;
	}
	ASSERT_EQ(got, 3);
	inbox_source_close(src);
	pub_close(&p);
}

/* A private nats-server with a user and a password (which needs
 * percent-encoding in the URL). */
static pid_t start_auth_server(int port, char *dir, size_t len)
{
	snprintf(dir, len, "/tmp/inbox-nats-auth.%d", (int)getpid());
	char sd[300], ps[16];
	snprintf(sd, sizeof(sd), "%s/js", dir);
	snprintf(ps, sizeof(ps), "%d", port);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		dup2(fd, 2);
		execlp("nats-server", "nats-server", "-js", "-a", "127.0.0.1",
		       "-p", ps, "-sd", sd, "--user", "alice", "--pass",
		       "p@ss:w/rd", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* A loopback port nothing is bound to (below the ephemeral range). */
static int free_port(void)
{
	for (int i = 0; i < 1000; i++) {
		int port = 10000 + (int)((getpid() * 7 + i * 13) % 10000);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a;
		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_port = htons((uint16_t)port);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd);
		if (ok)
			return port;
	}
	return 19999;
}

TEST(credentials)
{
	int port = free_port();
	char dir[200], url[300];
	pid_t pid = start_auth_server(port, dir, sizeof(dir));
	ASSERT_TRUE(pid > 0);
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "c";
	inbox_source *src = NULL;
	int rc = -1;
	snprintf(url, sizeof(url),
	         "nats://alice:p%%40ss%%3Aw%%2Frd@127.0.0.1:%d/S?create=1",
	         port);
	for (int i = 0; i < 50 && rc != 0; i++) { /* until it listens */
		inbox_source_close(src);
		src = NULL;
		rc = inbox_source_open(&src, url, &o);
		if (rc != 0) {
			struct timespec ts = {0, 100000000L};
			nanosleep(&ts, NULL);
		}
	}
	if (rc != 0)
		fprintf(stderr, "  %s\n", inbox_source_errmsg(src));
	inbox_source_close(src);
	src = NULL;
	/* a wrong password: refused, and never echoed */
	snprintf(url, sizeof(url),
	         "nats://alice:Wr0ngPassw0rd@127.0.0.1:%d/S?create=1", port);
	int rc2 = inbox_source_open(&src, url, &o);
	char msg[600];
	snprintf(msg, sizeof(msg), "%s", inbox_source_errmsg(src));
	inbox_source_close(src);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "  cannot remove %s\n", dir);
	ASSERT_EQ(rc, 0);
	ASSERT_EQ(rc2, INBOX_ERR_CONNECT);
	ASSERT_TRUE(strstr(msg, "Wr0ngPassw0rd") == NULL);
	ASSERT_CONTAINS(msg, "127.0.0.1");
}

/* The default durable is the consumer name made valid. */
TEST(default_durable_name)
{
	char stream[64], url[256];
	new_stream(stream, sizeof(stream));
	snprintf(url, sizeof(url), "%s/%s?create=1", NATS_URL, stream);
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "billing.order-created.v1";
	inbox_source *src = NULL;
	ASSERT_OK(inbox_source_open(&src, url, &o));
	inbox_source_close(src);
	pub p;
	ASSERT_OK(pub_open(&p));
	jsConsumerInfo *ci = NULL;
	ASSERT_EQ(js_GetConsumerInfo(&ci, p.js, stream,
	                             "billing_order-created_v1", NULL, NULL),
	          NATS_OK);
	ASSERT_EQ(ci->Config->AckPolicy, js_AckExplicit);
	ASSERT_EQ(ci->Config->AckWait, (int64_t)30 * 1000000000);
	ASSERT_EQ(ci->Config->MaxDeliver, -1);
	ASSERT_TRUE(ci->Config->MaxAckPending >= 1000);
	jsConsumerInfo_Destroy(ci);
	pub_close(&p);
}

/* Headers as JSON: escapes, repeated names as arrays, bytes that are not
 * UTF-8 as "hex:"; none at all is no object. */
TEST(headers_as_json)
{
	natsMsg *m = NULL;
	ASSERT_EQ(natsMsg_Create(&m, "s", NULL, "x", 1), NATS_OK);
	inbox__buf b = INBOX__BUF_INIT;
	int has = -1;
	ASSERT_OK(inbox__nats_headers_json(m, &b, &has));
	ASSERT_EQ(has, 0);
	ASSERT_EQ(natsMsgHeader_Set(m, "q", "a\"b\\c\td"), NATS_OK);
	ASSERT_EQ(natsMsgHeader_Add(m, "two", "1"), NATS_OK);
	ASSERT_EQ(natsMsgHeader_Add(m, "two", "2"), NATS_OK);
	ASSERT_EQ(natsMsgHeader_Set(m, "bin", "\xff\x01"), NATS_OK);
	ASSERT_OK(inbox__nats_headers_json(m, &b, &has));
	ASSERT_EQ(has, 1);
	ASSERT_CONTAINS(b.data, "\"q\":\"a\\\"b\\\\c\\td\"");
	ASSERT_CONTAINS(b.data, "\"two\":[\"1\",\"2\"]");
	ASSERT_CONTAINS(b.data, "\"bin\":\"hex:ff01\"");
	json_error_t je;
	json_t *j = json_loads(b.data, 0, &je);
	ASSERT_TRUE(j != NULL);
	json_decref(j);
	inbox__buf_free(&b);
	natsMsg_Destroy(m);
}

int main(void)
{
	NATS_URL = getenv("INBOX_TEST_NATS_URL");
	if (!NATS_URL || !*NATS_URL) {
		fprintf(stderr, "test_nats_source: INBOX_TEST_NATS_URL is not "
		                "set; run the suite through tests/run-suite.sh "
		                "(it starts nats-server -js via "
		                "tests/servers/nats.sh)\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	RUN(url_errors);
	RUN(password_never_in_errmsg);
	RUN(missing_stream_without_create);
	RUN(each_once_with_positions);
	RUN(retry_naks_with_delay);
	RUN(unsettled_close_redelivers_after_ack_wait);
	RUN(term_for_dead_letters);
	RUN(in_progress_keeps_ack_wait);
	RUN(payload_truncated_and_no_id);
	RUN(default_durable_name);
	RUN(credentials);
	RUN(headers_as_json);
	nats_Close();
	return test_summary();
}
