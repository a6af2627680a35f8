/* The built-in HTTP performer of outbox effects (libcurl), shared by the
 * files of src/effect/. */
#ifndef INBOX_EFFECT_EFFECT_H
#define INBOX_EFFECT_EFFECT_H

#include <inbox/outbox.h>

#include "core/buf.h"

/* Default header carrying the idempotency key. */
#define INBOX__KEY_HEADER "Idempotency-Key"
/* Most of a response kept in memory (the rest is read and dropped). */
#define INBOX__HTTP_BODY_MAX (64 * 1024)

typedef struct inbox__http {
	void *curl; /* CURL * easy handle, reused (connection cache) */
	int64_t connect_timeout_ms;
	int64_t timeout_ms;
	inbox__buf body;  /* response body of the last call, capped */
	size_t body_seen; /* bytes received, including dropped ones */
	char *url;        /* scratch: reconcile URL */
} inbox__http;

/* Initialize libcurl (once per process) and an easy handle. 0 or -1. */
int inbox__http_init(inbox__http *h, int64_t connect_timeout_ms,
                     int64_t timeout_ms);
void inbox__http_free(inbox__http *h);

/* Perform the row's request: Idempotency-Key (or the row's key header),
 * connect and total timeouts, no redirects, http/https only; a
 * non-idempotent request always goes on a fresh connection that is not
 * reused, so libcurl never re-sends it by itself. Fills *res; the
 * response stays valid until the next call on h. Returns 0. */
int inbox__http_perform(inbox__http *h, const inbox_outbox_item *it,
                        inbox_effect_result *res);

/* GET the row's reconcile URL ({key} = the idempotency key): 2xx FOUND,
 * 404/410 NOT_FOUND, anything else (including no answer) UNKNOWN, with
 * the reason in why. */
inbox_reconcile_verdict inbox__http_reconcile(inbox__http *h,
                                              const inbox_outbox_item *it,
                                              char *why, size_t len);

/* Classify an HTTP status for a request to an (non-)idempotent provider. */
inbox_effect_outcome inbox__http_classify_status(long status, int idempotent);

#endif
