/* The admin API (inbox/admin.h) and the Prometheus exposition
 * (inbox/metrics.h), on an in-memory SQLite store. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inbox/admin.h>
#include <inbox/inbox.h>
#include <inbox/metrics.h>

#include "test.h"

static int reject_bad = 1;

/* Rejects payloads mentioning "bad" while reject_bad is set. */
static int handler(inbox_txn *t, const inbox_msg *m, void *payload)
{
	size_t len;
	const char *p = inbox_msg_payload(m, &len);
	(void)payload;
	if (reject_bad && strstr(p, "bad")) {
		inbox_txn_set_reason(t, "rejected by the test");
		return INBOX_HANDLER_REJECT;
	}
	return INBOX_HANDLER_OK;
}

static inbox_store *st;
static inbox_consumer *c;

static int setup(void)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	if (inbox_store_open(&st, "sqlite::memory:", NULL) != INBOX_OK)
		return -1;
	o.name = "billing";
	o.handler = handler;
	return inbox_consumer_open(&c, st, &o, NULL, 0);
}

static int deliver(const char *payload, size_t len, inbox_result *r)
{
	inbox_delivery d = INBOX_DELIVERY_INIT;
	d.payload = payload;
	d.payload_len = len;
	d.position = "test:1";
	d.headers = "{\"h\":\"v\"}";
	return inbox_consumer_process(c, &d, r);
}

static int deliver_s(const char *payload, inbox_result *r)
{
	return deliver(payload, strlen(payload), r);
}

TEST(stats_and_inspect)
{
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(deliver_s("{\"id\":\"a\"}", &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_OK(deliver_s("{\"id\":\"b\"}", &r));
	ASSERT_OK(deliver_s("{\"id\":\"c\",\"x\":\"bad\"}", &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	inbox_admin_stats s = INBOX_ADMIN_STATS_INIT;
	ASSERT_OK(inbox_admin_stats_read(st, "billing", &s));
	ASSERT_EQ(s.records, 3);
	ASSERT_EQ(s.completed, 2);
	ASSERT_EQ(s.dead, 1);
	ASSERT_EQ(s.processing, 0);
	ASSERT_EQ(s.dead_letters, 1);
	ASSERT_EQ(s.dead_letters_pending, 1);
	ASSERT_EQ(s.retention_seconds, 7 * 24 * 3600);
	ASSERT_EQ(s.expired, 0);
	ASSERT_TRUE(s.oldest_age_ms >= 0 && s.oldest_age_ms < 60000);
	int64_t h = inbox_admin_headroom_ms(&s);
	ASSERT_TRUE(h > 0 && h <= 7LL * 24 * 3600 * 1000);

	inbox_admin_stats none = INBOX_ADMIN_STATS_INIT;
	ASSERT_OK(inbox_admin_stats_read(st, "nobody", &none));
	ASSERT_EQ(none.records, 0);
	ASSERT_EQ(none.oldest_age_ms, -1);
	ASSERT_EQ(inbox_admin_headroom_ms(&none), INT64_MAX);

	inbox_admin_record *rec = NULL;
	ASSERT_OK(inbox_admin_inspect(st, "billing", "a", &rec));
	ASSERT_STREQ(rec->status, "completed");
	ASSERT_EQ(rec->attempts, 1);
	ASSERT_EQ(rec->fence, 1);
	ASSERT_EQ(strlen(rec->fingerprint), 64);
	ASSERT_STREQ(rec->message_id, "a");
	ASSERT_EQ(rec->lease_until_ms, 0);
	ASSERT_TRUE(rec->processed_at_ms > 0 &&
	            rec->processed_at_ms <= rec->now_ms);
	inbox_admin_record_free(rec);
	rec = NULL;
	ASSERT_EQ(inbox_admin_inspect(st, "billing", "zzz", &rec),
	          INBOX_ERR_NOTFOUND);
	ASSERT_TRUE(rec == NULL);
}

static int count_dl(const inbox_admin_dead_letter *dl, void *payload)
{
	int *n = payload;
	if (dl->payload != NULL || dl->reason == NULL)
		return 1;
	(*n)++;
	return 0;
}

TEST(dead_letters)
{
	/* Raw bytes that are not UTF-8, with a NUL inside. */
	static const char raw[] = "{\"id\":\"\xff\x00z\"}";
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(deliver(raw, sizeof(raw) - 1, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	int64_t id = r.dead_letter_id;
	ASSERT_TRUE(id > 0);
	inbox_admin_dead_letter *dl = NULL;
	ASSERT_OK(inbox_admin_dlq_get(st, id, "billing", &dl));
	ASSERT_EQ(dl->payload_len, sizeof(raw) - 1);
	ASSERT_TRUE(memcmp(dl->payload, raw, sizeof(raw) - 1) == 0);
	ASSERT_STREQ(dl->position, "test:1");
	ASSERT_STREQ(dl->headers, "{\"h\":\"v\"}");
	ASSERT_TRUE(dl->key == NULL);
	ASSERT_EQ(dl->replayed_at_ms, 0);
	inbox_admin_dead_letter_free(dl);
	dl = NULL;
	ASSERT_EQ(inbox_admin_dlq_get(st, id, "other", &dl),
	          INBOX_ERR_NOTFOUND);

	int n = 0;
	inbox_admin_dlq_filter f = INBOX_ADMIN_DLQ_FILTER_INIT;
	f.consumer = "billing";
	ASSERT_OK(inbox_admin_dlq_list(st, &f, count_dl, &n));
	ASSERT_EQ(n, 2);
	n = 0;
	f.key = "c";
	ASSERT_OK(inbox_admin_dlq_list(st, &f, count_dl, &n));
	ASSERT_EQ(n, 1);
	n = 0;
	f.key = NULL;
	f.limit = 1;
	ASSERT_OK(inbox_admin_dlq_list(st, &f, count_dl, &n));
	ASSERT_EQ(n, 1);

	ASSERT_OK(inbox_admin_dlq_drop(st, id));
	ASSERT_EQ(inbox_admin_dlq_drop(st, id), INBOX_ERR_NOTFOUND);
	ASSERT_EQ(inbox_admin_dlq_mark_replayed(st, id), INBOX_ERR_NOTFOUND);
}

static int first_id(const inbox_admin_dead_letter *dl, void *payload)
{
	*(int64_t *)payload = dl->id;
	return 1;
}

TEST(replay)
{
	int64_t id = 0;
	inbox_admin_dlq_filter f = INBOX_ADMIN_DLQ_FILTER_INIT;
	f.key = "c";
	ASSERT_OK(inbox_admin_dlq_list(st, &f, first_id, &id));
	ASSERT_TRUE(id > 0);
	inbox_result r = INBOX_RESULT_INIT;
	/* Still rejected: dead-lettered again, counted on the same dead
	 * letter, which stays pending (not marked replayed). */
	ASSERT_OK(inbox_admin_dlq_replay(st, c, id, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(r.dead_letter_id, id);
	inbox_admin_dead_letter *again = NULL;
	ASSERT_OK(inbox_admin_dlq_get(st, id, NULL, &again));
	ASSERT_EQ(again->deliveries, 2);
	ASSERT_EQ(again->replayed_at_ms, 0);
	inbox_admin_dead_letter_free(again);
	/* The cause is fixed: applied once, then a duplicate. */
	reject_bad = 0;
	ASSERT_OK(inbox_admin_dlq_replay(st, c, id, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_STREQ(r.key, "c");
	ASSERT_OK(inbox_admin_dlq_replay(st, c, id, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	inbox_admin_dead_letter *dl = NULL;
	ASSERT_OK(inbox_admin_dlq_get(st, id, NULL, &dl));
	ASSERT_TRUE(dl->replayed_at_ms > 0);
	inbox_admin_dead_letter_free(dl);
	inbox_admin_record *rec = NULL;
	ASSERT_OK(inbox_admin_inspect(st, "billing", "c", &rec));
	ASSERT_STREQ(rec->status, "completed");
	inbox_admin_record_free(rec);
	ASSERT_EQ(inbox_admin_dlq_replay(st, c, 999999, &r),
	          INBOX_ERR_NOTFOUND);
}

typedef struct prog {
	int calls;
	int advances; /* calls where done grew */
	int64_t last_done, last_total;
} prog;

static void on_progress(int64_t done, int64_t total, void *payload)
{
	prog *p = payload;
	p->calls++;
	if (done > p->last_done)
		p->advances++;
	p->last_done = done;
	p->last_total = total;
}

TEST(purge_in_steps)
{
	char buf[64], sql[256];
	inbox_result r = INBOX_RESULT_INIT;
	for (int i = 0; i < 50; i++) {
		snprintf(buf, sizeof(buf), "{\"id\":\"p%02d\"}", i);
		ASSERT_OK(deliver_s(buf, &r));
		ASSERT_EQ(r.outcome, INBOX_APPLIED);
		/* Expired, an hour apart from each other. */
		snprintf(sql, sizeof(sql),
		         "UPDATE inbox SET processed_at = processed_at - "
		         "(8 * 86400 + %d * 3600) * 1000 WHERE key = 'p%02d'",
		         i, i);
		ASSERT_OK(inbox_store_exec(st, sql, 0, NULL, NULL));
	}
	/* One just inside the window. */
	ASSERT_OK(inbox_store_exec(st,
	                           "UPDATE inbox SET processed_at = "
	                           "processed_at - 6 * 86400 * 1000 WHERE "
	                           "key = 'a'",
	                           0, NULL, NULL));
	int64_t n = 0;
	prog p = {0, 0, 0, 0};
	ASSERT_EQ(inbox_admin_purge(st, "billing", 3600, 5, 0, NULL, NULL, &n),
	          INBOX_ERR_INVALID); /* shorter than the registered window */
	ASSERT_OK(
	    inbox_admin_purge(st, "billing", 0, 5, 1, on_progress, &p, &n));
	ASSERT_EQ(n, 50);
	memset(&p, 0, sizeof(p));
	ASSERT_OK(
	    inbox_admin_purge(st, "billing", 0, 5, 0, on_progress, &p, &n));
	ASSERT_EQ(n, 50);
	ASSERT_TRUE(p.calls <= 101);   /* at most a hundred steps */
	ASSERT_TRUE(p.advances >= 20); /* oldest first, a few at a time */
	ASSERT_EQ(p.last_done, 50);
	ASSERT_EQ(p.last_total, 50);
	inbox_admin_record *rec = NULL;
	ASSERT_OK(inbox_admin_inspect(st, "billing", "a", &rec));
	inbox_admin_record_free(rec);
	ASSERT_EQ(inbox_admin_purge(st, "nobody", 0, 5, 0, NULL, NULL, &n),
	          INBOX_ERR_INVALID);
}

TEST(metrics_exposition)
{
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &s);
	inbox_admin_stats db = INBOX_ADMIN_STATS_INIT;
	ASSERT_OK(inbox_admin_stats_read(st, "billing", &db));
	inbox_metrics_consumer cs[2] = {
	    {.version = INBOX_METRICS_CONSUMER_VERSION,
	     .name = "billing",
	     .counters = &s,
	     .store = &db,
	     .running = 1},
	    {.version = INBOX_METRICS_CONSUMER_VERSION,
	     .name = "we\"ird\\na\nme\xff",
	     .counters = &s,
	     .running = 0},
	};
	char *out = NULL;
	size_t len = 0;
	ASSERT_OK(inbox_metrics_render(&out, &len, cs, 2));
	ASSERT_EQ(strlen(out), len);
	ASSERT_CONTAINS(out, "# TYPE inbox_duplicates_total counter\n");
	ASSERT_CONTAINS(out, "inbox_applied_total{consumer=\"billing\"} ");
	ASSERT_CONTAINS(out,
	                "inbox_applied_total{consumer=\"we\\\"ird\\\\na\\nme"
	                "\xef\xbf\xbd\"} ");
	ASSERT_CONTAINS(out, "inbox_records{consumer=\"billing\"} ");
	ASSERT_CONTAINS(out, "inbox_store_up{consumer=\"billing\"} 1\n");
	ASSERT_CONTAINS(out, "inbox_consumer_up{consumer=\"billing\"} 1\n");
	ASSERT_CONTAINS(out, "# TYPE inbox_processing_duration_seconds "
	                     "histogram\n");
	char inf[160];
	snprintf(inf, sizeof(inf),
	         "inbox_processing_duration_seconds_bucket{consumer="
	         "\"billing\",le=\"+Inf\"} %llu\n",
	         (unsigned long long)s.processing_count);
	ASSERT_CONTAINS(out, inf);
	/* One TYPE line per family, whatever the number of consumers. */
	const char *p = strstr(out, "# TYPE inbox_records gauge");
	ASSERT_TRUE(p && !strstr(p + 1, "# TYPE inbox_records gauge"));
	/* The consumer without store numbers has no gauge from the store. */
	ASSERT_TRUE(!strstr(out, "inbox_records{consumer=\"we"));
	ASSERT_CONTAINS(out, "inbox_store_up{consumer=\"we\\\"ird");
	/* No dispatcher counters given: no outbox counter family. */
	ASSERT_TRUE(!strstr(out, "inbox_outbox_attempts_total"));
	free(out);
	ASSERT_EQ(inbox_metrics_render(&out, &len, NULL, 1), INBOX_ERR_INVALID);
}

/* The dispatcher's counters: one family each, HELP and TYPE once, the
 * value of its field, only for the consumers that have a dispatcher. */
TEST(metrics_outbox_counters)
{
	inbox_outbox_stats o = INBOX_OUTBOX_STATS_INIT;
	o.claimed = 99; /* not exported */
	o.attempts = 8;
	o.done = 6;
	o.retries = 3;
	o.unknown_outcomes = 4;
	o.reconciliations = 2;
	o.reconciled_found = 1;
	o.reconciled_not_found = 1;
	o.dead_letters = 5;
	o.lease_expired = 7;
	o.fenced = 9;
	o.released = 11; /* not exported */
	inbox_metrics_consumer cs[3] = {
	    {.version = INBOX_METRICS_CONSUMER_VERSION,
	     .name = "mail\"er",
	     .outbox = &o,
	     .running = -1},
	    {.version = INBOX_METRICS_CONSUMER_VERSION,
	     .name = "plain",
	     .running = -1},
	    {.version = INBOX_METRICS_CONSUMER_VERSION,
	     .name = "pay",
	     .outbox = &o,
	     .running = -1},
	};
	static const struct {
		const char *name;
		const char *value;
	} want[] = {
	    {"inbox_outbox_attempts_total", "8"},
	    {"inbox_outbox_done_total", "6"},
	    {"inbox_outbox_retries_total", "3"},
	    {"inbox_outbox_unknown_outcomes_total", "4"},
	    {"inbox_outbox_reconciliations_total", "2"},
	    {"inbox_outbox_reconciled_found_total", "1"},
	    {"inbox_outbox_reconciled_not_found_total", "1"},
	    {"inbox_outbox_dead_letters_total", "5"},
	    {"inbox_outbox_lease_takeovers_total", "7"},
	    {"inbox_outbox_fenced_total", "9"},
	};
	char *out = NULL;
	size_t len = 0;
	ASSERT_OK(inbox_metrics_render(&out, &len, cs, 3));
	ASSERT_EQ(strlen(out), len);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char line[200];
		snprintf(line, sizeof(line), "# HELP %s ", want[i].name);
		ASSERT_CONTAINS(out, line);
		snprintf(line, sizeof(line), "# TYPE %s counter\n",
		         want[i].name);
		ASSERT_CONTAINS(out, line);
		const char *p = strstr(out, line);
		ASSERT_TRUE(p && !strstr(p + 1, line));
		snprintf(line, sizeof(line),
		         "\n%s{consumer=\"mail\\\"er\"} %s\n", want[i].name,
		         want[i].value);
		ASSERT_CONTAINS(out, line);
		snprintf(line, sizeof(line), "\n%s{consumer=\"pay\"} %s\n",
		         want[i].name, want[i].value);
		ASSERT_CONTAINS(out, line);
		snprintf(line, sizeof(line), "\n%s{consumer=\"plain\"}",
		         want[i].name);
		ASSERT_TRUE(!strstr(out, line));
	}
	/* Nothing else came with them: no consumer counters, no histogram,
	 * no consumer_up, no store gauge but store_up 0. */
	ASSERT_TRUE(!strstr(out, "inbox_messages_total"));
	ASSERT_TRUE(!strstr(out, "inbox_processing_duration_seconds"));
	ASSERT_TRUE(!strstr(out, "inbox_consumer_up"));
	ASSERT_TRUE(!strstr(out, "inbox_outbox_pending"));
	ASSERT_CONTAINS(out, "inbox_store_up{consumer=\"plain\"} 0\n");
	ASSERT_TRUE(!strstr(out, "inbox_outbox_claimed"));
	ASSERT_TRUE(!strstr(out, "inbox_outbox_released"));
	free(out);
}

int main(void)
{
	if (setup() != INBOX_OK) {
		printf("setup failed: %s\n", st ? inbox_store_errmsg(st) : "");
		return 1;
	}
	RUN(stats_and_inspect);
	RUN(dead_letters);
	RUN(replay);
	RUN(purge_in_steps);
	RUN(metrics_exposition);
	RUN(metrics_outbox_counters);
	inbox_consumer_close(c);
	inbox_store_close(st);
	return test_summary();
}
