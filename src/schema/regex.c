/*
 * "pattern", "patternProperties" and "format": "regex": ECMA 262 regular
 * expressions, run by PCRE2 with the options that make it behave like
 * ECMAScript (\uXXXX escapes, $ only at the very end, [] and [^]). PCRE
 * syntax that ECMA 262 does not have (\Z, \A, (?i), possessive
 * quantifiers, POSIX classes, verbs) is refused rather than given a
 * meaning the schema's author did not intend.
 *
 * Patterns are not anchored (JSON Schema searches). Every match is
 * bounded in time (SCH_REGEX_MATCH_LIMIT backtracking units, and what is
 * left of the validation's step budget) and in memory (the JIT stack, the
 * interpreter's heap): a hostile payload against `^(a+)+$` cannot stall
 * the consumer. The validator treats a match it could not finish as
 * undecided, never as a yes or a no (validate.c).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/node.h"

/* The first limit a match runs with; doubled while it is what stops the
 * match. A plain pattern needs 1 to 3 units. */
#define FIRST_LIMIT 16u
/* Memory: the JIT stack (32 KB growing to 1 MB) and, when that is too
 * small (a group repeated over a long string), the interpreter's
 * backtracking frames on the heap, up to 16 MB. */
#define JIT_STACK_START (32u * 1024u)
#define JIT_STACK_MAX   (1024u * 1024u)
#define HEAP_LIMIT_KB   (16u * 1024u)
#define DEPTH_LIMIT     1000000u

struct sch_regex {
	sch_regex *next;
	pcre2_code *code;
};

static const uint32_t OPTIONS = PCRE2_UTF | PCRE2_ALT_BSUX |
                                PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS |
                                PCRE2_NEVER_BACKSLASH_C;

/* Escapes PCRE has and ECMA 262 has not. */
static const char PCRE_ONLY_ESCAPES[] = "AZzGQEKRXChHNoge";

/* Find PCRE-only syntax. NULL when the pattern is ECMA-shaped, else a
 * description of the offending construct (static or in buf). */
static const char *pcre_only(const char *p, size_t n, char *buf, size_t buflen)
{
	int in_class = 0, after_quant = 0;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		int was_quant = after_quant;
		after_quant = 0;
		if (c == '\\') {
			if (i + 1 >= n)
				return NULL; /* PCRE2 reports it */
			char e = p[++i];
			if (e && strchr(PCRE_ONLY_ESCAPES, e)) {
				snprintf(buf, buflen,
				         "\\%c is not ECMA 262 syntax", e);
				return buf;
			}
			continue;
		}
		if (in_class) {
			if (c == ']')
				in_class = 0;
			else if (c == '[' && i + 1 < n &&
			         (p[i + 1] == ':' || p[i + 1] == '.' ||
			          p[i + 1] == '='))
				return "POSIX classes ([:alpha:]) are not ECMA "
				       "262 syntax";
			continue;
		}
		switch (c) {
		case '[':
			in_class = 1;
			/* "[]" and "[^]" are complete classes in ECMA 262 */
			break;
		case '(':
			if (i + 1 < n && p[i + 1] == '*')
				return "(*VERB) is not ECMA 262 syntax";
			if (i + 1 < n && p[i + 1] == '?') {
				char g = i + 2 < n ? p[i + 2] : '\0';
				char h = i + 3 < n ? p[i + 3] : '\0';
				if (g == ':' || g == '=' || g == '!')
					break;
				if (g == '<' &&
				    (h == '=' || h == '!' || h == '_' ||
				     h == '$' || (h >= 'A' && h <= 'Z') ||
				     (h >= 'a' && h <= 'z')))
					break;
				snprintf(buf, buflen,
				         "\"(?%c\" is not ECMA 262 syntax",
				         g ? g : ' ');
				return buf;
			}
			break;
		case '*':
		case '+':
		case '?':
			if (was_quant && c == '+')
				return "possessive quantifiers are not ECMA "
				       "262 syntax";
			if (was_quant && c == '?')
				break; /* lazy: "*?" */
			after_quant = 1;
			break;
		case '{': {
			/* a quantifier {n}, {n,}, {n,m}; else a literal */
			size_t j = i + 1;
			while (j < n && p[j] >= '0' && p[j] <= '9')
				j++;
			if (j == i + 1)
				break;
			if (j < n && p[j] == ',')
				for (j++; j < n && p[j] >= '0' && p[j] <= '9';)
					j++;
			if (j < n && p[j] == '}') {
				i = j;
				after_quant = 1;
			}
			break;
		}
		default:
			break;
		}
	}
	return NULL;
}

static pcre2_code *compile(const char *pattern, size_t len, char *err,
                           size_t errlen)
{
	char why[160];
	const char *bad = pcre_only(pattern, len, why, sizeof(why));
	if (bad) {
		snprintf(err, errlen, "%s", bad);
		return NULL;
	}
	int code;
	PCRE2_SIZE off;
	pcre2_code *re =
	    pcre2_compile((PCRE2_SPTR)pattern, len, OPTIONS, &code, &off, NULL);
	if (!re) {
		PCRE2_UCHAR msg[160];
		if (pcre2_get_error_message(code, msg, sizeof(msg)) < 0)
			snprintf((char *)msg, sizeof(msg), "error %d", code);
		snprintf(err, errlen, "%s at offset %zu", (char *)msg,
		         (size_t)off);
	}
	return re;
}

int sch__regex_compile(inbox_schema *s, const char *pattern, size_t len,
                       sch_regex **out, char *err, size_t errlen)
{
	sch_regex *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	r->code = compile(pattern, len, err, errlen);
	if (!r->code) {
		free(r);
		return -1;
	}
	/* JIT when available: several times faster; the interpreter
	 * otherwise. Same results and limits either way. */
	(void)pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE);
	r->next = s->regexes;
	s->regexes = r;
	*out = r;
	return 0;
}

int sch__regex_valid(const char *pattern, size_t len)
{
	char err[8];
	pcre2_code *re = compile(pattern, len, err, sizeof(err));
	pcre2_code_free(re);
	return re != NULL;
}

int sch__regex_init(inbox_schema *s)
{
	pcre2_match_context *mc = pcre2_match_context_create(NULL);
	/* One pair suffices: we only ask whether it matches. */
	pcre2_match_data *md = pcre2_match_data_create(1, NULL);
	/* NULL when JIT is not supported: then it is not used either. */
	pcre2_jit_stack *js =
	    pcre2_jit_stack_create(JIT_STACK_START, JIT_STACK_MAX, NULL);
	if (!mc || !md) {
		pcre2_match_context_free(mc);
		pcre2_match_data_free(md);
		pcre2_jit_stack_free(js);
		return -1;
	}
	pcre2_set_match_limit(mc, SCH_REGEX_MATCH_LIMIT);
	pcre2_set_depth_limit(mc, DEPTH_LIMIT);
	pcre2_set_heap_limit(mc, HEAP_LIMIT_KB);
	if (js)
		pcre2_jit_stack_assign(mc, NULL, js);
	s->match_context = mc;
	s->match_data = md;
	s->jit_stack = js;
	return 0;
}

int sch__regex_match(inbox_schema *s, const sch_regex *re, const char *str,
                     size_t len, uint64_t max_units, uint64_t *units)
{
	pcre2_match_context *mc = s->match_context;
	uint64_t cap = max_units < SCH_REGEX_MATCH_LIMIT
	                   ? max_units
	                   : SCH_REGEX_MATCH_LIMIT;
	uint32_t opts = 0; /* PCRE2_NO_JIT once the JIT stack was too small */
	uint64_t limit = FIRST_LIMIT;
	for (;;) {
		if (limit > cap)
			limit = cap;
		pcre2_set_match_limit(mc, (uint32_t)limit);
		int rc = pcre2_match(re->code, (PCRE2_SPTR)str, len, 0, opts,
		                     (pcre2_match_data *)s->match_data, mc);
		*units += limit;
		if (rc >= 0)
			return 1; /* 0: matched, ovector too small (1 pair) */
		if (rc == PCRE2_ERROR_NOMATCH)
			return 0;
		if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !opts) {
			opts = PCRE2_NO_JIT; /* same limit, on the heap */
			continue;
		}
		if (rc != PCRE2_ERROR_MATCHLIMIT)
			return SCH_RE_LIMIT; /* depth or heap limit */
		if (limit >= cap)
			return cap < SCH_REGEX_MATCH_LIMIT ? SCH_RE_BUDGET
			                                   : SCH_RE_LIMIT;
		limit *= 2;
	}
}

void sch__regex_free_all(inbox_schema *s)
{
	while (s->regexes) {
		sch_regex *n = s->regexes->next;
		pcre2_code_free(s->regexes->code);
		free(s->regexes);
		s->regexes = n;
	}
	pcre2_match_data_free((pcre2_match_data *)s->match_data);
	pcre2_match_context_free((pcre2_match_context *)s->match_context);
	pcre2_jit_stack_free((pcre2_jit_stack *)s->jit_stack);
	s->match_data = NULL;
	s->match_context = NULL;
	s->jit_stack = NULL;
}
