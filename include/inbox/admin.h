/*
 * libinbox — the operator's view of a store: what a consumer's inbox and
 * dead letters hold, one record in detail, dead letters listed, shown,
 * replayed through the consumer or dropped, and purges that report their
 * progress.
 *
 * Everything here runs outside any inbox transaction, through the store's
 * generic statements (inbox_store_exec / inbox_store_query), on the tables
 * of the store's prefix and schema. Nothing here changes what a consumer
 * decides: replays go through inbox_consumer_process() and its dedup, and
 * purges through inbox_store_purge(), which never deletes inside the
 * window.
 *
 * Times are milliseconds since the Unix epoch (0 = none), read from the
 * database's clock (PostgreSQL: now() of the server; SQLite: the local
 * clock, which is the one the SQLite store writes with). Ages are measured
 * against that same clock.
 *
 * Like every handle, a store is not thread-safe: call these from the
 * thread that owns it. Errors are the inbox_err codes; the detail is on
 * the store (inbox_store_errmsg), never with a password.
 */
#ifndef INBOX_ADMIN_H
#define INBOX_ADMIN_H

#include "inbox.h"
#include "outbox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Per-consumer numbers                                                 */
/* ------------------------------------------------------------------ */

/* Versioned (<inbox/inbox.h>, "Versioned structs"): set `version`
 * (INBOX_ADMIN_STATS_INIT) before the call. */
typedef struct inbox_admin_stats {
	unsigned version; /* INBOX_ADMIN_STATS_VERSION */
	/* Inbox records of the consumer, in total and by status. */
	int64_t records;
	int64_t completed;
	int64_t processing; /* held under a lease right now (or abandoned) */
	int64_t failed;     /* waiting for a redelivery to retry */
	int64_t dead;
	/* Age of the oldest processed record (completed or dead: the ones a
	 * purge may delete), -1 when there is none. */
	int64_t oldest_age_ms;
	/* Age of the oldest record of any status (created_at), -1 if none. */
	int64_t oldest_created_age_ms;
	/* The window the consumer registered (seconds); 0 when the consumer
	 * never opened on this store. */
	int64_t retention_seconds;
	/* Records older than the window: what a purge would delete now
	 * (0 when no window is registered). */
	int64_t expired;
	/* Dead letters of the consumer: all, not yet replayed, fingerprint
	 * conflicts among them, replayed ones. */
	int64_t dead_letters;
	int64_t dead_letters_pending;
	int64_t conflicts;
	int64_t replayed;
	/* Outbox intents not yet executed and the age of the oldest; -1 when
	 * the store has no outbox (yet). */
	int64_t outbox_pending;
	int64_t outbox_oldest_age_ms;
} inbox_admin_stats;

#define INBOX_ADMIN_STATS_VERSION 1
#define INBOX_ADMIN_STATS_INIT                                                 \
	{                                                                      \
		.version = INBOX_ADMIN_STATS_VERSION                           \
	}

/* Change the retention window stored for `consumer` (required) to
 * `seconds` (> 0) on purpose, registering the consumer if it never ran
 * here; *previous (may be NULL) gets the window it had (0: none). The
 * window is a promise: a consumer opened with another one is refused
 * (INBOX_ERR_INVALID, naming both), so every process of the consumer
 * must be given the new one; a purge never deletes inside the stored
 * window. Logged (event "retention_changed"). Errors: INVALID, STORE,
 * TRANSIENT, STATE (a transaction is open). */
INBOX_API int inbox_admin_set_retention(inbox_store *st, const char *consumer,
                                        int64_t seconds, int64_t *previous);

/* Read the numbers of `consumer` (required) into the fields of
 * out->version. Errors: INVALID (also an unknown version), STORE,
 * TRANSIENT, STATE (a transaction is open on the store), NOMEM. */
INBOX_API int inbox_admin_stats_read(inbox_store *st, const char *consumer,
                                     inbox_admin_stats *out);

/* The inbox's generations (PostgreSQL: see inbox_store_seal()); they are
 * the store's, shared by its consumers. */
typedef struct inbox_admin_generations {
	unsigned version; /* INBOX_ADMIN_GENERATIONS_VERSION */
	/* Generations, the newest included; 0: the store keeps one table
	 * and no generations (SQLite); -1: not readable (not migrated). */
	int64_t count;
	int64_t sealed;       /* of which sealed */
	int64_t unfiltered;   /* sealed without a filter yet: every new key is
	                         looked up in them (the next seal builds it) */
	int64_t sealed_keys;  /* keys the sealed generations' filters hold */
	int64_t filter_bytes; /* what every consumer process keeps in memory */
	int64_t newest;       /* the newest generation's number */
	int64_t newest_records; /* its records, all consumers */
	int64_t newest_age_ms;  /* since it was opened */
} inbox_admin_generations;

#define INBOX_ADMIN_GENERATIONS_VERSION 1
#define INBOX_ADMIN_GENERATIONS_INIT                                           \
	{                                                                      \
		.version = INBOX_ADMIN_GENERATIONS_VERSION                     \
	}

/* Read the generations of the store (out->version set, as above).
 * INBOX_OK (count -1 when they cannot be read), or STATE (a transaction
 * is open), INVALID (also an unknown version). */
INBOX_API int inbox_admin_generations_read(inbox_store *st,
                                           inbox_admin_generations *out);

/* What inbox_admin_stats_estimate() and
 * inbox_admin_generations_estimate() estimated (bits of *estimated). */
#define INBOX_ADMIN_EST_RECORDS 0x1u /* records, completed and dead */
#define INBOX_ADMIN_EST_EXPIRED 0x2u /* expired */
#define INBOX_ADMIN_EST_NEWEST  0x4u /* generations' newest_records */

/* The numbers of inbox_admin_stats_read() at a cost that does not grow
 * with the inbox, for a /metrics scrape. When the store's planner
 * estimates the consumer's records below `exact_below`, or the store
 * gives no estimates (SQLite), or exact_below <= 0, every number is
 * exact: it is inbox_admin_stats_read(), *estimated 0. Beyond, on
 * PostgreSQL:
 *   - records and dead are the planner's estimates (its statistics,
 *     scaled to the table's current size), completed is records minus
 *     the others: *estimated has INBOX_ADMIN_EST_RECORDS;
 *   - processing and failed are exact (the records without a
 *     processed_at: a range of the (consumer, processed_at) index), as
 *     are oldest_age_ms, the retention window, the dead letters and the
 *     outbox numbers;
 *   - expired is exact up to exact_below records, the planner's estimate
 *     beyond (INBOX_ADMIN_EST_EXPIRED);
 *   - oldest_created_age_ms is the older of the oldest unprocessed
 *     record's and the oldest processed record's creation (a record
 *     created earlier but processed later is not seen).
 * estimated may be NULL. Errors as inbox_admin_stats_read(). */
INBOX_API int inbox_admin_stats_estimate(inbox_store *st, const char *consumer,
                                         int64_t exact_below,
                                         inbox_admin_stats *out,
                                         unsigned *estimated);

/* inbox_admin_generations_read() with newest_records exact up to
 * exact_below (> 0) and the planner's estimate beyond
 * (INBOX_ADMIN_EST_NEWEST in *estimated, which may be NULL). */
INBOX_API int inbox_admin_generations_estimate(inbox_store *st,
                                               int64_t exact_below,
                                               inbox_admin_generations *out,
                                               unsigned *estimated);

/* Retention headroom in milliseconds: the window minus the age of the
 * oldest processed record. Negative when records older than the window
 * are still kept (a purge is due); INT64_MAX when there is nothing to
 * compare (no record, or no registered window, or s NULL or of a version
 * this library does not know). */
INBOX_API int64_t inbox_admin_headroom_ms(const inbox_admin_stats *s);

/* ------------------------------------------------------------------ */
/* One inbox record                                                      */
/* ------------------------------------------------------------------ */

typedef struct inbox_admin_record {
	char *consumer;
	char *key;
	char *status; /* "completed", "processing", "failed", "dead" */
	char *fingerprint;
	char *message_id; /* NULL when the delivery had none */
	int32_t attempts;
	int64_t fence;
	int64_t lease_until_ms; /* 0 = no lease */
	int lease_expired;      /* processing and lease_until is past */
	int64_t created_at_ms;
	int64_t processed_at_ms; /* 0 until completed or dead */
	int64_t updated_at_ms;
	int64_t now_ms; /* the database's clock when it was read */
	/* What the record keeps of its first processing (stored results,
	 * inbox_txn_set_result): the handler's result — result_len bytes,
	 * any bytes, followed by a NUL — or NULL when none was stored; its
	 * content type or NULL; the outcome it was recorded with
	 * ("applied", "stale", "dead_lettered"), or NULL when none was
	 * stored (a completed record without one was applied). */
	char *result;
	size_t result_len;
	char *result_type;
	char *outcome;
	/* The delivery's source position as the source spelled it when the
	 * record was inserted ("orders/0@17"; a byte that is not UTF-8 as
	 * the text \xHH), or NULL: the source gave none, or the record
	 * predates schema version 6. */
	char *position;
} inbox_admin_record;

/* Read the record (consumer, key). *out is malloc'ed: free it with
 * inbox_admin_record_free(). INBOX_ERR_NOTFOUND when there is none (*out
 * NULL). */
INBOX_API int inbox_admin_inspect(inbox_store *st, const char *consumer,
                                  const char *key, inbox_admin_record **out);
INBOX_API void inbox_admin_record_free(inbox_admin_record *r);

/* What happened to a message known by its id or its source position:
 * call fn once per inbox key of `consumer` (required) that message had,
 * each key once, NULL for a dead letter written without a key. Looked
 * up: by `message_id`, the inbox records (a scan of the consumer's
 * records: the message id is not indexed) and the dead letters; by
 * `position` (as the source spells it: "orders.jsonl:42", "orders/0@17",
 * "outbox:ID"), the inbox records (a scan of the consumer's records too:
 * the position the record was inserted with, schema version 6), the dead
 * letters and, for "outbox:ID", that outbox row; a position with bytes
 * that are not UTF-8 is found given as it came or as stored (each such
 * byte as \xHH, inbox_delivery.position). One of the two is required.
 * Return non-zero from fn to stop. *found (may be NULL) counts the keys.
 * Errors: INVALID, STORE, TRANSIENT, NOMEM. */
typedef int (*inbox_admin_key_fn)(const char *key, void *payload);
INBOX_API int inbox_admin_find_keys(inbox_store *st, const char *consumer,
                                    const char *message_id,
                                    const char *position, inbox_admin_key_fn fn,
                                    void *payload, int *found);

/* ------------------------------------------------------------------ */
/* Dead letters                                                          */
/* ------------------------------------------------------------------ */

typedef struct inbox_admin_dead_letter {
	int64_t id;
	char *consumer;
	char *key;        /* NULL: no key could be derived */
	char *message_id; /* or NULL */
	/* The raw payload as it arrived (may be invalid UTF-8 or hold NUL
	 * bytes), NUL-terminated for convenience. NULL in listings, where
	 * only payload_len is filled. */
	char *payload;
	size_t payload_len;
	char *headers;  /* JSON text or NULL */
	char *position; /* source position or NULL */
	int32_t attempts;
	char *reason;
	char *fingerprint;        /* or NULL */
	char *stored_fingerprint; /* conflicts: the one recorded; else NULL */
	int64_t created_at_ms;    /* first seen */
	int64_t replayed_at_ms;   /* 0 = never replayed (or seen again since) */
	/* Deliveries it stands for: a message dead-lettered again (the same
	 * key and bytes, delivered again, by this process or another, or
	 * replayed and failing again) is counted here, never a second dead
	 * letter; and when it was last seen (created_at_ms when once). */
	int64_t deliveries;
	int64_t last_seen_at_ms;
} inbox_admin_dead_letter;

INBOX_API void inbox_admin_dead_letter_free(inbox_admin_dead_letter *dl);

typedef struct inbox_admin_dlq_filter {
	unsigned version;     /* INBOX_ADMIN_DLQ_FILTER_VERSION */
	const char *consumer; /* NULL = every consumer */
	const char *key;      /* NULL = any key */
	int64_t after_id;     /* only ids above this one (paging); 0 = all */
	int limit;            /* at most this many; <= 0 = no limit */
	int pending_only;     /* skip the ones already replayed */
	/* Only dead messages: skip failed outbox effects (position
	 * "outbox:ID"), whose payload is a request body (version >= 2). */
	int messages_only;
	/* Version >= 3: only the resolved ones (replayed, or their outbox
	 * row retried or dropped: replayed_at set) */
	int resolved_only;
	/* only those last seen longer ago than this (seconds); 0 = any */
	int64_t older_than_seconds;
	/* only failed outbox effects (position "outbox:ID") */
	int outbox_only;
} inbox_admin_dlq_filter;

#define INBOX_ADMIN_DLQ_FILTER_VERSION 3
#define INBOX_ADMIN_DLQ_FILTER_INIT                                            \
	{                                                                      \
		INBOX_ADMIN_DLQ_FILTER_VERSION, NULL, NULL, 0, 0, 0, 0, 0, 0,  \
		    0                                                          \
	}

/* Called once per dead letter, in id order. `dl` (payload NULL) is valid
 * during the call only. Return non-zero to stop. */
typedef int (*inbox_admin_dlq_fn)(const inbox_admin_dead_letter *dl,
                                  void *payload);

/* List dead letters matching `f` (NULL = all; f->version 1 to
 * INBOX_ADMIN_DLQ_FILTER_VERSION, else INVALID). */
INBOX_API int inbox_admin_dlq_list(inbox_store *st,
                                   const inbox_admin_dlq_filter *f,
                                   inbox_admin_dlq_fn fn, void *payload);

/* Read dead letter `id` with its payload. *out is malloc'ed (free with
 * inbox_admin_dead_letter_free). `consumer` non-NULL: only if it is that
 * consumer's. INBOX_ERR_NOTFOUND when there is none. */
INBOX_API int inbox_admin_dlq_get(inbox_store *st, int64_t id,
                                  const char *consumer,
                                  inbox_admin_dead_letter **out);

/* Set replayed_at = now. NOTFOUND when there is no such dead letter. */
INBOX_API int inbox_admin_dlq_mark_replayed(inbox_store *st, int64_t id);

/* Delete dead letter `id` (the inbox record is left as it is).
 * NOTFOUND when there is none. */
INBOX_API int inbox_admin_dlq_drop(inbox_store *st, int64_t id);

/* Delete every dead letter matching `f` (NULL is refused: dropping all
 * is asked for with an empty filter, INBOX_ADMIN_DLQ_FILTER_INIT), in id
 * order, one statement each; *dropped (may be NULL) counts them. With
 * `dry_run` nothing is deleted and *dropped is what would be. Logged
 * (event "dead_letters_dropped", per consumer, with the count). Errors:
 * INVALID, STORE, TRANSIENT; *dropped counts what went before. */
INBOX_API int inbox_admin_dlq_drop_matching(inbox_store *st,
                                            const inbox_admin_dlq_filter *f,
                                            int dry_run, int64_t *dropped);

/* Delete the resolved dead letters (replayed_at set: replayed, or their
 * outbox row retried or dropped) of `consumer` (NULL = all) resolved more
 * than `older_than_seconds` (> 0) ago, at most `batch_limit` (<= 0: 1000)
 * per statement, each its own transaction. Pending dead letters are never
 * purged: they wait for an operator. With `dry_run`, *deleted is what
 * would be deleted. Errors: INVALID, STORE, TRANSIENT. */
INBOX_API int inbox_admin_dlq_purge(inbox_store *st, const char *consumer,
                                    int64_t older_than_seconds, int batch_limit,
                                    int dry_run, int64_t *deleted);

/* Replay dead letter `id` through consumer `c`, which must have been
 * opened on `st` and be the dead letter's consumer (else INVALID):
 *   - if the key's inbox record is `dead` (the message was dead-lettered),
 *     it is deleted (only while still dead, in one statement), so the
 *     message can be processed again;
 *   - the stored payload, headers and position are processed with
 *     inbox_consumer_process() (delivery count 1, no timestamp, so the
 *     replay guard does not apply): the usual dedup decides, so a record
 *     that is `completed` gives DUPLICATE (or CONFLICT, dead-lettered
 *     again) and never a second effect;
 *   - unless the outcome is RETRY or IN_PROGRESS, replayed_at is set and
 *     the dead letter is kept; a message dead-lettered again is counted
 *     on this same dead letter (res->dead_letter_id == id), which then
 *     stays pending.
 * *res is the consumer's result (its pointers live until the next call on
 * `c`). On error (rc < 0) the dead letter is not marked and may be
 * replayed again; a record deleted before the failure is simply absent,
 * and the next delivery or replay of the message processes it. */
INBOX_API int inbox_admin_dlq_replay(inbox_store *st, inbox_consumer *c,
                                     int64_t id, inbox_result *res);

/* ------------------------------------------------------------------ */
/* Outbox rows                                                           */
/* ------------------------------------------------------------------ */

/* One outbox row as an operator sees it (include/inbox/outbox.h for the
 * states). Secrets stay out: the URL is redacted (user info and secret
 * parameters "***", inbox_redact_url) and the request headers, which may
 * carry credentials, are never read out. */
typedef struct inbox_admin_outbox_row {
	int64_t id;
	char *consumer;
	char *key; /* the message's inbox key */
	char *step;
	char *idempotency_key; /* sent with every attempt; never changes */
	char *kind;
	char *method;
	char *url;      /* redacted */
	char *provider; /* "scheme://host:port", NULL when not http(s) */
	char *state;    /* "pending", "in_flight", "done", "failed",
	                   "unknown", "dead" */
	int idempotent;
	int reconcilable; /* a reconcile URL is set */
	int32_t attempts;
	int32_t max_attempts; /* 0 = the dispatcher's */
	int32_t reconciliations;
	int64_t fence;
	int last_status; /* HTTP status of the last attempt, 0 = none */
	char *last_error;
	int64_t created_at_ms;
	int64_t updated_at_ms;
	int64_t next_attempt_at_ms;
	int64_t lease_until_ms; /* 0 = no lease */
	int64_t done_at_ms;     /* 0 until done */
	int64_t now_ms;         /* the database's clock when it was read */
	/* inbox_admin_outbox_get only (NULL/0 in listings): the request
	 * body and the response excerpt kept, NUL-terminated. */
	char *body;
	size_t body_len;
	char *response;
	size_t response_len;
} inbox_admin_outbox_row;

INBOX_API void inbox_admin_outbox_row_free(inbox_admin_outbox_row *r);

typedef struct inbox_admin_outbox_filter {
	unsigned version;     /* INBOX_ADMIN_OUTBOX_FILTER_VERSION */
	const char *consumer; /* NULL = every consumer */
	const char *key;      /* NULL = any inbox key */
	/* NULL = any; a provider name ("https://api.pay.example:443") or
	 * any URL of it (inbox_provider_name) */
	const char *provider;
	const char *state;          /* a state name, NULL = any */
	int64_t older_than_seconds; /* created longer ago; 0 = any age */
	int64_t after_id;           /* only ids above (paging); 0 = all */
	int limit;                  /* at most this many; <= 0 = all */
} inbox_admin_outbox_filter;

#define INBOX_ADMIN_OUTBOX_FILTER_VERSION 1
#define INBOX_ADMIN_OUTBOX_FILTER_INIT                                         \
	{                                                                      \
		INBOX_ADMIN_OUTBOX_FILTER_VERSION, NULL, NULL, NULL, NULL, 0,  \
		    0, 0                                                       \
	}

typedef int (*inbox_admin_outbox_fn)(const inbox_admin_outbox_row *r,
                                     void *payload);

/* List the rows matching `f` (NULL = all), in id order; `r` is valid
 * during the call only; return non-zero to stop. Errors: INVALID (an
 * unknown state or filter version, a provider that names none), STORE,
 * TRANSIENT, STATE (no outbox table: not migrated). */
INBOX_API int inbox_admin_outbox_list(inbox_store *st,
                                      const inbox_admin_outbox_filter *f,
                                      inbox_admin_outbox_fn fn, void *payload);

/* Read row `id` (of `consumer` when non-NULL) with its body and response.
 * *out is malloc'ed (inbox_admin_outbox_row_free). NOTFOUND. */
INBOX_API int inbox_admin_outbox_get(inbox_store *st, int64_t id,
                                     const char *consumer,
                                     inbox_admin_outbox_row **out);

/* inbox_admin_outbox_retry flags. */
#define INBOX_ADMIN_RETRY_NOT_PERFORMED                                        \
	1 /* the operator checked with the                                     \
	     provider: not performed */

/* Make row `id` (of `consumer` when non-NULL) due now, its attempts
 * counted from 0 again. Its idempotency key never changes, and the row is
 * changed only if it is still as it was read (its state and fencing
 * token, in one statement): a dispatcher's claim in between wins and the
 * retry answers BUSY.
 *   - pending, failed, unknown: due now, state kept (an unknown outcome
 *     is still reconciled or re-sent with the same key, as before);
 *   - dead: re-armed as `failed` (sent again with the same key) when the
 *     provider is idempotent or the last answer was a 4xx refusal
 *     (certainly not performed), or with INBOX_ADMIN_RETRY_NOT_PERFORMED;
 *     otherwise as `unknown`, so a provider without idempotency is
 *     reconciled before any re-send (and without a reconcile URL it is
 *     dead again, never re-sent blindly). Its pending dead letters are
 *     marked resolved (replayed_at);
 *   - in_flight (a dispatcher holds it) and done: INVALID, unchanged.
 * *from and *to (may be NULL) get the states. Logged (event
 * "outbox_retried"). Errors: NOTFOUND, INVALID, BUSY, STORE, TRANSIENT. */
INBOX_API int inbox_admin_outbox_retry(inbox_store *st, int64_t id,
                                       const char *consumer, int flags,
                                       inbox_outbox_state *from,
                                       inbox_outbox_state *to);

/* Delete row `id` (of `consumer` when non-NULL): its effect will never be
 * performed. Refused (INVALID) for in_flight rows (a call may be under
 * way) and done ones (purged by inbox_admin_outbox_purge: the row is what
 * stops a replayed message from declaring its effect again). The row's
 * pending dead letters are marked resolved. *was (may be NULL) gets its
 * state. Guarded like retry (BUSY when it changed meanwhile). Logged
 * (event "outbox_dropped", warning). Errors: NOTFOUND, INVALID, BUSY,
 * STORE, TRANSIENT. */
INBOX_API int inbox_admin_outbox_drop(inbox_store *st, int64_t id,
                                      const char *consumer,
                                      inbox_outbox_state *was);

/* Delete the done rows of `consumer` (required) done more than
 * `older_than_seconds` ago (<= 0: the consumer's registered retention
 * window), with inbox_outbox_purge(). A window shorter than the
 * registered one is refused (INVALID): a done row is what makes a
 * message replayed inside the window declare nothing twice. Failed,
 * unknown and dead rows are never purged. With `dry_run`, *deleted is
 * what would be deleted. Errors: INVALID (also: no registered window),
 * STORE, TRANSIENT, STATE (no outbox table). */
INBOX_API int inbox_admin_outbox_purge(inbox_store *st, const char *consumer,
                                       int64_t older_than_seconds,
                                       int batch_limit, int dry_run,
                                       int64_t *deleted);

/* ------------------------------------------------------------------ */
/* Purge with progress                                                   */
/* ------------------------------------------------------------------ */

/* Progress of a purge: `done` rows deleted (or counted) of about `total`
 * (the count when it started; records expiring meanwhile may push done
 * past it). */
typedef void (*inbox_admin_progress_fn)(int64_t done, int64_t total,
                                        void *payload);

/* inbox_store_purge() of one consumer (required) in up to a hundred
 * steps, oldest records first, calling `fn` (may be NULL) after each
 * step. Each step is an inbox_store_purge() call (statements of at most
 * `batch_limit` rows, default 1000 when <= 0) with a window at least
 * `retention_seconds` (<= 0: the registered window; a window shorter than
 * the registered one is refused with INVALID), so nothing inside the
 * window is ever deleted and a concurrent consumer waits at most one
 * statement. With `dry_run`, *deleted is what would be deleted. Errors:
 * those of inbox_store_purge (BUSY when another purger holds the
 * PostgreSQL purge lock); *deleted counts what was deleted before. */
INBOX_API int inbox_admin_purge(inbox_store *st, const char *consumer,
                                int64_t retention_seconds, int batch_limit,
                                int dry_run, inbox_admin_progress_fn fn,
                                void *payload, int64_t *deleted);

#ifdef __cplusplus
}
#endif

#endif /* INBOX_ADMIN_H */
