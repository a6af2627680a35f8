/* What `inbox check` checks of a consumer, shared with `inbox run`'s
 * SIGHUP (which checks the new config before it drains). */
#ifndef INBOX_CLI_CHECK_H
#define INBOX_CLI_CHECK_H

#include <stddef.h>

#include "cli/config.h"
#include "cli/open.h"

/* The store side of consumer cc as `inbox run` opens it at start-up (the
 * store, its schema version, the setup SQL and the effect steps against
 * the database, the consumer's registration with its retention window),
 * inside one transaction rolled back at the end: nothing is written. The
 * store is opened without migrating; when its tables do not exist yet
 * and the config migrates them (auto_migrate), that is no error: *note
 * says so and the effects are not checked. 0 (note set, maybe ""), or an
 * exit code with f filled (not printed). */
int cli_check_store(const cli_config *cfg, const cli_consumer *cc,
                    cli_open_fail *f, char *note, size_t notelen);

/* The source of cc opened as `inbox run` opens it, then closed: nothing
 * polled, so nothing consumed, acknowledged or committed. 0, or an exit
 * code with f filled. */
int cli_check_source(const cli_config *cfg, const cli_consumer *cc,
                     cli_open_fail *f);

#endif
