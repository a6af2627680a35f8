/* JSON Schema validation: compile errors, violation messages, an event
 * contract, and a consumer that dead-letters violations before any effect.
 * (The official suite runs in tests/schema-suite/.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <inbox/inbox.h>

#include "base/json.h"
#include "schema/schema.h"
#include "test.h"

/* ---- helpers --------------------------------------------------------- */

static char err[600];

/* Compile; returns the rc, the reason in err. */
static int compile(const char *schema, inbox_schema **out)
{
	err[0] = '\0';
	return inbox_schema_open(out, schema, strlen(schema), err, sizeof(err));
}

/* The compile error of a schema that must be refused ("" if it compiled). */
static const char *refusal(const char *schema)
{
	inbox_schema *s = NULL;
	int rc = compile(schema, &s);
	if (rc == INBOX_OK) {
		inbox_schema_close(s);
		return "";
	}
	if (rc != INBOX_ERR_INVALID || s != NULL)
		return "(wrong rc or handle)";
	return err;
}

static char reason[600];

/* 1 valid, 0 invalid (reason set), -1 error. */
static int check(inbox_schema *s, const char *json)
{
	int valid = -1;
	reason[0] = '\0';
	if (inbox_schema_validate(s, json, strlen(json), &valid, reason,
	                          sizeof(reason)) != INBOX_OK)
		return -1;
	return valid;
}

/* Violation reason of `json` against `schema` ("VALID" if it passes). */
static const char *why(const char *schema, const char *json)
{
	inbox_schema *s = NULL;
	if (compile(schema, &s) != INBOX_OK) {
		snprintf(reason, sizeof(reason), "SCHEMA REFUSED: %s", err);
		return reason;
	}
	int v = check(s, json);
	inbox_schema_close(s);
	if (v == 1)
		return "VALID";
	if (v < 0)
		return "ERROR";
	return reason;
}

/* ---- compile errors ------------------------------------------------------ */

TEST(unsupported_keyword_is_refused_with_its_place)
{
	ASSERT_STREQ(refusal("{\"properties\": {\"x\": {\"dependentRequired\":"
	                     " {\"a\": [\"b\"]}}}}"),
	             "schema uses unsupported keyword \"dependentRequired\" "
	             "at /properties/x");
	ASSERT_STREQ(refusal("{\"contentMediaType\": \"application/json\"}"),
	             "schema uses unsupported keyword \"contentMediaType\" at "
	             "(root)");
	/* a typo is an unknown keyword too, never ignored */
	ASSERT_STREQ(refusal("{\"type\": \"object\", \"require\": [\"id\"]}"),
	             "schema uses unsupported keyword \"require\" at (root)");
	/* even inside a definition nothing refers to */
	ASSERT_STREQ(refusal("{\"definitions\": {\"unused\": {\"$anchor\": "
	                     "\"x\"}}}"),
	             "schema uses unsupported keyword \"$anchor\" at "
	             "/definitions/unused");
	/* deep inside applicators and arrays */
	ASSERT_STREQ(
	    refusal("{\"anyOf\": [{}, {\"items\": [{}, {\"unevaluatedItems\": "
	            "false}]}]}"),
	    "schema uses unsupported keyword \"unevaluatedItems\" at "
	    "/anyOf/1/items/1");
}

TEST(unknown_format_is_refused)
{
	ASSERT_CONTAINS(refusal("{\"properties\": {\"tel\": {\"format\": "
	                        "\"phone\"}}}"),
	                "unknown format \"phone\" at /properties/tel");
	ASSERT_CONTAINS(refusal("{\"format\": \"idn-email\"}"),
	                "unknown format \"idn-email\"");
	ASSERT_CONTAINS(refusal("{\"format\": 7}"),
	                "invalid schema at /format: must be a string");
}

TEST(remote_and_dangling_refs_are_refused)
{
	ASSERT_CONTAINS(refusal("{\"items\": {\"$ref\": "
	                        "\"http://example.com/money.json\"}}"),
	                "remote $ref \"http://example.com/money.json\" at "
	                "/items is not supported");
	ASSERT_CONTAINS(refusal("{\"$ref\": \"money.json#/definitions/eur\"}"),
	                "remote $ref");
	ASSERT_CONTAINS(refusal("{\"$ref\": \"#/definitions/nope\"}"),
	                "$ref \"#/definitions/nope\" at (root) points to "
	                "nothing in the schema");
	ASSERT_CONTAINS(refusal("{\"$ref\": 5}"), "$ref: must be a string");
	/* a $ref to the document's own $id is local */
	ASSERT_STREQ(refusal("{\"$id\": \"https://example.com/order.json\", "
	                     "\"properties\": {\"next\": {\"$ref\": "
	                     "\"order.json\"}}}"),
	             "");
	ASSERT_STREQ(refusal("{\"$id\": \"https://example.com/order.json\", "
	                     "\"properties\": {\"next\": {\"$ref\": "
	                     "\"https://example.com/order.json#/definitions/"
	                     "a\"}}, \"definitions\": {\"a\": {}}}"),
	             "");
}

/* The fragment is percent-decoded before it is read as a JSON pointer:
 * "%25" is '%', "%20" a space; a malformed escape or an escaped NUL is
 * refused, not cut short. */
TEST(ref_fragments_are_percent_decoded)
{
	ASSERT_CONTAINS(
	    why("{\"definitions\": {\"a%b c\": {\"type\": "
	        "\"string\"}}, \"$ref\": \"#/definitions/a%25b%20c\"}",
	        "5"),
	    "type: expected string, got integer 5");
	ASSERT_STREQ(why("{\"definitions\": {\"a%b c\": {\"type\": "
	                 "\"string\"}}, \"$ref\": \"#/definitions/a%25b%20c\"}",
	                 "\"x\""),
	             "VALID");
	ASSERT_CONTAINS(refusal("{\"$ref\": \"#/definitions/a%zz\"}"),
	                "the fragment is not a JSON pointer");
	ASSERT_CONTAINS(refusal("{\"$ref\": \"#/definitions/a%2\"}"),
	                "the fragment is not a JSON pointer");
	ASSERT_CONTAINS(refusal("{\"definitions\": {\"a\": {}}, "
	                        "\"$ref\": \"#/definitions/a%00b\"}"),
	                "the fragment is not a JSON pointer");
}

TEST(keywords_beside_ref_are_refused)
{
	ASSERT_CONTAINS(
	    refusal("{\"definitions\": {\"n\": {\"type\": \"number\"}}, "
	            "\"properties\": {\"x\": {\"$ref\": \"#/definitions/n\", "
	            "\"minimum\": 0}}}"),
	    "keyword \"minimum\" beside \"$ref\" at /properties/x");
	/* annotations and definitions may stand beside it */
	ASSERT_STREQ(refusal("{\"$schema\": "
	                     "\"http://json-schema.org/draft-07/schema#\", "
	                     "\"$id\": \"urn:x\", \"title\": \"t\", \"$ref\": "
	                     "\"#/definitions/a\", \"definitions\": {\"a\": "
	                     "{\"type\": \"object\"}}}"),
	             "");
}

TEST(ref_cycles_without_descent_are_refused)
{
	ASSERT_CONTAINS(refusal("{\"$ref\": \"#\"}"), "$ref cycle");
	ASSERT_CONTAINS(refusal("{\"definitions\": {\"a\": {\"$ref\": "
	                        "\"#/definitions/b\"}, \"b\": {\"allOf\": "
	                        "[{\"$ref\": \"#/definitions/a\"}]}}}"),
	                "$ref cycle");
	ASSERT_CONTAINS(refusal("{\"anyOf\": [{\"type\": \"string\"}, "
	                        "{\"$ref\": \"#\"}]}"),
	                "$ref cycle");
	/* recursion that descends into the instance is fine */
	inbox_schema *s = NULL;
	ASSERT_OK(compile("{\"type\": \"object\", \"properties\": {\"child\":"
	                  " {\"$ref\": \"#\"}, \"n\": {\"type\": "
	                  "\"integer\"}}}",
	                  &s));
	ASSERT_EQ(check(s, "{\"child\": {\"child\": {\"n\": 1}}}"), 1);
	ASSERT_EQ(check(s, "{\"child\": {\"child\": {\"n\": \"1\"}}}"), 0);
	ASSERT_STREQ(reason, "schema violation at /child/child/n: type: "
	                     "expected integer, got string \"1\"");
	inbox_schema_close(s);
}

TEST(invalid_regex_is_refused)
{
	ASSERT_CONTAINS(refusal("{\"properties\": {\"id\": {\"pattern\": "
	                        "\"^(ord_\"}}}"),
	                "invalid regular expression at /properties/id/pattern:"
	                " missing closing parenthesis");
	ASSERT_CONTAINS(refusal("{\"patternProperties\": {\"[a-\": {}}}"),
	                "invalid regular expression at /patternProperties");
	/* PCRE-only syntax would not mean what it means in ECMA 262 */
	ASSERT_CONTAINS(refusal("{\"pattern\": \"^abc\\\\Z\"}"),
	                "\\Z is not ECMA 262 syntax");
	ASSERT_CONTAINS(refusal("{\"pattern\": \"(?i)abc\"}"),
	                "\"(?i\" is not ECMA 262 syntax");
	ASSERT_CONTAINS(refusal("{\"pattern\": \"a++\"}"), "possessive");
	ASSERT_CONTAINS(refusal("{\"pattern\": \"[[:alpha:]]\"}"), "POSIX");
	/* ECMA constructs are accepted */
	ASSERT_STREQ(
	    refusal("{\"pattern\": "
	            "\"^(?:a|b)(?=c)(?!d)(?<n>e)\\\\u0041{2,3}?[^]$\"}"),
	    "");
}

TEST(wrong_keyword_values_are_refused)
{
	ASSERT_CONTAINS(refusal("{\"type\": \"text\"}"),
	                "unknown type \"text\"");
	ASSERT_CONTAINS(refusal("{\"type\": []}"), "at least one type");
	ASSERT_CONTAINS(refusal("{\"type\": [\"string\", \"string\"]}"),
	                "lists a type twice");
	ASSERT_CONTAINS(refusal("{\"minLength\": -1}"),
	                "invalid schema at /minLength: must be a non-negative "
	                "integer");
	ASSERT_CONTAINS(refusal("{\"maxItems\": 1.5}"), "non-negative integer");
	ASSERT_STREQ(refusal("{\"maxItems\": 2.0}"), ""); /* 2.0 is 2 */
	ASSERT_CONTAINS(refusal("{\"minLength\": \"3\"}"), "non-negative");
	ASSERT_CONTAINS(refusal("{\"required\": \"id\"}"),
	                "invalid schema at /required: must be an array of "
	                "strings");
	ASSERT_CONTAINS(refusal("{\"required\": [\"id\", \"id\"]}"),
	                "lists a name twice");
	ASSERT_CONTAINS(refusal("{\"enum\": 3}"), "must be an array");
	ASSERT_CONTAINS(refusal("{\"multipleOf\": 0}"), "greater than 0");
	ASSERT_CONTAINS(refusal("{\"exclusiveMinimum\": true}"),
	                "draft 4 boolean form");
	ASSERT_CONTAINS(refusal("{\"properties\": {\"a\": 3}}"),
	                "invalid schema at /properties/a: a schema must be an "
	                "object or a boolean, not 3");
	ASSERT_CONTAINS(refusal("{\"allOf\": []}"), "non-empty array");
	ASSERT_CONTAINS(refusal("{\"title\": 1}"), "must be a string");
	ASSERT_CONTAINS(refusal("{\"uniqueItems\": 1}"), "true or false");
	ASSERT_CONTAINS(refusal("{\"$schema\": "
	                        "\"http://json-schema.org/draft-04/schema#\"}"),
	                "only draft 7");
	ASSERT_CONTAINS(refusal("{\"$id\": \"urn:a\", \"definitions\": {\"b\": "
	                        "{\"$id\": \"urn:a\"}}}"),
	                "duplicate $id");
	ASSERT_CONTAINS(refusal("[1]"), "a schema must be an object or a "
	                                "boolean");
	ASSERT_CONTAINS(refusal("{\"type\": "), "schema is not valid JSON");
	ASSERT_CONTAINS(refusal("{\"a\": 1, \"a\": 2}"), "duplicate");
}

TEST(open_arguments)
{
	inbox_schema *s = (inbox_schema *)1;
	ASSERT_EQ(inbox_schema_open(NULL, "{}", 2, NULL, 0), INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_schema_open(&s, NULL, 0, NULL, 0), INBOX_ERR_INVALID);
	ASSERT_TRUE(s == NULL);
	/* errors without an err buffer */
	ASSERT_EQ(inbox_schema_open(&s, "{\"x-y\": 1}", 10, NULL, 0),
	          INBOX_ERR_INVALID);
	ASSERT_OK(inbox_schema_open(&s, "true", 4, NULL, 0));
	int valid = 0;
	ASSERT_OK(inbox_schema_validate(s, "[1,2]", 5, &valid, NULL, 0));
	ASSERT_EQ(valid, 1);
	ASSERT_EQ(
	    inbox_schema_validate(s, "[1,", 3, &valid, reason, sizeof(reason)),
	    INBOX_ERR_INVALID);
	ASSERT_CONTAINS(reason, "malformed JSON");
	inbox_schema_close(s);
	inbox_schema_close(NULL);
}

/* ---- violations ------------------------------------------------------------
 */

TEST(messages_name_the_path_and_keyword)
{
	ASSERT_STREQ(why("{\"type\": \"object\"}", "[]"),
	             "schema violation at (root): type: expected object, got "
	             "array []");
	ASSERT_STREQ(why("{\"properties\": {\"data\": {\"properties\": "
	                 "{\"totalCents\": {\"minimum\": 0}}}}}",
	                 "{\"data\": {\"totalCents\": -5}}"),
	             "schema violation at /data/totalCents: minimum: -5 is "
	             "less than 0");
	ASSERT_STREQ(why("{\"properties\": {\"data\": {\"required\": "
	                 "[\"currency\"]}}}",
	                 "{\"data\": {}}"),
	             "schema violation at /data: required: missing property "
	             "\"currency\"");
	ASSERT_STREQ(why("{\"additionalProperties\": false, \"properties\": "
	                 "{\"a\": {}}}",
	                 "{\"a\": 1, \"extra\": 2}"),
	             "schema violation at (root): additionalProperties: "
	             "property \"extra\" is not allowed");
	ASSERT_STREQ(why("{\"items\": {\"type\": \"integer\"}}", "[1, 2, 2.5]"),
	             "schema violation at /2: type: expected integer, got "
	             "number 2.5");
	/* RFC 6901 escaping of ~ and / in member names */
	ASSERT_STREQ(why("{\"additionalProperties\": {\"type\": \"string\"}}",
	                 "{\"a/b~c\": 1}"),
	             "schema violation at /a~1b~0c: type: expected string, got "
	             "integer 1");
	ASSERT_STREQ(why("{\"enum\": [\"EUR\", \"USD\"]}", "\"EURO\""),
	             "schema violation at (root): enum: \"EURO\" is not one of "
	             "[\"EUR\", \"USD\"]");
	ASSERT_STREQ(why("{\"const\": {\"v\": 1}}", "{\"v\": 2}"),
	             "schema violation at (root): const: {\"v\": 2} is not "
	             "{\"v\": 1}");
	ASSERT_STREQ(why("{\"pattern\": \"^ord_[0-9]+$\"}", "\"ord_x\""),
	             "schema violation at (root): pattern: \"ord_x\" does not "
	             "match \"^ord_[0-9]+$\"");
	ASSERT_STREQ(why("{\"exclusiveMaximum\": 10}", "10"),
	             "schema violation at (root): exclusiveMaximum: 10 is not "
	             "less than 10");
	ASSERT_STREQ(why("{\"multipleOf\": 0.01}", "19.999"),
	             "schema violation at (root): multipleOf: 19.999 is not a "
	             "multiple of 0.01");
	ASSERT_STREQ(why("{\"multipleOf\": 0.01}", "19.99"), "VALID");
	ASSERT_STREQ(why("{\"maxItems\": 1}", "[1, 2]"),
	             "schema violation at (root): maxItems: has 2 items, more "
	             "than 1");
	ASSERT_STREQ(why("{\"uniqueItems\": true}", "[1, {\"a\": 1}, 1.0]"),
	             "schema violation at (root): uniqueItems: items 0 and 2 "
	             "are equal");
	ASSERT_STREQ(why("{\"properties\": {\"at\": {\"format\": "
	                 "\"date-time\"}}}",
	                 "{\"at\": \"2024-02-30T10:00:00Z\"}"),
	             "schema violation at /at: format: "
	             "\"2024-02-30T10:00:00Z\" is not a valid date-time");
	ASSERT_STREQ(why("{\"properties\": {\"x\": false}}", "{\"x\": 1}"),
	             "schema violation at /x: false: no value is allowed here "
	             "(the schema is false)");
	ASSERT_STREQ(
	    why("{\"oneOf\": [{\"minimum\": 0}, {\"maximum\": 10}]}", "5"),
	    "schema violation at (root): oneOf: matches schemas 0 and "
	    "1, but must match exactly one");
	ASSERT_STREQ(why("{\"anyOf\": [{\"type\": \"string\"}, {\"type\": "
	                 "\"null\"}]}",
	                 "1"),
	             "schema violation at (root): anyOf: matches none of the 2 "
	             "schemas");
	ASSERT_STREQ(why("{\"dependencies\": {\"card\": [\"billing\"]}}",
	                 "{\"card\": 1}"),
	             "schema violation at (root): dependencies: property "
	             "\"card\" requires property \"billing\"");
	ASSERT_STREQ(why("{\"if\": {\"properties\": {\"kind\": {\"const\": "
	                 "\"refund\"}}}, \"then\": {\"required\": "
	                 "[\"refundOf\"]}}",
	                 "{\"kind\": \"refund\"}"),
	             "schema violation at (root): required: missing property "
	             "\"refundOf\"");
	ASSERT_STREQ(why("{\"propertyNames\": {\"pattern\": \"^[a-z]+$\"}}",
	                 "{\"ok\": 1, \"Bad\": 2}"),
	             "schema violation at (root): propertyNames: property name "
	             "\"Bad\" is not allowed");
	ASSERT_STREQ(why("{\"contains\": {\"const\": 3}}", "[1, 2]"),
	             "schema violation at (root): contains: no item matches");
	ASSERT_STREQ(
	    why("{\"items\": [{}, {}], \"additionalItems\": false}",
	        "[1, 2, 3]"),
	    "schema violation at (root): additionalItems: has 3 items, "
	    "at most 2 allowed");
	ASSERT_STREQ(why("{\"not\": {\"type\": \"null\"}}", "null"),
	             "schema violation at (root): not: matches the schema it "
	             "must not match");
}

TEST(draft7_semantics)
{
	/* integer: a number with a zero fractional part */
	ASSERT_STREQ(why("{\"type\": \"integer\"}", "1.0"), "VALID");
	ASSERT_STREQ(why("{\"type\": \"integer\"}", "1e2"), "VALID");
	ASSERT_CONTAINS(why("{\"type\": \"integer\"}", "1.5"), "type:");
	/* beyond int64 (parsed as a double) */
	ASSERT_STREQ(why("{\"type\": \"integer\", \"minimum\": 0}",
	                 "123456789012345678901234567890"),
	             "VALID");
	/* const and enum compare numbers by value */
	ASSERT_STREQ(why("{\"const\": 1}", "1.0"), "VALID");
	ASSERT_STREQ(
	    why("{\"enum\": [[1, {\"a\": 2}]]}", "[1.0, {\"a\": 2.0}]"),
	    "VALID");
	/* lengths count code points, not bytes: "é" is 2 bytes, "😀" 4 */
	ASSERT_STREQ(why("{\"maxLength\": 1}", "\"\\u00e9\""), "VALID");
	ASSERT_STREQ(why("{\"maxLength\": 1}", "\"\\ud83d\\ude00\""), "VALID");
	ASSERT_STREQ(why("{\"minLength\": 2}", "\"\\u00e9\""),
	             "schema violation at (root): minLength: \"\u00e9\" has 1 "
	             "characters, fewer than 2");
	/* patterns are not anchored; \d is ASCII as in ECMA 262 */
	ASSERT_STREQ(why("{\"pattern\": \"b\"}", "\"abc\""), "VALID");
	ASSERT_CONTAINS(why("{\"pattern\": \"^\\\\d+$\"}", "\"\\u0661\""),
	                "pattern:");
	/* $ matches only at the very end (no final newline) */
	ASSERT_CONTAINS(why("{\"pattern\": \"^a$\"}", "\"a\\n\""), "pattern:");
	/* keywords apply to their types only */
	ASSERT_STREQ(why("{\"minimum\": 5, \"minLength\": 9, \"required\": "
	                 "[\"x\"], \"format\": \"date\"}",
	                 "\"abc\""),
	             "schema violation at (root): minLength: \"abc\" has 3 "
	             "characters, fewer than 9");
	ASSERT_STREQ(why("{\"format\": \"date\"}", "20240101"), "VALID");
	/* then/else without if, additionalItems without tuple items: no
	 * effect, as the specification says */
	ASSERT_STREQ(why("{\"then\": false, \"else\": false}", "1"), "VALID");
	ASSERT_STREQ(
	    why("{\"items\": {}, \"additionalItems\": false}", "[1, 2]"),
	    "VALID");
}

TEST(formats)
{
	static const struct {
		const char *format, *value;
		int valid;
	} cases[] = {
	    {"uuid", "123e4567-e89b-12d3-a456-426614174000", 1},
	    {"uuid", "123E4567-E89B-12D3-A456-426614174000", 1},
	    {"uuid", "123e4567e89b12d3a456426614174000", 0},
	    {"uuid", "123e4567-e89b-12d3-a456-42661417400g", 0},
	    {"date-time", "2024-02-29T23:59:60.5+01:00", 1},
	    {"date-time", "2023-02-29T10:00:00Z", 0},
	    {"date-time", "2024-01-01T10:00:00", 0},
	    {"date-time", "2024-01-01 10:00:00Z", 0},
	    {"date", "2000-02-29", 1},
	    {"date", "1900-02-29", 0},
	    {"time", "23:59:59z", 1},
	    {"time", "24:00:00Z", 0},
	    {"email", "a.b+tag@example.co.uk", 1},
	    {"email", "a..b@example.com", 0},
	    {"email", "ab@", 0},
	    {"email", "ab@[192.0.2.1]", 1},
	    {"ipv4", "192.0.2.1", 1},
	    {"ipv4", "192.0.2.01", 0},
	    {"ipv6", "2001:db8::1", 1},
	    {"ipv6", "2001:db8::g", 0},
	    {"uri", "https://example.com/a?b=c#d", 1},
	    {"uri", "/relative", 0},
	    {"uri", "http://exa mple.com", 0},
	    {"uri-reference", "../a/b?c", 1},
	    {"hostname", "example.com", 1},
	    {"hostname", "ex_ample.com", 0},
	    {"json-pointer", "/a~1b/0", 1},
	    {"json-pointer", "a", 0},
	    {"relative-json-pointer", "0#", 1},
	    {"regex", "^[a-z]+$", 1},
	    {"regex", "(", 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char schema[100], json[200];
		snprintf(schema, sizeof(schema), "{\"format\": \"%s\"}",
		         cases[i].format);
		snprintf(json, sizeof(json), "\"%s\"", cases[i].value);
		const char *r = why(schema, json);
		if ((strcmp(r, "VALID") == 0) != cases[i].valid) {
			TEST_FAIL_("format %s, %s: expected %s, got %s",
			           cases[i].format, cases[i].value,
			           cases[i].valid ? "valid" : "invalid", r);
			return;
		}
	}
}

typedef struct collected {
	char lines[8][300];
	int n;
} collected;

static int collect(const char *path, const char *kw, const char *spath,
                   const char *msg, void *payload)
{
	collected *c = payload;
	if (c->n < 8)
		snprintf(c->lines[c->n++], sizeof(c->lines[0]), "%s|%s|%s|%s",
		         path, kw, spath, msg);
	return 0;
}

TEST(validate_all_reports_every_violation)
{
	inbox_schema *s = NULL;
	ASSERT_OK(
	    compile("{\"type\": \"object\", \"required\": [\"id\", "
	            "\"data\"], \"properties\": {\"data\": {\"properties\":"
	            " {\"n\": {\"type\": \"integer\", \"maximum\": 3}, "
	            "\"s\": {\"maxLength\": 2}}}}}",
	            &s));
	collected c = {.n = 0};
	size_t n = 99;
	const char *doc = "{\"data\": {\"n\": 4.5, \"s\": \"abc\"}}";
	ASSERT_OK(
	    inbox_schema_validate_all(s, doc, strlen(doc), collect, &c, &n));
	ASSERT_EQ(n, 4);
	ASSERT_EQ(c.n, 4);
	ASSERT_STREQ(c.lines[0], "|required|/required|missing property \"id\"");
	ASSERT_STREQ(c.lines[1], "/data/n|type|/properties/data/properties/n/"
	                         "type|expected integer, got number 4.5");
	ASSERT_STREQ(c.lines[2], "/data/n|maximum|/properties/data/properties/"
	                         "n/maximum|4.5 is greater than 3");
	ASSERT_STREQ(c.lines[3], "/data/s|maxLength|/properties/data/"
	                         "properties/s/maxLength|\"abc\" has 3 "
	                         "characters, more than 2");
	ASSERT_OK(inbox_schema_validate_all(s, "{\"id\":1,\"data\":{}}", 18,
	                                    NULL, NULL, &n));
	ASSERT_EQ(n, 0);
	inbox_schema_close(s);
}

TEST(unique_items_on_large_arrays)
{
	inbox_schema *s = NULL;
	ASSERT_OK(compile("{\"uniqueItems\": true}", &s));
	static char buf[64000];
	size_t pos = 0;
	buf[pos++] = '[';
	for (int i = 0; i < 1000; i++)
		pos += (size_t)snprintf(buf + pos, sizeof(buf) - pos,
		                        "%s{\"k\": %d, \"v\": [%d]}",
		                        i ? "," : "", i, i * 7);
	buf[pos++] = ']';
	buf[pos] = '\0';
	ASSERT_EQ(check(s, buf), 1);
	/* same object, other member order and 1.0 for 1: a duplicate */
	buf[pos - 1] = '\0';
	strcat(buf, ",{\"v\": [35.0], \"k\": 5}]");
	ASSERT_EQ(check(s, buf), 0);
	ASSERT_CONTAINS(reason, "uniqueItems: items 5 and 1000 are equal");
	inbox_schema_close(s);
}

TEST(catastrophic_pattern_is_bounded)
{
	inbox_schema *s = NULL;
	ASSERT_OK(compile("{\"pattern\": \"^(a+)+$\"}", &s));
	char doc[80];
	memset(doc, 'a', sizeof(doc));
	doc[0] = '"';
	doc[sizeof(doc) - 3] = 'b';
	doc[sizeof(doc) - 2] = '"';
	doc[sizeof(doc) - 1] = '\0';
	clock_t t0 = clock();
	ASSERT_EQ(check(s, doc), 0);
	double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	ASSERT_TRUE(secs < 5.0);
	/* JIT may find it fast; the interpreter hits the limit */
	ASSERT_CONTAINS(reason, "pattern:");
	inbox_schema_close(s);
}

TEST(deep_payloads_are_bounded)
{
	/* A recursive schema against the deepest payload the parser
	 * accepts: valid, or a violation, never a crash. */
	inbox_schema *s = NULL;
	ASSERT_OK(compile("{\"properties\": {\"c\": {\"$ref\": \"#\"}}, "
	                  "\"items\": {\"$ref\": \"#\"}}",
	                  &s));
	for (int depth = 100; depth <= 4000; depth *= 2) {
		size_t len = (size_t)depth * 6 + 8, pos = 0;
		char *doc = malloc(len);
		ASSERT_TRUE(doc != NULL);
		for (int i = 0; i < depth; i++) {
			memcpy(doc + pos,
			       i % 2 ? "[" : "{\"c\":", i % 2 ? 1 : 5);
			pos += i % 2 ? 1 : 5;
		}
		doc[pos++] = '1';
		for (int i = depth - 1; i >= 0; i--)
			doc[pos++] = i % 2 ? ']' : '}';
		doc[pos] = '\0';
		int v = check(s, doc);
		printf("     depth %d: %s\n", depth,
		       v == 1   ? "valid"
		       : v == 0 ? reason
		                : "not parsed");
		free(doc);
		/* beyond the parser's depth limit it is malformed JSON */
		ASSERT_TRUE(v == 1 || v == 0 || (v == -1 && depth > 2000));
		if (v == 0)
			ASSERT_CONTAINS(reason, "nested too deep");
	}
	inbox_schema_close(s);
}

/* ---- the event contract of the brief ---------------------------------------
 */

static const char ORDER_CREATED[] =
    "{\n"
    "  \"$schema\": \"http://json-schema.org/draft-07/schema#\",\n"
    "  \"$id\": \"https://example.com/events/order-created.v1.json\",\n"
    "  \"title\": \"order-created v1\",\n"
    "  \"type\": \"object\",\n"
    "  \"required\": [\"id\", \"type\", \"data\"],\n"
    "  \"properties\": {\n"
    "    \"id\": {\"type\": \"string\", \"format\": \"uuid\"},\n"
    "    \"type\": {\"const\": \"order-created\"},\n"
    "    \"occurredAt\": {\"type\": \"string\", \"format\": \"date-time\"},\n"
    "    \"data\": {\n"
    "      \"type\": \"object\",\n"
    "      \"required\": [\"orderId\", \"totalCents\", \"currency\"],\n"
    "      \"additionalProperties\": false,\n"
    "      \"properties\": {\n"
    "        \"orderId\": {\"type\": \"string\", \"pattern\": "
    "\"^ord_[0-9A-Za-z]{6,}$\"},\n"
    "        \"totalCents\": {\"type\": \"integer\", \"minimum\": 0},\n"
    "        \"currency\": {\"enum\": [\"EUR\", \"USD\", \"GBP\"]},\n"
    "        \"customer\": {\"$ref\": \"#/definitions/customer\"},\n"
    "        \"lines\": {\"type\": \"array\", \"minItems\": 1, \"items\": "
    "{\"$ref\": \"#/definitions/line\"}}\n"
    "      }\n"
    "    }\n"
    "  },\n"
    "  \"definitions\": {\n"
    "    \"customer\": {\"type\": \"object\", \"required\": [\"email\"], "
    "\"properties\": {\"email\": {\"type\": \"string\", \"format\": "
    "\"email\"}}},\n"
    "    \"line\": {\"type\": \"object\", \"required\": [\"sku\", \"qty\"], "
    "\"properties\": {\"sku\": {\"type\": \"string\", \"minLength\": 1}, "
    "\"qty\": {\"type\": \"integer\", \"exclusiveMinimum\": 0}}}\n"
    "  }\n"
    "}\n";

#define EVENT(data)                                                            \
	"{\"id\": \"0b5e8a4e-6a4f-4d7e-9d1c-3f2b1a0c9e8d\", \"type\": "        \
	"\"order-created\", \"occurredAt\": \"2024-05-01T12:00:00Z\", "        \
	"\"data\": " data "}"

TEST(order_created_contract)
{
	inbox_schema *s = NULL;
	ASSERT_OK(compile(ORDER_CREATED, &s));
	ASSERT_EQ(check(s, EVENT("{\"orderId\": \"ord_123456\", \"totalCents\":"
	                         " 1999, \"currency\": \"EUR\", \"customer\": "
	                         "{\"email\": \"a@example.com\"}, \"lines\": "
	                         "[{\"sku\": \"X1\", \"qty\": 1}]}")),
	          1);
	static const struct {
		const char *doc, *reason;
	} bad[] = {
	    {EVENT("{\"orderId\": \"ord_123456\", \"totalCents\": -5, "
	           "\"currency\": \"EUR\"}"),
	     "schema violation at /data/totalCents: minimum: -5 is less than "
	     "0"},
	    {EVENT("{\"orderId\": \"ord_123456\", \"totalCents\": 19.5, "
	           "\"currency\": \"EUR\"}"),
	     "schema violation at /data/totalCents: type: expected integer, "
	     "got number 19.5"},
	    {EVENT("{\"orderId\": \"123456\", \"totalCents\": 5, "
	           "\"currency\": \"EUR\"}"),
	     "schema violation at /data/orderId: pattern: \"123456\" does not "
	     "match \"^ord_[0-9A-Za-z]{6,}$\""},
	    {EVENT("{\"orderId\": \"ord_123456\", \"totalCents\": 5, "
	           "\"currency\": \"eur\"}"),
	     "schema violation at /data/currency: enum: \"eur\" is not one of "
	     "[\"EUR\", \"USD\", \"GBP\"]"},
	    {EVENT("{\"orderId\": \"ord_123456\", \"totalCents\": 5}"),
	     "schema violation at /data: required: missing property "
	     "\"currency\""},
	    {EVENT("{\"orderId\": \"ord_123456\", \"totalCents\": 5, "
	           "\"currency\": \"EUR\", \"coupon\": \"X\"}"),
	     "schema violation at /data: additionalProperties: property "
	     "\"coupon\" is not allowed"},
	    {EVENT("{\"orderId\": \"ord_123456\", \"totalCents\": 5, "
	           "\"currency\": \"EUR\", \"lines\": [{\"sku\": \"A\", "
	           "\"qty\": 1}, {\"sku\": \"B\", \"qty\": 0}]}"),
	     "schema violation at /data/lines/1/qty: exclusiveMinimum: 0 is "
	     "not greater than 0"},
	    {EVENT("{\"orderId\": \"ord_123456\", \"totalCents\": 5, "
	           "\"currency\": \"EUR\", \"customer\": {\"email\": "
	           "\"nobody\"}}"),
	     "schema violation at /data/customer/email: format: \"nobody\" is "
	     "not a valid email"},
	    {"{\"type\": \"order-created\", \"data\": {}}",
	     "schema violation at (root): required: missing property \"id\""},
	    {"{\"id\": \"x\", \"type\": \"order-created\", \"data\": {}}",
	     "schema violation at /id: format: \"x\" is not a valid uuid"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ASSERT_EQ(check(s, bad[i].doc), 0);
		ASSERT_STREQ(reason, bad[i].reason);
	}
	inbox_schema_close(s);
}

TEST(validation_is_fast)
{
	inbox_schema *s = NULL;
	ASSERT_OK(compile(ORDER_CREATED, &s));
	const char *doc = EVENT("{\"orderId\": \"ord_123456\", \"totalCents\": "
	                        "1999, \"currency\": \"EUR\", \"customer\": "
	                        "{\"email\": \"a@example.com\"}, \"lines\": "
	                        "[{\"sku\": \"X1\", \"qty\": 1}, {\"sku\": "
	                        "\"X2\", \"qty\": 3}]}");
	/* Time the validation alone (inbox_schema_validate also parses). */
	int valid = 0;
	ASSERT_OK(inbox_schema_validate(s, doc, strlen(doc), &valid, NULL, 0));
	ASSERT_EQ(valid, 1);
	const int N = 20000;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < N; i++)
		inbox_schema_validate(s, doc, strlen(doc), &valid, NULL, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 +
	             (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) /
	            N;
	/* and the validation alone, on the parsed payload (what the
	 * consumer adds to its own parse) */
	json_t *root = NULL;
	char e[200];
	ASSERT_OK(inbox__json_parse(doc, strlen(doc), &root, e, sizeof(e)));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < N; i++)
		if (inbox__schema_check(s, root, strlen(doc), NULL, 0) != 0)
			break;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double vus = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 +
	              (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) /
	             N;
	json_decref(root);
	printf("     15-field event: parse + validate %.2f us, validate "
	       "alone %.2f us\n",
	       us, vus);
	/* generous: sanitizer builds are several times slower */
	ASSERT_TRUE(us < 500);
	ASSERT_TRUE(vus < 200);
	inbox_schema_close(s);
}

/* ---- the consumer
 * ------------------------------------------------------------ */

static int handler_calls;

static int count_handler(inbox_txn *t, const inbox_msg *m, void *payload)
{
	handler_calls++;
	return INBOX_HANDLER_OK;
}

static char dl_reason[600], dl_key[200];

static int dl_row(int ncols, const char *const *v, void *payload)
{
	snprintf(dl_reason, sizeof(dl_reason), "%s", v[0] ? v[0] : "(null)");
	if (ncols > 1)
		snprintf(dl_key, sizeof(dl_key), "%s", v[1] ? v[1] : "(null)");
	return 0;
}

static char db_path[] = "/tmp/inbox-schema-test-XXXXXX";

TEST(consumer_dead_letters_violations_before_any_effect)
{
	char url[600];
	snprintf(url, sizeof(url), "sqlite:%s/c.db", db_path);
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, url, NULL));
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.order-created.v1";
	o.key_template = "create-invoice:{/data/orderId}";
	o.handler = count_handler;
	o.json_schema = ORDER_CREATED;
	inbox_consumer *c = NULL;
	char e[512];
	ASSERT_OK(inbox_consumer_open(&c, st, &o, e, sizeof(e)));
	handler_calls = 0;

	const char *good =
	    EVENT("{\"orderId\": \"ord_000001\", \"totalCents\": "
	          "100, \"currency\": \"EUR\"}");
	const char *bad = EVENT("{\"orderId\": \"ord_000002\", \"totalCents\": "
	                        "-5, \"currency\": \"EUR\"}");
	inbox_delivery d[2] = {INBOX_DELIVERY_INIT, INBOX_DELIVERY_INIT};
	d[0].payload = good;
	d[0].payload_len = strlen(good);
	d[1].payload = bad;
	d[1].payload_len = strlen(bad);
	d[1].position = "orders.jsonl:2";
	inbox_result r[2] = {INBOX_RESULT_INIT};
	ASSERT_OK(inbox_consumer_process_batch(c, d, 2, r));
	ASSERT_EQ(r[0].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[1].outcome, INBOX_DEAD_LETTERED);
	ASSERT_STREQ(r[1].reason, "schema violation at /data/totalCents: "
	                          "minimum: -5 is less than 0");
	ASSERT_TRUE(r[1].dead_letter_id > 0);
	ASSERT_EQ(handler_calls, 1); /* never for the invalid one */

	/* one message at a time too */
	inbox_result r1 = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_consumer_process(c, &d[1], &r1));
	ASSERT_EQ(r1.outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(handler_calls, 1);

	/* the dead letter keeps the reason and, for operators, the key */
	ASSERT_OK(inbox_store_query(st,
	                            "SELECT reason, key FROM dead_letters "
	                            "ORDER BY id LIMIT 1",
	                            0, NULL, dl_row, NULL));
	ASSERT_STREQ(dl_reason, "schema violation at /data/totalCents: "
	                        "minimum: -5 is less than 0");
	ASSERT_STREQ(dl_key, "create-invoice:ord_000002");

	/* a violation that also breaks the key still names the violation */
	const char *nokey = EVENT("{\"totalCents\": 1, \"currency\": \"EUR\"}");
	d[0].payload = nokey;
	d[0].payload_len = strlen(nokey);
	ASSERT_OK(inbox_consumer_process(c, &d[0], &r1));
	ASSERT_EQ(r1.outcome, INBOX_DEAD_LETTERED);
	ASSERT_STREQ(r1.reason, "schema violation at /data: required: missing "
	                        "property \"orderId\"");

	inbox_stats stats = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &stats);
	ASSERT_EQ(stats.applied, 1);
	ASSERT_EQ(stats.dead_letters, 3);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

TEST(consumer_refuses_bad_schema_at_open)
{
	char url[600];
	snprintf(url, sizeof(url), "sqlite:%s/refuse.db", db_path);
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, url, NULL));
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "c";
	o.json_schema = "{\"properties\": {\"x\": {\"dependentSchemas\": {}}}}";
	inbox_consumer *c = (inbox_consumer *)1;
	char e[512] = "";
	ASSERT_EQ(inbox_consumer_open(&c, st, &o, e, sizeof(e)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(c == NULL);
	ASSERT_STREQ(e, "schema uses unsupported keyword \"dependentSchemas\" "
	                "at /properties/x");
	o.json_schema = "{\"type\": ";
	ASSERT_EQ(inbox_consumer_open(&c, st, &o, e, sizeof(e)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(e, "schema is not valid JSON");
	/* refused before the consumer is registered */
	int rows = -1;
	ASSERT_OK(inbox_store_query(st, "SELECT COUNT(*) FROM consumers", 0,
	                            NULL, dl_row, NULL));
	rows = atoi(dl_reason);
	ASSERT_EQ(rows, 0);
	inbox_store_close(st);
}

TEST(version_1_options_have_no_schema)
{
	char url[600];
	snprintf(url, sizeof(url), "sqlite:%s/v1.db", db_path);
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, url, NULL));
	/* A program built against version 1 of the options: the struct ends
	 * before json_schema, which must not be read. */
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.version = 1;
	o.name = "v1";
	o.json_schema = "{\"this is\": \"not read\"";
	inbox_consumer *c = NULL;
	ASSERT_OK(inbox_consumer_open(&c, st, &o, NULL, 0));
	inbox_delivery d = INBOX_DELIVERY_INIT;
	d.payload = "{\"id\": \"1\", \"anything\": true}";
	d.payload_len = strlen(d.payload);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

static void cleanup(void)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", db_path);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", db_path);
}

int main(void)
{
	if (!mkdtemp(db_path)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(unsupported_keyword_is_refused_with_its_place);
	RUN(unknown_format_is_refused);
	RUN(remote_and_dangling_refs_are_refused);
	RUN(ref_fragments_are_percent_decoded);
	RUN(keywords_beside_ref_are_refused);
	RUN(ref_cycles_without_descent_are_refused);
	RUN(invalid_regex_is_refused);
	RUN(wrong_keyword_values_are_refused);
	RUN(open_arguments);
	RUN(messages_name_the_path_and_keyword);
	RUN(draft7_semantics);
	RUN(formats);
	RUN(validate_all_reports_every_violation);
	RUN(unique_items_on_large_arrays);
	RUN(catastrophic_pattern_is_bounded);
	RUN(deep_payloads_are_bounded);
	RUN(order_created_contract);
	RUN(validation_is_fast);
	RUN(consumer_dead_letters_violations_before_any_effect);
	RUN(consumer_refuses_bad_schema_at_open);
	RUN(version_1_options_have_no_schema);
	cleanup();
	return test_summary();
}
