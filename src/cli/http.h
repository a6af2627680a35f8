/*
 * The daemon's HTTP endpoint (libmicrohttpd, one internal thread):
 *   GET /metrics   Prometheus text exposition (inbox_metrics_render)
 *   GET /healthz   200 {"status":"ok",...} when every consumer thread (or,
 *                  for `inbox dispatch`, every dispatcher thread) is
 *                  running and its store answered within the last second
 *                  or so, and the process is not draining; 503 with a
 *                  JSON reason otherwise.
 *   GET /readyz    (Kubernetes readiness) /healthz, and every consumer's
 *                  source reachable: 503 while its last poll failed less
 *                  than 15 s ago with no batch since. "status":"ready".
 *   GET /livez     (Kubernetes liveness) 200 while the process works: the
 *                  HTTP thread answers and the supervising loop
 *                  (cli_http_heartbeat) ticked within 10 s (or has not
 *                  started yet); a store or broker down never fails it.
 * Bound to 127.0.0.1 unless the address says otherwise.
 *
 * Consumer threads publish a snapshot of their counters after each batch
 * (cli_http_publish) and their state; dispatcher threads do the same with
 * theirs (cli_http_publish_outbox), under the consumer whose rows they
 * perform (one dispatcher per consumer). The HTTP thread reads the stores
 * through its own handles (one per consumer, opened lazily, never
 * migrating), so it never touches a handle another thread owns.
 * Every function accepts h == NULL (no endpoint configured) as a no-op.
 */
#ifndef INBOX_CLI_HTTP_H
#define INBOX_CLI_HTTP_H

#include <stddef.h>
#include <sys/socket.h>

#include <inbox/inbox.h>
#include <inbox/outbox.h>
#include <inbox/source.h>

#include "cli/config.h"

typedef struct cli_http cli_http;

/* Parse a listen address: "PORT", ":PORT", "HOST:PORT" (an IPv4 literal
 * or "localhost") or "[IPV6]:PORT". No host means 127.0.0.1. Port 0 picks
 * a free port. 0, or -1 with the reason in err. */
int cli_http_parse_addr(const char *s, struct sockaddr_storage *ss,
                        socklen_t *sslen, char *err, size_t errlen);

/* What the process runs, which decides what the endpoint shows. */
typedef enum cli_http_role {
	/* `inbox run`: consumer counters, every store gauge, consumer_up;
	 * /healthz follows the consumer threads (and their dispatchers). */
	CLI_HTTP_RUN = 0,
	/* `inbox dispatch`: dispatcher counters and the outbox gauges only
	 * (no consumer runs here); /healthz follows the dispatcher threads. */
	CLI_HTTP_DISPATCH = 1
} cli_http_role;

/* Start serving for consumers cs[0..n) of cfg. 0, or -1 with the reason
 * (address, bind failure) in err. */
int cli_http_start(cli_http **out, const char *listen, const cli_config *cfg,
                   const cli_consumer *const *cs, int n, cli_http_role role,
                   char *err, size_t errlen);

/* "127.0.0.1:9464" as bound (the real port when 0 was asked). */
const char *cli_http_address(const cli_http *h);

/* From consumer thread i: its counters after a batch. */
void cli_http_publish(cli_http *h, int i, const inbox_stats *s);
/* Consumer i is running (1) or has stopped (0). */
void cli_http_set_running(cli_http *h, int i, int running);
/* The source consumer i polls (its lag is shown in /metrics), set by
 * its thread before it runs; cli_http_set_running(h, i, 0) forgets it. */
void cli_http_set_source(cli_http *h, int i, const inbox_source *src);
/* Consumer i is not started yet: why (copied; "waiting for its store
 * ...: ..."), shown by /healthz (503); NULL clears it. */
void cli_http_set_waiting(cli_http *h, int i, const char *why);

/* Index of consumer cc in the endpoint's list, -1 if absent (or h NULL). */
int cli_http_index(const cli_http *h, const cli_consumer *cc);
/* From the dispatcher thread of consumer i: its counters. The first call
 * makes the outbox_*_total series appear for that consumer. */
void cli_http_publish_outbox(cli_http *h, int i, const inbox_outbox_stats *s);
/* The dispatcher thread of consumer i is running (1) or has stopped (0). */
void cli_http_set_dispatching(cli_http *h, int i, int running);
/* The dispatchers' provider registry, whose providers /metrics shows
 * (NULL: none; set to NULL before the registry is freed). */
void cli_http_set_providers(cli_http *h, inbox_providers *r);
/* From the log (a "poll_failed" event of consumer i): its source is not
 * reachable now; why is copied. A batch (cli_http_publish) clears it. */
void cli_http_source_failed(cli_http *h, int i, const char *why);
/* The supervising loop ticked (/livez). */
void cli_http_heartbeat(cli_http *h);
/* The daemon is draining: /healthz and /readyz answer 503 from now on. */
void cli_http_set_draining(cli_http *h);

/* Stop serving (waits for the HTTP thread) and free. */
void cli_http_stop(cli_http *h);

#endif
