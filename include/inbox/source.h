/*
 * libinbox — sources (brokers and files) and the runner that drives a
 * consumer from one.
 *
 * A source is chosen by URL scheme:
 *   jsonl:PATH[?follow=1&checkpoint=FILE&from=beginning]
 *                       one JSON message per line; jsonl:- is stdin
 *   kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=G[&id_header=H&instance_id=ID]
 *   amqp://[USER[:PASS]@]HOST[:PORT]/[VHOST/]QUEUE[?prefetch=&retry=ttl|requeue]
 *   redis://[[USER]:PASS@]HOST[:PORT][/DB]/STREAM?group=G[&claim_idle=]
 *   nats://[USER:PASS@]HOST:PORT/STREAM?durable=D[&ack_wait=]
 *   http[s]://HOST:PORT/PATH?mode=api|standard|github|stripe[&...]
 *                       an HTTP ingress: each request a message, its
 *                       answer the ack (docs/http.md)
 * docs/config.md (sources) lists every backend's parameters, and
 * docs/reliability.md how each maps "ack", "retry later" and "dead
 * letter" onto its broker.
 *
 * The runner loops: poll a batch -> inbox_consumer_process_batch() (one
 * transaction) -> settle the batch with the source: ack what may be acked,
 * arrange redelivery of the rest. Never ack before the commit.
 */
#ifndef INBOX_SOURCE_H
#define INBOX_SOURCE_H

#include <signal.h>

#include "inbox.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct inbox_source inbox_source;

typedef struct inbox_source_options {
	unsigned version; /* INBOX_SOURCE_OPTIONS_VERSION */
	/* Consumer name; the default consumer group / durable name and the
	 * default checkpoint suffix. Required. */
	const char *consumer;
	/* Largest batch poll() will return (prefetch is sized to it). */
	size_t max_batch;
	/* Delay before a RETRY or IN_PROGRESS message is delivered again. */
	int retry_delay_ms;
	/* Messages larger than this are still delivered, truncated to it +
	 * 1 byte and refused (inbox_delivery.refused) with their real size,
	 * so the consumer dead-letters them saying it. */
	size_t max_payload;
} inbox_source_options;

#define INBOX_SOURCE_OPTIONS_VERSION 1
#define INBOX_SOURCE_OPTIONS_INIT                                              \
	{                                                                      \
		INBOX_SOURCE_OPTIONS_VERSION, NULL, 100, 1000, 1024 * 1024     \
	}

/* Open a source by URL. Like inbox_store_open, *out may be set on failure
 * so the error can be read; close it. A SCHEME://USERINFO@... URL whose
 * user info the client libraries would split differently (a raw '@', '/',
 * '?', '#', '[' or ']' in it, a second raw '@' anywhere) is refused with
 * INBOX_ERR_URL. Errors: URL, CONNECT, SOURCE, IO. */
/* opts->version 0 or newer than INBOX_SOURCE_OPTIONS_VERSION:
 * INBOX_ERR_INVALID (the log event "bad_version" says why). */
INBOX_API int inbox_source_open(inbox_source **out, const char *url,
                                const inbox_source_options *opts);
INBOX_API void inbox_source_close(inbox_source *src);

/* Check url as inbox_source_open would parse it, connecting to nothing
 * (what `inbox check` asks of every consumer's source): INBOX_OK, or the
 * error open would give for this URL (URL: an unknown scheme, an unknown
 * or bad parameter, a missing part; IO: a file the URL names that open
 * reads, such as a webhook's secret_file), the reason in why (len bytes,
 * "" when none; never a secret of the URL). A source registered with a
 * vtable older than version 4 (<inbox/sys/source.h>) is checked by its
 * scheme only: INBOX_OK. opts as for open, checked alike (its version,
 * consumer and max_batch: INBOX_ERR_INVALID); the consumer names what
 * the URL leaves to it (a group or durable name). why may be NULL. */
INBOX_API int inbox_source_check(const char *url,
                                 const inbox_source_options *opts, char *why,
                                 size_t len);

/* Wait up to timeout_ms for messages; fill up to `max` deliveries. The
 * deliveries and everything they point to stay valid until the next
 * settle() or close(). *n = 0 on timeout. Returns INBOX_OK, or an error
 * (the source may recover on a later call: a lost broker connection is
 * retried inside); on an error nothing is handed out (*n = 0). Reaching
 * the end of a non-following file returns INBOX_OK with *n = 0 and sets
 * *eof (may be NULL) to 1. Each delivery's source_token is set to a
 * number unique in the process, by which settle() knows the batch.
 * INBOX_ERR_STATE: the batch of the last poll is not settled yet.
 * out[0].version gives the array's layout (INBOX_DELIVERY_INIT); every
 * delivery handed out gets it. An unknown one: INBOX_ERR_INVALID,
 * nothing polled. */
INBOX_API int inbox_source_poll(inbox_source *src, inbox_delivery *out,
                                size_t max, size_t *n, int timeout_ms,
                                int *eof);

/* After the batch's transaction committed: for each delivery of the last
 * poll, ack it if inbox_outcome_ackable(res[i].outcome), else arrange its
 * redelivery after retry_delay_ms. `res` NULL means the transaction failed:
 * redeliver them all. Every polled batch must be settled, whole and in
 * the order polled (`d` and `n` as poll gave them), before the next poll;
 * settling an empty poll (n = 0) is a no-op.
 * Errors kept the same way by every source:
 *   INBOX_ERR_STATE    no batch in hand (settle without a poll, twice,
 *                      or after an empty poll with n > 0); nothing done.
 *   INBOX_ERR_INVALID  d/n are not the batch of the last poll (another
 *                      batch's or handle's deliveries, a part, another
 *                      order): nothing is acked, the whole batch in hand
 *                      is redelivered, and the batch is settled.
 * Otherwise the source's own errors (SOURCE, NOMEM): the batch is settled
 * all the same (what could not be acked comes again). */
INBOX_API int inbox_source_settle(inbox_source *src, const inbox_delivery *d,
                                  const inbox_result *res, size_t n);

/* The last error's message ("" if none); never shows a secret of the URL
 * (see inbox_redact_url), in any spelling, even where the client library
 * wrote the text. Valid until the next call on the handle. */
INBOX_API const char *inbox_source_errmsg(const inbox_source *src);

/* How far the consumer of src is behind its source, as the source last
 * told it: *messages, the messages the broker holds that the handle has
 * not taken yet, and *bytes (JSONL: bytes of the file past the position);
 * -1 each when unknown (a source that cannot tell, or not asked yet).
 * What each source counts:
 *   kafka  high watermark minus position, summed over the partitions
 *          assigned to this member (the watermarks the fetcher last saw)
 *   redis  the group's lag (XINFO GROUPS, Redis >= 7.0) plus its
 *          pending entries; pending only on an older server
 *   nats   the JetStream consumer's num_pending plus num_ack_pending
 *   amqp   the queue's ready messages (a passive queue.declare on a
 *          channel of its own)
 *   jsonl  messages unknown; bytes past the position
 * The polling thread refreshes it from inside inbox_source_poll at most
 * every INBOX_SOURCE_LAG_EVERY_S seconds (<inbox/sys/source.h>), so it
 * is that old at most while the source is polled. Either pointer may be
 * NULL. Thread-safe: any thread may call it while another polls, until
 * the handle is closed. INBOX_OK, or INBOX_ERR_INVALID (src NULL). */
INBOX_API int inbox_source_lag(const inbox_source *src, int64_t *messages,
                               int64_t *bytes);

/* ------------------------------------------------------------------ */
/* The runner                                                           */
/* ------------------------------------------------------------------ */

typedef struct inbox_runner_options {
	unsigned version;    /* INBOX_RUNNER_OPTIONS_VERSION */
	size_t batch_size;   /* default 100 */
	int poll_timeout_ms; /* default 200 */
	/* Exit when a non-following source reaches its end (default 1). */
	int exit_at_eof;
	/* Backoff after a failed batch: starts here, doubles, capped. */
	int backoff_initial_ms; /* default 100 */
	int backoff_max_ms;     /* default 5000 */
	/* Called after each settled batch (may be NULL). */
	void (*on_batch)(const inbox_delivery *d, const inbox_result *res,
	                 size_t n, void *payload);
	void *payload;
} inbox_runner_options;

#define INBOX_RUNNER_OPTIONS_VERSION 1
#define INBOX_RUNNER_OPTIONS_INIT                                              \
	{                                                                      \
		INBOX_RUNNER_OPTIONS_VERSION, 100, 200, 1, 100, 5000, NULL,    \
		    NULL                                                       \
	}

/* Run until *stop becomes non-zero or the source ends (opts->version 0 or
 * newer than INBOX_RUNNER_OPTIONS_VERSION: INBOX_ERR_INVALID at once, the
 * reason as the log event "bad_version"). *stop is read with
 * an atomic load: set it from a signal handler, or from another thread
 * with an atomic store (__atomic_store_n(stop, 1, __ATOMIC_RELEASE)); a
 * plain assignment from another thread is a data race. When stopping, the
 * batch in hand is finished, committed and settled before returning
 * (drain). Returns INBOX_OK, or the error that
 * made it give up (store schema errors, a source that cannot be reopened);
 * transient failures, out of memory included, are retried with backoff and
 * never lose a message.
 * What it retries or works around is reported as log events (<inbox/log.h>,
 * level warn, the consumer's name): "poll_failed" {"error"},
 * "source_warning" {"error"}, "batch_failed" {"error","retry_in_ms"},
 * "ack_failed" {"error"}. */
INBOX_API int inbox_run(inbox_consumer *c, inbox_source *src,
                        const inbox_runner_options *opts,
                        volatile sig_atomic_t *stop);

#ifdef __cplusplus
}
#endif

#endif
