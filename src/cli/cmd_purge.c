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
    "                   [--seal-rows N]\n"
    "\n"
    "For each consumer (or only NAME): delete its completed and dead inbox "
    "records\nprocessed longer ago than the retention window it registered "
    "in the store,\noldest first, at most N rows per statement (default "
    "1000), each statement its\nown short transaction. Records inside the "
    "window, and processing or failed\nones, are never deleted. Only one "
    "purge runs at a time per PostgreSQL database.\n"
    "\n"
    "  --dry-run    count what would be deleted; delete nothing\n"
    "  --batch N    rows per statement (1..100000, default 1000)\n"
    "  --seal-rows N  PostgreSQL: once the newest generation of the inbox "
    "holds N\n               records (default 1000000; 0: never), seal it "
    "and open a new one,\n               and drop sealed generations left "
    "empty (docs/cli.md)\n"
    "\n"
    "On a terminal, a progress line shows the rows deleted so far.\n"
    "Exit codes: 0 ok, 1 purge failed (another purge is running, database "
    "error),\n2 usage, 3 config error, 4 cannot open the store.\n";

typedef struct purge_ctx {
	cli_progress prog;
	char label[256];
} purge_ctx;

static void on_progress(int64_t done, int64_t total, void *payload)
{
	purge_ctx *x = payload;
	cli_progress_show(&x->prog, x->label, done, total, done >= total);
}

static int purge_one(const cli_config *cfg, const cli_consumer *c, int batch,
                     int dry_run, long long seal_rows)
{
	inbox_store *st = NULL;
	int rc = cli_open_store(cfg, c, 0, &st);
	if (rc)
		return rc;
	inbox_admin_stats s = INBOX_ADMIN_STATS_INIT;
	int64_t n = 0;
	char age[24];
	int err = inbox_admin_stats_read(st, c->name, &s);
	if (err == INBOX_OK && s.retention_seconds <= 0) {
		printf("%s: nothing to purge (the consumer never ran on this "
		       "store)\n",
		       c->name);
		inbox_store_close(st);
		return 0;
	}
	purge_ctx x;
	cli_progress_init(&x.prog);
	snprintf(x.label, sizeof(x.label), "%s: %s", c->name,
	         dry_run ? "counting" : "purged");
	if (err == INBOX_OK)
		err = inbox_admin_purge(st, c->name, 0, batch, dry_run,
		                        on_progress, &x, &n);
	cli_progress_end(&x.prog);
	if (err < 0) {
		char red[512], msg[1024];
		snprintf(msg, sizeof(msg), "%s", inbox_store_errmsg(st));
		cli_scrub(msg, sizeof(msg), cli_consumer_store(cfg, c));
		cli_error(
		    "consumer \"%s\": purging %s failed%s: %s", c->name,
		    cli_redact(cli_consumer_store(cfg, c), red, sizeof(red)),
		    n > 0 ? " after some batches" : "", msg);
		if (n > 0)
			fprintf(stderr,
			        "inbox: %lld records were deleted "
			        "before the failure\n",
			        (long long)n);
		inbox_store_close(st);
		return err == INBOX_ERR_TRANSIENT && n == 0 ? CLI_EXIT_CONNECT
		                                            : CLI_EXIT_RUNTIME;
	}
	cli_age_text(s.retention_seconds * 1000, age, sizeof(age));
	printf("%s: %s %lld record%s older than the %s window%s\n", c->name,
	       dry_run ? "would delete" : "deleted", (long long)n,
	       n == 1 ? "" : "s", age,
	       dry_run ? " (dry run: nothing deleted)" : "");
	/* Generations (PostgreSQL): a busy seal is left for the next purge. */
	int sealed = 0;
	if (!dry_run && seal_rows > 0) {
		err = inbox_store_seal(st, seal_rows, &sealed);
		if (err == INBOX_OK && sealed > 0)
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
	inbox_store_close(st);
	return 0;
}

typedef struct purge_args {
	int dry_run;
	long long batch, seal_rows;
} purge_args;

static int purge_each(const cli_config *cfg, const cli_consumer *c,
                      void *payload)
{
	const purge_args *a = payload;
	return purge_one(cfg, c, (int)a->batch, a->dry_run, a->seal_rows);
}

int cli_cmd_purge(int argc, char **argv)
{
	purge_args a = {0, 1000, 1000000};
	const cli_opt opts[] = {
	    {"--dry-run", CLI_OPT_FLAG, &a.dry_run, 0, 0},
	    {"--batch", CLI_OPT_INT, &a.batch, 1, 100000},
	    {"--seal-rows", CLI_OPT_INT, &a.seal_rows, 0, LLONG_MAX},
	    {NULL, CLI_OPT_FLAG, NULL, 0, 0},
	};
	return cli_each_consumer("purge", argc, argv, opts, cli_purge_usage,
	                         purge_each, &a);
}
