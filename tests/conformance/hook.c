/* The consumer option on_handlers (options version 6): told once per pass
 * of a batch, before the first handler, exactly which handlers will run,
 * in order; a pass run again calls it again. Included by conformance.c. */

typedef struct hook_ctx {
	char lists[4][256]; /* per hook call: the keys, space-separated */
	int nlists;
	char calls[4][256]; /* per pass: the keys the handler was called for */
	int attempts_ok;    /* every listed attempt matched the handler's */
	int32_t listed_attempt[8];
	int nlisted;
	int seen;             /* handler calls in the current pass */
	const char *fail_key; /* the handler returns RETRY for it */
} hook_ctx;

static void hook_fn(const inbox_msg *const *msgs, size_t n, void *p)
{
	hook_ctx *h = p;
	if (h->nlists >= 4)
		return;
	char *l = h->lists[h->nlists++];
	l[0] = '\0';
	h->nlisted = 0;
	h->seen = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k = strlen(l);
		snprintf(l + k, 256 - k, "%s%s", i ? " " : "",
		         inbox_msg_key(msgs[i]));
		if (h->nlisted < 8)
			h->listed_attempt[h->nlisted++] =
			    inbox_msg_attempt(msgs[i]);
	}
}

static int hook_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	hook_ctx *h = p;
	(void)t;
	int pass = h->nlists > 0 ? h->nlists - 1 : 0;
	char *l = h->calls[pass];
	size_t k = strlen(l);
	snprintf(l + k, 256 - k, "%s%s", k ? " " : "", inbox_msg_key(m));
	if (h->seen < h->nlisted &&
	    h->listed_attempt[h->seen] != inbox_msg_attempt(m))
		h->attempts_ok = 0;
	h->seen++;
	if (h->fail_key && strcmp(inbox_msg_key(m), h->fail_key) == 0)
		return INBOX_HANDLER_RETRY;
	return INBOX_HANDLER_OK;
}

/* The store's commit fails once, transiently: the batch runs again. */
static const inbox_store_vtable *hook_real;
static int hook_commit_fails;
static int hook_commit(inbox_store *st)
{
	if (hook_commit_fails > 0) {
		hook_commit_fails--;
		return INBOX_ERR_TRANSIENT;
	}
	return hook_real->commit(st);
}

static inbox_consumer *open_hooked(inbox_store *st, hook_ctx *h)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.order-created.v1";
	o.handler = hook_handler;
	o.handler_payload = h;
	o.on_handlers = hook_fn;
	o.max_attempts = 3;
	o.lease_ms = 5000;
	o.retention_seconds = 3600;
	return open_with(st, &o);
}

TEST(on_handlers_lists_exactly_the_handled)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_store *st2 = open_store(&e);
	ASSERT_TRUE(st2);
	hook_ctx h;
	memset(&h, 0, sizeof(h));
	h.attempts_ok = 1;
	inbox_consumer *c = open_hooked(e.st, &h);
	ASSERT_TRUE(c);
	/* another worker holds k-lease under a lease */
	hctx h2 = {.e = &e};
	inbox_consumer *w2 =
	    open_consumer(st2, invoice_handler, &h2, NULL, NULL);
	ASSERT_TRUE(w2);
	char js[8][256];
	order_json(js[0], sizeof(js[0]), "k-done", "o1", 1);
	order_json(js[1], sizeof(js[1]), "k-done2", "o2", 2);
	order_json(js[2], sizeof(js[2]), "k-fail", "o3", 3);
	order_json(js[3], sizeof(js[3]), "k-lease", "o4", 4);
	inbox_delivery d0 = delivery(js[3]);
	inbox_lease *l = NULL;
	inbox_outcome lo;
	ASSERT_OK(inbox_lease_acquire(w2, &d0, &l, &lo));
	ASSERT_EQ(lo, INBOX_ACQUIRED);
	/* first batch: k-done, k-done2 applied, k-fail fails */
	inbox_delivery d[8];
	inbox_result r[8];
	for (int i = 0; i < 8; i++)
		r[i] = (inbox_result)INBOX_RESULT_INIT;
	h.fail_key = "k-fail";
	for (int i = 0; i < 3; i++)
		d[i] = delivery(js[i]);
	ASSERT_OK(inbox_consumer_process_batch(c, d, 3, r));
	ASSERT_EQ(r[0].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[1].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[2].outcome, INBOX_RETRY);
	ASSERT_EQ(h.nlists, 1);
	ASSERT_STREQ(h.lists[0], "k-done k-done2 k-fail");
	ASSERT_STREQ(h.calls[0], "k-done k-done2 k-fail");

	/* second batch, whose commit fails once: a duplicate, a new key, a
	 * conflict, the failed key retried, a repeat of the new key, a key
	 * in progress, bad input, another new key */
	memset(&h, 0, sizeof(h));
	h.attempts_ok = 1;
	char conf[256], bad[] = "not json";
	order_json(conf, sizeof(conf), "k-done2", "o2", 99);
	order_json(js[4], sizeof(js[4]), "k-new1", "o5", 5);
	order_json(js[5], sizeof(js[5]), "k-new2", "o6", 6);
	d[0] = delivery(js[0]);
	d[1] = delivery(js[4]);
	d[2] = delivery(conf);
	d[3] = delivery(js[2]);
	d[4] = delivery(js[4]);
	d[5] = delivery(js[3]);
	d[6] = delivery(bad);
	d[7] = delivery(js[5]);
	static inbox_store_vtable vt;
	hook_real = e.st->vt;
	vt = *hook_real;
	vt.commit = hook_commit;
	e.st->vt = &vt;
	hook_commit_fails = 1;
	int rc = inbox_consumer_process_batch(c, d, 8, r);
	e.st->vt = hook_real;
	ASSERT_OK(rc);
	ASSERT_EQ(hook_commit_fails, 0);
	ASSERT_EQ(r[0].outcome, INBOX_DUPLICATE);
	ASSERT_EQ(r[1].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[2].outcome, INBOX_CONFLICT);
	ASSERT_EQ(r[3].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[3].attempts, 2);
	ASSERT_EQ(r[4].outcome, INBOX_DUPLICATE);
	ASSERT_EQ(r[5].outcome, INBOX_IN_PROGRESS);
	ASSERT_EQ(r[6].outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(r[7].outcome, INBOX_APPLIED);
	/* two passes, each told its handlers, then running exactly those */
	ASSERT_EQ(h.nlists, 2);
	ASSERT_STREQ(h.lists[0], "k-new1 k-fail k-new2");
	ASSERT_STREQ(h.calls[0], "k-new1 k-fail k-new2");
	ASSERT_STREQ(h.lists[1], "k-new1 k-fail k-new2");
	ASSERT_STREQ(h.calls[1], "k-new1 k-fail k-new2");
	ASSERT_EQ(h.attempts_ok, 1);
	ASSERT_EQ(h.listed_attempt[1], 2);

	/* nothing to handle: no call */
	memset(&h, 0, sizeof(h));
	ASSERT_OK(inbox_consumer_process_batch(c, d, 2, r));
	ASSERT_EQ(r[0].outcome, INBOX_DUPLICATE);
	ASSERT_EQ(r[1].outcome, INBOX_DUPLICATE);
	ASSERT_EQ(h.nlists, 0);
	inbox_lease_free(l);
	inbox_consumer_close(w2);
	inbox_consumer_close(c);
	inbox_store_close(st2);
	env_teardown(&e);
}
