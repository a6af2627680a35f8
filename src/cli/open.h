/* Opening what a configured consumer needs, with messages a person can act
 * on. Each function prints its error and returns an exit code (0 = ok). */
#ifndef INBOX_CLI_OPEN_H
#define INBOX_CLI_OPEN_H

#include <inbox/inbox.h>
#include <inbox/source.h>

#include "cli/config.h"

/* Load the config; 0 or CLI_EXIT_CONFIG (message printed). */
int cli_load(cli_config *cfg, const char *path);

/* cli_load, then the consumer named `only` into *sel (NULL when `only` is
 * NULL: all of them). 0, CLI_EXIT_CONFIG, or CLI_EXIT_USAGE for an unknown
 * name (the known ones printed); on failure cfg is already freed. */
int cli_load_selected(cli_config *cfg, const char *path, const char *only,
                      const cli_consumer **sel);

/* A failed open, not printed yet: for `inbox run`, which waits for a
 * database or broker that is not there yet instead of exiting. */
typedef struct cli_open_fail {
	int rc;         /* the inbox_err */
	int exit_code;  /* what the command exits with when it gives up */
	char msg[1400]; /* as cli_error prints it; no password in it */
	char hint[256]; /* a second line ("inbox: hint: ..."), or "" */
} cli_open_fail;

/* 1 when a later attempt may succeed: the store or broker cannot be
 * reached (INBOX_ERR_CONNECT), or went away meanwhile (TRANSIENT,
 * TIMEOUT); 0 for what only a change of the config or the database
 * cures (those still exit 3 or 4 at once). */
int cli_open_retryable(const cli_open_fail *f);
/* Print f's message (and hint) on stderr. */
void cli_open_report(const cli_open_fail *f);

/* The cli_try_* functions below are their cli_* namesakes without the
 * printing: on failure they fill *f and return its exit code. */
int cli_try_open_store(const cli_config *cfg, const cli_consumer *c,
                       int auto_migrate, inbox_store **out, cli_open_fail *f);
int cli_try_prepare_effects(const cli_config *cfg, const cli_consumer *c,
                            inbox_store *st, cli_open_fail *f);
int cli_try_open_consumer(const cli_config *cfg, const cli_consumer *c,
                          inbox_store *st, inbox_consumer **out,
                          cli_open_fail *f);
int cli_try_open_source(const cli_config *cfg, const cli_consumer *c,
                        inbox_source **out, cli_open_fail *f);

/* Open the consumer's store. auto_migrate < 0: as the config says. */
int cli_open_store(const cli_config *cfg, const cli_consumer *c,
                   int auto_migrate, inbox_store **out);

/* Run the setup SQL and validate the effect steps against the store. */
int cli_prepare_effects(const cli_config *cfg, const cli_consumer *c,
                        inbox_store *st);

/* Create the inbox consumer with the declarative effect as handler. */
int cli_open_consumer(const cli_config *cfg, const cli_consumer *c,
                      inbox_store *st, inbox_consumer **out);

/* Open the consumer's source. */
int cli_open_source(const cli_config *cfg, const cli_consumer *c,
                    inbox_source **out);

/* The consumer named `name`, or NULL after printing the known names. */
const cli_consumer *cli_find_consumer(const cli_config *cfg, const char *name);

#endif
