/*
 * libinbox — the store backend interface, for backend authors.
 *
 * A store is a database that holds the inbox, dead letters and outbox. A
 * backend fills an inbox_store_vtable and registers it by URL scheme. The
 * vtable only ever grows at the end; `version` says how much of it a
 * backend provides. Every slot is mandatory unless marked optional;
 * registration asserts it. A backend of version 1 (no outbox slots) still
 * registers; the outbox functions then return INBOX_ERR_STATE on it.
 *
 * Versions (docs/abi.md): the vtable's `version` is also the layout of
 * the structs passed through it (inbox_claim, inbox_dead_letter,
 * inbox_outbox_finish, inbox_store_limits, struct inbox_store): a change
 * to one is a new vtable version. The core checks the public structs a
 * caller hands over (options, outputs) before a backend sees them, and
 * hands a backend its own structs in this library's layout (an
 * inbox_outbox_counts to fill, for instance, is the core's, copied out
 * at the caller's version).
 *
 * Everything the library and the inbox command know of a store goes
 * through this vtable: nothing outside a backend compares its kind or
 * scheme, includes its client library or writes its dialect
 * (tests/backend_boundary.sh). A store built into the library is its
 * folder in the source tree and one line in its list of built-in stores
 * (docs/abi.md, "Backends"); one built
 * outside calls inbox_store_register() before the first open (the inbox
 * command then accepts its scheme in a configuration too).
 *
 * Tables (each name preceded by the configured prefix, quoted):
 *   inbox(consumer, key, fingerprint, status, attempts, fence,
 *         lease_until, message_id, created_at, processed_at, updated_at,
 *         result BLOB/bytea, result_type, outcome,  (these three: v5)
 *         position)                                 (schema version 6)
 *         PRIMARY KEY (consumer, key); index (consumer, processed_at)
 *   dead_letters(id, consumer, key, message_id, payload BLOB/bytea,
 *         headers, position, attempts, reason, fingerprint,
 *         stored_fingerprint, created_at, replayed_at,
 *         dedup_key, deliveries, last_seen_at)   (the last three: v4)
 *         UNIQUE (consumer, dedup_key)            (schema version 4)
 *   consumers(name PRIMARY KEY, retention_seconds, updated_at)
 *   outbox(id, consumer, key, step, idempotency_key, kind, method, target,
 *         headers, key_header, body BLOB/bytea, idempotent, reconcile_url,
 *         max_attempts, state, attempts, reconciliations, fence,
 *         next_attempt_at, lease_until, last_status, last_error, response,
 *         created_at, updated_at, done_at)
 *         UNIQUE (consumer, key, step)           (schema version 2)
 *   schema_version(version)
 *
 * Status values of an inbox record.
 */
#ifndef INBOX_SYS_STORE_H
#define INBOX_SYS_STORE_H

#include "../inbox.h"
#include "../outbox.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum inbox_status {
	INBOX_ST_NONE = 0,       /* no record (claim result only) */
	INBOX_ST_COMPLETED = 1,  /* effect committed: later copies are dups */
	INBOX_ST_PROCESSING = 2, /* held under a lease by a long handler */
	INBOX_ST_FAILED = 3,     /* transient failure: retry on redelivery */
	INBOX_ST_DEAD = 4        /* dead-lettered: later copies are dups */
} inbox_status;

/* Text form stored in the `status` column: "completed", "processing",
 * "failed", "dead"; inbox_status_name() gives "none" for INBOX_ST_NONE or
 * any other value (static, never NULL). inbox_status_parse() is its
 * inverse for the four stored names, INBOX_ST_NONE for any other text or
 * NULL. */
INBOX_API const char *inbox_status_name(inbox_status s);
INBOX_API inbox_status inbox_status_parse(const char *s);

/* One key to claim. The core sorts claims by key before the call. */
typedef struct inbox_claim {
	/* in */
	const char *key;
	const char *fingerprint; /* 64 hex */
	const char *message_id;  /* may be NULL */
	/* out */
	int is_new;          /* the row was inserted by this claim */
	inbox_status status; /* existing row's status (NONE if invisible) */
	char stored_fingerprint[65];
	int32_t attempts;  /* stored attempts (0 when new) */
	int64_t fence;     /* stored fencing token (1 when new) */
	int lease_expired; /* PROCESSING and lease_until < now */
	/* out, version 7: what the existing record stored with
	 * set_result (NULL/0/NONE when new, invisible, or nothing stored).
	 * result: malloc'ed by the backend, result_len bytes followed by a
	 * NUL; result_type: malloc'ed, NUL-terminated, or NULL; the caller
	 * frees both with free(). first_outcome: the stored outcome
	 * (APPLIED, STALE, DEAD_LETTERED), or INBOX_OUTCOME_NONE when none
	 * was stored (the status tells it then). Read in the claim's own
	 * statement: a duplicate costs no second one. */
	void *result;
	size_t result_len;
	char *result_type;
	inbox_outcome first_outcome;
	/* in, version 8: the delivery's source position as the source
	 * spells it ("orders/0@17", "orders.jsonl:42"), or NULL when it gave
	 * none; kept on the record when the claim inserts it (schema
	 * version 6), so that a look-up by position finds the record. Always
	 * UTF-8: the core writes a byte that is not as the text \xHH. */
	const char *position;
} inbox_claim;

/* A dead letter to write. */
typedef struct inbox_dead_letter {
	const char *consumer;
	const char *key;        /* may be NULL (no key could be derived) */
	const char *message_id; /* may be NULL */
	const char *payload;    /* raw bytes, may be invalid UTF-8 */
	size_t payload_len;
	const char *headers;  /* JSON text or NULL */
	const char *position; /* or NULL; UTF-8, as in inbox_claim */
	int32_t attempts;
	const char *reason;
	const char *fingerprint;        /* or NULL */
	const char *stored_fingerprint; /* conflicts: the recorded one */
	/* What makes the dead letter the same as an earlier one of the
	 * consumer (schema version 4; 64 hex digits): when the consumer has
	 * one with this dedup_key already, no row is added — that one counts
	 * the delivery (deliveries + 1, last_seen_at = now), takes this
	 * reason and attempts, and is pending again (replayed_at NULL). NULL:
	 * always a new row (the outbox's dead letters). */
	const char *dedup_key;
} inbox_dead_letter;

typedef struct inbox_store_vtable inbox_store_vtable;

/* The common part of every store; a backend's struct embeds it first. */
struct inbox_store {
	const inbox_store_vtable *vt;
	char prefix[64];  /* validated table prefix ("" = none) */
	char schema[64];  /* validated schema name ("" = none) */
	char errmsg[512]; /* never contains a password */
	char errcode[32];
	int in_txn;
	/* The URL's secrets, and any a backend adds (inbox__store_secret);
	 * filled by inbox_store_open, freed by inbox_store_close: what
	 * inbox__store_seterr scrubs from every message, the client
	 * library's own texts included. */
	struct inbox__secrets *secrets;
};

/* 1: the inbox; 2: + the outbox slots; 3: + seal; 4: + connection_id;
 * 5: + set_limits; 6: + flags, alias, native_type, sql_expr, exec_setup,
 * check_sql, url_private (what the admin API, declared effects and the
 * inbox command need, so that no code outside a backend branches on its
 * kind); 7: + set_result and the stored result in inbox_claim,
 * stored_retention (the core reads no store table itself), client_version;
 * 8: + the source position in inbox_claim (kept on the record). */
#define INBOX_STORE_VTABLE_VERSION 8

/* inbox_store_vtable.flags (version 6). */
#define INBOX_STORE_F_SCHEMAS 0x1u /* inbox_store_options.schema applies */

/* The expressions the admin API's SQL needs that differ between SQL
 * dialects; a backend's sql_expr spells each (version 6). `arg` is, for
 * the ones marked so, an SQL expression (EXPR) or a parameter number as
 * text (N, "2" for $2); NULL for the others. */
typedef enum inbox_sql_expr {
	INBOX_SQL_NOW_MS = 1, /* the clock the store writes timestamps with,
	                       * in epoch milliseconds (an integer) */
	INBOX_SQL_NOW_TS,    /* the current time as timestamp columns hold it */
	INBOX_SQL_MS,        /* EXPR, a timestamp (column or aggregate), as
	                      * epoch milliseconds; NULL stays NULL */
	INBOX_SQL_INT_PARAM, /* parameter $N used as a 64-bit integer */
	INBOX_SQL_CUTOFF,    /* "now minus $N seconds", comparable with a
	                      * timestamp column */
	INBOX_SQL_HEX,       /* EXPR, a BLOB/bytea column, as lower-case hex */
	INBOX_SQL_LEN, /* EXPR, a BLOB/bytea column: its length in bytes */
	/* Optional (a backend may answer < 0: the admin API then counts
	 * exactly). A prefix (no arg) that, put before a SELECT, makes it
	 * return the planner's plan instead of running it: one row, whose
	 * first column holds JSON in which the first "Plan Rows": N is the
	 * estimate of the rows the SELECT would return (PostgreSQL's
	 * EXPLAIN (FORMAT JSON)). What inbox_admin_stats_estimate() reads
	 * a big inbox's sizes with. */
	INBOX_SQL_EXPLAIN_ROWS
} inbox_sql_expr;

/* Bounds on a transaction's waits, in ms; 0 = none (see
 * inbox_store_options, version 2, for what each one bounds). */
typedef struct inbox_store_limits {
	int64_t lock_ms;
	int64_t statement_ms;
	int64_t idle_ms;
} inbox_store_limits;

/* The outcome of a claimed outbox row, written by outbox_finish. */
typedef struct inbox_outbox_finish {
	int64_t id;
	int64_t fence;            /* the claim's token: other claims refuse */
	inbox_outbox_state state; /* DONE, FAILED, UNKNOWN, PENDING, DEAD */
	int64_t retry_in_ms;      /* FAILED/UNKNOWN/PENDING: due again then */
	int last_status;          /* HTTP status; 0 keeps the stored one */
	const char *last_error;   /* NULL clears it */
	const char *response;     /* first response excerpt; NULL keeps */
	size_t response_len;
	int32_t reconciled;     /* added to reconciliations */
	int32_t attempts_delta; /* added to attempts (-1: released unused) */
} inbox_outbox_finish;

struct inbox_store_vtable {
	unsigned
	    version; /* INBOX_STORE_VTABLE_VERSION the backend was built for */
	const char *scheme; /* URL scheme without ':' ("postgresql") */
	/* "postgresql", "sqlite": for display (inbox_store_kind()); the core
	 * never compares it. */
	const char *kind;

	/* Connect. `url` is the whole URL. Must set *out (even on failure, when
	 * allocation succeeded, so the caller can read the message). */
	int (*open)(inbox_store **out, const char *url,
	            const inbox_store_options *opts);
	void (*close)(inbox_store *st);

	/* Create/upgrade the schema; safe concurrently. */
	int (*migrate)(inbox_store *st);
	int (*schema_version)(inbox_store *st, int *version);

	/* Transactions. begin() reconnects first if the connection was lost.
	 * A single savepoint level is enough for the core. */
	int (*begin)(inbox_store *st);
	int (*commit)(inbox_store *st);
	int (*rollback)(inbox_store *st);
	int (*savepoint)(inbox_store *st);
	int (*release)(inbox_store *st);
	int (*rollback_to)(inbox_store *st);

	/* Generic statements with $1..$n text parameters (handlers). exec's
	 * rows may be NULL (count not wanted); in a transaction that claimed
	 * keys a backend may then defer the statement (send it later, with
	 * the next statement that needs an answer or with COMMIT) and
	 * return INBOX_OK at once. A backend that defers must keep the
	 * order of statements, and when a deferred statement fails on the
	 * server it answers INBOX_STORE_ERR_REDO (below) to every call of
	 * that transaction until rollback(), and runs the next transaction
	 * without deferring: the core then rolls back and runs the batch
	 * again at once, so each handler gets its statement's error where
	 * it issued it. A backend that never defers never returns it. */
	int (*exec)(inbox_store *st, const char *sql, int nparams,
	            const char *const *params, int64_t *rows);
	int (*query)(inbox_store *st, const char *sql, int nparams,
	             const char *const *params, inbox_row_fn fn, void *payload);

	/* Insert the consumer registry row (name, retention) if there is
	 * none; an existing row is left as it is (the core refuses a window
	 * other than the stored one; inbox_admin_set_retention changes it). */
	int (*register_consumer)(inbox_store *st, const char *consumer,
	                         int64_t retention_seconds);

	/* In the open transaction: insert a record for every claim whose key is
	 * not yet present, in the given (sorted) order, in one statement, with
	 * `status` (COMPLETED or PROCESSING), attempts 1, fence 1, and, for
	 * PROCESSING, lease_until = now + lease_ms. Fill the out fields of
	 * every claim: is_new, or the existing row's
	 * status/fingerprint/attempts/ fence/lease_expired. A row inserted
	 * concurrently by another transaction that committed while we waited
	 * must be reported with its status (re-read it); never as new. */
	int (*claim)(inbox_store *st, const char *consumer, inbox_claim *claims,
	             size_t n, inbox_status status, int64_t lease_ms);

	/* In the open transaction: take over an existing record that is FAILED,
	 * or PROCESSING with an expired lease: set status (COMPLETED or
	 * PROCESSING with a new lease), attempts += 1, fence += 1, row-locked
	 * so two takers cannot both win (the loser sees 0 rows). *taken = 1 if
	 * this call took it; then *attempts and *fence hold the new values. */
	int (*reclaim)(inbox_store *st, const char *consumer, const char *key,
	               inbox_status status, int64_t lease_ms, int *taken,
	               int32_t *attempts, int64_t *fence);

	/* In the open transaction: set the record's status (and attempts when
	 * attempts > 0), only if its fence equals `fence` (fence <= 0: any)
	 * and, when expect != NONE, its status is `expect`. *rows = rows
	 * changed. COMPLETED and DEAD set processed_at = now; lease_until is
	 * cleared. */
	int (*finish)(inbox_store *st, const char *consumer, const char *key,
	              int64_t fence, inbox_status expect, inbox_status status,
	              int32_t attempts, int64_t *rows);

	/* In the open transaction: extend a PROCESSING lease held with `fence`.
	 * *rows = 0 when fenced out. */
	int (*extend)(inbox_store *st, const char *consumer, const char *key,
	              int64_t fence, int64_t lease_ms, int64_t *rows);

	/* In the open transaction: write a dead letter, or count a repeat of
	 * one (see inbox_dead_letter.dedup_key: concurrent writers of the
	 * same dedup_key end with one row, counted twice); *id its id. */
	int (*dead_letter)(inbox_store *st, const inbox_dead_letter *dl,
	                   int64_t *id);

	/* Outside a transaction: purge (see inbox_store_purge). */
	int (*purge)(inbox_store *st, const char *consumer,
	             int64_t retention_seconds, int batch_limit, int dry_run,
	             int64_t *deleted);

	/* The native handle (PGconn*, sqlite3*: see native_type). */
	void *(*native)(inbox_store *st);

	/* ---- version 2: the outbox (see inbox/outbox.h) ---------------- */

	/* In the open transaction: insert `row` (its id, state, attempts,
	 * fence, reconciliations and last_status are ignored: a new row is
	 * pending, due now, attempts 0, fence 0) unless (consumer, key, step)
	 * already has one. *added = 1 if inserted, 0 if it existed. */
	int (*outbox_add)(inbox_store *st, const inbox_outbox_item *row,
	                  int *added);

	/* In the open transaction: claim up to `limit` due rows of `consumer`
	 * (NULL = all) — state pending, failed or unknown with next_attempt_at
	 * <= now, or in_flight with an expired lease — oldest due first,
	 * skipping rows another transaction holds (never waiting for them):
	 * set state in_flight, attempts + 1, fence + 1, lease_until =
	 * next_attempt_at = now + lease_ms. Call fn once per claimed row with
	 * its new values and `state` = the state before the claim; fn returns
	 * non-zero to report an allocation failure (the backend then returns
	 * INBOX_ERR_NOMEM). */
	int (*outbox_claim)(inbox_store *st, const char *consumer, int limit,
	                    int64_t lease_ms,
	                    int (*fn)(const inbox_outbox_item *row,
	                              void *payload),
	                    void *payload);

	/* In the open transaction: record the outcome of a claimed row, only
	 * if it is still in_flight with fence f->fence. *rows = 0 when a newer
	 * claim owns it. Clears lease_until; done_at = now for DONE. */
	int (*outbox_finish)(inbox_store *st, const inbox_outbox_finish *f,
	                     int64_t *rows);

	/* Outside a transaction: rows by state (done excluded) and the age of
	 * the oldest row not done or dead, for `consumer` (NULL = all). */
	int (*outbox_counts)(inbox_store *st, const char *consumer,
	                     inbox_outbox_counts *out);

	/* Outside a transaction: delete done rows completed more than
	 * older_than_seconds ago, at most batch_limit per statement, each
	 * statement its own transaction. */
	int (*outbox_purge)(inbox_store *st, const char *consumer,
	                    int64_t older_than_seconds, int batch_limit,
	                    int64_t *deleted);

	/* ---- version 3 ------------------------------------------------- */

	/* Outside a transaction: see inbox_store_seal(). NULL: the backend
	 * keeps one generation (nothing to seal). */
	int (*seal)(inbox_store *st, int64_t min_rows, int *sealed);

	/* ---- version 4 ------------------------------------------------- */

	/* Optional. The identity of the handle's current connection, as
	 * inbox_store_connection_id() documents it: 1 after open, one more
	 * at every reconnect (whether or not it succeeded), never reused by
	 * the handle — a number of ours, never one the server hands out (a
	 * backend PID repeats: a server in a container restarted in a fresh
	 * PID namespace gives the next connection the PID of the last). A
	 * backend that reconnects must also drop, at every reconnect,
	 * whatever it keeps per connection (prepared statements, session
	 * settings). NULL: the backend never reconnects (always 1). */
	uint64_t (*connection_id)(const inbox_store *st);

	/* ---- version 5 ------------------------------------------------- */

	/* Optional. The limits a consumer derived from its batch timeout,
	 * for the transactions begun from now on: each applies where the
	 * store's options (version 2) left that limit at 0; the options'
	 * explicit values win. A backend applies them at every begin()
	 * (e.g. SET LOCAL), so that nothing has to be restored after a
	 * reconnect. NULL: no limits (the core ignores it). */
	int (*set_limits)(inbox_store *st, const inbox_store_limits *derived);

	/* ---- version 6 ------------------------------------------------- */

	unsigned flags; /* INBOX_STORE_F_* */
	/* Optional. A second scheme this backend opens ("postgres"). */
	const char *alias;
	/* Optional. The C type native() returns ("PGconn", "sqlite3"): what
	 * inbox_txn_pgconn() and inbox_txn_sqlite3() hand out. NULL: neither
	 * does (native() stays the backend's own business). */
	const char *native_type;

	/* Spell expression e (see inbox_sql_expr) in the store's dialect:
	 * write it NUL-terminated into out (len bytes) and return its length
	 * as snprintf does (the core calls again with a larger buffer when it
	 * is >= len); < 0 for an expression the backend does not know. The
	 * admin API (inbox/admin.h) writes its SQL with these and the table
	 * names, and nothing else of a dialect. */
	int (*sql_expr)(inbox_store *st, inbox_sql_expr e, const char *arg,
	                char *out, size_t len);

	/* Outside a transaction: run the operator's setup SQL (one or more
	 * statements, no parameters; see inbox_store_exec_setup),
	 * serialized with the setup of every other process on the same
	 * database, so that daemons starting together do not race on
	 * CREATE ... IF NOT EXISTS. INBOX_ERR_STORE (the SQL's fault) or
	 * INBOX_ERR_TRANSIENT (the database's), the message set. */
	int (*exec_setup)(inbox_store *st, const char *sql);

	/* Outside a transaction: prepare one statement without running it
	 * (see inbox_store_check_sql); *nparams, when nparams is not NULL,
	 * the number of $n parameters it takes. Errors as exec_setup. */
	int (*check_sql)(inbox_store *st, const char *sql, int *nparams);

	/* Optional. 1 when `url` (of this backend's scheme) names a database
	 * private to its connection (SQLite's :memory:): another handle
	 * opened on it sees a different, empty one. NULL: never. */
	int (*url_private)(const char *url);

	/* ---- version 7 ------------------------------------------------- */

	/* Mandatory from version 7. In the open transaction: store on the
	 * record (consumer, key) the outcome it was completed with
	 * (APPLIED, STALE or DEAD_LETTERED) and the handler's result:
	 * content_type (NULL: none) and len bytes at data (data NULL: no
	 * result, the outcome only). Replaces what was stored. A backend
	 * may defer it like exec with rows NULL. A claim of the key later
	 * reads both back (inbox_claim's version 7 fields), in whichever
	 * generation the record is, for as long as the record lives. */
	int (*set_result)(inbox_store *st, const char *consumer,
	                  const char *key, inbox_outcome outcome,
	                  const char *content_type, const void *data,
	                  size_t len);
	/* Mandatory from version 7. The retention window register_consumer
	 * stored for `consumer` (or inbox_admin_set_retention() set since),
	 * in seconds, into *seconds; with consumer NULL the longest of all
	 * consumers'. 0 when there is none (no such consumer yet). In or
	 * outside a transaction. The core
	 * keeps its promises with it: a consumer opened with another window
	 * is refused, a purge never goes below it. A backend of an older
	 * version has no stored window as far as the core knows (both
	 * checks pass). */
	int (*stored_retention)(inbox_store *st, const char *consumer,
	                        int64_t *seconds);
	/* Optional. The client library the backend is linked with and its
	 * version as it reports itself at run time ("libpq 16.4"), written
	 * snprintf-style into out (len bytes); what inbox --version prints.
	 * NULL: the backend names none. */
	int (*client_version)(char *out, size_t len);
};

/* Returned by a store backend's calls only (never by the public API):
 * the transaction lost statements the backend had deferred (see exec
 * above); the core rolls back and runs the batch again at once, without
 * counting an attempt. */
#define INBOX_STORE_ERR_REDO (-1000)

/* Register a backend (the built-in ones are registered automatically).
 * Returns INBOX_ERR_INVALID if a slot mandatory at the vtable's version is
 * missing (stored_retention from version 7), the version is 0 or newer
 * than INBOX_STORE_VTABLE_VERSION, or
 * the scheme (or alias) is taken. A backend of version < 6 registers, but
 * the admin API returns INBOX_ERR_STATE on it (it has no dialect), as do
 * inbox_store_exec_setup() and inbox_store_check_sql(). Not thread-safe:
 * call at start-up. */
INBOX_API int inbox_store_register(const inbox_store_vtable *vt);

/* The scheme of the i-th registered store (the built-in ones first), or
 * NULL past the last: for listing what a URL may start with ("postgresql",
 * "sqlite"; aliases are not listed). Static strings. */
INBOX_API const char *inbox_store_scheme(size_t i);
/* The client library of the i-th registered store and its run-time
 * version ("libpq 16.4", "sqlite 3.40.1"; see client_version), written
 * snprintf-style into out: its length, 0 ("") when the backend names
 * none, INBOX_ERR_NOTFOUND past the last store. */
INBOX_API int inbox_store_client_version(size_t i, char *out, size_t len);
/* 1 if a registered store opens url (its scheme, or alias, before ':'),
 * else 0. Nothing is opened or checked beyond the scheme. */
INBOX_API int inbox_store_known_url(const char *url);
/* 1 if url names a database private to the connection that opens it (see
 * url_private: a second handle would not see the first one's data), else
 * 0 (also for a URL no store takes). */
INBOX_API int inbox_store_url_private(const char *url);

/* Helpers for backends. */
/* Set st's errcode and errmsg, the message scrubbed of st's secrets (see
 * inbox_store_secret), so a backend may pass on whatever its client
 * library says. What open writes before the handle has the URL's secrets
 * is scrubbed by inbox_store_open. */
INBOX_API void inbox_store_seterr(inbox_store *st, const char *code,
                                  const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* One more secret of st (n bytes at p), in every spelling an error text
 * could quote it in; for what the backend knows beyond the URL's own
 * (what its client library takes for a password). For open to call. 0 or
 * -1 (NOMEM). */
INBOX_API int inbox_store_secret(inbox_store *st, const char *p, size_t n);
INBOX_API void inbox_store_clearerr(inbox_store *st);

/* The names these had before 0.1, for backends written against them
 * (source compatibility only: the symbols are the new names). */
#define inbox__store_seterr   inbox_store_seterr
#define inbox__store_clearerr inbox_store_clearerr
#define inbox__status_name    inbox_status_name
#define inbox__status_parse   inbox_status_parse
#define inbox__store_secret   inbox_store_secret

#ifdef __cplusplus
}
#endif

#endif /* INBOX_SYS_STORE_H */
