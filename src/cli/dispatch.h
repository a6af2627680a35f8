/*
 * Dispatcher threads for the configured consumers that declare external
 * effects (outbox:): one thread per consumer, each with its own store
 * handle and inbox_dispatcher. Used by `inbox dispatch` and by
 * `inbox run --dispatch`.
 */
#ifndef INBOX_CLI_DISPATCH_H
#define INBOX_CLI_DISPATCH_H

#include <signal.h>

#include "cli/config.h"
#include "cli/http.h"
#include "cli/open.h"

typedef enum cli_dispatch_mode {
	CLI_DISPATCH_FOREVER = 0, /* until *stop */
	CLI_DISPATCH_ONCE = 1,    /* until nothing is due now */
	CLI_DISPATCH_DRAIN = 2    /* until nothing is left to do */
} cli_dispatch_mode;

typedef struct cli_dispatchers cli_dispatchers;

/* Whether consumer cc gets a dispatcher (it declares outbox steps, and
 * is `only` when that is not NULL). */
int cli_dispatch_wanted(const cli_consumer *cc, const cli_consumer *only);

/* Open a store and a dispatcher for every consumer of cfg with outbox
 * steps (or `only`), then start their threads. *out is NULL (and 0
 * returned) when no consumer has outbox steps. Each thread publishes its
 * counters and state on `http` (may be NULL) under its consumer's entry,
 * if the endpoint lists that consumer. A store that cannot be reached is
 * waited for as `wt` says (NULL: not at all). Returns 0, an exit code
 * (message printed), or -1 when a stop signal came while waiting. */
int cli_dispatch_start(const cli_config *cfg, const cli_consumer *only,
                       cli_dispatch_mode mode, volatile sig_atomic_t *stop,
                       cli_http *http, cli_waiter *wt, cli_dispatchers **out);

/* From now on, threads in FOREVER mode stop once nothing is left to do. */
void cli_dispatch_drain(cli_dispatchers *g);

/* Wait for the threads, log their totals, free everything. Returns 0, or
 * CLI_EXIT_RUNTIME if a dispatcher stopped on an error. NULL is a no-op. */
int cli_dispatch_join(cli_dispatchers *g);

/* Number of dispatcher threads (0 for NULL). */
int cli_dispatch_count(const cli_dispatchers *g);

#endif
