/*
 * Validating an instance against a compiled schema. Walks the node graph
 * and the parsed payload; the instance path lives in frames on the C
 * stack and is rendered only when a violation is reported. Inside anyOf,
 * oneOf, not, if, contains and propertyNames the evaluation is quiet
 * (only a yes/no is needed) and stops at the first failure.
 *
 * The work is bounded by the message's size, whatever the schema:
 *  - results at $ref targets are remembered per instance value (memo.c),
 *    so a recursive oneOf costs nodes x values, not 2^depth;
 *  - every node visit, member, comparison, hashed value, scanned string
 *    and regex backtracking unit is charged to a step budget of
 *    SCH_STEPS_BASE + SCH_STEPS_PER_BYTE x the message's size; a
 *    validation that would exceed it stops ("schema validation exceeded
 *    N steps"), as does one nested deeper than the thread's stack allows
 *    or a regex that cannot be matched within its limits. Such a stop is not a
 * yes or a no (inside "not" a no would be a yes): the whole validation fails
 *    with that reason, and the consumer dead-letters the message.
 */
#define _GNU_SOURCE /* pthread_getattr_np */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "schema/node.h"

/* The C stack a validation may use. The parser bounds the depth of a
 * payload (2048) and the compiler refuses cycles that do not descend, so
 * the recursion is bounded anyway; this keeps it within the thread's
 * stack when a deep message meets a schema with long chains of
 * applicators (about 300 bytes per nested evaluation, more in sanitizer
 * builds): what the thread has left but STACK_MARGIN, or STACK_UNKNOWN
 * where that cannot be known. */
#define STACK_MARGIN  (256u * 1024u)
#define STACK_UNKNOWN (1024u * 1024u)

#if defined(__GNUC__)
#define NOINLINE     __attribute__((noinline))
#define STACK_HERE() ((uintptr_t)__builtin_frame_address(0))
#else
#define NOINLINE
#define STACK_HERE() ((uintptr_t)&x)
#endif
/* uniqueItems sorts the items' hashes: on the stack up to this many. */
#define UNIQUE_ON_STACK 64

/* One step of the instance path: a member name or an array index. */
typedef struct ipath {
	const struct ipath *up;
	const char *key; /* NULL: index */
	size_t len;
	size_t index;
} ipath;

/* The instance: a JSON value, or a bare string (a member name for
 * propertyNames). */
typedef struct inst {
	const json_t *j;
	const char *str;
	size_t len;
	unsigned type; /* SCH_T_* bits it satisfies */
	sch_num num;
} inst;

typedef struct vctx {
	inbox_schema *s;
	int quiet; /* > 0: inside anyOf/oneOf/not/if/contains/... */
	int all;   /* report every violation, not only the first */
	int stop;  /* the callback asked to stop, or a limit was hit */
	inbox_schema_error_fn fn;
	void *payload;
	size_t nerrors;
	uintptr_t stack;     /* where the validation began */
	uintptr_t max_stack; /* bytes it may use below that */
	uint64_t steps, budget;
	size_t size; /* of the message, for the budget's message */
} vctx;

static int validate(vctx *x, const sch_node *n, const inst *v, const ipath *ip);
static const char *shown(const inst *v, char *buf, size_t len);
static const char *type_name(unsigned t);
static void types_text(unsigned types, char *buf, size_t len);
static int validate_ref(vctx *x, const sch_node *t, const inst *v,
                        const ipath *ip);

/* ---- reporting ------------------------------------------------------- */

static size_t render_path(const ipath *p, char *buf, size_t cap)
{
	if (!p)
		return 0;
	size_t pos = render_path(p->up, buf, cap);
	char idx[24];
	const char *tok = p->key;
	size_t len = p->len;
	if (!tok) {
		snprintf(idx, sizeof(idx), "%zu", p->index);
		tok = idx;
		len = strlen(idx);
	}
	if (pos + 1 < cap)
		buf[pos++] = '/';
	for (size_t i = 0; i < len && pos + 2 < cap; i++) {
		if (tok[i] == '~' || tok[i] == '/') {
			buf[pos++] = '~';
			buf[pos++] = tok[i] == '~' ? '0' : '1';
		} else {
			buf[pos++] = tok[i] ? tok[i] : '?';
		}
	}
	buf[pos] = '\0';
	return pos;
}

#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
static NOINLINE void
report(vctx *x, const ipath *ip, const sch_node *n, const char *kw,
       const char *fmt, ...)
{
	if (x->quiet || x->stop)
		return;
	char path[512], spath[512], msg[600];
	path[0] = '\0';
	render_path(ip, path, sizeof(path));
	if (strcmp(kw, "false") == 0)
		snprintf(spath, sizeof(spath), "%s", n->path);
	else
		snprintf(spath, sizeof(spath), "%s/%s", n->path, kw);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	x->nerrors++;
	if (x->fn(path, kw, spath, msg, x->payload) || !x->all)
		x->stop = 1;
}

/* A limit was hit: report it whatever the quiet level, and stop. The
 * keyword is "limit" (no draft 7 keyword has that name); the message
 * begins "schema validation ..." and is the whole reason. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static NOINLINE void
give_up(vctx *x, const ipath *ip, const sch_node *n, const char *fmt, ...)
{
	if (x->stop)
		return;
	char path[512], msg[700];
	path[0] = '\0';
	render_path(ip, path, sizeof(path));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	x->stop = 1;
	x->nerrors++;
	x->fn(path, SCH_LIMIT_KEYWORD, n->path, msg, x->payload);
}

static void over_budget(vctx *x, const ipath *ip, const sch_node *n)
{
	give_up(x, ip, n,
	        "schema validation exceeded %llu steps (the budget of a "
	        "message of %zu bytes): too costly to validate against "
	        "this schema",
	        (unsigned long long)x->budget, x->size);
}

/* Violations whose message shows values: rendered only when reported,
 * out of line, so that the recursion's frames stay small. */
static NOINLINE void fail_value(vctx *x, const ipath *ip, const sch_node *n,
                                const char *kw, const inst *v)
{
	if (x->quiet || x->stop)
		return;
	char a[200], want[300];
	shown(v, a, sizeof(a));
	if (strcmp(kw, "type") == 0) {
		types_text(n->types, want, sizeof(want));
		report(x, ip, n, kw, "expected %s, got %s %s", want,
		       type_name(v->type), a);
	} else if (strcmp(kw, "const") == 0) {
		sch__render(want, sizeof(want), n->const_value, 80);
		report(x, ip, n, kw, "%s is not %s", a, want);
	} else if (strcmp(kw, "enum") == 0) {
		sch__render(want, sizeof(want), n->enum_values, 160);
		report(x, ip, n, kw, "%s is not one of %s", a, want);
	} else if (strcmp(kw, "pattern") == 0) {
		sch__render_str(want, sizeof(want), n->pattern_source,
		                strlen(n->pattern_source), 100);
		report(x, ip, n, kw, "%s does not match %s", a, want);
	} else { /* format */
		report(x, ip, n, kw, "%s is not a valid %s", a,
		       sch__format_name(n->format));
	}
}

/* "%s is less than %s" and the like. */
static NOINLINE void fail_num(vctx *x, const ipath *ip, const sch_node *n,
                              const char *kw, const char *fmt, const sch_num *v,
                              const sch_num *bound)
{
	if (x->quiet || x->stop)
		return;
	char a[40], b[40], msg[120];
	sch__render_num(a, sizeof(a), v);
	sch__render_num(b, sizeof(b), bound);
	/* fmt: two %s, from this file */
	snprintf(msg, sizeof(msg), "%s %s %s", a, fmt, b);
	report(x, ip, n, kw, "%s", msg);
}

static NOINLINE void fail_length(vctx *x, const ipath *ip, const sch_node *n,
                                 const char *kw, const inst *v, size_t cps,
                                 size_t bound)
{
	if (x->quiet || x->stop)
		return;
	char a[200];
	report(x, ip, n, kw, "%s has %zu characters, %s %zu",
	       shown(v, a, sizeof(a)), cps,
	       strcmp(kw, "minLength") == 0 ? "fewer than" : "more than",
	       bound);
}

/* A member name in the message: fmt has one %s. */
static NOINLINE void fail_name(vctx *x, const ipath *ip, const sch_node *n,
                               const char *kw, const char *fmt,
                               const char *name, size_t len)
{
	if (x->quiet || x->stop)
		return;
	char a[200], msg[300];
	sch__render_str(a, sizeof(a), name, len, 60);
	snprintf(msg, sizeof(msg), fmt, a);
	report(x, ip, n, kw, "%s", msg);
}

static NOINLINE void fail_dependency(vctx *x, const ipath *ip,
                                     const sch_node *n, const sch_dep *d,
                                     const sch_prop *req)
{
	if (x->quiet || x->stop)
		return;
	char a[200], b[200];
	sch__render_str(a, sizeof(a), d->name, d->len, 60);
	sch__render_str(b, sizeof(b), req->name, req->len, 60);
	report(x, ip, n, "dependencies", "property %s requires property %s", a,
	       b);
}

static NOINLINE void regex_stop(vctx *x, const ipath *ip, const sch_node *n,
                                const char *kw, const char *src,
                                const char *str, size_t len)
{
	char a[200], p[200];
	sch__render_str(a, sizeof(a), str, len, 60);
	sch__render_str(p, sizeof(p), src, strlen(src), 100);
	give_up(x, ip, n,
	        "schema validation stopped: %s: %s%s is too costly to "
	        "match against %s (more than %u backtracking steps, or "
	        "too much memory)",
	        kw, strcmp(kw, "pattern") ? "property name " : "", a, p,
	        SCH_REGEX_MATCH_LIMIT);
}

/* Charge `steps`; 0 (and the validation stops) beyond the budget. */
static int charge(vctx *x, uint64_t steps, const ipath *ip, const sch_node *n)
{
	if (x->stop)
		return 0;
	x->steps += steps;
	if (x->steps <= x->budget)
		return 1;
	over_budget(x, ip, n);
	return 0;
}

/* Bytes scanned linearly (a format, a length in code points). */
static uint64_t scan_cost(size_t len)
{
	return 1 + len / 64;
}

/* The value, shortly, for a message. */
static const char *shown(const inst *v, char *buf, size_t len)
{
	if (v->j)
		sch__render(buf, len, v->j, 60);
	else
		sch__render_str(buf, len, v->str, v->len, 60);
	return buf;
}

/* ---- instances ----------------------------------------------------------- */

static void inst_of(inst *v, const json_t *j)
{
	memset(v, 0, sizeof(*v));
	v->j = j;
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		v->type = SCH_T_OBJECT;
		break;
	case JSON_ARRAY:
		v->type = SCH_T_ARRAY;
		break;
	case JSON_STRING:
		v->type = SCH_T_STRING;
		v->str = json_string_value(j);
		v->len = json_string_length(j);
		break;
	case JSON_INTEGER:
	case JSON_REAL:
		sch__num_of(j, &v->num);
		v->type = SCH_T_NUMBER;
		if (sch__num_is_integer(&v->num))
			v->type |= SCH_T_INTEGER;
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		v->type = SCH_T_BOOLEAN;
		break;
	default:
		v->type = SCH_T_NULL;
		break;
	}
}

static int inst_equal(vctx *x, const inst *v, const json_t *b)
{
	if (v->j)
		return sch__json_equal(v->j, b, &x->steps);
	x->steps += scan_cost(v->len);
	return json_is_string(b) && json_string_length(b) == v->len &&
	       memcmp(json_string_value(b), v->str, v->len) == 0;
}

static const char *type_name(unsigned t)
{
	if (t & SCH_T_INTEGER)
		return "integer";
	switch (t) {
	case SCH_T_NULL:
		return "null";
	case SCH_T_BOOLEAN:
		return "boolean";
	case SCH_T_OBJECT:
		return "object";
	case SCH_T_ARRAY:
		return "array";
	case SCH_T_NUMBER:
		return "number";
	default:
		return "string";
	}
}

static void types_text(unsigned types, char *buf, size_t len)
{
	static const unsigned ORDER[] = {
	    SCH_T_OBJECT, SCH_T_ARRAY,   SCH_T_STRING, SCH_T_INTEGER,
	    SCH_T_NUMBER, SCH_T_BOOLEAN, SCH_T_NULL};
	size_t pos = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(ORDER) / sizeof(ORDER[0]); i++)
		if (types & ORDER[i])
			pos += (size_t)snprintf(buf + pos, len - pos, "%s%s",
			                        pos ? " or " : "",
			                        type_name(ORDER[i]));
}

/* ---- keywords by instance type ------------------------------------------ */

#define FAIL()                                                                 \
	do {                                                                   \
		ok = 0;                                                        \
		if (x->quiet || x->stop)                                       \
			return 0;                                              \
	} while (0)

static int multiple_of(const sch_num *v, const sch_num *m)
{
	if (v->is_int && m->is_int)
		return v->i % m->i == 0;
	double q = v->d / m->d;
	if (!isfinite(q))
		return 0;
	/* Decimal multiples are not exact in binary (0.0075 / 0.0001 is
	 * 74.99999999999999): accept a quotient within 1e-9 of an integer. */
	double r = q - sch__round(q);
	return r < 1e-9 && r > -1e-9;
}

static int check_number(vctx *x, const sch_node *n, const inst *v,
                        const ipath *ip)
{
	int ok = 1;
	const sch_num *num = &v->num;
	if ((n->has & SCH_HAS_MINIMUM) && sch__num_cmp(num, &n->minimum) < 0) {
		fail_num(x, ip, n, "minimum", "is less than", num, &n->minimum);
		FAIL();
	}
	if ((n->has & SCH_HAS_MAXIMUM) && sch__num_cmp(num, &n->maximum) > 0) {
		fail_num(x, ip, n, "maximum", "is greater than", num,
		         &n->maximum);
		FAIL();
	}
	if ((n->has & SCH_HAS_EXMIN) && sch__num_cmp(num, &n->exmin) <= 0) {
		fail_num(x, ip, n, "exclusiveMinimum", "is not greater than",
		         num, &n->exmin);
		FAIL();
	}
	if ((n->has & SCH_HAS_EXMAX) && sch__num_cmp(num, &n->exmax) >= 0) {
		fail_num(x, ip, n, "exclusiveMaximum", "is not less than", num,
		         &n->exmax);
		FAIL();
	}
	if ((n->has & SCH_HAS_MULTIPLE) && !multiple_of(num, &n->multiple)) {
		fail_num(x, ip, n, "multipleOf", "is not a multiple of", num,
		         &n->multiple);
		FAIL();
	}
	return ok;
}

/* Match a regex, charged to the budget. 1, 0, or -1: the validation
 * stopped (the match was too costly; reported). */
static int match(vctx *x, const sch_node *n, const char *kw,
                 const sch_regex *re, const char *src, const char *str,
                 size_t len, const ipath *ip)
{
	if (!charge(x, 1, ip, n))
		return -1;
	uint64_t left = (x->budget - x->steps) * SCH_REGEX_UNITS_PER_STEP;
	uint64_t units = 0;
	int m = sch__regex_match(x->s, re, str, len, left, &units);
	x->steps += units / SCH_REGEX_UNITS_PER_STEP;
	if (m >= 0)
		return m;
	if (m == SCH_RE_BUDGET)
		over_budget(x, ip, n);
	else
		regex_stop(x, ip, n, kw, src, str, len);
	return -1;
}

static int check_string(vctx *x, const sch_node *n, const inst *v,
                        const ipath *ip)
{
	int ok = 1;
	/* Byte length bounds the code point count from above. */
	if ((n->min_length > 0 || v->len > n->max_length)) {
		if (!charge(x, scan_cost(v->len), ip, n))
			return 0;
		size_t cps = sch__utf8_count(v->str, v->len);
		if (cps < n->min_length) {
			fail_length(x, ip, n, "minLength", v, cps,
			            n->min_length);
			FAIL();
		}
		if (cps > n->max_length) {
			fail_length(x, ip, n, "maxLength", v, cps,
			            n->max_length);
			FAIL();
		}
	}
	if (n->pattern) {
		int m = match(x, n, "pattern", n->pattern, n->pattern_source,
		              v->str, v->len, ip);
		if (m < 0)
			return 0;
		if (m == 0) {
			fail_value(x, ip, n, "pattern", v);
			FAIL();
		}
	}
	if (n->format) {
		/* "regex" compiles the string: dearer per byte */
		uint64_t cost = n->format == SCH_FMT_REGEX ? 16 + v->len / 4
		                                           : scan_cost(v->len);
		if (!charge(x, cost, ip, n))
			return 0;
		if (!sch__format_check(n->format, v->str, v->len)) {
			fail_value(x, ip, n, "format", v);
			FAIL();
		}
	}
	return ok;
}

typedef struct hashed {
	uint64_t h;
	size_t i;
} hashed;

static int hashed_cmp(const void *a, const void *b)
{
	const hashed *p = a, *q = b;
	if (p->h != q->h)
		return p->h < q->h ? -1 : 1;
	return p->i < q->i ? -1 : p->i > q->i;
}

/* First pair of equal items (i < j), or 0 if all are distinct: the
 * items' hashes are sorted, and only items with equal hashes compared,
 * so neither many items nor big nearly equal ones cost n^2. Every value
 * hashed or compared is charged to *steps (items crafted to collide pay
 * for their comparisons); past the budget the answer does not matter
 * (the caller stops). Out of line: its array is not on the recursion's
 * stack. */
static NOINLINE int find_duplicate(const json_t *a, size_t *pi, size_t *pj,
                                   uint64_t *steps, uint64_t budget)
{
	hashed small[UNIQUE_ON_STACK];
	size_t n = json_array_size(a);
	if (n < 2)
		return 0;
	hashed *h = n <= UNIQUE_ON_STACK ? small : malloc(n * sizeof(*h));
	if (!h) {
		/* no memory: compare pairs, charged, within the budget */
		for (size_t j = 1; j < n && *steps <= budget; j++)
			for (size_t i = 0; i < j && *steps <= budget; i++)
				if (sch__json_equal(json_array_get(a, i),
				                    json_array_get(a, j),
				                    steps)) {
					*pi = i;
					*pj = j;
					return 1;
				}
		return 0;
	}
	for (size_t i = 0; i < n && *steps <= budget; i++) {
		h[i].h = sch__json_hash(json_array_get(a, i), steps);
		h[i].i = i;
	}
	int found = 0;
	if (*steps <= budget) {
		qsort(h, n, sizeof(*h), hashed_cmp);
		*steps += n;
	}
	/* In a group of equal hashes (sorted by index), the first item
	 * equal to an earlier one gives the group's smallest j, and the first
	 * earlier one equal to it the smallest i; report the smallest j. */
	for (size_t g = 0, end; g < n && *steps <= budget; g = end) {
		for (end = g + 1; end < n && h[end].h == h[g].h;)
			end++;
		int done = 0;
		for (size_t t = g + 1; t < end && !done && *steps <= budget;
		     t++)
			for (size_t s = g; s < t && !done; s++)
				if (sch__json_equal(json_array_get(a, h[s].i),
				                    json_array_get(a, h[t].i),
				                    steps)) {
					done = 1;
					if (!found || h[t].i < *pj) {
						*pi = h[s].i;
						*pj = h[t].i;
						found = 1;
					}
				}
	}
	if (h != small)
		free(h);
	return found;
}

static int item(vctx *x, const sch_node *n, const json_t *a, size_t i,
                const ipath *ip)
{
	inst v;
	ipath child = {ip, NULL, 0, i};
	inst_of(&v, json_array_get(a, i));
	return validate(x, n, &v, &child);
}

static int check_items(vctx *x, const sch_node *n, const json_t *a, size_t size,
                       const ipath *ip)
{
	int ok = 1;
	if (n->items) {
		for (size_t i = 0; i < size; i++)
			if (!item(x, n->items, a, i, ip))
				FAIL();
	} else if (n->has_tuple) {
		for (size_t i = 0; i < size && i < n->ntuple; i++)
			if (!item(x, n->tuple[i], a, i, ip))
				FAIL();
		const sch_node *more = n->additional_items;
		if (more && more->boolean == 0 && size > n->ntuple) {
			report(x, ip, n, "additionalItems",
			       "has %zu items, at most %zu allowed", size,
			       n->ntuple);
			FAIL();
		} else if (more) {
			for (size_t i = n->ntuple; i < size; i++)
				if (!item(x, more, a, i, ip))
					FAIL();
		}
	}
	return ok;
}

static int check_array(vctx *x, const sch_node *n, const inst *v,
                       const ipath *ip)
{
	int ok = 1;
	const json_t *a = v->j;
	size_t size = json_array_size(a);
	if (size < n->min_items) {
		report(x, ip, n, "minItems", "has %zu items, fewer than %zu",
		       size, n->min_items);
		FAIL();
	}
	if (size > n->max_items) {
		report(x, ip, n, "maxItems", "has %zu items, more than %zu",
		       size, n->max_items);
		FAIL();
	}
	if (n->has & SCH_HAS_UNIQUE) {
		size_t i = 0, j = 0;
		int dup = find_duplicate(a, &i, &j, &x->steps, x->budget);
		if (!charge(x, 1, ip, n))
			return 0;
		if (dup) {
			report(x, ip, n, "uniqueItems",
			       "items %zu and %zu are equal", i, j);
			FAIL();
		}
	}
	if ((n->items || n->has_tuple) && !check_items(x, n, a, size, ip))
		FAIL();
	if (n->contains) {
		int found = 0;
		x->quiet++;
		for (size_t i = 0; i < size && !found; i++)
			found = item(x, n->contains, a, i, ip);
		x->quiet--;
		if (!found) {
			report(x, ip, n, "contains",
			       size ? "no item matches" : "the array is empty");
			FAIL();
		}
	}
	return ok;
}

static int member(vctx *x, const sch_node *n, const char *k, size_t klen,
                  const json_t *mv, const ipath *ip)
{
	inst v;
	ipath child = {ip, k, klen, 0};
	inst_of(&v, mv);
	return validate(x, n, &v, &child);
}

/* One member against properties, patternProperties and
 * additionalProperties. */
static int check_member(vctx *x, const sch_node *n, const char *k, size_t klen,
                        const json_t *mv, const ipath *ip)
{
	int ok = 1, matched = 0;
	if (!charge(x, scan_cost(klen), ip, n))
		return 0;
	sch_node *p = sch__prop_find(n, k, klen);
	if (p) {
		matched = 1;
		if (!member(x, p, k, klen, mv, ip))
			FAIL();
	}
	for (size_t i = 0; i < n->npprops; i++) {
		int m = match(x, n, "patternProperties", n->pprops[i].re,
		              n->pprops[i].source, k, klen, ip);
		if (m < 0)
			return 0;
		if (m) {
			matched = 1;
			if (!member(x, n->pprops[i].node, k, klen, mv, ip))
				FAIL();
		}
	}
	if (matched || !n->additional_props)
		return ok;
	if (n->additional_props->boolean == 0) {
		fail_name(x, ip, n, "additionalProperties",
		          "property %s is not allowed", k, klen);
		FAIL();
	} else if (!member(x, n->additional_props, k, klen, mv, ip)) {
		FAIL();
	}
	return ok;
}

/* properties, patternProperties, additionalProperties: one pass over
 * the instance's members. Quietly (only a yes/no wanted), the members
 * whose schemas look at the value alone (a discriminator's "const") go
 * first: a oneOf alternative then fails before descending. */
static int check_members(vctx *x, const sch_node *n, const json_t *o,
                         const ipath *ip)
{
	int ok = 1;
	const char *k;
	size_t klen;
	json_t *mv;
	if (x->quiet)
		for (size_t i = 0; i < n->nquick; i++) {
			const sch_prop *q = &n->quick[i];
			const json_t *qv = json_object_getn(o, q->name, q->len);
			if (qv && !member(x, q->node, q->name, q->len, qv, ip))
				return 0;
		}
	json_object_keylen_foreach((json_t *)o, k, klen, mv)
	{
		if (!check_member(x, n, k, klen, mv, ip))
			FAIL();
	}
	return ok;
}

static int check_names(vctx *x, const sch_node *n, const json_t *o,
                       const ipath *ip)
{
	int ok = 1;
	const char *k;
	size_t klen;
	json_t *mv;
	json_object_keylen_foreach((json_t *)o, k, klen, mv)
	{
		inst name = {NULL, k, klen, SCH_T_STRING, {0, 0, 0}};
		x->quiet++;
		int good = validate(x, n->property_names, &name, ip);
		x->quiet--;
		if (!good) {
			fail_name(x, ip, n, "propertyNames",
			          "property name %s is not allowed", k, klen);
			FAIL();
		}
	}
	return ok;
}

static int check_deps(vctx *x, const sch_node *n, const inst *v,
                      const ipath *ip)
{
	int ok = 1;
	const json_t *o = v->j;
	for (size_t i = 0; i < n->ndeps; i++) {
		const sch_dep *d = &n->deps[i];
		if (!json_object_getn(o, d->name, d->len))
			continue;
		if (!charge(x, d->nrequired, ip, n))
			return 0;
		if (d->node) {
			if (!validate(x, d->node, v, ip))
				FAIL();
			continue;
		}
		for (size_t j = 0; j < d->nrequired; j++)
			if (!json_object_getn(o, d->required[j].name,
			                      d->required[j].len)) {
				fail_dependency(x, ip, n, d, &d->required[j]);
				FAIL();
			}
	}
	return ok;
}

static int check_object(vctx *x, const sch_node *n, const inst *v,
                        const ipath *ip)
{
	int ok = 1;
	const json_t *o = v->j;
	size_t size = json_object_size(o);
	if (size < n->min_props) {
		report(x, ip, n, "minProperties",
		       "has %zu properties, fewer than %zu", size,
		       n->min_props);
		FAIL();
	}
	if (size > n->max_props) {
		report(x, ip, n, "maxProperties",
		       "has %zu properties, more than %zu", size, n->max_props);
		FAIL();
	}
	if (!charge(x, n->nrequired + n->ndeps, ip, n))
		return 0;
	for (size_t i = 0; i < n->nrequired; i++)
		if (!json_object_getn(o, n->required[i].name,
		                      n->required[i].len)) {
			fail_name(x, ip, n, "required", "missing property %s",
			          n->required[i].name, n->required[i].len);
			FAIL();
		}
	if ((n->nprops || n->npprops || n->additional_props) &&
	    !check_members(x, n, o, ip))
		FAIL();
	if (n->property_names && !check_names(x, n, o, ip))
		FAIL();
	if (n->ndeps && !check_deps(x, n, v, ip))
		FAIL();
	return ok;
}

/* ---- applicators ----------------------------------------------------------
 */

static int quietly(vctx *x, const sch_node *n, const inst *v, const ipath *ip)
{
	x->quiet++;
	int r = validate(x, n, v, ip);
	x->quiet--;
	return r;
}

/* oneOf: stops at the second match (the answer is known then). */
static int check_one_of(vctx *x, const sch_node *n, const inst *v,
                        const ipath *ip)
{
	size_t first = 0, count = 0;
	for (size_t i = 0; i < n->none_of && count < 2; i++)
		if (quietly(x, n->one_of[i], v, ip)) {
			if (count++ == 0)
				first = i;
			else
				report(x, ip, n, "oneOf",
				       "matches schemas %zu and %zu, but must "
				       "match exactly one",
				       first, i);
		}
	if (count == 0)
		report(x, ip, n, "oneOf", "matches none of the %zu schemas",
		       n->none_of);
	return count == 1;
}

static int check_applicators(vctx *x, const sch_node *n, const inst *v,
                             const ipath *ip)
{
	int ok = 1;
	for (size_t i = 0; i < n->nall_of; i++)
		if (!validate(x, n->all_of[i], v, ip))
			FAIL();
	if (n->nany_of) {
		int any = 0;
		for (size_t i = 0; i < n->nany_of && !any; i++)
			any = quietly(x, n->any_of[i], v, ip);
		if (!any) {
			report(x, ip, n, "anyOf",
			       "matches none of the %zu schemas", n->nany_of);
			FAIL();
		}
	}
	if (n->none_of && !check_one_of(x, n, v, ip))
		FAIL();
	if (n->not_schema && quietly(x, n->not_schema, v, ip)) {
		report(x, ip, n, "not", "matches the schema it must not match");
		FAIL();
	}
	if (n->if_schema) {
		const sch_node *branch = quietly(x, n->if_schema, v, ip)
		                             ? n->then_schema
		                             : n->else_schema;
		if (branch && !validate(x, branch, v, ip))
			FAIL();
	}
	return ok;
}

/* ---- a node
 * ------------------------------------------------------------------- */

static int in_enum(vctx *x, const sch_node *n, const inst *v)
{
	size_t m = json_array_size(n->enum_values);
	for (size_t i = 0; i < m; i++)
		if (inst_equal(x, v, json_array_get(n->enum_values, i)))
			return 1;
	return 0;
}

static int validate_node(vctx *x, const sch_node *n, const inst *v,
                         const ipath *ip)
{
	int ok = 1;
	if (n->boolean >= 0) {
		if (n->boolean)
			return 1;
		report(x, ip, n, "false",
		       "no value is allowed here (the "
		       "schema is false)");
		return 0;
	}
	if (n->ref)
		return validate_ref(x, n->ref, v, ip);
	if (n->types && !(n->types & v->type)) {
		fail_value(x, ip, n, "type", v);
		FAIL();
	}
	if ((n->has & SCH_HAS_CONST) && !inst_equal(x, v, n->const_value)) {
		fail_value(x, ip, n, "const", v);
		FAIL();
	}
	if (n->has & SCH_HAS_ENUM) {
		int found = in_enum(x, n, v);
		if (!charge(x, 1, ip, n))
			return 0;
		if (!found) {
			fail_value(x, ip, n, "enum", v);
			FAIL();
		}
	}
	int r = 1;
	if (v->type & SCH_T_NUMBER)
		r = check_number(x, n, v, ip);
	else if (v->type == SCH_T_STRING)
		r = check_string(x, n, v, ip);
	else if (v->type == SCH_T_ARRAY)
		r = check_array(x, n, v, ip);
	else if (v->type == SCH_T_OBJECT)
		r = check_object(x, n, v, ip);
	if (!r)
		FAIL();
	if (!check_applicators(x, n, v, ip))
		FAIL();
	return ok;
}

/* The stack left to this thread below `here` (its lowest address, found
 * once per thread), or 0 when unknown. Stacks grow down on every
 * platform we build for. */
static uintptr_t stack_left(uintptr_t here)
{
#if defined(__GLIBC__)
	static _Thread_local uintptr_t low, high;
	if (!high) {
		pthread_attr_t a;
		void *addr = NULL;
		size_t size = 0;
		if (pthread_getattr_np(pthread_self(), &a) != 0)
			return 0;
		if (pthread_attr_getstack(&a, &addr, &size) == 0) {
			low = (uintptr_t)addr;
			high = low + size;
		}
		pthread_attr_destroy(&a);
	}
	if (here > low && here <= high) /* not on another stack */
		return here - low;
#endif
	(void)here;
	return 0;
}

static int validate(vctx *x, const sch_node *n, const inst *v, const ipath *ip)
{
	if (!charge(x, 1, ip, n))
		return 0;
	uintptr_t here = STACK_HERE();
	if (here < x->stack && x->stack - here > x->max_stack) {
		give_up(x, ip, n,
		        "schema validation stopped: nested too deep (more "
		        "than %zu KiB of stack)",
		        (size_t)(x->max_stack / 1024));
		return 0;
	}
	return validate_node(x, n, v, ip);
}

/* The instance's identity for the memo: its value, or for a member name
 * (propertyNames) the name's bytes, which jansson keeps once per member.
 * true, false and null are shared by every place that holds them. */
static const void *identity(const inst *v, int *shared)
{
	*shared = v->j && (json_is_true(v->j) || json_is_false(v->j) ||
	                   json_is_null(v->j));
	return v->j ? (const void *)v->j : (const void *)v->str;
}

/* A $ref target: validated once per instance value. A result does not
 * depend on where the value is, so a valid pair is valid everywhere; an
 * invalid one must still be reported when it is met outside a quiet
 * evaluation — once (when the value has a single place). A lookup costs
 * a step, remembering three (the table outgrows the caches). */
static int validate_ref(vctx *x, const sch_node *t, const inst *v,
                        const ipath *ip)
{
	int shared;
	const void *id = identity(v, &shared);
	sch_memo *m = &x->s->memo;
	if (x->s->memo_off || !t->memo_id)
		return validate(x, t, v, ip);
	unsigned known = sch__memo_get(m, t->memo_id, id);
	if (!charge(x, 1, ip, t))
		return 0;
	if (known == SCH_MEMO_VALID)
		return 1;
	if (known == SCH_MEMO_REPORTED ||
	    (known == SCH_MEMO_INVALID && x->quiet))
		return 0;
	int r = validate(x, t, v, ip);
	if (x->stop || !charge(x, 3, ip, t))
		return r; /* stopped: the result is not to be trusted */
	unsigned state = r                    ? SCH_MEMO_VALID
	                 : x->quiet || shared ? SCH_MEMO_INVALID
	                                      : SCH_MEMO_REPORTED;
	sch__memo_put(m, t->memo_id, id, state);
	return r;
}

/* ---- entry points -----------------------------------------------------------
 */

uint64_t inbox__schema_budget(size_t size)
{
	return SCH_STEPS_BASE + (uint64_t)size * SCH_STEPS_PER_BYTE;
}

size_t inbox__schema_each(inbox_schema *s, const json_t *j, size_t size,
                          int all, inbox_schema_error_fn fn, void *payload)
{
	vctx x = {.s = s, .all = all, .fn = fn, .payload = payload};
	x.budget = inbox__schema_budget(size);
	x.size = size;
	x.stack = STACK_HERE();
	uintptr_t left = stack_left(x.stack);
	x.max_stack = !left                 ? STACK_UNKNOWN
	              : left > STACK_MARGIN ? left - STACK_MARGIN
	                                    : 0;
	sch__memo_begin(&s->memo);
	inst v;
	inst_of(&v, j);
	validate(&x, s->root, &v, NULL);
	s->last_steps = x.steps;
	return x.nerrors;
}

uint64_t inbox__schema_last_steps(const inbox_schema *s)
{
	return s->last_steps;
}

typedef struct first {
	char *buf;
	size_t len;
} first;

static int first_error(const char *path, const char *kw, const char *spath,
                       const char *msg, void *payload)
{
	first *f = payload;
	if (!f->len)
		return 1;
	if (strcmp(kw, SCH_LIMIT_KEYWORD) == 0 && path[0])
		snprintf(f->buf, f->len, "%s (at %s)", msg, path);
	else if (strcmp(kw, SCH_LIMIT_KEYWORD) == 0)
		snprintf(f->buf, f->len, "%s", msg);
	else
		snprintf(f->buf, f->len, "schema violation at %s: %s: %s",
		         path[0] ? path : "(root)", kw, msg);
	return 1;
}

int inbox__schema_check(inbox_schema *s, const json_t *j, size_t size,
                        char *reason, size_t rlen)
{
	first f = {reason, reason ? rlen : 0};
	return inbox__schema_each(s, j, size, 0, first_error, &f) ? -1 : 0;
}

int inbox_schema_validate(inbox_schema *s, const char *json, size_t len,
                          int *valid, char *reason, size_t rlen)
{
	if (reason && rlen)
		reason[0] = '\0';
	if (!s || !json || !valid)
		return INBOX_ERR_INVALID;
	*valid = 0;
	json_t *doc;
	char err[400];
	int rc = inbox__json_parse(json, len, &doc, err, sizeof(err));
	if (rc != 0) {
		if (reason && rlen)
			snprintf(reason, rlen, "%s", err);
		return rc; /* INVALID, or NOMEM */
	}
	*valid = inbox__schema_check(s, doc, len, reason, rlen) == 0;
	json_decref(doc);
	return INBOX_OK;
}

static int ignore_error(const char *path, const char *kw, const char *spath,
                        const char *msg, void *payload)
{
	return 0;
}

int inbox_schema_validate_all(inbox_schema *s, const char *json, size_t len,
                              inbox_schema_error_fn fn, void *payload,
                              size_t *nerrors)
{
	if (nerrors)
		*nerrors = 0;
	if (!s || !json)
		return INBOX_ERR_INVALID;
	json_t *doc;
	char err[8];
	int rc = inbox__json_parse(json, len, &doc, err, sizeof(err));
	if (rc != 0)
		return rc; /* INVALID, or NOMEM */
	size_t n =
	    inbox__schema_each(s, doc, len, 1, fn ? fn : ignore_error, payload);
	json_decref(doc);
	if (nerrors)
		*nerrors = n;
	return INBOX_OK;
}
