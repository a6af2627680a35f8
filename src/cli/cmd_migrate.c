/*
 * inbox migrate CONFIG: create or upgrade libinbox's tables in every
 * consumer's store, run the consumers' setup SQL and check their effects
 * against the database — a preflight that consumes nothing.
 */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/open.h"

const char cli_migrate_usage[] =
    "usage: inbox migrate CONFIG [--consumer NAME]\n"
    "\n"
    "For each consumer: create or upgrade the inbox, dead-letter and "
    "consumer\ntables in its store (idempotent, safe to run beside "
    "running daemons), run its\nsetup SQL, and check its effect SQL "
    "against the database. Reads no message.\n"
    "Exit codes: 0 ok, 2 usage, 3 config error, 4 cannot open/connect "
    "the store.\n";

static int migrate_one(const cli_config *cfg, const cli_consumer *c)
{
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
	rc = cli_prepare_effects(cfg, c, st);
	if (rc == 0) {
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
	(void)payload;
	return migrate_one(cfg, c);
}

int cli_cmd_migrate(int argc, char **argv)
{
	return cli_each_consumer("migrate", argc, argv, NULL, cli_migrate_usage,
	                         migrate_each, NULL);
}
