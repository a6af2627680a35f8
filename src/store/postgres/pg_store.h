/*
 * PostgreSQL store (libpq): private names shared by the files of this
 * folder.
 *
 * Round trips. Transaction control is deferred: begin(), savepoint(),
 * release() and rollback_to() only queue their command, and the queue is
 * sent in one pipeline with the next statement (or with COMMIT). A
 * savepoint released or rolled back before any statement ran is dropped
 * altogether, and a transaction in which nothing ran costs nothing. So a
 * batch costs: claim (with BEGIN), one round trip per handler statement
 * (with its SAVEPOINT/RELEASE), COMMIT. The hot statements are prepared
 * lazily, once per connection, in the same pipeline as their first use.
 */
#ifndef INBOX_STORE_PG_STORE_H
#define INBOX_STORE_PG_STORE_H

#include <libpq-fe.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/internal.h"

/* Schema version this library creates. */
#define INBOX_PG_SCHEMA_VERSION INBOX__SCHEMA_VERSION

/* The statements of a store handle, built once at open (table names
 * depend on the handle's prefix and schema). All are prepared lazily. */
enum pg_query {
	PGQ_CLAIM,
	PGQ_CLAIM_REREAD,
	PGQ_RECLAIM,
	PGQ_FINISH,
	PGQ_EXTEND,
	PGQ_DEAD_LETTER,
	PGQ_REGISTER,
	PGQ_RETENTION,
	PGQ_CONSUMERS,
	PGQ_PURGE_DELETE,
	PGQ_PURGE_COUNT,
	PGQ_VERSION,
	PGQ_COUNT
};

/* Deferred transaction-control commands. */
enum pg_op { PGOP_BEGIN, PGOP_SAVEPOINT, PGOP_RELEASE, PGOP_ROLLBACK_TO };

#define PG_MAX_PENDING 8

typedef struct pg_store {
	struct inbox_store base; /* first: the core casts */
	PGconn *conn;
	char *sql[PGQ_COUNT];
	/* Bit q set: PGQ q is prepared on the backend `prepared_pid`. */
	unsigned prepared;
	int prepared_pid;
	enum pg_op pending[PG_MAX_PENDING];
	int npending;
	/* Scratch for claim's array literals; reused, so memory stays flat. */
	inbox__buf arr[3];
	/* Qualified table names, for migrate. */
	inbox__buf t_inbox, t_dl, t_consumers, t_version;
} pg_store;

/* pg_sql.c: build the table names and s->sql[]. 0 or -1 (NOMEM). */
int inbox__pg_build_sql(pg_store *s);
void inbox__pg_free_sql(pg_store *s);
/* Parameter count and types of each PGQ statement (for PQprepare). */
typedef struct pg_qdef {
	int nparams;
	const Oid *types;
} pg_qdef;
extern const pg_qdef inbox__pg_qdefs[PGQ_COUNT];
/* The v1 schema as one multi-statement text; malloc'ed, or NULL. */
char *inbox__pg_schema_v1(const pg_store *s);

/* Advisory lock key of this handle's tables for `purpose` ("migrate",
 * "purge"): FNV-1a 64 of "libinbox:<purpose>:<schema>.<prefix>". The
 * migrate key ignores the prefix (CREATE SCHEMA IF NOT EXISTS races
 * between prefixes of one schema). Tests use it to hold the purge lock. */
int64_t inbox__pg_lock_key(const inbox_store *st, const char *purpose);

/* pg_exec.c */

/* Record the error of a failed libpq call (r may be NULL) on the handle,
 * prefixed by `what`, and return INBOX_ERR_TRANSIENT or INBOX_ERR_STORE. */
int inbox__pg_fail(pg_store *s, const PGresult *r, const char *what);
/* Classify a SQLSTATE (NULL = none) for this connection. */
int inbox__pg_classify(PGconn *conn, const char *sqlstate);

/* Run prepared statement q (q >= 0, prepared on first use) or `sql`
 * (q < 0) with text parameters (lengths/formats may be NULL: all text),
 * after the deferred transaction-control commands, in one round trip.
 * Returns the result (the caller PQclear()s it) or NULL with *rc set and
 * the error recorded. */
PGresult *inbox__pg_run(pg_store *s, int q, const char *sql, int nparams,
                        const char *const *values, const int *lengths,
                        const int *formats, const char *what, int *rc);
/* Like inbox__pg_run, for statements whose result is not needed. */
int inbox__pg_run_cmd(pg_store *s, int q, const char *sql, int nparams,
                      const char *const *values, const char *what,
                      int64_t *rows);
/* Send the deferred commands now (before the caller uses the PGconn
 * directly). */
int inbox__pg_flush(pg_store *s);

int inbox__pg_begin(inbox_store *st);
int inbox__pg_commit(inbox_store *st);
int inbox__pg_rollback(inbox_store *st);
int inbox__pg_savepoint(inbox_store *st);
int inbox__pg_release(inbox_store *st);
int inbox__pg_rollback_to(inbox_store *st);
int inbox__pg_exec(inbox_store *st, const char *sql, int nparams,
                   const char *const *params, int64_t *rows);
int inbox__pg_query(inbox_store *st, const char *sql, int nparams,
                    const char *const *params, inbox_row_fn fn, void *payload);

/* pg_migrate.c */
int inbox__pg_migrate(inbox_store *st);
int inbox__pg_schema_version(inbox_store *st, int *version);

/* pg_inbox.c */
int inbox__pg_register_consumer(inbox_store *st, const char *consumer,
                                int64_t retention_seconds);
int inbox__pg_claim(inbox_store *st, const char *consumer, inbox_claim *claims,
                    size_t n, inbox_status status, int64_t lease_ms);
int inbox__pg_reclaim(inbox_store *st, const char *consumer, const char *key,
                      inbox_status status, int64_t lease_ms, int *taken,
                      int32_t *attempts, int64_t *fence);
int inbox__pg_finish(inbox_store *st, const char *consumer, const char *key,
                     int64_t fence, inbox_status expect, inbox_status status,
                     int32_t attempts, int64_t *rows);
int inbox__pg_extend(inbox_store *st, const char *consumer, const char *key,
                     int64_t fence, int64_t lease_ms, int64_t *rows);
int inbox__pg_dead_letter(inbox_store *st, const inbox_dead_letter *dl,
                          int64_t *id);

/* pg_purge.c */
int inbox__pg_purge(inbox_store *st, const char *consumer,
                    int64_t retention_seconds, int batch_limit, int dry_run,
                    int64_t *deleted);

/* Parse a decimal integer column; 0 when NULL or malformed. */
int64_t inbox__pg_int(const PGresult *r, int row, int col);

#endif
