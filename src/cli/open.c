/* Opening stores, consumers and sources for the configured consumers. */
#include "cli/open.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "cli/cli.h"
#include "cli/http.h"
#include "core/internal.h"

int cli_load(cli_config *cfg, const char *path)
{
	char err[1024];
	if (cli_config_load(cfg, path, err, sizeof(err)) == 0)
		return 0;
	cli_error("%s", err);
	cli_config_free(cfg);
	return CLI_EXIT_CONFIG;
}

int cli_load_selected(cli_config *cfg, const char *path, const char *only,
                      const cli_consumer **sel)
{
	int rc = cli_load(cfg, path);
	*sel = NULL;
	if (rc)
		return rc;
	if (only && !(*sel = cli_find_consumer(cfg, only))) {
		cli_config_free(cfg);
		return CLI_EXIT_USAGE;
	}
	return 0;
}

static int failed(cli_open_fail *f, int rc, int exit_code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int failed(cli_open_fail *f, int rc, int exit_code, const char *fmt, ...)
{
	va_list ap;
	f->rc = rc;
	f->exit_code = exit_code;
	f->hint[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
	return exit_code;
}

int cli_open_retryable(const cli_open_fail *f)
{
	return f->rc == INBOX_ERR_CONNECT || f->rc == INBOX_ERR_TRANSIENT ||
	       f->rc == INBOX_ERR_TIMEOUT;
}

void cli_open_report(const cli_open_fail *f)
{
	cli_error("%s", f->msg);
	if (f->hint[0])
		fprintf(stderr, "inbox: hint: %s\n", f->hint);
}

int cli_try_open_store(const cli_config *cfg, const cli_consumer *c,
                       int auto_migrate, inbox_store **out, cli_open_fail *f)
{
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	o.table_prefix = cfg->table_prefix;
	o.schema = cfg->schema;
	o.auto_migrate = auto_migrate < 0 ? cfg->auto_migrate : auto_migrate;
	o.lock_timeout_ms = c->lock_timeout_ms;
	o.statement_timeout_ms = c->statement_timeout_ms;
	o.idle_in_transaction_timeout_ms = c->idle_timeout_ms;
	const char *url = cli_consumer_store(cfg, c);
	int line = c->store ? c->store_pos.line : cfg->store_pos.line;
	int rc = inbox_store_open(out, url, &o);
	char red[512], msg[1024];
	int v = -1;
	if (rc == INBOX_OK && o.auto_migrate == 0 &&
	    inbox_store_schema_version(*out, &v) == INBOX_OK &&
	    v < INBOX__SCHEMA_VERSION) {
		/* Read-only commands on a store never migrated (or migrated
		 * by an older inbox): say so, not "no such table". */
		if (v == 0)
			snprintf(msg, sizeof(msg),
			         "its tables do not exist yet");
		else
			snprintf(msg, sizeof(msg),
			         "its tables are at schema version %d, this "
			         "inbox needs %d",
			         v, INBOX__SCHEMA_VERSION);
		failed(f, INBOX_ERR_SCHEMA, CLI_EXIT_CONNECT,
		       "%s:%d: consumer \"%s\": store %s: %s", cfg->path, line,
		       c->name, cli_redact(url, red, sizeof(red)), msg);
		snprintf(f->hint, sizeof(f->hint),
		         "run \"inbox migrate %s\" to create or upgrade the "
		         "tables",
		         cfg->path);
		inbox_store_close(*out);
		*out = NULL;
		return f->exit_code;
	}
	if (rc == INBOX_OK)
		return 0;
	snprintf(msg, sizeof(msg), "%s",
	         *out ? inbox_store_errmsg(*out) : inbox_strerror(rc));
	if (!msg[0])
		snprintf(msg, sizeof(msg), "%s", inbox_strerror(rc));
	cli_scrub(msg, sizeof(msg), url);
	failed(f, rc, cli_open_exit_code(rc),
	       "%s:%d: consumer \"%s\": cannot open store %s: %s", cfg->path,
	       line, c->name, cli_redact(url, red, sizeof(red)), msg);
	if (rc == INBOX_ERR_SCHEMA && !o.auto_migrate)
		snprintf(f->hint, sizeof(f->hint),
		         "run \"inbox migrate %s\" to create or upgrade the "
		         "tables",
		         cfg->path);
	inbox_store_close(*out);
	*out = NULL;
	return f->exit_code;
}

int cli_open_store(const cli_config *cfg, const cli_consumer *c,
                   int auto_migrate, inbox_store **out)
{
	cli_open_fail f;
	int rc = cli_try_open_store(cfg, c, auto_migrate, out, &f);
	if (rc)
		cli_open_report(&f);
	return rc;
}

int cli_try_prepare_effects(const cli_config *cfg, const cli_consumer *c,
                            inbox_store *st, cli_open_fail *f)
{
	char err[1024];
	int step = 0;
	int rc = inbox_decl_prepare(c->decl, st, &step, err, sizeof(err));
	if (rc == 0)
		return 0;
	cli_scrub(err, sizeof(err), cli_consumer_store(cfg, c));
	/* The database going away is no config error: retry. */
	int code =
	    rc == INBOX_ERR_TRANSIENT ? CLI_EXIT_CONNECT : CLI_EXIT_CONFIG;
	if (step == 0)
		return failed(f, rc, code,
		              "%s:%d: consumer \"%s\": setup SQL failed: %s",
		              cfg->path, c->setup_pos.line, c->name, err);
	const cli_step *s = &c->steps[step - 1];
	if (s->kind == CLI_STEP_SQL)
		return failed(f, rc, code,
		              "%s:%d:%d: consumer \"%s\", effect step %d: %s",
		              cfg->path, s->sql_pos.line, s->sql_pos.col,
		              c->name, step, err);
	return failed(f, rc, code, "%s:%d: consumer \"%s\", effect step %d: %s",
	              cfg->path, s->pos.line, c->name, step, err);
}

int cli_prepare_effects(const cli_config *cfg, const cli_consumer *c,
                        inbox_store *st)
{
	cli_open_fail f;
	int rc = cli_try_prepare_effects(cfg, c, st, &f);
	if (rc)
		cli_open_report(&f);
	return rc;
}

int cli_try_open_consumer(const cli_config *cfg, const cli_consumer *c,
                          inbox_store *st, inbox_consumer **out,
                          cli_open_fail *f)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = c->name;
	o.key_template = c->key;
	o.id_pointer = c->id;
	o.fingerprint_pointer = c->fingerprint;
	o.retention_seconds = c->retention_s;
	o.max_attempts = c->max_attempts;
	o.max_deliveries = c->max_deliveries;
	o.lease_ms = c->lease_ms;
	o.max_payload = c->max_payload;
	o.max_result_bytes = c->max_result;
	o.replay_policy = c->replay;
	o.handler = inbox_decl_handler;
	o.handler_payload = c->decl;
	o.json_schema = c->schema_json;
	o.batch_timeout_ms = c->batch_timeout_ms;
	char err[512] = "";
	int rc = inbox_consumer_open(out, st, &o, err, sizeof(err));
	if (rc == INBOX_OK)
		return 0;
	cli_scrub(err, sizeof(err), cli_consumer_store(cfg, c));
	return failed(f, rc,
	              rc == INBOX_ERR_INVALID ? CLI_EXIT_CONFIG
	                                      : cli_open_exit_code(rc),
	              "%s:%d: consumer \"%s\": %s", cfg->path, c->pos.line,
	              c->name, err[0] ? err : inbox_strerror(rc));
}

int cli_open_consumer(const cli_config *cfg, const cli_consumer *c,
                      inbox_store *st, inbox_consumer **out)
{
	cli_open_fail f;
	int rc = cli_try_open_consumer(cfg, c, st, out, &f);
	if (rc)
		cli_open_report(&f);
	return rc;
}

/* What the source of c is opened (and checked) with. */
static inbox_source_options source_options(const cli_consumer *c)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = c->name;
	o.max_batch = c->batch_size;
	o.retry_delay_ms = c->retry_delay_ms;
	o.max_payload = c->max_payload;
	return o;
}

int cli_check_source_url(const cli_config *cfg, const cli_consumer *c,
                         cli_open_fail *f)
{
	inbox_source_options o = source_options(c);
	char red[512], why[512];
	int rc = inbox_source_check(c->source, &o, why, sizeof(why));
	if (rc == INBOX_OK)
		return 0;
	if (!why[0])
		snprintf(why, sizeof(why), "%s", inbox_strerror(rc));
	cli_scrub(why, sizeof(why), c->source);
	return failed(
	    f, rc, rc == INBOX_ERR_NOMEM ? CLI_EXIT_RUNTIME : CLI_EXIT_CONFIG,
	    "%s:%d: consumer \"%s\": source %s: %s", cfg->path,
	    c->source_pos.line, c->name,
	    cli_redact(c->source, red, sizeof(red)), why);
}

int cli_try_open_source(const cli_config *cfg, const cli_consumer *c,
                        inbox_source **out, cli_open_fail *f)
{
	inbox_source_options o = source_options(c);
	int rc = inbox_source_open(out, c->source, &o);
	if (rc == INBOX_OK)
		return 0;
	char red[512], msg[1024];
	snprintf(msg, sizeof(msg), "%s", *out ? inbox_source_errmsg(*out) : "");
	if (!msg[0])
		snprintf(msg, sizeof(msg), "%s", inbox_strerror(rc));
	cli_scrub(msg, sizeof(msg), c->source);
	failed(f, rc, cli_open_exit_code(rc),
	       "%s:%d: consumer \"%s\": cannot open source %s: %s", cfg->path,
	       c->source_pos.line, c->name,
	       cli_redact(c->source, red, sizeof(red)), msg);
	inbox_source_close(*out);
	*out = NULL;
	return f->exit_code;
}

int cli_open_source(const cli_config *cfg, const cli_consumer *c,
                    inbox_source **out)
{
	cli_open_fail f;
	int rc = cli_try_open_source(cfg, c, out, &f);
	if (rc)
		cli_open_report(&f);
	return rc;
}

#define WAIT_FIRST_MS 200
#define WAIT_MAX_MS   10000

void cli_waiter_init(cli_waiter *wt, double connect_s,
                     volatile sig_atomic_t *stop, struct cli_http *http,
                     pthread_mutex_t *mu)
{
	wt->deadline = connect_s < 0    ? 0
	               : connect_s == 0 ? -1
	                                : inbox__mono_seconds() + connect_s;
	wt->delay_ms = WAIT_FIRST_MS;
	wt->stop = stop;
	wt->http = http;
	wt->mu = mu;
}

/* JSON-escape into buf: not cut at inbox__log_escape's ~500 bytes, and
 * not limited to four results per line. */
static const char *esc(char *buf, size_t len, const char *s)
{
	return inbox__log_escape_into(buf, len, s);
}

/* *stop is written by a signal handler, which may run on any thread
 * (the HTTP server's too): read atomically. */
static int stopped(const cli_waiter *wt)
{
	return wt->stop && inbox__flag(wt->stop);
}

/* The "waiting" line of a failed attempt: retry_in_ms the wait before
 * the next one, or 0 and "gave_up":true for the one that gives up. */
static void log_waiting(const cli_waiter *wt, const cli_consumer *cc,
                        const char *what, int attempt, const cli_open_fail *f,
                        int delay)
{
	char e1[1500];
	if (wt->mu)
		pthread_mutex_lock(wt->mu);
	inbox__log(INBOX_LOG_WARN, cc->name,
	           "\"event\":\"waiting\",\"for\":\"%s\",\"attempt\":%d,"
	           "\"error\":\"%s\",\"retry_in_ms\":%d%s",
	           what, attempt, esc(e1, sizeof(e1), f->msg), delay,
	           delay ? "" : ",\"gave_up\":true");
	if (wt->mu)
		pthread_mutex_unlock(wt->mu);
}

int cli_wait_again(cli_waiter *wt, const cli_consumer *cc, int hidx,
                   const char *what, int attempt, const cli_open_fail *f)
{
	double now = inbox__mono_seconds();
	if (!cli_open_retryable(f) || wt->deadline < 0 ||
	    (wt->deadline > 0 && now >= wt->deadline)) {
		if (cli_open_retryable(f) && wt->deadline > 0) {
			/* every attempt of a wait has its line, the last too:
			 * a first one that alone outlasted --connect-timeout
			 * is still seen as waited for, not as refused */
			log_waiting(wt, cc, what, attempt, f, 0);
			cli_open_report(f);
			cli_error(
			    "gave up waiting for the %s of consumer \"%s\" "
			    "(--connect-timeout)",
			    what, cc->name);
		} else {
			cli_open_report(f);
		}
		return f->exit_code;
	}
	int delay = wt->delay_ms;
	if (wt->deadline > 0 && now + delay / 1000.0 > wt->deadline)
		delay = (int)((wt->deadline - now) * 1000.0) + 1;
	char reason[1700];
	log_waiting(wt, cc, what, attempt, f, delay);
	snprintf(reason, sizeof(reason), "waiting for its %s (attempt %d): %s",
	         what, attempt, f->msg);
	cli_http_set_waiting(wt->http, hidx, reason);
	/* in slices, so that a stop signal ends the wait at once */
	for (int ms = delay; ms > 0 && !stopped(wt); ms -= 50) {
		int slice = ms > 50 ? 50 : ms;
		struct timespec ts = {0, (long)slice * 1000000L};
		nanosleep(&ts, NULL);
	}
	wt->delay_ms =
	    wt->delay_ms * 2 > WAIT_MAX_MS ? WAIT_MAX_MS : wt->delay_ms * 2;
	return stopped(wt) ? -1 : 0;
}

void cli_wait_done(cli_waiter *wt, int hidx)
{
	wt->delay_ms = WAIT_FIRST_MS;
	cli_http_set_waiting(wt->http, hidx, NULL);
}

const cli_consumer *cli_find_consumer(const cli_config *cfg, const char *name)
{
	for (int i = 0; i < cfg->nconsumers; i++)
		if (strcmp(cfg->consumers[i].name, name) == 0)
			return &cfg->consumers[i];
	cli_error("no consumer named \"%s\" in %s", name, cfg->path);
	fprintf(stderr, "inbox: the file declares:");
	for (int i = 0; i < cfg->nconsumers; i++)
		fprintf(stderr, " %s", cfg->consumers[i].name);
	fputc('\n', stderr);
	return NULL;
}
