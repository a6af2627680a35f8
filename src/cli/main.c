/*
 * inbox — run effectively-once consumers declared in a config file, and
 * the operator's tools around them. Each subcommand is one entry in the
 * table below and one cmd_NAME.c file.
 *
 * The table is the one source of `inbox --help`, `inbox COMMAND --help`,
 * the man page (docs/inbox.1) and the CLI reference (docs/cli.md): both
 * files are generated from it (`make docs`, cli/gendocs.c) and the
 * cli_docs test fails when they are stale or when an option a command
 * parses is missing from its --help. To add a command: write cmd_NAME.c
 * with cli_cmd_NAME and cli_NAME_usage (declared in cli.h; its first
 * paragraph is the synopsis: "usage: inbox NAME ...", one "inbox NAME"
 * line per form), add its line below, run `make docs`, commit the two
 * regenerated files.
 */
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "cli/cli.h"

static const cli_command commands[] = {
    {"run", cli_cmd_run, "consume messages as the config file declares",
     cli_run_usage},
    {"check", cli_cmd_check,
     "validate a config as run does (--connect: reach stores, sources)",
     cli_check_usage},
    {"migrate", cli_cmd_migrate,
     "create or upgrade the tables, run setup SQL, check the effects",
     cli_migrate_usage},
    {"stats", cli_cmd_stats,
     "per consumer: inbox size, processing, dead letters, retention "
     "headroom, outbox",
     cli_stats_usage},
    {"purge", cli_cmd_purge,
     "delete inbox records older than the retention window (--dry-run)",
     cli_purge_usage},
    {"dlq", cli_cmd_dlq, "dead letters: list, show, replay, drop",
     cli_dlq_usage},
    {"inspect", cli_cmd_inspect,
     "one inbox record: status, attempts, fingerprint, lease, times",
     cli_inspect_usage},
    {"outbox", cli_cmd_outbox,
     "outbox rows (external effects): list, show, retry, drop",
     cli_outbox_usage},
    {"dispatch", cli_cmd_dispatch,
     "perform the external effects (outbox) with idempotency keys",
     cli_dispatch_usage},
    /* Commands added by other work go here, one line each
     * (e.g. {"check", cli_cmd_check, "...", cli_check_usage}). */
    {"demo", cli_cmd_demo,
     "a self-contained demo on SQLite and a JSONL file (no server)",
     cli_demo_usage},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: inbox COMMAND [ARGS...]\n"
	        "       inbox COMMAND --help\n"
	        "       inbox --version\n"
	        "\n"
	        "Effectively-once message consumers: each message's key is "
	        "recorded in an\ninbox table in the same database transaction "
	        "as its effect, and the broker\nis acknowledged only after "
	        "that commit.\n\ncommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-9s %s\n", commands[i].name,
		        commands[i].summary);
	fprintf(f, "\nexit codes:\n"
	           "  0  success\n"
	           "  1  runtime failure (a consumer stopped on an error)\n"
	           "  2  usage error (bad command line)\n"
	           "  3  config error (nothing was consumed)\n"
	           "  4  cannot open or connect to a store or source\n"
	           "  5  drain deadline exceeded after SIGTERM/SIGINT, or a "
	           "second signal\n"
	           "  (inspect, dlq: 1 also when the record or dead letter "
	           "does not exist,\n   or a replay did not end applied, "
	           "duplicate or stale)\n"
	           "\nenvironment: INBOX_LOG_LEVEL=debug|info|warn|error "
	           "(default info; another value\nis a config error); logs are "
	           "JSON lines on stderr.\n"
	           "docs: docs/cli.md, docs/config.md\n");
}

int main(int argc, char **argv)
{
	cli_argv0 = argv[0];
	/* Before any thread: it replaces jansson's allocator (base/json.c). */
	inbox__json_alloc_init();
	if (argc < 2) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (cli_is_help(cmd) || strcmp(cmd, "help") == 0) {
		if (argc > 2 && strcmp(cmd, "help") == 0) {
			for (size_t i = 0; i < NCOMMANDS; i++)
				if (strcmp(commands[i].name, argv[2]) == 0) {
					fputs(commands[i].usage, stdout);
					return CLI_EXIT_OK;
				}
			fprintf(stderr, "inbox: unknown command \"%s\"\n\n",
			        argv[2]);
			usage(stderr);
			return CLI_EXIT_USAGE;
		}
		usage(stdout);
		return CLI_EXIT_OK;
	}
	/* Not listed: the generator of the man page and CLI reference. */
	if (strcmp(cmd, "gen-docs") == 0)
		return cli_gen_docs(commands, NCOMMANDS, argc - 1, argv + 1);
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
		cli_print_version(stdout);
		return CLI_EXIT_OK;
	}
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if (strcmp(commands[i].name, cmd) != 0)
			continue;
		for (int a = 2; a < argc; a++)
			if (cli_is_help(argv[a])) {
				fputs(commands[i].usage, stdout);
				return CLI_EXIT_OK;
			}
		if (cli_log_setup() < 0)
			return CLI_EXIT_CONFIG;
		return commands[i].fn(argc - 1, argv + 1);
	}
	fprintf(stderr, "inbox: unknown command \"%s\"\n\n", cmd);
	usage(stderr);
	return CLI_EXIT_USAGE;
}
