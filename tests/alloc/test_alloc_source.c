/*
 * Allocation failures in the sources (argv[1]: "jsonl" or "kafka").
 *
 * For every N, the Nth allocation fails (fault.h) somewhere in a whole
 * run of the source: open (JSONL), then poll and settle until every
 * message has been acked, with one message answered RETRY once. Each
 * call must succeed or report INBOX_ERR_NOMEM, and the calls after it
 * must work: nothing skipped (every message delivered and acked), nothing
 * acked twice (no message delivered again after its settle succeeded),
 * acks in order within a partition, and nothing left behind (JSONL: the
 * checkpoint is at the end; Kafka: a new member of the group gets
 * nothing). The ASan build checks that nothing leaks.
 *
 * Kafka runs against librdkafka's in-process mock cluster. A member's
 * first join of a group costs the mock's 3 s rebalance delay, so one
 * source serves every N (new messages each time; every poll asks for one
 * more message than the last, so that slots are added and filled for the
 * first time, as after open) and open is exercised on its own, without
 * polling.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <inbox/source.h>

#include "../clock.h"
#include "../kafka_mock.h"
#include "fault.h"
#include "test.h"

static char tmpdir[] = "/tmp/inbox-alloc-src-XXXXXX";

/* ---- bookkeeping shared by both sources ---- */

#define MAXMSG 256

typedef struct book {
	int delivered[MAXMSG];
	int acked[MAXMSG];
	int retried[MAXMSG]; /* answered RETRY once */
	int last_acked[8];   /* per partition, -1 */
	int nomem;           /* calls that reported NOMEM */
	int bad;             /* a check failed */
	long n;
	char calls[4096]; /* what was called and what it returned */
} book;

static void book_note(book *b, const char *call, int rc, size_t k)
{
	size_t len = strlen(b->calls);
	if (len + 64 < sizeof(b->calls))
		snprintf(b->calls + len, sizeof(b->calls) - len, "%s%s=%s/%zu",
		         len ? " " : "", call,
		         rc == 0 ? "ok" : inbox_err_name(rc) + 10, k);
}

static void book_init(book *b, long n)
{
	memset(b, 0, sizeof(*b));
	for (int i = 0; i < 8; i++)
		b->last_acked[i] = -1;
	b->n = n;
}

static int book_rc(book *b, int rc, const char *call, const char *err)
{
	book_note(b, call, rc, 0);
	if (rc == INBOX_OK)
		return 0;
	if (rc == INBOX_ERR_NOMEM) {
		b->nomem++;
		return 1;
	}
	fprintf(stderr, "  N=%ld: %s returned %s: %s\n", b->n, call,
	        inbox_err_name(rc), err);
	b->bad = 1;
	return -1;
}

static void book_delivered(book *b, int msg)
{
	if (msg < 0 || msg >= MAXMSG) {
		fprintf(stderr, "  N=%ld: unknown message %d\n", b->n, msg);
		b->bad = 1;
		return;
	}
	if (b->acked[msg]) {
		fprintf(stderr, "  N=%ld: message %d delivered after its ack\n",
		        b->n, msg);
		b->bad = 1;
	}
	b->delivered[msg]++;
}

/* Outcome for a message: RETRY the first time for `retry_msg`. */
static inbox_outcome book_decide(book *b, int msg, int retry_msg)
{
	if (msg == retry_msg && msg >= 0 && msg < MAXMSG && !b->retried[msg]) {
		b->retried[msg] = 1;
		return INBOX_RETRY;
	}
	return INBOX_APPLIED;
}

/* A settle that succeeded acked the deliveries up to the first RETRY of
 * each partition (in poll order within a partition). */
static void book_acked(book *b, const int *msg, const int *part,
                       const inbox_result *res, size_t n)
{
	int stopped[8] = {0};
	for (size_t i = 0; i < n; i++) {
		int p = part[i] & 7;
		if (stopped[p] || !inbox_outcome_ackable(res[i].outcome)) {
			stopped[p] = 1;
			continue;
		}
		if (msg[i] < 0 || msg[i] >= MAXMSG)
			continue;
		if (msg[i] <= b->last_acked[p]) {
			fprintf(stderr, "  N=%ld: message %d acked after %d\n",
			        b->n, msg[i], b->last_acked[p]);
			b->bad = 1;
		}
		b->last_acked[p] = msg[i];
		b->acked[msg[i]]++;
	}
}

static int book_complete(book *b, int from, int to)
{
	for (int m = from; m < to; m++)
		if (b->acked[m] != 1 || b->delivered[m] < 1) {
			fprintf(stderr,
			        "  N=%ld: message %d delivered %d, acked %d "
			        "times\n  calls: %s\n",
			        b->n, m, b->delivered[m], b->acked[m],
			        b->calls);
			return 0;
		}
	return !b->bad;
}

/* ------------------------------------------------------------------ */
/* JSONL                                                                */
/* ------------------------------------------------------------------ */

/* Line numbers of the messages; 3 and 4 are blank, 6 is longer than
 * max_payload (delivered cut), 12 has no newline. */
static const char jl_text[] =
    "\xEF\xBB\xBF{\"n\":1}\n"
    "{\"n\":2}\r\n"
    "\n"
    "   \n"
    "{\"n\":5}\n"
    "{\"n\":6,\"pad\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n"
    "{\"n\":7}\n"
    "{\"n\":8}\n"
    "{\"n\":9}\n"
    "{\"n\":10}\n"
    "{\"n\":11}\n"
    "{\"n\":12}";
static const int jl_lines[] = {1, 2, 5, 6, 7, 8, 9, 10, 11, 12};
#define JL_NLINES (sizeof(jl_lines) / sizeof(*jl_lines))

static char jl_path[512];

static int jl_open(inbox_source **s, long n)
{
	char url[1200];
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "alloc.jsonl";
	o.max_batch = 4;
	o.retry_delay_ms = 0;
	o.max_payload = 100;
	snprintf(url, sizeof(url), "jsonl:%s?checkpoint=%s/ck-%ld", jl_path,
	         tmpdir, n);
	return inbox_source_open(s, url, &o);
}

static int line_of(const inbox_delivery *d)
{
	const char *c = d->position ? strrchr(d->position, ':') : NULL;
	return c ? atoi(c + 1) : -1;
}

/* The whole file once, with the Nth allocation failing. 1: the fault
 * fired, 0: it did not (done), -1: a check failed. */
static int jl_round(long n)
{
	book b;
	book_init(&b, n);
	inbox_source *s = NULL;
	fault_arm(n);
	int rc = jl_open(&s, n);
	if (book_rc(&b, rc, "open", s ? inbox_source_errmsg(s) : "") > 0) {
		inbox_source_close(s);
		s = NULL;
		rc = jl_open(&s, n); /* the next call works */
		book_rc(&b, rc, "open again", s ? inbox_source_errmsg(s) : "");
	}
	int64_t deadline = now_ms() + 10000;
	while (!b.bad && s && now_ms() < deadline) {
		inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
		inbox_result res[4] = {INBOX_RESULT_INIT};
		int msg[4], part[4] = {0};
		size_t k = 0;
		int eof = 0;
		rc = inbox_source_poll(s, d, 4, &k, 0, &eof);
		if (book_rc(&b, rc, "poll", inbox_source_errmsg(s)))
			continue;
		if (k == 0 && eof)
			break;
		memset(res, 0, sizeof(res));
		res[0].version = INBOX_RESULT_VERSION;
		for (size_t i = 0; i < k; i++) {
			msg[i] = line_of(&d[i]);
			book_delivered(&b, msg[i]);
			res[i].outcome = book_decide(&b, msg[i], 5);
		}
		rc = inbox_source_settle(s, d, res, k);
		if (book_rc(&b, rc, "settle", inbox_source_errmsg(s)) == 0)
			book_acked(&b, msg, part, res, k);
	}
	inbox_source_close(s);
	int fired = fault_disarm();
	if (!fired && b.nomem) {
		fprintf(stderr, "  N=%ld: NOMEM without a failure\n", n);
		b.bad = 1;
	}
	int ok = !b.bad;
	for (size_t i = 0; i < JL_NLINES; i++)
		if (!book_complete(&b, jl_lines[i], jl_lines[i] + 1))
			ok = 0;
	/* Nothing left: a new source on the checkpoint is at the end. */
	s = NULL;
	if (jl_open(&s, n) != INBOX_OK) {
		ok = 0;
	} else {
		inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
		size_t k = 9;
		int eof = 0;
		if (inbox_source_poll(s, d, 4, &k, 0, &eof) != INBOX_OK ||
		    k != 0 || !eof) {
			fprintf(stderr, "  N=%ld: %zu left after the run\n", n,
			        k);
			ok = 0;
		}
	}
	inbox_source_close(s);
	if (!ok)
		return -1;
	return fired;
}

TEST(jsonl_poll_settle)
{
	snprintf(jl_path, sizeof(jl_path), "%s/in.jsonl", tmpdir);
	FILE *f = fopen(jl_path, "wb");
	ASSERT_TRUE(f != NULL);
	fwrite(jl_text, 1, sizeof(jl_text) - 1, f);
	fclose(f);
	long n = 1;
	int r;
	while ((r = jl_round(n)) == 1)
		n++;
	printf("  jsonl: %ld allocations over a run\n", n - 1);
	ASSERT_EQ(r, 0);
	ASSERT_TRUE(n > 10);
}

/* The runner over the same file into SQLite: whatever allocation
 * fails, inbox_run() retries and every line is applied exactly once (the
 * over-long line 6 is a dead letter). */
static int count_rows(int ncols, const char *const *v, void *payload)
{
	(void)ncols;
	*(long *)payload = atol(v[0] ? v[0] : "-1");
	return 0;
}

static long scalar(inbox_store *st, const char *sql, const char *arg)
{
	long v = -1;
	const char *p[1] = {arg};
	if (inbox_store_query(st, sql, 1, p, count_rows, &v) != INBOX_OK)
		fprintf(stderr, "  %s: %s\n", sql, inbox_store_errmsg(st));
	return v;
}

/* payload: the consumer's name */
static int effect(inbox_txn *t, const inbox_msg *m, void *payload)
{
	const char *p[2] = {payload, inbox_msg_key(m)};
	return inbox_txn_exec(
	           t, "INSERT INTO effects (consumer, key) VALUES ($1, $2)", 2,
	           p, NULL) < 0
	           ? INBOX_HANDLER_RETRY
	           : INBOX_HANDLER_OK;
}

static int jl_run_round(inbox_store *st, long n)
{
	char name[64];
	snprintf(name, sizeof(name), "run-%ld", n);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = name;
	co.id_pointer = "/n";
	co.handler = effect;
	co.handler_payload = name;
	inbox_consumer *c = NULL;
	if (inbox_consumer_open(&c, st, &co, NULL, 0) != INBOX_OK)
		return -1;
	inbox_runner_options ro = INBOX_RUNNER_OPTIONS_INIT;
	ro.batch_size = 4;
	ro.poll_timeout_ms = 0;
	ro.backoff_initial_ms = 1;
	ro.backoff_max_ms = 2;
	int ok = 1, rc = INBOX_OK;
	inbox_source *s = NULL;
	fault_arm(n);
	for (int tries = 0; tries < 2; tries++) {
		char url[1200];
		inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
		o.consumer = name;
		o.max_batch = 4;
		o.retry_delay_ms = 0;
		o.max_payload = 100;
		snprintf(url, sizeof(url), "jsonl:%s?checkpoint=%s/%s.ck",
		         jl_path, tmpdir, name);
		rc = inbox_source_open(&s, url, &o);
		if (rc == INBOX_OK)
			rc = inbox_run(c, s, &ro, NULL);
		inbox_source_close(s);
		s = NULL;
		if (rc != INBOX_ERR_NOMEM)
			break; /* NOMEM: opening or starting; once more */
	}
	int fired = fault_disarm();
	if (rc != INBOX_OK) {
		fprintf(stderr, "  N=%ld: run: %s %s\n", n, inbox_err_name(rc),
		        inbox_consumer_errmsg(c));
		ok = 0;
	}
	inbox_consumer_close(c);
	long effects = scalar(
	    st, "SELECT count(*) FROM effects WHERE consumer = $1", name);
	long distinct = scalar(
	    st, "SELECT count(DISTINCT key) FROM effects WHERE consumer = $1",
	    name);
	long dead = scalar(
	    st, "SELECT count(*) FROM dead_letters WHERE consumer = $1", name);
	if (effects != 9 || distinct != 9 || dead != 1) {
		fprintf(stderr,
		        "  N=%ld: %ld effects (%ld keys), %ld dead letters; "
		        "expected 9, 9, 1\n",
		        n, effects, distinct, dead);
		ok = 0;
	}
	if (!ok)
		return -1;
	return fired;
}

TEST(jsonl_runner)
{
	char url[600];
	snprintf(url, sizeof(url), "sqlite:%s/run.db", tmpdir);
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, url, NULL));
	/* Durability is not what is tested (see test_alloc_store.c). */
	ASSERT_OK(
	    inbox_store_exec(st, "PRAGMA synchronous = OFF", 0, NULL, NULL));
	ASSERT_OK(inbox_store_exec(
	    st, "CREATE TABLE effects (consumer TEXT, key TEXT)", 0, NULL,
	    NULL));
	long n = 1;
	int r;
	while ((r = jl_run_round(st, n)) == 1)
		n++;
	inbox_store_close(st);
	printf("  jsonl runner: %ld allocations over a run\n", n - 1);
	ASSERT_EQ(r, 0);
	ASSERT_TRUE(n > 50);
}

/* ------------------------------------------------------------------ */
/* Kafka                                                                */
/* ------------------------------------------------------------------ */

#define K_PARTS 2
#define K_ROUND 6 /* messages per N */
#define K_OPTS                                                                 \
	"&rdkafka.session.timeout.ms=6000&rdkafka.heartbeat.interval.ms=300"   \
	"&rdkafka.log_level=3&rdkafka.fetch.wait.max.ms=10"

static int start_cluster(void)
{
	static const char *const conf[] = {"linger.ms", "0", NULL};
	if (kafka_mock_start(1, conf) < 0)
		return -1;
	return rd_kafka_mock_topic_create(mock, "alloc", K_PARTS, 1) ? -1 : 0;
}

static void stop_cluster(void)
{
	kafka_mock_stop();
}

/* Messages [from, to): partition i % K_PARTS, header message-id "m-i"
 * (and a second, binary one, so that the headers JSON outgrows the slot's
 * first buffer), payload {"i":i}. */
static int produce(int from, int to)
{
	char trace[40];
	memset(trace, 0x01, sizeof(trace));
	for (int i = from; i < to; i++) {
		char id[32], payload[64];
		snprintf(id, sizeof(id), "m-%d", i);
		snprintf(payload, sizeof(payload), "{\"i\":%d}", i);
		if (rd_kafka_producev(
		        producer, RD_KAFKA_V_TOPIC("alloc"),
		        RD_KAFKA_V_PARTITION(i % K_PARTS),
		        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		        RD_KAFKA_V_VALUE(payload, strlen(payload)),
		        RD_KAFKA_V_HEADER("message-id", id, -1),
		        RD_KAFKA_V_HEADER("trace", trace, sizeof(trace)),
		        RD_KAFKA_V_END))
			return -1;
	}
	return rd_kafka_flush(producer, 10000) ? -1 : 0;
}

static int k_open(inbox_source **s, const char *group, int open_timeout)
{
	char url[1024];
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "alloc.kafka";
	o.max_batch = 4;
	o.retry_delay_ms = 20;
	snprintf(url, sizeof(url),
	         "kafka://%s/alloc?group=%s&open_timeout_ms=%d" K_OPTS,
	         bootstrap, group, open_timeout);
	return inbox_source_open(s, url, &o);
}

static int msg_of(const inbox_delivery *d)
{
	int m = -1;
	if (d->id)
		sscanf(d->id, "m-%d", &m);
	return m;
}

static int part_of(const inbox_delivery *d)
{
	int p = -1;
	const char *slash = d->position ? strchr(d->position, '/') : NULL;
	if (slash)
		p = atoi(slash + 1);
	return p;
}

/* One poll/settle of up to `max` deliveries on s, into b. */
static void k_step(inbox_source *s, book *b, size_t max, int retry_msg,
                   int base)
{
	inbox_delivery d[MAXMSG] = {INBOX_DELIVERY_INIT};
	inbox_result res[MAXMSG] = {INBOX_RESULT_INIT};
	int msg[MAXMSG], part[MAXMSG];
	size_t k = 0;
	int rc = inbox_source_poll(s, d, max, &k, 200, NULL);
	if (k > 0)
		book_note(b, "got", 0, k);
	if (rc == INBOX_ERR_SOURCE && k == 0)
		return; /* nothing within the timeout, with a broker warning */
	if (book_rc(b, rc, "poll", inbox_source_errmsg(s)))
		return;
	memset(res, 0, sizeof(res));
	res[0].version = INBOX_RESULT_VERSION;
	for (size_t i = 0; i < k; i++) {
		msg[i] = msg_of(&d[i]) - base;
		part[i] = part_of(&d[i]);
		book_delivered(b, msg[i]);
		res[i].outcome = book_decide(b, msg[i], retry_msg);
	}
	if (k == 0)
		return;
	rc = inbox_source_settle(s, d, res, k);
	if (book_rc(b, rc, "settle", inbox_source_errmsg(s)) == 0)
		book_acked(b, msg, part, res, k);
}

/* K_ROUND * (n + 1) new messages through the long-lived source, polled
 * with max as large, with the Nth allocation failing: each round's
 * batch can be larger than any before, so that new slots are made and
 * filled for the first time, as after open. */
static int k_round(inbox_source *s, long n, int base, int *count)
{
	book b;
	book_init(&b, n);
	int k = K_ROUND * ((int)n + 1);
	if (k > MAXMSG)
		k = MAXMSG;
	*count = k;
	if (produce(base, base + k) < 0) {
		fprintf(stderr, "  N=%ld: produce failed\n", n);
		return -1;
	}
	fault_arm(n);
	/* generous: an ASan build on a loaded machine is slow, and a round
	 * normally takes well under a second */
	int64_t deadline = now_ms() + 60000;
	int done = 0;
	while (!b.bad && !done && now_ms() < deadline) {
		k_step(s, &b, (size_t)k, 1, base);
		done = 1;
		for (int m = 0; m < k; m++)
			done &= b.acked[m] == 1;
	}
	int fired = fault_disarm();
	int ok = book_complete(&b, 0, k);
	if (!fired && b.nomem) {
		fprintf(stderr, "  N=%ld: NOMEM without a failure\n", n);
		ok = 0;
	}
	if (!ok)
		return -1;
	return fired;
}

TEST(kafka_open)
{
	/* open_timeout_ms=0: no broker round trip, open builds and subscribes
	 * only; close leaves at once (the group was never joined). */
	long n = 1;
	for (;; n++) {
		inbox_source *s = NULL;
		fault_arm(n);
		int rc = k_open(&s, "alloc-open", 0);
		int fired = fault_disarm();
		inbox_source_close(s);
		if (rc != INBOX_OK && rc != INBOX_ERR_NOMEM) {
			fprintf(stderr, "  N=%ld: open returned %s\n", n,
			        inbox_err_name(rc));
			ASSERT_TRUE(0);
		}
		if (!fired) {
			ASSERT_OK(rc);
			break;
		}
	}
	printf("  kafka open: %ld allocations\n", n - 1);
	ASSERT_TRUE(n > 5);
}

TEST(kafka_poll_settle)
{
	inbox_source *s = NULL;
	int rc = k_open(&s, "alloc-g", 10000);
	if (rc != INBOX_OK)
		fprintf(stderr, "  open: %s\n",
		        s ? inbox_source_errmsg(s) : inbox_err_name(rc));
	ASSERT_OK(rc);
	/* Join the group (the mock's first rebalance takes 3 s). */
	book warm;
	book_init(&warm, 0);
	ASSERT_OK(produce(0, K_ROUND));
	int64_t deadline = now_ms() + 20000;
	int done = 0;
	while (!done && now_ms() < deadline && !warm.bad) {
		k_step(s, &warm, 4, -1, 0);
		done = 1;
		for (int m = 0; m < K_ROUND; m++)
			done &= warm.acked[m] == 1;
	}
	ASSERT_TRUE(done);
	int base = K_ROUND, count = 0;
	long n = 1;
	int r;
	while ((r = k_round(s, n, base, &count)) == 1) {
		n++;
		base += count;
	}
	printf("  kafka: %ld allocations over a round\n", n - 1);
	ASSERT_EQ(r, 0);
	ASSERT_TRUE(n > 3);
	inbox_source_close(s);
	/* What every round acked was committed: a new member of the group
	 * gets nothing. */
	s = NULL;
	ASSERT_OK(k_open(&s, "alloc-g", 10000));
	book after;
	book_init(&after, 0);
	deadline = now_ms() + 6000;
	size_t got = 0;
	while (now_ms() < deadline) {
		inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
		size_t k = 0;
		inbox_source_poll(s, d, 8, &k, 200, NULL);
		got += k;
		if (k)
			inbox_source_settle(s, d, NULL, k);
	}
	inbox_source_close(s);
	ASSERT_EQ(got, 0);
}

int main(int argc, char **argv)
{
	/* batch_failed and poll_failed warnings are expected by the hundred */
	setenv("INBOX_LOG_LEVEL", "error", 1);
	if (fault_install() < 0 || argc < 2 ||
	    (strcmp(argv[1], "jsonl") != 0 && strcmp(argv[1], "kafka") != 0)) {
		fprintf(stderr, "usage: test_alloc_source jsonl|kafka\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	if (strcmp(argv[1], "jsonl") == 0) {
		RUN(jsonl_poll_settle);
		RUN(jsonl_runner);
	} else {
		if (start_cluster() < 0) {
			fprintf(stderr, "cannot start the mock cluster\n");
			printf("0 passed, 1 failed\n");
			return 1;
		}
		RUN(kafka_open);
		RUN(kafka_poll_settle);
		stop_cluster();
	}
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return test_summary();
}
