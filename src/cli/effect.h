/*
 * The declarative effect of a configured consumer: SQL statements whose $N
 * parameters are bound from JSON pointers into the message, and versioned
 * upserts, run in the inbox's transaction by cli_effect_handler.
 */
#ifndef INBOX_CLI_EFFECT_H
#define INBOX_CLI_EFFECT_H

#include <stddef.h>

#include <inbox/inbox.h>

#include "cli/config.h"

/* Static checks of one effect statement, without a database: exactly one
 * statement, no transaction control (the effect runs inside the inbox's
 * transaction), and the $N placeholders are exactly $1..$nparams.
 * 0, or -1 with the reason in why. */
int cli_sql_check(const char *sql, int nparams, const char *const *params,
                  char *why, size_t len);

/* Run a consumer's setup SQL (several statements allowed) outside any
 * transaction. 0, or with the database's message in err INBOX_ERR_STORE
 * (the SQL was refused) or INBOX_ERR_TRANSIENT (the database went away
 * meanwhile: try again). */
int cli_setup_run(inbox_store *st, const char *sql, char *err, size_t len);

/* Check every effect step against the database without running it
 * (PostgreSQL: PREPARE; SQLite: sqlite3_prepare_v2): missing tables or
 * columns, syntax errors. 0, or with the reason ("PATH:LINE: consumer
 * ..., effect step N: ...") in err INBOX_ERR_STORE or INBOX_ERR_INVALID
 * (refused), or INBOX_ERR_TRANSIENT (the database went away). */
int cli_effect_validate(inbox_store *st, const char *path,
                        const cli_consumer *c, char *err, size_t len);

/* The inbox handler; payload is the const cli_consumer *. Binds the
 * parameters, runs the steps in order. A missing parameter or a data or
 * integrity error (SQLSTATE class 22/23, SQLite constraint/mismatch) is
 * permanent: REJECT (dead letter with the reason). Anything else: RETRY
 * (a transient error — the infrastructure's — is never the message's: the
 * core then rolls the whole batch back and runs it again, uncounted,
 * whatever the handler returned). */
int cli_effect_handler(inbox_txn *t, const inbox_msg *m, void *payload);

#endif
