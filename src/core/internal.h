/* Internal names shared between files of the library (prefix inbox__). */
#ifndef INBOX_CORE_INTERNAL_H
#define INBOX_CORE_INTERNAL_H

#include <inbox/inbox.h>
#include <inbox/sys/store.h>

#include "base/buf.h"
#include "base/util.h"

#include "core/abi.h" /* the versioned structs' checks */

/* The schema version this library's stores migrate to. */
#define INBOX__SCHEMA_VERSION 6

/* Between a store and the consumer only, never returned by the public
 * API: the store lost the transaction's deferred statements; roll back
 * and run the batch again at once (<inbox/sys/store.h>). */
#define INBOX__ERR_REDO INBOX_STORE_ERR_REDO

/* A delivery's source position as the stores keep it and a look-up by
 * position compares it (docs/cli.md, inspect --position): valid UTF-8 as
 * it is (pos itself: nothing copied); otherwise each byte that begins no
 * well-formed UTF-8 sequence as the four characters \xHH (lower-case
 * hex, as `inbox inspect` prints such a byte), the rest as it is, into
 * buf (reset first; its data returned). NULL for NULL, and when memory
 * ran out (src/core/position.c). */
const char *inbox__position_text(const char *pos, inbox__buf *buf);

/* NULL-terminated list of the stores compiled in (src/store/builtin.c). */
extern const inbox_store_vtable *const inbox__builtin_stores[];

/* The store's spelling of e (its vtable's sql_expr): the length as
 * snprintf gives it, or INBOX_ERR_STATE with the message set (a backend
 * older than version 6, or one that does not know e). */
int inbox__store_expr(inbox_store *st, inbox_sql_expr e, const char *arg,
                      char *out, size_t len);

/* NULL-terminated list of the sources compiled in (src/source/builtin.c). */
struct inbox_source_vtable;
extern const struct inbox_source_vtable *const inbox__builtin_sources[];

/* The column names inbox_row_column_name() gives while a backend runs
 * the row callbacks of one query (src/core/rows.c): push before the
 * first row, pop after the last (even when stopped early); nested
 * queries nest. name(ctx, col) returns NULL out of range. */
typedef struct inbox__row_names {
	const char *(*name)(void *ctx, int col);
	void *ctx;
	int ncols;
	struct inbox__row_names *prev;
} inbox__row_names;
void inbox__row_names_push(inbox__row_names *n);
void inbox__row_names_pop(inbox__row_names *n);

struct inbox__buf;
/* Append the quoted, prefixed table name ("schema"."prefix_name"). */
int inbox__table_name(struct inbox__buf *out, const inbox_store *st,
                      const char *name);

/* The retention window stored for `consumer` (NULL: the longest of all),
 * in seconds; 0 when none is. A plain SELECT through the store's query
 * slot. */
int inbox__stored_retention(inbox_store *st, const char *consumer,
                            int64_t *seconds);

#endif
