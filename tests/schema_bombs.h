/*
 * "Schema bombs": pairs of an ordinary-looking JSON Schema and a message
 * generator whose naive validation costs exponential (or quadratic, or
 * catastrophic-backtracking) time in the message's size. Shared by
 * tests/unit/test_schema_bomb.c (each must validate, or stop at a limit,
 * quickly) and bench/schema_bomb.c (the worst message up to max_payload).
 *
 * Each generator writes a message of at most `target` bytes (and about
 * that many when target allows) into a buffer it resets.
 */
#ifndef INBOX_TESTS_SCHEMA_BOMBS_H
#define INBOX_TESTS_SCHEMA_BOMBS_H

#include <stdio.h>
#include <string.h>

#include "base/buf.h"

/* What a bomb's message is, when the validation does not stop at a limit:
 * valid, or a violation. */
enum { BOMB_VALID = 1, BOMB_INVALID = 0 };

typedef struct bomb {
	const char *name;
	const char *schema;
	/* 0, or -1 (out of memory) */
	int (*gen)(inbox__buf *out, size_t target);
	int expect; /* BOMB_VALID or BOMB_INVALID */
	/* 1 if this library must validate it without stopping (a budget
	 * stop would be a legitimate message refused); 0 if stopping at a
	 * limit is an acceptable outcome */
	int must_finish;
} bomb;

/* The JSON parser's nesting limit (jansson's JSON_PARSER_MAX_DEPTH is
 * 2048); generators stay just below it. */
#define BOMB_MAX_DEPTH 2040

static int bomb__puts(inbox__buf *b, const char *s)
{
	return inbox__buf_puts(b, s);
}

/* ---- tree: node = oneOf [folder, group], children before kind ------- */

static const char BOMB_TREE_SCHEMA[] =
    "{\"$ref\": \"#/definitions/node\", \"definitions\": {"
    "\"node\": {\"oneOf\": [{\"$ref\": \"#/definitions/folder\"}, "
    "{\"$ref\": \"#/definitions/group\"}]},"
    "\"folder\": {\"type\": \"object\", \"required\": [\"kind\"], "
    "\"properties\": {\"children\": {\"type\": \"array\", \"items\": "
    "{\"$ref\": \"#/definitions/node\"}}, \"kind\": {\"const\": "
    "\"folder\"}}},"
    "\"group\": {\"type\": \"object\", \"required\": [\"kind\"], "
    "\"properties\": {\"children\": {\"type\": \"array\", \"items\": "
    "{\"$ref\": \"#/definitions/node\"}}, \"kind\": {\"const\": "
    "\"group\"}}}}}";

/* A chain of `depth` nodes, children first; the innermost node's kind is
 * `last` (a wrong one makes the message invalid at the bottom). */
static int bomb__chain(inbox__buf *b, size_t depth, const char *kind,
                       const char *last)
{
	for (size_t i = 0; i < depth; i++)
		if (bomb__puts(b, "{\"children\":[") < 0)
			return -1;
	for (size_t i = 0; i < depth; i++) {
		if (inbox__buf_printf(b, "],\"kind\":\"%s\"}",
		                      i == 0 ? last : kind) < 0)
			return -1;
	}
	return 0;
}

/* The root group holds chains as deep as the parser allows, as many as
 * fit in target. */
static int bomb__tree(inbox__buf *b, size_t target, const char *last)
{
	const size_t level = 31; /* bytes per level of a chain */
	inbox__buf_reset(b);
	size_t depth = target > 64 ? (target - 32) / level : 1;
	if (depth > BOMB_MAX_DEPTH / 2 - 2) /* an object and an array */
		depth = BOMB_MAX_DEPTH / 2 - 2;
	if (bomb__puts(b, "{\"children\":[") < 0)
		return -1;
	size_t n = 0;
	do {
		if (n++ && bomb__puts(b, ",") < 0)
			return -1;
		if (bomb__chain(b, depth, "group", n == 1 ? last : "group") < 0)
			return -1;
	} while (b->len + depth * level + 32 < target);
	return bomb__puts(b, "],\"kind\":\"folder\"}");
}

static int bomb_tree_valid(inbox__buf *b, size_t target)
{
	return bomb__tree(b, target, "folder");
}

static int bomb_tree_invalid(inbox__buf *b, size_t target)
{
	return bomb__tree(b, target, "other");
}

/* ---- oneOf of 16 alternatives with a discriminator, "next" first ---- */

static char bomb__oneof16[4096];

static const char *bomb_oneof16_schema(void)
{
	if (bomb__oneof16[0])
		return bomb__oneof16;
	size_t pos = 0;
	pos += (size_t)snprintf(bomb__oneof16 + pos,
	                        sizeof(bomb__oneof16) - pos, "{\"oneOf\": [");
	for (int i = 0; i < 16; i++)
		pos += (size_t)snprintf(
		    bomb__oneof16 + pos, sizeof(bomb__oneof16) - pos,
		    "%s{\"type\": \"object\", \"required\": [\"t\"], "
		    "\"properties\": {\"next\": {\"type\": \"array\", "
		    "\"items\": "
		    "{\"$ref\": \"#\"}}, \"t\": {\"const\": \"t%d\"}}}",
		    i ? ", " : "", i);
	snprintf(bomb__oneof16 + pos, sizeof(bomb__oneof16) - pos, "]}");
	return bomb__oneof16;
}

static int bomb_oneof16(inbox__buf *b, size_t target)
{
	const size_t level = 21; /* {"next":[ ... ],"t":"t15"} */
	inbox__buf_reset(b);
	size_t depth = target > 64 ? (target - 32) / level : 1;
	if (depth > BOMB_MAX_DEPTH / 2 - 2)
		depth = BOMB_MAX_DEPTH / 2 - 2;
	if (bomb__puts(b, "{\"next\":[") < 0)
		return -1;
	size_t n = 0;
	do {
		if (n++ && bomb__puts(b, ",") < 0)
			return -1;
		for (size_t i = 0; i < depth; i++)
			if (bomb__puts(b, "{\"next\":[") < 0)
				return -1;
		for (size_t i = 0; i < depth; i++)
			if (bomb__puts(b, "],\"t\":\"t15\"}") < 0)
				return -1;
	} while (b->len + depth * level + 32 < target);
	return bomb__puts(b, "],\"t\":\"t15\"}");
}

/* ---- anyOf chain: 40 levels of two references to the next ----------- */

static char bomb__anyof[8192];

/* d0 = anyOf [d1, d1], ..., d39 = anyOf [d40, d40], d40 = string: a
 * number fails 2^40 ways before "type": "number" accepts it. */
static const char *bomb_anyof_schema(void)
{
	if (bomb__anyof[0])
		return bomb__anyof;
	size_t pos = 0, cap = sizeof(bomb__anyof);
	pos += (size_t)snprintf(
	    bomb__anyof + pos, cap - pos,
	    "{\"items\": {\"anyOf\": [{\"$ref\": \"#/definitions/d0\"}, "
	    "{\"type\": \"number\"}]}, \"definitions\": {");
	for (int i = 0; i < 40; i++)
		pos += (size_t)snprintf(
		    bomb__anyof + pos, cap - pos,
		    "\"d%d\": {\"anyOf\": [{\"$ref\": \"#/definitions/d%d\"}, "
		    "{\"$ref\": \"#/definitions/d%d\"}]}, ",
		    i, i + 1, i + 1);
	snprintf(bomb__anyof + pos, cap - pos,
	         "\"d40\": {\"type\": \"string\"}}}");
	return bomb__anyof;
}

static int bomb_numbers(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	if (bomb__puts(b, "[1") < 0)
		return -1;
	while (b->len + 3 <= target)
		if (bomb__puts(b, ",1") < 0)
			return -1;
	return bomb__puts(b, "]");
}

/* ---- allOf of two references to the same recursive schema ---------- */

static const char BOMB_ALLOF_SCHEMA[] =
    "{\"allOf\": [{\"$ref\": \"#/definitions/x\"}, "
    "{\"$ref\": \"#/definitions/x\"}], \"definitions\": {\"x\": "
    "{\"type\": \"array\", \"items\": {\"$ref\": \"#\"}}}}";

/* Nested arrays as deep as the parser allows, side by side. */
static int bomb_nested_arrays(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	size_t depth = target > 8 ? (target - 4) / 2 : 1;
	if (depth > BOMB_MAX_DEPTH - 1)
		depth = BOMB_MAX_DEPTH - 1;
	if (bomb__puts(b, "[") < 0)
		return -1;
	size_t n = 0;
	do {
		if (n++ && bomb__puts(b, ",") < 0)
			return -1;
		for (size_t i = 0; i < depth; i++)
			if (bomb__puts(b, "[") < 0)
				return -1;
		for (size_t i = 0; i < depth; i++)
			if (bomb__puts(b, "]") < 0)
				return -1;
	} while (b->len + 2 * depth + 4 < target);
	return bomb__puts(b, "]");
}

/* ---- deep nesting: objects and arrays to the parser's limit --------- */

static const char BOMB_DEEP_SCHEMA[] =
    "{\"properties\": {\"c\": {\"$ref\": \"#\"}}, \"items\": {\"$ref\": "
    "\"#\"}, \"additionalProperties\": {\"$ref\": \"#\"}}";

/* Chains of {"c": [{"c": [... 1 ...]}]} to the parser's limit, side by
 * side in an array. */
static int bomb_deep(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	size_t depth = target > 16 ? (target - 8) / 4 : 1;
	if (depth > BOMB_MAX_DEPTH - 1)
		depth = BOMB_MAX_DEPTH - 1;
	if (bomb__puts(b, "[") < 0)
		return -1;
	size_t n = 0;
	do {
		if (n++ && bomb__puts(b, ",") < 0)
			return -1;
		for (size_t i = 0; i < depth; i++)
			if (bomb__puts(b, i % 2 ? "[" : "{\"c\":") < 0)
				return -1;
		if (bomb__puts(b, "1") < 0)
			return -1;
		for (size_t i = depth; i-- > 0;)
			if (bomb__puts(b, i % 2 ? "]" : "}") < 0)
				return -1;
	} while (b->len + 4 * depth + 8 < target);
	return bomb__puts(b, "]");
}

/* ---- catastrophic backtracking: "pattern" and "patternProperties" --- */

/* Every string fails the pattern (quietly, inside anyOf), then passes. */
static const char BOMB_PATTERN_SCHEMA[] =
    "{\"items\": {\"type\": \"string\", \"anyOf\": [{\"pattern\": "
    "\"^(a+)+$\"}, {\"maxLength\": 100}]}}";

/* Strings just short enough to stay under the per-match limit (a quarter
 * million backtracking steps each), none of which matches. */
static int bomb_pattern(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	if (bomb__puts(b, "[") < 0)
		return -1;
	const char *s = "\"aaaaaaaaaaaaaaaaab\"";
	size_t n = 0;
	do {
		if (n++ && bomb__puts(b, ",") < 0)
			return -1;
		if (bomb__puts(b, s) < 0)
			return -1;
	} while (b->len + strlen(s) + 2 < target);
	return bomb__puts(b, "]");
}

static const char BOMB_PPROPS_SCHEMA[] =
    "{\"patternProperties\": {\"^(a+)+$\": {\"type\": \"integer\"}}, "
    "\"additionalProperties\": {\"type\": \"integer\"}}";

static int bomb_pprops(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	if (bomb__puts(b, "{") < 0)
		return -1;
	size_t n = 0;
	do {
		if (inbox__buf_printf(b, "%s\"aaaaaaaaaaaaaaaaab%zu\":1",
		                      n ? "," : "", n) < 0)
			return -1;
		n++;
	} while (b->len + 32 < target);
	return bomb__puts(b, "}");
}

/* ---- uniqueItems ------------------------------------------------------ */

static const char BOMB_UNIQUE_SCHEMA[] = "{\"uniqueItems\": true}";

/* Distinct numbers. */
static int bomb_unique_numbers(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	if (bomb__puts(b, "[0") < 0)
		return -1;
	for (size_t i = 1;; i++) {
		char num[32];
		int n = snprintf(num, sizeof(num), ",%zu", i);
		if (b->len + (size_t)n + 1 > target)
			break;
		if (bomb__puts(b, num) < 0)
			return -1;
	}
	return bomb__puts(b, "]");
}

/* 64 big arrays (compared pairwise) equal but for their last item. */
static int bomb_unique_alike(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	/* an array: "[" each "0," "NN]" and a comma */
	size_t each = target / 128 > 4 ? target / 128 - 3 : 1;
	if (bomb__puts(b, "[") < 0)
		return -1;
	for (int k = 0; k < 64; k++) {
		if (k && bomb__puts(b, ",") < 0)
			return -1;
		if (bomb__puts(b, "[") < 0)
			return -1;
		for (size_t i = 0; i < each; i++)
			if (bomb__puts(b, "0,") < 0)
				return -1;
		if (inbox__buf_printf(b, "%d]", k) < 0)
			return -1;
	}
	return bomb__puts(b, "]");
}

static const char BOMB_UNIQUE_NESTED_SCHEMA[] =
    "{\"uniqueItems\": true, \"items\": {\"$ref\": \"#\"}}";

/* [[[...], 0, 1, ..., 64], 0, 1, ..., 64]: every level hashes everything
 * below it. */
static int bomb_unique_nested(inbox__buf *b, size_t target)
{
	static const char tail[] =
	    ",0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,"
	    "24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,"
	    "45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64]";
	inbox__buf_reset(b);
	size_t depth = target / (sizeof(tail) + 1);
	if (depth > BOMB_MAX_DEPTH - 2)
		depth = BOMB_MAX_DEPTH - 2;
	if (depth == 0)
		depth = 1;
	for (size_t i = 0; i < depth; i++)
		if (bomb__puts(b, "[") < 0)
			return -1;
	if (bomb__puts(b, "-1") < 0)
		return -1;
	for (size_t i = 0; i < depth; i++)
		if (bomb__puts(b, tail) < 0)
			return -1;
	return 0;
}

/* ---- formats and lengths on one huge string ---------------------------- */

static const char BOMB_FORMATS_SCHEMA[] =
    "{\"items\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": "
    "100000000, \"anyOf\": [{\"format\": \"uri\"}, {\"format\": "
    "\"email\"}, {\"format\": \"hostname\"}, {\"format\": \"date-time\"}, "
    "{\"format\": \"regex\"}]}}";

/* One long URI (half the message), then patterns of nested groups, 8 KB
 * each, compiled for "format": "regex". */
static int bomb_formats(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	size_t each = target > 64 ? target / 2 - 16 : 1;
	if (bomb__puts(b, "[\"http://h/") < 0)
		return -1;
	for (size_t i = 0; i < each; i++)
		if (bomb__puts(b, "a") < 0)
			return -1;
	if (bomb__puts(b, "\"") < 0)
		return -1;
	size_t re = target < 16 * 1024 ? target / 8 : 8 * 1024;
	while (b->len + re + 8 < target) {
		if (bomb__puts(b, ",\"") < 0)
			return -1;
		for (size_t i = 0; i + 6 <= re; i += 6)
			if (bomb__puts(b, "(?:a|)") < 0)
				return -1;
		if (bomb__puts(b, "\"") < 0)
			return -1;
	}
	return bomb__puts(b, "]");
}

/* ---- a wide schema on many values: legitimate work beyond the budget */

static char bomb__wide[64 * 1024];

/* every item checked against 1000 subschemas */
static const char *bomb_wide_schema(void)
{
	if (bomb__wide[0])
		return bomb__wide;
	size_t pos = 0, cap = sizeof(bomb__wide);
	pos += (size_t)snprintf(bomb__wide + pos, cap - pos,
	                        "{\"items\": {\"allOf\": [");
	for (int i = 0; i < 1000; i++)
		pos +=
		    (size_t)snprintf(bomb__wide + pos, cap - pos,
		                     "%s{\"minimum\": %d}", i ? ", " : "", -i);
	snprintf(bomb__wide + pos, cap - pos, "]}}");
	return bomb__wide;
}

/* The family, in a fixed order (schemas built on first use). */
static size_t bomb_family(bomb *out, size_t cap)
{
	const bomb all[] = {
	    {"tree, children before kind", BOMB_TREE_SCHEMA, bomb_tree_valid,
	     BOMB_VALID, 1},
	    {"tree, wrong kind at the bottom", BOMB_TREE_SCHEMA,
	     bomb_tree_invalid, BOMB_INVALID, 1},
	    {"oneOf of 16, discriminator last", bomb_oneof16_schema(),
	     bomb_oneof16, BOMB_VALID, 1},
	    {"anyOf chain of 40 x 2 $refs", bomb_anyof_schema(), bomb_numbers,
	     BOMB_VALID, 0},
	    {"allOf of 2 $refs, recursive", BOMB_ALLOF_SCHEMA,
	     bomb_nested_arrays, BOMB_VALID, 1},
	    {"deep nesting to the parser's limit", BOMB_DEEP_SCHEMA, bomb_deep,
	     BOMB_VALID, 1},
	    {"pattern ^(a+)+$ on many strings", BOMB_PATTERN_SCHEMA,
	     bomb_pattern, BOMB_VALID, 0},
	    {"patternProperties ^(a+)+$ on many names", BOMB_PPROPS_SCHEMA,
	     bomb_pprops, BOMB_VALID, 0},
	    {"uniqueItems, distinct numbers", BOMB_UNIQUE_SCHEMA,
	     bomb_unique_numbers, BOMB_VALID, 1},
	    {"uniqueItems, 64 nearly equal arrays", BOMB_UNIQUE_SCHEMA,
	     bomb_unique_alike, BOMB_VALID, 0},
	    {"uniqueItems, nested", BOMB_UNIQUE_NESTED_SCHEMA,
	     bomb_unique_nested, BOMB_VALID, 0},
	    {"formats on huge strings", BOMB_FORMATS_SCHEMA, bomb_formats,
	     BOMB_VALID, 0},
	    {"allOf of 1000 on every number", bomb_wide_schema(), bomb_numbers,
	     BOMB_VALID, 0},
	};
	size_t n = sizeof(all) / sizeof(all[0]);
	for (size_t i = 0; i < n && i < cap; i++)
		out[i] = all[i];
	return n;
}

#endif
