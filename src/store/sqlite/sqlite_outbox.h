/* The outbox slots of the SQLite store (sqlite_outbox.c). */
#ifndef INBOX_STORE_SQLITE_OUTBOX_H
#define INBOX_STORE_SQLITE_OUTBOX_H

#include <inbox/sys/store.h>

/* The rows a dispatcher still has to deal with. */
#define SQ_OUTBOX_UNDONE "('pending', 'in_flight', 'failed', 'unknown')"

/* Schema version 2: the outbox table and its indexes (a template for
 * inbox__sq_expand). */
extern const char inbox__sq_outbox_schema[];

int inbox__sq_outbox_add(inbox_store *st, const inbox_outbox_item *row,
                         int *added);
int inbox__sq_outbox_claim(
    inbox_store *st, const char *consumer, int limit, int64_t lease_ms,
    int (*fn)(const inbox_outbox_item *row, void *payload), void *payload);
int inbox__sq_outbox_finish(inbox_store *st, const inbox_outbox_finish *f,
                            int64_t *rows);
int inbox__sq_outbox_counts(inbox_store *st, const char *consumer,
                            inbox_outbox_counts *out);
int inbox__sq_outbox_purge(inbox_store *st, const char *consumer,
                           int64_t older_than_seconds, int batch_limit,
                           int64_t *deleted);

#endif
