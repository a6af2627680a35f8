/*
 * Stored results under leases (issue 14): inbox_lease_acquire_result()
 * on a key already done answers as a batch duplicate does — the first
 * processing's stored result and outcome, on both stores, with or
 * without a result, after a restart and once the record's generation is
 * sealed (PostgreSQL); a conflict carries nothing.
 *
 * Included by conformance.c (its helpers are static there); run by
 * run_lease_result_cases() from its main. The fixture (rcase: the
 * handler storing "inv-<orderId>", the consumer) and the check of an
 * answer are result_fixture.h's, shared with results.c.
 */

#include <stddef.h> /* offsetof */

#include "result_fixture.h"

/* What the handler stores. */
static const char TP[] = "text/plain";

/* json's key through c's lease path into r: 0 when its outcome is
 * `want`, its result exactly data/len/type (data NULL: none) and *l a
 * lease exactly when acquired, else -1 (said). */
static int acquires(inbox_consumer *c, const char *json, inbox_outcome want,
                    const void *data, size_t len, const char *type,
                    inbox_lease **l, inbox_result *r)
{
	inbox_delivery d = delivery(json);
	*l = NULL;
	int rc = inbox_lease_acquire_result(c, &d, l, r);
	if (rc != 0) {
		fprintf(stderr, "  %s: acquire: %d %s\n", json, rc,
		        inbox_consumer_errmsg(c));
		return -1;
	}
	if (!*l != (want != INBOX_ACQUIRED)) {
		fprintf(stderr, "  %s: %s, %s lease\n", json,
		        inbox_outcome_name(r->outcome), *l ? "a" : "no");
		inbox_lease_free(*l);
		*l = NULL;
		return -1;
	}
	return answered(json, r, want, data, len, type);
}

/* Acquire js's key and complete it with the handler: APPLIED (or what
 * the handler's verdict makes of it). */
static int lease_run(rcase *k, const char *js, inbox_outcome *done)
{
	inbox_lease *l = NULL;
	inbox_result r = INBOX_RESULT_INIT;
	if (acquires(k->c, js, INBOX_ACQUIRED, NULL, 0, NULL, &l, &r) != 0)
		return -1;
	int rc = inbox_lease_complete(l, result_handler, &k->x, done);
	inbox_lease_free(l);
	return rc;
}

TEST(lease_duplicate_carries_the_stored_result)
{
	rcase k;
	ASSERT_OK(rcase_open(&k, (rctx){.type = TP}, 0));
	char js[256];
	order_json(js, sizeof(js), "lr-1", "o-1", 10);
	inbox_lease *l = NULL;
	inbox_result r = INBOX_RESULT_INIT;
	/* a fresh key: the lease, no result yet */
	ASSERT_OK(acquires(k.c, js, INBOX_ACQUIRED, NULL, 0, NULL, &l, &r));
	ASSERT_STREQ(r.key, "lr-1");
	ASSERT_EQ(r.attempts, 1);
	ASSERT_EQ(r.first_outcome, INBOX_OUTCOME_NONE);
	inbox_outcome o = INBOX_OUTCOME_NONE;
	ASSERT_OK(inbox_lease_complete(l, result_handler, &k.x, &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	inbox_lease_free(l);
	/* the key again: a duplicate with the first processing's answer */
	ASSERT_OK(acquires(k.c, js, INBOX_DUPLICATE, "inv-o-1", 7, TP, &l, &r));
	ASSERT_STREQ(r.key, "lr-1");
	ASSERT_EQ(r.first_outcome, INBOX_APPLIED);
	ASSERT_TRUE(r.reason == NULL);
	ASSERT_EQ(k.x.calls, 1);
	/* a key done by a processing call: the lease path finds its result */
	char js2[256];
	order_json(js2, sizeof(js2), "lr-2", "o-2", 10);
	ASSERT_OK(gives(k.c, js2, INBOX_APPLIED, "inv-o-2", 7, TP, &r));
	ASSERT_OK(
	    acquires(k.c, js2, INBOX_DUPLICATE, "inv-o-2", 7, TP, &l, &r));
	ASSERT_EQ(r.first_outcome, INBOX_APPLIED);
	/* a rejected key keeps its result with the dead record */
	char js3[256];
	order_json(js3, sizeof(js3), "lr-3", "o-3", 10);
	k.x.verdict = INBOX_HANDLER_REJECT;
	ASSERT_OK(lease_run(&k, js3, &o));
	ASSERT_EQ(o, INBOX_DEAD_LETTERED);
	k.x.verdict = INBOX_HANDLER_OK;
	ASSERT_OK(
	    acquires(k.c, js3, INBOX_DUPLICATE, "inv-o-3", 7, TP, &l, &r));
	ASSERT_EQ(r.first_outcome, INBOX_DEAD_LETTERED);
	/* the same key, another payload: a conflict, no answer */
	order_json(js, sizeof(js), "lr-1", "o-1", 99);
	ASSERT_OK(acquires(k.c, js, INBOX_CONFLICT, NULL, 0, NULL, &l, &r));
	ASSERT_EQ(r.first_outcome, INBOX_OUTCOME_NONE);
	ASSERT_CONTAINS(r.reason, "fingerprint conflict");
	ASSERT_TRUE(r.dead_letter_id > 0);
	/* another connection (a restart): the database has the answer */
	ASSERT_OK(rcase_reopen(&k));
	order_json(js, sizeof(js), "lr-1", "o-1", 10);
	ASSERT_OK(acquires(k.c, js, INBOX_DUPLICATE, "inv-o-1", 7, TP, &l, &r));
	/* the outcome-only call answers the same */
	inbox_delivery d = delivery(js);
	ASSERT_OK(inbox_lease_acquire(k.c, &d, &l, &o));
	ASSERT_EQ(o, INBOX_DUPLICATE);
	ASSERT_TRUE(l == NULL);
	ASSERT_EQ(k.x.calls, 3);
	ASSERT_EQ(count(k.e.st, k.e.invoices, NULL),
	          2); /* the reject rolled back */
	rcase_close(&k);
}

/* A handler that stores nothing: a duplicate has no result but its first
 * outcome; an inbox_result of version 1 (allocated at exactly its size,
 * so ASan sees a write past it) gets the outcome and no result fields;
 * version 0 is refused. */
TEST(lease_duplicate_without_a_result)
{
	rcase k;
	ASSERT_OK(rcase_open(&k, (rctx){.no_result = 1}, 0));
	char js[256];
	order_json(js, sizeof(js), "ln-1", "o-1", 10);
	inbox_outcome o = INBOX_OUTCOME_NONE;
	ASSERT_OK(lease_run(&k, js, &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	inbox_lease *l = NULL;
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(acquires(k.c, js, INBOX_DUPLICATE, NULL, 0, NULL, &l, &r));
	ASSERT_EQ(r.first_outcome, INBOX_APPLIED);
	/* inbox_result as version 1 lays it out */
	typedef struct result_v1 {
		unsigned version;
		inbox_outcome outcome;
		int32_t attempts;
		const char *key;
		const char *reason;
		int64_t dead_letter_id;
	} result_v1;
	ASSERT_EQ(sizeof(result_v1), offsetof(inbox_result, result));
	result_v1 *old = malloc(sizeof(*old));
	ASSERT_TRUE(old);
	memset(old, 0, sizeof(*old));
	old->version = 1;
	inbox_delivery d = delivery(js);
	ASSERT_OK(inbox_lease_acquire_result(k.c, &d, &l,
	                                     (inbox_result *)(void *)old));
	ASSERT_EQ(old->outcome, INBOX_DUPLICATE);
	ASSERT_STREQ(old->key, "ln-1");
	old->version = 0;
	ASSERT_EQ(inbox_lease_acquire_result(k.c, &d, &l,
	                                     (inbox_result *)(void *)old),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_consumer_errmsg(k.c), "INBOX_RESULT_INIT");
	free(old);
	ASSERT_EQ(k.x.calls, 1);
	rcase_close(&k);
}

/* A record sealed into an older generation (PostgreSQL) keeps its
 * result: the lease's claim finds it through the generation's filter,
 * from a fresh handle; a new key is still acquired. */
TEST(lease_result_after_a_seal)
{
	rcase k;
	ASSERT_OK(rcase_open(&k, (rctx){.type = TP}, 0));
	char js[256], js2[256];
	order_json(js, sizeof(js), "ls-1", "o-1", 10);
	order_json(js2, sizeof(js2), "ls-2", "o-2", 10);
	inbox_outcome o = INBOX_OUTCOME_NONE;
	ASSERT_OK(lease_run(&k, js, &o));
	ASSERT_EQ(o, INBOX_APPLIED);
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
	ASSERT_OK(rcase_reopen(&k));
	inbox_lease *l = NULL;
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(acquires(k.c, js, INBOX_DUPLICATE, "inv-o-1", 7, TP, &l, &r));
	ASSERT_EQ(r.first_outcome, INBOX_APPLIED);
	ASSERT_OK(lease_run(&k, js2, &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	ASSERT_OK(
	    acquires(k.c, js2, INBOX_DUPLICATE, "inv-o-2", 7, TP, &l, &r));
	if (is_pg)
		ASSERT_EQ(count(k.e.st, k.e.inbox_tbl,
		                "gen = 2 AND result IS NOT NULL"),
		          1);
	ASSERT_EQ(k.x.calls, 2);
	rcase_close(&k);
}

static void run_lease_result_cases(void)
{
	RUN(lease_duplicate_carries_the_stored_result);
	RUN(lease_duplicate_without_a_result);
	RUN(lease_result_after_a_seal);
}
