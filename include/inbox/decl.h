/*
 * libinbox — declared effects: a handler built from a declaration.
 *
 * Many consumers need no C code of their own: their effect is a few SQL
 * statements whose parameters come from the message, a versioned upsert
 * of a projection, and perhaps calls to the outside through the outbox.
 * A declaration (inbox_decl) says that once; inbox_decl_handler() then
 * runs it for every message, in the inbox's transaction, like a handler
 * written by hand. It is the engine behind the `effect:`, `setup:` and
 * `outbox:` keys of the daemon's configuration (docs/config.md), open to
 * C programs and bindings alike:
 *
 *   inbox_decl_options o = INBOX_DECL_OPTIONS_INIT;
 *   o.consumer = "billing.order-created.v1";
 *   o.setup_sql = "CREATE TABLE IF NOT EXISTS invoices (...)";
 *   inbox_decl *d;
 *   char why[512];
 *   if (inbox_decl_new(&d, &o, why, sizeof(why)) < 0) ...
 *   const char *params[] = {"/data/orderId", "/data/totalCents"};
 *   inbox_decl_add_sql(d, "INSERT INTO invoices VALUES ($1, $2)", 2,
 *                      params, why, sizeof(why));
 *   inbox_decl_prepare(d, store, NULL, why, sizeof(why)); // setup, checks
 *   copts.handler = inbox_decl_handler;
 *   copts.handler_payload = d;   // outlives the consumer
 *
 * Steps run in the order they were added: first every SQL or upsert step
 * (in their order), then every outbox step. A parameter is an RFC 6901
 * JSON pointer into the message, bound as text (inbox_msg_get(): a
 * string's content, a number's shortest form, JSON null as SQL NULL).
 *
 * Verdicts of the handler:
 *   - a pointer missing from the message, a string holding U+0000, an
 *     upsert key that is null or a version that is not an integer, a body
 *     field of an outbox step that is missing: REJECT (a dead letter with
 *     the reason, e.g. "effect parameter $2 (/data/total) is missing");
 *   - a data or integrity error of the database (SQLSTATE class 22 or 23,
 *     SQLite constraint, mismatch, too big): REJECT — the same message
 *     would fail the same way;
 *   - anything else (a lost connection, a lock timeout, a refused outbox
 *     row): RETRY. A transient fault is never the message's: the consumer
 *     rolls the batch back and runs it again, uncounted.
 *   An upsert whose stored version is newer or equal writes nothing; the
 *   message is then STALE (inbox_txn_upsert_versioned()).
 *
 * Ownership: every function copies what it is given (strings, arrays, the
 * body template); the caller may free its own copies after the call. The
 * inbox_decl is the caller's, freed with inbox_decl_free() once no consumer
 * (or lease completion) uses it any more.
 *
 * Errors: functions returning int return 0 (INBOX_OK) or a negative
 * INBOX_ERR_* code, with a reason in `why`/`err` when it is non-NULL (up
 * to `len` bytes, always NUL-terminated). A reason quotes the database's
 * message about the SQL, never the store's URL.
 *
 * Thread safety: building (inbox_decl_new, inbox_decl_add_*) and
 * inbox_decl_prepare() are for one thread at a time. Once built, a
 * declaration is only read: inbox_decl_handler() may run with the same
 * declaration in several threads at once (each with its own consumer,
 * store handle and transaction).
 */
#ifndef INBOX_DECL_H
#define INBOX_DECL_H

#include <stddef.h>

#include "export.h"
#include "inbox.h"
#include "outbox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most parameters of one SQL step ($1..$64); an upsert sets at most
 * INBOX_DECL_MAX_PARAMS - 2 columns besides its key and version. */
#define INBOX_DECL_MAX_PARAMS 64

typedef struct inbox_decl inbox_decl;

typedef struct inbox_decl_options {
	unsigned version; /* INBOX_DECL_OPTIONS_VERSION */
	/* The name of the consumer the declaration runs for: outbox rows'
	 * idempotency keys ("{idempotency_key}" in a body) derive from it,
	 * so it must be the inbox_consumer_options.name of that consumer.
	 * Required when outbox steps are added. */
	const char *consumer;
	/* SQL run once by inbox_decl_prepare(), outside any transaction
	 * (several statements allowed: CREATE TABLE IF NOT EXISTS ...), or
	 * NULL. On PostgreSQL it runs under an advisory lock, so processes
	 * starting together do not race on the catalog. */
	const char *setup_sql;
	/* Attempts of an outbox row whose step sets none (0): this; 0 = the
	 * max_attempts of the dispatcher performing the row. */
	int outbox_max_attempts;
} inbox_decl_options;

#define INBOX_DECL_OPTIONS_VERSION 1
#define INBOX_DECL_OPTIONS_INIT                                                \
	{                                                                      \
		INBOX_DECL_OPTIONS_VERSION, NULL, NULL, 0                      \
	}

/* A versioned upsert (inbox_txn_upsert_versioned()): the row of `table`
 * whose key_column is the value at key_pointer is written only if the
 * value at version_pointer (an integer) is newer than its version_column.
 * Columns are quoted identifiers; `table` may be "schema.table". */
typedef struct inbox_decl_upsert {
	unsigned version; /* INBOX_DECL_UPSERT_VERSION */
	const char *table;
	const char *key_column;
	const char *key_pointer;
	const char *version_column;
	const char *version_pointer;
	/* nset further columns, each set to the value at its pointer. */
	int nset;
	const char *const *set_columns;
	const char *const *set_pointers;
} inbox_decl_upsert;

#define INBOX_DECL_UPSERT_VERSION 1
#define INBOX_DECL_UPSERT_INIT                                                 \
	{                                                                      \
		INBOX_DECL_UPSERT_VERSION, NULL, NULL, NULL, NULL, NULL, 0,    \
		    NULL, NULL                                                 \
	}

/* A new, empty declaration into *out (NULL on failure). `opts` may be NULL
 * for defaults. Errors: INVALID (a version this library does not know),
 * NOMEM. */
INBOX_API int inbox_decl_new(inbox_decl **out, const inbox_decl_options *opts,
                             char *why, size_t len);

/* Free the declaration. NULL is a no-op. */
INBOX_API void inbox_decl_free(inbox_decl *d);

/* Add an SQL step: one statement, run with `nparams` text parameters
 * $1..$nparams bound from the JSON pointers params[0..nparams-1]. Checked
 * without a database: exactly one statement, no transaction control
 * (BEGIN, COMMIT, SAVEPOINT...: the step runs inside the inbox's
 * transaction), the placeholders are exactly $1..$nparams, every pointer
 * is valid. Errors: INVALID (the reason in why), NOMEM. */
INBOX_API int inbox_decl_add_sql(inbox_decl *d, const char *sql, int nparams,
                                 const char *const *params, char *why,
                                 size_t len);

/* Add a versioned upsert step (see inbox_decl_upsert). Errors: INVALID (a
 * missing name, a bad pointer, too many columns), NOMEM. */
INBOX_API int inbox_decl_add_upsert(inbox_decl *d, const inbox_decl_upsert *u,
                                    char *why, size_t len);

/* Add an outbox step: for every applied message, an outbox row for effect
 * `e` (inbox_txn_outbox_add(); e->body must be NULL) whose body is
 * `body_template` rendered from the message, as canonical JSON (RFC
 * 8785), or empty when the template is NULL. The template is JSON text
 * (any value: "\"/data\"" is a body that is the message's /data):
 * objects and arrays are kept as written, every string is a leaf:
 *   "/json/pointer"     the value there, with its JSON type;
 *   "{idempotency_key}" the row's idempotency key;
 *   "{key}"             the message's inbox key;
 *   "=text"             the literal string "text".
 * Numbers, booleans and null in the template are refused (write "=..."
 * for a literal). e->max_attempts 0 takes opts.outbox_max_attempts. Steps
 * are unique by name. Errors: INVALID (a bad effect, template or leaf,
 * a step declared twice, no consumer name in the options), NOMEM. */
INBOX_API int inbox_decl_add_outbox(inbox_decl *d, const inbox_outbox_effect *e,
                                    const char *body_template, char *why,
                                    size_t len);

/* Filters: a condition on the message (the config's `when:`). The value
 * at `pointer` is compared as text, the way parameters are bound
 * (inbox_msg_getn(): a string's content, a number's shortest form —
 * 3, 19.99 —, true/false, null, an object or array as canonical JSON):
 *   INBOX_DECL_EQUALS  it equals values[0] (nvalues 1);
 *   INBOX_DECL_IN      it equals one of values[0..nvalues-1] (1..64);
 *   INBOX_DECL_EXISTS  the pointer resolves (JSON null included) when
 *                      `exists` is 1; it does not, when `exists` is 0.
 * A pointer the message lacks makes EQUALS and IN false: never an error,
 * never a dead letter. */
typedef enum inbox_decl_when_op {
	INBOX_DECL_EQUALS = 1,
	INBOX_DECL_IN = 2,
	INBOX_DECL_EXISTS = 3
} inbox_decl_when_op;

typedef struct inbox_decl_when {
	unsigned version; /* INBOX_DECL_WHEN_VERSION */
	const char *pointer;
	inbox_decl_when_op op;
	int nvalues;
	const char *const *values;
	int exists;
} inbox_decl_when;

#define INBOX_DECL_WHEN_VERSION 1
#define INBOX_DECL_WHEN_INIT                                                   \
	{                                                                      \
		INBOX_DECL_WHEN_VERSION, NULL, 0, 0, NULL, 1                   \
	}

/* What a condition guards (inbox_decl_add_when's scope). */
typedef enum inbox_decl_scope {
	/* The message: unless it holds, no step runs. */
	INBOX_DECL_MESSAGE = 0,
	/* The step added last (SQL, upsert or outbox): unless it holds, that
	 * step does not run for the message; the others do. */
	INBOX_DECL_LAST_STEP = 1
} inbox_decl_scope;

/* Add condition `w` to `scope`; several on one scope must all hold. A
 * message for which no step runs (the message's conditions fail, or
 * every step's) is INBOX_SKIPPED (inbox_txn_mark_skipped()): its inbox
 * record commits, so a redelivery is a duplicate and runs nothing
 * either; it is acked and counted (inbox_stats.skipped), never an error
 * nor a dead letter. Errors: INVALID (a bad pointer or operator, no
 * value or more than INBOX_DECL_MAX_PARAMS, LAST_STEP before any step),
 * NOMEM. */
INBOX_API int inbox_decl_add_when(inbox_decl *d, inbox_decl_scope scope,
                                  const inbox_decl_when *w, char *why,
                                  size_t len);
/* Name the result the declaration stores for every message it applies
 * (stored results, inbox_txn_set_result(): content type
 * "application/json"; a duplicate of the message gets it back). The
 * template is JSON text, any value, rendered per message into compact
 * JSON in the template's key order; objects and arrays are kept as
 * written, every string is a leaf:
 *   "/json/pointer"    the message's value there, with its JSON type;
 *   "#N"               the first row SQL step N (1-based, counting SQL
 *                      and upsert steps as added) returned — RETURNING —
 *                      as an object {column: text}, SQL NULL as null;
 *                      null when the step returned no row;
 *   "#N.column"        that row's column as text (or null);
 *   "#N.column:json"   that column's text read as JSON (a number, an
 *                      object built by the SQL: row_to_json(...));
 *   "{key}"            the message's inbox key;
 *   "=text"            the literal string "text".
 * E.g. "{"invoice": "#1.id:json", "order": "/data/orderId"}", or
 * ""#1"" for the returned row itself. Numbers, booleans and null in
 * the template are refused (write "=..." for a literal). A step named
 * by "#N" must be an SQL step added before this call; it then runs at
 * once (a query), not deferred with the batch's other statements. At
 * run time: a pointer missing from the message, a column the row does
 * not have, a ":json" column that is not JSON, a text that is not UTF-8,
 * a result over the consumer's max_result_bytes — REJECT (a dead letter
 * with the reason, nothing stored). Once per declaration. Errors:
 * INVALID (a bad template or leaf, a step that does not exist or is an
 * upsert, declared twice), NOMEM. */
INBOX_API int inbox_decl_set_result(inbox_decl *d, const char *result_template,
                                    char *why, size_t len);

/* Make `st` ready for the declaration: run the setup SQL, then check
 * every SQL and upsert step against the database without running it
 * (PostgreSQL PREPARE, SQLite sqlite3_prepare_v2: missing tables or
 * columns, syntax errors). *step (may be NULL) tells what failed: 0 the
 * setup SQL, N the Nth SQL or upsert step. Call it before the consumer
 * runs, once per store (setup is idempotent if its SQL is).
 * Errors: STORE (the database refused the SQL: the reason, e.g. "the
 * database rejects the SQL: no such table: invoicez"), INVALID (a bad
 * upsert table name), TRANSIENT (the database went away meanwhile: try
 * again). */
INBOX_API int inbox_decl_prepare(const inbox_decl *d, inbox_store *st,
                                 int *step, char *err, size_t len);

/* The handler (an inbox_handler_fn): `payload` is the const inbox_decl *.
 * Runs the steps in order in `t`; the verdicts are described above. */
INBOX_API int inbox_decl_handler(inbox_txn *t, const inbox_msg *m,
                                 void *payload);

/* Counts of the declaration's steps (SQL and upserts; outbox steps). */
INBOX_API int inbox_decl_steps(const inbox_decl *d);
INBOX_API int inbox_decl_outbox_steps(const inbox_decl *d);

#ifdef __cplusplus
}
#endif

#endif /* INBOX_DECL_H */
