/*
 * Canonical JSON (RFC 8785), pointers (RFC 6901), UTF-8, value text and
 * SHA-256.
 *
 * Vectors:
 *   - RFC 8785 section 3.2.2 (values) and 3.2.3 (sorting) examples, and
 *     Appendix B (IEEE-754 bit patterns and their text);
 *   - the JCS reference test data (cyberphone/json-canonicalization,
 *     testdata/input + testdata/outhex: arrays, french, structures, unicode,
 *     values, weird), expected output kept as hex so no byte is lost;
 *   - RFC 6901 section 5 pointer examples.
 */
#include <math.h>
#include <stdint.h>

#include <inbox/inbox.h>

#include "base/json.h"
#include "test.h"

/* Canonical form of a JSON text, or "<error: reason>"; static buffer. */
static const char *canon_of(const char *json)
{
	static char res[4096];
	char err[256];
	json_t *v;
	if (inbox__json_parse(json, strlen(json), &v, err, sizeof(err)) < 0) {
		snprintf(res, sizeof(res), "<error: %s>", err);
		return res;
	}
	inbox__buf b = INBOX__BUF_INIT;
	if (inbox__canon_append(&b, v) < 0)
		snprintf(res, sizeof(res), "<canon failed>");
	else
		snprintf(res, sizeof(res), "%s", b.data);
	inbox__buf_free(&b);
	json_decref(v);
	return res;
}

static const char *unhex(const char *hex)
{
	static char out[2048];
	size_t n = strlen(hex) / 2;
	for (size_t i = 0; i < n; i++) {
		unsigned x;
		sscanf(hex + 2 * i, "%2x", &x);
		out[i] = (char)x;
	}
	out[n] = '\0';
	return out;
}

/* ---- UTF-8 ---- */

TEST(utf8_valid)
{
	ASSERT_TRUE(inbox__utf8_valid("", 0));
	ASSERT_TRUE(inbox__utf8_valid("plain ascii", 11));
	ASSERT_TRUE(
	    inbox__utf8_valid("\xc3\xb6\xe2\x82\xac\xf0\x9f\x98\x80", 9));
	ASSERT_TRUE(inbox__utf8_valid("\xef\xbf\xbf", 3));     /* U+FFFF */
	ASSERT_TRUE(inbox__utf8_valid("\xf4\x8f\xbf\xbf", 4)); /* U+10FFFF */
	ASSERT_TRUE(inbox__utf8_valid("a\0b", 3));
	ASSERT_EQ(inbox__utf8_valid("\xc0\x80", 2), 0);         /* overlong */
	ASSERT_EQ(inbox__utf8_valid("\xe0\x80\xaf", 3), 0);     /* overlong */
	ASSERT_EQ(inbox__utf8_valid("\xf0\x8f\xbf\xbf", 4), 0); /* overlong */
	ASSERT_EQ(inbox__utf8_valid("\xed\xa0\x80", 3), 0);     /* D800 */
	ASSERT_EQ(inbox__utf8_valid("\xed\xbf\xbf", 3), 0);     /* DFFF */
	ASSERT_EQ(inbox__utf8_valid("\xf4\x90\x80\x80", 4), 0); /* >10FFFF */
	ASSERT_EQ(inbox__utf8_valid("\xf5\x80\x80\x80", 4), 0);
	ASSERT_EQ(inbox__utf8_valid("\xe2\x82", 2), 0); /* truncated */
	ASSERT_EQ(inbox__utf8_valid("\x80", 1), 0);     /* lone continuation */
	ASSERT_EQ(inbox__utf8_valid("\xff", 1), 0);
}

/* ---- parsing ---- */

TEST(parse_errors)
{
	char err[256];
	json_t *v = (json_t *)1;
	ASSERT_EQ(inbox__json_parse("", 0, &v, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(v == NULL);
	ASSERT_STREQ(err, "empty payload");

	ASSERT_EQ(
	    inbox__json_parse("{\"a\":\"x\xff\"}", 9, &v, err, sizeof(err)),
	    INBOX_ERR_INVALID);
	ASSERT_STREQ(err, "invalid UTF-8 at byte 7");

	ASSERT_EQ(
	    inbox__json_parse("{\"a\":\xed\xa0\x80}", 8, &v, err, sizeof(err)),
	    INBOX_ERR_INVALID);
	ASSERT_STREQ(err, "invalid UTF-8 at byte 5");

	const char *bad = "{\"a\": 1,\n \"b\": }";
	ASSERT_EQ(inbox__json_parse(bad, strlen(bad), &v, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "malformed JSON: ");
	ASSERT_CONTAINS(err, " at line 2 column ");

	const char *dup = "{\"a\":1,\"a\":2}";
	ASSERT_EQ(inbox__json_parse(dup, strlen(dup), &v, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "duplicate");

	/* Escapes resolve before the duplicate check. */
	const char *dup2 = "{\"a\":1,\"\\u0061\":2}";
	ASSERT_EQ(inbox__json_parse(dup2, strlen(dup2), &v, err, sizeof(err)),
	          INBOX_ERR_INVALID);

	/* Lone surrogates cannot be represented in UTF-8. */
	const char *lone = "[\"\\ud800\"]";
	ASSERT_EQ(inbox__json_parse(lone, strlen(lone), &v, err, sizeof(err)),
	          INBOX_ERR_INVALID);

	/* Raw NUL bytes (jansson alone would drop the one after 1). */
	ASSERT_EQ(inbox__json_parse("[1\0,2]", 6, &v, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_STREQ(err, "malformed JSON: NUL byte at byte 2");
	ASSERT_EQ(inbox__json_parse("1\0", 2, &v, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(inbox__json_parse("\"a\0\"", 4, &v, err, sizeof(err)),
	          INBOX_ERR_INVALID);

	/* jansson quotes short tokens near the error; a reason cut by a short
	 * buffer never ends inside a character. */
	const char *key0 = "{\"\xc3\xa9\xc3\xa9\xc3\xa9\\u0000\":1}";
	ASSERT_EQ(inbox__json_parse(key0, strlen(key0), &v, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "near '\"\xc3\xa9\xc3\xa9\xc3\xa9");
	size_t cut = (size_t)(strstr(err, "\xc3\xa9") - err) + 1;
	char small[128];
	ASSERT_EQ(inbox__json_parse(key0, strlen(key0), &v, small, cut + 1),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(strlen(small), cut - 1);
	ASSERT_TRUE(inbox__utf8_valid(small, strlen(small)));

	/* Trailing garbage. */
	ASSERT_EQ(inbox__json_parse("1 2", 3, &v, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	/* A real beyond the double range. */
	ASSERT_EQ(inbox__json_parse("1e400", 5, &v, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "malformed JSON");
	/* NULL err is allowed. */
	ASSERT_EQ(inbox__json_parse("{", 1, &v, NULL, 0), INBOX_ERR_INVALID);
}

TEST(parse_scalars_and_nul)
{
	char err[256];
	json_t *v;
	ASSERT_OK(inbox__json_parse(" 42 ", 4, &v, err, sizeof(err)));
	ASSERT_TRUE(json_is_integer(v));
	json_decref(v);
	ASSERT_OK(inbox__json_parse("\"a\\u0000b\"", 10, &v, err, sizeof(err)));
	ASSERT_EQ(json_string_length(v), 3);
	json_decref(v);
	ASSERT_OK(inbox__json_parse("null", 4, &v, err, sizeof(err)));
	ASSERT_TRUE(json_is_null(v));
	json_decref(v);
}

TEST(parse_big_integer_as_real)
{
	char err[256];
	json_t *v;
	const char *s = "{\"n\":295147905179352830000,\"m\":7}";
	ASSERT_OK(inbox__json_parse(s, strlen(s), &v, err, sizeof(err)));
	ASSERT_TRUE(json_is_real(json_object_get(v, "n")));
	json_decref(v);
	ASSERT_STREQ(canon_of(s), "{\"m\":7,\"n\":295147905179352830000}");
	ASSERT_STREQ(canon_of("-99999999999999999999999"), "-1e+23");
	/* int64 limits stay integers, canonicalized through double. */
	ASSERT_STREQ(canon_of("[9223372036854775807,-9223372036854775808]"),
	             "[9223372036854776000,-9223372036854776000]");
}

/* ---- RFC 8785 ---- */

TEST(rfc8785_values_example)
{
	/* Section 3.2.2 (and testdata/input/values.json). */
	const char *in =
	    "{\n  \"numbers\": [333333333.33333329, 1E30, 4.50, 2e-3, "
	    "0.000000000000000000000000001],\n"
	    "  \"string\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022"
	    "\\u005c\\\\\\\"\\/\",\n"
	    "  \"literals\": [null, true, false]\n}";
	const char *want =
	    "{\"literals\":[null,true,false],\"numbers\":[333333333."
	    "3333333,1e+30,4.5,0.002,1e-27],\"string\":\"\xe2\x82\xac$"
	    "\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}";
	ASSERT_STREQ(canon_of(in), want);
	ASSERT_STREQ(
	    canon_of(in),
	    unhex("7b226c69746572616c73223a5b6e756c6c2c747275652c66616c7365"
	          "5d2c226e756d62657273223a5b3333333333333333332e3333333333"
	          "33332c31652b33302c342e352c302e3030322c31652d32375d2c2273"
	          "7472696e67223a22e282ac245c75303030665c6e4127425c225c5c5c"
	          "5c5c222f227d"));
}

TEST(rfc8785_sorting_example)
{
	/* Section 3.2.3: U+1F600 (D83D DE00) sorts before U+FB33 as UTF-16,
	 * after it as UTF-8 bytes or code points. */
	const char *in = "{\n"
	                 "  \"\\u20ac\": \"Euro Sign\",\n"
	                 "  \"\\r\": \"Carriage Return\",\n"
	                 "  \"\\ufb33\": \"Hebrew Letter Dalet With Dagesh\",\n"
	                 "  \"1\": \"One\",\n"
	                 "  \"\\ud83d\\ude00\": \"Emoji: Grinning Face\",\n"
	                 "  \"\\u0080\": \"Control\",\n"
	                 "  \"\\u00f6\": \"Latin Small Letter O With "
	                 "Diaeresis\"\n"
	                 "}";
	const char *want =
	    "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\xc2\x80\":"
	    "\"Control\",\"\xc3\xb6\":\"Latin Small Letter O With "
	    "Diaeresis\",\"\xe2\x82\xac\":\"Euro Sign\",\"\xf0\x9f\x98\x80\":"
	    "\"Emoji: Grinning Face\",\"\xef\xac\xb3\":\"Hebrew Letter "
	    "Dalet With Dagesh\"}";
	ASSERT_STREQ(canon_of(in), want);
}

TEST(jcs_testdata)
{
	/* cyberphone/json-canonicalization testdata: input and outhex. */
	static const struct {
		const char *name, *in, *hex;
	} v[] = {
	    {"arrays",
	     "[\n  56,\n  {\n    \"d\": true,\n    \"10\": null,\n"
	     "    \"1\": [ ]\n  }\n]",
	     "5b35362c7b2231223a5b5d2c223130223a6e756c6c2c2264223a7472"
	     "75657d5d"},
	    {"french",
	     "{\n  \"peach\": \"This sorting order\",\n  \"p\xc3\xa9"
	     "ch\xc3\xa9\": \"is wrong according to French\",\n  \"p\xc3"
	     "\xaa"
	     "che\": \"but canonicalization MUST\",\n  \"sin\":   \"ignore "
	     "locale\"\n}",
	     "7b227065616368223a225468697320736f7274696e67206f72646572222c"
	     "2270c3a96368c3a9223a2269732077726f6e67206163636f7264696e6720"
	     "746f204672656e6368222c2270c3aa636865223a226275742063616e6f6e"
	     "6963616c697a6174696f6e204d555354222c2273696e223a2269676e6f72"
	     "65206c6f63616c65227d"},
	    {"structures",
	     "{\n  \"1\": {\"f\": {\"f\": \"hi\",\"F\": 5} ,\"\\n\": 56.0},\n"
	     "  \"10\": { },\n  \"\": \"empty\",\n  \"a\": { },\n  \"111\": "
	     "[ {\"e\": \"yes\",\"E\": \"no\" } ],\n  \"A\": { }\n}",
	     "7b22223a22656d707479222c2231223a7b225c6e223a35362c2266223a7b"
	     "2246223a352c2266223a226869227d7d2c223130223a7b7d2c2231313122"
	     "3a5b7b2245223a226e6f222c2265223a22796573227d5d2c2241223a7b7d"
	     "2c2261223a7b7d7d"},
	    {"unicode", "{\n  \"Unnormalized Unicode\":\"A\\u030a\"\n}",
	     "7b22556e6e6f726d616c697a656420556e69636f6465223a2241cc8a227d"},
	    {"weird",
	     "{\n  \"\\u20ac\": \"Euro Sign\",\n  \"\\r\": \"Carriage "
	     "Return\",\n  \"\\u000a\": \"Newline\",\n  \"1\": \"One\",\n"
	     "  \"\\u0080\": \"Control\\u007f\",\n  \"\\ud83d\\ude02\": "
	     "\"Smiley\",\n  \"\\u00f6\": \"Latin Small Letter O With "
	     "Diaeresis\",\n  \"\\ufb33\": \"Hebrew Letter Dalet With "
	     "Dagesh\",\n  \"</script>\": \"Browser Challenge\"\n}",
	     "7b225c6e223a224e65776c696e65222c225c72223a224361727269616765"
	     "2052657475726e222c2231223a224f6e65222c223c2f7363726970743e22"
	     "3a2242726f77736572204368616c6c656e6765222c22c280223a22436f6e"
	     "74726f6c7f222c22c3b6223a224c6174696e20536d616c6c204c65747465"
	     "72204f205769746820446961657265736973222c22e282ac223a22457572"
	     "6f205369676e222c22f09f9882223a22536d696c6579222c22efacb3223a"
	     "22486562726577204c65747465722044616c657420576974682044616765"
	     "7368227d"},
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char got[2048];
		snprintf(got, sizeof(got), "%s", canon_of(v[i].in));
		if (strcmp(got, unhex(v[i].hex)) != 0) {
			TEST_FAIL_("%s: \"%s\" != \"%s\"", v[i].name, got,
			           unhex(v[i].hex));
			return;
		}
	}
}

static const char *num_text(double d)
{
	static char res[64];
	json_t *v = json_real(d);
	inbox__buf b = INBOX__BUF_INIT;
	if (!v || inbox__canon_append(&b, v) < 0)
		snprintf(res, sizeof(res), "<error>");
	else
		snprintf(res, sizeof(res), "%s", b.data);
	inbox__buf_free(&b);
	json_decref(v);
	return res;
}

TEST(rfc8785_appendix_b_numbers)
{
	static const struct {
		uint64_t bits;
		const char *text;
	} v[] = {
	    {0x0000000000000000ULL, "0"},
	    {0x8000000000000000ULL, "0"},
	    {0x0000000000000001ULL, "5e-324"},
	    {0x8000000000000001ULL, "-5e-324"},
	    {0x7fefffffffffffffULL, "1.7976931348623157e+308"},
	    {0xffefffffffffffffULL, "-1.7976931348623157e+308"},
	    {0x4340000000000000ULL, "9007199254740992"},
	    {0xc340000000000000ULL, "-9007199254740992"},
	    {0x4430000000000000ULL, "295147905179352830000"},
	    {0x44b52d02c7e14af5ULL, "9.999999999999997e+22"},
	    {0x44b52d02c7e14af6ULL, "1e+23"},
	    {0x44b52d02c7e14af7ULL, "1.0000000000000001e+23"},
	    {0x444b1ae4d6e2ef4eULL, "999999999999999700000"},
	    {0x444b1ae4d6e2ef4fULL, "999999999999999900000"},
	    {0x444b1ae4d6e2ef50ULL, "1e+21"},
	    {0x3eb0c6f7a0b5ed8cULL, "9.999999999999997e-7"},
	    {0x3eb0c6f7a0b5ed8dULL, "0.000001"},
	    {0x41b3de4355555553ULL, "333333333.3333332"},
	    {0x41b3de4355555554ULL, "333333333.33333325"},
	    {0x41b3de4355555555ULL, "333333333.3333333"},
	    {0x41b3de4355555556ULL, "333333333.3333334"},
	    {0x41b3de4355555557ULL, "333333333.33333343"},
	    {0xbecbf647612f3696ULL, "-0.0000033333333333333333"},
	    {0x43143ff3c1cb0959ULL, "1424953923781206.2"},
	    /* Not from the RFC: powers of two, where the rounding interval
	     * is lopsided and the nearest 16-digit decimal does not read
	     * back but the one on the other side does (checked against
	     * Python's repr). */
	    {0x0060000000000000ULL, "7.120236347223045e-307"},
	    {0x0100000000000000ULL, "7.291122019556398e-304"},
	    {0x13e0000000000000ULL, "5.940911144672375e-213"},
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		double d;
		memcpy(&d, &v[i].bits, sizeof(d));
		const char *got = num_text(d);
		if (strcmp(got, v[i].text) != 0) {
			TEST_FAIL_("0x%016llx: \"%s\" != \"%s\"",
			           (unsigned long long)v[i].bits, got,
			           v[i].text);
			return;
		}
	}
}

TEST(number_spellings)
{
	static const struct {
		const char *in, *out;
	} v[] = {
	    {"1e30", "1e+30"},
	    {"1E30", "1e+30"},
	    {"4.50", "4.5"},
	    {"2e-3", "0.002"},
	    {"0.000001", "0.000001"},
	    {"1e-7", "1e-7"},
	    {"0.0000001", "1e-7"},
	    {"333333333.33333329", "333333333.3333333"},
	    {"-0", "0"},
	    {"-0.0", "0"},
	    {"0e10", "0"},
	    {"9007199254740992", "9007199254740992"},
	    {"295147905179352830000", "295147905179352830000"},
	    {"1e21", "1e+21"},
	    {"1e20", "100000000000000000000"},
	    {"123456789012345678901", "123456789012345680000"},
	    {"5e-324", "5e-324"},
	    {"1.7976931348623157e308", "1.7976931348623157e+308"},
	    {"0.1", "0.1"},
	    {"-1.25", "-1.25"},
	    {"1.5e-10", "1.5e-10"},
	    {"12.5e3", "12500"},
	    {"1E2", "100"},
	    {"2.0", "2"},
	    {"100", "100"},
	    {"-7", "-7"},
	    {"0.000001234", "0.000001234"},
	    {"1.234e-7", "1.234e-7"},
	    {"1.5e300", "1.5e+300"},
	    {"0.30000000000000004", "0.30000000000000004"},
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		const char *got = canon_of(v[i].in);
		if (strcmp(got, v[i].out) != 0) {
			TEST_FAIL_("%s: \"%s\" != \"%s\"", v[i].in, got,
			           v[i].out);
			return;
		}
	}
}

TEST(non_finite_rejected)
{
	/* jansson refuses to hold NaN/Inf, so they cannot reach us. */
	ASSERT_TRUE(json_real(NAN) == NULL);
	ASSERT_TRUE(json_real(INFINITY) == NULL);
	inbox__buf b = INBOX__BUF_INIT;
	ASSERT_EQ(inbox__canon_append(&b, NULL), -1);
	inbox__buf_free(&b);
}

TEST(string_escapes)
{
	/* Every C0 control, DEL (literal), '/' (literal), non-ASCII literal. */
	ASSERT_STREQ(canon_of("\"\\u0000\\u0001\\u0007\\b\\t\\n\\u000b\\f\\r"
	                      "\\u000e\\u001f \\u007f/\\/\\u00e9\xc3\xa9\""),
	             "\"\\u0000\\u0001\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e"
	             "\\u001f \x7f//\xc3\xa9\xc3\xa9\"");
	ASSERT_STREQ(canon_of("\"\\u000B\\u001F\""), "\"\\u000b\\u001f\"");
	ASSERT_STREQ(canon_of("\"\\\"\\\\\""), "\"\\\"\\\\\"");
	/* U+2028 stays literal (JSON.stringify does too). */
	ASSERT_STREQ(canon_of("\"\\u2028\""), "\"\xe2\x80\xa8\"");
	ASSERT_STREQ(canon_of("\"\\ud83d\\ude00\""), "\"\xf0\x9f\x98\x80\"");
}

TEST(structure_and_whitespace)
{
	ASSERT_STREQ(canon_of(" { \"b\" : [ 1 , { \"z\" : null , \"a\" : "
	                      "true } ] , \"a\" : { } , \"c\" : [ ] } "),
	             "{\"a\":{},\"b\":[1,{\"a\":true,\"z\":null}],\"c\":[]}");
	ASSERT_STREQ(canon_of("[]"), "[]");
	ASSERT_STREQ(canon_of("{}"), "{}");
	ASSERT_STREQ(canon_of("\"\""), "\"\"");
	ASSERT_STREQ(canon_of("true"), "true");
	/* Prefixes sort first; NUL in a name (if jansson keeps it) too. */
	ASSERT_STREQ(canon_of("{\"ab\":1,\"a\":2,\"\":3,\"b\":4}"),
	             "{\"\":3,\"a\":2,\"ab\":1,\"b\":4}");
}

TEST(utf16_order_vs_utf8_order)
{
	/* U+FFFF (EF BF BF) is after U+10000 (F0 90 80 80) in UTF-16 order. */
	ASSERT_STREQ(canon_of("{\"\\uffff\":1,\"\\ud800\\udc00\":2,"
	                      "\"\\ud7ff\":3,\"\\ue000\":4,"
	                      "\"\\udbff\\udfff\":5}"),
	             "{\"\xed\x9f\xbf\":3,\"\xf0\x90\x80\x80\":2,"
	             "\"\xf4\x8f\xbf\xbf\":5,\"\xee\x80\x80\":4,"
	             "\"\xef\xbf\xbf\":1}");
	/* Same lead surrogate: ordered by the trail. */
	ASSERT_STREQ(canon_of("{\"\\ud83d\\ude01\":1,\"\\ud83d\\ude00\":2}"),
	             "{\"\xf0\x9f\x98\x80\":2,\"\xf0\x9f\x98\x81\":1}");
	/* Longer string with an equal prefix sorts after. */
	ASSERT_STREQ(canon_of("{\"\\ud83d\\ude00x\":1,\"\\ud83d\\ude00\":2}"),
	             "{\"\xf0\x9f\x98\x80\":2,\"\xf0\x9f\x98\x80x\":1}");
}

TEST(canon_is_idempotent)
{
	const char *in = "{\"z\":[1.0,2e0,-0,\"\\u00e9\\n\"],\"a\":{\"y\":1e21,"
	                 "\"x\":1e-7}}";
	char first[512];
	snprintf(first, sizeof(first), "%s", canon_of(in));
	ASSERT_STREQ(first, "{\"a\":{\"x\":1e-7,\"y\":1e+21},\"z\":[1,2,0,"
	                    "\"\xc3\xa9\\n\"]}");
	ASSERT_STREQ(canon_of(first), first);
}

TEST(canon_appends)
{
	inbox__buf b = INBOX__BUF_INIT;
	ASSERT_OK(inbox__buf_puts(&b, "prefix:"));
	json_t *v = json_pack("{s:i}", "k", 1);
	ASSERT_OK(inbox__canon_append(&b, v));
	json_decref(v);
	ASSERT_STREQ(b.data, "prefix:{\"k\":1}");
	inbox__buf_free(&b);
}

/* ---- value text ---- */

static const char *text_of(const char *json, int *rc)
{
	static char res[512];
	json_t *v;
	char err[128];
	if (inbox__json_parse(json, strlen(json), &v, err, sizeof(err)) < 0) {
		snprintf(res, sizeof(res), "<error: %s>", err);
		*rc = -9;
		return res;
	}
	inbox__buf b = INBOX__BUF_INIT;
	*rc = inbox__value_text(&b, v);
	snprintf(res, sizeof(res), "%s", b.data ? b.data : "(null)");
	inbox__buf_free(&b);
	json_decref(v);
	return res;
}

TEST(value_text)
{
	int rc;
	ASSERT_STREQ(text_of("\"he said \\\"hi\\\"\\n\"", &rc),
	             "he said \"hi\"\n");
	ASSERT_EQ(rc, 0);
	ASSERT_STREQ(text_of("9007199254740993", &rc), "9007199254740993");
	ASSERT_STREQ(text_of("-9223372036854775808", &rc),
	             "-9223372036854775808");
	ASSERT_STREQ(text_of("1.50", &rc), "1.5");
	ASSERT_STREQ(text_of("1e21", &rc), "1e+21");
	ASSERT_STREQ(text_of("2.0", &rc), "2");
	ASSERT_STREQ(text_of("true", &rc), "true");
	ASSERT_STREQ(text_of("false", &rc), "false");
	ASSERT_STREQ(text_of("{\"b\":1, \"a\":[true,null]}", &rc),
	             "{\"a\":[true,null],\"b\":1}");
	ASSERT_STREQ(text_of("\"\"", &rc), ""); /* data allocated */
	ASSERT_EQ(rc, 0);
	ASSERT_STREQ(text_of("null", &rc), "(null)");
	ASSERT_EQ(rc, 1);

	/* A string with NUL keeps every byte. */
	json_t *v = json_stringn("a\0b", 3);
	inbox__buf b = INBOX__BUF_INIT;
	ASSERT_OK(inbox__value_text(&b, v));
	json_decref(v);
	ASSERT_EQ(b.len, 3);
	ASSERT_TRUE(memcmp(b.data, "a\0b", 3) == 0);
	inbox__buf_free(&b);
}

/* ---- RFC 6901 pointers ---- */

static const char *rfc6901_doc =
    "{\"foo\": [\"bar\", \"baz\"], \"\": 0, \"a/b\": 1, \"c%d\": 2, "
    "\"e^f\": 3, \"g|h\": 4, \"i\\\\j\": 5, \"k\\\"l\": 6, \" \": 7, "
    "\"m~n\": 8}";

static const char *at(json_t *root, const char *ptr)
{
	static char res[256];
	json_t *v = inbox__pointer_get(root, ptr);
	if (!v)
		return "<absent>";
	inbox__buf b = INBOX__BUF_INIT;
	inbox__canon_append(&b, v);
	snprintf(res, sizeof(res), "%s", b.data);
	inbox__buf_free(&b);
	return res;
}

TEST(rfc6901_examples)
{
	json_t *d;
	ASSERT_OK(
	    inbox__json_parse(rfc6901_doc, strlen(rfc6901_doc), &d, NULL, 0));
	ASSERT_TRUE(inbox__pointer_get(d, "") == d);
	ASSERT_STREQ(at(d, "/foo"), "[\"bar\",\"baz\"]");
	ASSERT_STREQ(at(d, "/foo/0"), "\"bar\"");
	ASSERT_STREQ(at(d, "/"), "0");
	ASSERT_STREQ(at(d, "/a~1b"), "1");
	ASSERT_STREQ(at(d, "/c%d"), "2");
	ASSERT_STREQ(at(d, "/e^f"), "3");
	ASSERT_STREQ(at(d, "/g|h"), "4");
	ASSERT_STREQ(at(d, "/i\\j"), "5");
	ASSERT_STREQ(at(d, "/k\"l"), "6");
	ASSERT_STREQ(at(d, "/ "), "7");
	ASSERT_STREQ(at(d, "/m~0n"), "8");
	json_decref(d);
}

TEST(pointer_edge_cases)
{
	const char *doc = "{\"foo\":[\"bar\",\"baz\",{\"x\":[10,20]}],"
	                  "\"~1\":\"tilde-one\",\"/\":\"slash\","
	                  "\"n\":null,\"s\":\"str\",\"01\":\"zero-one\"}";
	json_t *d;
	ASSERT_OK(inbox__json_parse(doc, strlen(doc), &d, NULL, 0));
	ASSERT_STREQ(at(d, "/foo/2/x/1"), "20");
	ASSERT_STREQ(at(d, "/foo/1"), "\"baz\"");
	ASSERT_STREQ(at(d, "/~01"), "\"tilde-one\""); /* ~0 then 1 */
	ASSERT_STREQ(at(d, "/~1"), "\"slash\"");
	ASSERT_STREQ(at(d, "/n"), "null");
	ASSERT_STREQ(at(d, "/01"), "\"zero-one\""); /* object: any name */
	ASSERT_STREQ(at(d, "/foo/-"), "<absent>");
	ASSERT_STREQ(at(d, "/foo/3"), "<absent>");
	ASSERT_STREQ(at(d, "/foo/01"), "<absent>"); /* leading zero */
	ASSERT_STREQ(at(d, "/foo/+1"), "<absent>");
	ASSERT_STREQ(at(d, "/foo/1a"), "<absent>");
	ASSERT_STREQ(at(d, "/foo/"), "<absent>");
	ASSERT_STREQ(at(d, "/foo/99999999999999999999999"), "<absent>");
	ASSERT_STREQ(at(d, "/s/0"), "<absent>"); /* into a scalar */
	ASSERT_STREQ(at(d, "/missing"), "<absent>");
	ASSERT_STREQ(at(d, "/missing/deeper"), "<absent>");
	ASSERT_STREQ(at(d, "foo"), "<absent>");   /* no leading slash */
	ASSERT_STREQ(at(d, "/~2"), "<absent>");   /* bad escape */
	ASSERT_STREQ(at(d, "/foo~"), "<absent>"); /* dangling ~ */
	ASSERT_TRUE(inbox__pointer_get(d, NULL) == NULL);
	ASSERT_TRUE(inbox__pointer_get(NULL, "") == NULL);
	json_decref(d);

	ASSERT_EQ(inbox__pointer_valid(""), 1);
	ASSERT_EQ(inbox__pointer_valid("/"), 1);
	ASSERT_EQ(inbox__pointer_valid("/a~0~1/-"), 1);
	ASSERT_EQ(inbox__pointer_valid("a"), 0);
	ASSERT_EQ(inbox__pointer_valid("/a~2"), 0);
	ASSERT_EQ(inbox__pointer_valid("/a~"), 0);
	ASSERT_EQ(inbox__pointer_valid("#/a"), 0);
	ASSERT_EQ(inbox__pointer_valid(NULL), 0);
}

/* ---- SHA-256 ---- */

TEST(sha256_vectors)
{
	char hex[65];
	inbox__sha256_hex("", 0, hex);
	ASSERT_STREQ(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934c"
	                  "a495991b7852b855");
	inbox__sha256_hex("abc", 3, hex);
	ASSERT_STREQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9c"
	                  "b410ff61f20015ad");
	inbox__sha256_hex(NULL, 0, hex);
	ASSERT_EQ(strlen(hex), 64);
}

int main(void)
{
	RUN(utf8_valid);
	RUN(parse_errors);
	RUN(parse_scalars_and_nul);
	RUN(parse_big_integer_as_real);
	RUN(rfc8785_values_example);
	RUN(rfc8785_sorting_example);
	RUN(jcs_testdata);
	RUN(rfc8785_appendix_b_numbers);
	RUN(number_spellings);
	RUN(non_finite_rejected);
	RUN(string_escapes);
	RUN(structure_and_whitespace);
	RUN(utf16_order_vs_utf8_order);
	RUN(canon_is_idempotent);
	RUN(canon_appends);
	RUN(value_text);
	RUN(rfc6901_examples);
	RUN(pointer_edge_cases);
	RUN(sha256_vectors);
	return test_summary();
}
