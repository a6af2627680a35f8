/* The SQLite store backend, through the public API and its vtable. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <inbox/inbox.h>
#include <inbox/sys/store.h>

#include <inbox/admin.h>

#include "../clock.h"
#include "core/internal.h" /* INBOX__SCHEMA_VERSION */
#include "store/sqlite/sqlite_store.h"
#include "test.h"

static char tmpdir[] = "/tmp/inbox-sqlite-test-XXXXXX";
static char url_buf[512];

#define FP_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define FP_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static const char *db_url(const char *name)
{
	snprintf(url_buf, sizeof(url_buf), "sqlite:%s/%s", tmpdir, name);
	return url_buf;
}

static inbox_store *open_opts(const char *name, const char *prefix, int busy_ms)
{
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	inbox_store *st = NULL;
	o.table_prefix = prefix;
	o.busy_timeout_ms = busy_ms;
	int rc = inbox_store_open(&st, db_url(name), &o);
	if (rc != INBOX_OK) {
		fprintf(stderr, "  open %s: %d %s\n", name, rc,
		        st ? inbox_store_errmsg(st) : "");
		inbox_store_close(st);
		return NULL;
	}
	return st;
}

static inbox_store *open_db(const char *name)
{
	return open_opts(name, NULL, 5000);
}

static const inbox_store_vtable *VT(inbox_store *st)
{
	return st->vt;
}

/* Collects the first column of every row (up to 16) and the second of the
 * first row. */
typedef struct rows {
	int n;
	int ncols;
	char first[16][128];
	int null_second; /* second column of the first row was NULL */
	char second[128];
} rows;

static int collect(int ncols, const char *const *v, void *payload)
{
	rows *r = payload;
	if (r->n == 0) {
		r->ncols = ncols;
		r->null_second = ncols > 1 && !v[1];
		snprintf(r->second, sizeof(r->second), "%s",
		         ncols > 1 && v[1] ? v[1] : "");
	}
	if (r->n < 16)
		snprintf(r->first[r->n], sizeof(r->first[0]), "%s",
		         v[0] ? v[0] : "(null)");
	r->n++;
	return 0;
}

static int q(inbox_store *st, const char *sql, int np,
             const char *const *params, rows *r)
{
	memset(r, 0, sizeof(*r));
	return VT(st)->query(st, sql, np, params, collect, r);
}

static int exec0(inbox_store *st, const char *sql)
{
	int64_t n;
	return VT(st)->exec(st, sql, 0, NULL, &n);
}

static int64_t count_rows(inbox_store *st, const char *sql)
{
	rows r;
	if (q(st, sql, 0, NULL, &r) != 0 || r.n != 1)
		return -1;
	return atoll(r.first[0]);
}

/* One claim in its own call; the transaction must be open. */
static int claim1(inbox_store *st, const char *consumer, const char *key,
                  const char *fp, inbox_status status, int64_t lease_ms,
                  inbox_claim *c)
{
	memset(c, 0, sizeof(*c));
	c->key = key;
	c->fingerprint = fp;
	return VT(st)->claim(st, consumer, c, 1, status, lease_ms);
}

/* ------------------------------------------------------------------ */

TEST(url_forms)
{
	inbox_store *st = NULL;
	rows r;
	ASSERT_OK(inbox_store_open(&st, "sqlite::memory:", NULL));
	ASSERT_STREQ(inbox_store_kind(st), "sqlite");
	ASSERT_OK(q(st, "PRAGMA journal_mode", 0, NULL, &r));
	ASSERT_STREQ(r.first[0], "memory");
	ASSERT_TRUE(VT(st)->native(st) != NULL);
	inbox_store_close(st);

	/* sqlite:///abs/path: tmpdir is absolute */
	snprintf(url_buf, sizeof(url_buf), "sqlite://%s/abs.db", tmpdir);
	ASSERT_OK(inbox_store_open(&st, url_buf, NULL));
	ASSERT_OK(q(st, "PRAGMA journal_mode", 0, NULL, &r));
	ASSERT_STREQ(r.first[0], "wal");
	ASSERT_OK(q(st, "PRAGMA synchronous", 0, NULL, &r));
	ASSERT_STREQ(r.first[0], "2"); /* FULL */
	ASSERT_OK(q(st, "PRAGMA foreign_keys", 0, NULL, &r));
	ASSERT_STREQ(r.first[0], "1");
	inbox_store_close(st);
	ASSERT_EQ(access(url_buf + 9, F_OK), 0);

	/* relative path (the test runs inside tmpdir) */
	ASSERT_OK(
	    inbox_store_open(&st, "sqlite:rel.db?synchronous=normal", NULL));
	ASSERT_OK(q(st, "PRAGMA synchronous", 0, NULL, &r));
	ASSERT_STREQ(r.first[0], "1"); /* NORMAL */
	inbox_store_close(st);
	ASSERT_EQ(access("rel.db", F_OK), 0);

	const char *bad[] = {"sqlite:", "sqlite://host/x.db",
	                     "sqlite:x.db?synchronous=off",
	                     "sqlite:x.db?bogus=1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		int rc = inbox_store_open(&st, bad[i], NULL);
		ASSERT_EQ(rc, INBOX_ERR_URL);
		ASSERT_TRUE(st != NULL);
		ASSERT_TRUE(inbox_store_errmsg(st)[0] != '\0');
		inbox_store_close(st);
	}
	ASSERT_EQ(access("x.db", F_OK), -1);

	/* a directory cannot be opened as a database */
	snprintf(url_buf, sizeof(url_buf), "sqlite:%s", tmpdir);
	int rc = inbox_store_open(&st, url_buf, NULL);
	/* a file, not a server: nothing to wait for (inbox run) */
	ASSERT_EQ(rc, INBOX_ERR_IO);
	ASSERT_TRUE(inbox_store_errmsg(st)[0] != '\0');
	inbox_store_close(st);
}

TEST(migrate_twice)
{
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	inbox_store *st = NULL;
	int v = -1;
	o.auto_migrate = 0;
	/* a fresh database without auto_migrate has no schema (consumers
	 * refuse it; the conformance suite checks that) */
	ASSERT_OK(inbox_store_open(&st, db_url("mig.db"), &o));
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, 0);
	ASSERT_OK(inbox_store_migrate(st));
	ASSERT_OK(inbox_store_migrate(st));
	ASSERT_OK(inbox_store_schema_version(st, &v));
	/* 2: the outbox, 3: nothing (generations are PostgreSQL's), 4:
	 * idempotent dead letters, 5: stored results */
	ASSERT_EQ(v, INBOX__SCHEMA_VERSION);
	/* one row per version applied */
	ASSERT_EQ(count_rows(st, "SELECT count(*) FROM schema_version"),
	          INBOX__SCHEMA_VERSION);
	inbox_store_close(st);

	ASSERT_OK(inbox_store_open(&st, db_url("mig.db"), &o));
	ASSERT_OK(inbox_store_migrate(st));
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, INBOX__SCHEMA_VERSION);
	/* a newer schema is refused */
	ASSERT_OK(exec0(st, "INSERT INTO schema_version VALUES (99, 0)"));
	ASSERT_EQ(inbox_store_migrate(st), INBOX_ERR_SCHEMA);
	ASSERT_CONTAINS(inbox_store_errmsg(st), "newer");
	ASSERT_EQ(st->in_txn, 0);
	inbox_store_close(st);
}

TEST(state_errors)
{
	inbox_store *st = open_db("state.db");
	ASSERT_TRUE(st != NULL);
	const inbox_store_vtable *vt = VT(st);
	inbox_claim c;
	int64_t n;
	ASSERT_EQ(claim1(st, "c", "k", FP_A, INBOX_ST_COMPLETED, 0, &c),
	          INBOX_ERR_STATE);
	ASSERT_EQ(vt->commit(st), INBOX_ERR_STATE);
	ASSERT_EQ(vt->savepoint(st), INBOX_ERR_STATE);
	ASSERT_EQ(
	    vt->finish(st, "c", "k", 0, INBOX_ST_NONE, INBOX_ST_DEAD, 0, &n),
	    INBOX_ERR_STATE);
	ASSERT_OK(vt->rollback(st)); /* nothing open: a no-op */
	ASSERT_OK(vt->begin(st));
	ASSERT_EQ(vt->begin(st), INBOX_ERR_STATE);
	ASSERT_EQ(vt->rollback_to(st), INBOX_ERR_STATE);
	ASSERT_EQ(claim1(st, "c", "k", FP_A, INBOX_ST_FAILED, 0, &c),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_store_purge(st, "c", 60, 10, 0, &n), INBOX_ERR_STATE);
	ASSERT_EQ(inbox_store_migrate(st), INBOX_ERR_STATE);
	ASSERT_OK(vt->rollback(st));
	ASSERT_EQ(vt->register_consumer(st, "c", 0), INBOX_ERR_INVALID);
	inbox_store_close(st);
}

TEST(dollar_params)
{
	inbox_store *st = open_db("params.db");
	ASSERT_TRUE(st != NULL);
	const inbox_store_vtable *vt = VT(st);
	int64_t n = -1;
	rows r;
	ASSERT_OK(exec0(st, "CREATE TABLE t (a TEXT, b TEXT, n INTEGER)"));
	const char *p1[] = {"x", NULL, "3"};
	ASSERT_OK(vt->exec(st, "INSERT INTO t (a, b, n) VALUES ($1, $2, $3)", 3,
	                   p1, &n));
	ASSERT_EQ(n, 1);
	/* out of order and repeated placeholders */
	const char *p2[] = {"y", "z"};
	ASSERT_OK(vt->exec(st,
	                   "INSERT INTO t (b, a, n) VALUES ($2, $1, "
	                   "length($1 || $2))",
	                   2, p2, &n));
	ASSERT_EQ(n, 1);
	ASSERT_OK(q(st, "SELECT a, b FROM t WHERE a = $1", 1, p1, &r));
	ASSERT_EQ(r.n, 1);
	ASSERT_EQ(r.ncols, 2);
	ASSERT_STREQ(r.first[0], "x");
	ASSERT_EQ(r.null_second, 1);
	/* text parameters compare as numbers against INTEGER columns */
	const char *p3[] = {"2"};
	ASSERT_OK(q(st, "SELECT a, b FROM t WHERE n = $1", 1, p3, &r));
	ASSERT_EQ(r.n, 1);
	ASSERT_STREQ(r.first[0], "y");
	ASSERT_STREQ(r.second, "z");
	/* rows: changed rows for DML, returned rows for SELECT, 0 for DDL */
	const char *p4[] = {"w"};
	ASSERT_OK(vt->exec(st, "UPDATE t SET b = $1", 1, p4, &n));
	ASSERT_EQ(n, 2);
	ASSERT_OK(vt->exec(st, "SELECT * FROM t", 0, NULL, &n));
	ASSERT_EQ(n, 2);
	ASSERT_OK(vt->exec(st, "CREATE TABLE u (x)", 0, NULL, &n));
	ASSERT_EQ(n, 0);
	ASSERT_OK(vt->exec(st, "DELETE FROM t WHERE a = $1", 1, p4, &n));
	ASSERT_EQ(n, 0);
	ASSERT_OK(vt->exec(st, "UPDATE t SET b = $1 RETURNING a", 1, p4, &n));
	ASSERT_EQ(n, 2);
	/* a placeholder without a value, other names, two statements */
	ASSERT_EQ(vt->exec(st, "SELECT $2", 1, p4, &n), INBOX_ERR_STORE);
	ASSERT_CONTAINS(inbox_store_errmsg(st), "$2");
	ASSERT_EQ(vt->exec(st, "SELECT :name", 1, p4, &n), INBOX_ERR_STORE);
	ASSERT_EQ(vt->exec(st, "SELECT 1; SELECT 2", 0, NULL, &n),
	          INBOX_ERR_STORE);
	ASSERT_CONTAINS(inbox_store_errmsg(st), "one SQL statement");
	ASSERT_OK(vt->exec(st, "SELECT 1; -- trailing comment", 0, NULL, &n));
	ASSERT_EQ(n, 1);
	/* the early stop of a row callback */
	ASSERT_OK(q(st, "SELECT a FROM t ORDER BY a", 0, NULL, &r));
	ASSERT_EQ(r.n, 2);
	inbox_store_close(st);
}

/* More distinct statements than the cache holds, then the first again. */
TEST(statement_cache)
{
	inbox_store *st = open_db("cache.db");
	ASSERT_TRUE(st != NULL);
	char sql[64];
	rows r;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 50; i++) {
			snprintf(sql, sizeof(sql), "SELECT %d + $1", i);
			const char *p[] = {"1"};
			ASSERT_OK(q(st, sql, 1, p, &r));
			ASSERT_EQ(r.n, 1);
			ASSERT_EQ(atoi(r.first[0]), i + 1);
		}
	}
	/* an empty statement does nothing */
	int64_t n = -1;
	ASSERT_OK(VT(st)->exec(st, " ; -- nothing", 0, NULL, &n));
	ASSERT_EQ(n, 0);
	inbox_store_close(st);
}

typedef struct nested {
	inbox_store *st;
	int outer, inner, err;
} nested;

static int nested_row(int ncols, const char *const *v, void *payload)
{
	nested *ns = payload;
	rows r;
	ns->outer++;
	/* the same SQL again while the outer statement is mid-iteration */
	int rc = q(ns->st, "SELECT x FROM n ORDER BY x", 0, NULL, &r);
	if (rc)
		ns->err = rc;
	ns->inner += r.n;
	return 0;
}

TEST(reentrant_query)
{
	inbox_store *st = open_db("nested.db");
	ASSERT_TRUE(st != NULL);
	ASSERT_OK(exec0(st, "CREATE TABLE n (x)"));
	ASSERT_OK(exec0(st, "INSERT INTO n VALUES (1), (2), (3)"));
	nested ns = {st, 0, 0, 0};
	ASSERT_OK(VT(st)->query(st, "SELECT x FROM n ORDER BY x", 0, NULL,
	                        nested_row, &ns));
	ASSERT_EQ(ns.err, 0);
	ASSERT_EQ(ns.outer, 3);
	ASSERT_EQ(ns.inner, 9);
	inbox_store_close(st);
}

/* A v3 database (dead letters without the v4 columns, repeats as rows
 * of their own) upgrades in place: its rows are kept, read as seen once
 * at their creation, and new dead letters are idempotent. */
TEST(upgrade_from_v3)
{
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	inbox_store *st = NULL;
	int v = 0;
	o.auto_migrate = 0;
	ASSERT_OK(inbox_store_open(&st, db_url("v3.db"), &o));
	ASSERT_OK(inbox__sq_migrate_to(st, 3));
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, 3);
	for (int i = 0; i < 2; i++)
		ASSERT_OK(exec0(st, "INSERT INTO dead_letters (consumer, key,"
		                    " payload, attempts, reason, created_at)"
		                    " VALUES ('c', NULL, X'7b626164', 1,"
		                    " 'malformed JSON', 1700000000000)"));
	ASSERT_NE(exec0(st, "SELECT deliveries FROM dead_letters"), 0);
	inbox_store_close(st);
	/* opening with auto_migrate upgrades it */
	ASSERT_OK(inbox_store_open(&st, db_url("v3.db"), NULL));
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, INBOX__SCHEMA_VERSION);
	ASSERT_EQ(count_rows(st, "SELECT count(*) FROM schema_version"),
	          INBOX__SCHEMA_VERSION);
	ASSERT_EQ(count_rows(st, "SELECT count(*) FROM dead_letters WHERE "
	                         "deliveries = 1 AND dedup_key IS NULL AND "
	                         "last_seen_at IS NULL"),
	          2);
	inbox_admin_dead_letter *got = NULL;
	ASSERT_OK(inbox_admin_dlq_get(st, 1, NULL, &got));
	ASSERT_EQ(got->deliveries, 1);
	ASSERT_EQ(got->created_at_ms, 1700000000000LL);
	ASSERT_EQ(got->last_seen_at_ms, 1700000000000LL);
	ASSERT_STREQ(got->payload, "{bad");
	inbox_admin_dead_letter_free(got);
	/* consumers run on it, and their dead letters are idempotent */
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = "c";
	inbox_consumer *c = NULL;
	char err[256];
	ASSERT_OK(inbox_consumer_open(&c, st, &co, err, sizeof(err)));
	inbox_delivery d = INBOX_DELIVERY_INIT;
	d.payload = "{bad";
	d.payload_len = 4;
	inbox_result r1 = INBOX_RESULT_INIT, r2 = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_consumer_process(c, &d, &r1));
	ASSERT_OK(inbox_consumer_process(c, &d, &r2));
	ASSERT_EQ(r1.outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(r2.dead_letter_id, r1.dead_letter_id);
	ASSERT_TRUE(r1.dead_letter_id > 2);
	ASSERT_EQ(count_rows(st, "SELECT count(*) FROM dead_letters"), 3);
	ASSERT_EQ(count_rows(st, "SELECT max(deliveries) FROM dead_letters"),
	          2);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* Rows with keys from `keys`, then made `age_s` seconds old. */
static int seed(inbox_store *st, const char *consumer, const char *prefix,
                int count, inbox_status final, int64_t age_s)
{
	const inbox_store_vtable *vt = VT(st);
	char key[64], ago[32];
	int rc = vt->begin(st);
	for (int i = 0; !rc && i < count; i++) {
		inbox_claim c;
		int64_t n;
		snprintf(key, sizeof(key), "%s%d", prefix, i);
		rc = claim1(st, consumer, key, FP_A, INBOX_ST_PROCESSING, 60000,
		            &c);
		if (!rc && final != INBOX_ST_PROCESSING)
			rc = vt->finish(st, consumer, key, 1, INBOX_ST_NONE,
			                final, 0, &n);
	}
	snprintf(key, sizeof(key), "%s%%", prefix);
	snprintf(ago, sizeof(ago), "%lld", (long long)age_s * 1000);
	const char *p[] = {ago, consumer, key};
	int64_t n;
	/* processed_at is set even on processing/failed rows to prove that
	 * purge looks at the status */
	if (!rc)
		rc = vt->exec(st,
		              "UPDATE inbox SET processed_at = "
		              "coalesce(processed_at, created_at) - $1 "
		              "WHERE consumer = $2 AND key LIKE $3",
		              3, p, &n);
	if (!rc)
		rc = vt->commit(st);
	else
		vt->rollback(st);
	return rc;
}

/* Two processes, each with its own connection, claim the same key at the
 * same time: exactly one inserts it. */
static int race_child(int ready_fd, int go_fd)
{
	inbox_store *st = open_db("race.db");
	if (!st)
		return 1;
	char b = 'r';
	inbox_claim c;
	if (write(ready_fd, &b, 1) != 1 || read(go_fd, &b, 1) != 1)
		return 1;
	int rc = VT(st)->begin(st);
	if (!rc)
		rc = claim1(st, "c", "race-key", FP_A, INBOX_ST_COMPLETED, 0,
		            &c);
	sleep_ms(100); /* hold the write lock while the other waits */
	if (!rc)
		rc = VT(st)->commit(st);
	if (rc) {
		fprintf(stderr, "  child: %d %s\n", rc, inbox_store_errmsg(st));
		return 1;
	}
	inbox_store_close(st);
	return c.is_new ? 10 : (c.status == INBOX_ST_COMPLETED ? 20 : 2);
}

TEST(two_processes)
{
	inbox_store *st = open_db("race.db");
	ASSERT_TRUE(st != NULL);
	inbox_store_close(st);
	int ready[2], go[2];
	ASSERT_OK(pipe(ready));
	ASSERT_OK(pipe(go));
	pid_t pid[2];
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		ASSERT_TRUE(pid[i] >= 0);
		if (pid[i] == 0)
			_exit(race_child(ready[1], go[0]));
	}
	char b[2];
	ASSERT_EQ(read(ready[0], b, 1) + read(ready[0], b + 1, 1), 2);
	ASSERT_EQ(write(go[1], "gg", 2), 2);
	int codes = 0;
	for (int i = 0; i < 2; i++) {
		int status = 0;
		ASSERT_EQ(waitpid(pid[i], &status, 0), pid[i]);
		ASSERT_TRUE(WIFEXITED(status));
		codes += WEXITSTATUS(status);
	}
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	ASSERT_EQ(codes, 30); /* one 10 (new) + one 20 (duplicate) */
	st = open_db("race.db");
	ASSERT_TRUE(st != NULL);
	ASSERT_EQ(count_rows(st, "SELECT count(*) FROM inbox"), 1);
	inbox_store_close(st);
}

TEST(busy_is_transient)
{
	inbox_store *a = open_db("busy.db");
	inbox_store *b = open_opts("busy.db", NULL, 50);
	ASSERT_TRUE(a != NULL && b != NULL);
	ASSERT_OK(VT(a)->begin(a));
	ASSERT_EQ(VT(b)->begin(b), INBOX_ERR_TRANSIENT);
	ASSERT_CONTAINS(inbox_store_errcode(b), "SQLITE_BUSY");
	ASSERT_EQ(b->in_txn, 0);
	/* purge, too, waits for the write lock and then gives up */
	int64_t n;
	ASSERT_EQ(VT(b)->register_consumer(b, "c", 60), INBOX_ERR_TRANSIENT);
	ASSERT_OK(VT(a)->commit(a));
	ASSERT_OK(VT(b)->register_consumer(b, "c", 60));
	ASSERT_OK(VT(a)->begin(a));
	ASSERT_EQ(seed(b, "c", "x", 1, INBOX_ST_COMPLETED, 3600),
	          INBOX_ERR_TRANSIENT);
	ASSERT_EQ(inbox_store_purge(b, "c", 0, 10, 0, &n), INBOX_ERR_TRANSIENT);
	ASSERT_OK(VT(a)->rollback(a));
	ASSERT_OK(VT(b)->begin(b));
	ASSERT_OK(VT(b)->commit(b));
	inbox_store_close(a);
	inbox_store_close(b);
}

TEST(bad_sql)
{
	inbox_store *st = open_db("bad.db");
	ASSERT_TRUE(st != NULL);
	const inbox_store_vtable *vt = VT(st);
	int64_t n;
	ASSERT_EQ(vt->exec(st, "SELEC 1", 0, NULL, &n), INBOX_ERR_STORE);
	ASSERT_CONTAINS(inbox_store_errmsg(st), "syntax error");
	ASSERT_STREQ(inbox_store_errcode(st), "SQLITE_ERROR");
	ASSERT_EQ(vt->query(st, "SELECT * FROM nosuch", 0, NULL, collect, NULL),
	          INBOX_ERR_STORE);
	ASSERT_CONTAINS(inbox_store_errmsg(st), "no such table");

	ASSERT_OK(exec0(st, "CREATE TABLE u (x PRIMARY KEY, y NOT NULL)"));
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(exec0(st, "INSERT INTO u VALUES (1, 1)"));
	ASSERT_EQ(exec0(st, "INSERT INTO u VALUES (1, 2)"), INBOX_ERR_STORE);
	ASSERT_STREQ(inbox_store_errcode(st), "SQLITE_CONSTRAINT_PRIMARYKEY");
	ASSERT_EQ(exec0(st, "INSERT INTO u VALUES (2, NULL)"), INBOX_ERR_STORE);
	ASSERT_STREQ(inbox_store_errcode(st), "SQLITE_CONSTRAINT_NOTNULL");
	/* a failed statement leaves the transaction usable */
	ASSERT_EQ(st->in_txn, 1);
	ASSERT_OK(exec0(st, "INSERT INTO u VALUES (3, 3)"));
	ASSERT_OK(vt->commit(st));
	ASSERT_EQ(count_rows(st, "SELECT count(*) FROM u"), 2);
	inbox_store_close(st);
}

TEST(prefix)
{
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	inbox_store *st = NULL;
	o.table_prefix = "billing_";
	o.schema = "ignored"; /* SQLite has no schemas: no effect */
	ASSERT_OK(inbox_store_open(&st, db_url("prefix.db"), &o));
	rows r;
	ASSERT_OK(q(st,
	            "SELECT name FROM sqlite_master WHERE name NOT LIKE "
	            "'sqlite%' ORDER BY name",
	            0, NULL, &r));
	ASSERT_EQ(r.n, 11);
	ASSERT_STREQ(r.first[0], "billing_consumers");
	ASSERT_STREQ(r.first[1], "billing_dead_letters");
	ASSERT_STREQ(r.first[2], "billing_dead_letters_created_idx");
	ASSERT_STREQ(r.first[3], "billing_dead_letters_dedup_idx");
	ASSERT_STREQ(r.first[4], "billing_inbox");
	ASSERT_STREQ(r.first[5], "billing_inbox_processed_idx");
	ASSERT_STREQ(r.first[6], "billing_outbox");
	ASSERT_STREQ(r.first[7], "billing_outbox_done_idx");
	ASSERT_STREQ(r.first[8], "billing_outbox_due_idx");
	ASSERT_STREQ(r.first[9], "billing_outbox_state_idx");
	ASSERT_STREQ(r.first[10], "billing_schema_version");
	/* the backend's own statements use the prefixed tables */
	inbox_claim c;
	int64_t n;
	ASSERT_OK(VT(st)->register_consumer(st, "c", 60));
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "c", "k", FP_A, INBOX_ST_COMPLETED, 0, &c));
	ASSERT_EQ(c.is_new, 1);
	ASSERT_OK(VT(st)->commit(st));
	ASSERT_EQ(count_rows(st, "SELECT count(*) FROM billing_inbox"), 1);
	ASSERT_OK(inbox_store_purge(st, "c", 0, 10, 0, &n));
	int v = 0;
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, INBOX__SCHEMA_VERSION);
	inbox_store_close(st);

	/* another prefix in the same file is another, empty inbox */
	o.table_prefix = "x_";
	ASSERT_OK(inbox_store_open(&st, db_url("prefix.db"), &o));
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, INBOX__SCHEMA_VERSION);
	ASSERT_EQ(count_rows(st, "SELECT count(*) FROM x_inbox"), 0);
	inbox_store_close(st);
}

static void remove_tmpdir(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	char path[1024];
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(tmpdir);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* SQLite's analogues of PostgreSQL's transaction limits (issue 11):
 * lock_timeout is the busy timeout, a statement timeout interrupts a
 * handler's statement; both transient. */
TEST(limits_lock_and_statement)
{
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	o.busy_timeout_ms = 60000; /* replaced by lock_timeout_ms */
	o.lock_timeout_ms = 200;
	o.statement_timeout_ms = 200;
	inbox_store *a = open_db("limits.db"), *b = NULL;
	ASSERT_TRUE(a != NULL);
	ASSERT_OK(inbox_store_open(&b, db_url("limits.db"), &o));
	ASSERT_OK(VT(a)->begin(a));
	double t0 = now_s();
	ASSERT_EQ(VT(b)->begin(b), INBOX_ERR_TRANSIENT);
	double waited = now_s() - t0;
	ASSERT_CONTAINS(inbox_store_errcode(b), "SQLITE_BUSY");
	ASSERT_TRUE(waited >= 0.15 && waited < 5.0);
	ASSERT_OK(VT(a)->rollback(a));
	/* A statement running past the timeout inside a transaction. */
	const char *slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
	                   "SELECT x + 1 FROM c LIMIT 2000000000) "
	                   "SELECT count(*) FROM c";
	int64_t n;
	ASSERT_OK(VT(b)->begin(b));
	t0 = now_s();
	ASSERT_EQ(VT(b)->exec(b, slow, 0, NULL, &n), INBOX_ERR_TRANSIENT);
	ASSERT_STREQ(inbox_store_errcode(b), "SQLITE_INTERRUPT");
	ASSERT_TRUE(now_s() - t0 < 5.0);
	VT(b)->rollback(b);
	rows r;
	memset(&r, 0, sizeof(r));
	ASSERT_OK(VT(b)->query(b, "SELECT 1", 0, NULL, collect, &r));
	ASSERT_EQ(r.n, 1); /* the handle goes on */
	inbox_store_close(a);
	inbox_store_close(b);
}

/* A consumer's batch timeout sets the limits its store left at 0. */
TEST(limits_from_batch_timeout)
{
	inbox_store *a = open_db("budget.db"), *b = open_db("budget.db");
	ASSERT_TRUE(a != NULL && b != NULL);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	inbox_consumer *c = NULL;
	co.name = "budget";
	co.batch_timeout_ms = 300;
	ASSERT_OK(inbox_consumer_open(&c, b, &co, NULL, 0));
	ASSERT_OK(VT(a)->begin(a));
	double t0 = now_s();
	ASSERT_EQ(VT(b)->begin(b), INBOX_ERR_TRANSIENT);
	double waited = now_s() - t0;
	ASSERT_TRUE(waited >= 0.25 && waited < 4.0); /* not the 5 s default */
	ASSERT_OK(VT(a)->rollback(a));
	inbox_consumer_close(c);
	inbox_store_close(a);
	inbox_store_close(b);
}

int main(void)
{
	if (!mkdtemp(tmpdir) || chdir(tmpdir) != 0) {
		perror("mkdtemp");
		return 1;
	}
	RUN(url_forms);
	RUN(migrate_twice);
	RUN(state_errors);
	RUN(dollar_params);
	RUN(statement_cache);
	RUN(reentrant_query);
	RUN(upgrade_from_v3);
	RUN(two_processes);
	RUN(busy_is_transient);
	RUN(bad_sql);
	RUN(prefix);
	RUN(limits_lock_and_statement);
	RUN(limits_from_batch_timeout);
	if (chdir("/") != 0)
		perror("chdir");
	remove_tmpdir();
	return test_summary();
}
