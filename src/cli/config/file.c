/*
 * The config file: its top level (store, table_prefix, schema,
 * auto_migrate, metrics, providers, consumers), loading and freeing.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/config/reader.h"
#include "cli/http.h"
#include "source/http/http.h"

/* ---- metrics: {listen: 127.0.0.1:9464} ----------------------------- */

static const cfg_key metrics_keys[] = {
    {"listen", CFG_TEXT, offsetof(cli_config, metrics_listen), 0, 0, NULL,
     "metrics listen", 0, "address of /metrics and /healthz"},
};
const cfg_section cfg_metrics_section =
    CFG_SECTION("metrics", "metrics", metrics_keys);

/* The /metrics and /healthz endpoint of `inbox run` (src/cli/http.c). */
static int metrics_fn(cfg_ctx *x, yaml_node_t *m, void *obj)
{
	cli_config *cfg = obj;
	if (cfg_want(x, m, YAML_MAPPING_NODE, "metrics") ||
	    cfg_check_keys(x, m, &cfg_metrics_section, NULL))
		return -1;
	yaml_node_t *v = cfg_get(x, m, "listen");
	if (!v)
		return cfg_fail(x, m,
		                "metrics: listen is required (e.g. listen: "
		                "127.0.0.1:9464)");
	if (cfg_read(x, m, &cfg_metrics_section, NULL, cfg))
		return -1;
	struct sockaddr_storage ss;
	socklen_t len;
	char why[256];
	if (cli_http_parse_addr(cfg->metrics_listen, &ss, &len, why,
	                        sizeof(why)) < 0)
		return cfg_fail(x, v, "metrics listen: %s", why);
	return 0;
}

/* ---- providers: [{url, concurrency, rate, burst, breaker}] --------- */

/* A rate: calls per second, a positive number (decimals allowed). */
static int rate_fn(cfg_ctx *x, yaml_node_t *n, void *obj)
{
	cli_provider *p = obj;
	if (cfg_want(x, n, YAML_SCALAR_NODE, "rate"))
		return -1;
	const char *s = cfg_sv(n);
	char *end = NULL;
	double r = strtod(s, &end);
	if (!*s || *end || !(r > 0) || r > 1e6 || strpbrk(s, "xXpPnN"))
		return cfg_fail(x, n,
		                "rate: \"%s\" is not a number of calls per "
		                "second (0 < rate <= 1000000, e.g. 50 or 0.5)",
		                s);
	p->rate = r;
	return 0;
}

#define P(field) offsetof(cli_provider, field)
static const cfg_key breaker_keys[] = {
    {"failures", CFG_INT, P(breaker_failures), 0, 1000000, NULL,
     "breaker failures", 0, "failed calls in a row that open it (0: none)"},
    {"open", CFG_MS, P(breaker_open_ms), 1, 86400000, NULL, "breaker open", 0,
     "how long it stays open first"},
    {"max_open", CFG_MS, P(breaker_max_open_ms), 1, 86400000, NULL,
     "breaker max_open", 0, "longest open period (doubling)"},
};
const cfg_section cfg_breaker_section =
    CFG_SECTION("breaker", "breaker", breaker_keys);

static int breaker_fn(cfg_ctx *x, yaml_node_t *m, void *obj)
{
	cli_provider *p = obj;
	if (cfg_want(x, m, YAML_MAPPING_NODE, "breaker") ||
	    cfg_read(x, m, &cfg_breaker_section, NULL, p))
		return -1;
	if (p->breaker_max_open_ms < p->breaker_open_ms)
		return cfg_fail(x, m, "breaker: max_open is below open");
	return 0;
}

static const cfg_key provider_keys[] = {
    {"url", CFG_TEXT, P(url), 0, 0, NULL, "provider url", 0,
     "scheme://host:port of the provider"},
    {"concurrency", CFG_INT, P(concurrency), 1, 1000000, NULL, NULL, 0,
     "calls in flight to it, process-wide"},
    {"rate", CFG_FN, 0, 0, 0, rate_fn, NULL, CFG_NULL_UNSET,
     "calls per second (token bucket)"},
    {"burst", CFG_INT, P(burst), 1, 1000000, NULL, NULL, 0,
     "calls above the rate at once"},
    {"breaker", CFG_FN, 0, 0, 0, breaker_fn, NULL, CFG_NULL_UNSET,
     "{failures, open, max_open}: the circuit breaker"},
};
#undef P
const cfg_section cfg_provider_section =
    CFG_SECTION("provider", "provider", provider_keys);

static int provider_entry(cfg_ctx *x, yaml_node_t *m, cli_provider *p)
{
	inbox_provider_options def = INBOX_PROVIDER_OPTIONS_INIT;
	char name[320];
	if (cfg_want(x, m, YAML_MAPPING_NODE, "a provider") ||
	    cfg_check_keys(x, m, &cfg_provider_section, NULL))
		return -1;
	p->pos = cfg_pos(m);
	p->breaker_failures = def.breaker_failures;
	p->breaker_open_ms = def.breaker_open_ms;
	p->breaker_max_open_ms = def.breaker_max_open_ms;
	yaml_node_t *v = cfg_get(x, m, "url");
	if (!v)
		return cfg_fail(
		    x, m,
		    "providers: url is required (scheme://host:port "
		    "of the provider)");
	if (cfg_str_value(x, v, "provider url", &p->url))
		return -1;
	if (inbox_provider_name(p->url, name, sizeof(name)) != INBOX_OK ||
	    !(p->name = strdup(name)))
		return cfg_fail(x, v,
		                "provider url: an http:// or https:// URL with "
		                "a host is required");
	return cfg_read(x, m, &cfg_provider_section, NULL, p);
}

int cfg_providers(cfg_ctx *x, yaml_node_t *n, cli_config *cfg)
{
	if (cfg_want(x, n, YAML_SEQUENCE_NODE, "providers"))
		return -1;
	int count = cfg_count(n);
	cfg->providers = calloc((size_t)count + 1, sizeof(*cfg->providers));
	if (!cfg->providers)
		return cfg_fail(x, n, "out of memory");
	for (int i = 0; i < count; i++) {
		yaml_node_t *m = cfg_node(x, n->data.sequence.items.start[i]);
		cli_provider *p = &cfg->providers[i];
		cfg->nproviders = i + 1;
		if (provider_entry(x, m, p))
			return -1;
		for (int j = 0; j < i; j++)
			if (!strcmp(cfg->providers[j].name, p->name))
				return cfg_fail(x, m,
				                "provider %s is declared twice "
				                "(first at line %d)",
				                p->name,
				                cfg->providers[j].pos.line);
	}
	return 0;
}

static int providers_fn(cfg_ctx *x, yaml_node_t *n, void *obj)
{
	return cfg_providers(x, n, obj);
}

/* ---- the top level ------------------------------------------------- */

static int store_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	cli_config *cfg = obj;
	return cfg_store_url(x, v, "store", &cfg->store, &cfg->store_pos);
}

/* A name for SQL identifiers: letters, digits and _, at most 48. */
static int ident_ok(const char *s)
{
	return strlen(s) <= 48 && !s[strspn(s, "abcdefghijklmnopqrstuvwxyz"
	                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                                       "0123456789_")];
}

static int table_prefix_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	cli_config *cfg = obj;
	if (cfg_want(x, v, YAML_SCALAR_NODE, "table_prefix"))
		return -1;
	if (!ident_ok(cfg_sv(v)))
		return cfg_fail(x, v,
		                "table_prefix: letters, digits and _ only (at "
		                "most 48)");
	free(cfg->table_prefix);
	cfg->table_prefix = strdup(cfg_sv(v));
	return cfg->table_prefix ? 0 : cfg_fail(x, v, "out of memory");
}

static int schema_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	cli_config *cfg = obj;
	if (cfg_str_value(x, v, "schema", &cfg->schema))
		return -1;
	if (!ident_ok(cfg->schema))
		return cfg_fail(x, v,
		                "schema: letters, digits and _ only (at most "
		                "48)");
	return 0;
}

static const cfg_key top_keys[] = {
    {"store", CFG_FN, 0, 0, 0, store_fn, NULL, 0,
     "default store URL of the consumers"},
    {"table_prefix", CFG_FN, 0, 0, 0, table_prefix_fn, NULL, CFG_NULL_UNSET,
     "prepended to libinbox's table names"},
    {"schema", CFG_FN, 0, 0, 0, schema_fn, NULL, CFG_NULL_UNSET,
     "PostgreSQL schema of libinbox's tables"},
    {"auto_migrate", CFG_BOOL, offsetof(cli_config, auto_migrate), 0, 0, NULL,
     NULL, 0, "create/upgrade the tables when a consumer starts"},
    {"consumers", CFG_LATER, 0, 0, 0, NULL, NULL, 0, "the list of consumers"},
    {"metrics", CFG_FN, 0, 0, 0, metrics_fn, NULL, CFG_NULL_UNSET,
     "{listen: ADDR}: /metrics and /healthz of inbox run"},
    {"providers", CFG_FN, 0, 0, 0, providers_fn, NULL, CFG_NULL_UNSET,
     "settings of the outbox's providers"},
};
const cfg_section cfg_top_section =
    CFG_SECTION("top", "the config file", top_keys);

const cfg_section *const *cfg_sections(void)
{
	static const cfg_section *const all[] = {
	    &cfg_top_section,         &cfg_metrics_section,
	    &cfg_provider_section,    &cfg_breaker_section,
	    &cfg_consumer_section,    &cfg_sql_section,
	    &cfg_upsert_step_section, &cfg_upsert_section,
	    &cfg_column_section,      &cfg_outbox_section,
	    &cfg_reconcile_section,   &cfg_dispatch_section,
	    &cfg_when_section,        NULL};
	return all;
}

static int is_http(const char *url)
{
	return url && (strncmp(url, "http://", 7) == 0 ||
	               strncmp(url, "https://", 8) == 0);
}

static int top(cfg_ctx *x, yaml_node_t *root, cli_config *cfg)
{
	if (cfg_want(x, root, YAML_MAPPING_NODE, "the config file") ||
	    cfg_read(x, root, &cfg_top_section, NULL, cfg))
		return -1;
	yaml_node_t *cs = cfg_get(x, root, "consumers");
	if (!cs)
		return cfg_fail(x, root, "consumers: is required (a list)");
	if (cfg_want(x, cs, YAML_SEQUENCE_NODE, "consumers"))
		return -1;
	int n = cfg_count(cs);
	if (n == 0)
		return cfg_fail(x, cs, "consumers: the list is empty");
	cfg->consumers = calloc((size_t)n, sizeof(*cfg->consumers));
	if (!cfg->consumers)
		return cfg_fail(x, cs, "out of memory");
	for (int i = 0; i < n; i++) {
		yaml_node_t *m = cfg_node(x, cs->data.sequence.items.start[i]);
		cli_consumer *c = &cfg->consumers[i];
		cfg->nconsumers = i + 1;
		if (cfg_consumer(x, m, c))
			return -1;
		for (int j = 0; j < i; j++)
			if (!strcmp(cfg->consumers[j].name, c->name))
				return cfg_fail(
				    x, m,
				    "consumer name \"%s\" is used twice "
				    "(first at line %d)",
				    c->name, cfg->consumers[j].pos.line);
		if (!c->store && !cfg->store)
			return cfg_fail(x, m,
			                "consumer \"%s\" has no store: set "
			                "store: here or at the top of the file",
			                c->name);
		/* http:// routes sharing a listener agree on it */
		char why[512];
		for (int j = 0; j < i; j++)
			if (is_http(c->source) &&
			    is_http(cfg->consumers[j].source) &&
			    inbox__http_routes_check(cfg->consumers[j].source,
			                             cfg->consumers[j].name,
			                             c->source, c->name, why,
			                             sizeof(why)) < 0)
				return cfg_fail(x, m, "%s", why);
	}
	return 0;
}

/* ---- loading ------------------------------------------------------- */

static void set_dir(cfg_ctx *x, const char *path)
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
static int nul_free(cfg_ctx *x)
{
	for (yaml_node_t *n = x->doc.nodes.start; n < x->doc.nodes.top; n++)
		if (n->type == YAML_SCALAR_NODE &&
		    memchr(n->data.scalar.value, '\0', n->data.scalar.length))
			return cfg_fail(x, n,
			                "a NUL character (\\0) in a value is "
			                "not allowed");
	return 0;
}

/* Load from a parser whose input is set; the file is named `path`. */
static int load(cli_config *cfg, yaml_parser_t *parser, const char *path,
                char *err, size_t errlen)
{
	cfg_ctx x;
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
	else if (!nul_free(&x) && !cfg_expand(&x))
		rc = top(&x, root, cfg);
	cfg_expand_free(&x);
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
