/*
 * The SQLite store: names shared between the files of src/store/sqlite/.
 *
 * One handle is one sqlite3 connection, used by one thread at a time
 * (opened with SQLITE_OPEN_NOMUTEX). Writers are serialised by SQLite's
 * database lock; every write transaction starts with BEGIN IMMEDIATE so
 * the lock is taken up front and two processes never deadlock upgrading a
 * read lock. Timestamps are INTEGER milliseconds since the Unix epoch,
 * computed in C and bound.
 */
#ifndef INBOX_STORE_SQLITE_H
#define INBOX_STORE_SQLITE_H

#include <sqlite3.h>
#include <stdint.h>

#include <inbox/sys/store.h>

#include "base/buf.h"

/* The schema version this library creates (sqlite_schema.c). */
#define SQ_SCHEMA_VERSION INBOX__SCHEMA_VERSION

/* The statements the backend itself runs, prepared once (lazily, because
 * they name the prefixed tables and some tables exist only after migrate)
 * with SQLITE_PREPARE_PERSISTENT and reused for every message. */
enum {
	SQ_BEGIN,
	SQ_COMMIT,
	SQ_ROLLBACK,
	SQ_SAVEPOINT,
	SQ_RELEASE,
	SQ_ROLLBACK_TO,
	SQ_CLAIM_INSERT,
	SQ_CLAIM_SELECT,
	SQ_RECLAIM,
	SQ_FINISH,
	SQ_EXTEND,
	SQ_DEAD_LETTER,
	SQ_REGISTER,
	SQ_RETENTION,
	SQ_PURGE_COUNT,
	SQ_PURGE_DELETE,
	SQ_OUTBOX_ADD, /* the outbox's per-effect statements */
	SQ_OUTBOX_DUE,
	SQ_OUTBOX_CLAIM,
	SQ_OUTBOX_FINISH,
	SQ_SET_RESULT, /* stored results (schema version 5) */
	SQ_NFIXED
};

/* Cache of handler statements (exec/query), keyed by SQL text, LRU. */
#define SQ_CACHE_SIZE 32

typedef struct sq_cached {
	char *sql; /* malloc'ed key; NULL = free slot */
	sqlite3_stmt *stmt;
	uint64_t used; /* tick of the last use, for LRU eviction */
} sq_cached;

typedef struct sq_store {
	struct inbox_store base; /* must be first */
	sqlite3 *db;
	int sp_open; /* the savepoint inbox_sp is on the stack */
	sqlite3_stmt *fixed[SQ_NFIXED];
	sq_cached cache[SQ_CACHE_SIZE];
	uint64_t tick;
	inbox__buf sql; /* scratch: expanded SQL text */
	/* Limits (see inbox_store_options): the options' explicit values
	 * (ms; 0 unset, < 0 none) and busy_timeout_ms, then the effective
	 * statement timeout, and the deadline of the handler statement
	 * running now (inbox__mono_seconds(); 0 = none), which the progress
	 * handler enforces. */
	int64_t opt_lock_ms, opt_statement_ms;
	int busy_ms;
	int64_t statement_ms;
	double deadline;
} sq_store;

#define SQ(st) ((sq_store *)(st))

/* Record the connection's last error (code name + message prefixed by
 * `what`) on the handle and return INBOX_ERR_TRANSIENT for SQLITE_BUSY /
 * SQLITE_LOCKED (and their extended codes), INBOX_ERR_STORE otherwise.
 * Also resynchronises base.in_txn: SQLite rolls a transaction back by
 * itself after some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM...). */
int inbox__sq_fail(sq_store *s, int rc, const char *what);
/* Static name of an (extended) result code: "SQLITE_CONSTRAINT_PRIMARYKEY". */
const char *inbox__sq_code_name(int rc);

/* Append `tmpl` to out with every "{name}" replaced by the quoted,
 * prefixed table or index name. The database schema name is ignored
 * (SQLite has no schemas in our sense). 0 or -1 (no memory). */
int inbox__sq_expand(const sq_store *s, inbox__buf *out, const char *tmpl);

/* The prepared fixed statement `id`, reset and with cleared bindings.
 * On failure the error is on the handle and the inbox_err is returned. */
int inbox__sq_fixed(sq_store *s, int id, sqlite3_stmt **out);
/* Step a statement to completion (RETURNING rows are discarded), then
 * reset it and clear its bindings. Returns an inbox_err. */
int inbox__sq_run(sq_store *s, sqlite3_stmt *stmt, const char *what);
/* Reset a statement and drop its bindings (borrowed text pointers). */
void inbox__sq_done(sqlite3_stmt *stmt);
/* INBOX_OK inside a transaction, else INBOX_ERR_STATE ("WHAT: no
 * transaction is open" on the handle). */
int inbox__sq_need_txn(sq_store *s, const char *what);
/* Bind text v (borrowed: SQLITE_STATIC), or NULL when v is NULL. */
void inbox__sq_bind_str(sqlite3_stmt *stmt, int i, const char *v);
/* Prepare an ad-hoc statement from a template (not cached). */
int inbox__sq_prepare_tmpl(sq_store *s, const char *tmpl, sqlite3_stmt **out);
void inbox__sq_finalize_all(sq_store *s);

/* The statement timeout for a handler's statement about to run: armed
 * inside a transaction unless an outer statement's is (a row callback's
 * query). Returns 1 when this call armed it (then disarm it after). */
int inbox__sq_arm(sq_store *s);
void inbox__sq_disarm(sq_store *s, int armed);

/* BEGIN IMMEDIATE / COMMIT / ROLLBACK keeping base.in_txn in step. */
int inbox__sq_begin(inbox_store *st);
int inbox__sq_commit(inbox_store *st);
int inbox__sq_rollback(inbox_store *st);

/* Vtable slots implemented in the other files. */
int inbox__sq_migrate(inbox_store *st);
/* Migrate to `version` (<= SQ_SCHEMA_VERSION) only: the upgrade tests
 * build an older schema with it. */
int inbox__sq_migrate_to(inbox_store *st, int version);
int inbox__sq_schema_version(inbox_store *st, int *version);
int inbox__sq_exec(inbox_store *st, const char *sql, int nparams,
                   const char *const *params, int64_t *rows);
int inbox__sq_query(inbox_store *st, const char *sql, int nparams,
                    const char *const *params, inbox_row_fn fn, void *payload);
int inbox__sq_register_consumer(inbox_store *st, const char *consumer,
                                int64_t retention_seconds);
int inbox__sq_stored_retention(inbox_store *st, const char *consumer,
                               int64_t *seconds);
int inbox__sq_claim(inbox_store *st, const char *consumer, inbox_claim *claims,
                    size_t n, inbox_status status, int64_t lease_ms);
int inbox__sq_reclaim(inbox_store *st, const char *consumer, const char *key,
                      inbox_status status, int64_t lease_ms, int *taken,
                      int32_t *attempts, int64_t *fence);
int inbox__sq_finish(inbox_store *st, const char *consumer, const char *key,
                     int64_t fence, inbox_status expect, inbox_status status,
                     int32_t attempts, int64_t *rows);
int inbox__sq_extend(inbox_store *st, const char *consumer, const char *key,
                     int64_t fence, int64_t lease_ms, int64_t *rows);
int inbox__sq_dead_letter(inbox_store *st, const inbox_dead_letter *dl,
                          int64_t *id);
int inbox__sq_set_result(inbox_store *st, const char *consumer, const char *key,
                         inbox_outcome outcome, const char *content_type,
                         const void *data, size_t len);
int inbox__sq_purge(inbox_store *st, const char *consumer,
                    int64_t retention_seconds, int batch_limit, int dry_run,
                    int64_t *deleted);

/* sqlite_admin.c: the vtable's version-6 slots. */
int inbox__sq_sql_expr(inbox_store *st, inbox_sql_expr e, const char *arg,
                       char *out, size_t len);
int inbox__sq_exec_setup(inbox_store *st, const char *sql);
int inbox__sq_check_sql(inbox_store *st, const char *sql, int *nparams);
int inbox__sq_url_private(const char *url);

extern const inbox_store_vtable inbox__sqlite_vtable;

/* The vtable's client_version (<name> <version>). */
int inbox__sq_client_version(char *out, size_t len);

#endif
