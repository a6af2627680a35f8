/* Opening stores, consumers and sources for the configured consumers. */
#include "cli/open.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/effect.h"

int cli_load(cli_config *cfg, const char *path)
{
	char err[1024];
	if (cli_config_load(cfg, path, err, sizeof(err)) == 0)
		return 0;
	cli_error("%s", err);
	cli_config_free(cfg);
	return CLI_EXIT_CONFIG;
}

int cli_load_selected(cli_config *cfg, const char *path, const char *only,
                      const cli_consumer **sel)
{
	int rc = cli_load(cfg, path);
	*sel = NULL;
	if (rc)
		return rc;
	if (only && !(*sel = cli_find_consumer(cfg, only))) {
		cli_config_free(cfg);
		return CLI_EXIT_USAGE;
	}
	return 0;
}

int cli_open_store(const cli_config *cfg, const cli_consumer *c,
                   int auto_migrate, inbox_store **out)
{
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	o.table_prefix = cfg->table_prefix;
	o.schema = cfg->schema;
	o.auto_migrate = auto_migrate < 0 ? cfg->auto_migrate : auto_migrate;
	o.lock_timeout_ms = c->lock_timeout_ms;
	o.statement_timeout_ms = c->statement_timeout_ms;
	o.idle_in_transaction_timeout_ms = c->idle_timeout_ms;
	const char *url = cli_consumer_store(cfg, c);
	int line = c->store ? c->store_pos.line : cfg->store_pos.line;
	int rc = inbox_store_open(out, url, &o);
	if (rc == INBOX_OK)
		return 0;
	char red[512], msg[1024];
	snprintf(msg, sizeof(msg), "%s",
	         *out ? inbox_store_errmsg(*out) : inbox_strerror(rc));
	if (!msg[0])
		snprintf(msg, sizeof(msg), "%s", inbox_strerror(rc));
	cli_scrub(msg, url);
	cli_error("%s:%d: consumer \"%s\": cannot open store %s: %s", cfg->path,
	          line, c->name, cli_redact(url, red, sizeof(red)), msg);
	if (rc == INBOX_ERR_SCHEMA && !o.auto_migrate)
		fprintf(stderr,
		        "inbox: hint: run \"inbox migrate %s\" to create or "
		        "upgrade the tables\n",
		        cfg->path);
	inbox_store_close(*out);
	*out = NULL;
	return cli_open_exit_code(rc);
}

int cli_prepare_effects(const cli_config *cfg, const cli_consumer *c,
                        inbox_store *st)
{
	char err[1024];
	if (c->setup && cli_setup_run(st, c->setup, err, sizeof(err)) < 0) {
		cli_scrub(err, cli_consumer_store(cfg, c));
		cli_error("%s:%d: consumer \"%s\": setup SQL failed: %s",
		          cfg->path, c->setup_pos.line, c->name, err);
		return CLI_EXIT_CONFIG;
	}
	if (cli_effect_validate(st, cfg->path, c, err, sizeof(err)) < 0) {
		cli_scrub(err, cli_consumer_store(cfg, c));
		cli_error("%s", err);
		return CLI_EXIT_CONFIG;
	}
	return 0;
}

int cli_open_consumer(const cli_config *cfg, const cli_consumer *c,
                      inbox_store *st, inbox_consumer **out)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = c->name;
	o.key_template = c->key;
	o.id_pointer = c->id;
	o.fingerprint_pointer = c->fingerprint;
	o.retention_seconds = c->retention_s;
	o.max_attempts = c->max_attempts;
	o.lease_ms = c->lease_ms;
	o.max_payload = c->max_payload;
	o.replay_policy = c->replay;
	o.handler = cli_effect_handler;
	o.handler_payload = (void *)c;
	o.json_schema = c->schema_json;
	o.batch_timeout_ms = c->batch_timeout_ms;
	char err[512] = "";
	int rc = inbox_consumer_open(out, st, &o, err, sizeof(err));
	if (rc == INBOX_OK)
		return 0;
	cli_scrub(err, cli_consumer_store(cfg, c));
	cli_error("%s:%d: consumer \"%s\": %s", cfg->path, c->pos.line, c->name,
	          err[0] ? err : inbox_strerror(rc));
	return rc == INBOX_ERR_INVALID ? CLI_EXIT_CONFIG
	                               : cli_open_exit_code(rc);
}

int cli_open_source(const cli_config *cfg, const cli_consumer *c,
                    inbox_source **out)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = c->name;
	o.max_batch = c->batch_size;
	o.retry_delay_ms = c->retry_delay_ms;
	o.max_payload = c->max_payload;
	int rc = inbox_source_open(out, c->source, &o);
	if (rc == INBOX_OK)
		return 0;
	char red[512], msg[1024];
	snprintf(msg, sizeof(msg), "%s", *out ? inbox_source_errmsg(*out) : "");
	if (!msg[0])
		snprintf(msg, sizeof(msg), "%s", inbox_strerror(rc));
	cli_scrub(msg, c->source);
	cli_error("%s:%d: consumer \"%s\": cannot open source %s: %s",
	          cfg->path, c->source_pos.line, c->name,
	          cli_redact(c->source, red, sizeof(red)), msg);
	inbox_source_close(*out);
	*out = NULL;
	return cli_open_exit_code(rc);
}

const cli_consumer *cli_find_consumer(const cli_config *cfg, const char *name)
{
	for (int i = 0; i < cfg->nconsumers; i++)
		if (strcmp(cfg->consumers[i].name, name) == 0)
			return &cfg->consumers[i];
	cli_error("no consumer named \"%s\" in %s", name, cfg->path);
	fprintf(stderr, "inbox: the file declares:");
	for (int i = 0; i < cfg->nconsumers; i++)
		fprintf(stderr, " %s", cfg->consumers[i].name);
	fputc('\n', stderr);
	return NULL;
}
