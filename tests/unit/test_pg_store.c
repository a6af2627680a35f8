/* The PostgreSQL store backend, through the public API and its vtable,
 * against the server in INBOX_TEST_PG_URL (the suite always sets it). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include <inbox/admin.h>
#include <inbox/inbox.h>
#include <inbox/sys/store.h>

#include "../clock.h"
#include "core/internal.h" /* INBOX__SCHEMA_VERSION */
#include "store/postgres/pg_store.h"
#include "test.h"

#define FP_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define FP_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static const char *url;
static char prefix[48]; /* unique per run: pgt<pid>_ */
static char schema[48]; /* for the schema test */
static PGconn *admin;   /* a second connection: checks, locks, kills */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inbox_store *open_with(const char *pfx, const char *sch, int migrate)
{
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	inbox_store *st = NULL;
	o.table_prefix = pfx;
	o.schema = sch;
	o.auto_migrate = migrate;
	int rc = inbox_store_open(&st, url, &o);
	if (rc != INBOX_OK) {
		fprintf(stderr, "  open: %d %s\n", rc,
		        st ? inbox_store_errmsg(st) : "");
		inbox_store_close(st);
		return NULL;
	}
	return st;
}

static inbox_store *open_store(void)
{
	return open_with(prefix, NULL, 1);
}

static const inbox_store_vtable *VT(inbox_store *st)
{
	return st->vt;
}

/* One value from the admin connection, as an integer (-1 on error). */
static long long scalar(const char *sql)
{
	PGresult *r = PQexec(admin, sql);
	long long v = -1;
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
	    !PQgetisnull(r, 0, 0))
		v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	else if (PQresultStatus(r) != PGRES_TUPLES_OK)
		fprintf(stderr, "  admin: %s", PQerrorMessage(admin));
	PQclear(r);
	return v;
}

static int admin_exec(const char *sql)
{
	PGresult *r = PQexec(admin, sql);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
	         PQresultStatus(r) == PGRES_TUPLES_OK;
	if (!ok)
		fprintf(stderr, "  admin: %s", PQerrorMessage(admin));
	PQclear(r);
	return ok ? 0 : -1;
}

/* SQL with {T} replaced by the prefixed inbox table name. */
static const char *tq(const char *fmt, const char *arg)
{
	static char buf[1024];
	char table[128];
	snprintf(table, sizeof(table), "\"%sinbox\"", prefix);
	snprintf(buf, sizeof(buf), fmt, table, arg ? arg : "");
	return buf;
}

static int claim1(inbox_store *st, const char *consumer, inbox_claim *cl,
                  const char *key, const char *fp, inbox_status status,
                  int64_t lease_ms)
{
	memset(cl, 0, sizeof(*cl));
	cl->key = key;
	cl->fingerprint = fp;
	cl->message_id = "m-1";
	return VT(st)->claim(st, consumer, cl, 1, status, lease_ms);
}

/* First column of the first row, as text. */
struct first {
	char v[256];
	int rows;
	int null;
};

static int first_row(int ncols, const char *const *values, void *payload)
{
	struct first *f = payload;
	if (f->rows++ == 0 && ncols > 0) {
		f->null = values[0] == NULL;
		snprintf(f->v, sizeof(f->v), "%s", values[0] ? values[0] : "");
	}
	return 0;
}

/* ---------------------------------------------------------------- */

TEST(migrate_idempotent)
{
	char pfx[64];
	snprintf(pfx, sizeof(pfx), "%smig_", prefix);
	inbox_store *st = open_with(pfx, NULL, 0);
	ASSERT_TRUE(st != NULL);
	ASSERT_STREQ(inbox_store_kind(st), "postgresql");
	int v = -1;
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, 0);
	ASSERT_OK(inbox_store_migrate(st));
	ASSERT_OK(inbox_store_migrate(st));
	ASSERT_OK(inbox_store_schema_version(st, &v));
	/* 2: the outbox, 3: generations, 4: idempotent dead letters, 5:
	 * stored results */
	ASSERT_EQ(v, INBOX__SCHEMA_VERSION);
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM \"%sschema_version\"",
	         pfx);
	/* one row per version applied */
	ASSERT_EQ(scalar(sql), INBOX__SCHEMA_VERSION);
	inbox_store_close(st);
}

TEST(migrate_concurrent)
{
	char pfx[64];
	snprintf(pfx, sizeof(pfx), "%sconc_", prefix);
	pid_t kids[3];
	for (int i = 0; i < 3; i++) {
		kids[i] = fork();
		ASSERT_TRUE(kids[i] >= 0);
		if (kids[i] == 0) {
			inbox_store *st = open_with(pfx, NULL, 1);
			int ok = st != NULL;
			inbox_store_close(st);
			_exit(ok ? 0 : 1);
		}
	}
	for (int i = 0; i < 3; i++) {
		int status = 0;
		ASSERT_EQ(waitpid(kids[i], &status, 0), kids[i]);
		ASSERT_TRUE(WIFEXITED(status));
		ASSERT_EQ(WEXITSTATUS(status), 0);
	}
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM \"%sschema_version\"",
	         pfx);
	/* versions 1 to the last, once each */
	ASSERT_EQ(scalar(sql), INBOX__SCHEMA_VERSION);
}

/* A child claims K and holds its transaction open; our claim of K waits
 * on the unique index, and must then report the committed row, not new. */
TEST(claim_concurrent)
{
	int ready[2];
	ASSERT_EQ(pipe(ready), 0);
	pid_t kid = fork();
	ASSERT_TRUE(kid >= 0);
	if (kid == 0) {
		close(ready[0]);
		inbox_store *st = open_store();
		inbox_claim cl;
		int ok = st && VT(st)->begin(st) == 0 &&
		         claim1(st, "conc", &cl, "K", FP_A, INBOX_ST_COMPLETED,
		                0) == 0 &&
		         cl.is_new;
		(void)!write(ready[1], ok ? "1" : "0", 1);
		sleep_ms(300);
		ok = ok && VT(st)->commit(st) == 0;
		inbox_store_close(st);
		_exit(ok ? 0 : 1);
	}
	close(ready[1]);
	char c = 0;
	ASSERT_EQ(read(ready[0], &c, 1), 1);
	close(ready[0]);
	ASSERT_EQ(c, '1');
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	inbox_claim cl[2] = {{.key = "J", .fingerprint = FP_B},
	                     {.key = "K", .fingerprint = FP_B}};
	double t0 = now_s();
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(VT(st)->claim(st, "conc", cl, 2, INBOX_ST_COMPLETED, 0));
	double waited = now_s() - t0;
	ASSERT_OK(VT(st)->commit(st));
	int status = 0;
	ASSERT_EQ(waitpid(kid, &status, 0), kid);
	ASSERT_EQ(WEXITSTATUS(status), 0);
	ASSERT_TRUE(waited > 0.1); /* we did wait for the child */
	ASSERT_EQ(cl[0].is_new, 1);
	ASSERT_EQ(cl[1].is_new, 0);
	ASSERT_EQ(cl[1].status, INBOX_ST_COMPLETED);
	ASSERT_STREQ(cl[1].stored_fingerprint, FP_A);
	ASSERT_EQ(cl[1].attempts, 1);
	inbox_store_close(st);
}

/* Two takers of one failed record: the row lock makes the second wait,
 * re-check, and lose. */
TEST(reclaim_concurrent)
{
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	inbox_claim cl;
	int64_t rows;
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "rcc", &cl, "R2", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_OK(VT(st)->finish(st, "rcc", "R2", 0, INBOX_ST_NONE,
	                         INBOX_ST_FAILED, 1, &rows));
	ASSERT_OK(VT(st)->commit(st));
	int ready[2];
	ASSERT_EQ(pipe(ready), 0);
	pid_t kid = fork();
	ASSERT_TRUE(kid >= 0);
	if (kid == 0) {
		close(ready[0]);
		inbox_store *k = open_store();
		int taken = 0;
		int32_t att;
		int64_t fence;
		int ok = k && VT(k)->begin(k) == 0 &&
		         VT(k)->reclaim(k, "rcc", "R2", INBOX_ST_COMPLETED, 0,
		                        &taken, &att, &fence) == 0 &&
		         taken == 1 && fence == 2;
		(void)!write(ready[1], ok ? "1" : "0", 1);
		sleep_ms(300);
		ok = ok && VT(k)->commit(k) == 0;
		inbox_store_close(k);
		_exit(ok ? 0 : 1);
	}
	close(ready[1]);
	char c = 0;
	ASSERT_EQ(read(ready[0], &c, 1), 1);
	close(ready[0]);
	ASSERT_EQ(c, '1');
	int taken = -1;
	int32_t att = 0;
	int64_t fence = 0;
	double t0 = now_s();
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(VT(st)->reclaim(st, "rcc", "R2", INBOX_ST_COMPLETED, 0,
	                          &taken, &att, &fence));
	double waited = now_s() - t0;
	ASSERT_OK(VT(st)->commit(st));
	int status = 0;
	ASSERT_EQ(waitpid(kid, &status, 0), kid);
	ASSERT_EQ(WEXITSTATUS(status), 0);
	ASSERT_TRUE(waited > 0.1);
	ASSERT_EQ(taken, 0);
	inbox_store_close(st);
}

/* A dead letter's key that is not UTF-8 is kept with each bad byte as
 * U+FFFD (a text column refuses it; the row must be kept). The rest of
 * dead_letter's contract is the conformance suite's
 * slot_dead_letter_payload. */
TEST(dead_letter_key_not_utf8)
{
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	inbox_dead_letter dl = {
	    .consumer = "dl",
	    .key = "bad\xc3(key",
	    .payload = "{}",
	    .payload_len = 2,
	    .attempts = 3,
	    .reason = "invalid UTF-8 at byte 3",
	};
	int64_t id1 = 0;
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(VT(st)->dead_letter(st, &dl, &id1));
	ASSERT_OK(VT(st)->commit(st));
	ASSERT_TRUE(id1 > 0);
	char sql[256], idtxt[24];
	snprintf(idtxt, sizeof(idtxt), "%lld", (long long)id1);
	const char *p[1] = {idtxt};
	snprintf(sql, sizeof(sql),
	         "SELECT key FROM \"%sdead_letters\" WHERE id = $1", prefix);
	struct first f = {0};
	ASSERT_OK(VT(st)->query(st, sql, 1, p, first_row, &f));
	ASSERT_EQ(f.rows, 1);
	ASSERT_STREQ(f.v, "bad\xef\xbf\xbd(key");
	inbox_store_close(st);
}

/* A v3 database upgrades in place: its dead letters are kept (repeats
 * too, as rows of their own), read as seen once at their creation; new
 * ones are idempotent. */
TEST(upgrade_from_v3)
{
	char pfx[64], sql[512];
	snprintf(pfx, sizeof(pfx), "%sv3_", prefix);
	inbox_store *st = open_with(pfx, NULL, 0);
	ASSERT_TRUE(st != NULL);
	ASSERT_OK(inbox__pg_migrate_to(st, 3));
	int v = 0;
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, 3);
	snprintf(sql, sizeof(sql),
	         "INSERT INTO \"%sdead_letters\" (consumer, payload, attempts,"
	         " reason, created_at) SELECT 'c', '\\x7b626164', 1,"
	         " 'malformed JSON', '2023-11-14 22:13:20+00'"
	         " FROM generate_series(1, 2)",
	         pfx);
	ASSERT_OK(admin_exec(sql));
	inbox_store_close(st);
	st = open_with(pfx, NULL, 1);
	ASSERT_TRUE(st != NULL);
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, INBOX__SCHEMA_VERSION);
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM \"%sdead_letters\" WHERE deliveries = 1"
	         " AND dedup_key IS NULL AND last_seen_at IS NULL",
	         pfx);
	ASSERT_EQ(scalar(sql), 2);
	snprintf(sql, sizeof(sql), "SELECT min(id) FROM \"%sdead_letters\"",
	         pfx);
	int64_t first = scalar(sql);
	inbox_admin_dead_letter *got = NULL;
	ASSERT_OK(inbox_admin_dlq_get(st, first, NULL, &got));
	ASSERT_EQ(got->deliveries, 1);
	ASSERT_EQ(got->created_at_ms, 1700000000000LL);
	ASSERT_EQ(got->last_seen_at_ms, 1700000000000LL);
	ASSERT_EQ(got->payload_len, 4);
	ASSERT_STREQ(got->payload, "{bad");
	inbox_admin_dead_letter_free(got);
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
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) * 10 + max(deliveries) FROM "
	         "\"%sdead_letters\"",
	         pfx);
	ASSERT_EQ(scalar(sql), 32);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

TEST(purge_busy)
{
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	char sql[128];
	long long key = (long long)inbox__pg_lock_key(st, "purge");
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock(%lld)", key);
	ASSERT_OK(admin_exec(sql));
	int64_t n = -1;
	/* (a window at least the registered hour: a shorter one is refused
	 * before the lock is tried) */
	ASSERT_EQ(inbox_store_purge(st, "pg", 3 * 3600, 10, 0, &n),
	          INBOX_ERR_BUSY);
	ASSERT_CONTAINS(inbox_store_errmsg(st), "another purge");
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%lld)", key);
	ASSERT_OK(admin_exec(sql));
	ASSERT_OK(inbox_store_purge(st, "pg", 3 * 3600, 10, 0, &n));
	/* Our own lock was released after the purge. */
	snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%lld)::int",
	         key);
	ASSERT_EQ(scalar(sql), 1);
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%lld)", key);
	ASSERT_OK(admin_exec(sql));
	inbox_store_close(st);
}

static int kill_backend(inbox_store *st)
{
	PGconn *c = VT(st)->native(st);
	char sql[96];
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d)::int",
	         PQbackendPID(c));
	if (scalar(sql) != 1)
		return -1;
	sleep_ms(50);
	return 0;
}

TEST(transient_and_reconnect)
{
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	inbox_claim cl;
	/* Prepare the hot statements on this backend first. */
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "tr", &cl, "T1", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_OK(VT(st)->commit(st));

	ASSERT_OK(kill_backend(st));
	int64_t rows;
	ASSERT_EQ(VT(st)->exec(st, "SELECT 1", 0, NULL, &rows),
	          INBOX_ERR_TRANSIENT);
	ASSERT_TRUE(inbox_store_errcode(st)[0] != '\0');
	ASSERT_OK(VT(st)->begin(st)); /* reconnects */
	ASSERT_OK(claim1(st, "tr", &cl, "T1", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(cl.is_new, 0);
	ASSERT_OK(claim1(st, "tr", &cl, "T2", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(cl.is_new, 1);
	ASSERT_OK(VT(st)->commit(st));

	/* Lost in the middle of a transaction: the claim fails transiently,
	 * rollback succeeds, nothing was committed. */
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "tr", &cl, "T3", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_OK(kill_backend(st));
	ASSERT_EQ(claim1(st, "tr", &cl, "T4", FP_A, INBOX_ST_COMPLETED, 0),
	          INBOX_ERR_TRANSIENT);
	/* A commit now must not reconnect and "succeed" on a new session. */
	ASSERT_EQ(VT(st)->commit(st), INBOX_ERR_TRANSIENT);
	ASSERT_OK(VT(st)->rollback(st));
	ASSERT_EQ(st->in_txn, 0);
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "tr", &cl, "T3", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(cl.is_new, 1);
	ASSERT_OK(VT(st)->commit(st));

	/* Lost before COMMIT. */
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "tr", &cl, "T5", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_OK(kill_backend(st));
	ASSERT_EQ(VT(st)->commit(st), INBOX_ERR_TRANSIENT);
	ASSERT_EQ(st->in_txn, 0);
	ASSERT_OK(VT(st)->rollback(st));
	ASSERT_EQ(scalar(tq("SELECT count(*) FROM %s WHERE consumer = 'tr' "
	                    "AND key = 'T5'%s",
	                    NULL)),
	          0);
	inbox_store_close(st);
}

TEST(errors_and_sqlstate)
{
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	int64_t rows;
	ASSERT_EQ(VT(st)->exec(st, "SELEC 1", 0, NULL, &rows), INBOX_ERR_STORE);
	ASSERT_STREQ(inbox_store_errcode(st), "42601");
	ASSERT_CONTAINS(inbox_store_errmsg(st), "syntax error");
	ASSERT_EQ(
	    VT(st)->exec(st, "SELECT * FROM no_such_table_xyz", 0, NULL, &rows),
	    INBOX_ERR_STORE);
	ASSERT_STREQ(inbox_store_errcode(st), "42P01");
	/* Inside a transaction, through the pipeline with BEGIN. */
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_EQ(
	    VT(st)->exec(st, "SELECT * FROM no_such_table_xyz", 0, NULL, &rows),
	    INBOX_ERR_STORE);
	ASSERT_STREQ(inbox_store_errcode(st), "42P01");
	/* COMMIT of an aborted transaction is an error, not a success. */
	ASSERT_EQ(VT(st)->commit(st), INBOX_ERR_STORE);
	ASSERT_EQ(st->in_txn, 0);
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(VT(st)->exec(st, "SELECT 1", 0, NULL, &rows));
	ASSERT_EQ(rows, 1);
	ASSERT_OK(VT(st)->commit(st));
	/* COPY is refused without wedging the connection. */
	ASSERT_EQ(VT(st)->exec(st, "COPY (SELECT 1) TO STDOUT", 0, NULL, &rows),
	          INBOX_ERR_STORE);
	ASSERT_OK(VT(st)->exec(st, "SELECT 1", 0, NULL, &rows));
	ASSERT_OK(VT(st)->exec(st, "CREATE TEMP TABLE tcopy (k text)", 0, NULL,
	                       &rows));
	ASSERT_EQ(VT(st)->exec(st, "COPY tcopy FROM STDIN", 0, NULL, &rows),
	          INBOX_ERR_STORE);
	ASSERT_OK(VT(st)->exec(st, "SELECT 1", 0, NULL, &rows));
	/* ... also when it travels in the pipeline with BEGIN. */
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_EQ(VT(st)->exec(st, "COPY tcopy FROM STDIN", 0, NULL, &rows),
	          INBOX_ERR_STORE);
	ASSERT_STREQ(inbox_store_errcode(st), "0A000");
	ASSERT_OK(VT(st)->rollback(st));
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_EQ(VT(st)->exec(st, "COPY (SELECT 1) TO STDOUT", 0, NULL, &rows),
	          INBOX_ERR_STORE);
	ASSERT_OK(VT(st)->rollback(st));
	ASSERT_OK(VT(st)->exec(st, "SELECT 1", 0, NULL, &rows));
	/* States. */
	ASSERT_EQ(VT(st)->commit(st), INBOX_ERR_STATE);
	ASSERT_EQ(VT(st)->savepoint(st), INBOX_ERR_STATE);
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_EQ(VT(st)->begin(st), INBOX_ERR_STATE);
	ASSERT_OK(VT(st)->rollback(st));
	ASSERT_OK(VT(st)->rollback(st)); /* harmless when none is open */
	inbox_store_close(st);

	/* A prefix that would need quoting is refused by the core. */
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	o.table_prefix = "bad\"prefix";
	st = NULL;
	ASSERT_EQ(inbox_store_open(&st, url, &o), INBOX_ERR_INVALID);
	ASSERT_TRUE(st == NULL);
}

TEST(connect_error_hides_password)
{
	inbox_store *st = NULL;
	/* Nothing listens on port 1. */
	int rc = inbox_store_open(
	    &st, "postgresql://bob:hunter2@127.0.0.1:1/db?connect_timeout=2",
	    NULL);
	ASSERT_EQ(rc, INBOX_ERR_CONNECT);
	ASSERT_TRUE(st != NULL);
	ASSERT_TRUE(strstr(inbox_store_errmsg(st), "hunter2") == NULL);
	ASSERT_TRUE(inbox_store_errmsg(st)[0] != '\0');
	inbox_store_close(st);
	/* A malformed escape that libpq quotes back: a URL libpq cannot
	 * parse is a URL error (before any connection). */
	st = NULL;
	rc = inbox_store_open(&st, "postgresql://bob:se%zzcret@127.0.0.1:1/db",
	                      NULL);
	ASSERT_EQ(rc, INBOX_ERR_URL);
	ASSERT_CONTAINS(inbox_store_errmsg(st), "percent-encoded");
	ASSERT_TRUE(strstr(inbox_store_errmsg(st), "se%zzcret") == NULL);
	ASSERT_TRUE(strstr(inbox_store_errmsg(st), "cret") == NULL);
	inbox_store_close(st);
	/* a '?' inside the password: libpq would take it as part of it,
	 * other parsers as the start of the query: refused */
	st = NULL;
	rc = inbox_store_open(&st, "postgresql://bob:a?b%zzcret@127.0.0.1:1/db",
	                      NULL);
	ASSERT_EQ(rc, INBOX_ERR_URL);
	ASSERT_TRUE(strstr(inbox_store_errmsg(st), "zzcret") == NULL);
	inbox_store_close(st);
	st = NULL;
	rc = inbox_store_open(&st,
	                      "postgres://127.0.0.1:1/db?password=p%2x9&"
	                      "connect_timeout=2",
	                      NULL);
	ASSERT_EQ(rc, INBOX_ERR_URL);
	ASSERT_TRUE(strstr(inbox_store_errmsg(st), "p%2x9") == NULL);
	inbox_store_close(st);
}

static int count_rows(inbox_store *st, const char *table)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
	struct first f = {0};
	if (VT(st)->query(st, sql, 0, NULL, first_row, &f) != 0)
		return -1;
	return atoi(f.v);
}

/* The deferred BEGIN/SAVEPOINT must be real when the native connection
 * is handed out: it sees the transaction begun, and what it runs is
 * undone by rollback_to. (The savepoint contract itself is the
 * conformance suite's slot_savepoints.) */
TEST(savepoints_native_handle)
{
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	char t[64], sql[256];
	snprintf(t, sizeof(t), "\"%ssp\"", prefix);
	snprintf(sql, sizeof(sql), "CREATE TABLE %s (k text PRIMARY KEY)", t);
	int64_t rows;
	ASSERT_OK(VT(st)->exec(st, sql, 0, NULL, &rows));
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(VT(st)->savepoint(st));
	PGconn *conn = VT(st)->native(st);
	ASSERT_TRUE(conn != NULL);
	ASSERT_EQ(PQtransactionStatus(conn), PQTRANS_INTRANS);
	char ins[256];
	snprintf(ins, sizeof(ins), "INSERT INTO %s VALUES ('n')", t);
	PGresult *r = PQexec(conn, ins);
	ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	ASSERT_OK(VT(st)->rollback_to(st));
	ASSERT_OK(VT(st)->release(st));
	ASSERT_OK(VT(st)->commit(st));
	ASSERT_EQ(count_rows(st, t), 0);
	inbox_store_close(st);
}

/* A statement prepared inside a rolled-back transaction still exists;
 * a failure after the Parse in the same pipeline must not make us parse
 * it again ("already exists"). */
TEST(prepared_across_rollbacks)
{
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	inbox_claim cl;
	int taken;
	int32_t att;
	int64_t fence, rows;
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "pr", &cl, "P1", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_OK(VT(st)->rollback(st));
	/* reclaim's first use fails after its Parse (lock timeout). */
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "pr", &cl, "P1", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(cl.is_new, 1);
	ASSERT_OK(VT(st)->commit(st));
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(VT(st)->finish(st, "pr", "P1", 0, INBOX_ST_NONE,
	                         INBOX_ST_FAILED, 0, &rows));
	ASSERT_OK(VT(st)->commit(st));
	ASSERT_OK(admin_exec("BEGIN"));
	ASSERT_OK(admin_exec(tq("SELECT 1 FROM %s WHERE consumer = 'pr' "
	                        "FOR UPDATE%s",
	                        NULL)));
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(VT(st)->exec(st, "SET LOCAL lock_timeout = '50ms'", 0, NULL,
	                       &rows));
	ASSERT_EQ(VT(st)->reclaim(st, "pr", "P1", INBOX_ST_COMPLETED, 0, &taken,
	                          &att, &fence),
	          INBOX_ERR_TRANSIENT);
	ASSERT_STREQ(inbox_store_errcode(st), "55P03");
	ASSERT_OK(VT(st)->rollback(st));
	ASSERT_OK(admin_exec("ROLLBACK"));
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(VT(st)->reclaim(st, "pr", "P1", INBOX_ST_COMPLETED, 0, &taken,
	                          &att, &fence));
	ASSERT_EQ(taken, 1);
	ASSERT_OK(VT(st)->commit(st));
	inbox_store_close(st);
}

TEST(schema_option)
{
	inbox_store *st = open_with("s_", schema, 1);
	ASSERT_TRUE(st != NULL);
	int v = 0;
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, INBOX__SCHEMA_VERSION);
	inbox_claim cl;
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "sc", &cl, "S1", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(cl.is_new, 1);
	ASSERT_OK(VT(st)->commit(st));
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM \"%s\".\"s_inbox\"",
	         schema);
	ASSERT_EQ(scalar(sql), 1);
	inbox_store_close(st);
	/* Same prefix, no schema: a different, empty world. */
	st = open_with("s_", NULL, 0);
	ASSERT_TRUE(st != NULL);
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, 0);
	inbox_store_close(st);
}

TEST(big_batch)
{
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	enum { N = 2000 };
	static inbox_claim cl[N];
	static char keys[N][24];
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++) {
			snprintf(keys[i], sizeof(keys[i]), "b%05d", i);
			memset(&cl[i], 0, sizeof(cl[i]));
			cl[i].key = keys[i];
			cl[i].fingerprint = FP_A;
			cl[i].message_id = i % 2 ? NULL : keys[i];
		}
		ASSERT_OK(VT(st)->begin(st));
		ASSERT_OK(
		    VT(st)->claim(st, "big", cl, N, INBOX_ST_COMPLETED, 0));
		ASSERT_OK(VT(st)->commit(st));
		for (int i = 0; i < N; i++)
			ASSERT_EQ(cl[i].is_new, round == 0);
	}
	ASSERT_EQ(scalar(tq("SELECT count(*) FROM %s WHERE consumer = 'big' "
	                    "AND message_id IS NULL%s",
	                    NULL)),
	          N / 2);
	inbox_store_close(st);
}

/* ---- generations ------------------------------------------------- */

static char gprefix[48]; /* generations tests: their own tables */

/* Claim n keys "<pfx>NNN" (fingerprint fp) in one transaction; count the
 * ones that came back new. */
static int gen_claim(inbox_store *st, const char *pfx, int n, const char *fp,
                     int *fresh)
{
	static char keys[200][32];
	inbox_claim cl[200];
	memset(cl, 0, sizeof(cl));
	for (int i = 0; i < n; i++) {
		snprintf(keys[i], sizeof(keys[i]), "%s%03d", pfx, i);
		cl[i].key = keys[i];
		cl[i].fingerprint = fp;
	}
	int rc = VT(st)->begin(st);
	if (rc == 0)
		rc = VT(st)->claim(st, "gen", cl, (size_t)n, INBOX_ST_COMPLETED,
		                   0);
	if (rc == 0)
		rc = VT(st)->commit(st);
	else if (st->in_txn)
		VT(st)->rollback(st);
	*fresh = 0;
	for (int i = 0; i < n; i++)
		*fresh += cl[i].is_new;
	return rc;
}

static const char *gq(const char *fmt)
{
	static char buf[512];
	char t[96];
	snprintf(t, sizeof(t), "\"%sinbox\"", gprefix);
	snprintf(buf, sizeof(buf), fmt, t);
	return buf;
}

static long long gens_scalar(const char *fmt)
{
	char sql[512], t[96];
	snprintf(t, sizeof(t), "\"%sinbox_generations\"", gprefix);
	snprintf(sql, sizeof(sql), fmt, t);
	return scalar(sql);
}

TEST(generations_seal_and_find)
{
	inbox_store *st = open_with(gprefix, NULL, 1);
	ASSERT_TRUE(st != NULL);
	int fresh = 0, sealed = -1;
	ASSERT_OK(gen_claim(st, "k", 100, FP_A, &fresh));
	ASSERT_EQ(fresh, 100);
	/* A record left failed in the generation that gets sealed. */
	int64_t rows = 0;
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(VT(st)->finish(st, "gen", "k010", 0, INBOX_ST_NONE,
	                         INBOX_ST_FAILED, 1, &rows));
	ASSERT_OK(VT(st)->commit(st));
	ASSERT_EQ(rows, 1);
	/* A handle that read the generations before the seal keeps its
	 * (empty) list for a while: it must still find the sealed keys. */
	inbox_store *stale = open_with(gprefix, NULL, 1);
	ASSERT_TRUE(stale != NULL);
	ASSERT_OK(gen_claim(stale, "warm", 1, FP_A, &fresh));
	ASSERT_EQ(fresh, 1);

	ASSERT_OK(inbox_store_seal(st, 1000, &sealed));
	ASSERT_EQ(sealed, 0); /* 101 rows: not yet */
	ASSERT_OK(inbox_store_seal(st, 50, &sealed));
	ASSERT_EQ(sealed, 1);
	ASSERT_EQ(gens_scalar("SELECT count(*) FROM %s WHERE sealed_at IS NOT "
	                      "NULL AND bloom IS NOT NULL AND nkeys = 101"),
	          1);
	ASSERT_EQ(gens_scalar("SELECT max(gen) FROM %s"), 2);

	/* Every sealed key is found: through the filter, and by the stale
	 * handle that has none (it looks them all up). */
	ASSERT_OK(gen_claim(st, "k", 100, FP_A, &fresh));
	ASSERT_EQ(fresh, 0);
	/* The stale handle still takes generation 1 for the newest: its
	 * insert is refused (the batch would re-run), then it re-reads. */
	int rc = gen_claim(stale, "k", 100, FP_A, &fresh);
	/* (OK only if two seconds passed since its last read: then it
	 * re-read first, and found them all) */
	ASSERT_TRUE(rc == INBOX_OK || rc == INBOX_ERR_TRANSIENT);
	if (rc == INBOX_ERR_TRANSIENT)
		ASSERT_CONTAINS(inbox_store_errmsg(stale), "is sealed");
	else
		ASSERT_EQ(fresh, 0);
	ASSERT_OK(gen_claim(stale, "k", 100, FP_A, &fresh));
	ASSERT_EQ(fresh, 0);
	/* A sealed generation without a filter (a seal cut between its
	 * commit and its filter): every key is looked up in it. */
	char nul[160];
	snprintf(nul, sizeof(nul),
	         "UPDATE \"%sinbox_generations\" SET bloom = NULL", gprefix);
	ASSERT_OK(admin_exec(nul));
	inbox_store *nofilter = open_with(gprefix, NULL, 1);
	ASSERT_TRUE(nofilter != NULL);
	ASSERT_OK(gen_claim(nofilter, "k", 100, FP_A, &fresh));
	ASSERT_EQ(fresh, 0);
	inbox_store_close(nofilter);
	/* The next seal (nothing to seal yet) builds the missing filter. */
	ASSERT_OK(inbox_store_seal(st, 1000, &sealed));
	ASSERT_EQ(sealed, 0);
	ASSERT_EQ(gens_scalar("SELECT count(*) FROM %s WHERE bloom IS NOT NULL "
	                      "AND nkeys = 101"),
	          1);
	/* Same key, other fingerprint: reported with the stored one. */
	inbox_claim cl;
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "gen", &cl, "k050", FP_B, INBOX_ST_COMPLETED, 0));
	ASSERT_OK(VT(st)->commit(st));
	ASSERT_TRUE(!cl.is_new);
	ASSERT_EQ(cl.status, INBOX_ST_COMPLETED);
	ASSERT_STREQ(cl.stored_fingerprint, FP_A);
	/* The failed record is still there to retry, in its generation. */
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "gen", &cl, "k010", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(cl.status, INBOX_ST_FAILED);
	int taken = 0;
	int32_t att = 0;
	int64_t fence = 0;
	ASSERT_OK(VT(st)->reclaim(st, "gen", "k010", INBOX_ST_COMPLETED, 0,
	                          &taken, &att, &fence));
	ASSERT_OK(VT(st)->commit(st));
	ASSERT_EQ(taken, 1);
	ASSERT_EQ(scalar(gq("SELECT count(*) FROM %s WHERE key = 'k010' AND "
	                    "status = 'completed' AND gen = 1")),
	          1);

	/* New keys land in the new generation, and only there. */
	ASSERT_OK(gen_claim(stale, "n", 100, FP_A, &fresh));
	ASSERT_EQ(fresh, 100);
	ASSERT_EQ(scalar(gq("SELECT count(*) FROM %s WHERE gen = 2")), 100);
	ASSERT_EQ(scalar(gq("SELECT count(*) FROM %s WHERE consumer = 'gen'")),
	          201);
	ASSERT_EQ(scalar(gq("SELECT count(*) FROM (SELECT key FROM %s GROUP BY "
	                    "consumer, key HAVING count(*) > 1) x")),
	          0);

	/* Nothing can be inserted into a sealed generation: the server
	 * refuses it as a serialization failure (a claim's batch re-runs). */
	PGresult *r = PQexec(admin, gq("INSERT INTO %s (gen, consumer, key, "
	                               "fingerprint, status) VALUES (1, 'gen', "
	                               "'late', 'f', 'completed')"));
	ASSERT_EQ(PQresultStatus(r), PGRES_FATAL_ERROR);
	ASSERT_STREQ(PQresultErrorField(r, PG_DIAG_SQLSTATE), "40001");
	PQclear(r);

	/* A second seal: three generations, every key still found once. */
	ASSERT_OK(inbox_store_seal(st, 0, &sealed));
	ASSERT_EQ(sealed, 2);
	ASSERT_OK(gen_claim(st, "n", 100, FP_A, &fresh));
	ASSERT_EQ(fresh, 0);
	ASSERT_OK(gen_claim(st, "k", 100, FP_A, &fresh));
	ASSERT_EQ(fresh, 0);
	ASSERT_OK(gen_claim(st, "x", 10, FP_A, &fresh));
	ASSERT_EQ(fresh, 10);
	ASSERT_EQ(scalar(gq("SELECT count(*) FROM %s WHERE gen = 3")), 10);

	/* Purge reaches every generation, and deletes only what it should
	 * (ctid is not unique across partitions: it deletes by key). */
	ASSERT_OK(VT(st)->register_consumer(st, "gen", 3600));
	ASSERT_OK(admin_exec(gq("UPDATE %s SET processed_at = now() - interval "
	                        "'2 hours' WHERE key LIKE 'k%%' OR key LIKE "
	                        "'x%%'")));
	int64_t n = 0;
	ASSERT_OK(inbox_store_purge(st, "gen", 0, 7, 0, &n));
	ASSERT_EQ(n, 110);
	ASSERT_EQ(scalar(gq("SELECT count(*) FROM %s WHERE consumer = 'gen'")),
	          101); /* n000..n099 and warm000 */
	inbox_store_close(stale);
	inbox_store_close(st);
}

/* The seal waits for a transaction that is writing into the generation
 * it seals, so that transaction's keys are in the filter. */
TEST(generations_seal_waits_for_writers)
{
	inbox_store *st = open_with(gprefix, NULL, 1);
	ASSERT_TRUE(st != NULL);
	int fresh = 0;
	ASSERT_OK(gen_claim(st, "v", 5, FP_A, &fresh)); /* not empty */
	ASSERT_EQ(fresh, 5);
	pid_t pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		inbox_store *c = open_with(gprefix, NULL, 1);
		inbox_claim cl;
		int ok = c && VT(c)->begin(c) == 0 &&
		         claim1(c, "gen", &cl, "w1", FP_A, INBOX_ST_COMPLETED,
		                0) == 0 &&
		         cl.is_new;
		sleep_ms(600);
		ok = ok && VT(c)->commit(c) == 0;
		_exit(ok ? 0 : 1);
	}
	sleep_ms(250);
	double t0 = now_s();
	int sealed = 0;
	ASSERT_OK(inbox_store_seal(st, 0, &sealed));
	double waited = now_s() - t0;
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ASSERT_TRUE(sealed >= 1);
	ASSERT_TRUE(waited > 0.15);
	char sql[256];
	snprintf(sql, sizeof(sql),
	         "SELECT gen FROM \"%sinbox\" WHERE key = 'w1'", gprefix);
	ASSERT_EQ(scalar(sql), sealed);
	inbox_store *fresh_st = open_with(gprefix, NULL, 1);
	ASSERT_TRUE(fresh_st != NULL);
	inbox_claim cl;
	ASSERT_OK(VT(fresh_st)->begin(fresh_st));
	ASSERT_OK(
	    claim1(fresh_st, "gen", &cl, "w1", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_OK(VT(fresh_st)->commit(fresh_st));
	ASSERT_TRUE(!cl.is_new);
	inbox_store_close(fresh_st);
	inbox_store_close(st);
}

/* Several processes claim overlapping keys while generations are sealed
 * under them again and again: every key is new exactly once across all
 * of them, and recorded once. A claim refused by a seal (its newest
 * generation was sealed) re-runs, as the consumer does. */
TEST(generations_seal_under_concurrent_claims)
{
	enum { WORKERS = 3, POOL = 3000, ROUNDS = 150, BATCH = 40 };
	char dir[] = "/tmp/inbox-gens-XXXXXX";
	ASSERT_TRUE(mkdtemp(dir) != NULL);
	inbox_store *st = open_with(gprefix, NULL, 1);
	ASSERT_TRUE(st != NULL);
	pid_t pids[WORKERS];
	for (int w = 0; w < WORKERS; w++) {
		pids[w] = fork();
		ASSERT_TRUE(pids[w] >= 0);
		if (pids[w] > 0)
			continue;
		char path[96];
		snprintf(path, sizeof(path), "%s/w%d", dir, w);
		FILE *out = fopen(path, "w");
		inbox_store *c = open_with(gprefix, NULL, 1);
		if (!out || !c)
			_exit(2);
		unsigned seed = 7919u * (unsigned)(w + 1);
		static char keys[BATCH][16];
		inbox_claim cl[BATCH];
		for (int r = 0; r < ROUNDS; r++) {
			/* BATCH distinct keys, sorted (as the core sends). */
			int base = (int)(rand_r(&seed) % (POOL - 3 * BATCH));
			for (int i = 0; i < BATCH; i++)
				snprintf(keys[i], sizeof(keys[i]), "c%05d",
				         base + 3 * i);
			int rc, tries = 0;
			do {
				memset(cl, 0, sizeof(cl));
				for (int i = 0; i < BATCH; i++) {
					cl[i].key = keys[i];
					cl[i].fingerprint = FP_A;
				}
				rc = VT(c)->begin(c);
				if (rc == 0)
					rc =
					    VT(c)->claim(c, "gen", cl, BATCH,
					                 INBOX_ST_COMPLETED, 0);
				if (rc == 0)
					rc = VT(c)->commit(c);
				if (rc != 0 && c->in_txn)
					VT(c)->rollback(c);
			} while (rc == INBOX_ERR_TRANSIENT && ++tries < 50);
			if (rc != 0)
				_exit(3);
			for (int i = 0; i < BATCH; i++)
				if (cl[i].is_new)
					fprintf(out, "%s\n", keys[i]);
		}
		fclose(out);
		inbox_store_close(c);
		_exit(0);
	}
	/* Seal whenever the newest generation holds 60 records. */
	int seals = 0, alive = WORKERS, failed = 0;
	while (alive > 0) {
		int sealed = 0;
		int rc = inbox_store_seal(st, 60, &sealed);
		if (rc == INBOX_OK && sealed)
			seals++;
		else if (rc != INBOX_OK && rc != INBOX_ERR_TRANSIENT)
			failed++;
		sleep_ms(5);
		int status;
		pid_t p;
		while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
			alive--;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				failed++;
		}
	}
	ASSERT_EQ(failed, 0);
	printf("  # %d seals under %d workers\n", seals, WORKERS);
	ASSERT_TRUE(seals >= 3);
	/* Every key new exactly once: no key in two workers' lists. */
	char cmd[256];
	snprintf(cmd, sizeof(cmd),
	         "cat %s/w* | sort | uniq -d | wc -l; cat %s/w* | wc -l; "
	         "rm -rf %s",
	         dir, dir, dir);
	FILE *p = popen(cmd, "r");
	ASSERT_TRUE(p != NULL);
	long dup = -1, total = -1;
	ASSERT_EQ(fscanf(p, "%ld %ld", &dup, &total), 2);
	pclose(p);
	ASSERT_EQ(dup, 0);
	ASSERT_EQ(scalar(gq("SELECT count(*) FROM %s WHERE key LIKE 'c%%'")),
	          total);
	ASSERT_EQ(scalar(gq("SELECT count(*) FROM (SELECT key FROM %s GROUP BY "
	                    "consumer, key HAVING count(*) > 1) x")),
	          0);
	inbox_store_close(st);
}

/* ---- infrastructure faults through a consumer (issue 11) ------------- */

/* The three settings as a transaction of the store sees them. */
static void limits_seen(inbox_store *st, char out[3][32])
{
	struct first f[3];
	const char *names[3] = {"lock_timeout", "statement_timeout",
	                        "idle_in_transaction_session_timeout"};
	for (int i = 0; i < 3; i++) {
		memset(&f[i], 0, sizeof(f[i]));
		VT(st)->query(st, "SELECT current_setting($1)", 1, &names[i],
		              first_row, &f[i]);
		snprintf(out[i], 32, "%s", f[i].v);
	}
}

static inbox_store *open_limits(int64_t lock, int64_t stmt, int64_t idle)
{
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	inbox_store *st = NULL;
	o.table_prefix = prefix;
	o.lock_timeout_ms = lock;
	o.statement_timeout_ms = stmt;
	o.idle_in_transaction_timeout_ms = idle;
	if (inbox_store_open(&st, url, &o) != INBOX_OK) {
		inbox_store_close(st);
		return NULL;
	}
	return st;
}

/* The handler of the fault tests: one statement, $1 = the key. */
typedef struct fx {
	const char *sql;
	int with_rows; /* ask for the count: the statement runs at once */
	int calls;
} fx;

static int fx_handler(inbox_txn *t, const inbox_msg *m, void *payload)
{
	fx *f = payload;
	const char *k = inbox_msg_key(m);
	int64_t rows;
	f->calls++;
	int rc = inbox_txn_exec(t, f->sql, 1, &k, f->with_rows ? &rows : NULL);
	/* What a handler does with any error: ask for a retry. */
	return rc < 0 ? INBOX_HANDLER_RETRY : INBOX_HANDLER_OK;
}

static inbox_consumer *fx_consumer(inbox_store *st, const char *name, fx *f)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	inbox_consumer *c = NULL;
	char err[256];
	o.name = name;
	o.max_attempts = 2;
	o.handler = fx_handler;
	o.handler_payload = f;
	if (inbox_consumer_open(&c, st, &o, err, sizeof(err)) != INBOX_OK)
		fprintf(stderr, "  consumer: %s\n", err);
	return c;
}

/* Process ids[0..n) as one batch ({"id": ids[i]}). */
static int fx_batch(inbox_consumer *c, const char *const *ids, size_t n,
                    inbox_result *res)
{
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	char pl[8][64];
	TEST_DELIVERIES_INIT(d, 8);
	for (size_t i = 0; i < n; i++) {
		snprintf(pl[i], sizeof(pl[i]), "{\"id\":\"%s\"}", ids[i]);
		d[i].payload = pl[i];
		d[i].payload_len = strlen(pl[i]);
	}
	return inbox_consumer_process_batch(c, d, n, res);
}

static long long fx_count(const char *fmt, const char *name)
{
	char sql[512];
	snprintf(sql, sizeof(sql), fmt, prefix, name);
	return scalar(sql);
}

TEST(connection_id_counts_reconnects)
{
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	ASSERT_EQ(inbox_store_connection_id(st), 1);
	ASSERT_EQ(inbox_store_connection_id(NULL), 0);
	ASSERT_OK(kill_backend(st));
	int64_t rows;
	/* The loss is seen by the first statement; the next reconnects. */
	ASSERT_EQ(VT(st)->exec(st, "SELECT 1", 0, NULL, &rows),
	          INBOX_ERR_TRANSIENT);
	ASSERT_EQ(inbox_store_connection_id(st), 1);
	ASSERT_OK(VT(st)->exec(st, "SELECT 1", 0, NULL, &rows));
	ASSERT_EQ(inbox_store_connection_id(st), 2);
	ASSERT_OK(kill_backend(st));
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_EQ(VT(st)->exec(st, "SELECT 1", 0, NULL, &rows),
	          INBOX_ERR_TRANSIENT);
	ASSERT_EQ(inbox_store_connection_id(st), 2); /* not in a txn */
	ASSERT_OK(VT(st)->rollback(st));
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_EQ(inbox_store_connection_id(st), 3);
	ASSERT_OK(VT(st)->commit(st));
	inbox_store_close(st);
}

/* The server loses our prepared statements (a pooler's DISCARD ALL, or a
 * reconnect the cache took for the old connection): 26000 is transient,
 * everything is prepared again, nothing is counted or dead-lettered. */
static void lost_statements(int with_rows)
{
	char name[32], table[96], sql[256];
	snprintf(name, sizeof(name), "lost%d", with_rows);
	snprintf(table, sizeof(table), "\"%sfx_%s\"", prefix, name);
	snprintf(sql, sizeof(sql), "CREATE TABLE %s (k text)", table);
	ASSERT_OK(admin_exec(sql));
	snprintf(sql, sizeof(sql), "INSERT INTO %s (k) VALUES ($1)", table);
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	fx f = {sql, with_rows, 0};
	inbox_consumer *c = fx_consumer(st, name, &f);
	ASSERT_TRUE(c != NULL);
	inbox_result res[3] = {INBOX_RESULT_INIT};
	const char *a[] = {"a1", "a2", "a3"}, *b[] = {"b1", "b2", "b3"};
	ASSERT_OK(fx_batch(c, a, 3, res));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(res[i].outcome, INBOX_APPLIED);
	PGresult *r = PQexec(VT(st)->native(st), "DEALLOCATE ALL");
	ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	ASSERT_OK(fx_batch(c, b, 3, res));
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(res[i].outcome, INBOX_APPLIED);
		ASSERT_EQ(res[i].attempts, 1);
	}
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &s);
	ASSERT_EQ(s.retries, 0);
	ASSERT_EQ(s.dead_letters, 0);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
	ASSERT_EQ(scalar(sql), 6);
	ASSERT_EQ(fx_count("SELECT count(*) FROM \"%sinbox\" WHERE consumer = "
	                   "'%s' AND status = 'completed' AND attempts = 1",
	                   name),
	          6);
	ASSERT_EQ(fx_count("SELECT count(*) FROM \"%sdead_letters\" WHERE "
	                   "consumer = '%s'",
	                   name),
	          0);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

TEST(lost_statements_reprepared_deferred)
{
	lost_statements(0);
}

TEST(lost_statements_reprepared_direct)
{
	lost_statements(1);
}

/* A handler's statement times out on a lock another session holds: the
 * batch is transient (nothing committed, no attempt counted) whatever the
 * handler returned, and applies once the lock is gone. */
TEST(transient_handler_statement_uncounted)
{
	char table[96], sql[256];
	snprintf(table, sizeof(table), "\"%sfx_lock\"", prefix);
	snprintf(sql, sizeof(sql),
	         "CREATE TABLE %s (id int PRIMARY KEY); INSERT INTO %s "
	         "VALUES (1)",
	         table, table);
	ASSERT_OK(admin_exec(sql));
	snprintf(sql, sizeof(sql),
	         "UPDATE %s SET id = id WHERE id = 1 AND $1 <> ''", table);
	inbox_store *st = open_limits(100, 0, 0);
	ASSERT_TRUE(st != NULL);
	fx f = {sql, 1, 0};
	inbox_consumer *c = fx_consumer(st, "lockfx", &f);
	ASSERT_TRUE(c != NULL);
	char hold[160];
	snprintf(hold, sizeof(hold), "SELECT 1 FROM %s WHERE id = 1 FOR UPDATE",
	         table);
	ASSERT_OK(admin_exec("BEGIN"));
	ASSERT_OK(admin_exec(hold));
	inbox_result res[1] = {INBOX_RESULT_INIT};
	const char *k[] = {"l1"};
	/* max_attempts is 2: counted, 3 tries would dead-letter it. */
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(fx_batch(c, k, 1, res), INBOX_ERR_TRANSIENT);
		ASSERT_STREQ(inbox_store_errcode(st), "55P03");
	}
	ASSERT_OK(admin_exec("ROLLBACK"));
	ASSERT_TRUE(f.calls >= 3);
	ASSERT_EQ(fx_count("SELECT count(*) FROM \"%sinbox\" WHERE consumer = "
	                   "'%s'",
	                   "lockfx"),
	          0);
	ASSERT_OK(fx_batch(c, k, 1, res));
	ASSERT_EQ(res[0].outcome, INBOX_APPLIED);
	ASSERT_EQ(res[0].attempts, 1);
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &s);
	ASSERT_EQ(s.retries, 0);
	ASSERT_EQ(s.dead_letters, 0);
	ASSERT_TRUE(s.transient_retries >= 3);
	ASSERT_EQ(fx_count("SELECT count(*) FROM \"%sdead_letters\" WHERE "
	                   "consumer = '%s'",
	                   "lockfx"),
	          0);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* Explicit limits, derived ones, and none: SET LOCAL in every
 * transaction, nothing outside. */
/* ---- connection defaults: a host gone without a word is noticed ---- */

/* The value of option kw of the connection, or "" when unset. */
static const char *conn_opt(PGconn *c, const char *kw)
{
	static char out[64];
	out[0] = '\0';
	PQconninfoOption *o = PQconninfo(c);
	for (PQconninfoOption *p = o; p && p->keyword; p++)
		if (!strcmp(p->keyword, kw) && p->val)
			snprintf(out, sizeof(out), "%s", p->val);
	PQconninfoFree(o);
	return out;
}

static int sockopt(PGconn *c, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	if (getsockopt(PQsocket(c), level, name, &v, &len) < 0)
		return -2;
	return v;
}

static inbox_store *open_url(const char *u)
{
	inbox_store *st = NULL;
	int rc = inbox_store_open(&st, u, NULL);
	if (rc != INBOX_OK) {
		fprintf(stderr, "  open %s: %d %s\n", u, rc,
		        st ? inbox_store_errmsg(st) : "");
		inbox_store_close(st);
		return NULL;
	}
	return st;
}

TEST(connection_defaults_notice_a_silent_host)
{
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	PGconn *c = VT(st)->native(st);
	/* TCP keepalives and a retransmission bound, on the socket itself */
	ASSERT_STREQ(conn_opt(c, "keepalives"), "1");
	ASSERT_STREQ(conn_opt(c, "keepalives_idle"), "15");
	ASSERT_STREQ(conn_opt(c, "keepalives_interval"), "5");
	ASSERT_STREQ(conn_opt(c, "keepalives_count"), "3");
	ASSERT_STREQ(conn_opt(c, "tcp_user_timeout"), "30000");
	if (!getenv("PGCONNECT_TIMEOUT"))
		ASSERT_STREQ(conn_opt(c, "connect_timeout"), "10");
	ASSERT_EQ(sockopt(c, SOL_SOCKET, SO_KEEPALIVE), 1);
	ASSERT_EQ(sockopt(c, IPPROTO_TCP, TCP_KEEPIDLE), 15);
	ASSERT_EQ(sockopt(c, IPPROTO_TCP, TCP_KEEPINTVL), 5);
	ASSERT_EQ(sockopt(c, IPPROTO_TCP, TCP_KEEPCNT), 3);
	ASSERT_EQ(sockopt(c, IPPROTO_TCP, TCP_USER_TIMEOUT), 30000);
	/* a reconnect keeps them */
	ASSERT_OK(kill_backend(st));
	int64_t rows;
	ASSERT_EQ(VT(st)->exec(st, "SELECT 1", 0, NULL, &rows),
	          INBOX_ERR_TRANSIENT);
	ASSERT_OK(VT(st)->exec(st, "SELECT 1", 0, NULL, &rows));
	ASSERT_EQ(inbox_store_connection_id(st), 2);
	c = VT(st)->native(st);
	ASSERT_EQ(sockopt(c, IPPROTO_TCP, TCP_KEEPIDLE), 15);
	ASSERT_EQ(sockopt(c, IPPROTO_TCP, TCP_USER_TIMEOUT), 30000);
	inbox_store_close(st);

	/* what the URL sets wins, one by one */
	char u[1024];
	const char *sep = strchr(url, '?') ? "&" : "?";
	snprintf(u, sizeof(u), "%s%skeepalives_idle=7&tcp_user_timeout=1234",
	         url, sep);
	st = open_url(u);
	ASSERT_TRUE(st != NULL);
	c = VT(st)->native(st);
	ASSERT_EQ(sockopt(c, IPPROTO_TCP, TCP_KEEPIDLE), 7);
	ASSERT_EQ(sockopt(c, IPPROTO_TCP, TCP_USER_TIMEOUT), 1234);
	ASSERT_EQ(sockopt(c, IPPROTO_TCP, TCP_KEEPINTVL), 5);
	ASSERT_EQ(sockopt(c, IPPROTO_TCP, TCP_KEEPCNT), 3);
	inbox_store_close(st);
	snprintf(u, sizeof(u), "%s%skeepalives=0", url, sep);
	st = open_url(u);
	ASSERT_TRUE(st != NULL);
	c = VT(st)->native(st);
	ASSERT_STREQ(conn_opt(c, "keepalives"), "0");
	ASSERT_EQ(sockopt(c, SOL_SOCKET, SO_KEEPALIVE), 0);
	inbox_store_close(st);
}

TEST(limits_per_transaction)
{
	char v[3][32];
	inbox_store *st = open_limits(150, 2500, 4000);
	ASSERT_TRUE(st != NULL);
	ASSERT_OK(VT(st)->begin(st));
	limits_seen(st, v);
	ASSERT_OK(VT(st)->commit(st));
	ASSERT_STREQ(v[0], "150ms");
	ASSERT_STREQ(v[1], "2500ms");
	ASSERT_STREQ(v[2], "4s");
	limits_seen(st, v); /* outside a transaction: the server's */
	ASSERT_STREQ(v[0], "0");
	ASSERT_STREQ(v[1], "0");
	/* A consumer's batch timeout fills in what the options left unset;
	 * < 0 leaves it to the server. */
	inbox_store_close(st);
	st = open_limits(150, 0, -1);
	ASSERT_TRUE(st != NULL);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	inbox_consumer *c = NULL;
	co.name = "limits";
	co.batch_timeout_ms = 7000;
	ASSERT_OK(inbox_consumer_open(&c, st, &co, NULL, 0));
	ASSERT_OK(VT(st)->begin(st));
	limits_seen(st, v);
	ASSERT_OK(VT(st)->commit(st));
	ASSERT_STREQ(v[0], "150ms");
	ASSERT_STREQ(v[1], "7s");
	ASSERT_STREQ(v[2], "0");
	inbox_consumer_close(c);
	inbox_store_close(st);
	/* The default budget: a third of the lease. */
	st = open_limits(0, 0, 0);
	ASSERT_TRUE(st != NULL);
	co.batch_timeout_ms = 0;
	co.lease_ms = 9000;
	ASSERT_OK(inbox_consumer_open(&c, st, &co, NULL, 0));
	ASSERT_OK(VT(st)->begin(st));
	limits_seen(st, v);
	ASSERT_OK(VT(st)->commit(st));
	ASSERT_STREQ(v[0], "3s");
	ASSERT_STREQ(v[1], "3s");
	ASSERT_STREQ(v[2], "3s");
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* How many statements of the transactions' limits this connection has
 * prepared. */
static int limits_prepared(inbox_store *st)
{
	struct first f;
	memset(&f, 0, sizeof(f));
	VT(st)->query(st,
	              "SELECT count(*) FROM pg_prepared_statements"
	              " WHERE name LIKE 'inbox\\_\\_l%'",
	              0, NULL, first_row, &f);
	return atoi(f.v);
}

/* The limits travel as a statement prepared once per connection (an
 * unnamed one is planned again by the server in every transaction); new
 * limits on the same connection are a new statement. */
TEST(limits_prepared_once)
{
	char v[3][32];
	inbox_store *st = open_limits(150, 0, 4000);
	ASSERT_TRUE(st != NULL);
	for (int i = 0; i < 3; i++) {
		ASSERT_OK(VT(st)->begin(st));
		limits_seen(st, v);
		ASSERT_OK(VT(st)->commit(st));
		ASSERT_STREQ(v[0], "150ms");
		ASSERT_STREQ(v[1], "0");
	}
	ASSERT_EQ(limits_prepared(st), 1);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	inbox_consumer *c = NULL;
	co.name = "limits";
	co.batch_timeout_ms = 7000;
	ASSERT_OK(inbox_consumer_open(&c, st, &co, NULL, 0));
	for (int i = 0; i < 2; i++) {
		ASSERT_OK(VT(st)->begin(st));
		limits_seen(st, v);
		ASSERT_OK(VT(st)->commit(st));
		ASSERT_STREQ(v[0], "150ms");
		ASSERT_STREQ(v[1], "7s");
		ASSERT_STREQ(v[2], "4s");
	}
	ASSERT_EQ(limits_prepared(st), 2);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* A claim waiting on a key another transaction holds gives up after
 * lock_timeout (transient); a statement after statement_timeout. */
TEST(limits_lock_and_statement_timeouts)
{
	inbox_store *holder = open_store();
	inbox_store *st = open_limits(200, 300, 0);
	ASSERT_TRUE(holder != NULL && st != NULL);
	inbox_claim cl;
	ASSERT_OK(VT(holder)->begin(holder));
	ASSERT_OK(
	    claim1(holder, "lim", &cl, "K1", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_OK(VT(st)->begin(st));
	double t0 = now_s();
	ASSERT_EQ(claim1(st, "lim", &cl, "K1", FP_A, INBOX_ST_COMPLETED, 0),
	          INBOX_ERR_TRANSIENT);
	double waited = now_s() - t0;
	ASSERT_STREQ(inbox_store_errcode(st), "55P03");
	ASSERT_TRUE(waited >= 0.15 && waited < 5.0);
	ASSERT_OK(VT(st)->rollback(st));
	ASSERT_OK(VT(holder)->commit(holder));
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "lim", &cl, "K1", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(cl.is_new, 0);
	int64_t rows;
	t0 = now_s();
	ASSERT_EQ(VT(st)->exec(st, "SELECT pg_sleep(5)", 0, NULL, &rows),
	          INBOX_ERR_TRANSIENT);
	ASSERT_STREQ(inbox_store_errcode(st), "57014");
	ASSERT_TRUE(now_s() - t0 < 4.0);
	ASSERT_OK(VT(st)->rollback(st));
	inbox_store_close(holder);
	inbox_store_close(st);
}

/* A session idle inside its transaction past the timeout is ended by the
 * server, its locks released; the next call of the frozen holder fails
 * transiently and begin() reconnects. */
TEST(limits_idle_in_transaction)
{
	inbox_store *st = open_limits(0, 0, 300);
	inbox_store *other = open_limits(5000, 0, 0);
	ASSERT_TRUE(st != NULL && other != NULL);
	inbox_claim cl;
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_OK(claim1(st, "idle", &cl, "I1", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(cl.is_new, 1);
	uint64_t id = inbox_store_connection_id(st);
	/* "frozen": the other waits on I1 until the server ends us. */
	double t0 = now_s();
	ASSERT_OK(VT(other)->begin(other));
	ASSERT_OK(
	    claim1(other, "idle", &cl, "I1", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(cl.is_new, 1); /* ours was rolled back */
	ASSERT_OK(VT(other)->commit(other));
	ASSERT_TRUE(now_s() - t0 < 4.0);
	ASSERT_EQ(VT(st)->commit(st), INBOX_ERR_TRANSIENT);
	ASSERT_OK(VT(st)->rollback(st));
	ASSERT_OK(VT(st)->begin(st));
	ASSERT_EQ(inbox_store_connection_id(st), id + 1);
	ASSERT_OK(claim1(st, "idle", &cl, "I1", FP_A, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(cl.is_new, 0);
	ASSERT_EQ(cl.status, INBOX_ST_COMPLETED);
	ASSERT_OK(VT(st)->commit(st));
	inbox_store_close(st);
	inbox_store_close(other);
}

static void drop_all(void)
{
	char sql[512];
	snprintf(sql, sizeof(sql),
	         "DO $$DECLARE t text; BEGIN FOR t IN SELECT tablename FROM "
	         "pg_tables WHERE schemaname = current_schema() AND "
	         "tablename LIKE '%s%%' LOOP EXECUTE format('DROP TABLE IF "
	         "EXISTS %%I "
	         "CASCADE', t); END LOOP; END$$",
	         prefix);
	admin_exec(sql);
	snprintf(sql, sizeof(sql),
	         "DO $$DECLARE t text; BEGIN FOR t IN SELECT tablename FROM "
	         "pg_tables WHERE schemaname = current_schema() AND "
	         "tablename LIKE '%s%%' LOOP EXECUTE format('DROP TABLE IF "
	         "EXISTS %%I "
	         "CASCADE', t); END LOOP; END$$",
	         gprefix);
	admin_exec(sql);
	snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS \"%s\" CASCADE",
	         schema);
	admin_exec(sql);
}

int main(void)
{
	url = getenv("INBOX_TEST_PG_URL");
	if (!url || !*url) {
		fprintf(stderr, "test_pg_store: INBOX_TEST_PG_URL is not set "
		                "(tests/run-suite.sh sets it)\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	snprintf(prefix, sizeof(prefix), "pgt%d_", (int)getpid());
	snprintf(schema, sizeof(schema), "pgt%d_schema", (int)getpid());
	snprintf(gprefix, sizeof(gprefix), "pgg%d_", (int)getpid());
	admin = PQconnectdb(url);
	if (PQstatus(admin) != CONNECTION_OK) {
		fprintf(stderr, "test_pg_store: cannot connect: %s",
		        PQerrorMessage(admin));
		printf("0 passed, 1 failed\n");
		return 1;
	}
	PQclear(PQexec(admin, "SET client_min_messages = warning"));
	drop_all();
	RUN(migrate_idempotent);
	RUN(migrate_concurrent);
	RUN(claim_concurrent);
	RUN(reclaim_concurrent);
	RUN(dead_letter_key_not_utf8);
	RUN(upgrade_from_v3);
	RUN(purge_busy);
	RUN(transient_and_reconnect);
	RUN(errors_and_sqlstate);
	RUN(connect_error_hides_password);
	RUN(savepoints_native_handle);
	RUN(prepared_across_rollbacks);
	RUN(schema_option);
	RUN(big_batch);
	RUN(generations_seal_and_find);
	RUN(generations_seal_waits_for_writers);
	RUN(generations_seal_under_concurrent_claims);
	RUN(connection_id_counts_reconnects);
	RUN(connection_defaults_notice_a_silent_host);
	RUN(lost_statements_reprepared_deferred);
	RUN(lost_statements_reprepared_direct);
	RUN(transient_handler_statement_uncounted);
	RUN(limits_per_transaction);
	RUN(limits_prepared_once);
	RUN(limits_lock_and_statement_timeouts);
	RUN(limits_idle_in_transaction);
	drop_all();
	PQfinish(admin);
	return test_summary();
}
