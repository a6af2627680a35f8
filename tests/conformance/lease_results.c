/*
 * Stored results under leases (issue 14): inbox_lease_acquire_result()
 * on a key already done answers as a batch duplicate does — the first
 * processing's stored result and outcome, on both stores, with or
 * without a result, after a restart and once the record's generation is
 * sealed (PostgreSQL); a conflict carries nothing.
 *
 * Included by conformance.c (its helpers are static there); run by
 * run_lease_result_cases() from its main.
 */

#include <stddef.h> /* offsetof */

typedef struct lctx {
	const env *e;
	int no_result; /* store nothing */
	int verdict;   /* what it returns after storing */
	int calls;
} lctx;

/* Inserts the invoice and stores "inv-<orderId>" (text/plain). */
static int lease_result_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	lctx *x = p;
	x->calls++;
	const char *order = NULL;
	if (inbox_msg_get(m, "/data/orderId", &order) != 0)
		return INBOX_HANDLER_REJECT;
	char q[256];
	snprintf(q, sizeof(q),
	         "INSERT INTO %s (order_id, total) VALUES ($1, 1)",
	         x->e->invoices);
	const char *params[] = {order};
	if (inbox_txn_exec(t, q, 1, params, NULL) != 0)
		return INBOX_HANDLER_RETRY;
	if (!x->no_result) {
		char inv[64];
		snprintf(inv, sizeof(inv), "inv-%s", order);
		if (inbox_txn_set_result(t, "text/plain", inv, strlen(inv)) !=
		    0)
			return INBOX_HANDLER_RETRY;
	}
	if (x->verdict == INBOX_HANDLER_REJECT)
		inbox_txn_set_reason(t, "refused by the business rule");
	return x->verdict;
}

static inbox_consumer *open_lease_results(inbox_store *st, lctx *x)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.lease-results.v1";
	o.handler = lease_result_handler;
	o.handler_payload = x;
	o.max_attempts = 3;
	o.retention_seconds = 3600;
	inbox_consumer *c = NULL;
	char err[256];
	int rc = inbox_consumer_open(&c, st, &o, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "consumer open: %d %s\n", rc, err);
	return c;
}

/* r carries exactly the text given as its result, as text/plain. */
static int lease_has(const inbox_result *r, const char *text)
{
	size_t n = strlen(text);
	return r->result && r->result_len == n &&
	       memcmp(r->result, text, n) == 0 &&
	       ((const char *)r->result)[n] == '\0' && r->result_type &&
	       strcmp(r->result_type, "text/plain") == 0;
}

static int lease_none(const inbox_result *r)
{
	return r->result == NULL && r->result_len == 0 &&
	       r->result_type == NULL;
}

/* Acquire js's key and complete it with the handler: APPLIED (or what
 * the handler's verdict makes of it). */
static int lease_run(inbox_consumer *c, lctx *x, const char *js,
                     inbox_outcome *done)
{
	inbox_delivery d = delivery(js);
	inbox_lease *l = NULL;
	inbox_result r = INBOX_RESULT_INIT;
	int rc = inbox_lease_acquire_result(c, &d, &l, &r);
	if (rc != 0 || r.outcome != INBOX_ACQUIRED || !l) {
		fprintf(stderr, "acquire: rc %d outcome %s\n", rc,
		        inbox_outcome_name(r.outcome));
		inbox_lease_free(l);
		return -1;
	}
	rc = inbox_lease_complete(l, lease_result_handler, x, done);
	inbox_lease_free(l);
	return rc;
}

TEST(lease_duplicate_carries_the_stored_result)
{
	env e;
	ASSERT_OK(env_setup(&e));
	lctx x = {.e = &e};
	inbox_consumer *c = open_lease_results(e.st, &x);
	ASSERT_TRUE(c);
	char js[256];
	order_json(js, sizeof(js), "lr-1", "o-1", 10);
	inbox_delivery d = delivery(js);
	inbox_lease *l = NULL;
	inbox_result r = INBOX_RESULT_INIT;
	/* a fresh key: the lease, no result yet */
	ASSERT_OK(inbox_lease_acquire_result(c, &d, &l, &r));
	ASSERT_EQ(r.outcome, INBOX_ACQUIRED);
	ASSERT_TRUE(l != NULL);
	ASSERT_STREQ(r.key, "lr-1");
	ASSERT_EQ(r.attempts, 1);
	ASSERT_TRUE(lease_none(&r));
	ASSERT_EQ(r.first_outcome, INBOX_OUTCOME_NONE);
	inbox_outcome o = INBOX_OUTCOME_NONE;
	ASSERT_OK(inbox_lease_complete(l, lease_result_handler, &x, &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	inbox_lease_free(l);
	/* the key again: a duplicate with the first processing's answer */
	l = NULL;
	ASSERT_OK(inbox_lease_acquire_result(c, &d, &l, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(l == NULL);
	ASSERT_STREQ(r.key, "lr-1");
	ASSERT_TRUE(lease_has(&r, "inv-o-1"));
	ASSERT_EQ(r.first_outcome, INBOX_APPLIED);
	ASSERT_TRUE(r.reason == NULL);
	ASSERT_EQ(x.calls, 1);
	/* a key done by a processing call: the lease path finds its result */
	char js2[256];
	order_json(js2, sizeof(js2), "lr-2", "o-2", 10);
	inbox_result pr = INBOX_RESULT_INIT;
	ASSERT_OK(process1(c, js2, &pr));
	ASSERT_EQ(pr.outcome, INBOX_APPLIED);
	inbox_delivery d2 = delivery(js2);
	ASSERT_OK(inbox_lease_acquire_result(c, &d2, &l, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(lease_has(&r, "inv-o-2"));
	ASSERT_EQ(r.first_outcome, INBOX_APPLIED);
	/* a rejected key keeps its result with the dead record */
	char js3[256];
	order_json(js3, sizeof(js3), "lr-3", "o-3", 10);
	x.verdict = INBOX_HANDLER_REJECT;
	ASSERT_OK(lease_run(c, &x, js3, &o));
	ASSERT_EQ(o, INBOX_DEAD_LETTERED);
	x.verdict = INBOX_HANDLER_OK;
	inbox_delivery d3 = delivery(js3);
	ASSERT_OK(inbox_lease_acquire_result(c, &d3, &l, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(lease_has(&r, "inv-o-3"));
	ASSERT_EQ(r.first_outcome, INBOX_DEAD_LETTERED);
	/* the same key, another payload: a conflict, no answer */
	order_json(js, sizeof(js), "lr-1", "o-1", 99);
	d = delivery(js);
	ASSERT_OK(inbox_lease_acquire_result(c, &d, &l, &r));
	ASSERT_EQ(r.outcome, INBOX_CONFLICT);
	ASSERT_TRUE(lease_none(&r));
	ASSERT_EQ(r.first_outcome, INBOX_OUTCOME_NONE);
	ASSERT_CONTAINS(r.reason, "fingerprint conflict");
	ASSERT_TRUE(r.dead_letter_id > 0);
	/* another connection (a restart): the database has the answer */
	inbox_consumer_close(c);
	inbox_store_close(e.st);
	e.st = open_store(&e);
	ASSERT_TRUE(e.st);
	c = open_lease_results(e.st, &x);
	ASSERT_TRUE(c);
	order_json(js, sizeof(js), "lr-1", "o-1", 10);
	d = delivery(js);
	ASSERT_OK(inbox_lease_acquire_result(c, &d, &l, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(lease_has(&r, "inv-o-1"));
	/* the outcome-only call answers the same */
	ASSERT_OK(inbox_lease_acquire(c, &d, &l, &o));
	ASSERT_EQ(o, INBOX_DUPLICATE);
	ASSERT_EQ(x.calls, 3);
	ASSERT_EQ(count(e.st, e.invoices, NULL),
	          2); /* the reject rolled back */
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* A handler that stores nothing: a duplicate has no result but its first
 * outcome; an inbox_result of version 1 (allocated at exactly its size,
 * so ASan sees a write past it) gets the outcome and no result fields;
 * version 0 is refused. */
TEST(lease_duplicate_without_a_result)
{
	env e;
	ASSERT_OK(env_setup(&e));
	lctx x = {.e = &e, .no_result = 1};
	inbox_consumer *c = open_lease_results(e.st, &x);
	ASSERT_TRUE(c);
	char js[256];
	order_json(js, sizeof(js), "ln-1", "o-1", 10);
	inbox_outcome o = INBOX_OUTCOME_NONE;
	ASSERT_OK(lease_run(c, &x, js, &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	inbox_delivery d = delivery(js);
	inbox_lease *l = NULL;
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_lease_acquire_result(c, &d, &l, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(lease_none(&r));
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
	ASSERT_OK(
	    inbox_lease_acquire_result(c, &d, &l, (inbox_result *)(void *)old));
	ASSERT_EQ(old->outcome, INBOX_DUPLICATE);
	ASSERT_STREQ(old->key, "ln-1");
	old->version = 0;
	ASSERT_EQ(
	    inbox_lease_acquire_result(c, &d, &l, (inbox_result *)(void *)old),
	    INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_consumer_errmsg(c), "INBOX_RESULT_INIT");
	free(old);
	ASSERT_EQ(x.calls, 1);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* A record sealed into an older generation (PostgreSQL) keeps its
 * result: the lease's claim finds it through the generation's filter,
 * from a fresh handle; a new key is still acquired. */
TEST(lease_result_after_a_seal)
{
	env e;
	ASSERT_OK(env_setup(&e));
	lctx x = {.e = &e};
	inbox_consumer *c = open_lease_results(e.st, &x);
	ASSERT_TRUE(c);
	char js[256], js2[256];
	order_json(js, sizeof(js), "ls-1", "o-1", 10);
	order_json(js2, sizeof(js2), "ls-2", "o-2", 10);
	inbox_outcome o = INBOX_OUTCOME_NONE;
	ASSERT_OK(lease_run(c, &x, js, &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	inbox_consumer_close(c);
	int sealed = 0;
	ASSERT_OK(inbox_store_seal(e.st, 1, &sealed));
	if (is_pg) {
		ASSERT_EQ(sealed, 1);
		ASSERT_EQ(
		    count(e.st, e.inbox_tbl, "gen = 1 AND result IS NOT NULL"),
		    1);
	} else {
		ASSERT_EQ(sealed, 0); /* one generation */
	}
	inbox_store_close(e.st);
	e.st = open_store(&e);
	ASSERT_TRUE(e.st);
	c = open_lease_results(e.st, &x);
	ASSERT_TRUE(c);
	inbox_delivery d = delivery(js);
	inbox_lease *l = NULL;
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_lease_acquire_result(c, &d, &l, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(lease_has(&r, "inv-o-1"));
	ASSERT_EQ(r.first_outcome, INBOX_APPLIED);
	ASSERT_OK(lease_run(c, &x, js2, &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	d = delivery(js2);
	ASSERT_OK(inbox_lease_acquire_result(c, &d, &l, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(lease_has(&r, "inv-o-2"));
	if (is_pg)
		ASSERT_EQ(
		    count(e.st, e.inbox_tbl, "gen = 2 AND result IS NOT NULL"),
		    1);
	ASSERT_EQ(x.calls, 2);
	inbox_consumer_close(c);
	env_teardown(&e);
}

static void run_lease_result_cases(void)
{
	RUN(lease_duplicate_carries_the_stored_result);
	RUN(lease_duplicate_without_a_result);
	RUN(lease_result_after_a_seal);
}
