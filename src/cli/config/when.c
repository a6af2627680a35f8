/*
 * when: filters of a consumer, an effect step or an outbox step, read into
 * the declaration (inbox_decl_add_when, include/inbox/decl.h):
 *   when: {pointer: /type, equals: order.created}
 *   when: {pointer: /type, in: [order.created, order.paid]}
 *   when: {pointer: /data/coupon, exists: true}
 *   when: [{...}, {...}]            every one must hold
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/config/reader.h"

typedef struct when_in {
	inbox_decl_when w;
	const char *vals[INBOX_DECL_MAX_PARAMS];
	int nops;
} when_in;

/* A compared value: the scalar's text; an unquoted ~ / null / empty is
 * JSON null ("null"). */
static int value_ref(cfg_ctx *x, yaml_node_t *n, const char *what,
                     const char **out)
{
	if (cfg_want(x, n, YAML_SCALAR_NODE, what))
		return -1;
	*out = cfg_is_null(n) ? "null" : cfg_sv(n);
	return 0;
}

static int equals_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	when_in *in = obj;
	in->nops++;
	in->w.op = INBOX_DECL_EQUALS;
	in->w.nvalues = 1;
	return value_ref(x, v, "when equals", &in->vals[0]);
}

static int in_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	when_in *in = obj;
	in->nops++;
	in->w.op = INBOX_DECL_IN;
	if (cfg_want(x, v, YAML_SEQUENCE_NODE, "when in"))
		return -1;
	int n = cfg_count(v);
	if (n < 1 || n > INBOX_DECL_MAX_PARAMS)
		return cfg_fail(x, v, "when in: 1 to %d values",
		                INBOX_DECL_MAX_PARAMS);
	for (int i = 0; i < n; i++)
		if (value_ref(x, cfg_node(x, v->data.sequence.items.start[i]),
		              "when in", &in->vals[i]))
			return -1;
	in->w.nvalues = n;
	return 0;
}

static int exists_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	when_in *in = obj;
	in->nops++;
	in->w.op = INBOX_DECL_EXISTS;
	return cfg_bool_value(x, v, "when exists", &in->w.exists);
}

static const cfg_key when_keys[] = {
    {"pointer", CFG_PTR_REF, offsetof(when_in, w.pointer), 0, 0, NULL,
     "when pointer", 0, "the JSON pointer of the value tested"},
    {"equals", CFG_FN, 0, 0, 0, equals_fn, NULL, 0,
     "the value must be this (compared as text)"},
    {"in", CFG_FN, 0, 0, 0, in_fn, NULL, 0, "the value must be one of these"},
    {"exists", CFG_FN, 0, 0, 0, exists_fn, NULL, 0,
     "true: the pointer must resolve; false: it must not"},
};
const cfg_section cfg_when_section = CFG_SECTION("when", "when", when_keys);

static int one(cfg_ctx *x, yaml_node_t *m, inbox_decl *d,
               inbox_decl_scope scope, const char *what)
{
	when_in in;
	memset(&in, 0, sizeof(in));
	inbox_decl_when init = INBOX_DECL_WHEN_INIT;
	in.w = init;
	in.w.values = in.vals;
	if (cfg_want(x, m, YAML_MAPPING_NODE, what) ||
	    cfg_read(x, m, &cfg_when_section, what, &in))
		return -1;
	if (!in.w.pointer)
		return cfg_fail(x, m, "%s: pointer: is required", what);
	if (in.nops != 1)
		return cfg_fail(x, m,
		                "%s: one of equals:, in: or exists: is "
		                "required (and only one)",
		                what);
	char why[512];
	int rc = inbox_decl_add_when(d, scope, &in.w, why, sizeof(why));
	if (rc == INBOX_ERR_NOMEM)
		return cfg_fail(x, m, "out of memory");
	return rc < 0 ? cfg_fail(x, m, "%s: %s", what, why) : 0;
}

int cfg_when(cfg_ctx *x, yaml_node_t *map, inbox_decl *d,
             inbox_decl_scope scope)
{
	yaml_node_t *n = cfg_get(x, map, "when");
	if (!n || cfg_is_null(n))
		return 0;
	if (n->type != YAML_SEQUENCE_NODE)
		return one(x, n, d, scope, "when");
	if (cfg_count(n) == 0)
		return cfg_fail(x, n, "when: the list is empty");
	for (yaml_node_item_t *i = n->data.sequence.items.start;
	     i < n->data.sequence.items.top; i++)
		if (one(x, cfg_node(x, *i), d, scope, "when"))
			return -1;
	return 0;
}
