/*
 * The compiled form of a schema, shared by the compiler (compile.c,
 * compile_kw.c), the validator (validate.c) and their helpers (regex.c,
 * format.c, uri.c, value.c).
 */
#ifndef INBOX_SCHEMA_NODE_H
#define INBOX_SCHEMA_NODE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "schema/schema.h"

typedef struct sch_node sch_node;
typedef struct sch_regex sch_regex;

/* Instance types, as a bit set ("type": [...]). */
enum {
	SCH_T_NULL = 1u << 0,
	SCH_T_BOOLEAN = 1u << 1,
	SCH_T_OBJECT = 1u << 2,
	SCH_T_ARRAY = 1u << 3,
	SCH_T_NUMBER = 1u << 4,
	SCH_T_STRING = 1u << 5,
	SCH_T_INTEGER = 1u << 6 /* a number with a zero fractional part */
};

/* Which optional keywords a node has. */
enum {
	SCH_HAS_MINIMUM = 1u << 0,
	SCH_HAS_MAXIMUM = 1u << 1,
	SCH_HAS_EXMIN = 1u << 2,
	SCH_HAS_EXMAX = 1u << 3,
	SCH_HAS_MULTIPLE = 1u << 4,
	SCH_HAS_CONST = 1u << 5,
	SCH_HAS_ENUM = 1u << 6,
	SCH_HAS_UNIQUE = 1u << 7
};

/* Formats we validate; any other "format" is refused at compile time. */
typedef enum sch_format {
	SCH_FMT_NONE = 0,
	SCH_FMT_DATE_TIME,
	SCH_FMT_DATE,
	SCH_FMT_TIME,
	SCH_FMT_EMAIL,
	SCH_FMT_HOSTNAME,
	SCH_FMT_IPV4,
	SCH_FMT_IPV6,
	SCH_FMT_URI,
	SCH_FMT_URI_REFERENCE,
	SCH_FMT_UUID,
	SCH_FMT_JSON_POINTER,
	SCH_FMT_RELATIVE_JSON_POINTER,
	SCH_FMT_REGEX
} sch_format;

/* A JSON number kept exactly: an integer when it is one. */
typedef struct sch_num {
	int is_int;
	json_int_t i;
	double d;
} sch_num;

/* "properties" (sorted by name for bsearch) and "required". */
typedef struct sch_prop {
	const char *name; /* borrowed from the document */
	size_t len;
	sch_node *node; /* NULL for "required" */
} sch_prop;

typedef struct sch_pprop {
	sch_regex *re;
	const char *source; /* the pattern text, borrowed */
	sch_node *node;
} sch_pprop;

/* "dependencies": a property requiring others, or a schema. */
typedef struct sch_dep {
	const char *name;
	size_t len;
	sch_prop *required; /* array form */
	size_t nrequired;
	sch_node *node; /* schema form */
} sch_dep;

struct sch_node {
	sch_node *next_alloc; /* every node of the schema, for freeing */
	json_t *json;         /* the schema value (borrowed) */
	char *path;           /* its location in the document (RFC 6901) */
	char *base;           /* base URI for $ref resolution */
	int boolean;          /* 1 = true schema, 0 = false, -1 = object */
	int color;            /* cycle check */
	uint32_t refs_in;     /* $refs to it (+1 for the root) */
	uint32_t memo_id;     /* > 0: results remembered (memo.c) */

	sch_node *ref; /* "$ref": resolved target (other keywords unused) */

	unsigned types; /* SCH_T_* set, 0 = any */
	unsigned has;   /* SCH_HAS_* */
	sch_num minimum, maximum, exmin, exmax, multiple;
	size_t min_length, max_length; /* max: SIZE_MAX = none */
	size_t min_items, max_items;
	size_t min_props, max_props;
	const json_t *const_value;
	const json_t *enum_values; /* an array */
	sch_regex *pattern;
	const char *pattern_source;
	sch_format format;

	sch_prop *props;
	size_t nprops;
	sch_prop *quick; /* the props whose schemas do not descend */
	size_t nquick;
	sch_pprop *pprops;
	size_t npprops;
	sch_node *additional_props;
	sch_node *property_names;
	sch_prop *required;
	size_t nrequired;
	sch_dep *deps;
	size_t ndeps;

	sch_node *items;  /* "items": one schema for every item */
	sch_node **tuple; /* "items": [...] */
	size_t ntuple;
	int has_tuple;
	sch_node *additional_items;
	sch_node *contains;

	sch_node **all_of, **any_of, **one_of;
	size_t nall_of, nany_of, none_of;
	sch_node *not_schema;
	sch_node *if_schema, *then_schema, *else_schema;
};

/* Results of one validation per ($ref target, instance value), so that
 * a schema that reaches the same place by several paths (a oneOf of
 * recursive alternatives) costs each pair once: without it a tree
 * schema costs 2^depth. Open addressing; a slot belongs to the current
 * validation when its generation is `gen`, so starting a validation
 * clears nothing. Kept by the schema and reused (one thread). */
typedef struct sch_memo_slot {
	const void *id; /* the instance: its json_t, or a member name */
	uint32_t node;  /* the target's memo_id */
	uint32_t mark;  /* generation << 2 | SCH_MEMO_* */
} sch_memo_slot;

typedef struct sch_memo {
	sch_memo_slot *slots;
	size_t cap;     /* a power of two, or 0 */
	unsigned shift; /* 64 - log2(cap) */
	size_t count;
	uint32_t gen;
} sch_memo;

enum {
	SCH_MEMO_UNKNOWN = 0,
	SCH_MEMO_VALID = 1,
	SCH_MEMO_INVALID = 2, /* found quietly: nothing reported yet */
	SCH_MEMO_REPORTED = 3 /* invalid, violations already reported */
};

struct inbox_schema {
	json_t *doc;
	sch_node *root;
	sch_node *nodes; /* allocation list */
	sch_regex *regexes;
	void *match_data;    /* pcre2_match_data_8 *, shared: one thread */
	void *match_context; /* pcre2_match_context_8 *, with the limits */
	void *jit_stack;     /* pcre2_jit_stack_8 * */
	uint32_t nmemo;      /* $ref targets numbered */
	sch_memo memo;
	uint64_t last_steps; /* of the last validation */
	int memo_off; /* tests: validate without the memo (exponential) */
};

/* compile_kw.c: the "properties" schema of a member name, or NULL. */
sch_node *sch__prop_find(const sch_node *n, const char *name, size_t len);

/* ---- regex.c: ECMA 262 patterns on PCRE2 -------------------------- */

/* Compile `pattern` (UTF-8, len bytes) and link it to s->regexes. PCRE-only
 * syntax (\Z, \A, (?i) ...) is refused so that a pattern means what it
 * means in ECMA 262. 0, or -1 with the reason in err. */
int sch__regex_compile(inbox_schema *s, const char *pattern, size_t len,
                       sch_regex **out, char *err, size_t errlen);
/* Outcomes of sch__regex_match besides 1 (match) and 0 (no match). */
enum {
	SCH_RE_LIMIT = -1, /* more than SCH_REGEX_MATCH_LIMIT, or memory */
	SCH_RE_BUDGET = -2 /* more than max_units */
};
/* Backtracking units charged as one step: PCRE2's interpreter spends
 * about 20 ns on one (its JIT about 4). */
#define SCH_REGEX_UNITS_PER_STEP 2u
/* Backtracking units one match may use, whatever the budget left. */
#define SCH_REGEX_MATCH_LIMIT 1000000u
/* Match, charging *units (added to) for the work done: PCRE2 cannot say
 * what a match cost, so it runs with a small limit first and doubles it
 * while the limit is what stopped it; the limits tried are charged, at
 * most four times what the match needed. */
int sch__regex_match(inbox_schema *s, const sch_regex *re, const char *str,
                     size_t len, uint64_t max_units, uint64_t *units);
/* Only check that `pattern` compiles ("format": "regex"). 1 valid, 0 not. */
int sch__regex_valid(const char *pattern, size_t len);
void sch__regex_free_all(inbox_schema *s);
/* Allocate the shared match data and context. 0 or -1 (NOMEM). */
int sch__regex_init(inbox_schema *s);

/* ---- memo.c: results per ($ref target, instance) --------------------- */

/* Begin a validation: forget the previous one's results (O(1)). */
void sch__memo_begin(sch_memo *m);
/* SCH_MEMO_* for the pair. */
unsigned sch__memo_get(const sch_memo *m, uint32_t node, const void *id);
/* Remember; without memory, silently nothing (the step budget still
 * bounds the work). */
void sch__memo_put(sch_memo *m, uint32_t node, const void *id, unsigned state);
void sch__memo_free(sch_memo *m);

/* ---- format.c ----------------------------------------------------- */

/* SCH_FMT_NONE for a name we do not validate. */
sch_format sch__format_lookup(const char *name);
const char *sch__format_name(sch_format f);
/* 1 if the string is valid for f. */
int sch__format_check(sch_format f, const char *s, size_t len);

/* ---- uri.c: RFC 3986 reference resolution -------------------------- */

/* Resolve `ref` against `base` (RFC 3986 section 5.2). malloc'ed, or NULL
 * (NOMEM). A base without a scheme is treated as a path. */
char *sch__uri_resolve(const char *base, const char *ref);

/* ---- value.c: numbers, equality, rendering ------------------------- */

/* 1 if v is a JSON number; fills n. */
int sch__num_of(const json_t *v, sch_num *n);
/* <0, 0, >0 comparing two numbers exactly (1 == 1.0). */
int sch__num_cmp(const sch_num *a, const sch_num *b);
/* d rounded to the nearest integer (half away from zero); without libm. */
double sch__round(double d);
/* 1 if the number has a zero fractional part. */
int sch__num_is_integer(const sch_num *n);
/* JSON equality: numbers by value, objects regardless of order. *steps
 * (if non-NULL) is increased by the values compared. */
int sch__json_equal(const json_t *a, const json_t *b, uint64_t *steps);
/* Order-independent hash consistent with sch__json_equal; *steps as
 * above (the values hashed). */
uint64_t sch__json_hash(const json_t *v, uint64_t *steps);
/* Append a short rendering of v (JSON, strings quoted, cut after about
 * `budget` bytes with "..."). */
void sch__render(char *out, size_t outlen, const json_t *v, size_t budget);
void sch__render_num(char *out, size_t outlen, const sch_num *n);
/* Quote a string (JSON escapes), cut after budget bytes. */
void sch__render_str(char *out, size_t outlen, const char *s, size_t len,
                     size_t budget);
/* Number of code points in valid UTF-8. */
size_t sch__utf8_count(const char *s, size_t len);
/* Append an RFC 6901 token (~ and / escaped). 0 or -1. */
int sch__ptr_append(inbox__buf *b, const char *tok, size_t len);

#endif
