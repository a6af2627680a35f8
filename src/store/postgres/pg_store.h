/*
 * PostgreSQL store (libpq): private names shared by the files of this
 * folder.
 *
 * Round trips. Transaction control is deferred: begin(), savepoint(),
 * release() and rollback_to() only queue their command, and the queue is
 * sent in one pipeline with the next statement that needs an answer (or
 * with COMMIT). A savepoint released or rolled back before anything under
 * it was sent is dropped altogether, and a transaction in which nothing
 * ran costs nothing.
 *
 * In a consumer's batch (a transaction that claimed keys), a handler's
 * statement whose row count is not asked for is deferred too: it joins
 * the queue (its SQL and parameters copied) and the handler goes on. So a
 * batch costs two round trips: BEGIN + claim, then every handler
 * statement + COMMIT. Such statements run without savepoints: a handler
 * that rolls back drops its own unsent statements from the queue, and if
 * a deferred statement fails on the server, the transaction is lost — the
 * store then answers INBOX__ERR_REDO to every call until the rollback,
 * and runs the next transaction without deferring, so the consumer's
 * re-run of the batch gives each handler its statement's error at once,
 * under its savepoint, as if nothing had been deferred.
 *
 * Handler statements are prepared once per connection, on first use and
 * in the same pipeline, and kept in a small cache keyed by their SQL
 * text, like the store's own statements.
 *
 * Connections. A connection is identified by conn_id, a number of ours:
 * 1 at open, incremented at every reconnect (inbox__pg_reconnect, the
 * only place one starts). Whatever belongs to a connection — prepared
 * statements, the queue — is tagged with or cleared at that number, never
 * with the server's backend PID: a server in its own PID namespace (a
 * container) hands the same PID to the next connection after a restart.
 */
#ifndef INBOX_STORE_PG_STORE_H
#define INBOX_STORE_PG_STORE_H

#include <libpq-fe.h>
#include <stdint.h>

#include "base/buf.h"
#include "core/internal.h"

/* Schema version this library creates. */
#define INBOX_PG_SCHEMA_VERSION INBOX__SCHEMA_VERSION

/* The statements of a store handle, built once at open (table names
 * depend on the handle's prefix and schema). All are prepared lazily. */
enum pg_query {
	PGQ_CLAIM,
	PGQ_CLAIM_NEWEST, /* the claim when no sealed generation is looked up */
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
	PGQ_OUTBOX_ADD, /* SQL in pg_outbox.c */
	PGQ_OUTBOX_CLAIM,
	PGQ_OUTBOX_FINISH,
	PGQ_SET_RESULT, /* run as a handler statement; in a batch, the
	                   queue's are folded into one (pg_defer.c) */
	PGQ_COUNT
};

/* Deferred transaction-control commands. */
enum pg_op {
	PGOP_BEGIN,
	PGOP_SAVEPOINT,
	PGOP_RELEASE,
	PGOP_ROLLBACK_TO,
	PGOP_DEALLOCATE, /* of an evicted handler statement (name in args) */
	PGOP_LIMITS      /* the transaction's timeouts (s->limits_sql) */
};

/* One queued command: a transaction-control op, or a handler statement
 * with its SQL (unless cached) and parameters copied into s->args. */
typedef struct pg_pending {
	unsigned char stmt;   /* 0: op, 1: handler statement */
	unsigned char op;     /* enum pg_op */
	unsigned char parse;  /* set while sending: a Parse precedes it */
	unsigned char result; /* a stored result (PGQ_SET_RESULT): folded
	                         with the queue's others when sent */
	int hs;               /* handler statement cache slot, -1: unnamed */
	int nparams;
	size_t sql;    /* offset in s->args of the SQL when unnamed */
	size_t params; /* offset in s->args of the parameters (and of
	                  the name, for PGOP_DEALLOCATE) */
} pg_pending;

/* Queue limits: past them the queue is sent (in the transaction, without
 * committing) before more is added, so memory stays bounded. */
#define PG_MAX_PENDING 1024
#define PG_MAX_ARGS    (1024 * 1024)

/* PGQ_SET_RESULT's parameters: consumer, key, result (hex), type and
 * outcome, each an array. */
#define PG_RESULT_PARAMS 5

/* Cached handler statements, prepared as "inbox__h<id>"; ids are never
 * reused, so a statement whose DEALLOCATE was lost cannot collide. */
#define PG_HCACHE 32

/* A cached statement whose consecutive deferred executions may be sent
 * as multi-row INSERTs (pg_merge.c). Its statements (slots): the INSERT
 * with 128, 64, ..., 2 rows, the LOCK and the guard, prepared as
 * "inbox__h<id>_<slot>". */
#define PG_MERGE_SIZES 7
#define PG_MERGE_LOCK  PG_MERGE_SIZES
#define PG_MERGE_GUARD (PG_MERGE_SIZES + 1)
#define PG_MERGE_SLOTS (PG_MERGE_SIZES + 2)

typedef struct pg_merge {
	int nparams; /* it uses $1..$nparams; 0: not mergeable */
	int refused; /* the guard or the LOCK failed: never merged again */
	size_t tuple_at, tuple_end;   /* the "(...)" after VALUES */
	size_t target_at, target_len; /* the table, as written */
	unsigned ready_id; /* the statement's id when ready[] was set */
	uint64_t ready[PG_MERGE_SLOTS]; /* prepared on that conn_id */
} pg_merge;

typedef struct pg_hstmt {
	char *sql; /* NULL: free slot */
	uint64_t hash;
	unsigned id;
	uint64_t ready_conn; /* prepared on that conn_id; 0 = not yet */
	uint64_t used;       /* LRU tick */
	pg_merge m;
} pg_hstmt;

/* What one command sent in a pipeline stands for, to read its result:
 * a queued entry, or (slot >= 0) a statement of a merge of cached
 * statement hs. */
#define PG_SENT_LIMITS (-2)

typedef struct pg_sent {
	int hs;              /* cache slot, or -1 */
	signed char slot;    /* -1: hs itself (or no statement); merge slot;
	                        PG_SENT_LIMITS: the limits statement */
	unsigned char parse; /* a Parse precedes it */
	unsigned char stmt;  /* stands for queued handler statements */
} pg_sent;

typedef struct pg_store {
	struct inbox_store base; /* first: the core casts */
	PGconn *conn;
	uint64_t conn_id; /* ours: 1 at open, +1 at every reconnect */
	char *sql[PGQ_COUNT];
	/* Bit q set: PGQ q is prepared on connection `prepared_conn`, under
	 * the name inbox__q<q>_<qepoch>. */
	unsigned prepared;
	uint64_t prepared_conn;
	unsigned qepoch;     /* bumped when the server lost our statements */
	pg_pending *pending; /* the queue */
	int npending, pending_cap;
	inbox__buf args; /* SQL and parameters of queued statements */
	/* This transaction claimed keys: handler statements may be
	 * deferred (defer_ok) unless the previous one lost its deferred
	 * work (sync_next). */
	int claimed, defer_ok, sync_next;
	int defer_failed;  /* a deferred statement failed: answer REDO */
	int pending_stmts; /* handler statements in the queue */
	pg_hstmt hcache[PG_HCACHE];
	unsigned hnext;
	uint64_t htick;
	/* Scratch for sending the queue: parameter pointers and flags. */
	const char **vals;
	size_t vals_cap;
	unsigned char hsent[PG_HCACHE]; /* Parse already in this pipeline */
	/* Merges of this pipeline: the commands sent for the queue, and per
	 * cached statement the Parses sent and whether LOCK and guard went. */
	pg_sent *sent;
	int nsent, sent_cap;
	uint16_t msent[PG_HCACHE];       /* bit per merge slot: Parse sent */
	unsigned char mguard[PG_HCACHE]; /* LOCK and guard sent */
	inbox__buf mtext; /* scratch: a merged statement's text */
	inbox__buf fold;  /* scratch: the folded results' arrays */
	inbox__buf lit;   /* scratch: one result's array literals */
	/* Scratch for the claim's binary arrays; reused: memory stays flat. */
	inbox__buf arr[4];
	/* Qualified table names, for migrate. */
	inbox__buf t_inbox, t_dl, t_consumers, t_version, t_outbox, t_gens;
	/* Bloom filters of the sealed generations (pg_gens.c), loaded
	 * lazily; every sealed generation up to bloom_upto has one here. */
	struct pg_bloom *blooms;
	int nblooms;
	int bloom_upto;
	int gen_cur;         /* the newest generation, as last read */
	double gens_checked; /* monotonic seconds of the last refresh; 0 */
	inbox__buf maybe;    /* scratch: the claim's bool[] (binary) */
	/* The transactions' timeouts: the options' explicit values (ms; 0
	 * unset, < 0 none), and the statement that sets the effective ones
	 * (SET LOCAL, queued after every BEGIN; "" = none). It is prepared
	 * once per connection as inbox__l<limits_id>_<qepoch>: unnamed, the
	 * server would plan it again for every transaction. */
	int64_t opt_lock_ms, opt_statement_ms, opt_idle_ms;
	char limits_sql[256];
	unsigned limits_id;          /* bumped when limits_sql changes */
	uint64_t limits_ready_conn;  /* prepared on that conn_id ... */
	unsigned limits_ready_id;    /* ... under that limits_id ... */
	unsigned limits_ready_epoch; /* ... and qepoch; 0 = not yet */
} pg_store;

/* pg_store.c: the connection. */
/* Reset the connection (a new conn_id) and forget everything tied to the
 * old one. INBOX_OK, or the (transient) error recorded with `what`. */
int inbox__pg_reconnect(pg_store *s, const char *what);
/* Reconnect if the connection is known to be lost (outside a
 * transaction: nothing can be lost by it). */
void inbox__pg_ensure_connected(pg_store *s);
/* The server no longer has (some of) our prepared statements: prepare
 * every one again, under new names, on next use. */
void inbox__pg_forget_statements(pg_store *s);
/* The vtable's set_limits (d NULL: the options' values only). */
int inbox__pg_set_limits(inbox_store *st, const inbox_store_limits *d);
/* The name of fixed statement q on this handle. */
void inbox__pg_stmt_name(const pg_store *s, int q, char *out, size_t n);

/* pg_sql.c: build the table names and s->sql[]. 0 or -1 (NOMEM). */
int inbox__pg_build_sql(pg_store *s);
void inbox__pg_free_sql(pg_store *s);
/* Parameter count and types of each PGQ statement (for PQprepare). */
typedef struct pg_qdef {
	int nparams;
	const Oid *types;
} pg_qdef;
extern const pg_qdef inbox__pg_qdefs[PGQ_COUNT];
/* Append tmpl to out with {T} inbox, {D} dead_letters, {C} consumers,
 * {V} schema_version, {O} outbox (qualified, quoted) and {P} the bare
 * prefix substituted. 0 or -1 (no memory). */
int inbox__pg_expand(const pg_store *s, const char *tmpl, inbox__buf *out);
/* The v1 schema, the v4 upgrade, as multi-statement texts; malloc'ed,
 * or NULL. */
char *inbox__pg_schema_v1(const pg_store *s);
char *inbox__pg_schema_v4(const pg_store *s);
/* The v5 upgrade (stored results), malloc'ed, or NULL. */
char *inbox__pg_schema_v5(const pg_store *s);
char *inbox__pg_schema_v6(const pg_store *s);

/* Advisory lock key of this handle's tables for `purpose` ("migrate",
 * "purge"): FNV-1a 64 of "libinbox:<purpose>:<schema>.<prefix>". The
 * migrate key ignores the prefix (CREATE SCHEMA IF NOT EXISTS races
 * between prefixes of one schema). Tests use it to hold the purge lock. */
int64_t inbox__pg_lock_key(const inbox_store *st, const char *purpose);

/* Type OIDs of array elements (pg_type.h is a server header; these
 * never change). */
#define PG_OID_BOOL 16
#define PG_OID_TEXT 25

/* pg_array.c: a one-dimensional array parameter in binary form (send it
 * with format 1 and length b->len). Start it (emptying b), then append
 * elements; each keeps the header's count up to date. 0 or -1 (no
 * memory; b is then unusable until the next start). */
int inbox__pg_barr_start(inbox__buf *b, unsigned elem_oid);
int inbox__pg_barr_text(inbox__buf *b, const char *v); /* NULL: a NULL */
int inbox__pg_barr_bool(inbox__buf *b, int v);
uint32_t inbox__pg_barr_count(const inbox__buf *b);

/* pg_merge.c (see there) */
/* Is `sql` a single-row INSERT that may be merged? 1 (m filled) or 0. */
int inbox__pg_merge_parse(const char *sql, pg_merge *m);
/* The text of merge slot `slot` of statement `sql` into out. 0 or -1. */
int inbox__pg_merge_sql(const char *sql, const pg_merge *m, int slot,
                        inbox__buf *out);
/* Rows of merge slot `slot` (0 for LOCK and guard). */
int inbox__pg_merge_rows(const pg_merge *m, int slot);
/* The largest merge slot for at most `left` executions, or -1. */
int inbox__pg_merge_slot_for(const pg_merge *m, int left);

/* pg_exec.c */

/* Record the error of a failed libpq call (r may be NULL) on the handle,
 * prefixed by `what`, and return INBOX_ERR_TRANSIENT or INBOX_ERR_STORE. */
int inbox__pg_fail(pg_store *s, const PGresult *r, const char *what);
/* Classify a failure: INBOX_ERR_TRANSIENT for what is the
 * infrastructure's fault (see pg_exec.c), INBOX_ERR_STORE otherwise.
 * r may be NULL (libpq's own error); sqlstate NULL = none. */
int inbox__pg_classify(PGconn *conn, const PGresult *r, const char *sqlstate);

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
/* Run sql now, outside the queue (migrate, seal: no transaction of the
 * store is open), with at most one text parameter. INBOX_OK, *out (if
 * given) set to the result for the caller to PQclear; or the error,
 * recorded with `what`. */
int inbox__pg_simple(pg_store *s, const char *sql, const char *param,
                     PGresult **out, const char *what);
/* Send the deferred commands now (before the caller uses the PGconn
 * directly). */
int inbox__pg_flush(pg_store *s);
/* Empty the queue (rollback, reconnect). */
void inbox__pg_queue_clear(pg_store *s);
/* Queue an op; sends the queue first when full. */
int inbox__pg_queue_op(pg_store *s, enum pg_op op);
/* Queue a handler statement (SQL and parameters copied). */
int inbox__pg_queue_stmt(pg_store *s, const char *sql, int nparams,
                         const char *const *params);
/* A handler statement of this transaction may be queued (unless it
 * needs an answer): the transaction claimed keys and defers. */
int inbox__pg_defers(const pg_store *s);
/* Queue the stored result of one record: PGQ_SET_RESULT with its five
 * one-element arrays (array literals). */
int inbox__pg_queue_result(pg_store *s, const char *const *params);
/* Before the queue is sent: its stored results become one execution of
 * PGQ_SET_RESULT whose arrays hold them all, where the last of them was
 * queued. 0, or -2 (out of memory: nothing changed). */
int inbox__pg_queue_fold(pg_store *s);
/* The handler statement cache slot for `sql` (added if absent; the least
 * recently used slot without queued uses is recycled), or -1 when every
 * slot is in use by the queue. */
int inbox__pg_hstmt(pg_store *s, const char *sql);
/* A cached statement failed with `sqlstate`: drop it if re-preparing
 * may cure that (a plan whose result type changed). */
void inbox__pg_hstmt_failed(pg_store *s, int hs, const char *sqlstate);
void inbox__pg_hcache_free(pg_store *s);
/* Run handler statement `sql` (cached, prepared on first use, when in a
 * transaction) after the queue, like inbox__pg_run. */
PGresult *inbox__pg_run_sql(pg_store *s, const char *sql, int nparams,
                            const char *const *values, const char *what,
                            int *rc);

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

/* pg_admin.c: the vtable's version-6 slots. */
int inbox__pg_sql_expr(inbox_store *st, inbox_sql_expr e, const char *arg,
                       char *out, size_t len);
int inbox__pg_exec_setup(inbox_store *st, const char *sql);
int inbox__pg_check_sql(inbox_store *st, const char *sql, int *nparams);

/* pg_gens.c: generations of the inbox (see there). */
/* Schema v3: make the inbox a LIST-partitioned table of generations
 * (an existing inbox becomes generation 1). In migrate's transaction. */
int inbox__pg_gens_migrate(pg_store *s);
/* For a claim: fill s->maybe with the binary bool[] of "a loaded filter
 * may hold claims[i].key" (refreshing the filters every few seconds),
 * upto with the generation up to which filters are loaded and cur with
 * the newest generation; *lookup = 0 when no sealed generation needs a
 * look (no filter says maybe, every sealed one has a filter). */
int inbox__pg_gens_maybe(pg_store *s, const char *consumer,
                         const inbox_claim *claims, size_t n, char upto[16],
                         char cur[16], int *lookup);
void inbox__pg_gens_free(pg_store *s);
int inbox__pg_seal(inbox_store *st, int64_t min_rows, int *sealed);

/* pg_migrate.c */
int inbox__pg_migrate(inbox_store *st);
/* Migrate to `version` (<= INBOX_PG_SCHEMA_VERSION) only: the upgrade
 * tests build an older schema with it. */
int inbox__pg_migrate_to(inbox_store *st, int version);
int inbox__pg_schema_version(inbox_store *st, int *version);

/* pg_inbox.c */
int inbox__pg_register_consumer(inbox_store *st, const char *consumer,
                                int64_t retention_seconds);
int inbox__pg_stored_retention(inbox_store *st, const char *consumer,
                               int64_t *seconds);
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
int inbox__pg_set_result(inbox_store *st, const char *consumer, const char *key,
                         inbox_outcome outcome, const char *content_type,
                         const void *data, size_t len);

/* pg_purge.c */
int inbox__pg_purge(inbox_store *st, const char *consumer,
                    int64_t retention_seconds, int batch_limit, int dry_run,
                    int64_t *deleted);

/* Parse a decimal integer column; 0 when NULL or malformed. */
int64_t inbox__pg_int(const PGresult *r, int row, int col);

extern const inbox_store_vtable inbox__pg_vtable;

/* The vtable's client_version (<name> <version>). */
int inbox__pg_client_version(char *out, size_t len);

#endif
