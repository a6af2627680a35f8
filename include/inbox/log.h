/*
 * libinbox — where the library's diagnostics go.
 *
 * The library never writes to stdout or stderr. What it notices while it
 * runs and reports nowhere else (a poll it retries, a batch it retries, an
 * ack the broker refused, a JSONL input that restarts at its first line, a
 * Kafka rebalance, librdkafka's own messages, PostgreSQL notices) becomes a
 * log event passed to the one callback the program installs with
 * inbox_log_set(), the way SQLite's SQLITE_CONFIG_LOG and libgit2's
 * git_trace_set() work. With no callback installed (the default) events
 * are dropped and nothing is formatted.
 *
 * The inbox command installs a writer of JSON lines on stderr:
 *   {"ts":"2024-05-01T12:00:00.123Z","level":"warn","consumer":"billing",
 *    "event":"poll_failed","error":"kafka: ..."}
 * i.e. ts, level, consumer (left out for process-level events), event,
 * then the members of `fields` in order.
 *
 * Included by <inbox/inbox.h>.
 */
#ifndef INBOX_LOG_H
#define INBOX_LOG_H

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Severity, in increasing order (values never change). */
typedef enum inbox_log_level {
	INBOX_LOG_DEBUG = 0, /* per message; off in production */
	INBOX_LOG_INFO = 1,  /* per batch, lifecycle, rebalances */
	INBOX_LOG_WARN = 2,  /* retried or worked around; nothing lost */
	INBOX_LOG_ERROR = 3  /* something stopped */
} inbox_log_level;

/*
 * One event.
 *   level     the event's severity, >= the installed minimum.
 *   consumer  the consumer's name, or NULL for an event that belongs to
 *             the process rather than to one consumer. Never "".
 *   event     its name: a short [a-z0-9_] identifier, never NULL
 *             ("poll_failed", "batch_failed", "ack_failed",
 *             "source_warning", "jsonl_restart", "kafka_member",
 *             "kafka_assigned", "kafka_revoked", "kafka_log",
 *             "pg_notice", ...). The set only grows.
 *   fields    the event's other members as the text of one JSON object,
 *             never NULL: "{}" when there are none, otherwise e.g.
 *             {"error":"...","retry_in_ms":200}. It is valid JSON
 *             (strings escaped; bytes from brokers and databases are
 *             passed as they came, normally UTF-8), so a binding can
 *             hand it to JSON.parse / json.loads, and a JSON-lines writer
 *             can splice its members into a line by dropping the braces.
 *             Never holds a message payload or a password.
 *   payload   the pointer given to inbox_log_set().
 * The strings are borrowed: valid only during the call; copy what you
 * keep.
 *
 * Called synchronously, on the thread that noticed the event: a consumer's
 * thread inside inbox_run() or a source/consumer call, an outbox
 * dispatcher's thread, or a client library's own thread (librdkafka logs
 * from its internal threads). Several threads may call it at once, so it
 * must be thread-safe itself; it should be quick (a consumer waits for
 * it). It must not call back into libinbox: an inbox_log_set() from
 * inside it fails with INBOX_ERR_STATE, and events the thread raises
 * meanwhile are dropped.
 */
typedef void (*inbox_log_fn)(inbox_log_level level, const char *consumer,
                             const char *event, const char *fields,
                             void *payload);

/*
 * Install fn (NULL: none; events are dropped) receiving every event at
 * min_level or above, with payload passed back. Replaces any previous
 * callback. Process-wide: one callback for every handle.
 *
 * Thread-safe: may be called at any time from any thread, also while
 * consumers, dispatchers and broker threads are logging. When it returns,
 * no thread is still inside the previous callback and none will enter it
 * again, so the previous payload may be freed (an addon may release its
 * thread-safe function). Calls into the callback in flight finish first;
 * inbox_log_set() waits for them.
 *
 * Returns INBOX_OK, INBOX_ERR_INVALID when min_level is not an
 * inbox_log_level, INBOX_ERR_STATE when called from inside the callback.
 */
INBOX_API int inbox_log_set(inbox_log_fn fn, inbox_log_level min_level,
                            void *payload);

/* "debug", "info", "warn", "error"; NULL for any other value. Static. */
INBOX_API const char *inbox_log_level_name(int level);

/* The level named `name` (exactly one of the four names above) into *out.
 * INBOX_ERR_INVALID (and *out untouched) for NULL or any other text. */
INBOX_API int inbox_log_level_parse(const char *name, inbox_log_level *out);

#ifdef __cplusplus
}
#endif

#endif /* INBOX_LOG_H */
