/* Opening what a configured consumer needs, with messages a person can act
 * on. Each function prints its error and returns an exit code (0 = ok). */
#ifndef INBOX_CLI_OPEN_H
#define INBOX_CLI_OPEN_H

#include <pthread.h>
#include <signal.h>

#include <inbox/inbox.h>
#include <inbox/source.h>

#include "cli/config.h"

/* Load the config; 0 or CLI_EXIT_CONFIG (message printed). */
int cli_load(cli_config *cfg, const char *path);

/* cli_load, then the consumer named `only` into *sel (NULL when `only` is
 * NULL: all of them). 0, CLI_EXIT_CONFIG, or CLI_EXIT_USAGE for an unknown
 * name (the known ones printed); on failure cfg is already freed. */
int cli_load_selected(cli_config *cfg, const char *path, const char *only,
                      const cli_consumer **sel);

/* A failed open, not printed yet: for `inbox run`, which waits for a
 * database or broker that is not there yet instead of exiting. */
typedef struct cli_open_fail {
	int rc;         /* the inbox_err */
	int exit_code;  /* what the command exits with when it gives up */
	char msg[1400]; /* as cli_error prints it; no password in it */
	char hint[256]; /* a second line ("inbox: hint: ..."), or "" */
} cli_open_fail;

/* 1 when a later attempt may succeed: the store or broker cannot be
 * reached (INBOX_ERR_CONNECT), or went away meanwhile (TRANSIENT,
 * TIMEOUT); 0 for what only a change of the config or the database
 * cures (those still exit 3 or 4 at once). */
int cli_open_retryable(const cli_open_fail *f);
/* Print f's message (and hint) on stderr. */
void cli_open_report(const cli_open_fail *f);

/* The cli_try_* functions below are their cli_* namesakes without the
 * printing: on failure they fill *f and return its exit code. */
int cli_try_open_store(const cli_config *cfg, const cli_consumer *c,
                       int auto_migrate, inbox_store **out, cli_open_fail *f);
int cli_try_prepare_effects(const cli_config *cfg, const cli_consumer *c,
                            inbox_store *st, cli_open_fail *f);
int cli_try_open_consumer(const cli_config *cfg, const cli_consumer *c,
                          inbox_store *st, inbox_consumer **out,
                          cli_open_fail *f);
/* c's source URL parsed as its open would, connecting to nothing
 * (inbox_source_check): 0, or CLI_EXIT_CONFIG with f set. */
int cli_check_source_url(const cli_config *cfg, const cli_consumer *c,
                         cli_open_fail *f);
int cli_try_open_source(const cli_config *cfg, const cli_consumer *c,
                        inbox_source **out, cli_open_fail *f);

/* Open the consumer's store. auto_migrate < 0: as the config says. */
int cli_open_store(const cli_config *cfg, const cli_consumer *c,
                   int auto_migrate, inbox_store **out);

/* Run the setup SQL and validate the effect steps against the store. */
int cli_prepare_effects(const cli_config *cfg, const cli_consumer *c,
                        inbox_store *st);

/* Create the inbox consumer with the declarative effect as handler. */
int cli_open_consumer(const cli_config *cfg, const cli_consumer *c,
                      inbox_store *st, inbox_consumer **out);

/* Open the consumer's source. */
int cli_open_source(const cli_config *cfg, const cli_consumer *c,
                    inbox_source **out);

/* Waiting at start-up for a store or broker that is not there yet (`inbox
 * run`, `inbox dispatch`): attempts 200 ms apart at first, doubling up to
 * 10 s, a JSON "waiting" line per attempt and /healthz answering 503 with
 * the reason meanwhile. */
typedef struct cli_waiter {
	double deadline; /* inbox__mono_seconds(); 0 = forever, < 0 = no wait */
	int delay_ms;
	volatile sig_atomic_t *stop; /* set by a stop signal: stop waiting */
	struct cli_http *http;       /* or NULL */
	pthread_mutex_t *mu;         /* held around a log line, or NULL */
} cli_waiter;

/* connect_s < 0: wait forever, 0: do not wait, else give up after it. */
void cli_waiter_init(cli_waiter *wt, double connect_s,
                     volatile sig_atomic_t *stop, struct cli_http *http,
                     pthread_mutex_t *mu);
/* A failed attempt of the `what` ("store", "source") of consumer cc (its
 * /healthz entry hidx, or -1): give up — the message printed, its exit
 * code returned — when it is not retryable or the deadline passed; else
 * log it, show it in /healthz, wait and return 0; -1 when a stop came
 * while waiting. */
int cli_wait_again(cli_waiter *wt, const cli_consumer *cc, int hidx,
                   const char *what, int attempt, const cli_open_fail *f);
/* It succeeded: the next wait starts short again, /healthz forgets it. */
void cli_wait_done(cli_waiter *wt, int hidx);

/* The consumer named `name`, or NULL after printing the known names. */
const cli_consumer *cli_find_consumer(const cli_config *cfg, const char *name);

#endif
