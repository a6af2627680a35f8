/*
 * Stored results (issue 14, part 1): "the same answer every time". A
 * handler stores a result with inbox_txn_set_result(); every duplicate of
 * the key gets the first processing's result and outcome — in the same
 * batch, after a restart, once the record's generation is sealed
 * (PostgreSQL) — and a conflict gets nothing.
 *
 * Included by conformance.c (its helpers are static there); run by
 * run_result_cases() from its main. The fixture (rcase, gives) is
 * result_fixture.h's, shared with lease_results.c.
 */

#include "result_fixture.h"

/* Any bytes, byte for byte: a NUL inside, high bytes, no terminator. */
static const unsigned char BINARY[] = {'i', 0, 0xff, 0x80, '\n', 'z'};

TEST(result_returned_on_a_duplicate)
{
	rcase k;
	ASSERT_OK(rcase_open(&k,
	                     (rctx){.type = "application/octet-stream",
	                            .data = BINARY,
	                            .len = sizeof(BINARY)},
	                     0));
	char js[256];
	order_json(js, sizeof(js), "r-1", "o-1", 10);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(gives(k.c, js, INBOX_APPLIED, BINARY, sizeof(BINARY),
	                "application/octet-stream", &r));
	ASSERT_OK(k.x.set_rc);
	ASSERT_EQ(r.first_outcome, INBOX_OUTCOME_NONE);
	/* the handler is not run again; the answer is the first one's */
	k.x.data = "other";
	k.x.len = 5;
	ASSERT_OK(gives(k.c, js, INBOX_DUPLICATE, BINARY, sizeof(BINARY),
	                "application/octet-stream", &r));
	ASSERT_EQ(k.x.calls, 1);
	ASSERT_EQ(r.first_outcome, INBOX_APPLIED);
	/* what inbox inspect shows: the record's result, byte for byte */
	inbox_admin_record *rec = NULL;
	ASSERT_OK(
	    inbox_admin_inspect(k.e.st, "billing.results.v1", "r-1", &rec));
	int same = rec->result && rec->result_len == sizeof(BINARY) &&
	           memcmp(rec->result, BINARY, sizeof(BINARY)) == 0 &&
	           rec->result_type &&
	           !strcmp(rec->result_type, "application/octet-stream") &&
	           rec->outcome && !strcmp(rec->outcome, "applied");
	inbox_admin_record_free(rec);
	ASSERT_TRUE(same);
	/* the same key with another payload: a conflict, no answer */
	order_json(js, sizeof(js), "r-1", "o-1", 99);
	ASSERT_OK(gives(k.c, js, INBOX_CONFLICT, NULL, 0, NULL, &r));
	ASSERT_EQ(r.first_outcome, INBOX_OUTCOME_NONE);
	/* an empty result is a result; a NULL type is none */
	k.x.data = "";
	k.x.len = 0;
	k.x.type = NULL;
	order_json(js, sizeof(js), "r-2", "o-2", 10);
	ASSERT_OK(gives(k.c, js, INBOX_APPLIED, "", 0, NULL, &r));
	ASSERT_OK(gives(k.c, js, INBOX_DUPLICATE, "", 0, NULL, &r));
	ASSERT_EQ(count(k.e.st, k.e.invoices, NULL), 2);
	rcase_close(&k);
}

TEST(result_on_a_duplicate_in_the_same_batch)
{
	rcase k;
	ASSERT_OK(rcase_open(&k, (rctx){.type = "text/plain"}, 0));
	char js[5][256];
	order_json(js[0], sizeof(js[0]), "b-1", "o-1", 10);
	order_json(js[1], sizeof(js[1]), "b-2", "o-2", 10);
	order_json(js[2], sizeof(js[2]), "b-1", "o-1", 10); /* repeat */
	order_json(js[3], sizeof(js[3]), "b-1", "o-1", 77); /* conflict */
	order_json(js[4], sizeof(js[4]), "b-2", "o-2", 10); /* repeat */
	inbox_delivery d[5];
	for (int i = 0; i < 5; i++)
		d[i] = delivery(js[i]);
	inbox_result r[5];
	TEST_RESULTS_INIT(r, 5);
	ASSERT_OK(inbox_consumer_process_batch(k.c, d, 5, r));
	ASSERT_EQ(r[0].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[1].outcome, INBOX_APPLIED);
	ASSERT_TRUE(has_result(&r[0], "inv-o-1", 7, "text/plain"));
	ASSERT_TRUE(has_result(&r[1], "inv-o-2", 7, "text/plain"));
	ASSERT_EQ(r[2].outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(has_result(&r[2], "inv-o-1", 7, "text/plain"));
	ASSERT_EQ(r[2].first_outcome, INBOX_APPLIED);
	ASSERT_EQ(r[3].outcome, INBOX_CONFLICT);
	ASSERT_TRUE(no_result(&r[3]));
	ASSERT_EQ(r[4].outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(has_result(&r[4], "inv-o-2", 7, "text/plain"));
	ASSERT_EQ(k.x.calls, 2);
	/* A later batch: the key's record answers the primary, and its
	 * repeat in that batch gets the same stored answer. */
	k.x.data = "changed";
	k.x.len = 7;
	TEST_RESULTS_INIT(r, 5);
	ASSERT_OK(inbox_consumer_process_batch(k.c, d, 3, r));
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(r[i].outcome, INBOX_DUPLICATE);
		ASSERT_EQ(r[i].first_outcome, INBOX_APPLIED);
	}
	ASSERT_TRUE(has_result(&r[0], "inv-o-1", 7, "text/plain"));
	ASSERT_TRUE(has_result(&r[1], "inv-o-2", 7, "text/plain"));
	ASSERT_TRUE(has_result(&r[2], "inv-o-1", 7, "text/plain"));
	ASSERT_EQ(k.x.calls, 2);
	ASSERT_EQ(count(k.e.st, k.e.invoices, NULL), 2);
	rcase_close(&k);
}

/* A batch's results are stored together (on PostgreSQL, one statement
 * over arrays): each record keeps its own, whatever its key, its bytes
 * and its type hold of what quotes or separates array elements. */
TEST(results_of_a_batch_each_its_own)
{
	rcase k;
	const char *type = "text/plain; charset=\"utf-8\" {x,\\y}";
	ASSERT_OK(rcase_open(&k, (rctx){.type = type}, 0));
	/* each key (also the order) as JSON text and as the record has it */
	static const char *const ids[][2] = {
	    {"q\\\"1", "q\"1"},       {"b\\\\2", "b\\2"}, {"c,3", "c,3"},
	    {"{d}", "{d}"},           {"NULL", "NULL"},   {" e ", " e "},
	    {"f\\u00e9", "f\xc3\xa9"}};
	enum { N = sizeof(ids) / sizeof(ids[0]) };
	char js[N][256], inv[N][64];
	inbox_delivery d[N];
	for (int i = 0; i < N; i++) {
		order_json(js[i], sizeof(js[i]), ids[i][0], ids[i][0], 10);
		d[i] = delivery(js[i]);
		snprintf(inv[i], sizeof(inv[i]), "inv-%s", ids[i][1]);
	}
	for (int round = 0; round < 2; round++) {
		inbox_result r[N];
		TEST_RESULTS_INIT(r, N);
		ASSERT_OK(inbox_consumer_process_batch(k.c, d, N, r));
		for (int i = 0; i < N; i++) {
			ASSERT_STREQ(r[i].key, ids[i][1]);
			ASSERT_EQ(r[i].outcome,
			          round ? INBOX_DUPLICATE : INBOX_APPLIED);
			ASSERT_TRUE(
			    has_result(&r[i], inv[i], strlen(inv[i]), type));
		}
	}
	ASSERT_EQ(k.x.calls, N);
	inbox_admin_record *rec = NULL;
	ASSERT_OK(
	    inbox_admin_inspect(k.e.st, "billing.results.v1", "q\"1", &rec));
	int same = rec->result && rec->result_len == strlen(inv[0]) &&
	           !memcmp(rec->result, inv[0], rec->result_len) &&
	           rec->result_type && !strcmp(rec->result_type, type);
	inbox_admin_record_free(rec);
	ASSERT_TRUE(same);
	rcase_close(&k);
}

/* A statement of the batch that fails on the server (deferred on
 * PostgreSQL: the transaction is lost, and the batch runs again without
 * deferring, each result on its own): the others keep their results,
 * the failed one stores none. */
TEST(results_of_a_batch_run_again)
{
	rcase k;
	ASSERT_OK(rcase_open(&k, (rctx){.type = "text/plain"}, 0));
	ASSERT_OK(sql(k.e.st,
	              "CREATE UNIQUE INDEX \"%sinv_u\" ON %s (order_id)",
	              k.e.prefix, k.e.invoices));
	char js[3][256];
	order_json(js[0], sizeof(js[0]), "a-1", "o-1", 10);
	order_json(js[1], sizeof(js[1]), "a-2", "o-1", 10); /* same order */
	order_json(js[2], sizeof(js[2]), "a-3", "o-3", 10);
	inbox_delivery d[3];
	for (int i = 0; i < 3; i++)
		d[i] = delivery(js[i]);
	inbox_result r[3];
	TEST_RESULTS_INIT(r, 3);
	ASSERT_OK(inbox_consumer_process_batch(k.c, d, 3, r));
	ASSERT_EQ(r[0].outcome, INBOX_APPLIED);
	ASSERT_TRUE(has_result(&r[0], "inv-o-1", 7, "text/plain"));
	ASSERT_EQ(r[1].outcome, INBOX_RETRY);
	ASSERT_TRUE(no_result(&r[1]));
	ASSERT_EQ(r[2].outcome, INBOX_APPLIED);
	ASSERT_TRUE(has_result(&r[2], "inv-o-3", 7, "text/plain"));
	TEST_RESULTS_INIT(r, 3);
	ASSERT_OK(inbox_consumer_process_batch(k.c, d, 3, r));
	ASSERT_EQ(r[0].outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(has_result(&r[0], "inv-o-1", 7, "text/plain"));
	ASSERT_EQ(r[1].outcome, INBOX_RETRY);
	ASSERT_EQ(r[2].outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(has_result(&r[2], "inv-o-3", 7, "text/plain"));
	ASSERT_EQ(count(k.e.st, k.e.invoices, NULL), 2);
	rcase_close(&k);
}

TEST(result_after_a_restart)
{
	rcase k;
	ASSERT_OK(rcase_open(&k,
	                     (rctx){.type = "application/json",
	                            .data = "{\"invoice\":\"F-1\"}",
	                            .len = 17},
	                     0));
	char js[256];
	order_json(js, sizeof(js), "rs-1", "o-1", 10);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(process1(k.c, js, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	/* another process, another connection: only the database knows */
	k.x = (rctx){.e = &k.e, .data = "second", .len = 6};
	ASSERT_OK(rcase_reopen(&k));
	ASSERT_OK(gives(k.c, js, INBOX_DUPLICATE, "{\"invoice\":\"F-1\"}", 17,
	                "application/json", &r));
	ASSERT_EQ(k.x.calls, 0);
	ASSERT_EQ(r.first_outcome, INBOX_APPLIED);
	rcase_close(&k);
}

/* PostgreSQL keeps the inbox in generations: a record sealed into an
 * older one keeps its result there (an UPDATE, never an insert, wrote
 * it), and a duplicate found through the generation's filter gets it. */
TEST(result_after_a_seal)
{
	rcase k;
	ASSERT_OK(rcase_open(&k, (rctx){.type = "text/plain"}, 0));
	char js[2][256];
	order_json(js[0], sizeof(js[0]), "sl-1", "o-1", 10);
	order_json(js[1], sizeof(js[1]), "sl-2", "o-2", 10);
	inbox_delivery d[2] = {delivery(js[0]), delivery(js[1])};
	inbox_result r[2];
	TEST_RESULTS_INIT(r, 2);
	ASSERT_OK(inbox_consumer_process_batch(k.c, d, 1, r));
	ASSERT_EQ(r[0].outcome, INBOX_APPLIED);
	inbox_consumer_close(k.c);
	k.c = NULL;
	int sealed = 0;
	ASSERT_OK(inbox_store_seal(k.e.st, 1, &sealed));
	if (is_pg) {
		ASSERT_EQ(sealed, 1);
		ASSERT_EQ(count(k.e.st, k.e.inbox_tbl,
		                "gen = 1 AND result IS NOT NULL"),
		          1);
	} else {
		ASSERT_EQ(sealed, 0); /* one generation */
	}
	/* a fresh handle: it loads the sealed generation's filter */
	ASSERT_OK(rcase_reopen(&k));
	TEST_RESULTS_INIT(r, 2);
	ASSERT_OK(inbox_consumer_process_batch(k.c, d, 2, r));
	ASSERT_EQ(r[0].outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(has_result(&r[0], "inv-o-1", 7, "text/plain"));
	ASSERT_EQ(r[0].first_outcome, INBOX_APPLIED);
	ASSERT_EQ(r[1].outcome, INBOX_APPLIED);
	ASSERT_TRUE(has_result(&r[1], "inv-o-2", 7, "text/plain"));
	if (is_pg)
		ASSERT_EQ(count(k.e.st, k.e.inbox_tbl,
		                "gen = 2 AND result IS NOT NULL"),
		          1);
	ASSERT_EQ(k.x.calls, 2);
	rcase_close(&k);
}

/* A handler that stores nothing: no result, on the first delivery and
 * on its duplicates; the first outcome still comes back, stale too. */
TEST(handler_that_sets_no_result)
{
	rcase k;
	ASSERT_OK(rcase_open(&k, (rctx){.no_result = 1}, 0));
	char js[256];
	order_json(js, sizeof(js), "n-1", "o-1", 10);
	inbox_delivery d[2] = {delivery(js), delivery(js)};
	inbox_result r[2];
	TEST_RESULTS_INIT(r, 2);
	ASSERT_OK(inbox_consumer_process_batch(k.c, d, 2, r));
	ASSERT_EQ(r[0].outcome, INBOX_APPLIED);
	ASSERT_TRUE(no_result(&r[0]));
	ASSERT_EQ(r[1].outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(no_result(&r[1]));
	ASSERT_EQ(r[1].first_outcome, INBOX_APPLIED);
	TEST_RESULTS_INIT(r, 2);
	ASSERT_OK(inbox_consumer_process_batch(k.c, d, 1, r));
	ASSERT_EQ(r[0].outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(no_result(&r[0]));
	ASSERT_EQ(r[0].first_outcome, INBOX_APPLIED);
	/* no result stored: the record's result column stays NULL */
	ASSERT_EQ(count(k.e.st, k.e.inbox_tbl, "result IS NULL"), 1);
	inbox_admin_record *rec = NULL;
	ASSERT_OK(
	    inbox_admin_inspect(k.e.st, "billing.results.v1", "n-1", &rec));
	int none = !rec->result && !rec->result_len && !rec->result_type &&
	           !rec->outcome;
	inbox_admin_record_free(rec);
	ASSERT_TRUE(none);
	inbox_consumer_close(k.c);
	/* a stale message's duplicates say so */
	hctx h = {.e = &k.e};
	k.c = open_consumer(k.e.st, projection_handler, &h, NULL, NULL);
	ASSERT_TRUE(k.c);
	inbox_result one = INBOX_RESULT_INIT;
	ASSERT_OK(process1(k.c,
	                   "{\"id\":\"v2\",\"data\":{\"orderId\":\"p\","
	                   "\"status\":\"paid\",\"version\":2}}",
	                   &one));
	ASSERT_EQ(one.outcome, INBOX_APPLIED);
	const char *old = "{\"id\":\"v1\",\"data\":{\"orderId\":\"p\","
	                  "\"status\":\"new\",\"version\":1}}";
	ASSERT_OK(gives(k.c, old, INBOX_STALE, NULL, 0, NULL, &one));
	ASSERT_OK(gives(k.c, old, INBOX_DUPLICATE, NULL, 0, NULL, &one));
	ASSERT_EQ(one.first_outcome, INBOX_STALE);
	rcase_close(&k);
}

/* Over max_result_bytes: the handler's error (never a silent cut); an
 * earlier result stays; a handler that gives up on it may reject. */
TEST(result_over_the_limit)
{
	rcase k;
	ASSERT_OK(rcase_open(
	    &k, (rctx){.type = "text/plain", .then_larger = 17}, 16));
	char js[256];
	order_json(js, sizeof(js), "big-1", "o-1", 10);
	inbox_result r = INBOX_RESULT_INIT;
	/* the 7 bytes set first are what was stored, whole */
	ASSERT_OK(
	    gives(k.c, js, INBOX_APPLIED, "inv-o-1", 7, "text/plain", &r));
	ASSERT_EQ(k.x.set_rc, INBOX_ERR_TOO_LARGE);
	ASSERT_OK(
	    gives(k.c, js, INBOX_DUPLICATE, "inv-o-1", 7, "text/plain", &r));
	/* exactly the limit is accepted */
	k.x.then_larger = 16;
	order_json(js, sizeof(js), "big-2", "o-2", 10);
	ASSERT_OK(process1(k.c, js, &r));
	ASSERT_OK(k.x.set_rc);
	ASSERT_EQ(r.result_len, 16);
	inbox_consumer_close(k.c);
	/* the default limit is 64 KiB; options beyond 256 MiB are refused */
	rctx y = {.e = &k.e, .no_result = 1, .then_larger = 4096};
	k.c = open_results(k.e.st, &y, 0);
	ASSERT_TRUE(k.c);
	order_json(js, sizeof(js), "big-3", "o-3", 10);
	ASSERT_OK(process1(k.c, js, &r));
	ASSERT_OK(y.set_rc);
	ASSERT_EQ(r.result_len, 4096);
	inbox_consumer_close(k.c);
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.results.v1";
	o.retention_seconds = 3600;
	o.max_result_bytes = (size_t)512 * 1024 * 1024;
	char err[256];
	k.c = NULL;
	ASSERT_EQ(inbox_consumer_open(&k.c, k.e.st, &o, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "max_result_bytes");
	rcase_close(&k);
}

/* RETRY drops the result with the effects; REJECT keeps it with the
 * dead record, and its duplicates get that answer. */
TEST(result_follows_the_verdict)
{
	rcase k;
	ASSERT_OK(rcase_open(&k,
	                     (rctx){.type = "application/problem+json",
	                            .data = "{\"status\":422}",
	                            .len = 14,
	                            .verdict = INBOX_HANDLER_RETRY},
	                     0));
	char js[256];
	order_json(js, sizeof(js), "v-1", "o-1", 10);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(gives(k.c, js, INBOX_RETRY, NULL, 0, NULL, &r));
	k.x.verdict = INBOX_HANDLER_OK;
	k.x.no_result = 1;
	ASSERT_OK(gives(k.c, js, INBOX_APPLIED, NULL, 0, NULL, &r));
	/* the retry's result was dropped */
	ASSERT_OK(gives(k.c, js, INBOX_DUPLICATE, NULL, 0, NULL, &r));
	/* REJECT with a result */
	k.x.no_result = 0;
	k.x.verdict = INBOX_HANDLER_REJECT;
	order_json(js, sizeof(js), "v-2", "o-2", 10);
	ASSERT_OK(gives(k.c, js, INBOX_DEAD_LETTERED, "{\"status\":422}", 14,
	                "application/problem+json", &r));
	ASSERT_OK(gives(k.c, js, INBOX_DUPLICATE, "{\"status\":422}", 14,
	                "application/problem+json", &r));
	ASSERT_EQ(r.first_outcome, INBOX_DEAD_LETTERED);
	/* the rejected effect was rolled back; the retried one kept */
	ASSERT_EQ(count(k.e.st, k.e.invoices, NULL), 1);
	rcase_close(&k);
}

/* A long handler completing its lease stores the result too; a later
 * delivery through the batch path gets it. */
static int lease_result_fn(inbox_txn *t, const inbox_msg *m, void *p)
{
	(void)m;
	(void)p;
	return inbox_txn_set_result(t, "text/plain", "leased", 6) == 0
	           ? INBOX_HANDLER_OK
	           : INBOX_HANDLER_REJECT;
}

TEST(result_of_a_lease_completion)
{
	rcase k;
	ASSERT_OK(rcase_open(&k, (rctx){0}, 0));
	char js[256];
	order_json(js, sizeof(js), "l-1", "o-1", 10);
	inbox_delivery d = delivery(js);
	inbox_lease *l = NULL;
	inbox_outcome o;
	ASSERT_OK(inbox_lease_acquire(k.c, &d, &l, &o));
	ASSERT_EQ(o, INBOX_ACQUIRED);
	ASSERT_OK(inbox_lease_complete(l, lease_result_fn, NULL, &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	inbox_lease_free(l);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(
	    gives(k.c, js, INBOX_DUPLICATE, "leased", 6, "text/plain", &r));
	ASSERT_EQ(k.x.calls, 0);
	/* outside a handler there is nothing to attach a result to */
	ASSERT_EQ(inbox_txn_set_result(NULL, NULL, "x", 1), INBOX_ERR_INVALID);
	rcase_close(&k);
}

/* A caller built against version 1 of inbox_result gets its fields only
 * (nothing written past them), and version 2 has the result. */
TEST(result_struct_version_1_is_kept)
{
	rcase k;
	ASSERT_OK(rcase_open(&k, (rctx){0}, 0));
	char js[256];
	order_json(js, sizeof(js), "v1-1", "o-1", 10);
	inbox_delivery d = delivery(js);
	size_t v1 = offsetof(inbox_result, dead_letter_id) + sizeof(int64_t);
	unsigned char *buf = malloc(sizeof(inbox_result));
	ASSERT_TRUE(buf);
	memset(buf, 0xa5, sizeof(inbox_result));
	((inbox_result *)(void *)buf)->version = 1;
	ASSERT_OK(inbox_consumer_process(k.c, &d, (inbox_result *)(void *)buf));
	ASSERT_EQ(((inbox_result *)(void *)buf)->outcome, INBOX_APPLIED);
	int untouched = 1;
	for (size_t i = v1; i < sizeof(inbox_result); i++)
		untouched &= buf[i] == 0xa5;
	free(buf);
	ASSERT_TRUE(untouched);
	rcase_close(&k);
}

/* The result lives as long as its record: purged with it, never kept
 * behind (a redelivery after the purge is new, and stores its own). */
TEST(result_lives_as_long_as_the_record)
{
	rcase k;
	ASSERT_OK(rcase_open(&k, (rctx){.type = "text/plain"}, 0));
	char js[256];
	order_json(js, sizeof(js), "p-1", "o-1", 10);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(process1(k.c, js, &r));
	ASSERT_EQ(count(k.e.st, k.e.inbox_tbl, "result IS NOT NULL"), 1);
	age_inbox(&k.e, 7200);
	int64_t deleted = 0;
	ASSERT_OK(inbox_store_purge(k.e.st, NULL, 0, 10, 0, &deleted));
	ASSERT_EQ(deleted, 1);
	ASSERT_EQ(count(k.e.st, k.e.inbox_tbl, NULL), 0);
	k.x.data = "second";
	k.x.len = 6;
	ASSERT_OK(gives(k.c, js, INBOX_APPLIED, "second", 6, "text/plain", &r));
	ASSERT_EQ(k.x.calls, 2);
	rcase_close(&k);
}

static void run_result_cases(void)
{
	RUN(result_returned_on_a_duplicate);
	RUN(result_on_a_duplicate_in_the_same_batch);
	RUN(results_of_a_batch_each_its_own);
	RUN(results_of_a_batch_run_again);
	RUN(result_after_a_restart);
	RUN(result_after_a_seal);
	RUN(handler_that_sets_no_result);
	RUN(result_over_the_limit);
	RUN(result_follows_the_verdict);
	RUN(result_of_a_lease_completion);
	RUN(result_struct_version_1_is_kept);
	RUN(result_lives_as_long_as_the_record);
}
