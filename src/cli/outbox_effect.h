/*
 * The external effects of a configured consumer (outbox: in the config
 * file): for every applied message, one outbox row per step, written in
 * the inbox's transaction, with a JSON body built from the message.
 */
#ifndef INBOX_CLI_OUTBOX_EFFECT_H
#define INBOX_CLI_OUTBOX_EFFECT_H

#include <inbox/inbox.h>

#include "cli/config.h"

/* Declare every outbox step of `c` for message m (called by the effect
 * handler after the SQL steps). A body pointer missing from the message
 * is permanent: REJECT with the reason; a store failure: RETRY. */
int cli_outbox_declare(inbox_txn *t, const inbox_msg *m, const cli_consumer *c);

#endif
