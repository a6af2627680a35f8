/*
 * SQL of the admin API (admin*.c), written once for every store: a
 * template names tables and the few expressions that differ between
 * dialects (PostgreSQL's timestamptz and bytea, SQLite's integer
 * milliseconds and BLOB), and is expanded for the store at hand: the
 * tables here, each expression by the store's backend (its vtable's
 * sql_expr, inbox/sys/store.h; the core knows no dialect):
 *
 *   {inbox} {dead_letters} {consumers} {outbox}   quoted, prefixed table
 *                names
 *   {now}        the database's clock in epoch milliseconds (SQLite: the
 *                local clock the SQLite store writes with, as a literal)
 *   {nowts}      the current time as the column type stores it
 *   {ms:EXPR}    a timestamp column/aggregate as epoch milliseconds
 *   {i:N}        parameter $N used as an integer
 *   {cutoff:N}   "now minus $N seconds", comparable with a timestamp column
 *   {hex:COL}    a BLOB/bytea column as hex text
 *   {len:COL}    its length in bytes
 */
#ifndef INBOX_ADMIN_ADMIN_SQL_H
#define INBOX_ADMIN_ADMIN_SQL_H

#include <inbox/admin.h>

#include "base/buf.h"
#include "core/internal.h"

/* Windows longer than this (seconds) are clamped: far beyond any real
 * retention, and still inside PostgreSQL's interval range. */
#define INBOX__ADMIN_MAX_WINDOW_S 10000000000LL

/* Expand `tmpl` into b (reset first). 0, or INBOX_ERR_NOMEM or
 * INBOX_ERR_STATE (a backend without a dialect) with the message set on
 * the store. */
int inbox__admin_sql(inbox__buf *b, inbox_store *st, const char *tmpl);

/* strtoll of a column value; 0 for NULL. */
int64_t inbox__admin_num(const char *v);

/* strdup of a column value; NULL stays NULL. *oom set on failure. */
char *inbox__admin_dup(const char *v, int *oom);

/* Fail with INBOX_ERR_INVALID and a message on the store. */
int inbox__admin_invalid(inbox_store *st, const char *what);

/* ---- a listing's filter (admin_filter.c) ----------------------------- */

#define INBOX__ADMIN_FILTER_MAX 8

/* "SELECT ... WHERE id > $1" and the optional terms of a filter, each
 * bound to its own parameter: values never enter the SQL, and the
 * columns and expressions named are the code's own. */
typedef struct inbox__admin_filter {
	inbox__buf t; /* the template (inbox__admin_sql) */
	const char *p[INBOX__ADMIN_FILTER_MAX];
	int np;
	int bad; /* out of memory, or more terms than parameters */
	char after[24], older[24];
} inbox__admin_filter;

/* `select` ("SELECT cols FROM {table}") WHERE id > {i:1}, $1 = after_id. */
void inbox__admin_filter_init(inbox__admin_filter *w, const char *select,
                              int64_t after_id);
/* " AND column = $n", $n = value; nothing when value is NULL. */
void inbox__admin_filter_eq(inbox__admin_filter *w, const char *column,
                            const char *value);
/* " AND sql" (a term without a parameter) when on. */
void inbox__admin_filter_if(inbox__admin_filter *w, int on, const char *sql);
/* " AND expr < {cutoff:n}", $n = seconds (clamped at
 * INBOX__ADMIN_MAX_WINDOW_S); nothing when seconds <= 0. */
void inbox__admin_filter_older(inbox__admin_filter *w, const char *expr,
                               int64_t seconds);
/* " ORDER BY id" and " LIMIT limit" (when > 0), expanded for st and run:
 * fn per row. The template is freed. INBOX_OK or the error (set on st). */
int inbox__admin_filter_run(inbox__admin_filter *w, inbox_store *st, int limit,
                            inbox_row_fn fn, void *payload);

/* A hex column's bytes, malloc'ed and NUL-terminated (bad digits read
 * as 0); NULL when out of memory. */
char *inbox__admin_unhex(const char *h, size_t *len);

/* What a by-id read's row function fills: the row it made (the caller's
 * type) and whether memory ran out. */
typedef struct inbox__admin_one {
	void *row;
	int oom;
} inbox__admin_one;

/* The row `id` (of `consumer` when not NULL): `select` ("SELECT cols
 * FROM {table}") WHERE id = {i:1} [AND consumer = $2], fn per row into
 * x. INBOX_OK with x->row set; INBOX_ERR_NOTFOUND ("no WHAT ID [of
 * "CONSUMER"]"), INBOX_ERR_NOMEM ("WHAT: out of memory") or the query's
 * error, the message on st; x->row is the caller's to free then. */
int inbox__admin_get(inbox_store *st, const char *select, int64_t id,
                     const char *consumer, const char *what, inbox_row_fn fn,
                     inbox__admin_one *x);
#endif
