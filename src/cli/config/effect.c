/*
 * effect: the consumer's SQL and versioned-upsert steps, read straight
 * into its declaration (include/inbox/decl.h), which copies what it is
 * given: the values are the YAML document's. The reader keeps only where
 * each step is, for the messages of start-up.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"
#include "cli/config/reader.h"
#include "effect/decl.h"

/* A refusal of the declaration: the reason at node n. */
static int refused(cfg_ctx *x, yaml_node_t *n, int rc, const char *prefix,
                   const char *why)
{
	if (rc == INBOX_ERR_NOMEM)
		return cfg_fail(x, n, "out of memory");
	return cfg_fail(x, n, "%s%s", prefix, why);
}

/* ---- - sql: ... params: [...] -------------------------------------- */

typedef struct sql_in {
	const char *text;
	int n;
	const char *ptrs[CLI_MAX_PARAMS];
	yaml_node_t *result;  /* result: (read after the step is added) */
	yaml_node_t *headers; /* headers: (likewise) */
} sql_in;

/* ---- result: the step's stored result -------------------------------- */

#define RESULT_MAX_VALUES 10000

/* One leaf of a step's result: "/pointer", "#column" or "#column:json"
 * (the step's first returned row), "{key}" or "=text"; into the
 * declaration's template, where the step's column is "#N.column". */
static json_t *result_leaf(cfg_ctx *x, yaml_node_t *n, int step)
{
	const char *s = cfg_sv(n);
	if (cfg_is_null(n)) {
		cfg_fail(x, n,
		         "result: a value is required (a JSON pointer, "
		         "#column, {key} or =text)");
		return NULL;
	}
	if (s[0] == '=' || !strcmp(s, "{key}") ||
	    (s[0] == '/' && inbox__pointer_valid(s)))
		return json_string(s);
	if (s[0] == '#' && s[1] && strcmp(s + 1, ":json") != 0) {
		char t[600];
		if ((size_t)snprintf(t, sizeof(t), "#%d.%s", step, s + 1) >=
		    sizeof(t)) {
			cfg_fail(x, n, "result: column name too long");
			return NULL;
		}
		return json_string(t);
	}
	cfg_fail(x, n,
	         "result: \"%s\" is neither a JSON pointer (/data/orderId), "
	         "a returned column (#column, #column:json), {key} nor a "
	         "literal (=text)",
	         s);
	return NULL;
}

/* A leaf of the result: `row` alone is the returned row itself, any
 * other scalar is read by result_leaf. */
static json_t *result_value(cfg_ctx *x, yaml_node_t *n, int depth, void *arg)
{
	int step = *(const int *)arg;
	if (depth == 0 && !strcmp(cfg_sv(n), "row")) {
		char t[32];
		snprintf(t, sizeof(t), "#%d", step);
		return json_string(t);
	}
	return result_leaf(x, n, step);
}

static int result_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	(void)x;
	((sql_in *)obj)->result = v;
	return 0;
}

/* Declare the step's result (after the step itself: it names it). */
static int step_result(cfg_ctx *x, yaml_node_t *n, cli_consumer *c, int step)
{
	json_t *t = cfg_json_tmpl(x, n, "result", RESULT_MAX_VALUES,
	                          result_value, &step);
	if (!t)
		return -1;
	char *text =
	    json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
	json_decref(t);
	if (!text)
		return cfg_fail(x, n, "out of memory");
	char why[512];
	int rc = inbox_decl_set_result(c->decl, text, why, sizeof(why));
	free(text);
	if (rc == INBOX_ERR_INVALID && strstr(why, "declared twice"))
		return cfg_fail(x, n,
		                "result: only one effect step may name the "
		                "result");
	return rc < 0 ? refused(x, n, rc, "", why) : 0;
}

static int headers_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	(void)x;
	((sql_in *)obj)->headers = v;
	return 0;
}

/* headers: {NAME: "text{leaf}text"} stored with the result (http://
 * routes); a leaf as in result: ({/pointer}, {#column}, {key}), the
 * step's "#column" becoming the declaration's "#N.column". */
static int step_headers(cfg_ctx *x, yaml_node_t *n, cli_consumer *c, int step)
{
	if (cfg_want(x, n, YAML_MAPPING_NODE, "headers"))
		return -1;
	const char *src = c->source ? c->source : "";
	if (strncmp(src, "http://", 7) != 0 && strncmp(src, "https://", 8) != 0)
		return cfg_fail(x, n,
		                "headers: only an http:// or https:// source "
		                "answers with headers");
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = cfg_node(x, p->key),
		            *v = cfg_node(x, p->value);
		if (v->type != YAML_SCALAR_NODE || cfg_is_null(v))
			return cfg_fail(x, v, "headers: a text template");
		inbox__buf t = {0};
		int bad = 0;
		for (const char *s = cfg_sv(v); *s; s++) {
			bad |= inbox__buf_putc(&t, *s);
			if (s[0] == '{' && s[1] == '#')
				bad |= inbox__buf_printf(&t, "#%d.", step), s++;
		}
		bad |= inbox__buf_putc(&t, '\0');
		char why[512];
		int rc = bad ? INBOX_ERR_NOMEM
		             : inbox__decl_add_header(c->decl, cfg_sv(k),
		                                      t.data, why, sizeof(why));
		inbox__buf_free(&t);
		if (rc < 0)
			return rc == INBOX_ERR_NOMEM
			           ? cfg_fail(x, v, "out of memory")
			           : cfg_fail(x, k, "%s", why);
	}
	return 0;
}

static int params_fn(cfg_ctx *x, yaml_node_t *params, void *obj)
{
	sql_in *s = obj;
	if (cfg_want(x, params, YAML_SEQUENCE_NODE, "params"))
		return -1;
	int n = cfg_count(params);
	if (n > CLI_MAX_PARAMS)
		return cfg_fail(x, params, "params: at most %d parameters",
		                CLI_MAX_PARAMS);
	for (int i = 0; i < n; i++) {
		char w[48];
		snprintf(w, sizeof(w), "params: $%d", i + 1);
		yaml_node_t *it =
		    cfg_node(x, params->data.sequence.items.start[i]);
		if (cfg_pointer_ref(x, it, w, &s->ptrs[i]))
			return -1;
	}
	s->n = n;
	return 0;
}

static const cfg_key sql_keys[] = {
    {"sql", CFG_REF, offsetof(sql_in, text), 0, 0, NULL, NULL, 0,
     "one SQL statement, run in the inbox's transaction"},
    {"params", CFG_FN, 0, 0, 0, params_fn, NULL, CFG_NULL_UNSET,
     "JSON pointers bound to $1..$n, in order"},
    {"when", CFG_LATER, 0, 0, 0, NULL, NULL, 0,
     "a filter: the step runs only for the messages it holds for"},
    {"result", CFG_FN, 0, 0, 0, result_fn, NULL, 0,
     "the result stored for duplicates: row, or a template"},
    {"headers", CFG_FN, 0, 0, 0, headers_fn, NULL, 0,
     "http:// routes: response headers stored with the result"},
};
const cfg_section cfg_sql_section = CFG_SECTION("sql", "effect step", sql_keys);

static int sql_step(cfg_ctx *x, yaml_node_t *m, cli_consumer *c, cli_step *s,
                    const char *what)
{
	sql_in in;
	memset(&in, 0, sizeof(in));
	s->kind = CLI_STEP_SQL;
	if (cfg_read(x, m, &cfg_sql_section, what, &in))
		return -1;
	yaml_node_t *sql = cfg_get(x, m, "sql");
	s->sql_pos = cfg_pos(sql);
	char why[512], prefix[64];
	int rc = inbox_decl_add_sql(c->decl, in.text, in.n, in.ptrs, why,
	                            sizeof(why));
	snprintf(prefix, sizeof(prefix), "%s: ", what);
	if (rc < 0)
		return refused(x, sql, rc, prefix, why);
	if (cfg_when(x, m, c->decl, INBOX_DECL_LAST_STEP))
		return -1;
	/* the step's number in the declaration: its place in effect: */
	int step = (int)(s - c->steps) + 1;
	if (in.result && step_result(x, in.result, c, step))
		return -1;
	return in.headers ? step_headers(x, in.headers, c, step) : 0;
}

/* ---- - upsert: {table, key, version, set} -------------------------- */

typedef struct column_in {
	const char *column, *value;
} column_in;

static const cfg_key column_keys[] = {
    {"column", CFG_REF, offsetof(column_in, column), 0, 0, NULL, NULL, 0,
     "a column of the upsert's table"},
    {"value", CFG_PTR_REF, offsetof(column_in, value), 0, 0, NULL, NULL, 0,
     "the JSON pointer of its value in the message"},
};
const cfg_section cfg_column_section =
    CFG_SECTION("column", "upsert key or version", column_keys);

static int column_pointer(cfg_ctx *x, yaml_node_t *n, const char *what,
                          const char **column, const char **value)
{
	column_in in = {NULL, NULL};
	if (cfg_want(x, n, YAML_MAPPING_NODE, what) ||
	    cfg_read(x, n, &cfg_column_section, what, &in))
		return -1;
	if (!in.column || !in.value)
		return cfg_fail(x, n, "%s needs both column: and value:", what);
	*column = in.column;
	*value = in.value;
	return 0;
}

typedef struct upsert_in {
	inbox_decl_upsert u;
	const char *cols[CLI_MAX_PARAMS], *vals[CLI_MAX_PARAMS];
} upsert_in;

static int key_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	upsert_in *in = obj;
	return column_pointer(x, v, "upsert key", &in->u.key_column,
	                      &in->u.key_pointer);
}

static int version_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	upsert_in *in = obj;
	return column_pointer(x, v, "upsert version", &in->u.version_column,
	                      &in->u.version_pointer);
}

static int set_fn(cfg_ctx *x, yaml_node_t *set, void *obj)
{
	upsert_in *in = obj;
	if (cfg_want(x, set, YAML_MAPPING_NODE, "upsert set"))
		return -1;
	int n = cfg_count(set);
	if (n > CLI_MAX_PARAMS - 2)
		return cfg_fail(x, set, "upsert set: at most %d columns",
		                CLI_MAX_PARAMS - 2);
	for (int i = 0; i < n; i++) {
		yaml_node_pair_t *p = &set->data.mapping.pairs.start[i];
		yaml_node_t *col = cfg_node(x, p->key),
		            *val = cfg_node(x, p->value);
		if (cfg_str_ref(x, col, "upsert set column", &in->cols[i]) ||
		    cfg_pointer_ref(x, val, "upsert set value", &in->vals[i]))
			return -1;
	}
	in->u.nset = n;
	in->u.set_columns = in->cols;
	in->u.set_pointers = in->vals;
	return 0;
}

static const cfg_key upsert_keys[] = {
    {"table", CFG_REF, offsetof(upsert_in, u.table), 0, 0, NULL, "upsert table",
     0, "the table (\"schema.table\" allowed)"},
    {"key", CFG_FN, 0, 0, 0, key_fn, NULL, 0,
     "{column, value}: the unique key column and its pointer"},
    {"version", CFG_FN, 0, 0, 0, version_fn, NULL, 0,
     "{column, value}: the version column and its (integer) pointer"},
    {"set", CFG_FN, 0, 0, 0, set_fn, NULL, CFG_NULL_UNSET,
     "column: pointer, further columns written"},
};
const cfg_section cfg_upsert_section =
    CFG_SECTION("upsert", "upsert", upsert_keys);

static const cfg_key upsert_step_keys[] = {
    {"upsert", CFG_LATER, 0, 0, 0, NULL, NULL, 0, "a versioned upsert step"},
    {"when", CFG_LATER, 0, 0, 0, NULL, NULL, 0,
     "a filter: the step runs only for the messages it holds for"},
};
const cfg_section cfg_upsert_step_section =
    CFG_SECTION("upsert_step", "effect step", upsert_step_keys);

static int upsert_step(cfg_ctx *x, yaml_node_t *m, cli_consumer *c, cli_step *s)
{
	upsert_in in;
	memset(&in, 0, sizeof(in));
	inbox_decl_upsert init = INBOX_DECL_UPSERT_INIT;
	in.u = init;
	s->kind = CLI_STEP_UPSERT;
	if (cfg_want(x, m, YAML_MAPPING_NODE, "upsert") ||
	    cfg_read(x, m, &cfg_upsert_section, NULL, &in))
		return -1;
	if (!in.u.table)
		return cfg_fail(x, m, "upsert: table is required");
	if (!in.u.key_column || !in.u.version_column)
		return cfg_fail(x, m,
		                "upsert needs key: {column, value} and "
		                "version: {column, value}");
	char why[512];
	int rc = inbox_decl_add_upsert(c->decl, &in.u, why, sizeof(why));
	return rc < 0 ? refused(x, m, rc, "", why) : 0;
}

/* effect: one step (a mapping) or a list of them. */
int cfg_effect(cfg_ctx *x, yaml_node_t *n, cli_consumer *c)
{
	yaml_node_t *one = n;
	int count = 1;
	if (n->type == YAML_SEQUENCE_NODE)
		count = cfg_count(n);
	else if (cfg_want(x, n, YAML_MAPPING_NODE, "effect"))
		return -1;
	if (count == 0)
		return cfg_fail(x, n, "effect: the list is empty");
	c->steps = calloc((size_t)count, sizeof(*c->steps));
	if (!c->steps)
		return cfg_fail(x, n, "out of memory");
	for (int i = 0; i < count; i++) {
		if (n->type == YAML_SEQUENCE_NODE)
			one = cfg_node(x, n->data.sequence.items.start[i]);
		char what[48];
		snprintf(what, sizeof(what), "effect step %d", i + 1);
		if (cfg_want(x, one, YAML_MAPPING_NODE, what))
			return -1;
		cli_step *s = &c->steps[i];
		c->nsteps = i + 1;
		s->pos = cfg_pos(one);
		yaml_node_t *up = cfg_get(x, one, "upsert");
		if (up) {
			if (cfg_check_keys(x, one, &cfg_upsert_step_section,
			                   what) ||
			    upsert_step(x, up, c, s) ||
			    cfg_when(x, one, c->decl, INBOX_DECL_LAST_STEP))
				return -1;
		} else if (cfg_get(x, one, "sql")) {
			if (sql_step(x, one, c, s, what))
				return -1;
		} else {
			return cfg_fail(
			    x, one,
			    "%s needs sql: (with params:) or upsert:", what);
		}
	}
	return 0;
}
