/*
 * inbox migrate CONFIG: create or upgrade libinbox's tables in every
 * consumer's store, run the consumers' setup SQL and check their effects
 * against the database — a preflight that consumes nothing.
 */
#include <stdio.h>
#include <string.h>

#include <inbox/admin.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/open.h"
#include "cli/progress.h"

const char cli_migrate_usage[] =
    "usage: inbox migrate CONFIG [--consumer NAME] [--set-retention] "
    "[--json]\n"
    "\n"
    "For each consumer: create or upgrade the inbox, dead-letter and "
    "consumer\ntables in its store (idempotent, safe to run beside "
    "running daemons), run its\nsetup SQL, and check its effect SQL "
    "against the database. Reads no message.\n"
    "--set-retention: store the config's retention window for each "
    "consumer\n(changed on purpose: a consumer started with another window "
    "than the stored\none is refused, and purge never deletes inside the "
    "stored window).\n"
    "--json: one JSON object per consumer (schema version, setup, steps, "
    "retention).\n"
    "Exit codes: 0 ok, 2 usage, 3 config error, 4 cannot open/connect "
    "the store.\n";

typedef struct migrate_args {
	int set_retention, json;
} migrate_args;

static int migrate_one(const cli_config *cfg, const cli_consumer *c,
                       const migrate_args *a)
{
	int set_retention = a->set_retention;
	inbox_store *st = NULL;
	int rc = cli_open_store(cfg, c, 1, &st);
	if (rc)
		return rc;
	int version = 0;
	int err = inbox_store_migrate(st);
	if (err == INBOX_OK)
		err = inbox_store_schema_version(st, &version);
	if (err < 0) {
		char red[512], msg[1024];
		snprintf(msg, sizeof(msg), "%s", inbox_store_errmsg(st));
		cli_scrub(msg, sizeof(msg), cli_consumer_store(cfg, c));
		cli_error(
		    "consumer \"%s\": migrating %s failed: %s", c->name,
		    cli_redact(cli_consumer_store(cfg, c), red, sizeof(red)),
		    msg);
		inbox_store_close(st);
		return cli_open_exit_code(err);
	}
	int64_t was = 0;
	if (set_retention && (err = inbox_admin_set_retention(
	                          st, c->name, c->retention_s, &was)) < 0) {
		char red[512], msg[1024];
		snprintf(msg, sizeof(msg), "%s", inbox_store_errmsg(st));
		cli_scrub(msg, sizeof(msg), cli_consumer_store(cfg, c));
		cli_error(
		    "consumer \"%s\": setting the retention on %s failed: %s",
		    c->name,
		    cli_redact(cli_consumer_store(cfg, c), red, sizeof(red)),
		    msg);
		inbox_store_close(st);
		return cli_open_exit_code(err);
	}
	if (set_retention && !a->json) {
		char ta[32], tb[32];
		printf("%s: retention window %s (was %s)\n", c->name,
		       cli_age_text(c->retention_s * 1000, ta, sizeof(ta)),
		       was ? cli_age_text(was * 1000, tb, sizeof(tb)) : "none");
	}
	rc = cli_prepare_effects(cfg, c, st);
	if (rc == 0 && a->json) {
		char red[512];
		const char *url =
		    cli_redact(cli_consumer_store(cfg, c), red, sizeof(red));
		printf("{\"consumer\":");
		cli_json_string(stdout, c->name, strlen(c->name));
		printf(",\"store\":");
		cli_json_string(stdout, url, strlen(url));
		printf(",\"schema_version\":%d,\"setup\":%s,\"steps\":%d",
		       version, c->setup ? "true" : "false", c->nsteps);
		if (set_retention)
			printf(",\"retention_s\":%lld,\"previous_retention_s\":"
			       "%lld",
			       (long long)c->retention_s, (long long)was);
		printf("}\n");
	} else if (rc == 0) {
		char red[512];
		printf("%s: store %s at schema version %d; %s%d effect step%s "
		       "checked\n",
		       c->name,
		       cli_redact(cli_consumer_store(cfg, c), red, sizeof(red)),
		       version, c->setup ? "setup SQL ran; " : "", c->nsteps,
		       c->nsteps == 1 ? "" : "s");
	}
	inbox_store_close(st);
	return rc;
}

static int migrate_each(const cli_config *cfg, const cli_consumer *c,
                        void *payload)
{
	return migrate_one(cfg, c, payload);
}

int cli_cmd_migrate(int argc, char **argv)
{
	migrate_args a = {0, 0};
	const cli_opt opts[] = {
	    {"--set-retention", CLI_OPT_FLAG, &a.set_retention, 0, 0, NULL, 0},
	    {"--json", CLI_OPT_FLAG, &a.json, 0, 0, NULL, 0},
	    {NULL, CLI_OPT_FLAG, NULL, 0, 0, NULL, 0},
	};
	return cli_each_consumer("migrate", argc, argv, opts, cli_migrate_usage,
	                         migrate_each, &a);
}
