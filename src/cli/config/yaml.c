/*
 * The YAML document (loaded with libyaml into a node tree,
 * yaml_parser_load) and the strict walk over it: errors at FILE:LINE:COL,
 * typed values, and the table-driven reading of a mapping (reader.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "cli/config/reader.h"

int cfg_fail(cfg_ctx *x, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Nothing ${...} brought in is ever shown. */
	for (size_t i = 0; i < x->nsecrets; i++) {
		size_t sl = strlen(x->secrets[i]);
		char *at;
		while ((at = strstr(msg, x->secrets[i])) != NULL) {
			memmove(at + 3, at + sl, strlen(at + sl) + 1);
			memcpy(at, "***", 3);
		}
	}
	if (n)
		snprintf(x->err, x->errlen, "%s:%zu:%zu: %s", x->path,
		         n->start_mark.line + 1, n->start_mark.column + 1, msg);
	else
		snprintf(x->err, x->errlen, "%s: %s", x->path, msg);
	return -1;
}

cli_pos cfg_pos(const yaml_node_t *n)
{
	cli_pos p = {(int)n->start_mark.line + 1,
	             (int)n->start_mark.column + 1};
	return p;
}

yaml_node_t *cfg_node(cfg_ctx *x, int i)
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

const char *cfg_sv(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

/* An unquoted ~, null or empty value. */
int cfg_is_null(const yaml_node_t *n)
{
	if (n->type != YAML_SCALAR_NODE ||
	    n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	const char *s = cfg_sv(n);
	return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
	       strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

int cfg_count(const yaml_node_t *n)
{
	if (n->type == YAML_SEQUENCE_NODE)
		return (int)(n->data.sequence.items.top -
		             n->data.sequence.items.start);
	if (n->type == YAML_MAPPING_NODE)
		return (int)(n->data.mapping.pairs.top -
		             n->data.mapping.pairs.start);
	return 0;
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

int cfg_check_keys(cfg_ctx *x, yaml_node_t *map, const cfg_section *s,
                   const char *what)
{
	yaml_node_pair_t *p, *q;
	if (!what)
		what = s->name;
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = cfg_node(x, p->key);
		if (!k || k->type != YAML_SCALAR_NODE)
			return cfg_fail(x, k, "%s: keys must be plain names",
			                what);
		int known = 0;
		const char *near = NULL;
		size_t best = 3;
		for (size_t i = 0; i < s->nkeys; i++) {
			const char *a = s->keys[i].name;
			if (strcmp(a, cfg_sv(k)) == 0) {
				known = 1;
				break;
			}
			size_t dist = edit_distance(a, cfg_sv(k));
			if (dist < best) {
				best = dist;
				near = a;
			}
		}
		if (!known) {
			char list[512] = "";
			size_t o = 0;
			for (size_t i = 0; i < s->nkeys && o < 400; i++)
				o += (size_t)snprintf(
				    list + o, sizeof(list) - o, "%s%s",
				    i == 0 ? "" : ", ", s->keys[i].name);
			if (near)
				return cfg_fail(x, k,
				                "unknown key \"%s\" in %s (did "
				                "you mean \"%s\"?)",
				                cfg_sv(k), what, near);
			return cfg_fail(x, k,
			                "unknown key \"%s\" in %s (known: %s)",
			                cfg_sv(k), what, list);
		}
		for (q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *k2 = cfg_node(x, q->key);
			if (k2 && k2->type == YAML_SCALAR_NODE &&
			    strcmp(cfg_sv(k2), cfg_sv(k)) == 0)
				return cfg_fail(
				    x, k,
				    "duplicate key \"%s\" in %s (first at "
				    "line %zu)",
				    cfg_sv(k), what, k2->start_mark.line + 1);
		}
	}
	return 0;
}

/* Value node of `key` in a mapping, or NULL. */
yaml_node_t *cfg_get(cfg_ctx *x, yaml_node_t *map, const char *key)
{
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = cfg_node(x, p->key);
		if (k && k->type == YAML_SCALAR_NODE &&
		    strcmp(cfg_sv(k), key) == 0)
			return cfg_node(x, p->value);
	}
	return NULL;
}

int cfg_want(cfg_ctx *x, yaml_node_t *n, yaml_node_type_t type,
             const char *what)
{
	if (n->type == type)
		return 0;
	const char *need = type == YAML_SCALAR_NODE     ? "a single value"
	                   : type == YAML_SEQUENCE_NODE ? "a list"
	                                                : "a mapping";
	return cfg_fail(x, n, "%s must be %s, not %s", what, need,
	                type_name(n));
}

/* ---- typed values -------------------------------------------------- */

/* A text value, borrowed from the document. */
int cfg_str_ref(cfg_ctx *x, yaml_node_t *n, const char *what, const char **out)
{
	if (cfg_want(x, n, YAML_SCALAR_NODE, what))
		return -1;
	if (cfg_is_null(n))
		return cfg_fail(x, n, "%s needs a value", what);
	*out = cfg_sv(n);
	return 0;
}

int cfg_str_value(cfg_ctx *x, yaml_node_t *n, const char *what, char **out)
{
	const char *v;
	if (cfg_str_ref(x, n, what, &v))
		return -1;
	free(*out);
	*out = strdup(v);
	return *out ? 0 : cfg_fail(x, n, "out of memory");
}

int cfg_int_value(cfg_ctx *x, yaml_node_t *n, const char *what, long long lo,
                  long long hi, long long *out)
{
	if (cfg_want(x, n, YAML_SCALAR_NODE, what))
		return -1;
	char *end;
	errno = 0;
	long long v = strtoll(cfg_sv(n), &end, 10);
	if (!*cfg_sv(n) || *end || errno)
		return cfg_fail(x, n, "%s must be an integer, not \"%s\"", what,
		                cfg_sv(n));
	if (v < lo || v > hi)
		return cfg_fail(x, n,
		                "%s must be between %lld and %lld (got %lld)",
		                what, lo, hi, v);
	*out = v;
	return 0;
}

int cfg_bool_value(cfg_ctx *x, yaml_node_t *n, const char *what, int *out)
{
	if (cfg_want(x, n, YAML_SCALAR_NODE, what))
		return -1;
	const char *s = cfg_sv(n);
	if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on"))
		*out = 1;
	else if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off"))
		*out = 0;
	else
		return cfg_fail(x, n, "%s must be true or false, not \"%s\"",
		                what, s);
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

int cfg_duration_value(cfg_ctx *x, yaml_node_t *n, const char *what,
                       int64_t min_ms, int64_t max_ms, int64_t *out)
{
	if (cfg_want(x, n, YAML_SCALAR_NODE, what))
		return -1;
	int64_t ms;
	if (cli_parse_duration_ms(cfg_sv(n), &ms) < 0)
		return cfg_fail(x, n,
		                "%s: \"%s\" is not a duration (write e.g. "
		                "500ms, 30s, 5m, 2h, 7d)",
		                what, cfg_sv(n));
	if (ms < min_ms || ms > max_ms)
		return cfg_fail(x, n, "%s: %s is out of range", what,
		                cfg_sv(n));
	*out = ms;
	return 0;
}

/* A JSON pointer, borrowed from the document. */
int cfg_pointer_ref(cfg_ctx *x, yaml_node_t *n, const char *what,
                    const char **out)
{
	if (cfg_want(x, n, YAML_SCALAR_NODE, what))
		return -1;
	if (!inbox__pointer_valid(cfg_sv(n)))
		return cfg_fail(x, n,
		                "%s: \"%s\" is not a JSON pointer (RFC 6901: "
		                "empty for the whole message, or "
		                "/name/name..., with ~0 for ~ and ~1 for /)",
		                what, cfg_sv(n));
	*out = cfg_sv(n);
	return 0;
}

/* ---- one key, by its kind ------------------------------------------ */

static int read_key(cfg_ctx *x, const cfg_key *k, yaml_node_t *v, void *obj)
{
	char *at = (char *)obj + k->off;
	const char *what = k->what ? k->what : k->name, *ref;
	long long i;
	int64_t ms;
	if ((k->flags & CFG_NULL_UNSET) && cfg_is_null(v))
		return 0;
	switch (k->kind) {
	case CFG_TEXT:
		return cfg_str_value(x, v, what, (char **)(void *)at);
	case CFG_REF:
		return cfg_str_ref(x, v, what, (const char **)(void *)at);
	case CFG_POINTER:
		if (cfg_pointer_ref(x, v, what, &ref))
			return -1;
		free(*(char **)(void *)at);
		*(char **)(void *)at = strdup(ref);
		return *(char **)(void *)at ? 0
		                            : cfg_fail(x, v, "out of memory");
	case CFG_PTR_REF:
		return cfg_pointer_ref(x, v, what, (const char **)(void *)at);
	case CFG_INT:
		if (cfg_int_value(x, v, what, k->lo, k->hi, &i))
			return -1;
		*(int *)(void *)at = (int)i;
		return 0;
	case CFG_COUNT:
		if (cfg_int_value(x, v, what, k->lo, k->hi, &i))
			return -1;
		*(size_t *)(void *)at = (size_t)i;
		return 0;
	case CFG_BOOL:
		return cfg_bool_value(x, v, what, (int *)(void *)at);
	case CFG_MS:
		return cfg_duration_value(x, v, what, k->lo, k->hi,
		                          (int64_t *)(void *)at);
	case CFG_MS_INT:
		if (cfg_duration_value(x, v, what, k->lo, k->hi, &ms))
			return -1;
		*(int *)(void *)at = (int)ms;
		return 0;
	case CFG_SECONDS:
		if (cfg_duration_value(x, v, what, k->lo, k->hi, &ms))
			return -1;
		*(int64_t *)(void *)at = ms / 1000;
		return 0;
	case CFG_TIMEOUT:
		/* 1 ms .. 24 days (PostgreSQL's settings are int ms), or
		 * "off" (-1). */
		if (v->type == YAML_SCALAR_NODE && !strcmp(cfg_sv(v), "off")) {
			*(int64_t *)(void *)at = -1;
			return 0;
		}
		return cfg_duration_value(x, v, what, 1, INT32_MAX,
		                          (int64_t *)(void *)at);
	case CFG_SIZE: {
		size_t *out = (size_t *)(void *)at;
		if (cfg_want(x, v, YAML_SCALAR_NODE, what))
			return -1;
		if (cli_parse_size(cfg_sv(v), out) < 0 || *out == 0)
			return cfg_fail(x, v,
			                "%s: \"%s\" is not a size (write e.g. "
			                "1MiB, 512KiB or a number of bytes)",
			                what, cfg_sv(v));
		return 0;
	}
	case CFG_FN:
		return k->fn(x, v, obj);
	case CFG_LATER:
		return 0;
	}
	return cfg_fail(x, v, "%s: unknown kind of key", what);
}

int cfg_read(cfg_ctx *x, yaml_node_t *map, const cfg_section *s,
             const char *what, void *obj)
{
	if (cfg_check_keys(x, map, s, what))
		return -1;
	for (size_t i = 0; i < s->nkeys; i++) {
		yaml_node_t *v = cfg_get(x, map, s->keys[i].name);
		if (v && read_key(x, &s->keys[i], v, obj))
			return -1;
	}
	return 0;
}

/* ---- files ------------------------------------------------------------ */

#define CFG_FILE_MAX (16 * 1024 * 1024)

char *cfg_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	inbox__buf b = INBOX__BUF_INIT;
	char chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b.len + n > CFG_FILE_MAX ||
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
