/*
 * libinbox — the source backend interface, for backend authors.
 *
 * A source backend fills an inbox_source_vtable and is registered by URL
 * scheme. The vtable only grows at the end. All slots are mandatory.
 *
 * Versions (docs/abi.md): the vtable's `version` is the layout of
 * everything this interface passes (the vtable itself and struct
 * inbox_source); a change to either is a new vtable version. The core
 * checks the public structs a caller hands over (options, results)
 * before a backend sees them: a backend gets them in this library's
 * layout. A refused delivery carries its reason in
 * inbox_delivery.refused (<inbox/inbox.h>), its id NULL. A backend's
 * poll zeroes each delivery it fills ((inbox_delivery){0}); the framework
 * writes the caller's `version` into it afterwards.
 *
 * The poll/settle contract is kept by the framework (the library's core),
 * not by the backends: every call goes through inbox_source_poll and
 * inbox_source_settle, which check the order (one batch in hand at a
 * time), check that a settle names exactly the batch of the last poll,
 * and answer INBOX_ERR_STATE / INBOX_ERR_INVALID themselves, without
 * calling the backend (a mismatched settle calls it with res NULL: the
 * whole batch is redelivered). The framework also owns every delivery's
 * `source_token` (a number unique in the process, so a delivery of
 * another batch or another handle is recognised); a backend's own
 * bookkeeping is by position in the batch. So a backend's poll and settle
 * only do the broker's work:
 *   - poll is called only when no batch is in hand; it hands out at most
 *     `max` deliveries (*n is 0 and *eof 0 on entry). On an error it
 *     hands out nothing (*n = 0): what it took stays the broker's.
 *   - settle is called once for each poll that handed out n > 0
 *     deliveries, with that n; res is NULL (redeliver them all) or holds
 *     the result of the i-th delivery of that poll at res[i].
 *
 * Version 2: settle lost its `d` argument and the backends'
 * source_token, the contract moved into the framework. A version 1 vtable
 * is refused by inbox_source_register.
 *
 * Version 3: the optional `lag` slot, and the framework's lag cache at
 * the end of struct inbox_source (so a version 2 backend, whose struct
 * ends before it, still registers: its lag is never asked for nor
 * cached, inbox_source_lag() says unknown).
 *
 * Version 4 (this one): the optional `check` slot (inbox_source_check(),
 * what `inbox check` asks). struct inbox_source is as in version 3; a
 * version 2 or 3 backend's URLs are checked at open only.
 */
#ifndef INBOX_SYS_SOURCE_H
#define INBOX_SYS_SOURCE_H

#include "../source.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct inbox_source_vtable inbox_source_vtable;

/* The common part of every source; a backend's struct embeds it first. */
struct inbox_source {
	const inbox_source_vtable *vt;
	inbox_source_options opts; /* copied at open; strings borrowed */
	char errmsg[512];          /* never contains a password */
	/* The URL's secrets (set by inbox_source_open after open, freed by
	 * inbox_source_close): what inbox__source_seterr scrubs from every
	 * message, the client library's own texts included. A backend never
	 * touches it. */
	struct inbox__secrets *secrets;
	/* The batch in hand, kept by the framework (a backend never touches
	 * it): how many deliveries the last poll handed out and not yet
	 * settled (0: none), and the source_token of the first of them (the
	 * others follow it by one). */
	size_t batch_n;
	uint64_t batch_token;
	/* ---- version 3 ---- */
	/* The lag cache, kept by the framework (a backend never touches
	 * it): what the lag slot said last (-1: unknown), written by the
	 * polling thread, read by any (atomic), and when it answered
	 * (monotonic milliseconds, 0: never). A backend allocates its
	 * struct zeroed (calloc), as batch_n needs already. */
	int64_t lag_messages;
	int64_t lag_bytes;
	int64_t lag_at_ms;
};

/* 2: the framework keeps the contract; 3: + lag, client_version and
 * alias (all optional); 4: + check (optional). Versions 2 to 4
 * register. */
#define INBOX_SOURCE_VTABLE_VERSION 4
/* How often the framework asks a backend's lag slot, at most (seconds). */
#define INBOX_SOURCE_LAG_EVERY_S 2.0

struct inbox_source_vtable {
	unsigned version;   /* INBOX_SOURCE_VTABLE_VERSION */
	const char *scheme; /* "jsonl", "kafka", ... */

	/* Parse the URL, connect. Set *out even on failure when allocated.
	 * The common part's `opts` is filled in by the caller only after open
	 * returns: use the `opts` argument here. */
	int (*open)(inbox_source **out, const char *url,
	            const inbox_source_options *opts);
	void (*close)(inbox_source *src);
	/* See inbox_source_poll and the contract above: called with no
	 * batch in hand; need not set source_token. */
	int (*poll)(inbox_source *src, inbox_delivery *out, size_t max,
	            size_t *n, int timeout_ms, int *eof);
	/* See inbox_source_settle and the contract above: n is the size of
	 * the batch in hand (> 0), res NULL or its n results in poll order. */
	int (*settle)(inbox_source *src, const inbox_result *res, size_t n);

	/* ---- version 3 ---- */

	/* Optional (NULL: the lag is unknown). How far the consumer is
	 * behind the source: *messages, the messages the broker holds that
	 * this handle has not taken yet (as the broker counts them: see
	 * inbox_source_lag()), and *bytes, for a source that counts bytes
	 * (JSONL: bytes past the position), each -1 when unknown (both are
	 * -1 on entry). Called by the framework from inside
	 * inbox_source_poll, on the polling thread, with no batch in hand,
	 * at most every INBOX_SOURCE_LAG_EVERY_S seconds: it may ask the
	 * broker (one round trip, with a short timeout), never wait for
	 * messages, and must leave the consumption as it was. < 0 on
	 * failure (the lag becomes unknown; the poll goes on, nothing is
	 * reported as the poll's error). */
	int (*lag)(inbox_source *src, int64_t *messages, int64_t *bytes);
	/* Optional. The client library and its run-time version
	 * ("librdkafka 2.0.2"), snprintf-style into out (len bytes); what
	 * inbox --version prints. NULL: none (JSONL). */
	int (*client_version)(char *out, size_t len);
	/* Optional. A second scheme this source opens (its TLS spelling:
	 * "amqps", "rediss", "https"); it reads the scheme again from the
	 * URL. */
	const char *alias;

	/* ---- version 4 ---- */

	/* Optional. open without its connection: the handle made and the
	 * URL parsed as open does (a file the URL names that open reads,
	 * such as a secret file, read), nothing connected to, listened on
	 * or subscribed. Returns and sets *out as open does, the reason on
	 * the handle; the framework closes the handle with close right
	 * after (inbox_source_check()), so close takes it as it takes one
	 * whose open failed after the parse. A backend's open is best its
	 * check followed by its connection. NULL: the URL is checked by
	 * open only. */
	int (*check)(inbox_source **out, const char *url,
	             const inbox_source_options *opts);
};

/* INBOX_ERR_INVALID: a slot missing, a version other than 2 to
 * INBOX_SOURCE_VTABLE_VERSION, a scheme taken, the registry full. */
INBOX_API int inbox_source_register(const inbox_source_vtable *vt);
/* The scheme of the i-th registered source (the built-in ones first), or
 * NULL past the last ("jsonl", "kafka", ...; static strings). */
INBOX_API const char *inbox_source_scheme(size_t i);
/* The client library of the i-th registered source and its run-time
 * version, as inbox_store_client_version(): its length, 0 ("") for a
 * source that names none, INBOX_ERR_NOTFOUND past the last. */
INBOX_API int inbox_source_client_version(size_t i, char *out, size_t len);
/* 1 if a registered source takes url's scheme (before ':'), else 0;
 * nothing is opened or checked beyond it. The TLS spellings amqps and
 * rediss go to the built-in amqp and redis sources (which read the
 * scheme: the Redis source refuses rediss with its reason). */
INBOX_API int inbox_source_known_url(const char *url);
/* Set src's errmsg, scrubbed of the URL's secrets (every spelling of a
 * password, token or key the URL holds; see inbox_redact_url), so a
 * backend may pass on whatever its client library says. What open writes
 * before the handle has its secrets is scrubbed by inbox_source_open. */
INBOX_API void inbox_source_seterr(inbox_source *src, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Its name before 0.1 (source compatibility only). */
#define inbox__source_seterr inbox_source_seterr

#ifdef __cplusplus
}
#endif

#endif
