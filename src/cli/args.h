/*
 * The command line of the commands that take CONFIG [--consumer NAME]
 * and work on each selected consumer in turn (migrate, purge, stats), and
 * of those with subcommands over rows given by id (dlq, outbox): one
 * parser over a table of the command's own options, one loop, one frame.
 */
#ifndef INBOX_CLI_ARGS_H
#define INBOX_CLI_ARGS_H

#include <inbox/inbox.h>

#include "cli/config.h"

typedef enum cli_opt_kind {
	CLI_OPT_FLAG,    /* --name: *(int *)out = 1 */
	CLI_OPT_INT,     /* --name N: *(long long *)out, min..max */
	CLI_OPT_SECONDS, /* --name DURATION: *(double *)out, seconds > 0
	                    (cli_parse_seconds) */
	CLI_OPT_AGE,     /* --name DURATION: *(double *)out, seconds >= 0 */
	CLI_OPT_STRING   /* --name VALUE: *(const char **)out */
} cli_opt_kind;

typedef struct cli_opt {
	const char *name; /* "--batch" */
	cli_opt_kind kind;
	void *out;
	long long min, max;
	/* A value refused: with bad, the usage error "CMD: NAME: \"VALUE\"
	 * BAD" and the usage (dlq, outbox); without, "NAME: \"VALUE\" is
	 * not a number ..." alone (migrate, purge, stats). */
	const char *bad;
	int filter; /* given, it counts as a filter (cli_rows.has_filter) */
} cli_opt;

/* A command-line duration in seconds: "30s", "500ms", "5m" (the config's
 * syntax) or plain seconds ("10", "0.5"). 0 or -1. Every duration flag of
 * every command takes it (--drain-timeout, --connect-timeout, --timeout). */
int cli_parse_seconds(const char *s, double *secs);

/* The work on one consumer: 0 or an exit code (the loop stops at one). */
typedef int (*cli_consumer_fn)(const cli_config *cfg, const cli_consumer *c,
                               void *payload);

/* Parse argv[1..] (CMD CONFIG [--consumer NAME] and `opts`, a table ended
 * by a NULL name, in any order), load the config, then call fn for each
 * selected consumer. A bad argument prints "CMD: ..." and `usage` (exit
 * 2); otherwise the config's exit code or fn's. */
int cli_each_consumer(const char *cmd, int argc, char **argv,
                      const cli_opt *opts, const char *usage,
                      cli_consumer_fn fn, void *payload);

/* ---- subcommands over rows (dlq, outbox) -------------------------------- */

/* The frame of `inbox CMD SUB CONFIG [ID...] [options]`: the config
 * loaded, the consumer selected, the ids given, and a store per consumer
 * opened when first asked for. A command's own state embeds it first. */
typedef struct cli_rows {
	cli_config cfg;
	const cli_consumer *sel; /* --consumer, or NULL for all */
	inbox_store **st;        /* per consumer of cfg, opened lazily */
	int64_t *ids;            /* the ids given, in order */
	int nids;
	int has_filter; /* --consumer or an option marked filter given */
} cli_rows;

typedef int (*cli_rows_fn)(cli_rows *r);

typedef struct cli_rows_cmd {
	const char *name;    /* "dlq": the prefix of its usage errors */
	const char *usage;   /* printed on a usage error */
	const char *id_name; /* "a dead letter": "\"x\" is not ID_NAME id" */
	const char *subs[4];
	cli_rows_fn fns[4];
	void (*close)(cli_rows *r); /* before the stores close, or NULL */
} cli_rows_cmd;

/* Pick the subcommand argv[1], parse argv[2..] (CONFIG, ids > 0,
 * --consumer NAME and `opts`, ended by a NULL name), load the config,
 * call the subcommand, then cmd->close and close every store. A bad
 * argument prints "CMD: ..." and the usage (exit 2); otherwise the
 * config's exit code or the subcommand's. */
int cli_rows_main(const cli_rows_cmd *cmd, const cli_opt *opts, int argc,
                  char **argv, cli_rows *r);

/* 1 when consumer i is selected (--consumer, or all). */
int cli_rows_selected(const cli_rows *r, int i);

/* Open consumer i's store into r->st[i] unless it is open: 0 or an exit
 * code (printed). */
int cli_rows_open(cli_rows *r, int i);

/* Print "consumer "NAME": WHAT on STORE failed: ERROR" (the URL
 * redacted, the store's message scrubbed); CLI_EXIT_CONNECT for a lost
 * or refused connection, else CLI_EXIT_RUNTIME. */
int cli_rows_store_error(cli_rows *r, int i, const char *what, int err);

#endif
