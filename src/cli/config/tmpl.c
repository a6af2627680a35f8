/*
 * JSON templates of the config (reader.h): an outbox step's body and an
 * effect step's result are both a YAML value read as JSON, objects and
 * lists as written and each leaf by its section's own reader.
 */
#include "base/json.h"
#include "cli/config/reader.h"

typedef struct tmpl {
	const char *what;
	int max, values;
	cfg_leaf_fn leaf;
	void *arg;
} tmpl;

static json_t *walk(cfg_ctx *x, yaml_node_t *n, tmpl *t, int depth)
{
	if (depth > 16) {
		cfg_fail(x, n, "%s: nested too deep", t->what);
		return NULL;
	}
	if (++t->values > t->max) {
		cfg_fail(x, n, "%s: more than %d values", t->what, t->max);
		return NULL;
	}
	if (n->type == YAML_SCALAR_NODE)
		return t->leaf(x, n, depth, t->arg);
	if (n->type == YAML_SEQUENCE_NODE) {
		json_t *a = json_array();
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     a && i < n->data.sequence.items.top; i++) {
			json_t *v = walk(x, cfg_node(x, *i), t, depth + 1);
			if (!v || json_array_append_new(a, v)) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	}
	if (n->type != YAML_MAPPING_NODE) {
		cfg_fail(x, n, "%s: unexpected node", t->what);
		return NULL;
	}
	json_t *o = json_object();
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     o && p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = cfg_node(x, p->key);
		if (!k || k->type != YAML_SCALAR_NODE) {
			cfg_fail(x, k, "%s: names must be plain text", t->what);
			json_decref(o);
			return NULL;
		}
		if (json_object_get(o, cfg_sv(k))) {
			cfg_fail(x, k, "%s: duplicate name \"%s\"", t->what,
			         cfg_sv(k));
			json_decref(o);
			return NULL;
		}
		json_t *v = walk(x, cfg_node(x, p->value), t, depth + 1);
		if (!v || json_object_set_new(o, cfg_sv(k), v)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

json_t *cfg_json_tmpl(cfg_ctx *x, yaml_node_t *n, const char *what,
                      int max_values, cfg_leaf_fn leaf, void *arg)
{
	tmpl t = {what, max_values, 0, leaf, arg};
	return walk(x, n, &t, 0);
}
