/*
 * The YAML config file, loaded with libyaml into a node tree
 * (yaml_parser_load) and walked with strict checks: every mapping lists the
 * keys it accepts, so a typo is an error at its line rather than a silently
 * ignored setting.
 */
#include "cli/config.h"

#include <ctype.h>
#include <errno.h>
#include <inbox/sys/source.h>
#include <inbox/sys/store.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/buf.h"
#include "base/json.h"
#include "cli/cli.h"
#include "cli/http.h"

typedef struct ctx {
	yaml_document_t doc;
	size_t body_values; /* of the outbox body being read */
	const char *path;
	char dir[4096]; /* directory of the file, "" when it is the cwd */
	char *err;
	size_t errlen;
} ctx;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
fail(ctx *x, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n)
		snprintf(x->err, x->errlen, "%s:%zu:%zu: %s", x->path,
		         n->start_mark.line + 1, n->start_mark.column + 1, msg);
	else
		snprintf(x->err, x->errlen, "%s: %s", x->path, msg);
	return -1;
}

static cli_pos pos_of(const yaml_node_t *n)
{
	cli_pos p = {(int)n->start_mark.line + 1,
	             (int)n->start_mark.column + 1};
	return p;
}

static yaml_node_t *node(ctx *x, int i)
{
	return yaml_document_get_node(&x->doc, i);
}

static const char *type_name(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_SCALAR_NODE:
		return "a single value";
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return "nothing";
	}
}

static const char *sv(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

/* An unquoted ~, null or empty value. */
static int is_null(const yaml_node_t *n)
{
	if (n->type != YAML_SCALAR_NODE ||
	    n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	const char *s = sv(n);
	return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
	       strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

/* ---- key checking: unknown and duplicate keys ---------------------- */

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 40 || lb > 40)
		return 99;
	size_t d[41][41];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
			c = c < del ? c : del;
			d[i][j] = c < ins ? c : ins;
		}
	return d[la][lb];
}

static int check_keys(ctx *x, yaml_node_t *map, const char *what,
                      const char *const *allowed)
{
	yaml_node_pair_t *p, *q;
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = node(x, p->key);
		if (!k || k->type != YAML_SCALAR_NODE)
			return fail(x, k, "%s: keys must be plain names", what);
		int known = 0;
		const char *near = NULL;
		size_t best = 3;
		for (const char *const *a = allowed; *a; a++) {
			if (strcmp(*a, sv(k)) == 0) {
				known = 1;
				break;
			}
			size_t dist = edit_distance(*a, sv(k));
			if (dist < best) {
				best = dist;
				near = *a;
			}
		}
		if (!known) {
			char list[512] = "";
			size_t o = 0;
			for (const char *const *a = allowed; *a && o < 400; a++)
				o += (size_t)snprintf(
				    list + o, sizeof(list) - o, "%s%s",
				    a == allowed ? "" : ", ", *a);
			if (near)
				return fail(x, k,
				            "unknown key \"%s\" in %s (did you "
				            "mean \"%s\"?)",
				            sv(k), what, near);
			return fail(x, k,
			            "unknown key \"%s\" in %s (known: %s)",
			            sv(k), what, list);
		}
		for (q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *k2 = node(x, q->key);
			if (k2 && k2->type == YAML_SCALAR_NODE &&
			    strcmp(sv(k2), sv(k)) == 0)
				return fail(
				    x, k,
				    "duplicate key \"%s\" in %s (first at "
				    "line %zu)",
				    sv(k), what, k2->start_mark.line + 1);
		}
	}
	return 0;
}

/* Value node of `key` in a mapping, or NULL. */
static yaml_node_t *get(ctx *x, yaml_node_t *map, const char *key)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(x, p->key);
		if (k && k->type == YAML_SCALAR_NODE && strcmp(sv(k), key) == 0)
			return node(x, p->value);
	}
	return NULL;
}

static int want(ctx *x, yaml_node_t *n, yaml_node_type_t type, const char *what)
{
	if (n->type == type)
		return 0;
	const char *need = type == YAML_SCALAR_NODE     ? "a single value"
	                   : type == YAML_SEQUENCE_NODE ? "a list"
	                                                : "a mapping";
	return fail(x, n, "%s must be %s, not %s", what, need, type_name(n));
}

/* ---- typed values -------------------------------------------------- */

/* A text value, borrowed from the document. */
static int str_ref(ctx *x, yaml_node_t *n, const char *what, const char **out)
{
	if (want(x, n, YAML_SCALAR_NODE, what))
		return -1;
	if (is_null(n))
		return fail(x, n, "%s needs a value", what);
	*out = sv(n);
	return 0;
}

static int str_value(ctx *x, yaml_node_t *n, const char *what, char **out)
{
	const char *v;
	if (str_ref(x, n, what, &v))
		return -1;
	free(*out);
	*out = strdup(v);
	return *out ? 0 : fail(x, n, "out of memory");
}

static int int_value(ctx *x, yaml_node_t *n, const char *what, long long lo,
                     long long hi, long long *out)
{
	if (want(x, n, YAML_SCALAR_NODE, what))
		return -1;
	char *end;
	errno = 0;
	long long v = strtoll(sv(n), &end, 10);
	if (!*sv(n) || *end || errno)
		return fail(x, n, "%s must be an integer, not \"%s\"", what,
		            sv(n));
	if (v < lo || v > hi)
		return fail(x, n, "%s must be between %lld and %lld (got %lld)",
		            what, lo, hi, v);
	*out = v;
	return 0;
}

static int bool_value(ctx *x, yaml_node_t *n, const char *what, int *out)
{
	if (want(x, n, YAML_SCALAR_NODE, what))
		return -1;
	const char *s = sv(n);
	if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on"))
		*out = 1;
	else if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off"))
		*out = 0;
	else
		return fail(x, n, "%s must be true or false, not \"%s\"", what,
		            s);
	return 0;
}

int cli_parse_duration_ms(const char *s, int64_t *ms)
{
	char *end;
	errno = 0;
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	double v = strtod(s, &end);
	if (errno || end == s)
		return -1;
	double mul;
	if (!strcmp(end, "ms"))
		mul = 1;
	else if (!strcmp(end, "s"))
		mul = 1000;
	else if (!strcmp(end, "m"))
		mul = 60e3;
	else if (!strcmp(end, "h"))
		mul = 3600e3;
	else if (!strcmp(end, "d"))
		mul = 86400e3;
	else
		return -1;
	double r = v * mul;
	if (r > 9.2e15)
		return -1;
	*ms = (int64_t)(r + 0.5);
	return 0;
}

int cli_parse_size(const char *s, size_t *bytes)
{
	char *end;
	errno = 0;
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	unsigned long long mul;
	if (!*end || !strcmp(end, "B"))
		mul = 1;
	else if (!strcmp(end, "KiB"))
		mul = 1024ULL;
	else if (!strcmp(end, "MiB"))
		mul = 1024ULL * 1024;
	else if (!strcmp(end, "GiB"))
		mul = 1024ULL * 1024 * 1024;
	else
		return -1;
	if (v > (unsigned long long)SIZE_MAX / mul)
		return -1;
	*bytes = (size_t)(v * mul);
	return 0;
}

static int duration_value(ctx *x, yaml_node_t *n, const char *what,
                          int64_t min_ms, int64_t max_ms, int64_t *out)
{
	if (want(x, n, YAML_SCALAR_NODE, what))
		return -1;
	int64_t ms;
	if (cli_parse_duration_ms(sv(n), &ms) < 0)
		return fail(x, n,
		            "%s: \"%s\" is not a duration (write e.g. 500ms, "
		            "30s, 5m, 2h, 7d)",
		            what, sv(n));
	if (ms < min_ms || ms > max_ms)
		return fail(x, n, "%s: %s is out of range", what, sv(n));
	*out = ms;
	return 0;
}

/* A JSON pointer, borrowed from the document. */
static int pointer_ref(ctx *x, yaml_node_t *n, const char *what,
                       const char **out)
{
	if (want(x, n, YAML_SCALAR_NODE, what))
		return -1;
	if (!inbox__pointer_valid(sv(n)))
		return fail(x, n,
		            "%s: \"%s\" is not a JSON pointer (RFC 6901: empty "
		            "for the whole message, or /name/name..., with ~0 "
		            "for ~ and ~1 for /)",
		            what, sv(n));
	*out = sv(n);
	return 0;
}

static int pointer_value(ctx *x, yaml_node_t *n, const char *what, char **out)
{
	const char *v;
	if (pointer_ref(x, n, what, &v))
		return -1;
	free(*out);
	*out = strdup(v);
	return *out ? 0 : fail(x, n, "out of memory");
}

/* ---- URLs ---------------------------------------------------------- */

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* Prefix a relative path with the config file's directory. */
static int rebase(ctx *x, inbox__buf *b, const char *path, size_t len)
{
	if (x->dir[0] && len > 0 && path[0] != '/')
		if (inbox__buf_printf(b, "%s/", x->dir) < 0)
			return -1;
	return inbox__buf_append(b, path, len);
}

/* The schemes the registry knows (`schemes` calls fn(i) for i = 0, 1, ...
 * until NULL), "a, b or c", into buf. */
static const char *scheme_list(const char *(*schemes)(size_t), char *buf,
                               size_t len)
{
	size_t n = 0, at = 0;
	while (schemes(n))
		n++;
	buf[0] = '\0';
	for (size_t i = 0; i < n && at < len; i++) {
		int w = snprintf(buf + at, len - at, "%s%s",
		                 i == 0       ? ""
		                 : i + 1 == n ? " or "
		                              : ", ",
		                 schemes(i));
		if (w < 0)
			break;
		at += (size_t)w;
	}
	return buf;
}

/* SCHEME:PATH[?k=v&...] (no "//" authority: sqlite:PATH, jsonl:PATH):
 * a relative PATH, and the file a checkpoint= parameter names, are
 * relative to the config file. "-" (stdin) and names starting with ':'
 * (a database's special names) are not paths. A URL with an authority
 * (SCHEME://...) is kept as it is. */
static char *rebase_url(ctx *x, const char *url)
{
	size_t lead = strcspn(url, ":") + 1;
	const char *p = url + lead;
	if (p[0] == '/' && p[1] == '/')
		return strdup(url);
	inbox__buf b = INBOX__BUF_INIT;
	size_t n = strcspn(p, "?");
	int bad = inbox__buf_append(&b, url, lead);
	if ((n == 1 && p[0] == '-') || p[0] == ':')
		bad |= inbox__buf_append(&b, p, n);
	else
		bad |= rebase(x, &b, p, n);
	p += n;
	while (*p && !bad) {
		/* p at '?' or '&' */
		bad |= inbox__buf_putc(&b, *p++);
		size_t m = strcspn(p, "&");
		if (has_prefix(p, "checkpoint=")) {
			bad |= inbox__buf_puts(&b, "checkpoint=");
			bad |= rebase(x, &b, p + 11, m - 11);
		} else {
			bad |= inbox__buf_append(&b, p, m);
		}
		p += m;
	}
	if (bad) {
		inbox__buf_free(&b);
		return NULL;
	}
	return b.data;
}

/* A URL of a scheme the registry (`known`) has, with something after the
 * colon other than a bare query. */
static int usable_url(const char *url, int (*known)(const char *))
{
	const char *colon = strchr(url, ':');
	return colon && colon[1] && colon[1] != '?' && known(url);
}

/* Any scheme a registered store takes: the built-in ones, and a third
 * party's registered before the config is read. */
static int store_url(ctx *x, yaml_node_t *n, const char *what, char **out,
                     cli_pos *pos)
{
	char *url = NULL, red[512], list[256];
	if (str_value(x, n, what, &url))
		return -1;
	*pos = pos_of(n);
	if (!usable_url(url, inbox_store_known_url)) {
		fail(x, n,
		     "%s: unsupported store URL \"%s\" (the schemes of the "
		     "stores registered: %s)",
		     what, cli_redact(url, red, sizeof(red)),
		     scheme_list(inbox_store_scheme, list, sizeof(list)));
		free(url);
		return -1;
	}
	char *fixed = rebase_url(x, url);
	free(url);
	free(*out);
	*out = fixed;
	return fixed ? 0 : fail(x, n, "out of memory");
}

/* A scheme no source registered (one not compiled in) is refused here;
 * whether the URL is well formed, when it is opened (still before
 * consuming). */
static int source_url(ctx *x, yaml_node_t *n, char **out, cli_pos *pos)
{
	char *url = NULL, red[512], list[256];
	if (str_value(x, n, "source", &url))
		return -1;
	*pos = pos_of(n);
	if (!usable_url(url, inbox_source_known_url)) {
		fail(x, n,
		     "source: unsupported source URL \"%s\" (the schemes of "
		     "the sources registered: %s)",
		     cli_redact(url, red, sizeof(red)),
		     scheme_list(inbox_source_scheme, list, sizeof(list)));
		free(url);
		return -1;
	}
	char *fixed = rebase_url(x, url);
	free(url);
	free(*out);
	*out = fixed;
	return fixed ? 0 : fail(x, n, "out of memory");
}

/* ---- effects ------------------------------------------------------- */

/* Read straight into the consumer's declaration (include/inbox/decl.h),
 * which copies what it is given: the values are the YAML document's. The
 * reader keeps only where each step is, for the messages of start-up. */

/* A refusal of the declaration: the reason at node n. */
static int refused(ctx *x, yaml_node_t *n, int rc, const char *prefix,
                   const char *why)
{
	if (rc == INBOX_ERR_NOMEM)
		return fail(x, n, "out of memory");
	return fail(x, n, "%s%s", prefix, why);
}

static int sql_step(ctx *x, yaml_node_t *m, cli_consumer *c, cli_step *s,
                    const char *what)
{
	static const char *const keys[] = {"sql", "params", NULL};
	if (check_keys(x, m, what, keys))
		return -1;
	yaml_node_t *sql = get(x, m, "sql"), *params = get(x, m, "params");
	const char *text, *ptrs[CLI_MAX_PARAMS];
	int n = 0;
	s->kind = CLI_STEP_SQL;
	if (str_ref(x, sql, "sql", &text))
		return -1;
	s->sql_pos = pos_of(sql);
	if (params && !is_null(params)) {
		if (want(x, params, YAML_SEQUENCE_NODE, "params"))
			return -1;
		n = (int)(params->data.sequence.items.top -
		          params->data.sequence.items.start);
		if (n > CLI_MAX_PARAMS)
			return fail(x, params, "params: at most %d parameters",
			            CLI_MAX_PARAMS);
		for (int i = 0; i < n; i++) {
			char w[48];
			snprintf(w, sizeof(w), "params: $%d", i + 1);
			yaml_node_t *it =
			    node(x, params->data.sequence.items.start[i]);
			if (pointer_ref(x, it, w, &ptrs[i]))
				return -1;
		}
	}
	char why[512], prefix[64];
	int rc = inbox_decl_add_sql(c->decl, text, n, ptrs, why, sizeof(why));
	snprintf(prefix, sizeof(prefix), "%s: ", what);
	return rc < 0 ? refused(x, sql, rc, prefix, why) : 0;
}

static int column_pointer(ctx *x, yaml_node_t *n, const char *what,
                          const char **column, const char **value)
{
	static const char *const keys[] = {"column", "value", NULL};
	if (!n)
		return fail(x, NULL, "%s is required", what);
	if (want(x, n, YAML_MAPPING_NODE, what) || check_keys(x, n, what, keys))
		return -1;
	yaml_node_t *c = get(x, n, "column"), *v = get(x, n, "value");
	if (!c || !v)
		return fail(x, n, "%s needs both column: and value:", what);
	if (str_ref(x, c, "column", column) ||
	    pointer_ref(x, v, "value", value))
		return -1;
	return 0;
}

static int upsert_step(ctx *x, yaml_node_t *m, cli_consumer *c, cli_step *s)
{
	static const char *const keys[] = {"table", "key", "version", "set",
	                                   NULL};
	if (want(x, m, YAML_MAPPING_NODE, "upsert") ||
	    check_keys(x, m, "upsert", keys))
		return -1;
	s->kind = CLI_STEP_UPSERT;
	inbox_decl_upsert u = INBOX_DECL_UPSERT_INIT;
	const char *cols[CLI_MAX_PARAMS], *vals[CLI_MAX_PARAMS];
	yaml_node_t *t = get(x, m, "table");
	if (!t)
		return fail(x, m, "upsert: table is required");
	if (str_ref(x, t, "upsert table", &u.table))
		return -1;
	yaml_node_t *k = get(x, m, "key"), *v = get(x, m, "version");
	if (!k || !v)
		return fail(x, m,
		            "upsert needs key: {column, value} and version: "
		            "{column, value}");
	if (column_pointer(x, k, "upsert key", &u.key_column, &u.key_pointer) ||
	    column_pointer(x, v, "upsert version", &u.version_column,
	                   &u.version_pointer))
		return -1;
	yaml_node_t *set = get(x, m, "set");
	if (set && !is_null(set)) {
		if (want(x, set, YAML_MAPPING_NODE, "upsert set"))
			return -1;
		int n = (int)(set->data.mapping.pairs.top -
		              set->data.mapping.pairs.start);
		if (n > CLI_MAX_PARAMS - 2)
			return fail(x, set, "upsert set: at most %d columns",
			            CLI_MAX_PARAMS - 2);
		for (int i = 0; i < n; i++) {
			yaml_node_pair_t *p = &set->data.mapping.pairs.start[i];
			yaml_node_t *col = node(x, p->key),
			            *val = node(x, p->value);
			if (str_ref(x, col, "upsert set column", &cols[i]) ||
			    pointer_ref(x, val, "upsert set value", &vals[i]))
				return -1;
		}
		u.nset = n;
		u.set_columns = cols;
		u.set_pointers = vals;
	}
	char why[512];
	int rc = inbox_decl_add_upsert(c->decl, &u, why, sizeof(why));
	return rc < 0 ? refused(x, m, rc, "", why) : 0;
}

static int effect(ctx *x, yaml_node_t *n, cli_consumer *c)
{
	yaml_node_t *one = n;
	int count = 1;
	if (n->type == YAML_SEQUENCE_NODE)
		count = (int)(n->data.sequence.items.top -
		              n->data.sequence.items.start);
	else if (want(x, n, YAML_MAPPING_NODE, "effect"))
		return -1;
	if (count == 0)
		return fail(x, n, "effect: the list is empty");
	c->steps = calloc((size_t)count, sizeof(*c->steps));
	if (!c->steps)
		return fail(x, n, "out of memory");
	for (int i = 0; i < count; i++) {
		if (n->type == YAML_SEQUENCE_NODE)
			one = node(x, n->data.sequence.items.start[i]);
		char what[48];
		snprintf(what, sizeof(what), "effect step %d", i + 1);
		if (want(x, one, YAML_MAPPING_NODE, what))
			return -1;
		cli_step *s = &c->steps[i];
		c->nsteps = i + 1;
		s->pos = pos_of(one);
		yaml_node_t *up = get(x, one, "upsert");
		if (up) {
			static const char *const keys[] = {"upsert", NULL};
			if (check_keys(x, one, what, keys) ||
			    upsert_step(x, up, c, s))
				return -1;
		} else if (get(x, one, "sql")) {
			if (sql_step(x, one, c, s, what))
				return -1;
		} else {
			return fail(
			    x, one,
			    "%s needs sql: (with params:) or upsert:", what);
		}
	}
	return 0;
}

/* ---- outbox: external effects (docs/outbox.md) --------------------- */

/* A body template leaf: "/json/pointer" (the value, with its JSON type),
 * "{idempotency_key}", "{key}" (the inbox key), or "=text" (a literal
 * string). */
static int body_leaf(ctx *x, yaml_node_t *n)
{
	const char *s = sv(n);
	if (is_null(n))
		return fail(x, n,
		            "outbox body: a value is required (a JSON "
		            "pointer, {idempotency_key}, {key} or =text)");
	if (s[0] == '=' || !strcmp(s, "{idempotency_key}") ||
	    !strcmp(s, "{key}") || (s[0] == '/' && inbox__pointer_valid(s)))
		return 0;
	return fail(x, n,
	            "outbox body: \"%s\" is neither a JSON pointer "
	            "(/data/orderId), {idempotency_key}, {key} nor a literal "
	            "(=text)",
	            s);
}

/* Values in one body template: YAML aliases can repeat a node, and
 * nested aliases 10 x 10 x ... would expand to billions. */
#define BODY_MAX_VALUES 10000

/* The body template as JSON: objects and arrays as written, leaves as
 * their text (resolved per message by src/effect/decl_outbox.c). */
static json_t *body_tmpl(ctx *x, yaml_node_t *n, int depth)
{
	if (depth > 16) {
		fail(x, n, "outbox body: nested too deep");
		return NULL;
	}
	if (++x->body_values > BODY_MAX_VALUES) {
		fail(x, n, "outbox body: more than %d values", BODY_MAX_VALUES);
		return NULL;
	}
	if (n->type == YAML_SCALAR_NODE)
		return body_leaf(x, n) ? NULL : json_string(sv(n));
	if (n->type == YAML_SEQUENCE_NODE) {
		json_t *a = json_array();
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     a && i < n->data.sequence.items.top; i++) {
			json_t *v = body_tmpl(x, node(x, *i), depth + 1);
			if (!v || json_array_append_new(a, v)) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	}
	if (n->type != YAML_MAPPING_NODE) {
		fail(x, n, "outbox body: unexpected node");
		return NULL;
	}
	json_t *o = json_object();
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     o && p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(x, p->key);
		if (!k || k->type != YAML_SCALAR_NODE) {
			fail(x, k, "outbox body: names must be plain text");
			json_decref(o);
			return NULL;
		}
		if (json_object_get(o, sv(k))) {
			fail(x, k, "outbox body: duplicate name \"%s\"", sv(k));
			json_decref(o);
			return NULL;
		}
		json_t *v = body_tmpl(x, node(x, p->value), depth + 1);
		if (!v || json_object_set_new(o, sv(k), v)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static char *headers_json(ctx *x, yaml_node_t *n)
{
	if (want(x, n, YAML_MAPPING_NODE, "outbox headers"))
		return NULL;
	json_t *o = json_object();
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     o && p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(x, p->key), *v = node(x, p->value);
		if (!k || k->type != YAML_SCALAR_NODE ||
		    v->type != YAML_SCALAR_NODE) {
			fail(x, k, "outbox headers: name: value pairs of text");
			json_decref(o);
			return NULL;
		}
		json_object_set_new(o, sv(k), json_string(sv(v)));
	}
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return text;
}

/* One outbox step, into the declaration: it checks the effect (URL,
 * headers, reconcile URL...) and that the step's name is unique. */
static int outbox_step(ctx *x, yaml_node_t *m, cli_consumer *c)
{
	static const char *const keys[] = {
	    "step",       "method",    "url",        "headers",      "body",
	    "idempotent", "reconcile", "key_header", "max_attempts", NULL};
	if (want(x, m, YAML_MAPPING_NODE, "an outbox step") ||
	    check_keys(x, m, "outbox step", keys))
		return -1;
	inbox_outbox_effect e = INBOX_OUTBOX_EFFECT_INIT;
	yaml_node_t *v = get(x, m, "step");
	if (!v)
		return fail(x, m, "outbox: step: is required (a name: charge)");
	if (str_ref(x, v, "outbox step", &e.step))
		return -1;
	if (!(v = get(x, m, "url")))
		return fail(x, m, "outbox step %s: url is required", e.step);
	if (str_ref(x, v, "outbox url", &e.url))
		return -1;
	if (!(v = get(x, m, "idempotent")))
		return fail(x, m,
		            "outbox step %s: idempotent: is required — true "
		            "if the provider honours Idempotency-Key, false to "
		            "record the intent and reconcile",
		            e.step);
	if (bool_value(x, v, "idempotent", &e.idempotent))
		return -1;
	if ((v = get(x, m, "method")) &&
	    str_ref(x, v, "outbox method", &e.method))
		return -1;
	if ((v = get(x, m, "key_header")) &&
	    str_ref(x, v, "key_header", &e.key_header))
		return -1;
	/* The two values built here, freed below. */
	char *headers = NULL, *body = NULL;
	json_t *tmpl = NULL;
	int rc = -1;
	if ((v = get(x, m, "headers")) && !is_null(v) &&
	    !(headers = headers_json(x, v)))
		goto out;
	e.headers = headers;
	x->body_values = 0;
	if ((v = get(x, m, "body")) && !(tmpl = body_tmpl(x, v, 0)))
		goto out;
	long long i;
	if ((v = get(x, m, "max_attempts"))) {
		if (int_value(x, v, "max_attempts", 1, 1000000, &i))
			goto out;
		e.max_attempts = (int)i;
	}
	if ((v = get(x, m, "reconcile"))) {
		static const char *const rkeys[] = {"url", NULL};
		yaml_node_t *u;
		if (e.idempotent) {
			fail(x, v,
			     "outbox step %s: reconcile is for providers "
			     "without idempotency (idempotent: false)",
			     e.step);
			goto out;
		}
		if (want(x, v, YAML_MAPPING_NODE, "reconcile") ||
		    check_keys(x, v, "reconcile", rkeys))
			goto out;
		if (!(u = get(x, v, "url"))) {
			fail(x, v, "reconcile: url is required");
			goto out;
		}
		if (str_ref(x, u, "reconcile url", &e.reconcile_url))
			goto out;
	}
	/* The template travels as JSON text (any value: a bare leaf too). */
	if (tmpl &&
	    !(body = json_dumps(tmpl, JSON_COMPACT | JSON_ENCODE_ANY))) {
		fail(x, m, "out of memory");
		goto out;
	}
	char why[512];
	int drc = inbox_decl_add_outbox(c->decl, &e, body, why, sizeof(why));
	rc = drc < 0 ? refused(x, m, drc, "outbox: ", why) : 0;
out:
	free(headers);
	free(body);
	json_decref(tmpl);
	return rc;
}

/* dispatch: {max_attempts, timeout, connect_timeout, backoff,
 * max_backoff, lease, batch, poll, concurrency} for this consumer's
 * dispatcher. */
static int dispatch_section(ctx *x, yaml_node_t *m, cli_dispatch *d)
{
	static const char *const keys[] = {
	    "max_attempts", "timeout", "connect_timeout", "backoff",
	    "max_backoff",  "lease",   "batch",           "poll",
	    "concurrency",  NULL};
	if (want(x, m, YAML_MAPPING_NODE, "dispatch") ||
	    check_keys(x, m, "dispatch", keys))
		return -1;
	yaml_node_t *v;
	long long i;
	struct {
		const char *name;
		int64_t min, max, *out;
	} durs[] = {{"timeout", 1, 3600000, &d->timeout_ms},
	            {"connect_timeout", 1, 3600000, &d->connect_timeout_ms},
	            {"backoff", 0, 86400000, &d->backoff_ms},
	            {"max_backoff", 0, 86400000, &d->max_backoff_ms},
	            {"lease", 1, 86400000, &d->lease_ms},
	            {"poll", 1, 60000, &d->poll_ms}};
	for (size_t k = 0; k < sizeof(durs) / sizeof(*durs); k++)
		if ((v = get(x, m, durs[k].name)) &&
		    duration_value(x, v, durs[k].name, durs[k].min, durs[k].max,
		                   durs[k].out))
			return -1;
	if ((v = get(x, m, "max_attempts"))) {
		if (int_value(x, v, "max_attempts", 1, 1000000, &i))
			return -1;
		d->max_attempts = (int)i;
	}
	if ((v = get(x, m, "batch"))) {
		if (int_value(x, v, "batch", 1, 1000, &i))
			return -1;
		d->batch = (int)i;
	}
	if ((v = get(x, m, "concurrency"))) {
		if (int_value(x, v, "concurrency", 1, 10000, &i))
			return -1;
		d->concurrency = (int)i;
	}
	if (d->max_backoff_ms < d->backoff_ms)
		return fail(x, m, "dispatch: max_backoff is below backoff");
	if (d->lease_ms && d->lease_ms < 2 * d->timeout_ms + 1500)
		return fail(
		    x, m,
		    "dispatch: lease must cover a reconcile and a call: "
		    "at least 2 x timeout + 1.5s");
	return 0;
}

/* dispatch: and its defaults, read before the outbox steps: the steps'
 * max_attempts default to dispatch.max_attempts. */
static int dispatch_config(ctx *x, yaml_node_t *m, cli_consumer *c)
{
	inbox_dispatcher_options def = INBOX_DISPATCHER_OPTIONS_INIT;
	c->dispatch.max_attempts = def.max_attempts;
	c->dispatch.timeout_ms = def.timeout_ms;
	c->dispatch.connect_timeout_ms = def.connect_timeout_ms;
	c->dispatch.backoff_ms = def.backoff_ms;
	c->dispatch.max_backoff_ms = def.max_backoff_ms;
	c->dispatch.lease_ms = def.lease_ms;
	c->dispatch.batch = def.batch;
	c->dispatch.poll_ms = def.poll_ms;
	c->dispatch.concurrency = def.concurrency;
	yaml_node_t *n = get(x, m, "dispatch");
	if (n && !is_null(n) && dispatch_section(x, n, &c->dispatch))
		return -1;
	return 0;
}

static int outbox_config(ctx *x, yaml_node_t *m, cli_consumer *c)
{
	yaml_node_t *n = get(x, m, "outbox");
	if (!n || is_null(n))
		return 0;
	if (want(x, n, YAML_SEQUENCE_NODE, "outbox"))
		return -1;
	for (yaml_node_item_t *i = n->data.sequence.items.start;
	     i < n->data.sequence.items.top; i++)
		if (outbox_step(x, node(x, *i), c))
			return -1;
	return 0;
}

/* The consumer's declaration (include/inbox/decl.h), which the effect
 * and outbox steps are read into: what inbox_decl_handler runs. */
static int new_decl(ctx *x, yaml_node_t *m, cli_consumer *c)
{
	inbox_decl_options o = INBOX_DECL_OPTIONS_INIT;
	o.consumer = c->name;
	o.setup_sql = c->setup;
	o.outbox_max_attempts = c->dispatch.max_attempts;
	char why[512] = "";
	int rc = inbox_decl_new(&c->decl, &o, why, sizeof(why));
	return rc < 0 ? refused(x, m, rc, "", why) : 0;
}

/* ---- consumers ----------------------------------------------------- */

/* ---- schema: a JSON Schema file (docs/schema.md) ------------------ */

#define SCHEMA_FILE_MAX (16 * 1024 * 1024)

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	inbox__buf b = INBOX__BUF_INIT;
	char chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b.len + n > SCHEMA_FILE_MAX ||
		    inbox__buf_append(&b, chunk, n) < 0) {
			errno = EFBIG;
			break;
		}
	}
	int bad = ferror(f) || n > 0;
	fclose(f);
	if (bad || inbox__buf_append(&b, "", 0) < 0) {
		inbox__buf_free(&b);
		return NULL;
	}
	*len = b.len;
	return b.data;
}

/* Read the schema file (relative to the config file) and compile it now,
 * so an unsupported keyword stops the daemon before anything is read. */
static int schema_file(ctx *x, yaml_node_t *v, cli_consumer *c)
{
	char *path = NULL;
	if (str_value(x, v, "schema", &path))
		return -1;
	inbox__buf b = INBOX__BUF_INIT;
	int bad = rebase(x, &b, path, strlen(path)) < 0;
	free(path);
	if (bad) {
		inbox__buf_free(&b);
		return fail(x, v, "out of memory");
	}
	c->schema_path = b.data;
	c->schema_pos = pos_of(v);
	size_t len = 0;
	c->schema_json = read_file(c->schema_path, &len);
	if (!c->schema_json)
		return fail(x, v, "schema: cannot read %s: %s", c->schema_path,
		            strerror(errno));
	if (memchr(c->schema_json, '\0', len))
		return fail(x, v, "schema: %s: a NUL byte in the file",
		            c->schema_path);
	char err[512];
	inbox_schema *s = NULL;
	int rc = inbox_schema_open(&s, c->schema_json, len, err, sizeof(err));
	inbox_schema_close(s);
	if (rc != INBOX_OK)
		return fail(x, v, "schema: %s: %s", c->schema_path, err);
	return 0;
}

static const char *const consumer_keys[] = {"name",
                                            "source",
                                            "store",
                                            "key",
                                            "id",
                                            "fingerprint",
                                            "batch_size",
                                            "retention",
                                            "max_attempts",
                                            "max_deliveries",
                                            "lease",
                                            "max_payload",
                                            "retry_delay",
                                            "poll_timeout",
                                            "batch_pause",
                                            "replay",
                                            "setup",
                                            "effect",
                                            "outbox",
                                            "dispatch",
                                            "schema",
                                            "batch_timeout",
                                            "lock_timeout",
                                            "statement_timeout",
                                            "idle_in_transaction_timeout",
                                            NULL};

/* A timeout: a duration (1 ms .. 24 days: PostgreSQL's settings are int
 * milliseconds), or "off" (-1). */
static int timeout_value(ctx *x, yaml_node_t *m, const char *what, int64_t *out)
{
	yaml_node_t *v = get(x, m, what);
	if (!v)
		return 0;
	if (v->type == YAML_SCALAR_NODE && !strcmp(sv(v), "off")) {
		*out = -1;
		return 0;
	}
	return duration_value(x, v, what, 1, INT32_MAX, out);
}

/* batch_timeout bounds the batch's transaction; the three others, each
 * derived from it unless given, bound its waits (docs/config.md). */
static int timeout_opts(ctx *x, yaml_node_t *m, cli_consumer *c)
{
	return timeout_value(x, m, "batch_timeout", &c->batch_timeout_ms) ||
	       timeout_value(x, m, "lock_timeout", &c->lock_timeout_ms) ||
	       timeout_value(x, m, "statement_timeout",
	                     &c->statement_timeout_ms) ||
	       timeout_value(x, m, "idle_in_transaction_timeout",
	                     &c->idle_timeout_ms);
}

/* max_deliveries: a count at least max_attempts (every retry is a
 * delivery too), or "off" / 0 for no bound (-1). Read after max_attempts. */
static int max_deliveries(ctx *x, yaml_node_t *v, cli_consumer *c)
{
	long long i;
	if (v->type == YAML_SCALAR_NODE && !strcmp(sv(v), "off")) {
		c->max_deliveries = -1;
		return 0;
	}
	if (int_value(x, v, "max_deliveries", 0, INT32_MAX, &i))
		return -1;
	if (i > 0 && i < c->max_attempts)
		return fail(
		    x, v,
		    "max_deliveries (%lld) must be at least max_attempts "
		    "(%d): every retry is a delivery too (off: no bound)",
		    i, c->max_attempts);
	c->max_deliveries = i == 0 ? -1 : (int)i;
	return 0;
}

static int consumer_opts(ctx *x, yaml_node_t *m, cli_consumer *c)
{
	yaml_node_t *v;
	long long i;
	int64_t ms;
	char tmpl_err[256];
	if ((v = get(x, m, "store")) &&
	    store_url(x, v, "store", &c->store, &c->store_pos))
		return -1;
	if ((v = get(x, m, "key"))) {
		if (str_value(x, v, "key", &c->key))
			return -1;
		inbox__keytmpl *t = NULL;
		if (inbox__keytmpl_compile(&t, c->key, tmpl_err,
		                           sizeof(tmpl_err)) != 0) {
			const char *why = tmpl_err;
			if (!strncmp(why, "key template: ", 14))
				why += 14;
			return fail(x, v, "key: bad key template \"%s\": %s",
			            c->key, why);
		}
		inbox__keytmpl_free(t);
	}
	if ((v = get(x, m, "id")) && pointer_value(x, v, "id", &c->id))
		return -1;
	if ((v = get(x, m, "fingerprint")) &&
	    pointer_value(x, v, "fingerprint", &c->fingerprint))
		return -1;
	if ((v = get(x, m, "batch_size"))) {
		if (int_value(x, v, "batch_size", 1, 10000, &i))
			return -1;
		c->batch_size = (size_t)i;
	}
	if ((v = get(x, m, "max_attempts"))) {
		if (int_value(x, v, "max_attempts", 1, 1000000, &i))
			return -1;
		c->max_attempts = (int)i;
	}
	if ((v = get(x, m, "max_deliveries")) && max_deliveries(x, v, c))
		return -1;
	if ((v = get(x, m, "retention"))) {
		if (duration_value(x, v, "retention", 1000, INT64_MAX / 2, &ms))
			return -1;
		c->retention_s = ms / 1000;
	}
	if ((v = get(x, m, "lease"))) {
		if (duration_value(x, v, "lease", 1, INT64_MAX / 2, &ms))
			return -1;
		c->lease_ms = ms;
	}
	if ((v = get(x, m, "retry_delay"))) {
		if (duration_value(x, v, "retry_delay", 0, 3600000, &ms))
			return -1;
		c->retry_delay_ms = (int)ms;
	}
	if ((v = get(x, m, "poll_timeout"))) {
		if (duration_value(x, v, "poll_timeout", 1, 60000, &ms))
			return -1;
		c->poll_timeout_ms = (int)ms;
	}
	if ((v = get(x, m, "batch_pause"))) {
		if (duration_value(x, v, "batch_pause", 0, 60000, &ms))
			return -1;
		c->batch_pause_ms = (int)ms;
	}
	if ((v = get(x, m, "max_payload"))) {
		if (want(x, v, YAML_SCALAR_NODE, "max_payload"))
			return -1;
		if (cli_parse_size(sv(v), &c->max_payload) < 0 ||
		    c->max_payload == 0)
			return fail(x, v,
			            "max_payload: \"%s\" is not a size (write "
			            "e.g. 1MiB, 512KiB or a number of bytes)",
			            sv(v));
	}
	if ((v = get(x, m, "replay"))) {
		if (want(x, v, YAML_SCALAR_NODE, "replay"))
			return -1;
		if (!strcmp(sv(v), "dead_letter"))
			c->replay = INBOX_REPLAY_DEAD_LETTER;
		else if (!strcmp(sv(v), "drop"))
			c->replay = INBOX_REPLAY_DROP;
		else if (!strcmp(sv(v), "apply"))
			c->replay = INBOX_REPLAY_APPLY;
		else
			return fail(
			    x, v,
			    "replay must be dead_letter, drop or apply, "
			    "not \"%s\"",
			    sv(v));
	}
	if ((v = get(x, m, "setup")) && !is_null(v)) {
		if (str_value(x, v, "setup", &c->setup))
			return -1;
		c->setup_pos = pos_of(v);
	}
	if ((v = get(x, m, "schema")) && !is_null(v) && schema_file(x, v, c))
		return -1;
	return 0;
}

static int consumer(ctx *x, yaml_node_t *m, cli_consumer *c)
{
	if (want(x, m, YAML_MAPPING_NODE, "a consumer") ||
	    check_keys(x, m, "consumer", consumer_keys))
		return -1;
	c->pos = pos_of(m);
	c->batch_size = 100;
	c->retention_s = 7 * 24 * 3600;
	c->max_attempts = 5;
	c->lease_ms = 30000;
	c->max_payload = 1024 * 1024;
	c->retry_delay_ms = 1000;
	c->poll_timeout_ms = 200;
	c->replay = INBOX_REPLAY_DEAD_LETTER;
	yaml_node_t *v = get(x, m, "name");
	if (!v)
		return fail(x, m, "consumer: name is required");
	if (str_value(x, v, "name", &c->name))
		return -1;
	for (const char *p = c->name; *p; p++)
		if ((unsigned char)*p < 0x21 || *p == 0x7f)
			return fail(
			    x, v,
			    "name \"%s\": use printable characters "
			    "without spaces (e.g. billing.order-created.v1)",
			    c->name);
	if (!c->name[0])
		return fail(x, v, "name: must not be empty");
	if (strlen(c->name) > 200)
		return fail(x, v, "name: at most 200 characters");
	if (!(v = get(x, m, "source")))
		return fail(x, m, "consumer \"%s\": source is required",
		            c->name);
	if (source_url(x, v, &c->source, &c->source_pos))
		return -1;
	if (consumer_opts(x, m, c) || timeout_opts(x, m, c) ||
	    dispatch_config(x, m, c) || new_decl(x, m, c) ||
	    outbox_config(x, m, c))
		return -1;
	/* Only external effects (outbox:) is fine too. */
	if (!(v = get(x, m, "effect")) && inbox_decl_outbox_steps(c->decl))
		return 0;
	if (!v)
		return fail(x, m,
		            "consumer \"%s\": effect is required (one or more "
		            "\"- sql:\" or \"- upsert:\" steps)",
		            c->name);
	return effect(x, v, c);
}

/* metrics: {listen: 127.0.0.1:9464} -- the /metrics and /healthz
 * endpoint of `inbox run` (src/cli/http.c). */
static int metrics_section(ctx *x, yaml_node_t *m, cli_config *cfg)
{
	static const char *const keys[] = {"listen", NULL};
	if (want(x, m, YAML_MAPPING_NODE, "metrics") ||
	    check_keys(x, m, "metrics", keys))
		return -1;
	yaml_node_t *v = get(x, m, "listen");
	if (!v)
		return fail(x, m,
		            "metrics: listen is required (e.g. listen: "
		            "127.0.0.1:9464)");
	if (str_value(x, v, "metrics listen", &cfg->metrics_listen))
		return -1;
	struct sockaddr_storage ss;
	socklen_t len;
	char why[256];
	if (cli_http_parse_addr(cfg->metrics_listen, &ss, &len, why,
	                        sizeof(why)) < 0)
		return fail(x, v, "metrics listen: %s", why);
	return 0;
}

/* A rate: calls per second, a positive number (decimals allowed). */
static int rate_value(ctx *x, yaml_node_t *n, double *out)
{
	if (want(x, n, YAML_SCALAR_NODE, "rate"))
		return -1;
	const char *s = sv(n);
	char *end = NULL;
	double r = strtod(s, &end);
	if (!*s || *end || !(r > 0) || r > 1e6 || strpbrk(s, "xXpPnN"))
		return fail(x, n,
		            "rate: \"%s\" is not a number of calls per second "
		            "(0 < rate <= 1000000, e.g. 50 or 0.5)",
		            s);
	*out = r;
	return 0;
}

/* breaker: {failures, open, max_open} */
static int breaker_section(ctx *x, yaml_node_t *m, cli_provider *p)
{
	static const char *const keys[] = {"failures", "open", "max_open",
	                                   NULL};
	yaml_node_t *v;
	long long i;
	if (want(x, m, YAML_MAPPING_NODE, "breaker") ||
	    check_keys(x, m, "breaker", keys))
		return -1;
	if ((v = get(x, m, "failures"))) {
		if (int_value(x, v, "breaker failures", 0, 1000000, &i))
			return -1;
		p->breaker_failures = (int)i;
	}
	if ((v = get(x, m, "open")) &&
	    duration_value(x, v, "breaker open", 1, 86400000,
	                   &p->breaker_open_ms))
		return -1;
	if ((v = get(x, m, "max_open")) &&
	    duration_value(x, v, "breaker max_open", 1, 86400000,
	                   &p->breaker_max_open_ms))
		return -1;
	if (p->breaker_max_open_ms < p->breaker_open_ms)
		return fail(x, m, "breaker: max_open is below open");
	return 0;
}

/* providers: [{url, concurrency, rate, burst, breaker}] */
static int provider_entry(ctx *x, yaml_node_t *m, cli_provider *p)
{
	static const char *const keys[] = {"url",   "concurrency", "rate",
	                                   "burst", "breaker",     NULL};
	inbox_provider_options def = INBOX_PROVIDER_OPTIONS_INIT;
	yaml_node_t *v;
	long long i;
	char name[320];
	if (want(x, m, YAML_MAPPING_NODE, "a provider") ||
	    check_keys(x, m, "provider", keys))
		return -1;
	p->pos = pos_of(m);
	p->breaker_failures = def.breaker_failures;
	p->breaker_open_ms = def.breaker_open_ms;
	p->breaker_max_open_ms = def.breaker_max_open_ms;
	if (!(v = get(x, m, "url")))
		return fail(x, m,
		            "providers: url is required (scheme://host:port "
		            "of the provider)");
	if (str_value(x, v, "provider url", &p->url))
		return -1;
	if (inbox_provider_name(p->url, name, sizeof(name)) != INBOX_OK ||
	    !(p->name = strdup(name)))
		return fail(x, v,
		            "provider url: an http:// or https:// URL with a "
		            "host is required");
	if ((v = get(x, m, "concurrency"))) {
		if (int_value(x, v, "concurrency", 1, 1000000, &i))
			return -1;
		p->concurrency = (int)i;
	}
	if ((v = get(x, m, "rate")) && !is_null(v) &&
	    rate_value(x, v, &p->rate))
		return -1;
	if ((v = get(x, m, "burst"))) {
		if (int_value(x, v, "burst", 1, 1000000, &i))
			return -1;
		p->burst = (int)i;
	}
	if ((v = get(x, m, "breaker")) && !is_null(v) &&
	    breaker_section(x, v, p))
		return -1;
	return 0;
}

static int providers_section(ctx *x, yaml_node_t *n, cli_config *cfg)
{
	if (want(x, n, YAML_SEQUENCE_NODE, "providers"))
		return -1;
	int count =
	    (int)(n->data.sequence.items.top - n->data.sequence.items.start);
	cfg->providers = calloc((size_t)count + 1, sizeof(*cfg->providers));
	if (!cfg->providers)
		return fail(x, n, "out of memory");
	for (int i = 0; i < count; i++) {
		yaml_node_t *m = node(x, n->data.sequence.items.start[i]);
		cli_provider *p = &cfg->providers[i];
		cfg->nproviders = i + 1;
		if (provider_entry(x, m, p))
			return -1;
		for (int j = 0; j < i; j++)
			if (!strcmp(cfg->providers[j].name, p->name))
				return fail(x, m,
				            "provider %s is declared twice "
				            "(first at line %d)",
				            p->name,
				            cfg->providers[j].pos.line);
	}
	return 0;
}

static int top(ctx *x, yaml_node_t *root, cli_config *cfg)
{
	static const char *const keys[] = {
	    "store",     "table_prefix", "schema",    "auto_migrate",
	    "consumers", "metrics",      "providers", NULL};
	if (want(x, root, YAML_MAPPING_NODE, "the config file") ||
	    check_keys(x, root, "the config file", keys))
		return -1;
	yaml_node_t *v;
	if ((v = get(x, root, "store")) &&
	    store_url(x, v, "store", &cfg->store, &cfg->store_pos))
		return -1;
	if ((v = get(x, root, "table_prefix")) && !is_null(v)) {
		if (want(x, v, YAML_SCALAR_NODE, "table_prefix"))
			return -1;
		const char *s = sv(v);
		if (strlen(s) > 48 || s[strspn(s, "abcdefghijklmnopqrstuvwxyz"
		                                  "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                                  "0123456789_")])
			return fail(x, v,
			            "table_prefix: letters, digits and _ only "
			            "(at most 48)");
		cfg->table_prefix = strdup(s);
	}
	if ((v = get(x, root, "schema")) && !is_null(v)) {
		if (str_value(x, v, "schema", &cfg->schema))
			return -1;
		const char *s = cfg->schema;
		if (strlen(s) > 48 || s[strspn(s, "abcdefghijklmnopqrstuvwxyz"
		                                  "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		                                  "0123456789_")])
			return fail(x, v,
			            "schema: letters, digits and _ only (at "
			            "most 48)");
	}
	if ((v = get(x, root, "auto_migrate")) &&
	    bool_value(x, v, "auto_migrate", &cfg->auto_migrate))
		return -1;
	if ((v = get(x, root, "metrics")) && !is_null(v) &&
	    metrics_section(x, v, cfg))
		return -1;
	if ((v = get(x, root, "providers")) && !is_null(v) &&
	    providers_section(x, v, cfg))
		return -1;
	yaml_node_t *cs = get(x, root, "consumers");
	if (!cs)
		return fail(x, root, "consumers: is required (a list)");
	if (want(x, cs, YAML_SEQUENCE_NODE, "consumers"))
		return -1;
	int n =
	    (int)(cs->data.sequence.items.top - cs->data.sequence.items.start);
	if (n == 0)
		return fail(x, cs, "consumers: the list is empty");
	cfg->consumers = calloc((size_t)n, sizeof(*cfg->consumers));
	if (!cfg->consumers)
		return fail(x, cs, "out of memory");
	for (int i = 0; i < n; i++) {
		yaml_node_t *m = node(x, cs->data.sequence.items.start[i]);
		cli_consumer *c = &cfg->consumers[i];
		cfg->nconsumers = i + 1;
		if (consumer(x, m, c))
			return -1;
		for (int j = 0; j < i; j++)
			if (!strcmp(cfg->consumers[j].name, c->name))
				return fail(
				    x, m,
				    "consumer name \"%s\" is used twice "
				    "(first at line %d)",
				    c->name, cfg->consumers[j].pos.line);
		if (!c->store && !cfg->store)
			return fail(x, m,
			            "consumer \"%s\" has no store: set store: "
			            "here or at the top of the file",
			            c->name);
	}
	return 0;
}

static void set_dir(ctx *x, const char *path)
{
	const char *slash = strrchr(path, '/');
	x->dir[0] = '\0';
	if (!slash)
		return;
	size_t n = (size_t)(slash - path);
	if (n == 0)
		n = 1; /* "/file" */
	if (n >= sizeof(x->dir))
		n = sizeof(x->dir) - 1;
	memcpy(x->dir, path, n);
	x->dir[n] = '\0';
}

/* Values are used as C strings: one with a NUL ("\0" in a quoted
 * scalar) would be cut there silently — "sqlite:a\0b" opening sqlite:a,
 * SQL losing its tail. Refused wherever it is. 0, or -1. */
static int nul_free(ctx *x)
{
	for (yaml_node_t *n = x->doc.nodes.start; n < x->doc.nodes.top; n++)
		if (n->type == YAML_SCALAR_NODE &&
		    memchr(n->data.scalar.value, '\0', n->data.scalar.length))
			return fail(x, n,
			            "a NUL character (\\0) in a value is not "
			            "allowed");
	return 0;
}

/* Load from a parser whose input is set; the file is named `path`. */
static int load(cli_config *cfg, yaml_parser_t *parser, const char *path,
                char *err, size_t errlen)
{
	ctx x;
	memset(&x, 0, sizeof(x));
	x.path = path;
	x.err = err;
	x.errlen = errlen;
	set_dir(&x, path);
	if (!yaml_parser_load(parser, &x.doc)) {
		const yaml_mark_t *m = parser->context ? &parser->context_mark
		                                       : &parser->problem_mark;
		if (parser->problem)
			m = &parser->problem_mark;
		snprintf(err, errlen, "%s:%zu:%zu: YAML syntax error: %s%s%s",
		         path, m->line + 1, m->column + 1,
		         parser->problem ? parser->problem : "malformed",
		         parser->context ? " " : "",
		         parser->context ? parser->context : "");
		return -1;
	}
	int rc = -1;
	yaml_node_t *root = yaml_document_get_root_node(&x.doc);
	if (!root)
		snprintf(err, errlen, "%s: the file is empty", path);
	else if (!nul_free(&x))
		rc = top(&x, root, cfg);
	yaml_document_delete(&x.doc);
	return rc;
}

int cli_config_load(cli_config *cfg, const char *path, char *err, size_t errlen)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->auto_migrate = 1;
	cfg->path = strdup(path);
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path,
		         strerror(errno));
		return -1;
	}
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser)) {
		fclose(f);
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	yaml_parser_set_input_file(&parser, f);
	int rc = load(cfg, &parser, path, err, errlen);
	yaml_parser_delete(&parser);
	fclose(f);
	return rc;
}

int cli_config_parse(cli_config *cfg, const char *path, const char *text,
                     size_t len, char *err, size_t errlen)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->auto_migrate = 1;
	cfg->path = strdup(path);
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser)) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	int rc = load(cfg, &parser, path, err, errlen);
	yaml_parser_delete(&parser);
	return rc;
}

void cli_config_free(cli_config *cfg)
{
	if (!cfg)
		return;
	for (int i = 0; i < cfg->nconsumers; i++) {
		cli_consumer *c = &cfg->consumers[i];
		free(c->name);
		free(c->source);
		free(c->store);
		free(c->key);
		free(c->id);
		free(c->fingerprint);
		free(c->setup);
		free(c->schema_path);
		free(c->schema_json);
		free(c->steps);
		inbox_decl_free(c->decl);
	}
	free(cfg->consumers);
	free(cfg->path);
	free(cfg->store);
	free(cfg->table_prefix);
	free(cfg->schema);
	free(cfg->metrics_listen);
	for (int i = 0; i < cfg->nproviders; i++) {
		free(cfg->providers[i].url);
		free(cfg->providers[i].name);
	}
	free(cfg->providers);
	memset(cfg, 0, sizeof(*cfg));
}

const char *cli_consumer_store(const cli_config *cfg, const cli_consumer *c)
{
	return c->store ? c->store : cfg->store;
}
