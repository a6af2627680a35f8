/*
 * libinbox — the http:// and https:// sources' counters, for a /metrics
 * endpoint (docs/http.md). The sources themselves are opened by URL
 * (<inbox/source.h>); this only renders what the open ones counted.
 */
#ifndef INBOX_HTTP_H
#define INBOX_HTTP_H

#include <stddef.h>

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Prometheus text (format 0.0.4) of every http/https source open in the
 * process, into *out (malloc'ed, NUL-terminated, *len bytes; free() it).
 * Samples are labelled consumer="NAME",route="/PATH" (never a key, a
 * header or a secret):
 *   inbox_http_requests_total{...,class="2xx"}  answers by status class
 *   inbox_http_bad_signatures_total             webhooks refused (401)
 *   inbox_http_replays_total                    stored answers replayed
 * Counters run from each source's open. No source open: an empty string.
 * Errors: INVALID (out or len NULL), NOMEM. Thread-safe. */
INBOX_API int inbox_http_metrics_render(char **out, size_t *len);

#ifdef __cplusplus
}
#endif

#endif
