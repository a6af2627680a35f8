/* Public utilities: errors, outcomes, canonicalize, fingerprint (the
 * redaction of URLs is tested in test_secret.c). */
#include <inbox/inbox.h>

#include "test.h"

TEST(err_names)
{
	ASSERT_STREQ(inbox_err_name(INBOX_OK), "INBOX_OK");
	ASSERT_STREQ(inbox_err_name(INBOX_ERR_STORE), "INBOX_ERR_STORE");
	ASSERT_STREQ(inbox_err_name(INBOX_ERR_HANDLER), "INBOX_ERR_HANDLER");
	ASSERT_STREQ(inbox_err_name(-999), "INBOX_ERR_UNKNOWN");
	ASSERT_STREQ(inbox_err_name(5), "INBOX_ERR_UNKNOWN");
	ASSERT_STREQ(inbox_err_name(INBOX_ERR_NUL), "INBOX_ERR_NUL");
	/* Every code from OK to the last one has its own name and text. */
	for (int e = INBOX_OK; e >= INBOX_ERR_NUL; e--) {
		const char *n = inbox_err_name(e), *t = inbox_strerror(e);
		if (strcmp(n, "INBOX_ERR_UNKNOWN") == 0 ||
		    strcmp(t, "unknown error") == 0 || !t[0]) {
			TEST_FAIL_("code %d has name \"%s\" text \"%s\"", e, n,
			           t);
			return;
		}
	}
	ASSERT_STREQ(inbox_strerror(INBOX_ERR_NOMEM), "out of memory");
	ASSERT_STREQ(inbox_strerror(-999), "unknown error");
}

TEST(outcomes)
{
	ASSERT_STREQ(inbox_outcome_name(INBOX_OUTCOME_NONE), "none");
	ASSERT_STREQ(inbox_outcome_name(INBOX_APPLIED), "applied");
	ASSERT_STREQ(inbox_outcome_name(INBOX_DUPLICATE), "duplicate");
	ASSERT_STREQ(inbox_outcome_name(INBOX_CONFLICT), "conflict");
	ASSERT_STREQ(inbox_outcome_name(INBOX_STALE), "stale");
	ASSERT_STREQ(inbox_outcome_name(INBOX_RETRY), "retry");
	ASSERT_STREQ(inbox_outcome_name(INBOX_DEAD_LETTERED), "dead_lettered");
	ASSERT_STREQ(inbox_outcome_name(INBOX_IN_PROGRESS), "in_progress");
	ASSERT_STREQ(inbox_outcome_name(INBOX_ACQUIRED), "acquired");
	ASSERT_STREQ(inbox_outcome_name((inbox_outcome)42), "unknown");

	ASSERT_EQ(inbox_outcome_ackable(INBOX_APPLIED), 1);
	ASSERT_EQ(inbox_outcome_ackable(INBOX_DUPLICATE), 1);
	ASSERT_EQ(inbox_outcome_ackable(INBOX_CONFLICT), 1);
	ASSERT_EQ(inbox_outcome_ackable(INBOX_STALE), 1);
	ASSERT_EQ(inbox_outcome_ackable(INBOX_DEAD_LETTERED), 1);
	ASSERT_EQ(inbox_outcome_ackable(INBOX_RETRY), 0);
	ASSERT_EQ(inbox_outcome_ackable(INBOX_IN_PROGRESS), 0);
	ASSERT_EQ(inbox_outcome_ackable(INBOX_ACQUIRED), 0);
	ASSERT_EQ(inbox_outcome_ackable(INBOX_OUTCOME_NONE), 0);
	ASSERT_EQ(inbox_outcome_ackable((inbox_outcome)42), 0);
}

TEST(canonicalize)
{
	char *out = NULL, err[256];
	size_t len = 0;
	const char *in = "{ \"b\" : [1.0, 2e0, \"\\u20ac\"], \"a\" : null }";
	ASSERT_OK(inbox_json_canonicalize(in, strlen(in), &out, &len, err,
	                                  sizeof(err)));
	ASSERT_STREQ(out, "{\"a\":null,\"b\":[1,2,\"\xe2\x82\xac\"]}");
	ASSERT_EQ(len, strlen(out));
	free(out);

	out = (char *)1;
	ASSERT_EQ(
	    inbox_json_canonicalize("{\"a\":", 5, &out, &len, err, sizeof(err)),
	    INBOX_ERR_INVALID);
	ASSERT_TRUE(out == NULL);
	ASSERT_CONTAINS(err, "malformed JSON");
	ASSERT_EQ(inbox_json_canonicalize("", 0, &out, &len, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_STREQ(err, "empty payload");
	ASSERT_EQ(inbox_json_canonicalize("\"\xc3\"", 3, &out, NULL, NULL, 0),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_json_canonicalize("1", 1, NULL, NULL, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	/* outlen may be NULL. */
	ASSERT_OK(inbox_json_canonicalize("[ ]", 3, &out, NULL, NULL, 0));
	ASSERT_STREQ(out, "[]");
	free(out);
}

static const char *fp(const char *json, const char *ptr)
{
	static char res[2][300];
	static int which;
	char err[256], hex[65];
	which ^= 1;
	if (inbox_fingerprint(json, strlen(json), ptr, hex, err, sizeof(err)) !=
	    0)
		snprintf(res[which], sizeof(res[which]), "<%s>", err);
	else
		snprintf(res[which], sizeof(res[which]), "%s", hex);
	return res[which];
}

TEST(fingerprint_ignores_spelling)
{
	const char *a = "{\"b\":1,\"a\":[1.0, 2e0]}";
	const char *b = "{ \"a\" : [1,2], \"b\":1.00 }";
	const char *c = "{\"a\":[1,2],\"b\":2}";
	const char *d = "{\"a\":[2,1],\"b\":1}";
	ASSERT_EQ(strlen(fp(a, "")), 64);
	ASSERT_STREQ(fp(a, ""), fp(b, ""));
	ASSERT_STREQ(fp(a, NULL), fp(b, ""));
	ASSERT_TRUE(strcmp(fp(a, ""), fp(c, "")) != 0);
	ASSERT_TRUE(strcmp(fp(a, ""), fp(d, "")) != 0); /* arrays ordered */
	/* The fingerprint is SHA-256 of the canonical text. */
	ASSERT_STREQ(fp("{\"b\":1,\"a\":2}", ""), fp("{\"a\":2,\"b\":1}", ""));
	ASSERT_STREQ(fp("\"abc\"", ""),
	             /* sha256 of the 5 bytes "abc" with quotes */
	             fp("\"\\u0061bc\"", ""));
	ASSERT_STREQ(fp("{}", ""), "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe"
	                           "77e8310c060f61caaff8a");
}

TEST(fingerprint_pointer)
{
	const char *a = "{\"meta\":{\"ts\":1},\"data\":{\"x\":1,\"y\":[true]}}";
	const char *b =
	    "{\"data\":{\"y\":[true],\"x\":1.0},\"meta\":{\"ts\":2}}";
	ASSERT_STREQ(fp(a, "/data"), fp(b, "/data"));
	ASSERT_TRUE(strcmp(fp(a, ""), fp(b, "")) != 0);
	ASSERT_STREQ(fp(a, "/data/x"), fp("1", ""));
	ASSERT_STREQ(fp(a, "/nope"), "<fingerprint field /nope not found>");
	char hex[65], err[256];
	ASSERT_EQ(
	    inbox_fingerprint(a, strlen(a), "/nope", hex, err, sizeof(err)),
	    INBOX_ERR_NOTFOUND);
	ASSERT_EQ(
	    inbox_fingerprint(a, strlen(a), "data", hex, err, sizeof(err)),
	    INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "invalid JSON pointer");
	ASSERT_EQ(inbox_fingerprint("{", 1, "", hex, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "malformed JSON");
	ASSERT_EQ(inbox_fingerprint("{}", 2, "", NULL, NULL, 0),
	          INBOX_ERR_INVALID);
	/* null is a value: it is fingerprinted, not "not found". */
	ASSERT_EQ(strlen(fp("{\"a\":null}", "/a")), 64);
}

int main(void)
{
	RUN(err_names);
	RUN(outcomes);
	RUN(canonicalize);
	RUN(fingerprint_ignores_spelling);
	RUN(fingerprint_pointer);
	return test_summary();
}
