/*
 * The config reader's internals (src/cli/config/): the YAML document, the
 * position-bearing errors and the key tables.
 *
 * Every mapping of the file is read through one table of its keys
 * (cfg_section): the same list checks the keys (an unknown one is an
 * error with a "did you mean"), reads the plain values into the struct
 * the section fills (by offset, with their kind and range), and is what
 * tests/cli/test_config_keys.c holds docs/config.md against. A key whose
 * value needs more than a kind (a URL, a template, a sub-section) names a
 * reader function; a key read later by its section's code is CFG_LATER.
 */
#ifndef INBOX_CLI_CONFIG_READER_H
#define INBOX_CLI_CONFIG_READER_H

#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "base/buf.h"
#include "cli/config.h"

typedef struct cfg_ctx {
	yaml_document_t doc;
	const char *path;
	char dir[4096]; /* directory of the file, "" when it is the cwd */
	char *err;
	size_t errlen;
	/* What ${...} brought in (4 bytes or more): shown as *** in every
	 * message (cfg_fail), whatever the value it ended up in. */
	char **secrets;
	size_t nsecrets;
} cfg_ctx;

typedef enum cfg_kind {
	CFG_TEXT = 1, /* char **: a copy */
	CFG_REF,      /* const char **: borrowed from the document */
	CFG_POINTER,  /* char **: a JSON pointer, a copy */
	CFG_PTR_REF,  /* const char **: a JSON pointer, borrowed */
	CFG_INT,      /* int, lo..hi */
	CFG_COUNT,    /* size_t, lo..hi */
	CFG_BOOL,     /* int: true/yes/on, false/no/off */
	CFG_MS,       /* int64_t: a duration in ms, lo..hi */
	CFG_MS_INT,   /* int: a duration in ms, lo..hi */
	CFG_SECONDS,  /* int64_t: a duration (lo..hi ms) kept in seconds */
	CFG_TIMEOUT,  /* int64_t: a duration 1 ms..INT32_MAX ms, off = -1 */
	CFG_SIZE,     /* size_t: 4096, 512KiB, 1MiB... (> 0) */
	CFG_FN,       /* read by fn(x, value, obj) */
	CFG_LATER     /* read by the section's own code, after the table */
} cfg_kind;

/* A null value (~, empty) of the key means "not set". */
#define CFG_NULL_UNSET 1u

typedef struct cfg_key {
	const char *name;
	cfg_kind kind;
	size_t off; /* offsetof(the section's struct, field) */
	long long lo, hi;
	int (*fn)(cfg_ctx *x, yaml_node_t *v, void *obj);
	const char *what; /* name in messages, NULL = name */
	unsigned flags;   /* CFG_NULL_UNSET */
	const char *doc;  /* one line; docs/config.md has the long story */
} cfg_key;

typedef struct cfg_section {
	const char *id;   /* docs/config.md's "<!-- keys: ID -->" table */
	const char *name; /* in messages: "unknown key ... in NAME" */
	const cfg_key *keys;
	size_t nkeys;
} cfg_section;

#define CFG_SECTION(id, label, table)                                          \
	{                                                                      \
		id, label, table, sizeof(table) / sizeof(*(table))             \
	}

/* The tables, for tests/cli/test_config_keys.c: NULL-terminated. */
const cfg_section *const *cfg_sections(void);

/* ---- the document and errors (yaml.c) ------------------------------ */

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int cfg_fail(cfg_ctx *x, const yaml_node_t *n, const char *fmt, ...);
cli_pos cfg_pos(const yaml_node_t *n);
yaml_node_t *cfg_node(cfg_ctx *x, int i);
const char *cfg_sv(const yaml_node_t *n);
int cfg_is_null(const yaml_node_t *n);
int cfg_want(cfg_ctx *x, yaml_node_t *n, yaml_node_type_t type,
             const char *what);
yaml_node_t *cfg_get(cfg_ctx *x, yaml_node_t *map, const char *key);
/* Number of items of a sequence, pairs of a mapping. */
int cfg_count(const yaml_node_t *n);

/* Check the keys of `map` (a mapping) against the section (`what` names
 * it in messages, NULL = the section's name), then read every key of the
 * table that is present, in the table's order, into obj. 0 or -1. */
int cfg_read(cfg_ctx *x, yaml_node_t *map, const cfg_section *s,
             const char *what, void *obj);
/* Only the key check. */
int cfg_check_keys(cfg_ctx *x, yaml_node_t *map, const cfg_section *s,
                   const char *what);

/* Typed values. */
int cfg_str_ref(cfg_ctx *x, yaml_node_t *n, const char *what, const char **out);
int cfg_str_value(cfg_ctx *x, yaml_node_t *n, const char *what, char **out);
int cfg_int_value(cfg_ctx *x, yaml_node_t *n, const char *what, long long lo,
                  long long hi, long long *out);
int cfg_bool_value(cfg_ctx *x, yaml_node_t *n, const char *what, int *out);
int cfg_duration_value(cfg_ctx *x, yaml_node_t *n, const char *what,
                       int64_t min_ms, int64_t max_ms, int64_t *out);
int cfg_pointer_ref(cfg_ctx *x, yaml_node_t *n, const char *what,
                    const char **out);

/* A whole file (at most 16 MiB), NUL-terminated; NULL with errno. */
char *cfg_read_file(const char *path, size_t *len);

/* Replace ${NAME} and ${file:PATH} in every value of the document
 * (expand.c). 0 or -1. */
int cfg_expand(cfg_ctx *x);
/* Forget (and wipe) what cfg_expand kept. */
void cfg_expand_free(cfg_ctx *x);

/* ---- URLs and paths (url.c) ---------------------------------------- */

/* Prefix a relative path with the config file's directory. */
int cfg_rebase(cfg_ctx *x, inbox__buf *b, const char *path, size_t len);
int cfg_store_url(cfg_ctx *x, yaml_node_t *n, const char *what, char **out,
                  cli_pos *pos);
int cfg_source_url(cfg_ctx *x, yaml_node_t *n, char **out, cli_pos *pos);

/* ---- JSON templates (tmpl.c) ---------------------------------------- */

/* A scalar of a template into its JSON value (depth 0: the whole
 * template is that scalar); NULL with the error reported. */
typedef struct json_t *(*cfg_leaf_fn)(cfg_ctx *x, yaml_node_t *n, int depth,
                                      void *arg);

/* The YAML value n as JSON: mappings and sequences as written (names
 * plain text, each once), at most 16 deep and max_values values, every
 * scalar through leaf. Errors at their node, prefixed "WHAT: ". NULL on
 * error. */
struct json_t *cfg_json_tmpl(cfg_ctx *x, yaml_node_t *n, const char *what,
                             int max_values, cfg_leaf_fn leaf, void *arg);

/* ---- sections -------------------------------------------------------- */

/* effect: (effect.c) */
int cfg_effect(cfg_ctx *x, yaml_node_t *n, cli_consumer *c);
/* dispatch: and outbox: (outbox.c) */
int cfg_dispatch(cfg_ctx *x, yaml_node_t *m, cli_consumer *c);
int cfg_outbox(cfg_ctx *x, yaml_node_t *n, cli_consumer *c);
/* when: of `map` (a mapping), if any, into d for scope (when.c). */
int cfg_when(cfg_ctx *x, yaml_node_t *map, inbox_decl *d,
             inbox_decl_scope scope);
/* A consumer (consumer.c). */
int cfg_consumer(cfg_ctx *x, yaml_node_t *m, cli_consumer *c);
/* providers: (file.c) */
int cfg_providers(cfg_ctx *x, yaml_node_t *n, cli_config *cfg);

/* The section tables, each next to its reader. */
extern const cfg_section cfg_top_section, cfg_metrics_section,
    cfg_provider_section, cfg_breaker_section, cfg_consumer_section,
    cfg_sql_section, cfg_upsert_step_section, cfg_upsert_section,
    cfg_column_section, cfg_outbox_section, cfg_reconcile_section,
    cfg_dispatch_section, cfg_when_section;

#endif
