/*
 * libinbox — effectively-once message processing.
 *
 * Brokers deliver at least once. libinbox records each message's key in an
 * inbox table in the same database transaction as the business effect, so a
 * redelivered message is detected and dropped, and tells the caller when the
 * message may be acknowledged (only after that transaction committed).
 *
 * This header is the authoritative documentation of the public API.
 *
 * Conventions
 *   - Every fallible function returns an int that is INBOX_OK (0) or a
 *     negative inbox_err. A duplicate, a conflict or a dead letter is an
 *     *outcome* (inbox_outcome), never an error: rc < 0 always means the
 *     machinery failed and nothing was acknowledged.
 *   - Constructors are inbox_x_open(inbox_x **out, ...); destructors
 *     inbox_x_close(inbox_x *) accept NULL.
 *   - The detail of the last error (SQLSTATE, SQLite extended code, message)
 *     lives on the handle: inbox_store_errmsg(), inbox_consumer_errmsg().
 *     Connection URLs in messages never include a password.
 *   - Handles are not thread-safe: use one store and one consumer per thread.
 *     Different handles may be used from different threads concurrently.
 *   - jansson, which parses the payloads, reports some of its allocation
 *     failures as malformed input or not at all. So that running out of
 *     memory is never taken for a bad message, the first
 *     inbox_store_open() (or JSON parse) puts a tracker in front of
 *     jansson's allocator (json_set_alloc_funcs, calling the allocator
 *     installed before). A program that installs its own jansson
 *     allocator does so before; one that uses jansson on other threads
 *     opens its first store before starting them.
 *   - The library never writes to stdout or stderr: diagnostics go to the
 *     callback installed with inbox_log_set() (<inbox/log.h>), or nowhere.
 *
 * Versioned structs (docs/abi.md)
 *   Every struct a caller allocates and hands to the library — options
 *   it fills, results and counters the library fills, arrays of either —
 *   starts with `unsigned version`, set by the caller to the version of
 *   its headers: initialize it with the struct's *_INIT macro (or set
 *   the *_VERSION macro). The library refuses 0 and any version newer
 *   than it knows with INBOX_ERR_INVALID (the reason on the handle, or
 *   as the log event "bad_version" when there is none), reads only the
 *   fields that version has, and writes only those; new fields are only
 *   ever added at the end under a new version. An array's layout is the
 *   version of its first element: the library steps through it by that
 *   version's size, so a program built against older headers keeps
 *   working with a newer library. Structs the library allocates or lends
 *   (inbox_admin_record, inbox_admin_dead_letter, inbox_outbox_item,
 *   inbox_effect_result) are read in place, never copied into an array
 *   of the caller's, and carry no version.
 */
#ifndef INBOX_INBOX_H
#define INBOX_INBOX_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"  /* INBOX_API */
#include "log.h"     /* the log callback: inbox_log_set() */
#include "version.h" /* INBOX_VERSION, inbox_version() */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Errors (append-only; values never change)                           */
/* ------------------------------------------------------------------ */

typedef enum inbox_err {
	INBOX_OK = 0,
	INBOX_ERR_NOMEM = -1,   /* allocation failed */
	INBOX_ERR_INVALID = -2, /* invalid argument or option */
	INBOX_ERR_URL = -3,     /* malformed or unsupported URL scheme */
	INBOX_ERR_CONNECT = -4, /* cannot connect to the database/broker */
	INBOX_ERR_STORE = -5,   /* database error; detail on the handle */
	INBOX_ERR_SCHEMA = -6,  /* schema missing or newer than this library */
	INBOX_ERR_TRANSIENT =
	    -7,                /* deadlock, serialization failure, busy,
	                          lost connection: nothing committed, retry */
	INBOX_ERR_BUSY = -8,   /* another process holds the lock (purge) */
	INBOX_ERR_FENCED = -9, /* lease lost: a newer holder owns the record */
	INBOX_ERR_STATE = -10, /* call not valid in the handle's state */
	INBOX_ERR_NOTFOUND = -11, /* no such record */
	INBOX_ERR_SOURCE = -12,  /* broker/source error; detail on the handle */
	INBOX_ERR_CONFIG = -13,  /* configuration file error */
	INBOX_ERR_IO = -14,      /* file or socket I/O error */
	INBOX_ERR_TIMEOUT = -15, /* operation timed out */
	INBOX_ERR_HANDLER = -16, /* a handler returned an invalid verdict */
	INBOX_ERR_NUL = -17,     /* the text holds U+0000: not a C string */
	INBOX_ERR_TOO_LARGE = -18 /* over a configured size limit */
} inbox_err;

/* Static English description of an error code; never NULL. */
INBOX_API const char *inbox_strerror(int err);
/* Static symbolic name ("INBOX_ERR_STORE"); never NULL. */
INBOX_API const char *inbox_err_name(int err);

/* ------------------------------------------------------------------ */
/* Outcomes: what happened to one message (values, not errors)          */
/* ------------------------------------------------------------------ */

typedef enum inbox_outcome {
	INBOX_OUTCOME_NONE = 0,
	/* The handler ran and its effect committed with the inbox record. */
	INBOX_APPLIED = 1,
	/* The key was already recorded with the same fingerprint: dropped. */
	INBOX_DUPLICATE = 2,
	/* The key was recorded with a *different* fingerprint. The message was
	 * dead-lettered with both fingerprints; nothing was applied. */
	INBOX_CONFLICT = 3,
	/* The handler found the message older than the state it would update
	 * (inbox_txn_upsert_versioned() or inbox_txn_mark_stale()). The inbox
	 * record committed; the projection kept the newer version. */
	INBOX_STALE = 4,
	/* Transient failure: the effect was rolled back, the attempt counted.
	 * Do not ack; let the broker redeliver (after a backoff). */
	INBOX_RETRY = 5,
	/* Permanent failure (invalid payload, rejected by the handler, max
	 * attempts, too old to deduplicate): written to the dead letters with
	 * its context. Ack it. */
	INBOX_DEAD_LETTERED = 6,
	/* Another worker holds a valid lease on this key. Do not ack; it will
	 * be redelivered and then seen as a duplicate or taken over. */
	INBOX_IN_PROGRESS = 7,
	/* inbox_lease_acquire() only: the lease is yours, do the work. */
	INBOX_ACQUIRED = 8,
	/* The handler wanted nothing of the message (inbox_txn_mark_skipped():
	 * a declaration's filters, include/inbox/decl.h, let no step run).
	 * The inbox record committed, so a redelivery is a duplicate; no
	 * effect ran. Ack it. */
	INBOX_SKIPPED = 9
} inbox_outcome;

/* Static lower-case name ("applied", "duplicate", ...); never NULL. */
INBOX_API const char *inbox_outcome_name(inbox_outcome o);

/* Non-zero when a message with this outcome may be acknowledged to the
 * broker once the call that produced it returned INBOX_OK (its transaction
 * committed). RETRY and IN_PROGRESS must not be acked. */
INBOX_API int inbox_outcome_ackable(inbox_outcome o);

/* ------------------------------------------------------------------ */
/* Deliveries: a message as it came from the broker                    */
/* ------------------------------------------------------------------ */

/* A delivery is a plain descriptor filled by the caller (or a source). The
 * library never keeps pointers into it after the processing call returns.
 * Versioned (see "Versioned structs" above): initialize it with
 * INBOX_DELIVERY_INIT and set what you know. An array handed to
 * inbox_consumer_process_batch() carries the version in every element,
 * all the same (a mixed array is refused); one handed to
 * inbox_source_poll() needs it in its first element (the source writes
 * it into every delivery it fills). */
typedef struct inbox_delivery {
	unsigned version; /* INBOX_DELIVERY_VERSION */
	/* Producer's message id (UTF-8, NUL-terminated). NULL: taken from the
	 * payload at the consumer's id_pointer (default "/id"). */
	const char *id;
	/* Raw payload bytes; must be a UTF-8 JSON document. Not NUL-terminated
	 * necessarily. */
	const char *payload;
	size_t payload_len;
	/* Optional broker headers as a JSON object text (NUL-terminated), kept
	 * in dead letters. NULL when none. */
	const char *headers;
	/* Optional source position ("orders/3/1042", "file.jsonl:17"), kept
	 * on the inbox record and in dead letters, where
	 * inbox_admin_find_keys() finds it; a byte that is not UTF-8 is kept
	 * as the text \xHH (lower-case hex). NULL when unknown. */
	const char *position;
	/* Producer timestamp, milliseconds since the Unix epoch; 0 = unknown.
	 * Used by the replay guard. */
	int64_t timestamp_ms;
	/* How many times the broker (or the source) has delivered this
	 * message, this delivery included (1 = first delivery); 0 =
	 * unknown. It never counts toward the message's attempts — those are
	 * what the inbox recorded: handler failures and lease takeovers —
	 * because a broker's count also grows with what is no fault of the
	 * message (our own graceful stop handing a batch back during a
	 * database outage, a restart loop, another member's takeover). It
	 * only feeds the consumer's max_deliveries, the bound on a message
	 * that is delivered again and again without ever completing (one
	 * that crashes the process before anything is recorded). What each
	 * source reports is in its header: the broker's own count where it
	 * keeps one (NATS, Redis, RabbitMQ), a count within the process
	 * otherwise (JSONL, Kafka). */
	int32_t delivery_count;
	/* Reserved for sources (an ack token); the library ignores it. */
	uint64_t source_token;
	/* NULL, or why the source refused to pass the message on as it came
	 * (UTF-8, NUL-terminated): a payload over its max_payload (handed
	 * over cut to max_payload + 1 bytes), an id from the broker that
	 * holds a NUL byte or is not UTF-8 ("payload of 10485760 bytes
	 * exceeds max_payload 1048576"). The consumer dead-letters such a
	 * delivery with this reason, without key or id (`id` is ignored),
	 * instead of guessing, and the source settles it like any dead
	 * letter. Set by sources; a program handing deliveries over itself
	 * may use it the same way. */
	const char *refused;
} inbox_delivery;

#define INBOX_DELIVERY_VERSION 1
#define INBOX_DELIVERY_INIT                                                    \
	{                                                                      \
		INBOX_DELIVERY_VERSION, NULL, NULL, 0, NULL, NULL, 0, 0, 0,    \
		    NULL                                                       \
	}

/* The result for one delivery. `key`, `reason`, `result` and
 * `result_type` point into memory owned by the consumer, valid until the
 * next processing call on the same consumer (or its close).
 * Versioned (see "Versioned structs" above): set `version` before the
 * call (INBOX_RESULT_INIT); for an array, the first element's. */
typedef struct inbox_result {
	unsigned version; /* INBOX_RESULT_VERSION */
	inbox_outcome outcome;
	int32_t attempts;   /* attempts counted for this key so far */
	const char *key;    /* the resolved inbox key, NULL if none */
	const char *reason; /* why: dead letter / retry / conflict; or NULL */
	int64_t dead_letter_id; /* id of the dead letter written, or 0 */
	/* --- version 2: stored results (inbox_txn_set_result) --- */
	/* APPLIED / STALE: the result this processing stored; DEAD_LETTERED:
	 * the result a handler set before it returned REJECT (kept with the
	 * dead record); DUPLICATE: the result the key's first processing
	 * stored — also for a repeat inside the same batch, after a
	 * restart, and for a key in a sealed generation (PostgreSQL). NULL
	 * when none was stored, and always for CONFLICT (the payload
	 * differs: the stored answer is not this message's), RETRY,
	 * IN_PROGRESS and a message dead-lettered before its handler ran.
	 * result_len bytes (a NUL byte follows them, not counted). */
	const void *result;
	size_t result_len;
	/* The result's content type as the handler gave it (NUL-terminated),
	 * or NULL (none given, or no result). */
	const char *result_type;
	/* DUPLICATE: the outcome the key was first recorded with — APPLIED,
	 * STALE or DEAD_LETTERED (a duplicate of a dead-lettered key is
	 * dropped too); INBOX_OUTCOME_NONE when there is no record to tell
	 * (a message older than the retention window dropped by
	 * INBOX_REPLAY_DROP). INBOX_OUTCOME_NONE for every other outcome. */
	inbox_outcome first_outcome;
} inbox_result;

#define INBOX_RESULT_VERSION 2
#define INBOX_RESULT_INIT                                                      \
	{                                                                      \
		INBOX_RESULT_VERSION, INBOX_OUTCOME_NONE, 0, NULL, NULL, 0,    \
		    NULL, 0, NULL, INBOX_OUTCOME_NONE                          \
	}

/* ------------------------------------------------------------------ */
/* Store: the database holding inbox, dead letters and outbox          */
/* ------------------------------------------------------------------ */

typedef struct inbox_store inbox_store;

typedef struct inbox_store_options {
	unsigned version; /* INBOX_STORE_OPTIONS_VERSION */
	/* Prefix prepended to every table name ("billing_" ->
	 * billing_inbox). Letters, digits and '_' only. NULL or "" = none. */
	const char *table_prefix;
	/* PostgreSQL schema holding the tables (created by migrate). NULL =
	 * the connection's search_path. Ignored by SQLite. */
	const char *schema;
	/* Run migrations on open (default 1). When 0, open does not touch
	 * the schema (run inbox_store_migrate() or `inbox migrate` yourself);
	 * inbox_consumer_open() then fails with INBOX_ERR_SCHEMA while the
	 * schema is missing or at another version. */
	int auto_migrate;
	/* SQLite: busy timeout in ms (default 5000; lock_timeout_ms, or the
	 * consumer's batch timeout, replaces it when set). */
	int busy_timeout_ms;
	/* --- version 2 --- */
	/* Bounds on the waits of the handle's transactions (from begin to
	 * commit or rollback: a consumer's batches, lease completions, the
	 * outbox dispatcher's claims), in ms. 0 (the default): the batch
	 * timeout of the consumer opened on the handle applies (see
	 * inbox_consumer_options.batch_timeout_ms), none without one; > 0:
	 * that; < 0: none from libinbox (the server's own setting applies).
	 * Waiting for a lock another transaction holds: PostgreSQL
	 * lock_timeout, SQLite's busy timeout. A claim that times out is
	 * transient (INBOX_ERR_TRANSIENT: the batch is retried, nothing is
	 * counted), so a stuck holder never stops the others for longer. */
	int64_t lock_timeout_ms;
	/* One statement's run (PostgreSQL statement_timeout; SQLite: a
	 * handler's statement is interrupted). Transient too (57014,
	 * SQLITE_INTERRUPT). */
	int64_t statement_timeout_ms;
	/* PostgreSQL idle_in_transaction_session_timeout: a session idle
	 * inside one of these transactions that long is ended by the server,
	 * which releases its locks — a process frozen mid-batch (SIGSTOP, a
	 * paused host, a hung handler) then reconnects when it resumes and
	 * runs its batch again. SQLite has no equivalent: no other process
	 * can end a transaction, so a frozen holder of SQLite's write lock
	 * holds the others back until it resumes or dies (each waits its
	 * busy timeout, fails transiently and retries). */
	int64_t idle_in_transaction_timeout_ms;
} inbox_store_options;

#define INBOX_STORE_OPTIONS_VERSION 2
#define INBOX_STORE_OPTIONS_INIT                                               \
	{                                                                      \
		INBOX_STORE_OPTIONS_VERSION, NULL, NULL, 1, 5000, 0, 0, 0      \
	}

/* Open a store by URL:
 *   postgresql://user:pass@host:port/db?…   (also postgres://)
 *   sqlite:PATH     (sqlite::memory: for a private in-memory database)
 * A PostgreSQL connection (and every reconnect) gets connect_timeout=10,
 * keepalives=1, keepalives_idle=15, keepalives_interval=5,
 * keepalives_count=3 and tcp_user_timeout=30000 unless the URL sets them
 * (each on its own; PGCONNECT_TIMEOUT too; with a service, none): a host
 * gone without a word is noticed in about 30 s, as a transient error.
 * `opts` may be NULL for defaults; opts->version 0 or newer than
 * INBOX_STORE_OPTIONS_VERSION is INBOX_ERR_INVALID (the reason is the
 * log event "bad_version": there is no handle yet). On failure *out is
 * NULL unless the
 * handle could be allocated, in which case *out holds it so the caller can
 * read inbox_store_errmsg() and must close it.
 * A PostgreSQL URL whose user info libpq would split otherwise than other
 * URL parsers is refused (INBOX_ERR_URL) before libpq sees it: a raw '@',
 * '/', '?', '#', '[' or ']' in the user name or password, or a second raw
 * '@' anywhere (write %40 %2F %3F %23 %5B %5D); so is one libpq cannot
 * parse. Neither message quotes the password.
 * Errors: INBOX_ERR_URL, INBOX_ERR_CONNECT (the server cannot be reached:
 * a later attempt may succeed), INBOX_ERR_IO (SQLite: the file cannot be
 * opened), INBOX_ERR_TRANSIENT (the server went away while migrating, a
 * SQLite lock), INBOX_ERR_SCHEMA, NOMEM. */
INBOX_API int inbox_store_open(inbox_store **out, const char *url,
                               const inbox_store_options *opts);

/* Close the store and free it. NULL is a no-op. */
INBOX_API void inbox_store_close(inbox_store *st);

/* Create or upgrade the schema to this library's version. Idempotent and
 * safe to run concurrently from several processes. */
INBOX_API int inbox_store_migrate(inbox_store *st);

/* Schema version the database is at (0 = none). */
INBOX_API int inbox_store_schema_version(inbox_store *st, int *version);

/* Message of the last error on this handle ("" if none). Never contains
 * a password. Valid until the next call on the handle. */
INBOX_API const char *inbox_store_errmsg(const inbox_store *st);
/* SQLSTATE (PostgreSQL) or extended result code name (SQLite) of the last
 * error, or "". */
INBOX_API const char *inbox_store_errcode(const inbox_store *st);
/* The backend's kind, for display: "postgresql", "sqlite", or a
 * registered backend's (inbox/sys/store.h). Code that needs a store's
 * capability asks for it (inbox_store_check_sql(), ...), never the kind. */
INBOX_API const char *inbox_store_kind(const inbox_store *st);

/* The identity of the handle's current connection to the database: 1
 * after open, one more at every reconnect the store makes (begin() after
 * a lost connection, say), never reused by the handle. Anything kept per
 * connection outside the store — a statement prepared through
 * inbox_txn_pgconn(), a session setting — is valid while this number is
 * unchanged, and must be redone when it changes. Never the server's
 * backend PID: a server restarted in a fresh PID namespace (a container)
 * hands the same PID to the new connection. 0 for NULL. Not thread-safe
 * (like every call on the handle). */
INBOX_API uint64_t inbox_store_connection_id(const inbox_store *st);

/* Run one SQL statement outside any inbox transaction (autocommit), with
 * text parameters $1..$n like inbox_txn_exec(). For your own schema
 * (CREATE TABLE …) and tools; handlers use inbox_txn_exec() instead.
 * INBOX_ERR_STATE inside a transaction. */
INBOX_API int inbox_store_exec(inbox_store *st, const char *sql, int nparams,
                               const char *const *params, int64_t *rows);

/* Run the operator's setup SQL (one or more statements separated by ';',
 * no parameters: CREATE TABLE IF NOT EXISTS …) outside any transaction,
 * serialized with the setup of other processes on the same database
 * (PostgreSQL: under a session advisory lock), so that daemons starting
 * together do not race on the catalog. INBOX_ERR_STORE (the SQL was
 * refused) or INBOX_ERR_TRANSIENT (the database went away), the message
 * on the handle; INBOX_ERR_STATE inside a transaction. */
INBOX_API int inbox_store_exec_setup(inbox_store *st, const char *sql);

/* Check one statement against the database without running it (prepare
 * it): *nparams (when not NULL) receives the number of $n parameters it
 * takes. INBOX_OK, or INBOX_ERR_STORE (refused: unknown table, syntax)
 * or INBOX_ERR_TRANSIENT, the message on the handle; INBOX_ERR_STATE
 * inside a transaction. */
INBOX_API int inbox_store_check_sql(inbox_store *st, const char *sql,
                                    int *nparams);

/* Run a query outside any inbox transaction; fn is called per row (see
 * inbox_row_fn below). */
INBOX_API int inbox_store_query(inbox_store *st, const char *sql, int nparams,
                                const char *const *params,
                                int (*fn)(int ncols, const char *const *values,
                                          void *payload),
                                void *payload);

/* Delete inbox records of `consumer` (NULL = every registered consumer,
 * each with its own registered window) processed more than
 * `retention_seconds` ago (<= 0: the consumer's registered window), in
 * statements deleting at most `batch_limit` rows each, each its own short
 * transaction, so consumers are never blocked for long. Records inside the
 * window are never deleted. Only one purger runs at a time: another gets
 * INBOX_ERR_BUSY. `*deleted` receives the total. With `dry_run`, counts
 * what would be deleted and deletes nothing. */
INBOX_API int inbox_store_purge(inbox_store *st, const char *consumer,
                                int64_t retention_seconds, int batch_limit,
                                int dry_run, int64_t *deleted);

/* PostgreSQL keeps the inbox in generations (partitions): new keys go to
 * the newest, which stays small, so that the primary key being written
 * fits in memory even when the whole inbox does not (random message ids
 * on a large inbox, bench/README.md). Older generations are sealed —
 * nothing can be inserted into them — and carry a Bloom filter of their
 * keys, so a new key is looked up in them only when a filter may hold it;
 * a key recorded in any generation is always found.
 *
 * Seal the newest generation and open the next when it holds at least
 * `min_rows` records (<= 0: any, but never an empty one), then build the
 * filters sealed generations lack and drop sealed generations that purges
 * left empty (sealed over a minute ago). Outside any transaction; one sealer at
 * a time (others wait); waits at most 2 s for the locks it needs (then
 * INBOX_ERR_TRANSIENT: consumers are never held back longer). `*sealed`
 * receives the generation sealed, or 0. `inbox purge` calls it. SQLite
 * keeps one generation: INBOX_OK, *sealed = 0. */
INBOX_API int inbox_store_seal(inbox_store *st, int64_t min_rows, int *sealed);

/* ------------------------------------------------------------------ */
/* Consumer                                                              */
/* ------------------------------------------------------------------ */

typedef struct inbox_consumer inbox_consumer;
typedef struct inbox_txn inbox_txn;
typedef struct inbox_msg inbox_msg;

/* What a handler returns. */
typedef enum inbox_verdict {
	INBOX_HANDLER_OK = 0,    /* commit the effect */
	INBOX_HANDLER_RETRY = 1, /* transient: roll back, redeliver later */
	INBOX_HANDLER_REJECT = 2 /* permanent: roll back, dead-letter */
} inbox_verdict;

/* A handler runs inside the inbox transaction, under its own savepoint,
 * only for messages whose key is new (or being retried). Whatever it
 * writes through `txn` commits atomically with the inbox record, or not at
 * all. It must not commit or roll back the transaction itself. It may call
 * inbox_txn_set_reason() to explain a RETRY or REJECT. `payload` is the
 * consumer option's handler_payload. */
typedef int (*inbox_handler_fn)(inbox_txn *txn, const inbox_msg *msg,
                                void *payload);

/* The consumer option on_handlers (version 6): told, once per pass of a
 * batch, which handlers are about to run. `msgs[0..n)` are exactly the
 * messages whose handler will be called next, in the order it will be
 * called (delivery order); n >= 1. `payload` is handler_payload. The
 * messages (and the array) are valid until the batch call returns; the
 * hook must not touch the transaction. See on_handlers below. */
typedef void (*inbox_handlers_fn)(const inbox_msg *const *msgs, size_t n,
                                  void *payload);

/* What to do with a message whose timestamp is older than the retention
 * window and whose key is not (or no longer) in the inbox. */
typedef enum inbox_replay_policy {
	INBOX_REPLAY_DEAD_LETTER = 0, /* dead letter "too old to deduplicate" */
	INBOX_REPLAY_DROP = 1,        /* count it as a duplicate and drop it */
	INBOX_REPLAY_APPLY = 2 /* apply it anyway (you accept the risk) */
} inbox_replay_policy;

typedef struct inbox_consumer_options {
	unsigned version; /* INBOX_CONSUMER_OPTIONS_VERSION */
	/* Consumer name, e.g. "billing.order-created.v1". Required. */
	const char *name;
	/* Key template. NULL or "{id}" = the message id. Text with
	 * placeholders: {id} = message id, {/json/pointer} = value at that RFC
	 * 6901 pointer (string or number); "{{" and "}}" are literal braces.
	 * Example: "create-invoice:{/data/orderId}". */
	const char *key_template;
	/* Pointer of the message id inside the payload when the delivery
	 * carries none. NULL = "/id". */
	const char *id_pointer;
	/* Part of the payload to fingerprint (RFC 6901 pointer). NULL or "" =
	 * the whole payload. */
	const char *fingerprint_pointer;
	/* Retention window in seconds (default 7 days). Records are kept at
	 * least this long; older messages meet the replay guard. */
	int64_t retention_seconds;
	/* Attempts before a transiently failing message is dead-lettered
	 * (default 5). Attempts are what the inbox recorded: a handler's
	 * RETRY (or a failed statement), a lease taken over after it
	 * expired. Infrastructure faults never count, nor does the broker's
	 * delivery count (see max_deliveries). */
	int max_attempts;
	/* Lease length for long handlers, in milliseconds (default 30000). */
	int64_t lease_ms;
	/* Largest payload accepted, in bytes (default 1 MiB). */
	size_t max_payload;
	inbox_replay_policy replay_policy;
	/* Handler for inbox_consumer_process*(). */
	inbox_handler_fn handler;
	void *handler_payload;
	/* --- version 2 --- */
	/* JSON Schema (draft 7) text, NUL-terminated, or NULL for none. It is
	 * compiled by inbox_consumer_open() (copied: the text may be freed
	 * after the call); a schema that is malformed or uses anything we do
	 * not support (see inbox_schema_open) makes open fail with
	 * INBOX_ERR_INVALID and the reason in `err`. A message violating it
	 * is dead-lettered before any effect, with a reason such as
	 * "schema violation at /data/totalCents: minimum: -5 is less than
	 * 0". Ignored (no schema) when version is 1. */
	const char *json_schema;
	/* --- version 3 --- */
	/* The time budget of one batch transaction, in ms. 0 (the default):
	 * a third of lease_ms (10 s with the default lease), at least 1 s;
	 * < 0: none. The consumer bounds its store's transactions by it,
	 * where the store options leave a limit at 0: no lock is waited for
	 * longer, no statement runs longer, and (PostgreSQL) a session idle
	 * that long inside a transaction is ended by the server — so a
	 * member frozen inside its transaction (SIGSTOP, a long pause of its
	 * host, a hung handler) holds the other members back no longer than
	 * that: its transaction is rolled back, its locks released, and when
	 * it resumes it reconnects and runs its batch again (what the others
	 * applied meanwhile are duplicates then). Those timeouts are
	 * transient failures: retried, never counted toward attempts. */
	int64_t batch_timeout_ms;
	/* --- version 4 --- */
	/* Deliveries of a message that never completes, after which it is
	 * dead-lettered: a delivery whose delivery_count is above it, of a
	 * key not completed (new, failed, or an expired lease), goes to the
	 * dead letters without running the handler, with the reason
	 * "delivered N times without completing (max_deliveries M): a crash
	 * loop?". It is the bound on a message that kills the process (or
	 * its handler) before anything is recorded — a poison pill that
	 * max_attempts cannot see, as nothing was ever written for it. 0
	 * (the default): 10 x max_attempts, at least 20 (50 with the default
	 * max_attempts); < 0: no bound. Otherwise it must be at least
	 * max_attempts (every retry is a delivery too), else open fails with
	 * INBOX_ERR_INVALID. A duplicate (the key completed or dead) is never
	 * bounded: it is acked whatever its count.
	 * Keep it well above max_attempts: the broker's count also grows with
	 * what is no fault of the message (see inbox_delivery.delivery_count).
	 * When the process dies, every message of the batch in hand comes
	 * back, so the batch-mates of a message that crashes it count the
	 * same deliveries and, at the bound, are dead-lettered with it (same
	 * reason; replay them once the cause is fixed). Sources without a
	 * broker-side count (JSONL, Kafka) count in the process only: a
	 * crash loop there is not bounded. inbox_lease_acquire() does not
	 * apply it: a lease records its attempt before the work runs, so a
	 * crash under a lease is a takeover, counted toward max_attempts.
	 * Ignored (the default) when version is below 4. */
	int max_deliveries;
	/* --- version 5 --- */
	/* Largest result a handler may store with inbox_txn_set_result(),
	 * in bytes. 0: the default, 64 KiB (65536), also when version is
	 * below 5. A larger result is refused to the handler
	 * (INBOX_ERR_TOO_LARGE), never cut. At most 256 MiB, else open
	 * fails with INBOX_ERR_INVALID. The results live in the inbox
	 * records, as long as they do: keep them small (an id, a status, a
	 * response), not documents. */
	size_t max_result_bytes;
	/* --- version 6 --- */
	/* Called once per pass of a batch (inbox_consumer_process*), inside
	 * its transaction, after the claim and after every decision that
	 * comes before a handler (duplicates, conflicts, keys in progress,
	 * repeats, too-old messages, max_deliveries, the reclaim of failed
	 * keys and expired leases, max_attempts), with the messages whose
	 * handler will then be called, in that order; then the handlers run,
	 * each under its savepoint as without the hook. It is for a caller
	 * that runs handlers elsewhere (a language binding's main thread):
	 * it can hand them all over at once. Not called when no handler will
	 * run in that pass, nor when `handler` is NULL. When a pass is rolled
	 * back and the batch is run again (a transient fault, a lost deferred
	 * statement), the new pass calls it again, with that pass's list:
	 * whatever the hook started for the old pass is void. What changes
	 * with it set: the store's statements for the batch's other keys
	 * (their dead letters, the reclaim of a retried key) run before the
	 * handlers instead of between them; the outcomes are the same. NULL
	 * (the default, and when version is below 6): no hook. */
	inbox_handlers_fn on_handlers;
} inbox_consumer_options;

#define INBOX_CONSUMER_OPTIONS_VERSION 6
#define INBOX_DEFAULT_MAX_RESULT_BYTES (64 * 1024)
#define INBOX_CONSUMER_OPTIONS_INIT                                            \
	{                                                                      \
		INBOX_CONSUMER_OPTIONS_VERSION, NULL, NULL, NULL, NULL,        \
		    7 * 24 * 3600, 5, 30000, 1024 * 1024,                      \
		    INBOX_REPLAY_DEAD_LETTER, NULL, NULL, NULL, 0, 0,          \
		    INBOX_DEFAULT_MAX_RESULT_BYTES, NULL                       \
	}

/* Create a consumer on `st` (borrowed: it must outlive the consumer; one
 * consumer per store handle at a time). Registers the consumer name and
 * its retention window in the store. Errors: INVALID (bad name, template
 * or pointer, or a json_schema that is malformed or uses something we do
 * not support — checked before anything is written), STORE, NOMEM.
 * On INVALID, *out is NULL and the reason is written to `err` if non-NULL
 * (up to errlen bytes). */
/* opts->version: 1 to INBOX_CONSUMER_OPTIONS_VERSION, else INVALID. */
INBOX_API int inbox_consumer_open(inbox_consumer **out, inbox_store *st,
                                  const inbox_consumer_options *opts, char *err,
                                  size_t errlen);

INBOX_API void inbox_consumer_close(inbox_consumer *c);

/* Process one delivery in its own transaction. On INBOX_OK, *res holds the
 * outcome and the transaction has committed: ack if
 * inbox_outcome_ackable(res->outcome). On error nothing committed; do not
 * ack. res->version must be set (INBOX_RESULT_INIT): INBOX_ERR_INVALID,
 * nothing processed, for a version this library does not know. */
INBOX_API int inbox_consumer_process(inbox_consumer *c, const inbox_delivery *d,
                                     inbox_result *res);

/* Process n deliveries in one transaction (res[0].version gives the
 * layout of the res array, whose every element then gets that version;
 * an unknown one is INBOX_ERR_INVALID, nothing processed): all keys are
 * claimed in one
 * statement (in sorted order, so overlapping batches of two workers cannot
 * deadlock), the handler runs for new keys only, each under a savepoint so
 * one failure rolls back only itself, and the batch commits once.
 * res[i] is the result of d[i]. Deliveries with the same key inside the
 * batch: the first is processed, the others are duplicates (or conflicts).
 * On error nothing committed; do not ack any of them. Transient database
 * errors are retried internally a few times before INBOX_ERR_TRANSIENT. */
INBOX_API int inbox_consumer_process_batch(inbox_consumer *c,
                                           const inbox_delivery *d, size_t n,
                                           inbox_result *res);

INBOX_API const char *inbox_consumer_errmsg(const inbox_consumer *c);
INBOX_API const char *inbox_consumer_name(const inbox_consumer *c);

/* ------------------------------------------------------------------ */
/* Long handlers: processing / completed / failed with a lease         */
/* ------------------------------------------------------------------ */

typedef struct inbox_lease inbox_lease;

/* Record the delivery as `processing` under a lease of opts.lease_ms and
 * commit at once, so the work can run without holding a transaction.
 * *outcome: ACQUIRED (you hold the lease; *lease is set, also after a
 * takeover of an expired lease, which is counted), DUPLICATE, CONFLICT,
 * DEAD_LETTERED (invalid input, max attempts), IN_PROGRESS (another holder's
 * lease is still valid). *lease is NULL unless ACQUIRED. */
INBOX_API int inbox_lease_acquire(inbox_consumer *c, const inbox_delivery *d,
                                  inbox_lease **lease, inbox_outcome *outcome);

/* inbox_lease_acquire() answering with an inbox_result, as a processing
 * call does: res->outcome is the outcome above; attempts (the attempt
 * this lease is for when ACQUIRED, else what the record counted), key,
 * reason (CONFLICT, DEAD_LETTERED) and dead_letter_id as for
 * inbox_consumer_process(); and for a DUPLICATE (version 2) the stored
 * result of the key's first processing — result, result_len,
 * result_type — and first_outcome (APPLIED, STALE, DEAD_LETTERED), on
 * both stores, also for a key in a sealed generation (PostgreSQL). They
 * are read by the statement that takes the lease or finds the record: a
 * fresh key costs no extra round trip, a duplicate no second statement.
 * No result for every other outcome (CONFLICT: the payload differs).
 * res->version must be set (INBOX_RESULT_INIT): an unknown one is
 * INBOX_ERR_INVALID, nothing done; a version 1 res gets no result
 * fields. key, reason, result and result_type point into memory owned
 * by the consumer, valid until the next inbox_lease_acquire*() on it or
 * its close (not past inbox_consumer_close(); inbox_lease_free() does not
 * touch them). Errors as inbox_lease_acquire() (one consumer, one
 * thread: like every call on it); on error *lease is NULL and res holds
 * nothing. */
INBOX_API int inbox_lease_acquire_result(inbox_consumer *c,
                                         const inbox_delivery *d,
                                         inbox_lease **lease,
                                         inbox_result *res);

/* Extend the lease by opts.lease_ms from now. INBOX_ERR_FENCED if the lease
 * was taken over. */
INBOX_API int inbox_lease_extend(inbox_lease *l);

/* Complete: run `fn` (may be NULL) in a transaction that also moves the
 * record to `completed`, only if this lease's fencing token is still the
 * current one. INBOX_ERR_FENCED (nothing committed) when another worker
 * took the record over. The verdict of fn decides: OK -> *outcome APPLIED
 * (or STALE); RETRY -> record moves to `failed`, counted, RETRY; REJECT ->
 * dead letter. */
INBOX_API int inbox_lease_complete(inbox_lease *l, inbox_handler_fn fn,
                                   void *payload, inbox_outcome *outcome);

/* Give the lease up after a failure: the record moves to `failed` and the
 * attempt is counted, so a redelivery retries it. FENCED if lost. */
INBOX_API int inbox_lease_fail(inbox_lease *l, const char *reason);

/* Fencing token of the lease (grows by one on every acquisition). */
INBOX_API int64_t inbox_lease_fence(const inbox_lease *l);
INBOX_API const char *inbox_lease_key(const inbox_lease *l);
/* The parsed message, valid while the lease lives. */
INBOX_API const inbox_msg *inbox_lease_msg(const inbox_lease *l);
INBOX_API void inbox_lease_free(inbox_lease *l);

/* ------------------------------------------------------------------ */
/* Messages as the handler sees them                                    */
/* ------------------------------------------------------------------ */

/* All returned pointers are borrowed and valid during the handler call. */
INBOX_API const char *inbox_msg_key(const inbox_msg *m);
INBOX_API const char *inbox_msg_id(const inbox_msg *m);
INBOX_API const char *
inbox_msg_fingerprint(const inbox_msg *m); /* 64 hex chars */
INBOX_API const char *inbox_msg_payload(const inbox_msg *m, size_t *len);
INBOX_API int32_t
inbox_msg_attempt(const inbox_msg *m); /* 1 on the first try */
INBOX_API const inbox_delivery *inbox_msg_delivery(const inbox_msg *m);

/* The value at an RFC 6901 pointer rendered as text: a string's content
 * (unescaped), a number in its shortest form, "true"/"false", objects and
 * arrays as canonical JSON. *out is NULL for JSON null. Returns
 * INBOX_ERR_NOTFOUND if the pointer resolves to nothing,
 * INBOX_ERR_INVALID if it is malformed, INBOX_ERR_NUL (*out NULL) if it
 * is a string holding U+0000, which a C string would cut short: never a
 * shortened text (read it whole with inbox_msg_getn(), or reject the
 * message). The text lives as long as the message. */
INBOX_API int inbox_msg_get(const inbox_msg *m, const char *pointer,
                            const char **out);

/* inbox_msg_get() with the length: *len bytes at *out (NUL-terminated
 * too), a string's U+0000 included, so nothing is ever cut. *out NULL
 * and *len 0 for JSON null. Errors as inbox_msg_get(), never
 * INBOX_ERR_NUL. */
INBOX_API int inbox_msg_getn(const inbox_msg *m, const char *pointer,
                             const char **out, size_t *len);

/* The parsed payload as jansson holds it (a json_t *), or NULL when it is
 * not JSON. Borrowed: valid as long as the message, never to be modified
 * (json_incref() a part to keep it). For code that builds JSON from the
 * message without a detour through text. */
struct json_t;
INBOX_API struct json_t *inbox_msg_json(const inbox_msg *m);

/* ------------------------------------------------------------------ */
/* The transaction handle given to handlers                             */
/* ------------------------------------------------------------------ */

/* Native connections, for handlers that want the full driver API. NULL
 * when the store's handle is not of that type (its backend's native_type,
 * inbox/sys/store.h). Do not COMMIT/ROLLBACK on them. */
struct pg_conn;
struct sqlite3;
INBOX_API struct pg_conn *inbox_txn_pgconn(inbox_txn *t);
INBOX_API struct sqlite3 *inbox_txn_sqlite3(inbox_txn *t);
INBOX_API inbox_store *inbox_txn_store(inbox_txn *t);

/* Execute one SQL statement with text parameters $1..$n (both stores
 * accept $N placeholders; NULL params are SQL NULL). *rows (may be NULL)
 * receives the number of rows changed. On error returns INBOX_ERR_STORE or
 * INBOX_ERR_TRANSIENT, the detail is on the store, and the handler should
 * return RETRY or REJECT: a handler returning OK after a failed statement
 * is treated as RETRY. INBOX_ERR_TRANSIENT is the infrastructure's fault
 * (a lost connection, a restarted server, a lock or statement timeout, a
 * deadlock, a prepared statement the server lost): whatever the handler
 * then returns, the whole batch is rolled back and run again, and no
 * attempt is counted — an infrastructure fault never leads a message to
 * its dead letter.
 *
 * With rows == NULL, inside inbox_consumer_process_batch(), the
 * PostgreSQL store defers the statement: it returns INBOX_OK at once and
 * sends the batch's statements together with its COMMIT (one round trip
 * for all), or sooner when a statement needs an answer (a query, rows
 * asked for); statements still run in the order issued. If the server
 * then refuses one, the batch is rolled back and run again at once with
 * every statement executed when issued, so the handler gets the error as
 * described above: handlers may be called more than once per message in
 * one processing call (as after a transient error). Pass rows to have a
 * statement run before inbox_txn_exec() returns. Consecutive deferred
 * executions of one single-row INSERT (INSERT INTO t (cols) VALUES ($1,
 * ...) [ON CONFLICT DO NOTHING], parameters only) may be sent as one
 * multi-row INSERT, rows in the order issued — never into a table with a
 * statement-level or AFTER row INSERT trigger, a transition table, a
 * foreign key to itself or an INSERT rule, where that could be seen. */
INBOX_API int inbox_txn_exec(inbox_txn *t, const char *sql, int nparams,
                             const char *const *params, int64_t *rows);

/* Called once per result row with the row's columns as text (NULL for SQL
 * NULL). Return non-zero to stop early. */
typedef int (*inbox_row_fn)(int ncols, const char *const *values,
                            void *payload);

/* Inside an inbox_row_fn called by inbox_txn_query() or
 * inbox_store_query(): the name of result column `col` (0-based) of the
 * query whose row is being delivered on this thread (as the server names
 * it: "count", an alias given with AS, ...), or NULL when col is out of
 * range, when called outside a row callback, or for a backend that does
 * not give names. The text is valid until the callback returns. A query
 * run from inside the callback has its own names while it runs. Reads a
 * thread-local: safe on any thread, about that thread's callback only. */
INBOX_API const char *inbox_row_column_name(int col);

/* Execute a query and call fn for each row. */
INBOX_API int inbox_txn_query(inbox_txn *t, const char *sql, int nparams,
                              const char *const *params, inbox_row_fn fn,
                              void *payload);

/* Projection helper: insert or update a row of `table` keyed by
 * key_column = key_value, but only if `version` is newer than the stored
 * one:
 *   INSERT INTO table (key_column, version_column, cols...) VALUES (...)
 *   ON CONFLICT (key_column) DO UPDATE SET ... WHERE stored < incoming
 * Identifiers are quoted ("schema.table" is split on the dot); values are
 * bound as parameters. key_column must be unique. *applied (may be NULL)
 * is 1 if written, 0 if the stored version was newer or equal — in that
 * case the message's outcome becomes INBOX_STALE. */
INBOX_API int
inbox_txn_upsert_versioned(inbox_txn *t, const char *table,
                           const char *key_column, const char *key_value,
                           const char *version_column, int64_t version,
                           int ncols, const char *const *columns,
                           const char *const *values, int *applied);

/* Mark the current message stale (outcome INBOX_STALE) from a handler that
 * checks versions itself. */
INBOX_API void inbox_txn_mark_stale(inbox_txn *t);

/* Mark the current message skipped (outcome INBOX_SKIPPED) from a handler
 * that wants nothing of it and returns INBOX_HANDLER_OK: its inbox record
 * commits (a redelivery is a duplicate), it is counted apart from the
 * applied ones (inbox_stats.skipped) and acked. Nothing it wrote is
 * undone: a handler that skips writes nothing. */
INBOX_API void inbox_txn_mark_skipped(inbox_txn *t);

/* Reason text kept with a RETRY or REJECT (copied). */
INBOX_API void inbox_txn_set_reason(inbox_txn *t, const char *reason);

/* Stored results ("the same answer every time"). In a handler: attach a
 * result — len bytes at data, any bytes, and an optional content type
 * ("application/json"; NUL-terminated, or NULL) — to the key's inbox
 * record, written in the same transaction as the record and the
 * handler's effects. The bytes and the type are copied; calling it again
 * replaces the result (len 0 stores an empty result, which is not "no
 * result"). What becomes of it follows the handler's verdict:
 *   OK      the result commits with the record: this delivery's
 *           inbox_result carries it (APPLIED or STALE), and so does every
 *           later duplicate of the key, as long as the record lives
 *           (retention, purge; on PostgreSQL also once the record's
 *           generation is sealed), with first_outcome;
 *   REJECT  the effects roll back, the record is dead-lettered and the
 *           result is kept with it (a refusal is an answer too: its
 *           duplicates get it, first_outcome DEAD_LETTERED);
 *   RETRY   dropped with the effects (nothing is final yet).
 * Returns INBOX_OK; INBOX_ERR_INVALID (NULL t, NULL data with len > 0, a
 * content type over 255 bytes or holding a control character);
 * INBOX_ERR_TOO_LARGE when len exceeds the consumer's max_result_bytes —
 * nothing is stored then (an earlier result stays), and it is the
 * handler's error to handle (return REJECT, or store a smaller answer):
 * a result is never cut; INBOX_ERR_NOMEM; INBOX_ERR_STATE outside a
 * handler of inbox_consumer_process*() or inbox_lease_complete(), or on
 * a store whose backend keeps no results (vtable version < 7). The
 * store's write happens after the handler returns, so its own failure
 * (transient: the batch re-runs) is the batch's, not this call's. */
INBOX_API int inbox_txn_set_result(inbox_txn *t, const char *content_type,
                                   const void *data, size_t len);

/* ------------------------------------------------------------------ */
/* Counters                                                              */
/* ------------------------------------------------------------------ */

#define INBOX_LATENCY_BUCKETS 12
/* Upper bounds, in seconds, of the processing-time histogram buckets;
 * the last bucket is +Inf. */
INBOX_API extern const double inbox_latency_bounds[INBOX_LATENCY_BUCKETS];

/* Versioned (see "Versioned structs" above): set `version` before the
 * call (INBOX_STATS_INIT). */
typedef struct inbox_stats {
	unsigned version; /* INBOX_STATS_VERSION */
	uint64_t applied;
	uint64_t duplicates;
	uint64_t conflicts;
	uint64_t stale;
	uint64_t retries;
	uint64_t dead_letters;
	uint64_t lease_takeovers;
	uint64_t in_progress; /* deliveries answered IN_PROGRESS */
	uint64_t fenced;      /* late completions refused */
	uint64_t batches;
	uint64_t messages; /* deliveries seen */
	/* Batches run again after a transient database error (deadlock,
	 * serialization failure, busy, lost connection). */
	uint64_t transient_retries;
	/* Processing time per message (claim to commit), seconds. */
	double processing_seconds_sum;
	uint64_t processing_count;
	uint64_t processing_buckets[INBOX_LATENCY_BUCKETS]; /* cumulative */
	/* Version 2: messages no step wanted (INBOX_SKIPPED). */
	uint64_t skipped;
} inbox_stats;

#define INBOX_STATS_VERSION 2
#define INBOX_STATS_INIT                                                       \
	{                                                                      \
		.version = INBOX_STATS_VERSION                                 \
	}

/* Snapshot of the consumer's counters since it was opened, into *out
 * (the fields of out->version). INBOX_ERR_INVALID for NULL or a version
 * this library does not know (the reason in inbox_consumer_errmsg()). */
INBOX_API int inbox_consumer_stats(const inbox_consumer *c, inbox_stats *out);

/* ------------------------------------------------------------------ */
/* JSON Schema (draft 7)                                                 */
/* ------------------------------------------------------------------ */

/* A compiled JSON Schema. Consumers take one through
 * inbox_consumer_options.json_schema; this API is for checking schemas
 * and messages directly (tools, tests, producers). docs/schema.md lists
 * what is supported.
 *
 * Supported: boolean schemas; $schema (draft-07 only), $id, $ref to a
 * place inside the same schema ("#", "#/definitions/x", an in-document
 * $id), definitions, $comment, title, description, default, examples,
 * readOnly, writeOnly; type, enum, const; multipleOf, maximum,
 * exclusiveMaximum, minimum, exclusiveMinimum; maxLength, minLength (code
 * points), pattern (ECMA 262 syntax, on PCRE2); items, additionalItems,
 * maxItems, minItems, uniqueItems, contains; maxProperties, minProperties,
 * required, properties, patternProperties, additionalProperties,
 * dependencies, propertyNames; if/then/else, allOf, anyOf, oneOf, not;
 * format: date-time, date, time, email, hostname, ipv4, ipv6, uri,
 * uri-reference, uuid, json-pointer, relative-json-pointer, regex
 * (formats are asserted, not mere annotations).
 *
 * Refused (never ignored): any other keyword, any other format, another
 * $schema, a $ref leaving the document (remote), keywords beside $ref
 * (draft 7 would ignore them), a regex that does not compile or uses
 * PCRE-only syntax, a keyword value of the wrong type, a $ref cycle that
 * never descends into the instance. */
typedef struct inbox_schema inbox_schema;

/* Compile the schema text [schema, schema+len). On INBOX_OK *out is the
 * compiled schema (free with inbox_schema_close). INBOX_ERR_INVALID: *out
 * is NULL and err (if non-NULL, up to errlen bytes) says why, with the
 * place in the schema, e.g.
 *   schema uses unsupported keyword "dependentRequired" at /properties/x
 *   unknown format "phone" at /properties/tel
 *   remote $ref "http://example.com/s.json" at /items is not supported
 * INBOX_ERR_NOMEM. */
INBOX_API int inbox_schema_open(inbox_schema **out, const char *schema,
                                size_t len, char *err, size_t errlen);

/* Free. NULL is a no-op. */
INBOX_API void inbox_schema_close(inbox_schema *s);

/* Validate the JSON text [json, json+len). INBOX_OK: *valid is 1, or 0
 * with the first violation in reason (if non-NULL, up to rlen bytes):
 *   schema violation at /data/totalCents: minimum: -5 is less than 0
 * (the instance location as an RFC 6901 pointer, "(root)" for the whole
 * document; then the failing keyword and a message).
 * A validation that would cost more than its budget (1,000,000 + 8 x len
 * steps), nest too deep for the thread's stack or run a regex past its
 * limits stops, *valid = 0, and reason begins "schema validation ...":
 *   schema validation exceeded 1000800 steps (the budget of a message of
 *   100 bytes): too costly to validate against this schema (at /a/0)
 * (docs/schema.md, "Bounded work per message").
 * INBOX_ERR_INVALID when json is not well-formed JSON (reason says why),
 * INBOX_ERR_NOMEM. Allocates the parsed text, and the schema's memo table
 * when it grows. A schema may be used by one thread at a time (it holds the
 * regex match buffer and the memo). */
INBOX_API int inbox_schema_validate(inbox_schema *s, const char *json,
                                    size_t len, int *valid, char *reason,
                                    size_t rlen);

/* Called for each violation: instance_path is an RFC 6901 pointer ("" for
 * the root), keyword the failing keyword ("minimum"; "false" for a false
 * schema), schema_path the keyword's location in the schema
 * ("/properties/data/properties/totalCents/minimum"), message a sentence
 * without the path ("-5 is less than 0"). The strings are valid during
 * the call only. Return non-zero to stop. */
typedef int (*inbox_schema_error_fn)(const char *instance_path,
                                     const char *keyword,
                                     const char *schema_path,
                                     const char *message, void *payload);

/* Validate and report every violation (not only the first) to fn.
 * *nerrors (may be NULL) receives their number (0 = valid). A validation
 * that stops at a limit reports it last, with the keyword "limit" and
 * the message "schema validation ...". Errors as
 * inbox_schema_validate. */
INBOX_API int inbox_schema_validate_all(inbox_schema *s, const char *json,
                                        size_t len, inbox_schema_error_fn fn,
                                        void *payload, size_t *nerrors);

/* ------------------------------------------------------------------ */
/* Utilities                                                             */
/* ------------------------------------------------------------------ */

/* RFC 8785 canonical JSON of a JSON text. *out is malloc'ed
 * (NUL-terminated), *outlen its length; free() it. INBOX_ERR_INVALID on
 * malformed JSON (the reason in err, if non-NULL). */
INBOX_API int inbox_json_canonicalize(const char *json, size_t len, char **out,
                                      size_t *outlen, char *err, size_t errlen);

/* SHA-256 of the canonical JSON of the value at `pointer` ("" = whole
 * document) in `json`, as 64 lower-case hex digits plus NUL in hex[65]. */
INBOX_API int inbox_fingerprint(const char *json, size_t len,
                                const char *pointer, char hex[65], char *err,
                                size_t errlen);

/* Copy of `url` with every secret replaced by "***" (malloc'ed; NULL for
 * NULL or on NOMEM). Secret, in SCHEME://...: the password of the user
 * info (after its first ':'), or the whole user info when it has no ':'
 * (a nats:// token, a redis:// password) except for postgresql, postgres
 * and amqp, where that is a user name; the user info counted up to the
 * last '@' of the URL, so that whatever a client library could take for
 * the password is hidden however the URL is written (all of it, user
 * name too, when it holds a raw '/', '?', '#', '@', '[' or ']'). And the
 * value of
 * any parameter whose name contains, in any case, pass, pwd, secret,
 * token, key, cred, auth, jaas, config or signature ("?rdkafka.sasl.
 * password=***", "&sslpassword=***"), in a URL or in a libpq
 * "keyword=value" string. The error messages of the stores and sources
 * (the client libraries' own texts included) are scrubbed of the same
 * secrets, in any spelling. Thread-safe. */
INBOX_API char *inbox_redact_url(const char *url);

#ifdef __cplusplus
}
#endif

#endif /* INBOX_INBOX_H */
