/*
 * The command line of the commands that take CONFIG [--consumer NAME]
 * and work on each selected consumer in turn (migrate, purge, stats): one
 * parser over a table of the command's own options, one loop.
 */
#ifndef INBOX_CLI_ARGS_H
#define INBOX_CLI_ARGS_H

#include "cli/config.h"

typedef enum cli_opt_kind {
	CLI_OPT_FLAG,   /* --name: *(int *)out = 1 */
	CLI_OPT_INT,    /* --name N: *(long long *)out, min..max */
	CLI_OPT_SECONDS /* --name DURATION: *(double *)out, seconds > 0
	                   (cli_parse_seconds) */
} cli_opt_kind;

typedef struct cli_opt {
	const char *name; /* "--batch" */
	cli_opt_kind kind;
	void *out;
	long long min, max;
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

#endif
