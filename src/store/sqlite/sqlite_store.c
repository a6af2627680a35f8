/*
 * The SQLite store: URL, connection set-up, transactions, the vtable.
 *
 * URLs: sqlite:PATH (relative or absolute), sqlite:///abs/path,
 * sqlite::memory: (a private in-memory database). The path is taken
 * literally up to an optional "?synchronous=full|normal|extra" (default
 * full: every commit is durable).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/internal.h"
#include "store/sqlite/sqlite_outbox.h"
#include "store/sqlite/sqlite_store.h"

typedef struct sq_url {
	char *path;       /* malloc'ed */
	const char *sync; /* "FULL", "NORMAL", "EXTRA" */
} sq_url;

static int parse_query(sq_store *s, sq_url *u, const char *q)
{
	while (*q) {
		size_t n = strcspn(q, "&");
		const char *eq = memchr(q, '=', n);
		size_t kl = eq ? (size_t)(eq - q) : n;
		const char *v = eq ? eq + 1 : "";
		size_t vl = eq ? n - kl - 1 : 0;
		if (kl == 11 && strncmp(q, "synchronous", 11) == 0) {
			if (vl == 4 && strncasecmp(v, "full", 4) == 0)
				u->sync = "FULL";
			else if (vl == 6 && strncasecmp(v, "normal", 6) == 0)
				u->sync = "NORMAL";
			else if (vl == 5 && strncasecmp(v, "extra", 5) == 0)
				u->sync = "EXTRA";
			else {
				inbox__store_seterr(
				    &s->base, "",
				    "sqlite URL: synchronous "
				    "must be full, normal or extra");
				return INBOX_ERR_URL;
			}
		} else {
			inbox__store_seterr(&s->base, "",
			                    "sqlite URL: unknown parameter "
			                    "\"%.*s\"",
			                    (int)kl, q);
			return INBOX_ERR_URL;
		}
		q += n;
		if (*q == '&')
			q++;
	}
	return INBOX_OK;
}

static int parse_url(sq_store *s, const char *url, sq_url *u)
{
	u->path = NULL;
	u->sync = "FULL";
	if (strncmp(url, "sqlite:", 7) != 0) {
		inbox__store_seterr(&s->base, "", "not a sqlite: URL");
		return INBOX_ERR_URL;
	}
	const char *p = url + 7;
	if (p[0] == '/' && p[1] == '/') {
		/* sqlite:///abs/path; an authority (host) makes no sense */
		if (p[2] != '/') {
			inbox__store_seterr(&s->base, "",
			                    "sqlite URL: use sqlite:PATH or "
			                    "sqlite:///absolute/path");
			return INBOX_ERR_URL;
		}
		p += 2;
	}
	size_t n = strcspn(p, "?");
	if (n == 0) {
		inbox__store_seterr(&s->base, "", "sqlite URL: empty path");
		return INBOX_ERR_URL;
	}
	int err = p[n] == '?' ? parse_query(s, u, p + n + 1) : INBOX_OK;
	if (err)
		return err;
	u->path = strndup(p, n);
	if (!u->path) {
		inbox__store_seterr(&s->base, "", "out of memory");
		return INBOX_ERR_NOMEM;
	}
	return INBOX_OK;
}

/* Pragmas of every connection. journal_mode=WAL lets readers run beside
 * the single writer; an in-memory database has no journal file. */
static int configure(sq_store *s, const sq_url *u, int busy_ms)
{
	char sql[160];
	int memory = strcmp(u->path, ":memory:") == 0;
	sqlite3_extended_result_codes(s->db, 1);
	sqlite3_busy_timeout(s->db, busy_ms > 0 ? busy_ms : 0);
	snprintf(sql, sizeof(sql),
	         "%sPRAGMA synchronous=%s; PRAGMA foreign_keys=ON;",
	         memory ? "" : "PRAGMA journal_mode=WAL; ", u->sync);
	/* Switching a new database to WAL needs an exclusive lock, and SQLite
	 * answers BUSY at once, without the busy handler, when another
	 * process is creating the same database (two daemons starting
	 * together): retry for as long as the busy timeout allows. */
	int rc, waited = 0;
	while ((rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL)) != SQLITE_OK &&
	       ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) &&
	       waited < busy_ms) {
		sqlite3_sleep(10);
		waited += 10;
	}
	return rc == SQLITE_OK ? INBOX_OK : inbox__sq_fail(s, rc, "configure");
}

static int clamp_ms(int64_t ms)
{
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* A limit: the option's explicit value, else the derived one. */
static int64_t effective(int64_t opt, int64_t derived)
{
	return opt > 0 ? opt : opt < 0 ? 0 : derived > 0 ? derived : 0;
}

/* Called every few thousand VM steps: past the deadline, the statement
 * is interrupted (SQLITE_INTERRUPT: transient). */
static int over_time(void *payload)
{
	sq_store *s = payload;
	return s->deadline > 0 && inbox__mono_seconds() > s->deadline;
}

int inbox__sq_arm(sq_store *s)
{
	if (s->statement_ms <= 0 || !s->base.in_txn || s->deadline > 0)
		return 0;
	s->deadline = inbox__mono_seconds() + (double)s->statement_ms / 1000.0;
	return 1;
}

void inbox__sq_disarm(sq_store *s, int armed)
{
	if (armed)
		s->deadline = 0;
}

/* SQLite's analogues: the busy timeout bounds the wait for the write
 * lock (BEGIN IMMEDIATE), a progress handler a handler's statement. An
 * idle timeout has none: no other connection can end our transaction. */
static int sq_set_limits(inbox_store *st, const inbox_store_limits *d)
{
	sq_store *s = SQ(st);
	inbox_store_limits none = {0, 0, 0};
	if (!d)
		d = &none;
	int64_t lock = effective(s->opt_lock_ms, d->lock_ms);
	s->statement_ms = effective(s->opt_statement_ms, d->statement_ms);
	if (!s->db)
		return INBOX_OK;
	sqlite3_busy_timeout(s->db, lock > 0 ? clamp_ms(lock) : s->busy_ms);
	sqlite3_progress_handler(s->db, s->statement_ms > 0 ? 4000 : 0,
	                         s->statement_ms > 0 ? over_time : NULL, s);
	return INBOX_OK;
}

static int sq_open(inbox_store **out, const char *url,
                   const inbox_store_options *opts)
{
	sq_store *s = calloc(1, sizeof(*s));
	*out = s ? &s->base : NULL;
	if (!s)
		return INBOX_ERR_NOMEM;
	s->base.vt = &inbox__sqlite_vtable;
	/* The core copies the prefix after open returns; copy it now so
	 * the handle is complete from the start. */
	if (opts && opts->table_prefix)
		snprintf(s->base.prefix, sizeof(s->base.prefix), "%s",
		         opts->table_prefix);
	sq_url u;
	int err = parse_url(s, url, &u);
	if (err)
		return err;
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	            SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_PRIVATECACHE;
	int rc = sqlite3_open_v2(u.path, &s->db, flags, NULL);
	if (rc != SQLITE_OK) {
		inbox__store_seterr(
		    &s->base, inbox__sq_code_name(rc), "cannot open %s: %s",
		    u.path, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		sqlite3_close_v2(s->db);
		s->db = NULL;
		free(u.path);
		/* A file, not a server: no later attempt would do better
		 * (inbox run waits for a CONNECT, not for this). */
		return INBOX_ERR_IO;
	}
	s->busy_ms = opts ? opts->busy_timeout_ms : 5000;
	if (opts && opts->version >= 2) {
		s->opt_lock_ms = opts->lock_timeout_ms;
		s->opt_statement_ms = opts->statement_timeout_ms;
	}
	err = configure(
	    s, &u, s->opt_lock_ms > 0 ? clamp_ms(s->opt_lock_ms) : s->busy_ms);
	if (!err)
		err = sq_set_limits(&s->base, NULL);
	free(u.path);
	if (err)
		return err == INBOX_ERR_TRANSIENT ? err : INBOX_ERR_IO;
	/* Without auto_migrate the schema is not touched here: consumers
	 * refuse a store whose schema is not at this library's version. */
	return INBOX_OK;
}

static void sq_close(inbox_store *st)
{
	sq_store *s = SQ(st);
	if (!s)
		return;
	inbox__sq_finalize_all(s);
	/* An open transaction is rolled back by the close. */
	sqlite3_close_v2(s->db);
	inbox__buf_free(&s->sql);
	free(s);
}

static int state_err(sq_store *s, const char *msg)
{
	inbox__store_seterr(&s->base, "", "%s", msg);
	return INBOX_ERR_STATE;
}

static int run_fixed(sq_store *s, int id, const char *what)
{
	sqlite3_stmt *stmt;
	int err = inbox__sq_fixed(s, id, &stmt);
	return err ? err : inbox__sq_run(s, stmt, what);
}

/* BEGIN IMMEDIATE takes the write lock now (waiting up to the busy
 * timeout), so a transaction never fails later on a lock upgrade and two
 * writers cannot deadlock. */
int inbox__sq_begin(inbox_store *st)
{
	sq_store *s = SQ(st);
	if (st->in_txn)
		return state_err(s, "begin: a transaction is already open");
	int err = run_fixed(s, SQ_BEGIN, "begin");
	if (err)
		return err;
	st->in_txn = 1;
	s->sp_open = 0;
	return INBOX_OK;
}

int inbox__sq_commit(inbox_store *st)
{
	sq_store *s = SQ(st);
	if (!st->in_txn)
		return state_err(s, "commit: no transaction is open");
	int err = run_fixed(s, SQ_COMMIT, "commit");
	if (err)
		return err; /* in_txn follows the connection (inbox__sq_fail) */
	st->in_txn = 0;
	s->sp_open = 0;
	return INBOX_OK;
}

/* Rolling back when SQLite already did (after SQLITE_FULL, IOERR...) or
 * when nothing is open is not an error: the caller's intent holds. */
int inbox__sq_rollback(inbox_store *st)
{
	sq_store *s = SQ(st);
	int err = INBOX_OK;
	if (s->db && !sqlite3_get_autocommit(s->db))
		err = run_fixed(s, SQ_ROLLBACK, "rollback");
	if (!err) {
		st->in_txn = 0;
		s->sp_open = 0;
	}
	return err;
}

/* One savepoint level, with PostgreSQL's meaning: ROLLBACK TO keeps the
 * savepoint, RELEASE ends it. A new savepoint() while one is still on the
 * stack releases the old one first, so the stack never grows however many
 * messages a batch holds and whether or not the caller released. */
static int sq_savepoint(inbox_store *st)
{
	sq_store *s = SQ(st);
	if (!st->in_txn)
		return state_err(s, "savepoint: no transaction is open");
	if (s->sp_open) {
		int err = run_fixed(s, SQ_RELEASE, "release");
		if (err)
			return err;
		s->sp_open = 0;
	}
	int err = run_fixed(s, SQ_SAVEPOINT, "savepoint");
	if (!err)
		s->sp_open = 1;
	return err;
}

static int sq_release(inbox_store *st)
{
	sq_store *s = SQ(st);
	if (!s->sp_open)
		return INBOX_OK;
	int err = run_fixed(s, SQ_RELEASE, "release");
	if (!err)
		s->sp_open = 0;
	return err;
}

static int sq_rollback_to(inbox_store *st)
{
	sq_store *s = SQ(st);
	if (!s->sp_open)
		return state_err(s, "rollback_to: no savepoint is open");
	return run_fixed(s, SQ_ROLLBACK_TO, "rollback to savepoint");
}

static void *sq_native(inbox_store *st)
{
	return SQ(st)->db;
}

const inbox_store_vtable inbox__sqlite_vtable = {
    .version = INBOX_STORE_VTABLE_VERSION,
    .scheme = "sqlite",
    .kind = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .migrate = inbox__sq_migrate,
    .schema_version = inbox__sq_schema_version,
    .begin = inbox__sq_begin,
    .commit = inbox__sq_commit,
    .rollback = inbox__sq_rollback,
    .savepoint = sq_savepoint,
    .release = sq_release,
    .rollback_to = sq_rollback_to,
    .exec = inbox__sq_exec,
    .query = inbox__sq_query,
    .register_consumer = inbox__sq_register_consumer,
    .stored_retention = inbox__sq_stored_retention,
    .client_version = inbox__sq_client_version,
    .claim = inbox__sq_claim,
    .reclaim = inbox__sq_reclaim,
    .finish = inbox__sq_finish,
    .extend = inbox__sq_extend,
    .dead_letter = inbox__sq_dead_letter,
    .purge = inbox__sq_purge,
    .native = sq_native,
    .outbox_add = inbox__sq_outbox_add,
    .outbox_claim = inbox__sq_outbox_claim,
    .outbox_finish = inbox__sq_outbox_finish,
    .outbox_counts = inbox__sq_outbox_counts,
    .outbox_purge = inbox__sq_outbox_purge,
    .set_limits = sq_set_limits,
    .native_type = "sqlite3",
    .sql_expr = inbox__sq_sql_expr,
    .exec_setup = inbox__sq_exec_setup,
    .check_sql = inbox__sq_check_sql,
    .url_private = inbox__sq_url_private,
    .set_result = inbox__sq_set_result,
};
