/* PostgreSQL store: connection, handle life cycle and the vtable. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/url.h"
#include "store/postgres/pg_outbox.h"
#include "store/postgres/pg_store.h"

/* Notices ("relation already exists, skipping", "there is no transaction
 * in progress", a RAISE NOTICE in the effect's SQL) are not errors; libpq
 * would print them on stderr. Debug events, even a WARNING: what the store
 * does about a failure is decided from the results, not from these. */
static void on_notice(void *arg, const PGresult *res)
{
	(void)arg;
	if (!inbox__log_enabled(INBOX_LOG_DEBUG))
		return;
	const char *sev =
	    PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	inbox__log(INBOX_LOG_DEBUG, NULL,
	           "\"event\":\"pg_notice\",\"severity\":\"%s\","
	           "\"sqlstate\":\"%s\",\"message\":\"%s\"",
	           inbox__log_escape(sev ? sev : ""),
	           inbox__log_escape(code ? code : ""),
	           inbox__log_escape(msg ? msg : ""));
}

/* A URL that libpq would split otherwise than every other parser (a raw
 * '@', '/' or '#' in the password) is refused, without quoting it; then
 * whatever libpq itself takes for a password (its options shown as "*":
 * password, sslpassword, ...) becomes a secret of the handle, scrubbed
 * from every message (inbox__store_seterr) in whatever spelling. */
static int check_url(pg_store *s, const char *url)
{
	const char *why;
	char *err = NULL;
	if (inbox__url_check(url, &why) < 0) {
		inbox__store_seterr(&s->base, "", "postgresql: %s", why);
		return INBOX_ERR_URL;
	}
	PQconninfoOption *opts = PQconninfoParse(url, &err);
	if (!opts) {
		inbox__store_seterr(&s->base, "", "connect: %s",
		                    err ? err : "out of memory");
		PQfreemem(err);
		return err ? INBOX_ERR_URL : INBOX_ERR_NOMEM;
	}
	int rc = INBOX_OK;
	for (PQconninfoOption *o = opts; o->keyword && rc == INBOX_OK; o++)
		if (o->val && o->dispchar && strchr(o->dispchar, '*') &&
		    inbox__store_secret(&s->base, o->val, strlen(o->val)) < 0)
			rc = INBOX_ERR_NOMEM;
	PQconninfoFree(opts);
	if (rc < 0)
		inbox__store_seterr(&s->base, "", "open: out of memory");
	return rc;
}

/* The connection defaults we set unless the URL does (see connect_db). */
static const char *const pg_defaults[][2] = {
    /* bound a connection attempt to a host that does not answer (libpq's
     * default waits for as long as TCP does) */
    {"connect_timeout", "10"},
    /* notice a connection whose host is gone without a word (no RST: a
     * crashed host, a partition, a failover to another address): an idle
     * one by keepalives (15 s idle, then 3 probes 5 s apart), one with
     * data unacknowledged by tcp_user_timeout (30 s) — instead of the
     * kernel's 2 h of keepalive silence and 15 min of retransmissions */
    {"keepalives", "1"},
    {"keepalives_idle", "15"},
    {"keepalives_interval", "5"},
    {"keepalives_count", "3"},
    {"tcp_user_timeout", "30000"},
};
#define PG_NDEFAULTS (sizeof(pg_defaults) / sizeof(pg_defaults[0]))

/* Whether the connection string sets `kw` (or, for connect_timeout, the
 * environment does). A string libpq cannot parse sets nothing: the
 * connection reports its error. */
static int url_sets(const PQconninfoOption *opts, const char *kw)
{
	if (!strcmp(kw, "connect_timeout") && getenv("PGCONNECT_TIMEOUT"))
		return 1;
	for (const PQconninfoOption *o = opts; o && o->keyword; o++)
		if (!strcmp(o->keyword, kw))
			return o->val != NULL;
	return 0;
}

static int connect_db(pg_store *s, const char *url)
{
	s->conn_id = 1;
	/* The URL is expanded as a whole (expand_dbname); the later keywords
	 * force UTF-8, name the application unless the URL does, and add
	 * our defaults (pg_defaults) for what the URL leaves out — every
	 * reconnect (PQreset) keeps them. A service (service=, PGSERVICE)
	 * may set them in its file, below what we would pass: with one we
	 * add none. */
	const char *kw[3 + PG_NDEFAULTS + 1] = {"dbname", "client_encoding",
	                                        "fallback_application_name"};
	const char *val[3 + PG_NDEFAULTS + 1] = {url, "UTF8", "libinbox"};
	size_t n = 3;
	PQconninfoOption *opts = PQconninfoParse(url, NULL);
	int service = url_sets(opts, "service") || getenv("PGSERVICE");
	for (size_t i = 0; i < PG_NDEFAULTS; i++) {
		const char *k = pg_defaults[i][0];
		if (service || url_sets(opts, k))
			continue;
		kw[n] = k;
		val[n++] = pg_defaults[i][1];
	}
	kw[n] = val[n] = NULL;
	s->conn = PQconnectdbParams(kw, val, 1);
	PQconninfoFree(opts);
	if (!s->conn) {
		inbox__store_seterr(&s->base, "", "connect: out of memory");
		return INBOX_ERR_NOMEM;
	}
	if (PQstatus(s->conn) != CONNECTION_OK) {
		inbox__store_seterr(&s->base, "08001", "connect: %s",
		                    PQerrorMessage(s->conn));
		for (char *p = s->base.errmsg; *p; p++)
			if (*p == '\n' || *p == '\t')
				*p = ' ';
		return INBOX_ERR_CONNECT;
	}
	PQsetNoticeReceiver(s->conn, on_notice, NULL);
	return INBOX_OK;
}

void inbox__pg_forget_statements(pg_store *s)
{
	s->prepared = 0;
	s->qepoch++;
	/* New names too: of statements the server lost only some. */
	for (int i = 0; i < PG_HCACHE; i++) {
		s->hcache[i].ready_conn = 0;
		if (s->hcache[i].sql)
			s->hcache[i].id = ++s->hnext;
	}
}

int inbox__pg_reconnect(pg_store *s, const char *what)
{
	PQreset(s->conn);
	/* A new connection whatever the server calls it: nothing prepared
	 * on the old one exists here, whatever PQbackendPID() says. */
	s->conn_id++;
	s->prepared = 0;
	for (int i = 0; i < PG_HCACHE; i++)
		s->hcache[i].ready_conn = 0;
	inbox__pg_queue_clear(s);
	if (PQstatus(s->conn) != CONNECTION_OK)
		return inbox__pg_fail(s, NULL, what);
	PQsetNoticeReceiver(s->conn, on_notice, NULL);
	return INBOX_OK;
}

void inbox__pg_ensure_connected(pg_store *s)
{
	if (PQstatus(s->conn) != CONNECTION_OK)
		inbox__pg_reconnect(s, "reconnect");
}

void inbox__pg_stmt_name(const pg_store *s, int q, char *out, size_t n)
{
	if (s->qepoch)
		snprintf(out, n, "inbox__q%d_%u", q, s->qepoch);
	else
		snprintf(out, n, "inbox__q%d", q);
}

/* A limit: the option's explicit value, else the derived one. */
static int64_t effective(int64_t opt, int64_t derived)
{
	int64_t v = opt > 0 ? opt : opt < 0 ? 0 : derived > 0 ? derived : 0;
	return v > INT32_MAX ? INT32_MAX : v; /* the settings are int ms */
}

/* Set per transaction (SET LOCAL, after BEGIN) rather than per session:
 * nothing to restore after a reconnect, and what runs outside the
 * consumers' transactions (migrate, seal, purge, tools) keeps the
 * server's settings. */
int inbox__pg_set_limits(inbox_store *st, const inbox_store_limits *d)
{
	static const char *const names[3] = {
	    "lock_timeout", "statement_timeout",
	    "idle_in_transaction_session_timeout"};
	pg_store *s = (pg_store *)st;
	inbox_store_limits none = {0, 0, 0};
	if (!d)
		d = &none;
	int64_t v[3] = {effective(s->opt_lock_ms, d->lock_ms),
	                effective(s->opt_statement_ms, d->statement_ms),
	                effective(s->opt_idle_ms, d->idle_ms)};
	char sql[sizeof(s->limits_sql)];
	size_t o = 0;
	sql[0] = '\0';
	for (int i = 0; i < 3; i++)
		if (v[i] > 0)
			o += (size_t)snprintf(
			    sql + o, sizeof(sql) - o,
			    "%sset_config('%s', '%lld', true)",
			    o ? ", " : "SELECT ", names[i], (long long)v[i]);
	if (strcmp(sql, s->limits_sql) != 0) {
		memcpy(s->limits_sql, sql, sizeof(sql));
		s->limits_id++; /* a new statement, under a new name */
	}
	return INBOX_OK;
}

static uint64_t pg_connection_id(const inbox_store *st)
{
	return ((const pg_store *)st)->conn_id;
}

static int pg_open(inbox_store **out, const char *url,
                   const inbox_store_options *opts)
{
	pg_store *s = calloc(1, sizeof(*s));
	if (!s)
		return INBOX_ERR_NOMEM;
	*out = &s->base;
	s->base.vt = &inbox__pg_vtable;
	/* The core copies these after open too; the SQL needs them now. */
	if (opts && opts->table_prefix)
		snprintf(s->base.prefix, sizeof(s->base.prefix), "%s",
		         opts->table_prefix);
	if (opts && opts->schema)
		snprintf(s->base.schema, sizeof(s->base.schema), "%s",
		         opts->schema);
	if (inbox__pg_build_sql(s) < 0) {
		inbox__store_seterr(&s->base, "", "open: out of memory");
		return INBOX_ERR_NOMEM;
	}
	if (opts && opts->version >= 2) {
		s->opt_lock_ms = opts->lock_timeout_ms;
		s->opt_statement_ms = opts->statement_timeout_ms;
		s->opt_idle_ms = opts->idle_in_transaction_timeout_ms;
	}
	inbox__pg_set_limits(&s->base, NULL);
	int rc = check_url(s, url);
	return rc < 0 ? rc : connect_db(s, url);
}

static void pg_close(inbox_store *st)
{
	pg_store *s = (pg_store *)st;
	PQfinish(s->conn);
	inbox__pg_free_sql(s);
	inbox__pg_hcache_free(s);
	inbox__pg_gens_free(s);
	for (size_t i = 0; i < sizeof(s->arr) / sizeof(*s->arr); i++)
		inbox__buf_free(&s->arr[i]);
	free(s);
}

/* The caller is about to use the connection directly: whatever is queued
 * (BEGIN, SAVEPOINT) must have reached the server first. */
static void *pg_native(inbox_store *st)
{
	pg_store *s = (pg_store *)st;
	inbox__pg_flush(s);
	return s->conn;
}

const inbox_store_vtable inbox__pg_vtable = {
    .version = INBOX_STORE_VTABLE_VERSION,
    .scheme = "postgresql",
    .kind = "postgresql",
    .open = pg_open,
    .close = pg_close,
    .migrate = inbox__pg_migrate,
    .schema_version = inbox__pg_schema_version,
    .begin = inbox__pg_begin,
    .commit = inbox__pg_commit,
    .rollback = inbox__pg_rollback,
    .savepoint = inbox__pg_savepoint,
    .release = inbox__pg_release,
    .rollback_to = inbox__pg_rollback_to,
    .exec = inbox__pg_exec,
    .query = inbox__pg_query,
    .register_consumer = inbox__pg_register_consumer,
    .stored_retention = inbox__pg_stored_retention,
    .client_version = inbox__pg_client_version,
    .claim = inbox__pg_claim,
    .reclaim = inbox__pg_reclaim,
    .finish = inbox__pg_finish,
    .extend = inbox__pg_extend,
    .dead_letter = inbox__pg_dead_letter,
    .purge = inbox__pg_purge,
    .native = pg_native,
    .outbox_add = inbox__pg_outbox_add,
    .outbox_claim = inbox__pg_outbox_claim,
    .outbox_finish = inbox__pg_outbox_finish,
    .outbox_counts = inbox__pg_outbox_counts,
    .outbox_purge = inbox__pg_outbox_purge,
    .seal = inbox__pg_seal,
    .connection_id = pg_connection_id,
    .set_limits = inbox__pg_set_limits,
    .flags = INBOX_STORE_F_SCHEMAS,
    .alias = "postgres",
    .native_type = "PGconn",
    .sql_expr = inbox__pg_sql_expr,
    .exec_setup = inbox__pg_exec_setup,
    .check_sql = inbox__pg_check_sql,
    .set_result = inbox__pg_set_result,
};
