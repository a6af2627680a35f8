/*
 * The Redis Streams source against a real redis-server (started by
 * tests/servers/redis.sh through run-suite.sh; INBOX_TEST_REDIS_URL):
 * URL errors and password redaction, each entry once with its position,
 * the payload/id/headers rules, redelivery with Redis's delivery counter,
 * a failed batch, takeover of a dead member's entries with XAUTOCLAIM,
 * entries deleted while pending (both paths), a deleted stream, drain,
 * a broker restart (on a private server started with the same script),
 * and end to end through inbox_run with the SQLite store.
 */
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <inbox/source.h>
#include <inbox/sys/source.h>

#include "../clock.h"
#include "test.h"

static const char *REDIS_URL; /* redis://127.0.0.1:PORT */
static redisContext *rc;      /* the test's own connection */
static char prefix[64];       /* unique per run */
static char tmpdir[256];

static int connect_test(void)
{
	char host[128];
	int port;
	if (rc)
		redisFree(rc);
	rc = NULL;
	if (sscanf(REDIS_URL, "redis://%127[^:]:%d", host, &port) != 2)
		return -1;
	struct timeval tv = {5, 0};
	rc = redisConnectWithTimeout(host, port, tv);
	return rc && !rc->err ? 0 : -1;
}

/* Run a command on the test connection (reconnecting once). */
static redisReply *cmd(const char *fmt, ...)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (!rc || rc->err)
			if (connect_test() < 0)
				continue;
		va_list ap;
		va_start(ap, fmt);
		redisReply *r = redisvCommand(rc, fmt, ap);
		va_end(ap);
		if (r)
			return r;
	}
	return NULL;
}

static long long cmd_int(const char *fmt, const char *a, const char *b)
{
	redisReply *r = cmd(fmt, a, b);
	long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
	if (r)
		freeReplyObject(r);
	return v;
}

/* Pending entries of the group (XPENDING summary count). */
static long long pending(const char *stream, const char *group)
{
	redisReply *r = cmd("XPENDING %s %s", stream, group);
	long long v = -1;
	if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
	    r->element[0]->type == REDIS_REPLY_INTEGER)
		v = r->element[0]->integer;
	if (r)
		freeReplyObject(r);
	return v;
}

/* XADD stream * payload TEXT; the id into id (may be NULL). */
static int xadd_payload(const char *stream, const char *text, char *id)
{
	redisReply *r = cmd("XADD %s * payload %s", stream, text);
	int ok = r && r->type == REDIS_REPLY_STRING;
	if (ok && id)
		snprintf(id, 48, "%s", r->str);
	if (r)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

static void name(char *out, size_t n, const char *what)
{
	snprintf(out, n, "%s-%s", prefix, what);
}

static int open_src(inbox_source **src, const char *stream, const char *params,
                    int retry_delay_ms, size_t max_payload)
{
	char url[600];
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "test.consumer";
	o.retry_delay_ms = retry_delay_ms;
	o.max_batch = 50;
	if (max_payload)
		o.max_payload = max_payload;
	snprintf(url, sizeof(url), "%s/%s?group=g%s%s", REDIS_URL, stream,
	         params && *params ? "&" : "", params ? params : "");
	int r = inbox_source_open(src, url, &o);
	if (r != INBOX_OK)
		fprintf(stderr, "  open %s: %s: %s\n", url, inbox_err_name(r),
		        inbox_source_errmsg(*src));
	return r;
}

/* Poll until at least one delivery or the deadline. */
static size_t poll_some(inbox_source *src, inbox_delivery *d, size_t max,
                        int within_ms)
{
	int64_t end = now_ms() + within_ms;
	size_t n = 0;
	do {
		int r = inbox_source_poll(src, d, max, &n, 100, NULL);
		if (r != INBOX_OK)
			n = 0;
		if (n > 0)
			return n;
	} while (now_ms() < end);
	return 0;
}

static void set_all(inbox_result *res, size_t n, inbox_outcome o)
{
	for (size_t i = 0; i < n; i++) {
		res[i] = (inbox_result)INBOX_RESULT_INIT;
		res[i].outcome = o;
	}
}

/* ------------------------------------------------------------------ */

TEST(url_errors)
{
	static const char *const bad[] = {
	    "redis://127.0.0.1:6379",           /* no stream */
	    "redis://127.0.0.1:6379/",          /* empty stream */
	    "redis://127.0.0.1:99999/s",        /* port */
	    "redis://:6379/s",                  /* no host */
	    "redis://127.0.0.1/s?nope=1",       /* unknown param */
	    "redis://127.0.0.1/s?claim_idle=x", /* bad number */
	    "redis://127.0.0.1/s?start=abc",    /* bad start id */
	    "redis://127.0.0.1/s?drain=2",
	    "redis://127.0.0.1/s%zz",   /* bad escape */
	    "redis://user@127.0.0.1/s", /* user without password */
	    "redis://[::1/s",
	};
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "c";
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		inbox_source *s = NULL;
		int r = inbox_source_open(&s, bad[i], &o);
		if (r != INBOX_ERR_URL)
			TEST_FAIL_("%s: %s (%s)", bad[i], inbox_err_name(r),
			           inbox_source_errmsg(s));
		else if (!*inbox_source_errmsg(s))
			TEST_FAIL_("%s: no errmsg", bad[i]);
		inbox_source_close(s);
	}
}

/* rediss:// reaches the Redis source (not "unknown scheme"), which
 * refuses it and says why and what to do, without the password. */
TEST(rediss_refused_with_reason)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "c";
	inbox_source *s = NULL;
	int r =
	    inbox_source_open(&s, "rediss://:pw9Xq2Lm@127.0.0.1:6380/st", &o);
	ASSERT_EQ(r, INBOX_ERR_URL);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "hiredis 0.14 has no TLS");
	ASSERT_CONTAINS(inbox_source_errmsg(s), "stunnel");
	ASSERT_TRUE(strstr(inbox_source_errmsg(s), "pw9X") == NULL);
	inbox_source_close(s);
	ASSERT_TRUE(inbox_source_known_url("rediss://h/s"));
}

TEST(password_never_in_errmsg)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "c";
	inbox_source *s = NULL;
	/* nothing listens on port 1 */
	int r = inbox_source_open(&s, "redis://u:s3cr%40et@127.0.0.1:1/st", &o);
	ASSERT_EQ(r, INBOX_ERR_CONNECT);
	ASSERT_TRUE(strstr(inbox_source_errmsg(s), "s3cr") == NULL);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "127.0.0.1:1");
	inbox_source_close(s);
	/* a real server refusing the password */
	char url[300];
	snprintf(url, sizeof(url), "redis://:wr0ngpass@%s/st",
	         REDIS_URL + strlen("redis://"));
	s = NULL;
	r = inbox_source_open(&s, url, &o);
	ASSERT_EQ(r, INBOX_ERR_CONNECT);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "AUTH");
	ASSERT_TRUE(strstr(inbox_source_errmsg(s), "wr0ngpass") == NULL);
	inbox_source_close(s);
}

TEST(each_once_with_positions)
{
	char st[96], ids[20][48];
	name(st, sizeof(st), "once");
	for (int i = 0; i < 20; i++) {
		char p[64];
		snprintf(p, sizeof(p), "{\"id\":\"m%d\"}", i);
		ASSERT_OK(xadd_payload(st, p, ids[i]));
	}
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, st, "consumer=a", 100, 0));
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	inbox_result res[8] = {INBOX_RESULT_INIT};
	int seen = 0;
	int64_t wall = (int64_t)time(NULL) * 1000;
	while (seen < 20) {
		size_t n = poll_some(s, d, 8, 2000);
		ASSERT_TRUE(n > 0 && n <= 8);
		for (size_t i = 0; i < n; i++) {
			char want[160], p[64];
			snprintf(want, sizeof(want), "%s/%s", st, ids[seen]);
			ASSERT_STREQ(d[i].position, want);
			snprintf(p, sizeof(p), "{\"id\":\"m%d\"}", seen);
			ASSERT_EQ(d[i].payload_len, strlen(p));
			ASSERT_TRUE(memcmp(d[i].payload, p, strlen(p)) == 0);
			ASSERT_EQ(d[i].delivery_count, 1);
			ASSERT_TRUE(d[i].id == NULL);
			ASSERT_TRUE(d[i].headers == NULL);
			ASSERT_EQ(d[i].source_token, d[0].source_token + i);
			ASSERT_TRUE(d[i].timestamp_ms > wall - 60000 &&
			            d[i].timestamp_ms < wall + 60000);
			seen++;
		}
		set_all(res, n, INBOX_APPLIED);
		ASSERT_OK(inbox_source_settle(s, d, res, n));
	}
	size_t n = 9;
	ASSERT_OK(inbox_source_poll(s, d, 8, &n, 200, NULL));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(pending(st, "g"), 0);
	inbox_source_close(s);
}

TEST(payload_id_headers_rules)
{
	char st[96];
	name(st, sizeof(st), "fields");
	redisReply *r;
	/* payload field + id + another field -> headers */
	r = cmd("XADD %s * id abc payload {\"x\":1} kind \"q\"", st);
	ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING);
	freeReplyObject(r);
	/* data field + message-id */
	r = cmd("XADD %s * message-id m-7 data [1,2]", st);
	freeReplyObject(r);
	/* only plain fields -> a JSON object of them; a repeated name keeps
	 * its last value */
	r = cmd("XADD %s * orderId 42 note a\"b n 1 n 2", st);
	freeReplyObject(r);
	/* binary value */
	r = cmd("XADD %s * payload {} bin %b", st, "\xff\x01", (size_t)2);
	freeReplyObject(r);
	/* ids that cannot be text: refused, never cut nor replaced */
	r = cmd("XADD %s * id %b payload {\"id\":\"o-1\"}", st, "o-1\0x",
	        (size_t)5);
	freeReplyObject(r);
	r = cmd("XADD %s * message-id %b payload {}", st, "\xc3\x28",
	        (size_t)2);
	freeReplyObject(r);
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, st, "consumer=a", 100, 0));
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	inbox_result res[8] = {INBOX_RESULT_INIT};
	size_t n = poll_some(s, d, 8, 2000);
	ASSERT_EQ(n, 6);
	ASSERT_STREQ(d[0].id, "abc");
	ASSERT_EQ(d[0].payload_len, 7);
	ASSERT_TRUE(memcmp(d[0].payload, "{\"x\":1}", 7) == 0);
	ASSERT_STREQ(d[0].headers, "{\"id\":\"abc\",\"kind\":\"\\\"q\\\"\"}");
	ASSERT_STREQ(d[1].id, "m-7");
	ASSERT_TRUE(memcmp(d[1].payload, "[1,2]", 5) == 0);
	ASSERT_STREQ(d[1].headers, "{\"message-id\":\"m-7\"}");
	ASSERT_TRUE(d[2].id == NULL);
	ASSERT_TRUE(d[2].headers == NULL);
	ASSERT_STREQ(d[2].payload,
	             "{\"orderId\":\"42\",\"note\":\"a\\\"b\",\"n\":\"2\"}");
	ASSERT_EQ(d[2].payload_len, strlen(d[2].payload));
	ASSERT_STREQ(d[3].headers, "{\"bin\":\"hex:ff01\"}");
	ASSERT_STREQ(d[4].refused,
	             "message id in Redis field \"id\" holds a NUL "
	             "byte at byte 3 (hex:6f2d310078): cannot be "
	             "stored as text");
	ASSERT_STREQ(d[4].headers, "{\"id\":\"o-1\\u0000x\"}");
	ASSERT_STREQ(d[5].refused,
	             "message id in Redis field \"message-id\" is "
	             "not valid UTF-8 (hex:c328): cannot be stored as "
	             "text");
	set_all(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(s, d, res, n));
	inbox_source_close(s);
}

TEST(payload_truncated)
{
	char st[96], big[200];
	name(st, sizeof(st), "big");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ASSERT_OK(xadd_payload(st, big, NULL));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, st, "consumer=a", 100, 50));
	inbox_delivery d[2] = {INBOX_DELIVERY_INIT};
	inbox_result res[2] = {INBOX_RESULT_INIT};
	size_t n = poll_some(s, d, 2, 2000);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(d[0].payload_len, 51);
	ASSERT_STREQ(d[0].refused,
	             "payload of 199 bytes exceeds max_payload 50");
	set_all(res, n, INBOX_DEAD_LETTERED);
	ASSERT_OK(inbox_source_settle(s, d, res, n));
	ASSERT_EQ(pending(st, "g"), 0);
	inbox_source_close(s);
}

TEST(retry_redelivers_with_count)
{
	char st[96], id0[48], id1[48];
	name(st, sizeof(st), "retry");
	ASSERT_OK(xadd_payload(st, "{\"id\":1}", id0));
	ASSERT_OK(xadd_payload(st, "{\"id\":2}", id1));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, st, "consumer=a", 300, 0));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4] = {INBOX_RESULT_INIT};
	size_t n = poll_some(s, d, 4, 2000);
	ASSERT_EQ(n, 2);
	set_all(res, n, INBOX_APPLIED);
	res[1].outcome = INBOX_RETRY;
	int64_t t0 = now_ms();
	ASSERT_OK(inbox_source_settle(s, d, res, n));
	ASSERT_EQ(pending(st, "g"), 1);
	for (int round = 2; round <= 3; round++) {
		n = poll_some(s, d, 4, 3000);
		ASSERT_EQ(n, 1);
		ASSERT_TRUE(now_ms() - t0 >= 280);
		char want[160];
		snprintf(want, sizeof(want), "%s/%s", st, id1);
		ASSERT_STREQ(d[0].position, want);
		ASSERT_EQ(d[0].delivery_count, round);
		set_all(res, n, round == 2 ? INBOX_IN_PROGRESS : INBOX_APPLIED);
		t0 = now_ms();
		ASSERT_OK(inbox_source_settle(s, d, res, n));
	}
	ASSERT_EQ(pending(st, "g"), 0);
	inbox_source_close(s);
}

TEST(failed_batch_redelivered)
{
	char st[96];
	name(st, sizeof(st), "failed");
	for (int i = 0; i < 5; i++)
		ASSERT_OK(xadd_payload(st, "{\"id\":1}", NULL));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, st, "consumer=a", 100, 0));
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	inbox_result res[8] = {INBOX_RESULT_INIT};
	size_t n = poll_some(s, d, 8, 2000);
	ASSERT_EQ(n, 5);
	ASSERT_OK(inbox_source_settle(s, d, NULL, n));
	ASSERT_EQ(pending(st, "g"), 5);
	n = poll_some(s, d, 8, 2000);
	ASSERT_EQ(n, 5);
	for (size_t i = 0; i < n; i++)
		ASSERT_EQ(d[i].delivery_count, 2);
	set_all(res, n, INBOX_DUPLICATE);
	ASSERT_OK(inbox_source_settle(s, d, res, n));
	ASSERT_EQ(pending(st, "g"), 0);
	inbox_source_close(s);
}

/* A member that dies with entries in hand: another takes them over once
 * idle for claim_idle; the delivery counter says 2. */
TEST(takeover_of_dead_member)
{
	char st[96];
	name(st, sizeof(st), "takeover");
	for (int i = 0; i < 6; i++)
		ASSERT_OK(xadd_payload(st, "{\"id\":1}", NULL));
	inbox_source *a = NULL, *b = NULL;
	ASSERT_OK(open_src(&a, st, "consumer=a", 100, 0));
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	inbox_result res[8] = {INBOX_RESULT_INIT};
	size_t n = poll_some(a, d, 4, 2000);
	ASSERT_EQ(n, 4);
	inbox_source_close(a); /* dies: 4 pending under "a" */
	ASSERT_EQ(pending(st, "g"), 4);
	ASSERT_OK(open_src(&b, st, "consumer=b&claim_idle=300", 100, 0));
	int64_t t0 = now_ms();
	int fresh = 0, claimed = 0;
	while ((fresh < 2 || claimed < 4) && now_ms() - t0 < 5000) {
		n = poll_some(b, d, 8, 500);
		for (size_t i = 0; i < n; i++) {
			if (d[i].delivery_count == 1)
				fresh++;
			else if (d[i].delivery_count == 2)
				claimed++;
			else
				TEST_FAIL_("delivery_count %d",
				           (int)d[i].delivery_count);
		}
		set_all(res, n, INBOX_APPLIED);
		ASSERT_OK(inbox_source_settle(b, d, res, n));
	}
	ASSERT_EQ(fresh, 2);
	ASSERT_EQ(claimed, 4);
	ASSERT_TRUE(now_ms() - t0 >= 250);
	ASSERT_EQ(pending(st, "g"), 0);
	inbox_source_close(b);
}

/* A fixed member name that restarts gets its own pending entries back at
 * once (no claim_idle wait). */
TEST(restart_same_name_redelivers_own)
{
	char st[96];
	name(st, sizeof(st), "samename");
	for (int i = 0; i < 3; i++)
		ASSERT_OK(xadd_payload(st, "{\"id\":1}", NULL));
	inbox_source *a = NULL;
	ASSERT_OK(open_src(&a, st, "consumer=a", 100, 0));
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	inbox_result res[8] = {INBOX_RESULT_INIT};
	size_t n = poll_some(a, d, 8, 2000);
	ASSERT_EQ(n, 3);
	inbox_source_close(a);
	a = NULL;
	ASSERT_OK(open_src(&a, st, "consumer=a", 100, 0));
	n = poll_some(a, d, 8, 500);
	ASSERT_EQ(n, 3);
	ASSERT_EQ(d[0].delivery_count, 2);
	set_all(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(a, d, res, n));
	ASSERT_EQ(pending(st, "g"), 0);
	inbox_source_close(a);
}

/* Deleted while pending, seen by the owner's own redelivery: a tombstone
 * that the consumer dead-letters, then acked. */
TEST(deleted_while_pending_own)
{
	char st[96], id1[48];
	name(st, sizeof(st), "del-own");
	ASSERT_OK(xadd_payload(st, "{\"id\":1}", NULL));
	ASSERT_OK(xadd_payload(st, "{\"id\":2}", id1));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, st, "consumer=a", 100, 0));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4] = {INBOX_RESULT_INIT};
	size_t n = poll_some(s, d, 4, 2000);
	ASSERT_EQ(n, 2);
	ASSERT_EQ(cmd_int("XDEL %s %s", st, id1), 1);
	ASSERT_OK(inbox_source_settle(s, d, NULL, n)); /* batch failed */
	n = poll_some(s, d, 4, 2000);
	ASSERT_EQ(n, 2);
	char want[160];
	snprintf(want, sizeof(want), "%s/%s", st, id1);
	ASSERT_STREQ(d[1].position, want);
	ASSERT_EQ(d[1].payload_len, 0);
	ASSERT_CONTAINS(d[1].headers, "deleted from the stream while pending");
	ASSERT_TRUE(d[1].id == NULL && d[1].refused);
	ASSERT_CONTAINS(d[1].refused, want);
	ASSERT_EQ(d[0].delivery_count, 2);
	set_all(res, n, INBOX_APPLIED);
	res[1].outcome = INBOX_DEAD_LETTERED;
	ASSERT_OK(inbox_source_settle(s, d, res, n));
	ASSERT_EQ(pending(st, "g"), 0);
	inbox_source_close(s);
}

/* Deleted while pending under a dead member: XAUTOCLAIM reports it (Redis
 * 7); the tombstone is kept until its dead letter is settled. */
TEST(deleted_while_pending_claimed)
{
	char st[96], id0[48];
	name(st, sizeof(st), "del-claim");
	ASSERT_OK(xadd_payload(st, "{\"id\":1}", id0));
	ASSERT_OK(xadd_payload(st, "{\"id\":2}", NULL));
	inbox_source *a = NULL, *b = NULL;
	ASSERT_OK(open_src(&a, st, "consumer=a", 100, 0));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4] = {INBOX_RESULT_INIT};
	size_t n = poll_some(a, d, 4, 2000);
	ASSERT_EQ(n, 2);
	inbox_source_close(a);
	ASSERT_EQ(cmd_int("XDEL %s %s", st, id0), 1);
	ASSERT_OK(open_src(&b, st, "consumer=b&claim_idle=200", 100, 0));
	int tomb = 0, real = 0, failed_once = 0;
	int64_t t0 = now_ms();
	while ((tomb < 1 || real < 1) && now_ms() - t0 < 5000) {
		n = poll_some(b, d, 4, 500);
		set_all(res, n, INBOX_APPLIED);
		int fail = 0;
		for (size_t i = 0; i < n; i++) {
			if (d[i].payload_len == 0) {
				char want[160];
				snprintf(want, sizeof(want), "%s/%s", st, id0);
				ASSERT_STREQ(d[i].position, want);
				ASSERT_CONTAINS(d[i].headers, "deleted");
				if (!failed_once) {
					/* the dead letter's batch fails: the
					 * tombstone must come back */
					failed_once = fail = 1;
					continue;
				}
				tomb++;
				res[i].outcome = INBOX_DEAD_LETTERED;
			} else {
				real++;
			}
		}
		ASSERT_OK(inbox_source_settle(b, d, fail ? NULL : res, n));
		if (fail)
			real = 0;
	}
	ASSERT_EQ(failed_once, 1);
	ASSERT_EQ(tomb, 1);
	ASSERT_EQ(real, 1);
	ASSERT_EQ(pending(st, "g"), 0);
	inbox_source_close(b);
}

static int dl_row(int ncols, const char *const *v, void *payload)
{
	char *out = payload;
	snprintf(out, 600, "%s|%s|%s|%s", v[0] ? v[0] : "NULL",
	         v[1] ? v[1] : "NULL", v[2] ? v[2] : "NULL",
	         ncols > 3 && v[3] ? v[3] : "NULL");
	return 0;
}

/* Through a real consumer: the tombstone becomes a dead letter keeping
 * the position, the headers saying why, and the delivery count; the entry
 * is acked. */
TEST(tombstone_dead_lettered_by_consumer)
{
	char st[96], id0[48], store_url[600], err[256] = "";
	name(st, sizeof(st), "del-consumer");
	ASSERT_OK(xadd_payload(st, "{\"id\":\"x1\"}", id0));
	snprintf(store_url, sizeof(store_url), "sqlite:%s/dl.db", tmpdir);
	inbox_store *sto = NULL;
	inbox_consumer *c = NULL;
	inbox_source *s = NULL;
	ASSERT_OK(inbox_store_open(&sto, store_url, NULL));
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = st;
	ASSERT_OK(inbox_consumer_open(&c, sto, &co, err, sizeof(err)));
	ASSERT_OK(open_src(&s, st, "consumer=a", 50, 0));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4] = {INBOX_RESULT_INIT};
	size_t n = poll_some(s, d, 4, 2000);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(cmd_int("XDEL %s %s", st, id0), 1);
	ASSERT_OK(inbox_source_settle(s, d, NULL, n)); /* batch failed */
	n = poll_some(s, d, 4, 2000);
	ASSERT_EQ(n, 1);
	ASSERT_OK(inbox_consumer_process_batch(c, d, n, res));
	ASSERT_EQ(res[0].outcome, INBOX_DEAD_LETTERED);
	ASSERT_OK(inbox_source_settle(s, d, res, n));
	ASSERT_EQ(pending(st, "g"), 0);
	char row[600] = "";
	ASSERT_OK(inbox_store_query(sto,
	                            "SELECT position, attempts, reason, "
	                            "headers FROM dead_letters",
	                            0, NULL, dl_row, row));
	char want[400];
	snprintf(want, sizeof(want),
	         "%s/%s|1|entry %s/%s was deleted from the stream while "
	         "pending: there is nothing left to process|%s",
	         st, id0, st, id0,
	         "{\"redis.deleted\":\"entry deleted from the stream while "
	         "pending\"}");
	inbox_source_close(s);
	inbox_consumer_close(c);
	inbox_store_close(sto);
	ASSERT_STREQ(row, want);
}

/* The stream (and so the group) deleted under a running source: the
 * group is recreated and new entries flow. */
TEST(stream_deleted_group_recreated)
{
	char st[96];
	name(st, sizeof(st), "nogroup");
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, st, "consumer=a", 100, 0));
	ASSERT_EQ(cmd_int("DEL %s%s", st, ""), 1);
	size_t n;
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4] = {INBOX_RESULT_INIT};
	int r = inbox_source_poll(s, d, 4, &n, 50, NULL);
	ASSERT_EQ(r, INBOX_ERR_SOURCE);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "NOGROUP");
	ASSERT_OK(xadd_payload(st, "{\"id\":1}", NULL));
	n = poll_some(s, d, 4, 2000);
	ASSERT_EQ(n, 1);
	set_all(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(s, d, res, n));
	inbox_source_close(s);
}

TEST(drain_reports_eof)
{
	char st[96];
	name(st, sizeof(st), "drain");
	ASSERT_OK(xadd_payload(st, "{\"id\":1}", NULL));
	inbox_source *s = NULL;
	ASSERT_OK(open_src(&s, st, "consumer=a&drain=1", 100, 0));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4] = {INBOX_RESULT_INIT};
	size_t n;
	int eof = 0;
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 100, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_EQ(eof, 0);
	set_all(res, n, INBOX_RETRY);
	ASSERT_OK(inbox_source_settle(s, d, res, n));
	/* a retry is waiting: not drained */
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 20, &eof));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(eof, 0);
	n = poll_some(s, d, 4, 2000);
	ASSERT_EQ(n, 1);
	set_all(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(s, d, res, n));
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 50, &eof));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(eof, 1);
	inbox_source_close(s);
}

/* A generated member name leaves the group on a clean close when it has
 * nothing pending. */
TEST(generated_member_leaves_group)
{
	char st[96];
	name(st, sizeof(st), "leave");
	inbox_source *s = NULL;
	ASSERT_OK(xadd_payload(st, "{\"id\":1}", NULL));
	ASSERT_OK(open_src(&s, st, "", 100, 0));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4] = {INBOX_RESULT_INIT};
	size_t n = poll_some(s, d, 4, 2000);
	ASSERT_EQ(n, 1);
	set_all(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(s, d, res, n));
	redisReply *r = cmd("XINFO CONSUMERS %s g", st);
	ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY);
	ASSERT_EQ(r->elements, 1);
	freeReplyObject(r);
	inbox_source_close(s);
	r = cmd("XINFO CONSUMERS %s g", st);
	ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY);
	ASSERT_EQ(r->elements, 0);
	freeReplyObject(r);
}

/* Stop and start redis-server under a running source: poll reports the
 * lost connection, then reconnects; the unsettled batch comes back. A
 * private server (tests/servers/redis.sh, random port), so that tests
 * running in parallel on the shared one are not disturbed. */
TEST(broker_restart_reconnects)
{
	char script[512], shcmd[1500], dir[300], url[128], st[96];
	snprintf(script, sizeof(script), "%s", __FILE__);
	char *slash = strrchr(script, '/');
	ASSERT_TRUE(slash != NULL);
	snprintf(slash, sizeof(script) - (size_t)(slash - script),
	         "/../servers/redis.sh");
	snprintf(dir, sizeof(dir), "%s/private", tmpdir);
	int port = 0;
	for (int i = 0; i < 6 && !port; i++) {
		int p = 30000 +
		        (int)((getpid() * 7919L + i * 104729L + time(NULL)) %
		              25000);
		snprintf(shcmd, sizeof(shcmd),
		         "sh '%s' start '%s' %d >/dev/null 2>&1", script, dir,
		         p);
		if (system(shcmd) == 0)
			port = p;
	}
	ASSERT_TRUE(port != 0);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	const char *shared = REDIS_URL;
	REDIS_URL = url;
	connect_test();
	name(st, sizeof(st), "restart");
	inbox_source *s = NULL;
	int ok = 0;
	for (int i = 0; i < 3; i++)
		if (xadd_payload(st, "{\"id\":1}", NULL) == 0)
			ok++;
	if (ok == 3 && open_src(&s, st, "consumer=a", 100, 0) == 0) {
		inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
		inbox_result res[8] = {INBOX_RESULT_INIT};
		size_t n = poll_some(s, d, 2, 2000);
		int r1 = -1, r2 = -1, r3 = -1, got = 0, again = 0;
		snprintf(shcmd, sizeof(shcmd), "sh '%s' stop '%s'", script,
		         dir);
		r1 = system(shcmd);
		/* the ack fails: committed-not-acked, redelivered later */
		set_all(res, n, INBOX_APPLIED);
		r2 = inbox_source_settle(s, d, res, n);
		size_t m;
		r3 = inbox_source_poll(s, d, 8, &m, 50, NULL);
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", inbox_source_errmsg(s));
		snprintf(shcmd, sizeof(shcmd), "sh '%s' restart '%s'", script,
		         dir);
		int r4 = system(shcmd);
		int64_t t0 = now_ms();
		while (got < 3 && now_ms() - t0 < 10000) {
			size_t k = poll_some(s, d, 8, 500);
			for (size_t i = 0; i < k; i++) {
				got++;
				if (d[i].delivery_count == 2)
					again++;
			}
			set_all(res, k, INBOX_APPLIED);
			if (k)
				inbox_source_settle(s, d, res, k);
		}
		long long left = pending(st, "g");
		inbox_source_close(s);
		if (n != 2 || r1 != 0 || r2 != INBOX_ERR_CONNECT ||
		    r3 != INBOX_ERR_CONNECT || !strstr(msg, "127.0.0.1") ||
		    r4 != 0 || got != 3 || again != 2 || left != 0)
			TEST_FAIL_("n=%zu stop=%d settle=%d poll=%d (%s) "
			           "restart=%d got=%d again=%d pending=%lld",
			           n, r1, r2, r3, msg, r4, got, again, left);
	} else {
		TEST_FAIL_("cannot use the private server at %s", url);
	}
	snprintf(shcmd, sizeof(shcmd), "sh '%s' stop '%s'", script, dir);
	if (system(shcmd) != 0)
		TEST_FAIL_("cannot stop the private server");
	REDIS_URL = shared;
	connect_test();
}

/* ------------------------------------------------------------------ */
/* End to end: inbox_run with the SQLite store, duplicates and a retry  */
/* ------------------------------------------------------------------ */

#define E2E_N    300
#define E2E_DUPS 40

typedef struct e2e {
	int applied;
	int retried;
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
	if (inbox_txn_exec(t, "INSERT INTO redis_effects(n) VALUES ($1)", 1,
	                   params, NULL) != INBOX_OK)
		return INBOX_HANDLER_RETRY;
	st->applied++;
	return INBOX_HANDLER_OK;
}

static int count_row(int ncols, const char *const *v, void *payload)
{
	long long *out = payload;
	for (int i = 0; i < ncols && i < 2; i++)
		out[i] = v[i] ? atoll(v[i]) : -1;
	return 0;
}

TEST(runner_sqlite_drain)
{
	char st[96], url[700], store_url[600], p[64];
	name(st, sizeof(st), "e2e");
	for (int i = 0; i < E2E_N; i++) {
		snprintf(p, sizeof(p), "{\"id\":\"e%d\",\"n\":%d}", i, i);
		ASSERT_OK(xadd_payload(st, p, NULL));
	}
	for (int i = 0; i < E2E_DUPS; i++) { /* producer retries */
		snprintf(p, sizeof(p), "{\"id\":\"e%d\",\"n\":%d}", i * 7,
		         i * 7);
		ASSERT_OK(xadd_payload(st, p, NULL));
	}
	snprintf(store_url, sizeof(store_url), "sqlite:%s/e2e.db", tmpdir);
	inbox_store *sto = NULL;
	inbox_consumer *c = NULL;
	inbox_source *src = NULL;
	e2e state = {0, 0};
	char err[256] = "";
	ASSERT_OK(inbox_store_open(&sto, store_url, NULL));
	ASSERT_OK(inbox_store_exec(sto, "CREATE TABLE redis_effects(n TEXT)", 0,
	                           NULL, NULL));
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = st;
	co.handler = e2e_handler;
	co.handler_payload = &state;
	ASSERT_OK(inbox_consumer_open(&c, sto, &co, err, sizeof(err)));
	inbox_source_options so = INBOX_SOURCE_OPTIONS_INIT;
	so.consumer = st;
	so.retry_delay_ms = 100;
	snprintf(url, sizeof(url), "%s/%s?drain=1", REDIS_URL, st);
	ASSERT_OK(inbox_source_open(&src, url, &so));
	inbox_runner_options ro = INBOX_RUNNER_OPTIONS_INIT;
	ro.batch_size = 32;
	ro.poll_timeout_ms = 100;
	alarm(60);
	int r = inbox_run(c, src, &ro, NULL); /* returns when drained */
	alarm(0);
	inbox_source_close(src);
	inbox_consumer_close(c);
	ASSERT_OK(r);
	ASSERT_EQ(state.applied, E2E_N);
	ASSERT_EQ(state.retried, E2E_N / 50);
	long long cnt[2] = {-1, -1};
	ASSERT_OK(inbox_store_query(sto,
	                            "SELECT COUNT(*), COUNT(DISTINCT n) "
	                            "FROM redis_effects",
	                            0, NULL, count_row, cnt));
	ASSERT_EQ(cnt[0], E2E_N);
	ASSERT_EQ(cnt[1], E2E_N);
	inbox_store_close(sto);
	ASSERT_EQ(pending(st, st), 0);
}

int main(void)
{
	REDIS_URL = getenv("INBOX_TEST_REDIS_URL");
	if (!REDIS_URL || !*REDIS_URL) {
		fprintf(stderr,
		        "test_redis_source: INBOX_TEST_REDIS_URL is not "
		        "set; run the suite through tests/run-suite.sh "
		        "(it starts redis-server via "
		        "tests/servers/redis.sh)\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	if (connect_test() < 0) {
		fprintf(stderr, "test_redis_source: cannot connect to %s\n",
		        REDIS_URL);
		printf("0 passed, 1 failed\n");
		return 1;
	}
	snprintf(prefix, sizeof(prefix), "t%ld-%ld", (long)getpid(),
	         (long)time(NULL));
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/inbox-redis-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(url_errors);
	RUN(rediss_refused_with_reason);
	RUN(password_never_in_errmsg);
	RUN(each_once_with_positions);
	RUN(payload_id_headers_rules);
	RUN(payload_truncated);
	RUN(retry_redelivers_with_count);
	RUN(failed_batch_redelivered);
	RUN(takeover_of_dead_member);
	RUN(restart_same_name_redelivers_own);
	RUN(deleted_while_pending_own);
	RUN(deleted_while_pending_claimed);
	RUN(tombstone_dead_lettered_by_consumer);
	RUN(stream_deleted_group_recreated);
	RUN(drain_reports_eof);
	RUN(generated_member_leaves_group);
	RUN(runner_sqlite_drain);
	RUN(broker_restart_reconnects);
	char rm[400];
	snprintf(rm, sizeof(rm), "rm -rf '%s'", tmpdir);
	if (system(rm) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	if (rc)
		redisFree(rc);
	return test_summary();
}
