/* Internal names shared between files of the library (prefix inbox__). */
#ifndef INBOX_CORE_INTERNAL_H
#define INBOX_CORE_INTERNAL_H

#include <signal.h>

#include <inbox/inbox.h>
#include <inbox/sys/store.h>

#include "core/abi.h" /* the versioned structs' checks */

/* The schema version this library's stores migrate to. */
#define INBOX__SCHEMA_VERSION 4

/* Between a store and the consumer only, never returned by the public
 * API: the store lost the transaction's deferred statements; roll back
 * and run the batch again at once (<inbox/sys/store.h>). */
#define INBOX__ERR_REDO INBOX_STORE_ERR_REDO

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

/* Quote an SQL identifier ("a""b") into out; 0 or -1. */
struct inbox__buf;
int inbox__quote_ident(struct inbox__buf *out, const char *ident);
/* Quote "a.b" as "a"."b" (a schema-qualified name; one dot at most is
 * taken as the separator) or "a" as "a". -1 on NOMEM or an empty part. */
int inbox__quote_dotted(struct inbox__buf *out, const char *name);
/* Append the quoted, prefixed table name ("schema"."prefix_name"). */
int inbox__table_name(struct inbox__buf *out, const inbox_store *st,
                      const char *name);

/* Format an error message into err (errlen bytes; NULL/0: nothing), never
 * ending it inside a UTF-8 character cut by the buffer. */
void inbox__seterr(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* FNV-1a 64 of n bytes at p, continuing from h (INBOX__FNV_INIT to
 * start): statement-cache keys, advisory-lock keys, filter hashes. */
#define INBOX__FNV_INIT 14695981039346656037ull
uint64_t inbox__fnv1a(uint64_t h, const void *p, size_t n);

/* Flags shared between threads and signal handlers, of the type
 * inbox_run() and inbox_dispatcher_run() take (volatile sig_atomic_t):
 * read and written with atomic operations only — a plain access to a
 * flag another thread writes is a data race, volatile or not. Lock-free
 * on every platform we build for, so safe in a signal handler too. */
static inline int inbox__flag(volatile sig_atomic_t *f)
{
	return __atomic_load_n(f, __ATOMIC_ACQUIRE) != 0;
}

static inline void inbox__flag_set(volatile sig_atomic_t *f, int v)
{
	__atomic_store_n(f, v, __ATOMIC_RELEASE);
}

/* Monotonic and wall clocks. */
int64_t inbox__now_ms(void);
double inbox__mono_seconds(void);

#endif
