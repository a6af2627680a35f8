/*
 * libinbox — Prometheus text exposition (format 0.0.4) of consumers'
 * counters and of what their stores hold, for a /metrics endpoint.
 *
 * The caller gathers, per consumer, a snapshot of its counters
 * (inbox_consumer_stats, taken on the consumer's own thread), of its
 * outbox dispatcher's counters when the process runs one
 * (inbox_dispatcher_stats, on the dispatcher's thread) and, when it can,
 * the store's numbers (inbox_admin_stats_read); this renders them.
 * Every sample is labelled consumer="NAME" and nothing else (the histogram
 * adds le): never a key, an id or a payload. Families (all prefixed
 * inbox_):
 *
 *   counters, since the process started:
 *     messages_total applied_total duplicates_total
 *     fingerprint_conflicts_total stale_total retries_total
 *     dead_lettered_total lease_takeovers_total in_progress_total
 *     fenced_total batches_total batch_retries_total
 *   histogram: processing_duration_seconds (claim to commit, per message)
 *   counters of the consumer's outbox dispatcher, since it was opened:
 *     outbox_attempts_total outbox_done_total outbox_retries_total
 *     outbox_unknown_outcomes_total outbox_reconciliations_total
 *     outbox_reconciled_found_total outbox_reconciled_not_found_total
 *     outbox_dead_letters_total outbox_lease_takeovers_total
 *     outbox_fenced_total
 *   gauges, from the store (read with inbox_admin_stats_estimate: past
 *   INBOX_METRICS_EXACT_BELOW records some are estimates, and
 *   records_estimated is 1; each HELP text says which are exact):
 *     records (inbox size) records_estimated records_processing
 *     records_failed records_dead
 *     records_expired oldest_record_age_seconds retention_seconds
 *     retention_headroom_seconds dead_letters dead_letters_pending
 *     outbox_pending outbox_oldest_age_seconds (when there is an outbox)
 *     store_up (1 if the last read of the store worked)
 *   gauges, from the caller: consumer_up (the consumer is running),
 *     source_lag (messages), source_lag_bytes (JSONL)
 *   inbox_build_info{version="..."} 1
 */
#ifndef INBOX_METRICS_H
#define INBOX_METRICS_H

#include "admin.h"
#include "inbox.h"
#include "outbox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The exact_below a /metrics endpoint reads the store with
 * (inbox_admin_stats_estimate, inbox_admin_generations_estimate): the
 * HELP texts name it. */
#define INBOX_METRICS_EXACT_BELOW 100000

/* HTTP Content-Type of the exposition. */
#define INBOX_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Versioned (<inbox/inbox.h>, "Versioned structs"): start every element
 * from INBOX_METRICS_CONSUMER_INIT; the array is read by its first
 * element's version, and every element must carry the same. The structs
 * it points to are versioned too, each read by its own version. */
typedef struct inbox_metrics_consumer {
	unsigned version; /* INBOX_METRICS_CONSUMER_VERSION */
	const char *name; /* required */
	/* Counters; NULL: the counter and histogram samples are left out. */
	const inbox_stats *counters;
	/* The store's numbers; NULL when they could not be read (the gauges
	 * are left out and store_up is 0). */
	const inbox_admin_stats *store;
	/* 1 running, 0 stopped, -1 unknown (consumer_up left out). */
	int running;
	/* Counters of the dispatcher performing this consumer's outbox rows
	 * (one dispatcher per consumer: inbox_dispatcher_options.consumer);
	 * NULL: the outbox_*_total families are left out. */
	const inbox_outbox_stats *outbox;
	/* The store's inbox generations (PostgreSQL); NULL, or count <= 0:
	 * the inbox_generation* families are left out. */
	const inbox_admin_generations *generations;
	/* ---- version 2 ---- */
	/* What of store and generations is an estimate: the bits of
	 * inbox_admin_stats_estimate()'s and
	 * inbox_admin_generations_estimate()'s *estimated (0: all exact).
	 * Shown as inbox_records_estimated (0 or 1) when store is there. */
	unsigned estimated;
	/* The source's lag (inbox_source_lag()): messages behind, and bytes
	 * behind (JSONL); < 0: the family is left out. */
	int64_t lag;
	int64_t lag_bytes;
} inbox_metrics_consumer;

#define INBOX_METRICS_CONSUMER_VERSION 2
#define INBOX_METRICS_CONSUMER_INIT                                            \
	{                                                                      \
		INBOX_METRICS_CONSUMER_VERSION, NULL, NULL, NULL, -1, NULL,    \
		    NULL, 0, -1, -1                                            \
	}

/* Render the families of the outbox providers (inbox_providers_info)
 * into *out (malloc'ed, NUL-terminated, *len bytes; free() it), to be
 * served after inbox_metrics_render()'s. Every sample is labelled
 * provider="scheme://host:port" (never a path, a query or a user):
 *
 *   gauges: provider_calls_in_flight, provider_breaker_state (0 closed,
 *     1 open, 2 half-open)
 *   counters: provider_calls_total provider_failures_total
 *     provider_breaker_opens_total provider_breaker_trials_total
 *     provider_rejected_total provider_rate_limited_total
 *     provider_retry_after_total
 *
 * ps is read by ps[0].version (as inbox_providers_info() returns it).
 * n = 0 renders nothing (an empty string). Errors: INVALID (also an
 * unknown version), NOMEM. Thread-safe. */
INBOX_API int inbox_metrics_render_providers(char **out, size_t *len,
                                             const inbox_provider_info *ps,
                                             size_t n);

/* Render the process's own families, with Prometheus' standard names
 * (no label), into *out (malloc'ed, NUL-terminated, *len bytes; free()
 * it), read from /proc/self at each call:
 *   process_start_time_seconds     gauge, Unix time the process started
 *   process_resident_memory_bytes  gauge, resident set size
 *   process_virtual_memory_bytes   gauge
 *   process_open_fds               gauge, open file descriptors
 *   process_max_fds                gauge, the soft limit
 *   process_cpu_seconds_total      counter, user + system CPU time
 * A family whose source cannot be read (not Linux) is left out. Errors:
 * INVALID, NOMEM. Thread-safe. */
INBOX_API int inbox_metrics_render_process(char **out, size_t *len);

/* Render the exposition of n consumers into *out (malloc'ed,
 * NUL-terminated, *len bytes; free() it). Names that are not valid UTF-8
 * are rendered with U+FFFD in place of the bad bytes. Errors: INVALID
 * (also a version this library does not know, in cs or a struct it
 * points to: the reason is the log event "bad_version"), NOMEM.
 * Thread-safe (touches only its arguments). */
INBOX_API int inbox_metrics_render(char **out, size_t *len,
                                   const inbox_metrics_consumer *cs, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* INBOX_METRICS_H */
