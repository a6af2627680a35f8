/*
 * The message as handlers see it: inbox_msg_get() never hands out a text
 * cut at a U+0000 (INBOX_ERR_NUL), inbox_msg_getn() carries it whole with
 * its length; what the consumer does with ids and refused deliveries.
 */
#include <inbox/inbox.h>

#include "test.h"

typedef struct seen {
	int calls;
	int rc_get, rc_getn, rc_num, rc_obj, rc_null;
	const char *get;
	char getn[32];
	size_t getn_len;
	char num[32], obj[64];
	size_t num_len, obj_len;
	int null_is_null;
} seen;

static int look(inbox_txn *t, const inbox_msg *m, void *p)
{
	(void)t;
	seen *s = p;
	const char *v = NULL;
	size_t n = 0;
	s->calls++;
	s->rc_get = inbox_msg_get(m, "/data/s", &s->get);
	s->rc_getn = inbox_msg_getn(m, "/data/s", &v, &n);
	if (s->rc_getn == INBOX_OK && v && n < sizeof(s->getn)) {
		memcpy(s->getn, v, n + 1); /* NUL-terminated too */
		s->getn_len = n;
	}
	s->rc_num = inbox_msg_getn(m, "/data/n", &v, &n);
	if (s->rc_num == INBOX_OK && n < sizeof(s->num)) {
		memcpy(s->num, v, n + 1);
		s->num_len = n;
	}
	/* objects are canonical JSON: the U+0000 escaped, nothing cut */
	s->rc_obj = inbox_msg_get(m, "/data", &v);
	if (s->rc_obj == INBOX_OK && strlen(v) < sizeof(s->obj)) {
		strcpy(s->obj, v);
		s->obj_len = strlen(v);
	}
	s->rc_null = inbox_msg_getn(m, "/data/z", &v, &n);
	s->null_is_null = v == NULL && n == 0;
	return INBOX_HANDLER_OK;
}

static inbox_consumer *open_c(inbox_store **st, seen *s)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "msg.test";
	o.handler = look;
	o.handler_payload = s;
	inbox_consumer *c = NULL;
	char err[256];
	if (inbox_store_open(st, "sqlite::memory:", NULL) != INBOX_OK ||
	    inbox_consumer_open(&c, *st, &o, err, sizeof(err)) != INBOX_OK)
		fprintf(stderr, "open: %s\n", err);
	return c;
}

static int process(inbox_consumer *c, const char *js, const char *id,
                   inbox_result *r)
{
	inbox_delivery d = INBOX_DELIVERY_INIT;
	d.payload = js;
	d.payload_len = strlen(js);
	d.id = id;
	return inbox_consumer_process(c, &d, r);
}

TEST(get_refuses_what_getn_carries)
{
	inbox_store *st = NULL;
	seen s;
	memset(&s, 0, sizeof(s));
	inbox_consumer *c = open_c(&st, &s);
	ASSERT_TRUE(c);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(process(c,
	                  "{\"id\":\"a\",\"data\":{\"s\":\"abc\\u0000def\","
	                  "\"n\":1.5,\"z\":null}}",
	                  NULL, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_EQ(s.calls, 1);
	ASSERT_EQ(s.rc_get, INBOX_ERR_NUL);
	ASSERT_TRUE(s.get == NULL);
	ASSERT_EQ(s.rc_getn, INBOX_OK);
	ASSERT_EQ(s.getn_len, 7);
	ASSERT_TRUE(memcmp(s.getn, "abc\0def", 8) == 0);
	ASSERT_EQ(s.rc_num, INBOX_OK);
	ASSERT_STREQ(s.num, "1.5");
	ASSERT_EQ(s.num_len, 3);
	ASSERT_EQ(s.rc_obj, INBOX_OK);
	ASSERT_STREQ(s.obj, "{\"n\":1.5,\"s\":\"abc\\u0000def\",\"z\":null}");
	ASSERT_EQ(s.rc_null, INBOX_OK);
	ASSERT_TRUE(s.null_is_null);
	/* a string without U+0000: both give it */
	ASSERT_OK(
	    process(c, "{\"id\":\"b\",\"data\":{\"s\":\"plain\"}}", NULL, &r));
	ASSERT_EQ(s.rc_get, INBOX_OK);
	ASSERT_STREQ(s.get, "plain");
	ASSERT_EQ(s.getn_len, 5);
	ASSERT_EQ(s.rc_num, INBOX_ERR_NOTFOUND);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

TEST(ids_and_refusals)
{
	inbox_store *st = NULL;
	seen s;
	memset(&s, 0, sizeof(s));
	inbox_consumer *c = open_c(&st, &s);
	ASSERT_TRUE(c);
	inbox_result r = INBOX_RESULT_INIT;
	/* an integer id is text; a delivery id wins over the payload's */
	ASSERT_OK(process(c, "{\"id\":42}", NULL, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_STREQ(r.key, "42");
	ASSERT_OK(process(c, "{\"id\":\"m\\u0000x\"}", "from-broker", &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_STREQ(r.key, "from-broker");
	/* the payload's id with a U+0000 */
	ASSERT_OK(process(c, "{\"id\":\"m\\u0000x\"}", NULL, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_STREQ(
	    r.reason,
	    "U+0000 in /id (the message id): cannot be stored as text");
	/* refused by the source (inbox_delivery.refused): its reason,
	 * nothing parsed or run, the id ignored */
	int calls = s.calls;
	inbox_delivery d = INBOX_DELIVERY_INIT;
	d.payload = "{\"id\":\"ok\"}";
	d.payload_len = strlen(d.payload);
	d.id = "refused-id";
	d.refused = "why not";
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_STREQ(r.reason, "why not");
	ASSERT_TRUE(r.key == NULL);
	/* a refusal without a (UTF-8) reason still says something */
	d.refused = "\xc3";
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_STREQ(r.reason, "the source could not pass it on whole");
	d.refused = "";
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_STREQ(r.reason, "the source could not pass it on whole");
	ASSERT_EQ(s.calls, calls);
	/* the old in-band mark (an id beginning with 0xFF) is no refusal any
	 * more: an id that is not UTF-8 */
	ASSERT_OK(process(c, "{\"id\":\"ok\"}", "\xffwhy not", &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_STREQ(r.reason, "message id is not valid UTF-8");
	ASSERT_EQ(s.calls, calls);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* Over max_payload: the real size, but for max_payload + 1 bytes, what a
 * source hands over of any larger payload: "more than". */
TEST(over_size_says_the_truth)
{
	inbox_store *st = NULL;
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "msg.size";
	o.max_payload = 16;
	inbox_consumer *c = NULL;
	ASSERT_OK(inbox_store_open(&st, "sqlite::memory:", NULL));
	ASSERT_OK(inbox_consumer_open(&c, st, &o, NULL, 0));
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(process(c, "{\"id\":\"01234567\"}", NULL, &r)); /* 17 */
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_STREQ(r.reason,
	             "payload of more than 16 bytes exceeds max_payload 16");
	ASSERT_OK(process(c, "{\"id\":\"012345678\"}", NULL, &r)); /* 18 */
	ASSERT_STREQ(r.reason, "payload of 18 bytes exceeds max_payload 16");
	ASSERT_OK(process(c, "{\"id\":\"0123456\"}", NULL, &r)); /* 16 */
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

int main(void)
{
	RUN(get_refuses_what_getn_carries);
	RUN(ids_and_refusals);
	RUN(over_size_says_the_truth);
	return test_summary();
}
