/*
 * Validating an instance against a compiled schema. Walks the node graph
 * and the parsed payload; the instance path lives in frames on the C
 * stack and is rendered only when a violation is reported, so a valid
 * message costs no allocation. Inside anyOf, oneOf, not, if, contains and
 * propertyNames the evaluation is quiet (only a yes/no is needed) and
 * stops at the first failure.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "schema/node.h"

/* Nested evaluations before giving up. The parser bounds the depth of a
 * payload and the compiler refuses cycles that do not descend, so this
 * only guards the C stack against pathological schemas. */
#define MAX_DEPTH 4096
/* uniqueItems compares pairs up to this size, and sorts hashes above. */
#define UNIQUE_PAIRWISE_MAX 64

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
	int stop;  /* the callback asked to stop */
	inbox_schema_error_fn fn;
	void *payload;
	size_t nerrors;
	unsigned depth;
} vctx;

static int validate(vctx *x, const sch_node *n, const inst *v, const ipath *ip);

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
static void
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

static int inst_equal(const inst *v, const json_t *b)
{
	if (v->j)
		return sch__json_equal(v->j, b);
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
	char a[40], b[40];
	const sch_num *num = &v->num;
	if ((n->has & SCH_HAS_MINIMUM) && sch__num_cmp(num, &n->minimum) < 0) {
		sch__render_num(a, sizeof(a), num);
		sch__render_num(b, sizeof(b), &n->minimum);
		report(x, ip, n, "minimum", "%s is less than %s", a, b);
		FAIL();
	}
	if ((n->has & SCH_HAS_MAXIMUM) && sch__num_cmp(num, &n->maximum) > 0) {
		sch__render_num(a, sizeof(a), num);
		sch__render_num(b, sizeof(b), &n->maximum);
		report(x, ip, n, "maximum", "%s is greater than %s", a, b);
		FAIL();
	}
	if ((n->has & SCH_HAS_EXMIN) && sch__num_cmp(num, &n->exmin) <= 0) {
		sch__render_num(a, sizeof(a), num);
		sch__render_num(b, sizeof(b), &n->exmin);
		report(x, ip, n, "exclusiveMinimum",
		       "%s is not greater than %s", a, b);
		FAIL();
	}
	if ((n->has & SCH_HAS_EXMAX) && sch__num_cmp(num, &n->exmax) >= 0) {
		sch__render_num(a, sizeof(a), num);
		sch__render_num(b, sizeof(b), &n->exmax);
		report(x, ip, n, "exclusiveMaximum", "%s is not less than %s",
		       a, b);
		FAIL();
	}
	if ((n->has & SCH_HAS_MULTIPLE) && !multiple_of(num, &n->multiple)) {
		sch__render_num(a, sizeof(a), num);
		sch__render_num(b, sizeof(b), &n->multiple);
		report(x, ip, n, "multipleOf", "%s is not a multiple of %s", a,
		       b);
		FAIL();
	}
	return ok;
}

static int check_string(vctx *x, const sch_node *n, const inst *v,
                        const ipath *ip)
{
	int ok = 1;
	char a[200];
	/* Byte length bounds the code point count from above. */
	if ((n->min_length > 0 || v->len > n->max_length)) {
		size_t cps = sch__utf8_count(v->str, v->len);
		if (cps < n->min_length) {
			report(x, ip, n, "minLength",
			       "%s has %zu characters, fewer than %zu",
			       shown(v, a, sizeof(a)), cps, n->min_length);
			FAIL();
		}
		if (cps > n->max_length) {
			report(x, ip, n, "maxLength",
			       "%s has %zu characters, more than %zu",
			       shown(v, a, sizeof(a)), cps, n->max_length);
			FAIL();
		}
	}
	if (n->pattern) {
		int m = sch__regex_match(x->s, n->pattern, v->str, v->len);
		if (m <= 0) {
			char p[200];
			sch__render_str(p, sizeof(p), n->pattern_source,
			                strlen(n->pattern_source), 100);
			if (m < 0)
				report(x, ip, n, "pattern",
				       "%s is too costly to match against %s "
				       "(backtracking limit)",
				       shown(v, a, sizeof(a)), p);
			else
				report(x, ip, n, "pattern",
				       "%s does not match %s",
				       shown(v, a, sizeof(a)), p);
			FAIL();
		}
	}
	if (n->format && !sch__format_check(n->format, v->str, v->len)) {
		report(x, ip, n, "format", "%s is not a valid %s",
		       shown(v, a, sizeof(a)), sch__format_name(n->format));
		FAIL();
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

/* First pair of equal items (i < j), or 0 if all are distinct. Small
 * arrays compare pairs; large ones sort hashes (one allocation) so a big
 * payload cannot cost n^2. */
static int find_duplicate(const json_t *a, size_t *pi, size_t *pj)
{
	size_t n = json_array_size(a);
	hashed *h = n > UNIQUE_PAIRWISE_MAX ? malloc(n * sizeof(*h)) : NULL;
	if (!h) {
		for (size_t j = 1; j < n; j++)
			for (size_t i = 0; i < j; i++)
				if (sch__json_equal(json_array_get(a, i),
				                    json_array_get(a, j))) {
					*pi = i;
					*pj = j;
					return 1;
				}
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		h[i].h = sch__json_hash(json_array_get(a, i));
		h[i].i = i;
	}
	qsort(h, n, sizeof(*h), hashed_cmp);
	int found = 0;
	for (size_t s = 0; s < n && !found; s++)
		for (size_t t = s + 1; t < n && h[t].h == h[s].h && !found; t++)
			if (sch__json_equal(json_array_get(a, h[s].i),
			                    json_array_get(a, h[t].i))) {
				*pi = h[s].i < h[t].i ? h[s].i : h[t].i;
				*pj = h[s].i < h[t].i ? h[t].i : h[s].i;
				found = 1;
			}
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
	size_t i = 0, j = 0;
	if ((n->has & SCH_HAS_UNIQUE) && find_duplicate(a, &i, &j)) {
		report(x, ip, n, "uniqueItems", "items %zu and %zu are equal",
		       i, j);
		FAIL();
	}
	if (n->items) {
		for (i = 0; i < size; i++)
			if (!item(x, n->items, a, i, ip))
				FAIL();
	} else if (n->has_tuple) {
		for (i = 0; i < size && i < n->ntuple; i++)
			if (!item(x, n->tuple[i], a, i, ip))
				FAIL();
		const sch_node *more = n->additional_items;
		if (more && more->boolean == 0 && size > n->ntuple) {
			report(x, ip, n, "additionalItems",
			       "has %zu items, at most %zu allowed", size,
			       n->ntuple);
			FAIL();
		} else if (more) {
			for (i = n->ntuple; i < size; i++)
				if (!item(x, more, a, i, ip))
					FAIL();
		}
	}
	if (n->contains) {
		int found = 0;
		x->quiet++;
		for (i = 0; i < size && !found; i++)
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

/* properties, patternProperties, additionalProperties: one pass over
 * the instance's members. */
static int check_members(vctx *x, const sch_node *n, const json_t *o,
                         const ipath *ip)
{
	int ok = 1;
	const char *k;
	size_t klen;
	json_t *mv;
	char a[200];
	json_object_keylen_foreach((json_t *)o, k, klen, mv)
	{
		int matched = 0;
		sch_node *p = sch__prop_find(n, k, klen);
		if (p) {
			matched = 1;
			if (!member(x, p, k, klen, mv, ip))
				FAIL();
		}
		for (size_t i = 0; i < n->npprops; i++) {
			int m =
			    sch__regex_match(x->s, n->pprops[i].re, k, klen);
			if (m < 0) {
				sch__render_str(a, sizeof(a), k, klen, 60);
				report(x, ip, n, "patternProperties",
				       "property name %s is too costly to "
				       "match (backtracking limit)",
				       a);
				FAIL();
			} else if (m) {
				matched = 1;
				if (!member(x, n->pprops[i].node, k, klen, mv,
				            ip))
					FAIL();
			}
		}
		if (matched || !n->additional_props)
			continue;
		if (n->additional_props->boolean == 0) {
			sch__render_str(a, sizeof(a), k, klen, 60);
			report(x, ip, n, "additionalProperties",
			       "property %s is not allowed", a);
			FAIL();
		} else if (!member(x, n->additional_props, k, klen, mv, ip)) {
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
	char a[200];
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
	for (size_t i = 0; i < n->nrequired; i++)
		if (!json_object_getn(o, n->required[i].name,
		                      n->required[i].len)) {
			sch__render_str(a, sizeof(a), n->required[i].name,
			                n->required[i].len, 60);
			report(x, ip, n, "required", "missing property %s", a);
			FAIL();
		}
	if ((n->nprops || n->npprops || n->additional_props) &&
	    !check_members(x, n, o, ip))
		FAIL();
	if (n->property_names) {
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
				report(x, ip, n, "propertyNames",
				       "property name %s is not allowed",
				       shown(&name, a, sizeof(a)));
				FAIL();
			}
		}
	}
	for (size_t i = 0; i < n->ndeps; i++) {
		const sch_dep *d = &n->deps[i];
		if (!json_object_getn(o, d->name, d->len))
			continue;
		if (d->node) {
			if (!validate(x, d->node, v, ip))
				FAIL();
			continue;
		}
		for (size_t j = 0; j < d->nrequired; j++)
			if (!json_object_getn(o, d->required[j].name,
			                      d->required[j].len)) {
				char b[200];
				sch__render_str(a, sizeof(a), d->name, d->len,
				                60);
				sch__render_str(b, sizeof(b),
				                d->required[j].name,
				                d->required[j].len, 60);
				report(x, ip, n, "dependencies",
				       "property %s requires property %s", a,
				       b);
				FAIL();
			}
	}
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
	if (n->none_of) {
		size_t first = 0, count = 0;
		for (size_t i = 0; i < n->none_of && count < 2; i++)
			if (quietly(x, n->one_of[i], v, ip)) {
				if (count++ == 0)
					first = i;
				else {
					report(x, ip, n, "oneOf",
					       "matches schemas %zu and %zu, "
					       "but must match exactly one",
					       first, i);
				}
			}
		if (count == 0)
			report(x, ip, n, "oneOf",
			       "matches none of the %zu schemas", n->none_of);
		if (count != 1)
			FAIL();
	}
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

static int validate_node(vctx *x, const sch_node *n, const inst *v,
                         const ipath *ip)
{
	char a[200];
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
		return validate(x, n->ref, v, ip);
	if (n->types && !(n->types & v->type)) {
		char want[120];
		types_text(n->types, want, sizeof(want));
		report(x, ip, n, "type", "expected %s, got %s %s", want,
		       type_name(v->type), shown(v, a, sizeof(a)));
		FAIL();
	}
	if ((n->has & SCH_HAS_CONST) && !inst_equal(v, n->const_value)) {
		char want[200];
		sch__render(want, sizeof(want), n->const_value, 80);
		report(x, ip, n, "const", "%s is not %s",
		       shown(v, a, sizeof(a)), want);
		FAIL();
	}
	if (n->has & SCH_HAS_ENUM) {
		size_t i, m = json_array_size(n->enum_values);
		for (i = 0; i < m; i++)
			if (inst_equal(v, json_array_get(n->enum_values, i)))
				break;
		if (i == m) {
			char want[300];
			sch__render(want, sizeof(want), n->enum_values, 160);
			report(x, ip, n, "enum", "%s is not one of %s",
			       shown(v, a, sizeof(a)), want);
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

static int validate(vctx *x, const sch_node *n, const inst *v, const ipath *ip)
{
	if (x->depth >= MAX_DEPTH) {
		report(x, ip, n, "$ref",
		       "validation nested more than %d levels deep", MAX_DEPTH);
		return 0;
	}
	x->depth++;
	int r = validate_node(x, n, v, ip);
	x->depth--;
	return r;
}

/* ---- entry points -----------------------------------------------------------
 */

size_t inbox__schema_each(inbox_schema *s, const json_t *j, int all,
                          inbox_schema_error_fn fn, void *payload)
{
	vctx x = {s, 0, all, 0, fn, payload, 0, 0};
	inst v;
	inst_of(&v, j);
	validate(&x, s->root, &v, NULL);
	return x.nerrors;
}

typedef struct first {
	char *buf;
	size_t len;
} first;

static int first_error(const char *path, const char *kw, const char *spath,
                       const char *msg, void *payload)
{
	first *f = payload;
	if (f->len)
		snprintf(f->buf, f->len, "schema violation at %s: %s: %s",
		         path[0] ? path : "(root)", kw, msg);
	return 1;
}

int inbox__schema_check(inbox_schema *s, const json_t *j, char *reason,
                        size_t rlen)
{
	first f = {reason, reason ? rlen : 0};
	return inbox__schema_each(s, j, 0, first_error, &f) ? -1 : 0;
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
	if (inbox__json_parse(json, len, &doc, err, sizeof(err)) != 0) {
		if (reason && rlen)
			snprintf(reason, rlen, "%s", err);
		return INBOX_ERR_INVALID;
	}
	*valid = inbox__schema_check(s, doc, reason, rlen) == 0;
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
	if (inbox__json_parse(json, len, &doc, err, sizeof(err)) != 0)
		return INBOX_ERR_INVALID;
	size_t n =
	    inbox__schema_each(s, doc, 1, fn ? fn : ignore_error, payload);
	json_decref(doc);
	if (nerrors)
		*nerrors = n;
	return INBOX_OK;
}
