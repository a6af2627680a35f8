/* Internal names of the outbox shared between the core, the stores and
 * the dispatcher (src/outbox/). The public API is <inbox/outbox.h>. */
#ifndef INBOX_OUTBOX_OUTBOX_H
#define INBOX_OUTBOX_OUTBOX_H

#include <inbox/outbox.h>
#include <inbox/sys/store.h>

/* "pending" -> INBOX_OUTBOX_PENDING...; NONE when unknown. */
inbox_outbox_state inbox__outbox_state_parse(const char *s);

/* 1 if the store's backend has the outbox slots (vtable version >= 2). */
int inbox__outbox_supported(const inbox_store *st);

/* Validate a declared effect; 0, INBOX_ERR_INVALID with the reason in
 * why, or INBOX_ERR_NOMEM. */
int inbox__outbox_effect_check(const inbox_outbox_effect *e, char *why,
                               size_t len);

/* Excerpt of a provider's response kept in the row and in dead letters. */
#define INBOX__OUTBOX_RESPONSE_MAX 4096

#endif
