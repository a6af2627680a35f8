/*
 * One function per draft 7 keyword: check the value as the draft 7
 * meta-schema would, and store it in its compiled form. A keyword missing
 * from the table is unknown, and unknown means refused (compile.c).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/compile.h"

typedef int (*kw_fn)(cctx *x, sch_node *n, const char *k, json_t *v,
                     const char *base);

static int bad(cctx *x, sch_node *n, const char *k, const char *what)
{
	return sch__fail(x, "invalid schema at %s/%s: %s", n->path, k, what);
}

/* Compile the subschema at n->path/k[/tok] (tok NULL: none; tok_index
 * >= 0: an array index). */
static sch_node *sub(cctx *x, sch_node *n, const char *k, const char *tok,
                     size_t toklen, long tok_index, json_t *v, const char *base)
{
	char *p = sch__path_join(x, n->path, k, strlen(k));
	if (!p)
		return NULL;
	if (tok || tok_index >= 0) {
		char idx[24];
		if (!tok) {
			snprintf(idx, sizeof(idx), "%ld", tok_index);
			tok = idx;
			toklen = strlen(idx);
		}
		char *q = sch__path_join(x, p, tok, toklen);
		free(p);
		if (!q)
			return NULL;
		p = q;
	}
	sch_node *r = sch__compile_node(x, v, p, base);
	free(p);
	return r;
}

/* ---- annotations ---------------------------------------------------- */

static int kw_string(cctx *x, sch_node *n, const char *k, json_t *v,
                     const char *base)
{
	return json_is_string(v) ? 0 : bad(x, n, k, "must be a string");
}

static int kw_bool(cctx *x, sch_node *n, const char *k, json_t *v,
                   const char *base)
{
	return json_is_boolean(v) ? 0 : bad(x, n, k, "must be true or false");
}

static int kw_any(cctx *x, sch_node *n, const char *k, json_t *v,
                  const char *base)
{
	return 0;
}

static int kw_array(cctx *x, sch_node *n, const char *k, json_t *v,
                    const char *base)
{
	return json_is_array(v) ? 0 : bad(x, n, k, "must be an array");
}

/* ---- type, enum, const ------------------------------------------------ */

static const struct {
	const char *name;
	unsigned bit;
} TYPES[] = {{"null", SCH_T_NULL},      {"boolean", SCH_T_BOOLEAN},
             {"object", SCH_T_OBJECT},  {"array", SCH_T_ARRAY},
             {"number", SCH_T_NUMBER},  {"string", SCH_T_STRING},
             {"integer", SCH_T_INTEGER}};

static int type_bit(cctx *x, sch_node *n, json_t *v, unsigned *bit)
{
	if (json_is_string(v))
		for (size_t i = 0; i < sizeof(TYPES) / sizeof(TYPES[0]); i++)
			if (strcmp(json_string_value(v), TYPES[i].name) == 0) {
				*bit = TYPES[i].bit;
				return 0;
			}
	char shown[80], msg[200];
	sch__render(shown, sizeof(shown), v, 40);
	snprintf(msg, sizeof(msg),
	         "unknown type %s (null, boolean, object, array, number, "
	         "string, integer)",
	         shown);
	return bad(x, n, "type", msg);
}

static int kw_type(cctx *x, sch_node *n, const char *k, json_t *v,
                   const char *base)
{
	unsigned bit;
	if (!json_is_array(v)) {
		if (type_bit(x, n, v, &bit))
			return -1;
		n->types = bit;
		return 0;
	}
	if (json_array_size(v) == 0)
		return bad(x, n, k, "must list at least one type");
	for (size_t i = 0; i < json_array_size(v); i++) {
		if (type_bit(x, n, json_array_get(v, i), &bit))
			return -1;
		if (n->types & bit)
			return bad(x, n, k, "lists a type twice");
		n->types |= bit;
	}
	return 0;
}

static int kw_enum(cctx *x, sch_node *n, const char *k, json_t *v,
                   const char *base)
{
	if (!json_is_array(v))
		return bad(x, n, k, "must be an array");
	n->enum_values = v;
	n->has |= SCH_HAS_ENUM;
	return 0;
}

static int kw_const(cctx *x, sch_node *n, const char *k, json_t *v,
                    const char *base)
{
	n->const_value = v;
	n->has |= SCH_HAS_CONST;
	return 0;
}

/* ---- numbers ------------------------------------------------------------ */

static int kw_number(cctx *x, sch_node *n, const char *k, json_t *v,
                     const char *base)
{
	sch_num num;
	if (!sch__num_of(v, &num))
		return bad(x, n, k,
		           strcmp(k, "exclusiveMinimum") == 0 ||
		                   strcmp(k, "exclusiveMaximum") == 0
		               ? "must be a number (the draft 4 boolean form "
		                 "is not draft 7)"
		               : "must be a number");
	if (!strcmp(k, "minimum")) {
		n->minimum = num;
		n->has |= SCH_HAS_MINIMUM;
	} else if (!strcmp(k, "maximum")) {
		n->maximum = num;
		n->has |= SCH_HAS_MAXIMUM;
	} else if (!strcmp(k, "exclusiveMinimum")) {
		n->exmin = num;
		n->has |= SCH_HAS_EXMIN;
	} else if (!strcmp(k, "exclusiveMaximum")) {
		n->exmax = num;
		n->has |= SCH_HAS_EXMAX;
	} else {
		if ((num.is_int && num.i <= 0) || (!num.is_int && num.d <= 0))
			return bad(x, n, k, "must be greater than 0");
		n->multiple = num;
		n->has |= SCH_HAS_MULTIPLE;
	}
	return 0;
}

static int kw_count(cctx *x, sch_node *n, const char *k, json_t *v,
                    const char *base)
{
	sch_num num;
	if (!sch__num_of(v, &num) || !sch__num_is_integer(&num) ||
	    (num.is_int ? num.i < 0 : num.d < 0))
		return bad(x, n, k, "must be a non-negative integer");
	size_t c;
	if (num.is_int)
		c = (uint64_t)num.i > SIZE_MAX ? SIZE_MAX : (size_t)num.i;
	else
		c = num.d >= 1.8e19 ? SIZE_MAX : (size_t)num.d;
	if (!strcmp(k, "minLength"))
		n->min_length = c;
	else if (!strcmp(k, "maxLength"))
		n->max_length = c;
	else if (!strcmp(k, "minItems"))
		n->min_items = c;
	else if (!strcmp(k, "maxItems"))
		n->max_items = c;
	else if (!strcmp(k, "minProperties"))
		n->min_props = c;
	else
		n->max_props = c;
	return 0;
}

/* ---- strings ---------------------------------------------------------- */

static int regex(cctx *x, sch_node *n, const char *k, const char *tok,
                 json_t *v, sch_regex **out)
{
	char why[300];
	const char *src = json_string_value(v);
	size_t len = json_string_length(v);
	if (sch__regex_compile(x->s, src, len, out, why, sizeof(why)) == 0)
		return 0;
	if (strcmp(why, "out of memory") == 0)
		return sch__nomem(x);
	if (tok)
		return sch__fail(x,
		                 "invalid regular expression at %s/%s (%s): %s",
		                 n->path, k, tok, why);
	return sch__fail(x, "invalid regular expression at %s/%s: %s", n->path,
	                 k, why);
}

static int kw_pattern(cctx *x, sch_node *n, const char *k, json_t *v,
                      const char *base)
{
	if (!json_is_string(v))
		return bad(x, n, k, "must be a string");
	n->pattern_source = json_string_value(v);
	return regex(x, n, k, NULL, v, &n->pattern);
}

static int kw_format(cctx *x, sch_node *n, const char *k, json_t *v,
                     const char *base)
{
	if (!json_is_string(v))
		return bad(x, n, k, "must be a string");
	n->format = sch__format_lookup(json_string_value(v));
	if (n->format == SCH_FMT_NONE)
		return sch__fail(
		    x,
		    "unknown format \"%s\" at %s (supported: date-time, date, "
		    "time, email, hostname, ipv4, ipv6, uri, uri-reference, "
		    "uuid, json-pointer, relative-json-pointer, regex)",
		    json_string_value(v), sch__where(n->path));
	return 0;
}

/* ---- arrays ----------------------------------------------------------- */

static int schema_list(cctx *x, sch_node *n, const char *k, json_t *v,
                       const char *base, int nonempty, sch_node ***out,
                       size_t *count)
{
	if (!json_is_array(v) || (nonempty && json_array_size(v) == 0))
		return bad(x, n, k,
		           nonempty ? "must be a non-empty array of schemas"
		                    : "must be a schema or an array of "
		                      "schemas");
	size_t m = json_array_size(v);
	*out = calloc(m ? m : 1, sizeof(**out));
	if (!*out)
		return sch__nomem(x);
	*count = m;
	for (size_t i = 0; i < m; i++)
		if (!((*out)[i] = sub(x, n, k, NULL, 0, (long)i,
		                      json_array_get(v, i), base)))
			return -1;
	return 0;
}

static int kw_items(cctx *x, sch_node *n, const char *k, json_t *v,
                    const char *base)
{
	if (json_is_array(v)) {
		n->has_tuple = 1;
		return schema_list(x, n, k, v, base, 0, &n->tuple, &n->ntuple);
	}
	return (n->items = sub(x, n, k, NULL, 0, -1, v, base)) ? 0 : -1;
}

static int kw_schema(cctx *x, sch_node *n, const char *k, json_t *v,
                     const char *base)
{
	sch_node *s = sub(x, n, k, NULL, 0, -1, v, base);
	if (!s)
		return -1;
	if (!strcmp(k, "additionalItems"))
		n->additional_items = s;
	else if (!strcmp(k, "contains"))
		n->contains = s;
	else if (!strcmp(k, "additionalProperties"))
		n->additional_props = s;
	else if (!strcmp(k, "propertyNames"))
		n->property_names = s;
	else if (!strcmp(k, "not"))
		n->not_schema = s;
	else if (!strcmp(k, "if"))
		n->if_schema = s;
	else if (!strcmp(k, "then"))
		n->then_schema = s;
	else
		n->else_schema = s;
	return 0;
}

static int kw_unique(cctx *x, sch_node *n, const char *k, json_t *v,
                     const char *base)
{
	if (!json_is_boolean(v))
		return bad(x, n, k, "must be true or false");
	if (json_is_true(v))
		n->has |= SCH_HAS_UNIQUE;
	return 0;
}

static int kw_combinator(cctx *x, sch_node *n, const char *k, json_t *v,
                         const char *base)
{
	if (!strcmp(k, "allOf"))
		return schema_list(x, n, k, v, base, 1, &n->all_of,
		                   &n->nall_of);
	if (!strcmp(k, "anyOf"))
		return schema_list(x, n, k, v, base, 1, &n->any_of,
		                   &n->nany_of);
	return schema_list(x, n, k, v, base, 1, &n->one_of, &n->none_of);
}

/* ---- objects ------------------------------------------------------------- */

/* A unique-string array ("required", a "dependencies" entry). */
static int names(cctx *x, sch_node *n, const char *k, json_t *v, sch_prop **out,
                 size_t *count)
{
	if (!json_is_array(v))
		return bad(x, n, k, "must be an array of strings");
	size_t m = json_array_size(v);
	*out = calloc(m ? m : 1, sizeof(**out));
	if (!*out)
		return sch__nomem(x);
	*count = m;
	for (size_t i = 0; i < m; i++) {
		json_t *s = json_array_get(v, i);
		if (!json_is_string(s))
			return bad(x, n, k, "must be an array of strings");
		for (size_t j = 0; j < i; j++)
			if (sch__json_equal(s, json_array_get(v, j), NULL))
				return bad(x, n, k, "lists a name twice");
		(*out)[i].name = json_string_value(s);
		(*out)[i].len = json_string_length(s);
	}
	return 0;
}

static int kw_required(cctx *x, sch_node *n, const char *k, json_t *v,
                       const char *base)
{
	return names(x, n, k, v, &n->required, &n->nrequired);
}

static int kw_properties(cctx *x, sch_node *n, const char *k, json_t *v,
                         const char *base)
{
	if (!json_is_object(v))
		return bad(x, n, k, "must be an object of schemas");
	size_t m = json_object_size(v), i = 0;
	n->props = calloc(m ? m : 1, sizeof(*n->props));
	if (!n->props)
		return sch__nomem(x);
	const char *name;
	size_t len;
	json_t *s;
	json_object_keylen_foreach(v, name, len, s)
	{
		sch_prop *p = &n->props[i++];
		p->name = name;
		p->len = len;
		n->nprops = i;
		if (!(p->node = sub(x, n, k, name, len, -1, s, base)))
			return -1;
	}
	return 0;
}

static int kw_pattern_properties(cctx *x, sch_node *n, const char *k, json_t *v,
                                 const char *base)
{
	if (!json_is_object(v))
		return bad(x, n, k, "must be an object of schemas");
	size_t m = json_object_size(v), i = 0;
	n->pprops = calloc(m ? m : 1, sizeof(*n->pprops));
	if (!n->pprops)
		return sch__nomem(x);
	const char *pat;
	size_t len;
	json_t *s;
	json_object_keylen_foreach(v, pat, len, s)
	{
		sch_pprop *p = &n->pprops[i++];
		n->npprops = i;
		p->source = pat;
		json_t *tmp = json_stringn_nocheck(pat, len);
		if (!tmp)
			return sch__nomem(x);
		int rc = regex(x, n, k, pat, tmp, &p->re);
		json_decref(tmp);
		if (rc || !(p->node = sub(x, n, k, pat, len, -1, s, base)))
			return -1;
	}
	return 0;
}

static int kw_dependencies(cctx *x, sch_node *n, const char *k, json_t *v,
                           const char *base)
{
	if (!json_is_object(v))
		return bad(x, n, k, "must be an object");
	size_t m = json_object_size(v), i = 0;
	n->deps = calloc(m ? m : 1, sizeof(*n->deps));
	if (!n->deps)
		return sch__nomem(x);
	const char *name;
	size_t len;
	json_t *d;
	json_object_keylen_foreach(v, name, len, d)
	{
		sch_dep *p = &n->deps[i++];
		n->ndeps = i;
		p->name = name;
		p->len = len;
		if (json_is_array(d)) {
			if (names(x, n, k, d, &p->required, &p->nrequired))
				return -1;
		} else if (!(p->node = sub(x, n, k, name, len, -1, d, base))) {
			return -1;
		}
	}
	return 0;
}

static int kw_definitions(cctx *x, sch_node *n, const char *k, json_t *v,
                          const char *base)
{
	if (!json_is_object(v))
		return bad(x, n, k, "must be an object of schemas");
	const char *name;
	size_t len;
	json_t *s;
	/* Compiled (and so checked) even when nothing refers to them: an
	 * unsupported keyword is refused wherever it is. */
	json_object_keylen_foreach(v, name, len, s)
	{
		if (!sub(x, n, k, name, len, -1, s, base))
			return -1;
	}
	return 0;
}

/* ---- the table ----------------------------------------------------------- */

static const struct {
	const char *name;
	kw_fn fn;
} KEYWORDS[] = {
    /* core and annotations */
    {"$schema", kw_any}, /* checked by compile.c */
    {"$id", kw_any},     /* applied by compile.c */
    {"$comment", kw_string},
    {"title", kw_string},
    {"description", kw_string},
    {"default", kw_any},
    {"examples", kw_array},
    {"readOnly", kw_bool},
    {"writeOnly", kw_bool},
    {"definitions", kw_definitions},
    /* any instance */
    {"type", kw_type},
    {"enum", kw_enum},
    {"const", kw_const},
    /* numbers */
    {"multipleOf", kw_number},
    {"maximum", kw_number},
    {"exclusiveMaximum", kw_number},
    {"minimum", kw_number},
    {"exclusiveMinimum", kw_number},
    /* strings */
    {"maxLength", kw_count},
    {"minLength", kw_count},
    {"pattern", kw_pattern},
    {"format", kw_format},
    /* arrays */
    {"items", kw_items},
    {"additionalItems", kw_schema},
    {"maxItems", kw_count},
    {"minItems", kw_count},
    {"uniqueItems", kw_unique},
    {"contains", kw_schema},
    /* objects */
    {"maxProperties", kw_count},
    {"minProperties", kw_count},
    {"required", kw_required},
    {"properties", kw_properties},
    {"patternProperties", kw_pattern_properties},
    {"additionalProperties", kw_schema},
    {"dependencies", kw_dependencies},
    {"propertyNames", kw_schema},
    /* applicators */
    {"if", kw_schema},
    {"then", kw_schema},
    {"else", kw_schema},
    {"allOf", kw_combinator},
    {"anyOf", kw_combinator},
    {"oneOf", kw_combinator},
    {"not", kw_schema},
};

int sch__keyword(cctx *x, sch_node *n, const char *k, json_t *v,
                 const char *base)
{
	for (size_t i = 0; i < sizeof(KEYWORDS) / sizeof(KEYWORDS[0]); i++)
		if (strcmp(KEYWORDS[i].name, k) == 0)
			return KEYWORDS[i].fn(x, n, k, v, base);
	return sch__unknown(x, n, k);
}

static int prop_cmp(const void *a, const void *b)
{
	const sch_prop *p = a, *q = b;
	size_t m = p->len < q->len ? p->len : q->len;
	int c = memcmp(p->name, q->name, m);
	if (c)
		return c;
	return p->len < q->len ? -1 : p->len > q->len;
}

int sch__keywords_done(cctx *x, sch_node *n)
{
	if (n->nprops > 1)
		qsort(n->props, n->nprops, sizeof(*n->props), prop_cmp);
	return 0;
}

/* For validate.c: the property schema of `name`, or NULL. */
sch_node *sch__prop_find(const sch_node *n, const char *name, size_t len)
{
	sch_prop key = {name, len, NULL};
	const sch_prop *p = n->nprops ? bsearch(&key, n->props, n->nprops,
	                                        sizeof(*n->props), prop_cmp)
	                              : NULL;
	return p ? p->node : NULL;
}
