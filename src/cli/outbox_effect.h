/*
 * The external effects of a configured consumer (outbox: in the config
 * file): for every applied message, one outbox row per step, written in
 * the inbox's transaction, with a JSON body built from the message.
 */
#ifndef INBOX_CLI_OUTBOX_EFFECT_H
#define INBOX_CLI_OUTBOX_EFFECT_H

#include <inbox/inbox.h>
#include <inbox/outbox.h>

#include "cli/config.h"

/* The step's fixed fields (everything but the body and max_attempts) into
 * *e, which borrows s's strings: what the config check and the handler
 * both hand to the outbox. */
void cli_outbox_effect_of(inbox_outbox_effect *e, const cli_outbox_step *s);

/* Declare every outbox step of `c` for message m (called by the effect
 * handler after the SQL steps). A body pointer missing from the message
 * is permanent: REJECT with the reason; a store failure: RETRY. */
int cli_outbox_declare(inbox_txn *t, const inbox_msg *m, const cli_consumer *c);

#endif
