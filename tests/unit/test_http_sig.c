/*
 * The http source's webhook signatures on published vectors: the
 * Standard Webhooks example (its libraries' shared test: secret
 * whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, msg_p5jXN8AQM9LWM0D4loKWxJek,
 * 1614265330, {"test": 2432232314}), its tolerance and rotation, and the
 * URL rules for secrets. tests/integration/http/webhooks.sh checks the
 * three providers against the daemon with vectors openssl computes.
 */
#include <string.h>

#include "source/http/http.h"
#include "test.h"

#define SW_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SW_ID     "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SW_TS     "1614265330"
#define SW_BODY   "{\"test\": 2432232314}"
#define SW_SIG    "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
#define SW_NOW    1614265330000LL

typedef struct hdrs {
	const char *names[4], *values[4];
} hdrs;

static const char *lookup(void *payload, const char *name)
{
	hdrs *h = payload;
	for (int i = 0; i < 4 && h->names[i]; i++)
		if (strcasecmp(h->names[i], name) == 0)
			return h->values[i];
	return NULL;
}

typedef struct fake_src {
	inbox_source base;
} fake_src;

static int conf_of(http_conf *c, const char *url)
{
	static fake_src src;
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "t";
	memset(&src, 0, sizeof(src));
	return inbox__http_conf_parse(c, &src.base, url, &o);
}

static int verify(const char *url, const char *sig, int64_t now,
                  const char **why)
{
	http_conf c;
	int rc = conf_of(&c, url);
	if (rc < 0)
		return rc;
	hdrs h = {{"webhook-id", "webhook-timestamp", "webhook-signature"},
	          {SW_ID, SW_TS, sig}};
	rc = inbox__http_verify(&c, lookup, &h, SW_BODY, strlen(SW_BODY), now,
	                        why);
	inbox__http_conf_free(&c);
	return rc;
}

#define SW_URL "http://127.0.0.1:0/h?mode=standard&secret="

TEST(standard_webhooks_published_example)
{
	const char *why;
	ASSERT_EQ(verify(SW_URL SW_SECRET, SW_SIG, SW_NOW, &why), 1);
	/* the same signature among others, as a rotating sender sends */
	ASSERT_EQ(
	    verify(SW_URL SW_SECRET,
	           "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= " SW_SIG,
	           SW_NOW, &why),
	    1);
}

TEST(standard_webhooks_one_bit_off)
{
	const char *why;
	/* the Python library's test of a wrong signature: last char A */
	ASSERT_EQ(verify(SW_URL SW_SECRET,
	                 "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=",
	                 SW_NOW, &why),
	          0);
	ASSERT_STREQ(why, "no signature matches");
	/* an asymmetric (v1a) signature is not taken for a v1 one */
	ASSERT_EQ(verify(SW_URL SW_SECRET,
	                 "v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
	                 SW_NOW, &why),
	          0);
}

TEST(standard_webhooks_tolerance)
{
	const char *why;
	ASSERT_EQ(verify(SW_URL SW_SECRET, SW_SIG, SW_NOW + 299000, &why), 1);
	ASSERT_EQ(verify(SW_URL SW_SECRET, SW_SIG, SW_NOW + 301000, &why), 0);
	ASSERT_STREQ(why, "webhook-timestamp outside the tolerance");
	ASSERT_EQ(verify(SW_URL SW_SECRET, SW_SIG, SW_NOW - 301000, &why), 0);
	ASSERT_EQ(verify(SW_URL SW_SECRET "&tolerance=10m", SW_SIG,
	                 SW_NOW + 500000, &why),
	          1);
}

TEST(standard_webhooks_rotation)
{
	const char *why;
	/* the old secret first, the new one (the published) second */
	ASSERT_EQ(verify(SW_URL "whsec_c2VjcmV0LWJlZm9yZS10aGUtcm90YXRpb24=&"
	                        "secret=" SW_SECRET,
	                 SW_SIG, SW_NOW, &why),
	          1);
	ASSERT_EQ(verify(SW_URL "whsec_c2VjcmV0LWJlZm9yZS10aGUtcm90YXRpb24=",
	                 SW_SIG, SW_NOW, &why),
	          0);
}

TEST(url_rules)
{
	http_conf c;
	ASSERT_EQ(conf_of(&c, "http://127.0.0.1:0/h?mode=github"),
	          INBOX_ERR_URL); /* a webhook needs a secret */
	inbox__http_conf_free(&c);
	ASSERT_EQ(conf_of(&c, "http://127.0.0.1:0/h?secret=x"), INBOX_ERR_URL);
	inbox__http_conf_free(&c);
	ASSERT_EQ(conf_of(&c, "http://127.0.0.1:0/h?mode=standard&secret=%2A"),
	          INBOX_ERR_URL); /* not base64 */
	inbox__http_conf_free(&c);
	ASSERT_EQ(conf_of(&c, "https://127.0.0.1:0/h"), INBOX_ERR_URL);
	inbox__http_conf_free(&c);
	ASSERT_EQ(conf_of(&c, "http://127.0.0.1:0/h?cert=a&key=b"),
	          INBOX_ERR_URL);
	inbox__http_conf_free(&c);
	ASSERT_EQ(conf_of(&c, "http://127.0.0.1/h"), INBOX_ERR_URL);
	inbox__http_conf_free(&c);
	ASSERT_EQ(conf_of(&c, "http://127.0.0.1:8080/a/b?id_header=X-Key&"
	                      "status=201&max_body=10"),
	          INBOX_OK);
	ASSERT_STREQ(c.path, "/a/b");
	ASSERT_STREQ(c.id_header, "X-Key");
	ASSERT_EQ(c.status, 201);
	ASSERT_EQ(c.port, 8080);
	ASSERT_EQ((int)c.max_body, 10);
	inbox__http_conf_free(&c);
}

int main(void)
{
	RUN(standard_webhooks_published_example);
	RUN(standard_webhooks_one_bit_off);
	RUN(standard_webhooks_tolerance);
	RUN(standard_webhooks_rotation);
	RUN(url_rules);
	return test_summary();
}
