/*
 * inbox dispatch CONFIG: perform the external effects (outbox rows) of the
 * configured consumers — one dispatcher thread per consumer with outbox
 * steps, each on its own store handle. Several dispatch processes (and
 * `inbox run --dispatch`) may run on one store: a row is performed by one
 * of them at a time.
 *
 * The thread group is shared with `inbox run --dispatch` (dispatch.h).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <inbox/outbox.h>

#include "base/log.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/dispatch.h"
#include "cli/http.h"
#include "cli/open.h"
#include "core/internal.h"

const char cli_dispatch_usage[] =
    "usage: inbox dispatch CONFIG [--consumer NAME] [--once | --drain]\n"
    "                             [--timeout DURATION] [--pending] "
    "[--metrics ADDR]\n"
    "                             [--connect-timeout DURATION]\n"
    "\n"
    "Perform the external effects (outbox: steps) of the consumers in "
    "CONFIG: one\ndispatcher per consumer with outbox steps. Each row is "
    "sent with its\nIdempotency-Key; an unknown outcome is retried with the "
    "same key, or\nreconciled first for providers without idempotency. "
    "Several dispatchers may\nrun at once: a row is performed by one of "
    "them at a time.\n"
    "\n"
    "  --consumer NAME   only this consumer's rows\n"
    "  --once            perform what is due now, then exit\n"
    "  --drain           run until no row is left to do (pending, in "
    "flight, failed,\n"
    "                    unknown); rows waiting for a backoff are waited "
    "for\n"
    "  --timeout D       with --drain: give up after D (exit 1 if rows "
    "remain)\n"
    "  --pending         print each consumer's outbox counters (JSON "
    "lines) and exit\n"
    "  --metrics ADDR    serve /metrics (the dispatchers' counters, the "
    "outbox gauges)\n"
    "                    and /healthz on ADDR (127.0.0.1:9465, :9465; "
    "port 0 = any\n"
    "                    free port, logged); metrics: listen: of CONFIG "
    "is not used\n"
    "  --connect-timeout D  give up (exit 4) when a store is still not "
    "reachable\n"
    "                    after D (30s, 5m; 0: do not wait); without it the "
    "dispatcher\n"
    "                    waits for it, with a log line per attempt and "
    "/healthz\n"
    "                    answering 503 meanwhile (--pending never waits)\n"
    "\n"
    "Without --once/--drain it runs until SIGTERM/SIGINT (the calls in "
    "flight finish\nfirst). Logs: a JSON line per outcome (done/retry: "
    "info, unknown/dead: warn).\n"
    "Exit codes: 0 ok, 1 runtime failure or --drain timeout, 2 usage, 3 "
    "config\nerror, 4 cannot open the store (--connect-timeout) or the "
    "metrics address.\n";

typedef struct dworker {
	const cli_config *cfg;
	const cli_consumer *cc;
	struct cli_dispatchers *g;
	inbox_store *st;
	inbox_dispatcher *d;
	pthread_t th;
	int started;
	int rc;
	int hidx; /* the consumer's entry on the HTTP endpoint, or -1 */
} dworker;

struct cli_dispatchers {
	dworker *w;
	int n;
	cli_dispatch_mode mode;
	volatile sig_atomic_t *stop;
	volatile sig_atomic_t drain; /* FOREVER threads: stop when empty */
	cli_http *http;              /* or NULL */
	/* One per process: every dispatcher keeps to the same provider
	 * limits, breakers and rate limits. */
	inbox_providers *providers;
};

static void on_event(const inbox_outbox_item *it,
                     const inbox_effect_result *res, inbox_outbox_state st,
                     const char *reason, void *payload)
{
	(void)payload;
	int level = st == INBOX_OUTBOX_DEAD || st == INBOX_OUTBOX_UNKNOWN ||
	                    st == INBOX_OUTBOX_IN_FLIGHT
	                ? INBOX_LOG_WARN
	                : INBOX_LOG_INFO;
	/* A row put back unperformed (its provider paused, a stop): the
	 * provider's own line says why, once (on_provider). */
	if (!res && reason && !strncmp(reason, "released unperformed", 20))
		level = INBOX_LOG_DEBUG;
	const char *event =
	    st == INBOX_OUTBOX_IN_FLIGHT ? "outbox_fenced" : "outbox";
	inbox__log(level, it->consumer,
	           "\"event\":\"%s\",\"outbox_id\":%lld,\"step\":\"%s\","
	           "\"key\":\"%s\",\"state\":\"%s\",\"attempts\":%d,"
	           "\"status\":%d,\"idempotency_key\":\"%s\","
	           "\"reason\":\"%s\"",
	           event, (long long)it->id, inbox__log_escape(it->step),
	           inbox__log_escape(it->key), inbox_outbox_state_name(st),
	           (int)it->attempts, res ? res->status : 0,
	           it->idempotency_key,
	           inbox__log_escape(reason ? reason : ""));
}

static int nothing_left(dworker *w)
{
	int64_t pending = 1;
	if (inbox_outbox_pending(w->st, w->cc->name, &pending, NULL) < 0)
		return 0;
	return pending == 0;
}

static void log_totals(const dworker *w)
{
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	inbox_dispatcher_stats(w->d, &s);
	inbox__log(
	    w->rc < 0 ? INBOX_LOG_ERROR : INBOX_LOG_INFO, w->cc->name,
	    "\"event\":\"dispatcher_stopped\",\"result\":\"%s\","
	    "\"error\":\"%s\",\"claimed\":%llu,\"attempts\":%llu,"
	    "\"done\":%llu,\"retries\":%llu,\"unknown_outcomes\":%llu,"
	    "\"lease_expired\":%llu,\"reconciliations\":%llu,"
	    "\"reconciled_found\":%llu,\"dead_letters\":%llu,"
	    "\"fenced\":%llu",
	    w->rc < 0 ? inbox_err_name(w->rc) : "ok",
	    inbox__log_escape(w->rc < 0 ? inbox_dispatcher_errmsg(w->d) : ""),
	    (unsigned long long)s.claimed, (unsigned long long)s.attempts,
	    (unsigned long long)s.done, (unsigned long long)s.retries,
	    (unsigned long long)s.unknown_outcomes,
	    (unsigned long long)s.lease_expired,
	    (unsigned long long)s.reconciliations,
	    (unsigned long long)s.reconciled_found,
	    (unsigned long long)s.dead_letters, (unsigned long long)s.fenced);
}

/* The counters as they are now, for /metrics (the thread's own handle). */
static void publish(const dworker *w)
{
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	if (w->hidx < 0)
		return;
	inbox_dispatcher_stats(w->d, &s);
	cli_http_publish_outbox(w->g->http, w->hidx, &s);
}

/* inbox_dispatcher_run's progress: the counters for /metrics, the store
 * retries in the log, and whether the mode is over. */
static int on_tick(inbox_dispatcher *d, inbox_dispatch_event ev, void *payload)
{
	dworker *w = payload;
	struct cli_dispatchers *g = w->g;
	publish(w);
	if (ev == INBOX_DISPATCH_STORE_RETRY)
		inbox__log(INBOX_LOG_WARN, w->cc->name,
		           "\"event\":\"dispatcher_retry\",\"error\":\"%s\"",
		           inbox__log_escape(inbox_dispatcher_errmsg(d)));
	if (ev != INBOX_DISPATCH_IDLE)
		return 0;
	/* Nothing in hand and nothing due. */
	if (g->mode == CLI_DISPATCH_ONCE)
		return 1;
	return (g->mode == CLI_DISPATCH_DRAIN ||
	        __atomic_load_n(&g->drain, __ATOMIC_RELAXED)) &&
	       nothing_left(w);
}

static void *dworker_main(void *arg)
{
	dworker *w = arg;
	struct cli_dispatchers *g = w->g;
	/* Zero counters from the start: rate() gets a baseline. */
	publish(w);
	int rc = inbox_dispatcher_run(w->d, g->stop);
	publish(w);
	w->rc = rc;
	cli_http_set_dispatching(g->http, w->hidx, 0);
	log_totals(w);
	return NULL;
}

static void free_group(struct cli_dispatchers *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->n; i++) {
		inbox_dispatcher_close(g->w[i].d);
		inbox_store_close(g->w[i].st);
	}
	cli_http_set_providers(g->http, NULL);
	inbox_providers_close(g->providers);
	free(g->w);
	free(g);
}

static int open_worker(dworker *w, cli_waiter *wt)
{
	cli_open_fail f;
	int rc;
	for (int attempt = 1;
	     (rc = cli_try_open_store(w->cfg, w->cc, -1, &w->st, &f)) != 0;
	     attempt++) {
		if (!wt) {
			cli_open_report(&f);
			return rc;
		}
		if ((rc = cli_wait_again(wt, w->cc, w->hidx, "store", attempt,
		                         &f)))
			return rc;
	}
	if (wt)
		cli_wait_done(wt, w->hidx);
	const cli_dispatch *c = &w->cc->dispatch;
	inbox_dispatcher_options o = INBOX_DISPATCHER_OPTIONS_INIT;
	o.consumer = w->cc->name;
	o.batch = c->batch;
	o.max_attempts = c->max_attempts;
	o.connect_timeout_ms = c->connect_timeout_ms;
	o.timeout_ms = c->timeout_ms;
	o.backoff_ms = c->backoff_ms;
	o.max_backoff_ms = c->max_backoff_ms;
	o.lease_ms = c->lease_ms;
	o.poll_ms = c->poll_ms;
	o.concurrency = c->concurrency;
	o.providers = w->g->providers;
	o.on_event = on_event;
	o.on_tick = on_tick;
	o.tick_payload = w;
	char err[300] = "";
	int irc = inbox_dispatcher_open(&w->d, w->st, &o, err, sizeof(err));
	if (irc == INBOX_OK)
		return 0;
	cli_error("%s:%d: consumer \"%s\": cannot start its dispatcher: %s",
	          w->cfg->path, w->cc->pos.line, w->cc->name,
	          err[0] ? err : inbox_strerror(irc));
	return irc == INBOX_ERR_INVALID ? CLI_EXIT_CONFIG : CLI_EXIT_RUNTIME;
}

/* A provider's breaker changed, or it asked for a pause. */
static void on_provider(const char *provider, inbox_provider_event ev,
                        int64_t ms, void *payload)
{
	(void)payload;
	static const char *const names[] = {"", "breaker_open",
	                                    "breaker_half_open",
	                                    "breaker_closed", "retry_after"};
	int warn = ev == INBOX_PROVIDER_OPENED || ev == INBOX_PROVIDER_HELD;
	inbox__log(warn ? INBOX_LOG_WARN : INBOX_LOG_INFO, NULL,
	           "\"event\":\"provider\",\"provider\":\"%s\","
	           "\"state\":\"%s\",\"ms\":%lld",
	           inbox__log_escape(provider),
	           ev >= 1 && ev <= 4 ? names[ev] : "?", (long long)ms);
}

/* The process's provider registry, with the providers: of cfg. */
static int open_providers(const cli_config *cfg, inbox_providers **out)
{
	int rc = inbox_providers_open(out, NULL);
	if (rc == INBOX_OK)
		rc = inbox_providers_on_event(*out, on_provider, NULL);
	for (int i = 0; rc == INBOX_OK && i < cfg->nproviders; i++) {
		const cli_provider *p = &cfg->providers[i];
		inbox_provider_options o = INBOX_PROVIDER_OPTIONS_INIT;
		o.concurrency = p->concurrency;
		o.rate = p->rate;
		o.burst = p->burst;
		o.breaker_failures = p->breaker_failures;
		o.breaker_open_ms = p->breaker_open_ms;
		o.breaker_max_open_ms = p->breaker_max_open_ms;
		rc = inbox_providers_set(*out, p->url, &o);
	}
	if (rc != INBOX_OK)
		cli_error("cannot set up the providers: %s",
		          inbox_strerror(rc));
	return rc != INBOX_OK;
}

int cli_dispatch_wanted(const cli_consumer *cc, const cli_consumer *only)
{
	return (!only || cc == only) && inbox_decl_outbox_steps(cc->decl) > 0;
}

int cli_dispatch_start(const cli_config *cfg, const cli_consumer *only,
                       cli_dispatch_mode mode, volatile sig_atomic_t *stop,
                       cli_http *http, cli_waiter *wt, cli_dispatchers **out)
{
	*out = NULL;
	struct cli_dispatchers *g = calloc(1, sizeof(*g));
	if (!g || !(g->w = calloc((size_t)cfg->nconsumers, sizeof(*g->w)))) {
		free(g);
		return CLI_EXIT_RUNTIME;
	}
	g->mode = mode;
	g->stop = stop;
	g->http = http;
	if (open_providers(cfg, &g->providers)) {
		free_group(g);
		return CLI_EXIT_RUNTIME;
	}
	for (int i = 0; i < cfg->nconsumers; i++) {
		const cli_consumer *cc = &cfg->consumers[i];
		if (!cli_dispatch_wanted(cc, only))
			continue;
		dworker *w = &g->w[g->n++];
		w->cfg = cfg;
		w->cc = cc;
		w->g = g;
		w->hidx = cli_http_index(http, cc);
		int rc = open_worker(w, wt);
		if (rc) {
			free_group(g);
			return rc;
		}
	}
	if (g->n == 0) {
		free_group(g);
		return 0;
	}
	cli_http_set_providers(http, g->providers);
	/* Signals stay with the main thread. */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	int err = 0;
	for (int i = 0; i < g->n && !err; i++) {
		/* Running before the thread exists: it may be over before
		 * pthread_create returns (--once with nothing due). */
		cli_http_set_dispatching(http, g->w[i].hidx, 1);
		err = pthread_create(&g->w[i].th, NULL, dworker_main, &g->w[i]);
		g->w[i].started = !err;
		if (err)
			cli_http_set_dispatching(http, g->w[i].hidx, 0);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	*out = g;
	if (err) {
		cli_error("cannot start a dispatcher thread");
		return CLI_EXIT_RUNTIME;
	}
	return 0;
}

void cli_dispatch_drain(cli_dispatchers *g)
{
	if (g)
		__atomic_store_n(&g->drain, 1, __ATOMIC_RELAXED);
}

int cli_dispatch_count(const cli_dispatchers *g)
{
	return g ? g->n : 0;
}

int cli_dispatch_join(cli_dispatchers *g)
{
	if (!g)
		return 0;
	int rc = 0;
	for (int i = 0; i < g->n; i++) {
		if (!g->w[i].started)
			continue;
		pthread_join(g->w[i].th, NULL);
		if (g->w[i].rc < 0)
			rc = CLI_EXIT_RUNTIME;
	}
	free_group(g);
	return rc;
}

/* ---- the command ----------------------------------------------------- */

/* Set by the signal handler and the watchdog thread, read by every
 * thread: atomic loads and stores (lock-free, so safe in a handler). */
static volatile sig_atomic_t d_stop;
static volatile sig_atomic_t d_timed_out;

static void on_signal(int sig)
{
	(void)sig;
	__atomic_store_n(&d_stop, 1, __ATOMIC_RELAXED);
}

static int print_pending(const cli_config *cfg, const cli_consumer *only)
{
	int status = 0;
	for (int i = 0; i < cfg->nconsumers; i++) {
		const cli_consumer *cc = &cfg->consumers[i];
		if ((only && cc != only) ||
		    (!only && inbox_decl_outbox_steps(cc->decl) == 0))
			continue;
		inbox_store *st = NULL;
		int rc = cli_open_store(cfg, cc, -1, &st);
		if (rc)
			return rc;
		inbox_outbox_counts c = INBOX_OUTBOX_COUNTS_INIT;
		int irc = inbox_outbox_counts_get(st, cc->name, &c);
		if (irc < 0) {
			cli_error("consumer \"%s\": outbox counters: %s",
			          cc->name, inbox_store_errmsg(st));
			status = CLI_EXIT_RUNTIME;
		} else {
			printf("{\"consumer\":\"%s\",\"pending\":%lld,"
			       "\"in_flight\":%lld,\"failed\":%lld,"
			       "\"unknown\":%lld,\"dead\":%lld,\"undone\":%lld,"
			       "\"oldest_age_seconds\":%.3f}\n",
			       inbox__log_escape(cc->name),
			       (long long)c.pending, (long long)c.in_flight,
			       (long long)c.failed, (long long)c.unknown,
			       (long long)c.dead,
			       (long long)(c.pending + c.in_flight + c.failed +
			                   c.unknown),
			       c.oldest_age_seconds);
		}
		inbox_store_close(st);
	}
	return status;
}

static void *watchdog(void *arg)
{
	double *deadline = arg;
	while (!__atomic_load_n(&d_stop, __ATOMIC_RELAXED)) {
		if (inbox__mono_seconds() > *deadline) {
			inbox__log(INBOX_LOG_ERROR, NULL,
			           "\"event\":\"dispatch_timeout\"");
			__atomic_store_n(&d_timed_out, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&d_stop, 1, __ATOMIC_RELAXED);
			break;
		}
		struct timespec ts = {0, 50 * 1000000L};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static int parse_args(int argc, char **argv, const char **path,
                      const char **only, cli_dispatch_mode *mode,
                      double *timeout_s, int *pending, const char **listen,
                      double *connect_s)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--connect-timeout") && i + 1 < argc) {
			if (cli_parse_seconds(argv[++i], connect_s) < 0) {
				cli_error("--connect-timeout: \"%s\" is not a "
				          "duration (0, 30s, 5m)",
				          argv[i]);
				return CLI_EXIT_USAGE;
			}
			continue;
		}
		if (!strcmp(argv[i], "--metrics") && i + 1 < argc) {
			struct sockaddr_storage ss;
			socklen_t sslen;
			char why[256];
			*listen = argv[++i];
			if (cli_http_parse_addr(*listen, &ss, &sslen, why,
			                        sizeof(why)) < 0) {
				cli_error("--metrics: %s", why);
				return CLI_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--once")) {
			*mode = CLI_DISPATCH_ONCE;
		} else if (!strcmp(argv[i], "--drain")) {
			*mode = CLI_DISPATCH_DRAIN;
		} else if (!strcmp(argv[i], "--pending")) {
			*pending = 1;
		} else if (!strcmp(argv[i], "--consumer") && i + 1 < argc) {
			*only = argv[++i];
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			if (cli_parse_seconds(argv[++i], timeout_s) < 0) {
				cli_error("--timeout: \"%s\" is not a duration "
				          "(30s, 500ms, 2m)",
				          argv[i]);
				return CLI_EXIT_USAGE;
			}
		} else if (argv[i][0] == '-' || *path) {
			cli_error("dispatch: unexpected argument \"%s\"",
			          argv[i]);
			fputs(cli_dispatch_usage, stderr);
			return CLI_EXIT_USAGE;
		} else {
			*path = argv[i];
		}
	}
	if (!*path) {
		fputs(cli_dispatch_usage, stderr);
		return CLI_EXIT_USAGE;
	}
	return 0;
}

/* /metrics and /healthz for the consumers that get a dispatcher. */
static int start_http(const cli_config *cfg, const cli_consumer *only,
                      const char *listen, cli_http **out)
{
	const cli_consumer **cs = calloc((size_t)cfg->nconsumers, sizeof(*cs));
	char err[512];
	int n = 0;
	if (!cs)
		return CLI_EXIT_RUNTIME;
	for (int i = 0; i < cfg->nconsumers; i++)
		if (cli_dispatch_wanted(&cfg->consumers[i], only))
			cs[n++] = &cfg->consumers[i];
	int rc = cli_http_start(out, listen, cfg, cs, n, CLI_HTTP_DISPATCH, err,
	                        sizeof(err));
	free(cs);
	if (rc < 0) {
		cli_error("metrics: %s", err);
		return CLI_EXIT_CONNECT;
	}
	inbox__log(INBOX_LOG_INFO, NULL,
	           "\"event\":\"metrics_listening\",\"listen\":\"%s\","
	           "\"paths\":[\"/metrics\",\"/healthz\"]",
	           cli_http_address(*out));
	return 0;
}

int cli_cmd_dispatch(int argc, char **argv)
{
	const char *path = NULL, *only = NULL, *listen = NULL;
	cli_dispatch_mode mode = CLI_DISPATCH_FOREVER;
	double timeout_s = 0, connect_s = -1; /* < 0: wait forever */
	int pending = 0;
	int rc = parse_args(argc, argv, &path, &only, &mode, &timeout_s,
	                    &pending, &listen, &connect_s);
	if (rc)
		return rc;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	cli_config cfg;
	const cli_consumer *sel;
	if ((rc = cli_load_selected(&cfg, path, only, &sel)))
		return rc;
	if (pending) {
		rc = print_pending(&cfg, sel);
		cli_config_free(&cfg);
		return rc;
	}
	cli_dispatchers *g = NULL;
	cli_http *http = NULL;
	/* /healthz first: it says "not ready" while we wait. */
	if (listen)
		rc = start_http(&cfg, sel, listen, &http);
	cli_waiter wt;
	cli_waiter_init(&wt, connect_s, &d_stop, http, NULL);
	int stopped = 0;
	if (rc == 0 && (rc = cli_dispatch_start(&cfg, sel, mode, &d_stop, http,
	                                        &wt, &g)) < 0) {
		inbox__log(INBOX_LOG_INFO, NULL,
		           "\"event\":\"stopped\",\"result\":\"ok\","
		           "\"while\":\"waiting for a store\"");
		rc = CLI_EXIT_OK;
		stopped = 1;
	}
	if (rc == 0 && !g && !stopped)
		cli_error("%s: no consumer declares outbox steps%s", cfg.path,
		          sel ? " (--consumer)" : "");
	double deadline = inbox__mono_seconds() + timeout_s;
	pthread_t wd;
	int have_wd = g && timeout_s > 0 &&
	              pthread_create(&wd, NULL, watchdog, &deadline) == 0;
	int jrc = cli_dispatch_join(g);
	int timed_out = __atomic_load_n(&d_timed_out, __ATOMIC_RELAXED);
	if (have_wd) {
		__atomic_store_n(&d_stop, 1, __ATOMIC_RELAXED);
		pthread_join(wd, NULL);
	}
	if (rc == 0 && g && jrc)
		rc = jrc;
	if (rc == 0 && timed_out && mode == CLI_DISPATCH_DRAIN) {
		cli_error("dispatch: --timeout reached with rows left to do");
		print_pending(&cfg, sel);
		rc = CLI_EXIT_RUNTIME;
	}
	cli_http_stop(http);
	cli_config_free(&cfg);
	return rc;
}
