/* The outbox slots of the PostgreSQL store (pg_outbox.c). */
#ifndef INBOX_STORE_PG_OUTBOX_H
#define INBOX_STORE_PG_OUTBOX_H

#include "store/postgres/pg_store.h"

/* Schema version 2: create the outbox table and its indexes, inside the
 * migration's transaction (pg_migrate.c holds the migrate lock). */
int inbox__pg_outbox_migrate(pg_store *s);

/* Templates of the prepared statements PGQ_OUTBOX_* (see pg_sql.c). */
extern const char inbox__pg_outbox_add_sql[];
extern const char inbox__pg_outbox_claim_sql[];
extern const char inbox__pg_outbox_finish_sql[];

int inbox__pg_outbox_add(inbox_store *st, const inbox_outbox_item *row,
                         int *added);
int inbox__pg_outbox_claim(
    inbox_store *st, const char *consumer, int limit, int64_t lease_ms,
    int (*fn)(const inbox_outbox_item *row, void *payload), void *payload);
int inbox__pg_outbox_finish(inbox_store *st, const inbox_outbox_finish *f,
                            int64_t *rows);
int inbox__pg_outbox_counts(inbox_store *st, const char *consumer,
                            inbox_outbox_counts *out);
int inbox__pg_outbox_purge(inbox_store *st, const char *consumer,
                           int64_t older_than_seconds, int batch_limit,
                           int64_t *deleted);

#endif
