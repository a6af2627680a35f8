/*
 * /metrics and /healthz for `inbox run` and `inbox dispatch`, served by
 * libmicrohttpd with one internal polling thread: requests are handled one
 * at a time, so the store handles below are only ever used by that thread.
 *
 * The store is read at most once a second per consumer (count queries on a
 * large inbox are not free); a scrape or probe in between reuses the last
 * reading. `inbox dispatch` reads only the outbox's numbers: the inbox
 * gauges belong to the `inbox run` process, and showing them twice would
 * double them in every sum. Errors shown by /healthz are scrubbed of the
 * URL's password.
 */
#include "cli/http.h"

#include <arpa/inet.h>
#include <inbox/http.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inbox/admin.h>
#include <inbox/metrics.h>
#include <inbox/sys/store.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/url.h"
#include "cli/cli.h"
#include "core/internal.h"

/* Seconds a store reading is reused. */
#define READ_EVERY_S 1.0
/* /livez: the supervising loop ticks every 50 ms; this long without a
 * tick is a process that is stuck. */
#define LIVE_STALE_S 10.0
/* /readyz: a source whose last poll failed this recently, with no batch
 * since, is not reachable (the runner retries a failed poll within its
 * 5 s maximum backoff, so a source still down fails again before this). */
#define SOURCE_FAIL_S 15.0

/* The consumer's dispatcher in this process. */
enum { D_NONE = 0, D_RUNNING = 1, D_STOPPED = 2 };

typedef struct mon {
	const cli_consumer *cc;
	/* Written by the consumer thread, under h->mu. */
	inbox_stats snap;
	int have_snap;
	int running;
	int started;       /* has run: before, its store is not read */
	char waiting[600]; /* not started yet: why ("" = not waiting) */
	double
	    last_batch; /* inbox__mono_seconds() of the last batch, 0 = none */
	double src_failed_at; /* of the last failed poll, 0 = none */
	char src_err[300];    /* its error (scrubbed by the library) */
	/* Written by the dispatcher thread, under h->mu. */
	inbox_outbox_stats osnap;
	int have_osnap;
	int dispatcher; /* D_* */
	/* The consumer's source while it runs, for its lag (under h->mu;
	 * cleared when it stops, before the source is closed). */
	const inbox_source *src;
	/* HTTP thread only. */
	inbox_store *st;
	double
	    read_at; /* inbox__mono_seconds() of the last reading, 0 = never */
	int read_full; /* the last reading was the full stats */
	int store_ok;
	inbox_admin_stats db;
	inbox_admin_generations gens; /* count <= 0: none to show */
	unsigned estimated;           /* INBOX_ADMIN_EST_* of db and gens */
	char err[512];
} mon;

struct cli_http {
	struct MHD_Daemon *d;
	const cli_config *cfg;
	cli_http_role role;
	pthread_mutex_t mu;
	int draining;
	double beat; /* the supervising loop's last tick, 0 = none yet */
	inbox_providers *providers; /* under mu */
	mon *m;
	int n;
	char addr[80];
};

/* ---- addresses --------------------------------------------------------- */

/* 0..65535: 0 asks for an ephemeral port (tests read the address back). */
static int parse_port(const char *s, int *port)
{
	long long v;
	if (inbox__url_int(&v, s, strlen(s), 0, 65535) < 0)
		return -1;
	*port = (int)v;
	return 0;
}

int cli_http_parse_addr(const char *s, struct sockaddr_storage *ss,
                        socklen_t *sslen, char *err, size_t errlen)
{
	char host[64] = "127.0.0.1";
	const char *port_s = s;
	int port, v6 = 0;
	memset(ss, 0, sizeof(*ss));
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':' ||
		    (size_t)(close - s - 1) >= sizeof(host))
			goto bad;
		memcpy(host, s + 1, (size_t)(close - s - 1));
		host[close - s - 1] = '\0';
		port_s = close + 2;
		v6 = 1;
	} else if (strchr(s, ':')) {
		const char *colon = strrchr(s, ':');
		size_t n = (size_t)(colon - s);
		if (n >= sizeof(host))
			goto bad;
		if (n > 0) {
			memcpy(host, s, n);
			host[n] = '\0';
		}
		port_s = colon + 1;
	}
	if (parse_port(port_s, &port) < 0)
		goto bad;
	if (!strcmp(host, "localhost"))
		strcpy(host, "127.0.0.1");
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
			goto bad;
		*sslen = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
			goto bad;
		*sslen = sizeof(*a);
	}
	return 0;
bad:
	snprintf(err, errlen,
	         "\"%s\" is not a listen address (write PORT, HOST:PORT with "
	         "an IP address, or [IPV6]:PORT; e.g. 127.0.0.1:9464)",
	         s);
	return -1;
}

/* ---- JSON ------------------------------------------------------------- */

static int json_str(inbox__buf *b, const char *s)
{
	int bad = inbox__buf_putc(b, '"');
	for (const unsigned char *p = (const unsigned char *)(s ? s : "");
	     *p && !bad; p++) {
		if (*p == '"' || *p == '\\')
			bad |= inbox__buf_printf(b, "\\%c", *p);
		else if (*p < 0x20)
			bad |= inbox__buf_printf(b, "\\u%04x", *p);
		else
			bad |= inbox__buf_putc(b, (char)*p);
	}
	return bad | inbox__buf_putc(b, '"');
}

/* ---- reading the stores (HTTP thread) ----------------------------------- */

static void store_failed(cli_http *h, mon *m, const char *what, int rc)
{
	const char *url = cli_consumer_store(h->cfg, m->cc);
	const char *msg = m->st ? inbox_store_errmsg(m->st) : "";
	snprintf(m->err, sizeof(m->err), "%s: %s", what,
	         msg && *msg ? msg : inbox_strerror(rc));
	cli_scrub(m->err, sizeof(m->err), url);
	m->store_ok = 0;
	/* A fresh connection next time rather than a handle in an unknown
	 * state. */
	inbox_store_close(m->st);
	m->st = NULL;
}

static int open_monitor(cli_http *h, mon *m)
{
	if (m->st)
		return 0;
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	o.table_prefix = h->cfg->table_prefix;
	o.schema = h->cfg->schema;
	o.auto_migrate = 0;
	int rc =
	    inbox_store_open(&m->st, cli_consumer_store(h->cfg, m->cc), &o);
	if (rc == INBOX_OK)
		return 0;
	store_failed(h, m, "cannot open the store", rc);
	return -1;
}

static int ping_row(int ncols, const char *const *v, void *payload)
{
	(void)ncols;
	(void)v;
	(void)payload;
	return 1;
}

/* `inbox dispatch`: the outbox gauges only, every other number absent. */
static int read_outbox(mon *m)
{
	int64_t pending = -1;
	double age = 0;
	int rc = inbox_outbox_pending(m->st, m->cc->name, &pending, &age);
	if (rc != INBOX_OK)
		return rc;
	memset(&m->db, 0, sizeof(m->db));
	m->db.version = INBOX_ADMIN_STATS_VERSION;
	m->db.records = m->db.completed = m->db.processing = -1;
	m->db.failed = m->db.dead = m->db.expired = -1;
	m->db.oldest_age_ms = m->db.oldest_created_age_ms = -1;
	m->db.dead_letters = m->db.dead_letters_pending = -1;
	m->db.conflicts = m->db.replayed = -1;
	m->db.outbox_pending = pending;
	m->db.outbox_oldest_age_ms = pending > 0 ? (int64_t)(age * 1000.0) : -1;
	return INBOX_OK;
}

/* Refresh m's reading if it is older than READ_EVERY_S: the full stats
 * when `full`, else a ping. */
static void refresh(cli_http *h, mon *m, int full)
{
	double now = inbox__mono_seconds();
	if (m->read_at > 0 && now - m->read_at < READ_EVERY_S &&
	    (m->read_full || !full || !m->store_ok))
		return;
	/* `inbox run` serves while it waits for its stores and opens them
	 * (`inbox dispatch` while it waits for a store):
	 * a consumer not started yet is not ready whatever its store says,
	 * and a reading then (a store that does not answer, tables being
	 * created) would only hold the request up or be wrong a moment
	 * later. */
	pthread_mutex_lock(&h->mu);
	int started = m->started, waiting = m->waiting[0] != '\0';
	pthread_mutex_unlock(&h->mu);
	if ((h->role == CLI_HTTP_RUN && !started) || waiting)
		return;
	m->read_at = now;
	m->read_full = full;
	/* A private in-memory database cannot be read from another
	 * connection: nothing to check, no numbers to show. */
	if (inbox_store_url_private(cli_consumer_store(h->cfg, m->cc))) {
		m->store_ok = 1;
		m->read_full = 0;
		return;
	}
	if (open_monitor(h, m) < 0)
		return;
	int rc;
	if (!full)
		rc = inbox_store_query(m->st, "SELECT 1", 0, NULL, ping_row,
		                       NULL);
	else if (h->role == CLI_HTTP_DISPATCH)
		rc = read_outbox(m);
	else {
		/* A scrape's cost must not grow with the inbox. */
		m->db.version = INBOX_ADMIN_STATS_VERSION;
		rc = inbox_admin_stats_estimate(m->st, m->cc->name,
		                                INBOX_METRICS_EXACT_BELOW,
		                                &m->db, &m->estimated);
	}
	/* (zeroed, count 0 = none shown, whenever it is not read) */
	memset(&m->gens, 0, sizeof(m->gens));
	m->gens.version = INBOX_ADMIN_GENERATIONS_VERSION;
	if (rc == INBOX_OK && full && h->role != CLI_HTTP_DISPATCH) {
		unsigned e = 0;
		inbox_admin_generations_estimate(
		    m->st, INBOX_METRICS_EXACT_BELOW, &m->gens, &e);
		m->estimated |= e;
	}
	if (rc != INBOX_OK) {
		store_failed(h, m, full ? "reading the store" : "store ping",
		             rc);
		return;
	}
	m->store_ok = 1;
	m->err[0] = '\0';
}

/* ---- the two pages ------------------------------------------------------- */

static char *metrics_page(cli_http *h, size_t *len)
{
	inbox_metrics_consumer *cs = calloc((size_t)h->n, sizeof(*cs));
	inbox_stats *snaps = calloc((size_t)h->n, sizeof(*snaps));
	inbox_outbox_stats *osnaps = calloc((size_t)h->n, sizeof(*osnaps));
	char *out = NULL;
	if (!cs || !snaps || !osnaps)
		goto done;
	for (int i = 0; i < h->n; i++)
		refresh(h, &h->m[i], 1);
	pthread_mutex_lock(&h->mu);
	for (int i = 0; i < h->n; i++) {
		mon *m = &h->m[i];
		cs[i].version = INBOX_METRICS_CONSUMER_VERSION;
		cs[i].name = m->cc->name;
		cs[i].store = m->store_ok && m->read_full ? &m->db : NULL;
		cs[i].generations = cs[i].store ? &m->gens : NULL;
		cs[i].estimated = m->estimated;
		cs[i].lag = cs[i].lag_bytes = -1;
		if (m->src) /* the cache of its polling thread */
			inbox_source_lag(m->src, &cs[i].lag, &cs[i].lag_bytes);
		if (h->role == CLI_HTTP_RUN) {
			snaps[i] = m->snap;
			snaps[i].version = INBOX_STATS_VERSION;
			/* Zero counters until the first batch: the series
			 * exist from the start, so rate() has a baseline. */
			cs[i].counters = &snaps[i];
			cs[i].running = m->running;
		} else {
			cs[i].running = -1; /* no consumer runs here */
		}
		if (m->have_osnap) {
			osnaps[i] = m->osnap;
			osnaps[i].version = INBOX_OUTBOX_STATS_VERSION;
			cs[i].outbox = &osnaps[i];
		}
	}
	inbox_provider_info *ps = NULL;
	size_t nps = 0;
	if (h->providers &&
	    inbox_providers_info(h->providers, INBOX_PROVIDER_INFO_VERSION, &ps,
	                         &nps) < 0)
		nps = 0;
	pthread_mutex_unlock(&h->mu);
	if (inbox_metrics_render(&out, len, cs, (size_t)h->n) != INBOX_OK)
		out = NULL;
	char *pout = NULL;
	size_t plen = 0;
	if (out && nps &&
	    inbox_metrics_render_providers(&pout, &plen, ps, nps) == INBOX_OK) {
		char *both = realloc(out, *len + plen + 1);
		if (both) {
			memcpy(both + *len, pout, plen + 1);
			*len += plen;
			out = both;
		}
	}
	free(pout);
	free(ps);
	pout = NULL; /* the http:// sources' counters (<inbox/http.h>) */
	if (out && inbox_http_metrics_render(&pout, &plen) == INBOX_OK &&
	    plen) {
		char *both = realloc(out, *len + plen + 1);
		if (both) {
			memcpy(both + *len, pout, plen + 1);
			*len += plen;
			out = both;
		}
	}
	free(pout);
	/* process_* (start time, memory, descriptors), standard names */
	char *xout = NULL;
	size_t xlen = 0;
	if (out && inbox_metrics_render_process(&xout, &xlen) == INBOX_OK) {
		char *both = realloc(out, *len + xlen + 1);
		if (both) {
			memcpy(both + *len, xout, xlen + 1);
			*len += xlen;
			out = both;
		}
	}
	free(xout);
done:
	free(cs);
	free(snaps);
	free(osnaps);
	return out;
}

/* /healthz (ready 0) and /readyz (ready 1: the sources too). */
static char *health_page(cli_http *h, size_t *len, int *healthy, int ready)
{
	inbox__buf b = INBOX__BUF_INIT, list = INBOX__BUF_INIT,
	           reason = INBOX__BUF_INIT;
	int bad = 0, ok = 1;
	for (int i = 0; i < h->n; i++)
		refresh(h, &h->m[i], 0);
	double now = inbox__mono_seconds();
	pthread_mutex_lock(&h->mu);
	if (h->draining) {
		ok = 0;
		bad |= inbox__buf_puts(&reason, "draining after a stop signal");
	}
	for (int i = 0; i < h->n; i++) {
		mon *m = &h->m[i];
		/* The thread this process runs for the consumer. */
		int running = h->role == CLI_HTTP_RUN
		                  ? m->running
		                  : m->dispatcher == D_RUNNING;
		const char *why = m->err;
		if (!running && m->waiting[0])
			why = m->waiting;
		else if (!running)
			why = h->role == CLI_HTTP_RUN
			          ? "not running"
			          : "dispatcher not running";
		else if (m->dispatcher == D_STOPPED)
			why = "its dispatcher stopped";
		/* A poll failed lately and no batch came since. */
		int src_down = ready && h->role == CLI_HTTP_RUN && running &&
		               m->src_failed_at > m->last_batch &&
		               now - m->src_failed_at < SOURCE_FAIL_S;
		if (src_down && m->store_ok)
			why = m->src_err;
		if ((!running || m->dispatcher == D_STOPPED || !m->store_ok ||
		     src_down) &&
		    ok) {
			ok = 0;
			bad |= inbox__buf_printf(&reason, "consumer %s: %s",
			                         m->cc->name, why);
		}
		bad |= inbox__buf_puts(&list, i ? ",{\"name\":" : "{\"name\":");
		bad |= json_str(&list, m->cc->name);
		bad |= inbox__buf_printf(
		    &list, ",\"running\":%s,\"store\":\"%s\"",
		    running ? "true" : "false",
		    m->store_ok ? "ok"
		    : (h->role == CLI_HTTP_RUN && !m->started) || m->waiting[0]
		        ? "unknown"
		        : "error");
		if (!running && m->waiting[0]) {
			bad |= inbox__buf_puts(&list, ",\"waiting\":");
			bad |= json_str(&list, m->waiting);
		}
		if (ready && h->role == CLI_HTTP_RUN)
			bad |= inbox__buf_printf(&list, ",\"source\":\"%s\"",
			                         src_down  ? "error"
			                         : running ? "ok"
			                                   : "unknown");
		if (src_down) {
			bad |= inbox__buf_puts(&list, ",\"source_error\":");
			bad |= json_str(&list, m->src_err);
		}
		if (m->dispatcher != D_NONE)
			bad |= inbox__buf_printf(
			    &list, ",\"dispatcher\":\"%s\"",
			    m->dispatcher == D_RUNNING ? "running" : "stopped");
		if (!m->store_ok && m->err[0]) {
			bad |= inbox__buf_puts(&list, ",\"error\":");
			bad |= json_str(&list, m->err);
		}
		if (m->last_batch > 0)
			bad |= inbox__buf_printf(&list,
			                         ",\"last_batch_age_s\":%.1f",
			                         now - m->last_batch);
		bad |= inbox__buf_puts(&list, "}");
	}
	pthread_mutex_unlock(&h->mu);
	bad |= inbox__buf_printf(&b, "{\"status\":\"%s\"",
	                         !ok     ? "unavailable"
	                         : ready ? "ready"
	                                 : "ok");
	if (!ok) {
		bad |= inbox__buf_puts(&b, ",\"reason\":");
		bad |= json_str(&b, reason.data);
	}
	bad |= inbox__buf_puts(&b, ",\"consumers\":[");
	bad |= inbox__buf_append(&b, list.data ? list.data : "", list.len);
	bad |= inbox__buf_puts(&b, "]}\n");
	inbox__buf_free(&list);
	inbox__buf_free(&reason);
	if (bad) {
		inbox__buf_free(&b);
		return NULL;
	}
	*healthy = ok;
	*len = b.len;
	return b.data;
}

/* /livez: the process works — its HTTP thread answers (this page) and its
 * supervising loop (signals, drain deadline, watchdog) has ticked lately.
 * Neither a store nor a broker being down makes it fail: restarting the
 * process would not bring them back. */
static char *live_page(cli_http *h, size_t *len, int *alive)
{
	inbox__buf b = INBOX__BUF_INIT;
	pthread_mutex_lock(&h->mu);
	double beat = h->beat, now = inbox__mono_seconds();
	int draining = h->draining;
	pthread_mutex_unlock(&h->mu);
	int bad;
	*alive = beat == 0 || now - beat < LIVE_STALE_S;
	if (*alive)
		bad = inbox__buf_printf(
		    &b, "{\"status\":\"ok\",\"state\":\"%s\"}\n",
		    beat == 0  ? "starting"
		    : draining ? "draining"
		               : "running");
	else
		bad = inbox__buf_printf(
		    &b,
		    "{\"status\":\"stuck\",\"reason\":\"the supervising "
		    "loop has not run for %.1f s\"}\n",
		    now - beat);
	if (bad) {
		inbox__buf_free(&b);
		return NULL;
	}
	*len = b.len;
	return b.data;
}

/* ---- libmicrohttpd glue ----------------------------------------------------
 */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status,
                             const char *type, char *body, size_t len)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result text(struct MHD_Connection *conn, unsigned status,
                            const char *msg)
{
	char *body = strdup(msg);
	return body ? reply(conn, status, "text/plain; charset=utf-8", body,
	                    strlen(body))
	            : MHD_NO;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_size, void **req)
{
	cli_http *h = cls;
	static int seen;
	(void)version;
	(void)upload;
	if (!*req) { /* headers only so far: wait for the end */
		*req = &seen;
		return MHD_YES;
	}
	if (*upload_size) { /* a body: ignored */
		*upload_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
		            "only GET and HEAD\n");
	size_t len = 0;
	if (!strcmp(url, "/metrics")) {
		char *body = metrics_page(h, &len);
		if (!body)
			return text(conn, 500, "out of memory\n");
		return reply(conn, MHD_HTTP_OK, INBOX_METRICS_CONTENT_TYPE,
		             body, len);
	}
	if (!strcmp(url, "/healthz") || !strcmp(url, "/readyz") ||
	    !strcmp(url, "/livez")) {
		int ok = 0;
		char *body = url[1] == 'l'
		                 ? live_page(h, &len, &ok)
		                 : health_page(h, &len, &ok, url[1] == 'r');
		if (!body)
			return text(conn, 500, "out of memory\n");
		return reply(conn,
		             ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
		             "application/json", body, len);
	}
	return text(conn, MHD_HTTP_NOT_FOUND,
	            "not found: try /metrics, /healthz, /livez or "
	            "/readyz\n");
}

/* libmicrohttpd's own messages, as log lines like everything else. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	inbox__log(INBOX_LOG_WARN, NULL, "\"event\":\"http\",\"error\":\"%s\"",
	           inbox__log_escape(msg));
}

int cli_http_start(cli_http **out, const char *listen, const cli_config *cfg,
                   const cli_consumer *const *cs, int n, cli_http_role role,
                   char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	*out = NULL;
	if (cli_http_parse_addr(listen, &ss, &sslen, err, errlen) < 0)
		return -1;
	cli_http *h = calloc(1, sizeof(*h));
	mon *m = calloc((size_t)(n > 0 ? n : 1), sizeof(*m));
	if (!h || !m) {
		free(h);
		free(m);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	h->cfg = cfg;
	h->role = role;
	h->m = m;
	h->n = n;
	pthread_mutex_init(&h->mu, NULL);
	for (int i = 0; i < n; i++)
		m[i].cc = cs[i];
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* The HTTP thread inherits a mask without SIGTERM/SIGINT, so the
	 * main thread handles them. */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	h->d = MHD_start_daemon(
	    flags, 0, NULL, NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER,
	    mhd_log, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)32,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!h->d) {
		snprintf(err, errlen,
		         "cannot listen on %s (address in use or not local?)",
		         listen);
		cli_http_stop(h);
		return -1;
	}
	const union MHD_DaemonInfo *info =
	    MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	char host[64] = "?";
	if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
		          host, sizeof(host));
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host,
		          sizeof(host));
	snprintf(h->addr, sizeof(h->addr),
	         ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host,
	         info ? (unsigned)info->port : 0u);
	*out = h;
	return 0;
}

const char *cli_http_address(const cli_http *h)
{
	return h ? h->addr : "";
}

void cli_http_publish(cli_http *h, int i, const inbox_stats *s)
{
	if (!h || i < 0 || i >= h->n)
		return;
	pthread_mutex_lock(&h->mu);
	h->m[i].snap = *s;
	h->m[i].have_snap = 1;
	h->m[i].last_batch = inbox__mono_seconds();
	pthread_mutex_unlock(&h->mu);
}

void cli_http_source_failed(cli_http *h, int i, const char *why)
{
	if (!h || i < 0 || i >= h->n)
		return;
	pthread_mutex_lock(&h->mu);
	h->m[i].src_failed_at = inbox__mono_seconds();
	snprintf(h->m[i].src_err, sizeof(h->m[i].src_err), "source: %s",
	         why && *why ? why : "poll failed");
	pthread_mutex_unlock(&h->mu);
}

void cli_http_heartbeat(cli_http *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->beat = inbox__mono_seconds();
	pthread_mutex_unlock(&h->mu);
}

void cli_http_set_running(cli_http *h, int i, int running)
{
	if (!h || i < 0 || i >= h->n)
		return;
	pthread_mutex_lock(&h->mu);
	h->m[i].running = running;
	if (!running)
		h->m[i].src = NULL;
	if (running) {
		h->m[i].started = 1;
		h->m[i].waiting[0] = '\0';
	}
	pthread_mutex_unlock(&h->mu);
}

void cli_http_set_source(cli_http *h, int i, const inbox_source *src)
{
	if (!h || i < 0 || i >= h->n)
		return;
	pthread_mutex_lock(&h->mu);
	h->m[i].src = src;
	pthread_mutex_unlock(&h->mu);
}

void cli_http_set_waiting(cli_http *h, int i, const char *why)
{
	if (!h || i < 0 || i >= h->n)
		return;
	pthread_mutex_lock(&h->mu);
	snprintf(h->m[i].waiting, sizeof(h->m[i].waiting), "%s",
	         why ? why : "");
	pthread_mutex_unlock(&h->mu);
}

int cli_http_index(const cli_http *h, const cli_consumer *cc)
{
	if (!h)
		return -1;
	for (int i = 0; i < h->n; i++)
		if (h->m[i].cc == cc)
			return i;
	return -1;
}

void cli_http_publish_outbox(cli_http *h, int i, const inbox_outbox_stats *s)
{
	if (!h || i < 0 || i >= h->n)
		return;
	pthread_mutex_lock(&h->mu);
	h->m[i].osnap = *s;
	h->m[i].have_osnap = 1;
	pthread_mutex_unlock(&h->mu);
}

void cli_http_set_dispatching(cli_http *h, int i, int running)
{
	if (!h || i < 0 || i >= h->n)
		return;
	pthread_mutex_lock(&h->mu);
	h->m[i].dispatcher = running ? D_RUNNING : D_STOPPED;
	pthread_mutex_unlock(&h->mu);
}

void cli_http_set_providers(cli_http *h, inbox_providers *r)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->providers = r;
	pthread_mutex_unlock(&h->mu);
}

void cli_http_set_draining(cli_http *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->draining = 1;
	pthread_mutex_unlock(&h->mu);
}

void cli_http_stop(cli_http *h)
{
	if (!h)
		return;
	if (h->d)
		MHD_stop_daemon(h->d);
	for (int i = 0; i < h->n; i++)
		inbox_store_close(h->m[i].st);
	pthread_mutex_destroy(&h->mu);
	free(h->m);
	free(h);
}
