/*
 * The daemon's configuration: a YAML file declaring consumers (see
 * docs/config.md). Parsing is strict: an unknown key, a wrong type, a bad
 * JSON pointer, key template, duration or URL is an error naming
 * FILE:LINE:COLUMN, and nothing is consumed.
 */
#ifndef INBOX_CLI_CONFIG_H
#define INBOX_CLI_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <inbox/decl.h>
#include <inbox/inbox.h>

/* Where a value came from, for messages ("inbox.yaml:12:7"). */
typedef struct cli_pos {
	int line; /* 1-based; 0 = unknown */
	int col;  /* 1-based */
} cli_pos;

#define CLI_MAX_PARAMS INBOX_DECL_MAX_PARAMS

typedef enum cli_step_kind {
	CLI_STEP_SQL = 1,
	CLI_STEP_UPSERT = 2
} cli_step_kind;

/* Where one effect step (SQL or a versioned upsert) was written: the steps
 * themselves are read into the consumer's declaration (decl below), in the
 * same order, so inbox_decl_prepare's "step N" is steps[N - 1]. */
typedef struct cli_step {
	cli_step_kind kind;
	cli_pos pos;
	cli_pos sql_pos; /* CLI_STEP_SQL: the sql: value */
} cli_step;

/* dispatch: the consumer's dispatcher settings. */
typedef struct cli_dispatch {
	int max_attempts;
	int batch;
	int concurrency; /* calls in flight per provider; 1 = one at a time */
	int64_t timeout_ms, connect_timeout_ms;
	int64_t backoff_ms, max_backoff_ms;
	int64_t lease_ms; /* 0 = derived */
	int64_t poll_ms;
} cli_dispatch;

typedef struct cli_consumer {
	cli_pos pos;
	char *name;
	char *source;
	cli_pos source_pos;
	char *store; /* NULL: the file's top-level store */
	cli_pos store_pos;
	char *key;         /* key template, NULL = "{id}" */
	char *id;          /* id pointer, NULL = "/id" */
	char *fingerprint; /* fingerprint pointer, NULL = whole payload */
	size_t batch_size;
	int64_t retention_s;
	int max_attempts;
	int max_deliveries; /* 0 = unset (derived), -1 = off */
	int64_t lease_ms;
	size_t max_payload;
	size_t max_result; /* max_result: 0 = the library's 64 KiB */
	int retry_delay_ms;
	int poll_timeout_ms;
	int batch_pause_ms;
	/* batch_timeout and the limits it derives, overridden one by one:
	 * ms; 0 = unset (derived), -1 = off. */
	int64_t batch_timeout_ms;
	int64_t lock_timeout_ms, statement_timeout_ms, idle_timeout_ms;
	inbox_replay_policy replay;
	char *setup; /* SQL run once at start (several statements), or NULL */
	cli_pos setup_pos;
	/* JSON Schema of the messages (docs/schema.md): the file's path
	 * (rebased on the config's directory) and its text; NULL = none.
	 * Compiled at load, so an unsupported keyword is a config error. */
	char *schema_path;
	char *schema_json;
	cli_pos schema_pos;
	cli_step *steps; /* where the effect steps are */
	int nsteps;
	cli_dispatch dispatch;
	/* The effect and outbox steps and the setup SQL, as the library runs
	 * them (inbox_decl_prepare, inbox_decl_handler): read into it from the
	 * file, owned. inbox_decl_outbox_steps() counts the outbox steps. */
	inbox_decl *decl;
} cli_consumer;

/* providers: settings of one provider (scheme://host:port), for every
 * dispatcher of the process (docs/outbox.md). */
typedef struct cli_provider {
	cli_pos pos;
	char *url;
	char *name;      /* scheme://host:port */
	int concurrency; /* 0 = no process-wide cap */
	double rate;     /* calls/s, 0 = none */
	int burst;
	int breaker_failures; /* 0 = no breaker */
	int64_t breaker_open_ms, breaker_max_open_ms;
} cli_provider;

typedef struct cli_config {
	char *path;
	char *store; /* default store URL, may be NULL */
	cli_pos store_pos;
	char *table_prefix;
	char *schema;
	int auto_migrate;
	char *metrics_listen;    /* metrics: {listen: ADDR}, or NULL */
	cli_provider *providers; /* providers:, or NULL */
	int nproviders;
	cli_consumer *consumers;
	int nconsumers;
} cli_config;

/* Load and validate `path`. 0, or -1 with a message ("FILE:LINE:COL:
 * ...") in err. Relative paths of sqlite: and jsonl: URLs (and of the
 * jsonl checkpoint= parameter) are made relative to the file's directory.
 * Free with cli_config_free (also after a failure). */
int cli_config_load(cli_config *cfg, const char *path, char *err,
                    size_t errlen);
/* The same from the text [text, text+len), as if read from `path` (for
 * messages and relative paths). */
int cli_config_parse(cli_config *cfg, const char *path, const char *text,
                     size_t len, char *err, size_t errlen);
void cli_config_free(cli_config *cfg);

/* The store URL of a consumer (its own, or the file's). */
const char *cli_consumer_store(const cli_config *cfg, const cli_consumer *c);

/* Parse "30s", "5m", "7d", "500ms", "1h" into milliseconds. 0 or -1. */
int cli_parse_duration_ms(const char *s, int64_t *ms);
/* Parse "1MiB", "512KiB", "2GiB", "4096", "4096B". 0 or -1. */
int cli_parse_size(const char *s, size_t *bytes);

#endif
