/* Key templates: compile errors, rendering, limits. */
#include <inbox/inbox.h>

#include "base/json.h"
#include "test.h"

static char err[256];

/* Compile and render tmpl against doc; returns the key or "<error: ...>"
 * (static buffer). */
static const char *render(const char *tmpl, const char *doc, const char *msg_id)
{
	static char res[1024];
	inbox__keytmpl *t;
	if (inbox__keytmpl_compile(&t, tmpl, err, sizeof(err)) < 0) {
		snprintf(res, sizeof(res), "<compile: %s>", err);
		return res;
	}
	json_t *root = NULL;
	if (doc &&
	    inbox__json_parse(doc, strlen(doc), &root, err, sizeof(err)) < 0) {
		inbox__keytmpl_free(t);
		snprintf(res, sizeof(res), "<parse: %s>", err);
		return res;
	}
	inbox__buf b = INBOX__BUF_INIT;
	if (inbox__keytmpl_render(t, root, msg_id, &b, err, sizeof(err)) < 0)
		snprintf(res, sizeof(res), "<render: %s>", err);
	else
		snprintf(res, sizeof(res), "%s", b.data);
	inbox__buf_free(&b);
	json_decref(root);
	inbox__keytmpl_free(t);
	return res;
}

static const char *compile_err(const char *tmpl)
{
	inbox__keytmpl *t = NULL;
	if (inbox__keytmpl_compile(&t, tmpl, err, sizeof(err)) == 0) {
		inbox__keytmpl_free(t);
		return "<compiled>";
	}
	if (t != NULL)
		return "<out not NULL on error>";
	return err;
}

static const char *doc =
    "{\"id\":\"m-1\",\"data\":{\"orderId\":\"o-42\",\"n\":123,"
    "\"big\":9007199254740993,\"r\":1.50,\"e\":1e21,\"t\":true,"
    "\"o\":{},\"a\":[1],\"z\":null,\"s\":\"\",\"nul\":\"a\\u0000b\","
    "\"u\":\"\\u00e9\\u20ac\"},\"a/b\":\"slash\",\"arr\":[\"x\",\"y\"]}";

TEST(defaults_to_id)
{
	ASSERT_STREQ(render(NULL, doc, "abc"), "abc");
	ASSERT_STREQ(render("", doc, "abc"), "abc");
	ASSERT_STREQ(render("{id}", NULL, "abc"), "abc");
	inbox__keytmpl *t;
	ASSERT_OK(inbox__keytmpl_compile(&t, NULL, err, sizeof(err)));
	ASSERT_EQ(inbox__keytmpl_uses_id(t), 1);
	inbox__keytmpl_free(t);
	ASSERT_OK(inbox__keytmpl_compile(&t, "x:{/id}", err, sizeof(err)));
	ASSERT_EQ(inbox__keytmpl_uses_id(t), 0);
	inbox__keytmpl_free(t);
	ASSERT_EQ(inbox__keytmpl_uses_id(NULL), 0);
	inbox__keytmpl_free(NULL);
}

TEST(render_values)
{
	ASSERT_STREQ(render("create-invoice:{/data/orderId}", doc, NULL),
	             "create-invoice:o-42");
	ASSERT_STREQ(render("{id}/{/data/n}", doc, "m"), "m/123");
	ASSERT_STREQ(render("{/data/big}", doc, NULL), "9007199254740993");
	ASSERT_STREQ(render("{/data/r}", doc, NULL), "1.5");
	ASSERT_STREQ(render("{/data/e}", doc, NULL), "1e+21");
	ASSERT_STREQ(render("{/data/u}", doc, NULL), "\xc3\xa9\xe2\x82\xac");
	ASSERT_STREQ(render("{/a~1b}-{/arr/1}", doc, NULL), "slash-y");
	ASSERT_STREQ(render("{/data/s}x", doc, NULL), "x");
	ASSERT_STREQ(render("plain", doc, NULL), "plain");
	ASSERT_STREQ(render("{/id}{/id}", doc, NULL), "m-1m-1");
}

TEST(literal_braces)
{
	ASSERT_STREQ(render("{{{id}}}", doc, "7"), "{7}");
	ASSERT_STREQ(render("a{{b}}c", doc, NULL), "a{b}c");
	ASSERT_STREQ(render("{{}}", doc, NULL), "{}");
	ASSERT_STREQ(render("{{id}}", doc, NULL), "{id}");
}

TEST(compile_errors)
{
	ASSERT_STREQ(compile_err("order:{/data/id"),
	             "key template: unclosed '{' at byte 6");
	ASSERT_STREQ(compile_err("order:}x"),
	             "key template: unmatched '}' at byte 6 (write \"}}\" "
	             "for a literal brace)");
	ASSERT_STREQ(compile_err("k:{}"),
	             "key template: empty placeholder {} at byte 2");
	ASSERT_CONTAINS(compile_err("k:{data}"),
	                "invalid placeholder {data} at byte 2");
	ASSERT_CONTAINS(compile_err("k:{data}"), "{id}");
	ASSERT_CONTAINS(compile_err("{/a~2}"),
	                "invalid JSON pointer {/a~2} at byte 0");
	ASSERT_CONTAINS(compile_err("{/a{b}"), "'{' inside the placeholder");
	ASSERT_CONTAINS(compile_err("{ID}"), "invalid placeholder {ID}");
	ASSERT_CONTAINS(compile_err("{ id}"), "invalid placeholder");
	ASSERT_CONTAINS(compile_err("{"), "unclosed '{' at byte 0");
	ASSERT_CONTAINS(compile_err("}"), "unmatched '}' at byte 0");
	ASSERT_CONTAINS(compile_err("a}}}"), "unmatched '}' at byte 3");
	ASSERT_CONTAINS(compile_err("k\xff"), "not valid UTF-8");
	/* A short error buffer never ends inside a character. */
	char small[41]; /* cuts the third e-acute in half */
	inbox__keytmpl *t = NULL;
	ASSERT_EQ(inbox__keytmpl_compile(&t,
	                                 "{\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	                                 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9}",
	                                 small, sizeof(small)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(inbox__utf8_valid(small, strlen(small)));
	ASSERT_CONTAINS(small, "invalid placeholder");
	/* Valid edge: the whole-document pointer is not allowed as "{}" but
	 * "{/}" (the member named "") is. */
	ASSERT_STREQ(compile_err("{/}"), "<compiled>");
}

TEST(render_errors)
{
	ASSERT_STREQ(render("x:{/data/missing}", doc, NULL),
	             "<render: missing key field /data/missing>");
	ASSERT_STREQ(render("x:{/data/z}", doc, NULL),
	             "<render: missing key field /data/z>");
	ASSERT_STREQ(render("x:{/data/t}", doc, NULL),
	             "<render: key field /data/t is not a string or number>");
	ASSERT_STREQ(render("x:{/data/o}", doc, NULL),
	             "<render: key field /data/o is not a string or number>");
	ASSERT_STREQ(render("x:{/data/a}", doc, NULL),
	             "<render: key field /data/a is not a string or number>");
	ASSERT_STREQ(render("x:{/arr/-}", doc, NULL),
	             "<render: missing key field /arr/->");
	ASSERT_STREQ(render("{id}", doc, NULL), "<render: missing message id>");
	ASSERT_STREQ(render("{/data/s}", doc, NULL), "<render: empty key>");
	ASSERT_STREQ(render("{id}", doc, ""), "<render: empty key>");
	ASSERT_STREQ(
	    render("{/data/nul}", doc, NULL),
	    "<render: U+0000 in key field /data/nul: cannot be stored as "
	    "text>");
	ASSERT_STREQ(render("{id}", doc, "bad\xc0\xafid"),
	             "<render: key is not valid UTF-8>");
	ASSERT_STREQ(render("x:{/data/orderId}", NULL, NULL),
	             "<render: missing key field /data/orderId>");
}

TEST(key_length_cap)
{
	char id[600];
	memset(id, 'k', 512);
	id[512] = '\0';
	ASSERT_EQ(strlen(render("{id}", doc, id)), 512);
	ASSERT_STREQ(render("x{id}", doc, id),
	             "<render: key longer than 512 bytes>");
	memset(id, 'k', 599);
	id[599] = '\0';
	ASSERT_STREQ(render("{id}", doc, id),
	             "<render: key longer than 512 bytes>");
}

TEST(render_resets_output)
{
	inbox__keytmpl *t;
	ASSERT_OK(inbox__keytmpl_compile(&t, "k:{id}", err, sizeof(err)));
	inbox__buf b = INBOX__BUF_INIT;
	ASSERT_OK(inbox__buf_puts(&b, "stale contents"));
	ASSERT_OK(inbox__keytmpl_render(t, NULL, "1", &b, err, sizeof(err)));
	ASSERT_STREQ(b.data, "k:1");
	ASSERT_OK(inbox__keytmpl_render(t, NULL, "22", &b, err, sizeof(err)));
	ASSERT_STREQ(b.data, "k:22");
	ASSERT_EQ(b.len, 4);
	inbox__buf_free(&b);
	inbox__keytmpl_free(t);
}

int main(void)
{
	RUN(defaults_to_id);
	RUN(render_values);
	RUN(literal_braces);
	RUN(compile_errors);
	RUN(render_errors);
	RUN(key_length_cap);
	RUN(render_resets_output);
	return test_summary();
}
