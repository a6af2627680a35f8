/*
 * inbox run CONFIG: one thread per consumer, each with its own store
 * handle and source, driven by inbox_run (poll -> one transaction ->
 * commit -> ack).
 *
 * Start-up opens and checks everything (stores, setup SQL, effects,
 * sources) before the first message is read, so a config mistake never
 * consumes anything. A store or broker that cannot be reached yet (the
 * daemon started before its database, under systemd or Kubernetes) is
 * waited for, with backoff and a log line per attempt, /healthz answering
 * 503 with the reason meanwhile; --connect-timeout bounds the wait (exit
 * 4); a config error still exits 3 at once.
 *
 * SIGTERM/SIGINT set the stop flag: each runner finishes, commits and
 * acks the batch in hand and returns (drain); past the drain deadline, or
 * at a second signal, the process exits at once with code 5 — safe,
 * because nothing uncommitted was ever acked. SIGUSR1/SIGUSR2 are ignored
 * (logged), never fatal.
 *
 * SIGHUP checks the config file again first, on a thread of its own while
 * the consumers go on: what `inbox check` checks (the file, then each
 * consumer's store side — setup SQL, effects, retention window — in a
 * transaction rolled back). A config that fails is refused with a log
 * line saying why ("reload_refused"), and the running one goes on. A
 * config that passes: drain, then exit 0 for the service manager to start
 * the process again with it (packaging/inbox@.service: Restart=always;
 * Kubernetes restarts the container). The consumers are not restarted in
 * place: a half-swapped set of stores, sources and HTTP endpoint is not
 * worth the second it saves.
 *
 * Under systemd (NOTIFY_SOCKET set; cli/notify.h): READY=1 once every
 * consumer runs, STOPPING=1 when the drain begins, WATCHDOG=1 from the
 * supervising loop when WatchdogSec= is set, STATUS= lines throughout.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "cli/args.h"
#include "cli/check.h"
#include "cli/cli.h"
#include "cli/dispatch.h"
#include "cli/http.h"
#include "cli/notify.h"
#include "cli/open.h"
#include "core/internal.h"

const char cli_run_usage[] =
    "usage: inbox run CONFIG [--consumer NAME] [--drain-timeout DURATION] "
    "[--once]\n"
    "                        [--dispatch] [--connect-timeout DURATION] "
    "[--metrics ADDR]\n"
    "\n"
    "Run the consumers declared in CONFIG (all of them, one thread each, "
    "or only\nNAME). Everything is opened and checked first: stores, "
    "setup SQL, effect SQL,\nsources; an error there exits 3 or 4 before "
    "any message is read. A store or\nbroker that cannot be reached yet is "
    "waited for (see --connect-timeout).\n"
    "\n"
    "  --consumer NAME         run only this consumer\n"
    "  --drain-timeout D       after SIGTERM/SIGINT (or a SIGHUP whose "
    "config passed),\n"
    "                          how long to finish the batch in\n"
    "                          hand before giving up with exit 5 (default "
    "10s; 30s, 500ms...)\n"
    "  --once                  exit 0 when every source reaches its end "
    "(JSONL without\n"
    "                          follow=1); without it the daemon waits for "
    "more\n"
    "  --dispatch              also perform the consumers' external effects "
    "(outbox:\n"
    "                          steps), one dispatcher thread each, as "
    "`inbox dispatch`\n"
    "                          does; with --once, exit when they are done "
    "too\n"
    "  --connect-timeout D     give up (exit 4) when a store or broker is "
    "still not\n"
    "                          reachable after D (30s, 5m; 0: do not wait); "
    "without it\n"
    "                          the daemon waits for them, with a log line "
    "per attempt\n"
    "                          and /healthz answering 503 meanwhile\n"
    "  --metrics ADDR          serve /metrics (Prometheus), /healthz, "
    "/livez and /readyz\n"
    "                          on ADDR\n"
    "                          (127.0.0.1:9464, :9464, [::1]:9464; port 0 = "
    "any free\n"
    "                          port, logged); overrides metrics: listen: "
    "of CONFIG\n"
    "\n"
    "Logs: JSON lines on stderr, one per batch (info), one per dead letter,"
    "\nconflict or retry (warn), one per message with its key, outcome and "
    "duration\n(debug). Payloads are never logged. INBOX_LOG_LEVEL=warn "
    "keeps only problems.\n"
    "SIGHUP: the config file is checked again (as inbox check does, "
    "the stores\nreached); refused (logged) if it fails, else the daemon "
    "drains and exits 0 for\nthe service manager to start it with the "
    "new config. Under systemd\n(Type=notify) it reports READY, STOPPING, "
    "WATCHDOG and STATUS.\n"
    "Exit codes: 0 ok, 1 runtime failure, 2 usage, 3 config error, 4 "
    "cannot\nopen/connect store or source, 5 drain deadline exceeded or "
    "second signal.\n";

typedef struct worker {
	const cli_config *cfg;
	const cli_consumer *cc;
	inbox_store *st;
	inbox_consumer *c;
	inbox_source *src;
	pthread_t th;
	int started;
	int once;
	int rc;
	int idx; /* in the metrics endpoint's list */
	double sum_prev;
	uint64_t count_prev;
} worker;

/* Read and written only with inbox__flag()/inbox__flag_set(): the signal
 * handler and every thread share them. */
static volatile sig_atomic_t g_stop;    /* given to every inbox_run */
static volatile sig_atomic_t g_signals; /* stop signals seen */
static volatile sig_atomic_t g_hup;     /* SIGHUP not handled yet */
static volatile sig_atomic_t g_signo;   /* the first of them */
static volatile sig_atomic_t g_ignored; /* SIGUSR1/SIGUSR2 not logged yet */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_running;
static cli_http *g_http; /* /metrics and /healthz, or NULL */
static worker *g_ws;     /* the workers, for the log tap */
static int g_nws;

/* The config checked again after a SIGHUP, on a thread of its own. */
typedef struct reload {
	const char *path, *only;
	pthread_t th;
	int active; /* a thread was started and not joined yet */
	int done;   /* atomic: the thread finished */
	int rc;     /* 0: passed */
	char why[1500];
} reload;
static reload g_reload;

static void on_ignored(int sig)
{
	__atomic_store_n(&g_ignored, sig, __ATOMIC_RELEASE);
}

static const char *signal_name(int sig)
{
	switch (sig) {
	case SIGTERM:
		return "SIGTERM";
	case SIGINT:
		return "SIGINT";
	case SIGHUP:
		return "SIGHUP";
	case SIGUSR1:
		return "SIGUSR1";
	case SIGUSR2:
		return "SIGUSR2";
	}
	return "?";
}

static void on_signal(int sig)
{
	if (sig == SIGHUP) {
		/* Checked by the main loop; while draining, nothing to do. */
		if (!inbox__flag(&g_signals))
			inbox__flag_set(&g_hup, 1);
		return;
	}
	if (inbox__flag(&g_signals)) {
		static const char msg[] =
		    "inbox: second signal: exiting now without finishing "
		    "the batch (nothing uncommitted was acked)\n";
		ssize_t w = write(2, msg, sizeof(msg) - 1);
		(void)w;
		_exit(CLI_EXIT_DRAIN);
	}
	__atomic_store_n(&g_signo, sig, __ATOMIC_RELEASE);
	inbox__flag_set(&g_signals, 1);
	inbox__flag_set(&g_stop, 1);
}

/* JSON-escape into buf: not cut at inbox__log_escape's ~500 bytes, and
 * not limited to four results per line. */
static const char *esc(char *buf, size_t len, const char *s)
{
	return inbox__log_escape_into(buf, len, s);
}

static void sleep_ms(int ms)
{
	while (ms > 0 && !inbox__flag(&g_stop)) {
		int slice = ms > 50 ? 50 : ms;
		struct timespec ts = {0, (long)slice * 1000000L};
		nanosleep(&ts, NULL);
		ms -= slice;
	}
}

/* The key as a JSON value: a quoted string, or null when the message could
 * not be parsed far enough to have one. */
static const char *key_json(char *buf, size_t len, const char *key)
{
	if (!key)
		return strcpy(buf, "null");
	buf[0] = '"';
	esc(buf + 1, len - 2, key);
	return strcat(buf, "\"");
}

static void log_problem(const worker *w, const inbox_delivery *d,
                        const inbox_result *r)
{
	char k[520], why[1024], pos[256];
	key_json(k, sizeof(k), r->key);
	pthread_mutex_lock(&g_mu);
	inbox__log(INBOX_LOG_WARN, w->cc->name,
	           "\"event\":\"%s\",\"key\":%s,\"outcome\":\"%s\","
	           "\"reason\":\"%s\",\"position\":\"%s\",\"attempts\":%d,"
	           "\"dead_letter_id\":%lld",
	           r->outcome == INBOX_RETRY ? "retry" : "dead_letter", k,
	           inbox_outcome_name(r->outcome),
	           esc(why, sizeof(why), r->reason),
	           esc(pos, sizeof(pos), d->position), r->attempts,
	           (long long)r->dead_letter_id);
	pthread_mutex_unlock(&g_mu);
}

/* Debug: one line per message, never its payload. */
static void log_message(const worker *w, const inbox_delivery *d,
                        const inbox_result *r, double ms)
{
	char k[520], pos[256];
	key_json(k, sizeof(k), r->key);
	pthread_mutex_lock(&g_mu);
	/* a stored result by its size only, never its bytes (like the
	 * payload: they may hold what a log must not) */
	char res[96] = "";
	if (r->result)
		snprintf(res, sizeof(res), ",\"result_bytes\":%zu%s%s%s",
		         r->result_len,
		         r->first_outcome ? ",\"first_outcome\":\"" : "",
		         r->first_outcome ? inbox_outcome_name(r->first_outcome)
		                          : "",
		         r->first_outcome ? "\"" : "");
	inbox__log(INBOX_LOG_DEBUG, w->cc->name,
	           "\"event\":\"message\",\"key\":%s,\"outcome\":\"%s\","
	           "\"attempts\":%d,\"position\":\"%s\",\"duration_ms\":%.2f%s",
	           k, inbox_outcome_name(r->outcome), r->attempts,
	           esc(pos, sizeof(pos), d->position), ms, res);
	pthread_mutex_unlock(&g_mu);
}

static void on_batch(const inbox_delivery *d, const inbox_result *res, size_t n,
                     void *payload)
{
	worker *w = payload;
	uint64_t cnt[INBOX_SKIPPED + 1] = {0};
	for (size_t i = 0; i < n; i++) {
		inbox_outcome o = res[i].outcome;
		if ((unsigned)o <= INBOX_SKIPPED)
			cnt[o]++;
		if (o == INBOX_CONFLICT || o == INBOX_DEAD_LETTERED ||
		    o == INBOX_RETRY)
			log_problem(w, &d[i], &res[i]);
	}
	/* Every message of a batch is observed with the batch's duration
	 * (claim to commit), so the deltas give it back. */
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(w->c, &s);
	uint64_t dc = s.processing_count - w->count_prev;
	double ms =
	    dc ? (s.processing_seconds_sum - w->sum_prev) / (double)dc * 1000.0
	       : 0.0;
	w->sum_prev = s.processing_seconds_sum;
	w->count_prev = s.processing_count;
	cli_http_publish(g_http, w->idx, &s);
	if (inbox__log_enabled(INBOX_LOG_DEBUG))
		for (size_t i = 0; i < n; i++)
			log_message(w, &d[i], &res[i], ms);
	pthread_mutex_lock(&g_mu);
	inbox__log(INBOX_LOG_INFO, w->cc->name,
	           "\"event\":\"batch\",\"size\":%zu,\"applied\":%llu,"
	           "\"duplicate\":%llu,\"conflict\":%llu,\"stale\":%llu,"
	           "\"dead_letter\":%llu,\"retry\":%llu,\"in_progress\":%llu,"
	           "\"skipped\":%llu,\"duration_ms\":%.2f",
	           n, (unsigned long long)cnt[INBOX_APPLIED],
	           (unsigned long long)cnt[INBOX_DUPLICATE],
	           (unsigned long long)cnt[INBOX_CONFLICT],
	           (unsigned long long)cnt[INBOX_STALE],
	           (unsigned long long)cnt[INBOX_DEAD_LETTERED],
	           (unsigned long long)cnt[INBOX_RETRY],
	           (unsigned long long)cnt[INBOX_IN_PROGRESS],
	           (unsigned long long)cnt[INBOX_SKIPPED], ms);
	pthread_mutex_unlock(&g_mu);
	if (w->cc->batch_pause_ms > 0)
		sleep_ms(w->cc->batch_pause_ms);
}

static void log_totals(const worker *w)
{
	inbox_stats s = INBOX_STATS_INIT;
	char e[600] = "";
	inbox_consumer_stats(w->c, &s);
	if (w->rc < 0) {
		strcpy(e, ",\"error\":\"");
		esc(e + strlen(e), sizeof(e) - strlen(e) - 2,
		    inbox_consumer_errmsg(w->c));
		strcat(e, "\"");
	}
	pthread_mutex_lock(&g_mu);
	inbox__log(
	    w->rc < 0 ? INBOX_LOG_ERROR : INBOX_LOG_INFO, w->cc->name,
	    "\"event\":\"stopped\",\"result\":\"%s\"%s,"
	    "\"messages\":%llu,\"applied\":%llu,\"duplicates\":%llu,"
	    "\"conflicts\":%llu,\"stale\":%llu,\"dead_letters\":%llu,"
	    "\"retries\":%llu,\"transient_retries\":%llu,\"batches\":%llu,"
	    "\"skipped\":%llu",
	    w->rc < 0 ? inbox_err_name(w->rc) : "ok", e,
	    (unsigned long long)s.messages, (unsigned long long)s.applied,
	    (unsigned long long)s.duplicates, (unsigned long long)s.conflicts,
	    (unsigned long long)s.stale, (unsigned long long)s.dead_letters,
	    (unsigned long long)s.retries,
	    (unsigned long long)s.transient_retries,
	    (unsigned long long)s.batches, (unsigned long long)s.skipped);
	pthread_mutex_unlock(&g_mu);
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	inbox_runner_options ro = INBOX_RUNNER_OPTIONS_INIT;
	ro.batch_size = w->cc->batch_size;
	ro.poll_timeout_ms = w->cc->poll_timeout_ms;
	ro.exit_at_eof = 1;
	ro.on_batch = on_batch;
	ro.payload = w;
	int rc;
	cli_http_set_source(g_http, w->idx, w->src);
	cli_http_set_running(g_http, w->idx, 1);
	for (;;) {
		rc = inbox_run(w->c, w->src, &ro, &g_stop);
		if (rc < 0 || inbox__flag(&g_stop) || w->once)
			break;
		/* The end of a file that is not followed: look again later
		 * rather than spin. */
		sleep_ms(w->cc->poll_timeout_ms);
	}
	w->rc = rc;
	cli_http_set_running(g_http, w->idx, 0);
	log_totals(w);
	pthread_mutex_lock(&g_mu);
	if (rc < 0)
		inbox__flag_set(&g_stop, 1); /* drain the others */
	g_running--;
	pthread_cond_signal(&g_cv);
	pthread_mutex_unlock(&g_mu);
	return NULL;
}

static void close_all(worker *ws, int n)
{
	for (int i = 0; i < n; i++) {
		inbox_source_close(ws[i].src);
		inbox_consumer_close(ws[i].c);
		inbox_store_close(ws[i].st);
	}
}

/* The store, its effects and the consumer of w: opened again whole after
 * a failure (a handle that failed half-way is not reused). */
static int try_store_side(const cli_config *cfg, worker *w, cli_open_fail *f)
{
	int rc;
	if ((rc = cli_try_open_store(cfg, w->cc, -1, &w->st, f)) ||
	    (rc = cli_try_prepare_effects(cfg, w->cc, w->st, f)) ||
	    (rc = cli_try_open_consumer(cfg, w->cc, w->st, &w->c, f))) {
		inbox_consumer_close(w->c);
		inbox_store_close(w->st);
		w->c = NULL;
		w->st = NULL;
	}
	return rc;
}

/* Open and check everything before anything is consumed, waiting for
 * what is not there yet. 0, an exit code, or -1 (stopped meanwhile). */
static int open_all(const cli_config *cfg, worker *ws, int n, cli_waiter *wt)
{
	cli_open_fail f;
	int rc;
	for (int i = 0; i < n; i++) {
		for (int attempt = 1;
		     (rc = try_store_side(cfg, &ws[i], &f)) != 0; attempt++)
			if ((rc = cli_wait_again(wt, ws[i].cc, ws[i].idx,
			                         "store", attempt, &f)))
				return rc;
			else
				cli_notify_status("waiting for the store of "
				                  "consumer %s (attempt %d)",
				                  ws[i].cc->name, attempt);
		cli_wait_done(wt, ws[i].idx);
	}
	for (int i = 0; i < n; i++) {
		for (int attempt = 1;
		     (rc = cli_try_open_source(cfg, ws[i].cc, &ws[i].src, &f));
		     attempt++)
			if ((rc = cli_wait_again(wt, ws[i].cc, ws[i].idx,
			                         "source", attempt, &f)))
				return rc;
			else
				cli_notify_status("waiting for the source of "
				                  "consumer %s (attempt %d)",
				                  ws[i].cc->name, attempt);
		cli_wait_done(wt, ws[i].idx);
	}
	return 0;
}

static void install_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_ignored;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
}

/* The SIGHUP check (thread): the file, then every selected consumer's
 * store side, read-only. */
static void *reload_main(void *arg)
{
	reload *r = arg;
	cli_config cfg;
	cli_open_fail f;
	char note[256];
	int found = 0;
	r->rc = 0;
	r->why[0] = '\0';
	if (cli_config_load(&cfg, r->path, r->why, sizeof(r->why)) < 0) {
		r->rc = CLI_EXIT_CONFIG;
	} else {
		for (int i = 0; i < cfg.nconsumers && !r->rc; i++) {
			const cli_consumer *cc = &cfg.consumers[i];
			if (r->only && strcmp(r->only, cc->name))
				continue;
			found = 1;
			if ((r->rc = cli_check_store(&cfg, cc, &f, note,
			                             sizeof(note))))
				snprintf(r->why, sizeof(r->why), "%s", f.msg);
		}
		if (!r->rc && r->only && !found) {
			r->rc = CLI_EXIT_CONFIG;
			snprintf(r->why, sizeof(r->why),
			         "%s declares no consumer \"%s\" any more",
			         r->path, r->only);
		}
	}
	cli_config_free(&cfg);
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A SIGHUP to handle, or its check finished: start the check, or act on
 * its outcome. Called by the main loop with g_mu held. */
static void reload_step(void)
{
	reload *r = &g_reload;
	if (r->active && __atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
		char e[1600];
		pthread_join(r->th, NULL);
		r->active = 0;
		if (r->rc) {
			inbox__log(INBOX_LOG_ERROR, NULL,
			           "\"event\":\"reload_refused\",\"config\":"
			           "\"%s\",\"error\":\"%s\",\"hint\":\"the "
			           "running config goes on; fix the file and "
			           "send SIGHUP again\"",
			           esc(e, sizeof(e), r->path),
			           esc(e + 800, sizeof(e) - 800, r->why));
			cli_notify_status("running; the config sent with "
			                  "SIGHUP was refused: %s",
			                  r->why);
		} else if (!inbox__flag(&g_signals)) {
			inbox__log(INBOX_LOG_INFO, NULL,
			           "\"event\":\"reload\",\"config\":\"%s\","
			           "\"hint\":\"the new config passed its "
			           "checks: draining, then exiting 0 for the "
			           "service manager to start inbox with it\"",
			           esc(e, sizeof(e), r->path));
			__atomic_store_n(&g_signo, SIGHUP, __ATOMIC_RELEASE);
			inbox__flag_set(&g_signals, 1);
			inbox__flag_set(&g_stop, 1);
		}
	}
	if (r->active || !inbox__flag(&g_hup) || inbox__flag(&g_signals))
		return;
	inbox__flag_set(&g_hup, 0);
	inbox__log(INBOX_LOG_INFO, NULL,
	           "\"event\":\"reload_check\",\"signal\":\"SIGHUP\"");
	r->done = 0;
	/* The thread inherits a mask without the signals: they stay the
	 * main thread's. */
	sigset_t block, old;
	sigfillset(&block);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	int err = pthread_create(&r->th, NULL, reload_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err == 0)
		r->active = 1;
	else
		inbox__log(INBOX_LOG_ERROR, NULL,
		           "\"event\":\"reload_refused\",\"error\":\"cannot "
		           "start a thread\"");
}

/* The log's events (cli_log_tap): a failed poll makes the consumer's
 * source unreachable for /readyz until its next batch. */
static void run_tap(inbox_log_level level, const char *consumer,
                    const char *event, const char *fields)
{
	(void)level;
	if (!consumer || strcmp(event, "poll_failed"))
		return;
	for (int i = 0; i < g_nws; i++) {
		if (strcmp(g_ws[i].cc->name, consumer))
			continue;
		/* fields: {"error":"..."}, JSON-escaped: shown as it is. */
		char why[300] = "";
		const char *p = strstr(fields, "\"error\":\"");
		if (p) {
			snprintf(why, sizeof(why), "%s", p + 9);
			size_t n = strlen(why);
			if (n >= 2 && why[n - 1] == '}' && why[n - 2] == '"')
				why[n - 2] = '\0';
		}
		cli_http_source_failed(g_http, g_ws[i].idx, why);
		return;
	}
}

/* Wait for the workers; enforce the drain deadline. */
static int wait_workers(double drain_s)
{
	double deadline = 0, t0 = 0;
	pthread_mutex_lock(&g_mu);
	for (;;) {
		int ign = __atomic_exchange_n(&g_ignored, 0, __ATOMIC_ACQ_REL);
		if (ign)
			inbox__log(INBOX_LOG_INFO, NULL,
			           "\"event\":\"signal_ignored\",\"signal\":"
			           "\"%s\"",
			           signal_name(ign));
		cli_http_heartbeat(g_http);
		cli_notify_watchdog();
		reload_step();
		if (inbox__flag(&g_signals) && deadline == 0) {
			t0 = inbox__mono_seconds();
			deadline = t0 + drain_s;
			cli_http_set_draining(g_http);
			cli_notify_stopping(
			    __atomic_load_n(&g_signo, __ATOMIC_ACQUIRE) ==
			            SIGHUP
			        ? "draining to restart with the new config"
			        : "draining after a stop signal");
			inbox__log(
			    INBOX_LOG_INFO, NULL,
			    "\"event\":\"draining\",\"signal\":\"%s\","
			    "\"consumers_running\":%d,\"deadline_s\":%.1f",
			    signal_name(
			        __atomic_load_n(&g_signo, __ATOMIC_ACQUIRE)),
			    g_running, drain_s);
		}
		if (g_running == 0)
			break;
		if (deadline > 0 && inbox__mono_seconds() > deadline) {
			inbox__log(
			    INBOX_LOG_ERROR, NULL,
			    "\"event\":\"drain_deadline_exceeded\","
			    "\"consumers_running\":%d,\"deadline_s\":%.1f,"
			    "\"hint\":\"exiting without acking the batch "
			    "in hand; it will be redelivered and "
			    "deduplicated\"",
			    g_running, drain_s);
			_exit(CLI_EXIT_DRAIN);
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&g_cv, &g_mu, &ts);
	}
	if (deadline > 0)
		inbox__log(INBOX_LOG_INFO, NULL,
		           "\"event\":\"drained\",\"duration_ms\":%.0f",
		           (inbox__mono_seconds() - t0) * 1000.0);
	pthread_mutex_unlock(&g_mu);
	return 0;
}

static int start_workers(worker *ws, int n)
{
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGUSR2);
	/* Workers inherit a mask without the signals, so the handler runs
	 * on the main thread. */
	pthread_sigmask(SIG_BLOCK, &block, &old);
	int err = 0;
	for (int i = 0; i < n && !err; i++) {
		pthread_mutex_lock(&g_mu);
		g_running++;
		pthread_mutex_unlock(&g_mu);
		err = pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
		if (err) {
			pthread_mutex_lock(&g_mu);
			g_running--;
			pthread_mutex_unlock(&g_mu);
			cli_error("cannot start a thread: %s", strerror(err));
			inbox__flag_set(&g_stop, 1);
		} else {
			ws[i].started = 1;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err ? -1 : 0;
}

/* The /metrics and /healthz endpoint, before any consumer starts. */
static int start_http(const cli_config *cfg, const worker *ws, int n,
                      const char *listen)
{
	const cli_consumer **cs = calloc((size_t)n, sizeof(*cs));
	char err[512];
	if (!cs)
		return CLI_EXIT_RUNTIME;
	for (int i = 0; i < n; i++)
		cs[i] = ws[i].cc;
	int rc = cli_http_start(&g_http, listen, cfg, cs, n, CLI_HTTP_RUN, err,
	                        sizeof(err));
	free(cs);
	if (rc < 0) {
		cli_error("metrics: %s", err);
		return CLI_EXIT_CONNECT;
	}
	inbox__log(INBOX_LOG_INFO, NULL,
	           "\"event\":\"metrics_listening\",\"listen\":\"%s\","
	           "\"paths\":[\"/metrics\",\"/healthz\",\"/livez\","
	           "\"/readyz\"]",
	           cli_http_address(g_http));
	return 0;
}

static void log_start(const worker *w)
{
	char src[512], st[512], e1[600], e2[600];
	cli_redact(w->cc->source, src, sizeof(src));
	cli_redact(cli_consumer_store(w->cfg, w->cc), st, sizeof(st));
	inbox__log(INBOX_LOG_INFO, w->cc->name,
	           "\"event\":\"start\",\"source\":\"%s\",\"store\":\"%s\","
	           "\"batch_size\":%zu",
	           esc(e1, sizeof(e1), src), esc(e2, sizeof(e2), st),
	           w->cc->batch_size);
}

int cli_cmd_run(int argc, char **argv)
{
	const char *path = NULL, *only = NULL, *listen = NULL;
	double drain_s = 10.0, connect_s = -1.0; /* < 0: wait forever */
	int once = 0, dispatch = 0;
	cli_dispatchers *dg = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--once")) {
			once = 1;
		} else if (!strcmp(argv[i], "--dispatch")) {
			dispatch = 1;
		} else if (!strcmp(argv[i], "--metrics") && i + 1 < argc) {
			struct sockaddr_storage ss;
			socklen_t sslen;
			char why[256];
			listen = argv[++i];
			if (cli_http_parse_addr(listen, &ss, &sslen, why,
			                        sizeof(why)) < 0) {
				cli_error("--metrics: %s", why);
				return CLI_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--consumer") && i + 1 < argc) {
			only = argv[++i];
		} else if (!strcmp(argv[i], "--drain-timeout") &&
		           i + 1 < argc) {
			if (cli_parse_seconds(argv[++i], &drain_s) < 0) {
				cli_error("--drain-timeout: \"%s\" is not a "
				          "duration (10, 10s, 500ms)",
				          argv[i]);
				return CLI_EXIT_USAGE;
			}
		} else if (!strcmp(argv[i], "--connect-timeout") &&
		           i + 1 < argc) {
			if (cli_parse_seconds(argv[++i], &connect_s) < 0) {
				cli_error("--connect-timeout: \"%s\" is not a "
				          "duration (0, 30s, 5m)",
				          argv[i]);
				return CLI_EXIT_USAGE;
			}
		} else if (argv[i][0] == '-' || path) {
			cli_error("run: unexpected argument \"%s\"", argv[i]);
			fputs(cli_run_usage, stderr);
			return CLI_EXIT_USAGE;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		fputs(cli_run_usage, stderr);
		return CLI_EXIT_USAGE;
	}
	install_signals();
	cli_notify_init();
	cli_config cfg;
	const cli_consumer *sel;
	int rc = cli_load_selected(&cfg, path, only, &sel);
	if (rc)
		return rc;
	int n = sel ? 1 : cfg.nconsumers;
	worker *ws = calloc((size_t)n, sizeof(*ws));
	if (!ws) {
		cli_config_free(&cfg);
		return CLI_EXIT_RUNTIME;
	}
	for (int i = 0; i < n; i++) {
		ws[i].cfg = &cfg;
		ws[i].cc = sel ? sel : &cfg.consumers[i];
		ws[i].once = once;
		ws[i].idx = i;
	}
	if (!listen)
		listen = cfg.metrics_listen;
	/* /healthz first: it says "not ready" while we wait. */
	rc = listen ? start_http(&cfg, ws, n, listen) : 0;
	cli_waiter wt;
	cli_waiter_init(&wt, connect_s, &g_stop, g_http, &g_mu);
	if (rc == 0 && (rc = open_all(&cfg, ws, n, &wt)) < 0) {
		inbox__log(INBOX_LOG_INFO, NULL,
		           "\"event\":\"stopped\",\"result\":\"ok\","
		           "\"while\":\"waiting for a store or source\"");
		rc = CLI_EXIT_OK;
	}
	if (rc == 0 && dispatch &&
	    (rc = cli_dispatch_start(&cfg, sel, CLI_DISPATCH_FOREVER, &g_stop,
	                             g_http, &wt, &dg)) < 0)
		rc = CLI_EXIT_OK; /* stopped while waiting: g_stop is set */
	if (rc == 0 && inbox__flag(&g_stop))
		rc = CLI_EXIT_OK; /* stopped while starting: nothing read */
	else if (rc == 0) {
		for (int i = 0; i < n; i++)
			log_start(&ws[i]);
		g_ws = ws;
		g_nws = n;
		cli_log_tap = run_tap;
		g_reload.path = path;
		g_reload.only = only;
		if (start_workers(ws, n) < 0)
			rc = CLI_EXIT_RUNTIME;
		else {
			char st[64];
			snprintf(st, sizeof(st), "running %d consumer%s", n,
			         n == 1 ? "" : "s");
			cli_notify_ready(st);
		}
		wait_workers(drain_s);
		for (int i = 0; i < n; i++) {
			if (!ws[i].started)
				continue;
			pthread_join(ws[i].th, NULL);
			if (ws[i].rc < 0)
				rc = CLI_EXIT_RUNTIME;
		}
		/* --once: the dispatchers finish the effects, then stop. */
		if (once && !inbox__flag(&g_signals))
			cli_dispatch_drain(dg);
		if (rc == CLI_EXIT_RUNTIME)
			inbox__log(
			    INBOX_LOG_ERROR, NULL,
			    "\"event\":\"exiting\",\"hint\":\"a "
			    "consumer stopped on an error (see its "
			    "'stopped' line); restart to resume where it "
			    "left off\"");
	}
	if (rc != 0)
		inbox__flag_set(&g_stop, 1); /* the dispatchers stop too */
	if (cli_dispatch_join(dg) && rc == 0)
		rc = CLI_EXIT_RUNTIME;
	/* A config check still running (a store that does not answer):
	 * not waited for. */
	if (g_reload.active &&
	    __atomic_load_n(&g_reload.done, __ATOMIC_ACQUIRE))
		pthread_join(g_reload.th, NULL);
	else if (g_reload.active)
		pthread_detach(g_reload.th);
	g_reload.active = 0;
	cli_log_tap = NULL;
	cli_http_stop(g_http);
	g_http = NULL;
	close_all(ws, n);
	free(ws);
	cli_config_free(&cfg);
	return rc;
}
