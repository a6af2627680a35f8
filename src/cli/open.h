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
