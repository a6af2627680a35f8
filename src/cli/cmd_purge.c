/*
 * inbox purge CONFIG: delete inbox records older than each consumer's
 * registered retention window, oldest first, in bounded batches (each its
 * own short transaction, so running consumers wait at most one batch).
 * Records inside the window are never deleted: the store refuses to, and
 * the window used is the one the consumer registered (what the running
 * daemon promises), never a shorter one.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <inbox/admin.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/open.h"
#include "cli/progress.h"

const char cli_purge_usage[] =
    "usage: inbox purge CONFIG [--consumer NAME] [--dry-run] [--batch N]\n"
    "                   [--seal-rows N] [--outbox-retention DURATION]\n"
    "                   [--dead-letter-retention DURATION] [--json]\n"
    "\n"
    "For each consumer (or only NAME): delete its completed and dead inbox "
    "records\nprocessed longer ago than the retention window it registered "
    "in the store,\noldest first, at most N rows per statement (default "
    "1000), each statement its\nown short transaction. Records inside the "
    "window, and processing or failed\nones, are never deleted. Only one "
    "purge runs at a time per PostgreSQL database.\n"
    "Then its done outbox rows done longer ago than the outbox retention, "
    "and its\nresolved dead letters (replayed, or their outbox row retried "
    "or dropped)\nresolved longer ago than the dead-letter retention. "
    "Pending dead letters and\nundone outbox rows are never purged.\n"
    "\n"
    "  --dry-run    count what would be deleted; delete nothing\n"
    "  --batch N    rows per statement (1..100000, default 1000)\n"
    "  --seal-rows N  PostgreSQL: once the newest generation of the inbox "
    "holds N\n               records (default 1000000; 0: never), seal it "
    "and open a new one,\n               and drop sealed generations left "
    "empty (docs/cli.md)\n"
    "  --outbox-retention DURATION  keep done outbox rows this long "
    "(default: the\n               consumer's registered inbox window; "
    "shorter is refused: a done row\n               stops a replayed "
    "message from declaring its effect twice)\n"
    "  --dead-letter-retention DURATION  keep resolved dead letters this "
    "long\n               (default 30d)\n"
    "  --json       one JSON object per consumer: what was (or would be) "
    "deleted\n"
    "\n"
    "On a terminal, a progress line shows the rows deleted so far.\n"
    "Exit codes: 0 ok, 1 purge failed (another purge is running, database "
    "error),\n2 usage, 3 config error, 4 cannot open the store.\n";

/* Resolved dead letters are kept this long unless told otherwise. */
#define DEAD_LETTER_RETENTION_S (30 * 86400)

typedef struct purge_args {
	int dry_run, json;
	long long batch, seal_rows;
	double outbox_s, dead_letter_s;
} purge_args;

typedef struct purge_ctx {
	cli_progress prog;
	char label[256];
} purge_ctx;

static void on_progress(int64_t done, int64_t total, void *payload)
{
	purge_ctx *x = payload;
	cli_progress_show(&x->prog, x->label, done, total, done >= total);
}

static int fail(const cli_config *cfg, const cli_consumer *c, inbox_store *st,
                const char *what, int err, int64_t n)
{
	char red[512], msg[1024];
	snprintf(msg, sizeof(msg), "%s", inbox_store_errmsg(st));
	cli_scrub(msg, sizeof(msg), cli_consumer_store(cfg, c));
	cli_error("consumer \"%s\": purging %s on %s failed%s: %s", c->name,
	          what,
	          cli_redact(cli_consumer_store(cfg, c), red, sizeof(red)),
	          n > 0 ? " after some batches" : "", msg);
	if (n > 0)
		fprintf(stderr,
		        "inbox: %lld %s were deleted before the failure\n",
		        (long long)n, what);
	return err == INBOX_ERR_TRANSIENT && n == 0 ? CLI_EXIT_CONNECT
	                                            : CLI_EXIT_RUNTIME;
}

static int purge_one(const cli_config *cfg, const cli_consumer *c,
                     const purge_args *a)
{
	int batch = (int)a->batch, dry_run = a->dry_run, json = a->json;
	long long seal_rows = a->seal_rows;
	inbox_store *st = NULL;
	int rc = cli_open_store(cfg, c, 0, &st);
	if (rc)
		return rc;
	inbox_admin_stats s = INBOX_ADMIN_STATS_INIT;
	int64_t n = 0;
	char age[24];
	int err = inbox_admin_stats_read(st, c->name, &s);
	if (err == INBOX_OK && s.retention_seconds <= 0) {
		if (json) {
			printf("{\"consumer\":");
			cli_json_string(stdout, c->name, strlen(c->name));
			printf(",\"registered\":false}\n");
		} else {
			printf(
			    "%s: nothing to purge (the consumer never ran on "
			    "this store)\n",
			    c->name);
		}
		inbox_store_close(st);
		return 0;
	}
	purge_ctx x;
	cli_progress_init(&x.prog);
	if (json)
		x.prog.tty = 0;
	snprintf(x.label, sizeof(x.label), "%s: %s", c->name,
	         dry_run ? "counting" : "purged");
	if (err == INBOX_OK)
		err = inbox_admin_purge(st, c->name, 0, batch, dry_run,
		                        on_progress, &x, &n);
	cli_progress_end(&x.prog);
	if (err < 0) {
		rc = fail(cfg, c, st, "records", err, n);
		inbox_store_close(st);
		return rc;
	}
	/* The outbox's done rows, then the resolved dead letters. */
	int64_t ob_s =
	    a->outbox_s > 0 ? (int64_t)a->outbox_s : s.retention_seconds;
	int64_t dl_s = a->dead_letter_s > 0 ? (int64_t)a->dead_letter_s
	                                    : DEAD_LETTER_RETENTION_S;
	int64_t nob = 0, ndl = 0;
	err = inbox_admin_outbox_purge(st, c->name, ob_s, batch, dry_run, &nob);
	if (err == INBOX_ERR_INVALID) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", inbox_store_errmsg(st));
		cli_error("consumer \"%s\": %s", c->name, msg);
		inbox_store_close(st);
		return CLI_EXIT_USAGE;
	}
	if (err < 0) {
		rc = fail(cfg, c, st, "outbox rows", err, nob);
		inbox_store_close(st);
		return rc;
	}
	err = inbox_admin_dlq_purge(st, c->name, dl_s, batch, dry_run, &ndl);
	if (err < 0) {
		rc = fail(cfg, c, st, "dead letters", err, ndl);
		inbox_store_close(st);
		return rc;
	}
	char oage[24], dage[24];
	cli_age_text(s.retention_seconds * 1000, age, sizeof(age));
	cli_age_text(ob_s * 1000, oage, sizeof(oage));
	cli_age_text(dl_s * 1000, dage, sizeof(dage));
	if (!json) {
		const char *verb = dry_run ? "would delete" : "deleted";
		printf("%s: %s %lld record%s older than the %s window%s\n",
		       c->name, verb, (long long)n, n == 1 ? "" : "s", age,
		       dry_run ? " (dry run: nothing deleted)" : "");
		printf("%s: %s %lld done outbox row%s older than %s\n", c->name,
		       verb, (long long)nob, nob == 1 ? "" : "s", oage);
		printf("%s: %s %lld resolved dead letter%s older than %s\n",
		       c->name, verb, (long long)ndl, ndl == 1 ? "" : "s",
		       dage);
	}
	/* Generations (PostgreSQL): a busy seal is left for the next purge. */
	int sealed = 0;
	if (!dry_run && seal_rows > 0) {
		err = inbox_store_seal(st, seal_rows, &sealed);
		if (err == INBOX_OK && sealed > 0 && !json)
			printf("%s: sealed inbox generation %d\n", c->name,
			       sealed);
		else if (err < 0) {
			char msg[1024];
			snprintf(msg, sizeof(msg), "%s",
			         inbox_store_errmsg(st));
			cli_scrub(msg, sizeof(msg), cli_consumer_store(cfg, c));
			fprintf(stderr,
			        "inbox: warning: consumer \"%s\": sealing the "
			        "inbox generation was put off: %s\n",
			        c->name, msg);
		}
	}
	if (json) {
		printf("{\"consumer\":");
		cli_json_string(stdout, c->name, strlen(c->name));
		printf(",\"registered\":true,\"dry_run\":%s,\"records\":%lld,"
		       "\"retention_s\":%lld,\"outbox_rows\":%lld,"
		       "\"outbox_retention_s\":%lld,\"dead_letters\":%lld,"
		       "\"dead_letter_retention_s\":%lld,\"sealed\":%d}\n",
		       dry_run ? "true" : "false", (long long)n,
		       (long long)s.retention_seconds, (long long)nob,
		       (long long)ob_s, (long long)ndl, (long long)dl_s,
		       sealed);
	}
	inbox_store_close(st);
	return 0;
}

static int purge_each(const cli_config *cfg, const cli_consumer *c,
                      void *payload)
{
	return purge_one(cfg, c, payload);
}

int cli_cmd_purge(int argc, char **argv)
{
	purge_args a = {0, 0, 1000, 1000000, 0, 0};
	const cli_opt opts[] = {
	    {"--dry-run", CLI_OPT_FLAG, &a.dry_run, 0, 0, NULL, 0},
	    {"--json", CLI_OPT_FLAG, &a.json, 0, 0, NULL, 0},
	    {"--outbox-retention", CLI_OPT_SECONDS, &a.outbox_s, 0, 0, NULL, 0},
	    {"--dead-letter-retention", CLI_OPT_SECONDS, &a.dead_letter_s, 0, 0,
	     NULL, 0},
	    {"--batch", CLI_OPT_INT, &a.batch, 1, 100000, NULL, 0},
	    {"--seal-rows", CLI_OPT_INT, &a.seal_rows, 0, LLONG_MAX, NULL, 0},
	    {NULL, CLI_OPT_FLAG, NULL, 0, 0, NULL, 0},
	};
	return cli_each_consumer("purge", argc, argv, opts, cli_purge_usage,
	                         purge_each, &a);
}
