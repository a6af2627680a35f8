/*
 * The source framework (src/core/source.c) as a backend sees it: the
 * registry's checks, and the poll/settle contract it keeps for every
 * backend (include/inbox/sys/source.h): a backend's poll is never called
 * with a batch in hand, its settle once per batch with the batch's size
 * and res NULL when the caller's settle did not match; the framework
 * owns source_token. A fake backend records every call.
 */
#include <inbox/sys/source.h>

#include "test.h"

typedef struct fake {
	struct inbox_source base;
	int polls, settles;
	size_t settled_n;
	int settled_null; /* the last settle had res NULL */
	int acked;        /* results that were ackable, over all settles */
	size_t give;      /* deliveries the next poll hands out */
	int fail_poll;    /* the next poll fails, after handing out `give` */
} fake;

static fake *last;

static int fake_open(inbox_source **out, const char *url,
                     const inbox_source_options *opts)
{
	(void)url;
	(void)opts;
	last = calloc(1, sizeof(*last));
	*out = last ? &last->base : NULL;
	return last ? INBOX_OK : INBOX_ERR_NOMEM;
}

static int closes;

static void fake_close(inbox_source *src)
{
	closes++;
	free(src);
}

static int fake_poll(inbox_source *src, inbox_delivery *out, size_t max,
                     size_t *n, int timeout_ms, int *eof)
{
	fake *f = (fake *)src;
	(void)timeout_ms;
	(void)eof;
	f->polls++;
	size_t k = f->give < max ? f->give : max;
	for (size_t i = 0; i < k; i++) {
		out[i] = (inbox_delivery){0};
		out[i].payload = "{}";
		out[i].payload_len = 2;
		out[i].source_token = 777; /* the framework's to set */
	}
	*n = k;
	if (f->fail_poll) {
		f->fail_poll = 0;
		inbox_source_seterr(src, "fake: broker went away");
		return INBOX_ERR_SOURCE;
	}
	return INBOX_OK;
}

static int fake_settle(inbox_source *src, const inbox_result *res, size_t n)
{
	fake *f = (fake *)src;
	f->settles++;
	f->settled_n = n;
	f->settled_null = res == NULL;
	for (size_t i = 0; res && i < n; i++)
		f->acked += inbox_outcome_ackable(res[i].outcome);
	return INBOX_OK;
}

static int checks; /* handles the check slot made (closed by the framework) */

/* Refuses a URL with "bad" in it, quoting the whole URL (its password
 * too, as a client library's text might). */
static int fake_check(inbox_source **out, const char *url,
                      const inbox_source_options *opts)
{
	int rc = fake_open(out, url, opts);
	checks++;
	if (rc < 0 || !strstr(url, "bad"))
		return rc;
	inbox_source_seterr(*out, "fake: cannot use %s", url);
	return INBOX_ERR_URL;
}

static const inbox_source_vtable fake_vt = {
    INBOX_SOURCE_VTABLE_VERSION,
    "fake",
    fake_open,
    fake_close,
    fake_poll,
    fake_settle,
    NULL,
    NULL, /* client_version */
    NULL, /* alias */
    fake_check,
};

static inbox_source *open_fake(void)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "t";
	inbox_source *s = NULL;
	if (inbox_source_open(&s, "fake:x", &o) != INBOX_OK)
		return NULL;
	return s;
}

TEST(registry_checks)
{
	inbox_source_vtable v1 = fake_vt;
	v1.version = 1; /* settle had another signature */
	v1.scheme = "fake1";
	ASSERT_EQ(inbox_source_register(&v1), INBOX_ERR_INVALID);
	inbox_source_vtable noslot = fake_vt;
	noslot.scheme = "fake2";
	noslot.settle = NULL;
	ASSERT_EQ(inbox_source_register(&noslot), INBOX_ERR_INVALID);
	ASSERT_OK(inbox_source_register(&fake_vt));
	ASSERT_EQ(inbox_source_register(&fake_vt), INBOX_ERR_INVALID);
}

/* inbox_source_check: the backend's check slot, its reason scrubbed of
 * the URL's password, the handle it made closed; a version 3 backend
 * (no slot) is taken at its scheme; the options are checked as open
 * checks them. */
TEST(check_asks_the_backend)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "t";
	char why[256] = "x";
	int closed = closes;
	ASSERT_OK(
	    inbox_source_check("fake://u:pw@h/good", &o, why, sizeof(why)));
	ASSERT_TRUE(why[0] == '\0');
	ASSERT_EQ(
	    inbox_source_check("fake://u:Pa55word@h/bad", &o, why, sizeof(why)),
	    INBOX_ERR_URL);
	ASSERT_TRUE(strstr(why, "fake: cannot use") != NULL);
	ASSERT_TRUE(strstr(why, "Pa55word") == NULL);
	ASSERT_EQ(inbox_source_check("fake://h/bad", &o, NULL, 0),
	          INBOX_ERR_URL);
	ASSERT_EQ(inbox_source_check("nosuch://h/x", &o, why, sizeof(why)),
	          INBOX_ERR_URL);
	/* every handle the slot made was closed by the framework */
	ASSERT_EQ(checks, 3);
	ASSERT_EQ(closes - closed, 3);
	inbox_source_vtable v3 = fake_vt;
	v3.version = 3; /* no check slot: nothing checked but the scheme */
	v3.scheme = "fake3";
	v3.check = NULL;
	ASSERT_OK(inbox_source_register(&v3));
	ASSERT_OK(inbox_source_check("fake3://h/bad", &o, why, sizeof(why)));
	o.version = 0;
	ASSERT_EQ(inbox_source_check("fake://h/good", &o, why, sizeof(why)),
	          INBOX_ERR_INVALID);
	o.version = INBOX_SOURCE_OPTIONS_VERSION;
	o.consumer = NULL;
	ASSERT_EQ(inbox_source_check("fake://h/good", &o, why, sizeof(why)),
	          INBOX_ERR_INVALID);
}

TEST(order_is_kept_without_the_backend)
{
	inbox_source *s = open_fake();
	ASSERT_TRUE(s);
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT},
	               e[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4];
	TEST_RESULTS_INIT(res, 4);
	size_t n = 0;
	ASSERT_EQ(inbox_source_settle(s, d, res, 1), INBOX_ERR_STATE);
	ASSERT_EQ(last->settles, 0);
	ASSERT_STREQ(inbox_source_errmsg(s),
	             "fake: settle without a polled batch");
	last->give = 2;
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 0, NULL));
	ASSERT_EQ(n, 2);
	ASSERT_NE(d[0].source_token, 777);
	ASSERT_EQ(d[1].source_token, d[0].source_token + 1);
	ASSERT_EQ(inbox_source_poll(s, e, 4, &n, 0, NULL), INBOX_ERR_STATE);
	ASSERT_EQ(n, 0);
	ASSERT_EQ(last->polls, 1); /* the backend was not asked */
	res[0].outcome = INBOX_APPLIED;
	res[1].outcome = INBOX_RETRY;
	ASSERT_OK(inbox_source_settle(s, d, res, 2));
	ASSERT_EQ(last->settles, 1);
	ASSERT_EQ(last->settled_n, 2);
	ASSERT_EQ(last->settled_null, 0);
	ASSERT_EQ(last->acked, 1);
	ASSERT_EQ(inbox_source_settle(s, d, res, 2), INBOX_ERR_STATE);
	ASSERT_EQ(last->settles, 1);
	/* an empty poll: nothing to settle, nothing asked */
	last->give = 0;
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 0, NULL));
	ASSERT_EQ(n, 0);
	ASSERT_OK(inbox_source_settle(s, d, NULL, 0));
	ASSERT_EQ(last->settles, 1);
	inbox_source_close(s);
}

TEST(mismatch_redelivers_the_batch_in_hand)
{
	inbox_source *s = open_fake();
	ASSERT_TRUE(s);
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT},
	               old[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4];
	TEST_RESULTS_INIT(res, 4);
	for (int i = 0; i < 4; i++)
		res[i].outcome = INBOX_APPLIED;
	size_t n = 0;
	last->give = 3;
	ASSERT_OK(inbox_source_poll(s, old, 4, &n, 0, NULL));
	ASSERT_OK(inbox_source_settle(s, old, res, 3));
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 0, NULL));
	ASSERT_EQ(n, 3);
	/* another batch's deliveries; a part; another order */
	ASSERT_EQ(inbox_source_settle(s, old, res, 3), INBOX_ERR_INVALID);
	ASSERT_EQ(last->settled_n, 3);
	ASSERT_EQ(last->settled_null, 1);
	ASSERT_EQ(last->acked, 3); /* only the first batch's */
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 0, NULL));
	ASSERT_EQ(inbox_source_settle(s, d, res, 2), INBOX_ERR_INVALID);
	ASSERT_EQ(last->settled_null, 1);
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 0, NULL));
	inbox_delivery t = d[0];
	d[0] = d[1];
	d[1] = t;
	ASSERT_EQ(inbox_source_settle(s, d, res, 3), INBOX_ERR_INVALID);
	ASSERT_EQ(last->acked, 3);
	ASSERT_EQ(last->settles, 4);
	inbox_source_close(s);
}

/* Results of a version this library does not know (0: never set) are
 * not read: nothing acked, the batch redelivered, INVALID with the
 * reason. */
TEST(unversioned_results_ack_nothing)
{
	inbox_source *s = open_fake();
	ASSERT_TRUE(s);
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4];
	memset(res, 0, sizeof(res));
	for (int i = 0; i < 4; i++)
		res[i].outcome = INBOX_APPLIED;
	size_t n = 0;
	last->give = 2;
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 0, NULL));
	ASSERT_EQ(inbox_source_settle(s, d, res, 2), INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_source_errmsg(s), "version");
	ASSERT_EQ(last->settles, 1);
	ASSERT_EQ(last->settled_null, 1);
	ASSERT_EQ(last->acked, 0);
	/* the batch is settled: the next poll is allowed */
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 0, NULL));
	ASSERT_OK(inbox_source_settle(s, d, NULL, 2));
	inbox_source_close(s);
}

/* A backend that fails a poll after filling deliveries (against its
 * contract) gets them back at once; the caller sees nothing. */
TEST(failed_poll_hands_out_nothing)
{
	inbox_source *s = open_fake();
	ASSERT_TRUE(s);
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	size_t n = 9;
	last->give = 2;
	last->fail_poll = 1;
	ASSERT_EQ(inbox_source_poll(s, d, 4, &n, 0, NULL), INBOX_ERR_SOURCE);
	ASSERT_EQ(n, 0);
	ASSERT_STREQ(inbox_source_errmsg(s), "fake: broker went away");
	ASSERT_EQ(last->settles, 1);
	ASSERT_EQ(last->settled_null, 1);
	ASSERT_EQ(inbox_source_settle(s, d, NULL, 2), INBOX_ERR_STATE);
	ASSERT_OK(inbox_source_poll(s, d, 4, &n, 0, NULL));
	ASSERT_EQ(n, 2);
	ASSERT_OK(inbox_source_settle(s, d, NULL, 2));
	inbox_source_close(s);
}

int main(void)
{
	RUN(registry_checks);
	RUN(check_asks_the_backend);
	RUN(order_is_kept_without_the_backend);
	RUN(mismatch_redelivers_the_batch_in_hand);
	RUN(unversioned_results_ack_nothing);
	RUN(failed_poll_hands_out_nothing);
	return test_summary();
}
