/*
 * The `inbox` command: shared declarations. Each subcommand is one file
 * (cmd_NAME.c) exporting one cli_cmd_NAME function, listed in main.c's
 * command table.
 */
#ifndef INBOX_CLI_H
#define INBOX_CLI_H

#include <stddef.h>
#include <stdint.h>

#include <inbox/inbox.h>

/* Exit codes (documented in `inbox --help` and docs/cli.md). */
enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_RUNTIME = 1, /* a consumer failed while running */
	CLI_EXIT_USAGE = 2,   /* bad command line */
	CLI_EXIT_CONFIG = 3,  /* config file error (nothing consumed) */
	CLI_EXIT_CONNECT = 4, /* cannot open/connect the store or source */
	CLI_EXIT_DRAIN = 5    /* drain deadline exceeded / second signal */
};

typedef struct cli_command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary; /* one line for `inbox --help` */
	const char *usage;   /* full text for `inbox CMD --help` */
} cli_command;

int cli_cmd_run(int argc, char **argv);
int cli_cmd_migrate(int argc, char **argv);
int cli_cmd_stats(int argc, char **argv);
int cli_cmd_demo(int argc, char **argv);
int cli_cmd_dispatch(int argc, char **argv);
int cli_cmd_purge(int argc, char **argv);
int cli_cmd_dlq(int argc, char **argv);
int cli_cmd_inspect(int argc, char **argv);
int cli_cmd_outbox(int argc, char **argv);
int cli_cmd_check(int argc, char **argv);

extern const char cli_run_usage[];
extern const char cli_migrate_usage[];
extern const char cli_stats_usage[];
extern const char cli_demo_usage[];
extern const char cli_dispatch_usage[];
extern const char cli_purge_usage[];
extern const char cli_dlq_usage[];
extern const char cli_inspect_usage[];
extern const char cli_outbox_usage[];
extern const char cli_check_usage[];

/* inbox gen-docs man|md (cli/gendocs.c): the man page, or docs/cli.md
 * (read on stdin) with its generated blocks rewritten, from the command
 * table `cmds` (n entries). An exit code. */
int cli_gen_docs(const cli_command *cmds, size_t n, int argc, char **argv);

/* Path of the running executable (for the demo's child processes). */
extern const char *cli_argv0;

/* "inbox: error: ..." on stderr. */
void cli_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Install the JSON-lines writer on stderr (cli/log.c) as the library's
 * log callback, at the level INBOX_LOG_LEVEL names (unset or empty: info).
 * -1 (with a message) when it names no level. */
int cli_log_setup(void);
/* Called with every event the log writes, before it is written (NULL:
 * none): `inbox run` learns there which consumer's source fails. Set
 * before any thread starts. */
extern void (*cli_log_tap)(inbox_log_level level, const char *consumer,
                           const char *event, const char *fields);

/* inbox --version: the command's, the library's and the client
 * libraries' versions, one "name version" per line (cli/version.c). */
void cli_print_version(FILE *f);

/* 1 if arg is "-h" or "--help". */
int cli_is_help(const char *arg);

/* A store or source URL safe to print: every secret (inbox_redact_url)
 * replaced by "***". Writes into buf (truncated) and returns it. */
const char *cli_redact(const char *url, char *buf, size_t len);

/* Remove from msg (in place, a buffer of cap bytes) every secret of url
 * in any spelling (base/secret.h): defence in depth, the handles' errmsg
 * is scrubbed already. */
void cli_scrub(char *msg, size_t cap, const char *url);

/* Exit code for a failed inbox_store_open / inbox_source_open. */
int cli_open_exit_code(int rc);

#endif
