/*
 * inbox check CONFIG [--consumer NAME] [--connect]: what `inbox run`
 * validates at start-up, without consuming or writing anything.
 *
 * Without --connect: the config as `run` reads it (cli_load_selected:
 * the same parser and every check it makes — YAML, fields, durations,
 * URLs and their parameters, SQL placeholders, JSON pointers, schemas,
 * the metrics address), and each source's URL parsed as its open would
 * (inbox_source_check: its parameters, a webhook's secret file). With
 * --connect, per consumer: its store (the
 * schema version, the setup SQL and the effect statements prepared
 * against the database, the registration with its retention window, in
 * one transaction rolled back), then its source opened and closed
 * without a poll. Exit codes are `run`'s: 0 ok, 2 usage, 3 config
 * error, 4 a store or source cannot be reached or opened (no waiting:
 * `run` waits, a check reports).
 */
#include <stdio.h>
#include <string.h>

#include "cli/check.h"
#include "cli/cli.h"
#include "cli/open.h"

const char cli_check_usage[] =
    "usage: inbox check CONFIG [--consumer NAME] [--connect]\n"
    "\n"
    "Validate CONFIG as `inbox run` does at start-up, consuming and "
    "writing nothing.\nWithout --connect: the file (syntax, fields, "
    "durations, URLs, SQL placeholders,\nJSON pointers, schemas, the "
    "metrics address) and each source's URL with its\nparameters, parsed "
    "as its open would (a webhook's secret_file is read; nothing\nis "
    "connected to or listened on). With --connect, per consumer, also: "
    "its\nstore is "
    "reached (no migration), its setup SQL and effect statements\nare run "
    "and prepared inside one transaction that is rolled back, its "
    "retention\nwindow is compared with the stored one, and its source is "
    "opened and closed\nwithout a poll (nothing is read, acknowledged or "
    "committed; a Redis group, a\nNATS durable consumer or a RabbitMQ "
    "queue that does not exist yet is declared,\nas `inbox run` would).\n"
    "\n"
    "  --consumer NAME   check only this consumer\n"
    "  --connect         also reach the stores and sources (read-only)\n"
    "\n"
    "Prints one line per consumer on stdout, the errors on stderr.\n"
    "Exit codes: 0 ok, 2 usage, 3 config error, 4 cannot open/connect a "
    "store or\nsource (as `inbox run`'s).\n";

static int exec_plain(inbox_store *st, const char *sql)
{
	return inbox_store_exec(st, sql, 0, NULL, NULL);
}

int cli_check_store(const cli_config *cfg, const cli_consumer *cc,
                    cli_open_fail *f, char *note, size_t notelen)
{
	inbox_store *st = NULL;
	inbox_consumer *c = NULL;
	note[0] = '\0';
	int rc = cli_try_open_store(cfg, cc, 0, &st, f);
	if (rc) {
		if (f->rc == INBOX_ERR_SCHEMA && cfg->auto_migrate) {
			snprintf(note, notelen,
			         "its tables are created or upgraded at "
			         "start-up (auto_migrate); effects not "
			         "checked against the database");
			return 0;
		}
		return rc;
	}
	/* Everything below in one transaction, rolled back: setup SQL,
	 * the consumer's registration. */
	if (exec_plain(st, "BEGIN") < 0) {
		snprintf(f->msg, sizeof(f->msg),
		         "%s: consumer \"%s\": cannot begin a transaction: %s",
		         cfg->path, cc->name, inbox_store_errmsg(st));
		cli_scrub(f->msg, sizeof(f->msg), cli_consumer_store(cfg, cc));
		f->hint[0] = '\0';
		f->rc = INBOX_ERR_STORE;
		f->exit_code = CLI_EXIT_CONNECT;
		inbox_store_close(st);
		return f->exit_code;
	}
	rc = cli_try_prepare_effects(cfg, cc, st, f);
	if (rc == 0)
		rc = cli_try_open_consumer(cfg, cc, st, &c, f);
	inbox_consumer_close(c);
	/* A failed statement left the transaction aborted: ROLLBACK ends it
	 * either way; closing the connection would too. */
	(void)exec_plain(st, "ROLLBACK");
	inbox_store_close(st);
	return rc;
}

int cli_check_source(const cli_config *cfg, const cli_consumer *cc,
                     cli_open_fail *f)
{
	inbox_source *src = NULL;
	int rc = cli_try_open_source(cfg, cc, &src, f);
	inbox_source_close(src);
	return rc;
}

int cli_cmd_check(int argc, char **argv)
{
	const char *path = NULL, *only = NULL;
	int connect = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--connect")) {
			connect = 1;
		} else if (!strcmp(argv[i], "--consumer") && i + 1 < argc) {
			only = argv[++i];
		} else if (argv[i][0] == '-' || path) {
			cli_error("check: unexpected argument \"%s\"", argv[i]);
			fputs(cli_check_usage, stderr);
			return CLI_EXIT_USAGE;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		fputs(cli_check_usage, stderr);
		return CLI_EXIT_USAGE;
	}
	cli_config cfg;
	const cli_consumer *sel;
	int rc = cli_load_selected(&cfg, path, only, &sel);
	if (rc)
		return rc;
	int n = sel ? 1 : cfg.nconsumers;
	for (int i = 0; i < n && rc == 0; i++) {
		const cli_consumer *cc = sel ? sel : &cfg.consumers[i];
		char note[256] = "", src[512], st[512];
		cli_open_fail f;
		if ((rc = cli_check_source_url(&cfg, cc, &f))) {
			cli_open_report(&f);
			break;
		}
		if (!connect) {
			printf("ok   consumer %s: config valid\n", cc->name);
			continue;
		}
		if ((rc = cli_check_store(&cfg, cc, &f, note, sizeof(note))) ||
		    (rc = cli_check_source(&cfg, cc, &f))) {
			cli_open_report(&f);
			break;
		}
		printf("ok   consumer %s: store %s reachable%s%s; source %s "
		       "reachable\n",
		       cc->name,
		       cli_redact(cli_consumer_store(&cfg, cc), st, sizeof(st)),
		       note[0] ? ", " : "", note,
		       cli_redact(cc->source, src, sizeof(src)));
	}
	if (rc == 0)
		printf("%s: ok (%d consumer%s%s)\n", cfg.path, n,
		       n == 1 ? "" : "s",
		       connect ? ", stores and sources reached" : "");
	cli_config_free(&cfg);
	return rc;
}
