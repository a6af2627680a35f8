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
 * inbox_delivery.refused (<inbox/inbox.h>), its id NULL.
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
};

#define INBOX_SOURCE_VTABLE_VERSION 1

struct inbox_source_vtable {
	unsigned version;   /* INBOX_SOURCE_VTABLE_VERSION */
	const char *scheme; /* "jsonl", "kafka", ... */

	/* Parse the URL, connect. Set *out even on failure when allocated.
	 * The common part's `opts` is filled in by the caller only after open
	 * returns: use the `opts` argument here. */
	int (*open)(inbox_source **out, const char *url,
	            const inbox_source_options *opts);
	void (*close)(inbox_source *src);
	/* See inbox_source_poll. */
	int (*poll)(inbox_source *src, inbox_delivery *out, size_t max,
	            size_t *n, int timeout_ms, int *eof);
	/* See inbox_source_settle. */
	int (*settle)(inbox_source *src, const inbox_delivery *d,
	              const inbox_result *res, size_t n);
};

INBOX_API int inbox_source_register(const inbox_source_vtable *vt);
/* The scheme of the i-th registered source (the built-in ones first), or
 * NULL past the last ("jsonl", "kafka", ...; static strings). */
INBOX_API const char *inbox_source_scheme(size_t i);
/* 1 if a registered source takes url's scheme (before ':'), else 0;
 * nothing is opened or checked beyond it. */
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
