/* The PostgreSQL store's merge of deferred INSERTs (pg_merge.c): the
 * statements it recognizes and the text it writes, and, against the server
 * in INBOX_TEST_PG_URL (the suite always sets it), that a merged batch
 * leaves exactly what one statement per handler call leaves — the same
 * rows in the same order, a repeated key skipped by ON CONFLICT DO
 * NOTHING, a failing row reported to its own handler — and that a table
 * whose triggers, rules or self-reference a merge could fool is never
 * merged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include <inbox/inbox.h>
#include <inbox/sys/store.h>

#include "base/buf.h"
#include "store/postgres/pg_store.h"
#include "test.h"

static const char *url;
static char prefix[48]; /* pgm<pid>_ */
static PGconn *admin;

static long long scalar(const char *sql)
{
	PGresult *r = PQexec(admin, sql);
	long long v = -1;
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
	    !PQgetisnull(r, 0, 0))
		v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	else
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

/* SQL with every {T} replaced by the test's table <prefix>NAME (lower
 * case: no quotes needed). */
static const char *sqlf(const char *fmt, const char *name)
{
	static char buf[2][2048];
	static int which;
	char *out = buf[which ^= 1];
	char table[96];
	snprintf(table, sizeof(table), "%s%s", prefix, name);
	size_t o = 0;
	for (const char *p = fmt; *p && o + sizeof(table) < sizeof(buf[0]);) {
		if (strncmp(p, "{T}", 3) == 0) {
			o += (size_t)snprintf(out + o, sizeof(buf[0]) - o, "%s",
			                      table);
			p += 3;
		} else {
			out[o++] = *p++;
		}
	}
	out[o] = '\0';
	return out;
}

/* ---- recognizing and writing ---------------------------------------- */

TEST(parse_accepts_single_row_inserts)
{
	static const char *const ok[] = {
	    "INSERT INTO t (a, b) VALUES ($1, $2)",
	    "insert into s.t values ($2, $1)",
	    "INSERT INTO \"Odd \"\"name\"\"\" (\"a$1\") VALUES ($1::text)",
	    "INSERT INTO c.s.t (a, b) VALUES ($1::numeric(10, 2), "
	    "$2::double precision[]) ON CONFLICT DO NOTHING;",
	    "  INSERT INTO t VALUES ($1, $1)  ",
	};
	pg_merge m;
	for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
		if (!inbox__pg_merge_parse(ok[i], &m))
			fprintf(stderr, "  refused: %s\n", ok[i]);
		ASSERT_EQ(inbox__pg_merge_parse(ok[i], &m), 1);
	}
	ASSERT_EQ(inbox__pg_merge_parse(ok[4], &m), 1);
	ASSERT_EQ(m.nparams, 1);
	ASSERT_EQ(inbox__pg_merge_parse(ok[3], &m), 1);
	ASSERT_EQ(m.nparams, 2);
}

TEST(parse_refuses_everything_else)
{
	/* Each of these would mean something else, or nothing, with its
	 * VALUES tuple repeated. */
	static const char *const no[] = {
	    "INSERT INTO t (a) VALUES ($1) RETURNING a",
	    "INSERT INTO t (a) VALUES (DEFAULT)",
	    "INSERT INTO t (a, b) VALUES ($1, 'x')",
	    "INSERT INTO t (a, b) VALUES ($1, now())",
	    "INSERT INTO t (a, b) VALUES ($1, $3)", /* $2 unused: no type */
	    "INSERT INTO t (a) VALUES ($1), ($2)",
	    "INSERT INTO t (a) VALUES ($1) ON CONFLICT (a) DO UPDATE SET a = 1",
	    "INSERT INTO t (a) VALUES ($1) ON CONFLICT (a) DO NOTHING",
	    "INSERT INTO t (a) VALUES ($1) -- comment",
	    "INSERT INTO t (a) VALUES ($1); INSERT INTO u VALUES ($1)",
	    "INSERT INTO t (a) SELECT $1",
	    "WITH x AS (SELECT 1) INSERT INTO t (a) VALUES ($1)",
	    "INSERT INTO t (a) VALUES ($1 COLLATE \"C\")",
	    "INSERT INTO t (a) VALUES ($1 + 1)",
	    "INSERT INTO t (a) VALUES ($0)",
	    "UPDATE t SET a = $1",
	    "INSERT INTO \"\" (a) VALUES ($1)",
	};
	pg_merge m;
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++) {
		if (inbox__pg_merge_parse(no[i], &m))
			fprintf(stderr, "  accepted: %s\n", no[i]);
		ASSERT_EQ(inbox__pg_merge_parse(no[i], &m), 0);
		ASSERT_EQ(m.nparams, 0);
	}
}

TEST(merged_text_renumbers_parameters_only)
{
	const char *sql = "INSERT INTO \"t$1\" (\"a$2\", b) VALUES "
	                  "($2::\"my$1type\", $1) ON CONFLICT DO NOTHING";
	pg_merge m;
	ASSERT_EQ(inbox__pg_merge_parse(sql, &m), 1);
	inbox__buf out = INBOX__BUF_INIT;
	int slot = inbox__pg_merge_slot_for(&m, 3); /* 2 rows, 1 left over */
	ASSERT_EQ(inbox__pg_merge_rows(&m, slot), 2);
	ASSERT_OK(inbox__pg_merge_sql(sql, &m, slot, &out));
	ASSERT_STREQ(out.data, "INSERT INTO \"t$1\" (\"a$2\", b) VALUES "
	                       "($2::\"my$1type\", $1), ($4::\"my$1type\", "
	                       "$3) ON CONFLICT DO NOTHING");
	ASSERT_OK(inbox__pg_merge_sql(sql, &m, PG_MERGE_LOCK, &out));
	ASSERT_STREQ(out.data, "LOCK TABLE \"t$1\" IN ROW EXCLUSIVE MODE");
	ASSERT_EQ(inbox__pg_merge_slot_for(&m, 1), -1);
	ASSERT_EQ(inbox__pg_merge_rows(&m, inbox__pg_merge_slot_for(&m, 1000)),
	          128);
	/* No more than 65535 parameters in one statement. */
	char wide[4096] = "INSERT INTO t VALUES (";
	for (int i = 1; i <= 600; i++)
		snprintf(wide + strlen(wide), sizeof(wide) - strlen(wide),
		         "%s$%d", i > 1 ? "," : "", i);
	strcat(wide, ")");
	ASSERT_EQ(inbox__pg_merge_parse(wide, &m), 1);
	ASSERT_EQ(inbox__pg_merge_rows(&m, inbox__pg_merge_slot_for(&m, 1000)),
	          64);
	inbox__buf_free(&out);
}

/* ---- on the server --------------------------------------------------- */

/* The handler: one deferred statement per message, its parameters the
 * message's "v" and "n" (the first nparams of them). */
typedef struct mx {
	char sql[512];
	int nparams;
	int calls;
	int failed; /* statements that returned an error */
} mx;

static int mx_handler(inbox_txn *t, const inbox_msg *m, void *payload)
{
	mx *x = payload;
	const char *p[2] = {NULL, NULL};
	x->calls++;
	if (inbox_msg_get(m, "/v", &p[0]) || inbox_msg_get(m, "/n", &p[1]))
		return INBOX_HANDLER_REJECT;
	int rc = inbox_txn_exec(t, x->sql, x->nparams, p, NULL);
	if (rc < 0) {
		x->failed++;
		return INBOX_HANDLER_RETRY;
	}
	return INBOX_HANDLER_OK;
}

static inbox_store *open_store(void)
{
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	inbox_store *st = NULL;
	o.table_prefix = prefix;
	if (inbox_store_open(&st, url, &o) != INBOX_OK) {
		fprintf(stderr, "  open: %s\n",
		        st ? inbox_store_errmsg(st) : "");
		inbox_store_close(st);
		return NULL;
	}
	return st;
}

static inbox_consumer *mx_consumer(inbox_store *st, const char *name, mx *x)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	inbox_consumer *c = NULL;
	char err[256];
	o.name = name;
	o.max_attempts = 5;
	o.handler = mx_handler;
	o.handler_payload = x;
	if (inbox_consumer_open(&c, st, &o, err, sizeof(err)) != INBOX_OK)
		fprintf(stderr, "  consumer: %s\n", err);
	return c;
}

/* One batch of n messages {"id": "<tag>-<i>", "v": v(i), "n": i}, with
 * v(i) = "v<i % mod>" (mod 0: "v<i>"). */
static int mx_batch(inbox_consumer *c, const char *tag, int n, int mod,
                    inbox_result *res)
{
	inbox_delivery *d = calloc((size_t)n, sizeof(*d));
	char(*pl)[96] = calloc((size_t)n, sizeof(*pl));
	if (!d || !pl)
		return INBOX_ERR_NOMEM;
	for (int i = 0; i < n; i++) {
		snprintf(pl[i], sizeof(pl[i]),
		         "{\"id\":\"%s-%d\",\"v\":\"v%d\",\"n\":\"%d\"}", tag,
		         i, mod ? i % mod : i, i);
		d[i] = (inbox_delivery)INBOX_DELIVERY_INIT;
		d[i].payload = pl[i];
		d[i].payload_len = strlen(pl[i]);
	}
	int rc = inbox_consumer_process_batch(c, d, (size_t)n, res);
	if (rc < 0)
		fprintf(stderr, "  batch: %s\n", inbox_consumer_errmsg(c));
	free(d);
	free(pl);
	return rc;
}

/* Merged statements of `table` prepared on the store's own session: the
 * proof that the merge ran (every other assertion would hold unmerged). */
static long long merged_on(inbox_store *st, const char *table)
{
	char sql[512];
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM pg_prepared_statements WHERE name ~ "
	         "'^inbox__h[0-9]+_[0-6]$' AND statement LIKE "
	         "'INSERT INTO %s%s %%'",
	         prefix, table);
	PGresult *r = PQexec(st->vt->native(st), sql);
	long long v = PQresultStatus(r) == PGRES_TUPLES_OK
	                  ? strtoll(PQgetvalue(r, 0, 0), NULL, 10)
	                  : -1;
	PQclear(r);
	return v;
}

static int all_applied(const inbox_result *res, int n)
{
	for (int i = 0; i < n; i++)
		if (res[i].outcome != INBOX_APPLIED || res[i].attempts != 1) {
			fprintf(stderr, "  message %d: %s after %d\n", i,
			        inbox_outcome_name(res[i].outcome),
			        res[i].attempts);
			return 0;
		}
	return 1;
}

/* 300 calls (128 + 128 + 32 + 8 + 4 rows): every row, in the handlers'
 * order, with its parameters' types taken from the columns. */
TEST(merged_rows_in_order)
{
	ASSERT_OK(admin_exec(sqlf("CREATE TABLE {T} (seq bigserial PRIMARY "
	                          "KEY, v text NOT NULL, n int NOT NULL)",
	                          "order")));
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	mx x = {"", 2, 0, 0};
	snprintf(x.sql, sizeof(x.sql), "%s",
	         sqlf("INSERT INTO {T} (v, n) VALUES ($1, $2)", "order"));
	inbox_consumer *c = mx_consumer(st, "order", &x);
	ASSERT_TRUE(c != NULL);
	inbox_result *res = calloc(300, sizeof(*res));
	ASSERT_TRUE(res != NULL);
	res[0].version = INBOX_RESULT_VERSION;
	ASSERT_OK(mx_batch(c, "o", 300, 0, res));
	ASSERT_TRUE(all_applied(res, 300));
	ASSERT_EQ(x.calls, 300);
	ASSERT_EQ(scalar(sqlf("SELECT count(*) FROM {T}", "order")), 300);
	/* n = 0..299 in seq order, v matching n */
	ASSERT_EQ(scalar(sqlf("SELECT count(*) FROM (SELECT n, v, row_number() "
	                      "OVER (ORDER BY seq) - 1 AS k FROM {T}) s WHERE "
	                      "n = k AND v = 'v' || n",
	                      "order")),
	          300);
	/* 128, 32, 8 and 4 rows: four merged statements */
	ASSERT_EQ(merged_on(st, "order"), 4);
	/* Again: the prepared merges are reused. */
	ASSERT_OK(mx_batch(c, "p", 300, 0, res));
	ASSERT_TRUE(all_applied(res, 300));
	ASSERT_EQ(scalar(sqlf("SELECT count(*) FROM {T}", "order")), 600);
	ASSERT_EQ(merged_on(st, "order"), 4);
	free(res);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* ON CONFLICT DO NOTHING: a value repeated inside one merged statement is
 * skipped as it would be one statement later. */
TEST(merged_on_conflict_do_nothing)
{
	ASSERT_OK(admin_exec(
	    sqlf("CREATE TABLE {T} (v text PRIMARY KEY, n int)", "dup")));
	ASSERT_OK(admin_exec(sqlf("INSERT INTO {T} VALUES ('v3', -1)", "dup")));
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	mx x = {"", 2, 0, 0};
	snprintf(x.sql, sizeof(x.sql), "%s",
	         sqlf("INSERT INTO {T} (v, n) VALUES ($1, $2::int) ON CONFLICT "
	              "DO NOTHING",
	              "dup"));
	inbox_consumer *c = mx_consumer(st, "dup", &x);
	ASSERT_TRUE(c != NULL);
	inbox_result res[50] = {INBOX_RESULT_INIT};
	ASSERT_OK(mx_batch(c, "d", 50, 10, res));
	ASSERT_TRUE(all_applied(res, 50));
	ASSERT_EQ(x.calls, 50);
	ASSERT_EQ(scalar(sqlf("SELECT count(*) FROM {T}", "dup")), 10);
	/* the first of each value won; v3 was there before */
	ASSERT_EQ(scalar(sqlf("SELECT count(*) FROM {T} WHERE n = "
	                      "substr(v, 2)::int OR (v = 'v3' AND n = -1)",
	                      "dup")),
	          10);
	ASSERT_TRUE(merged_on(st, "dup") > 0);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* Row 7 of a merged INSERT violates the primary key: the batch runs
 * again unmerged, message 7's handler gets its own error, the others
 * apply once. */
TEST(merged_failure_reaches_its_handler)
{
	ASSERT_OK(admin_exec(
	    sqlf("CREATE TABLE {T} (v text PRIMARY KEY, n int)", "fail")));
	ASSERT_OK(
	    admin_exec(sqlf("INSERT INTO {T} VALUES ('v7', -1)", "fail")));
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	mx x = {"", 2, 0, 0};
	snprintf(x.sql, sizeof(x.sql), "%s",
	         sqlf("INSERT INTO {T} (v, n) VALUES ($1, $2::int)", "fail"));
	inbox_consumer *c = mx_consumer(st, "fail", &x);
	ASSERT_TRUE(c != NULL);
	inbox_result res[20] = {INBOX_RESULT_INIT};
	ASSERT_OK(mx_batch(c, "f", 20, 0, res)); /* 16 + 4 rows */
	for (int i = 0; i < 20; i++) {
		if (i == 7)
			ASSERT_EQ(res[i].outcome, INBOX_RETRY);
		else
			ASSERT_EQ(res[i].outcome, INBOX_APPLIED);
	}
	ASSERT_EQ(x.failed, 1);
	ASSERT_TRUE(x.calls > 20); /* the re-run */
	ASSERT_EQ(scalar(sqlf("SELECT count(*) FROM {T}", "fail")), 20);
	ASSERT_EQ(scalar(sqlf("SELECT n FROM {T} WHERE v = 'v7'", "fail")), -1);
	/* The statement is still merged: 8 + 2 rows, two new merges. */
	long long before = merged_on(st, "fail");
	ASSERT_OK(admin_exec(sqlf("DELETE FROM {T}", "fail")));
	ASSERT_OK(mx_batch(c, "g", 10, 0, res));
	ASSERT_TRUE(all_applied(res, 10));
	ASSERT_EQ(merged_on(st, "fail"), before + 2);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* A table the merge could fool: the batch gives what one statement per
 * call gives, and the statement is not merged again. */
static void refused(const char *name, const char *setup, const char *sql,
                    int nparams, const char *check, long long want)
{
	ASSERT_OK(admin_exec(sqlf(setup, name)));
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	mx x = {"", nparams, 0, 0};
	snprintf(x.sql, sizeof(x.sql), "%s", sqlf(sql, name));
	inbox_consumer *c = mx_consumer(st, name, &x);
	ASSERT_TRUE(c != NULL);
	inbox_result res[10] = {INBOX_RESULT_INIT};
	for (int b = 0; b < 2; b++) {
		char tag[8];
		snprintf(tag, sizeof(tag), "%c", 'a' + b);
		ASSERT_OK(mx_batch(c, tag, 10, 0, res));
		ASSERT_TRUE(all_applied(res, 10));
	}
	ASSERT_EQ(scalar(sqlf(check, name)), want);
	ASSERT_EQ(merged_on(st, name), 0);
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &s);
	ASSERT_EQ(s.retries, 0);
	ASSERT_EQ(s.dead_letters, 0);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

TEST(statement_trigger_not_merged)
{
	/* one row in {T}_log per INSERT statement: 20 */
	refused(
	    "stmt",
	    "CREATE TABLE {T} (v text, n int); CREATE TABLE {T}_log (x int);"
	    " CREATE FUNCTION {T}_f() RETURNS trigger LANGUAGE plpgsql AS "
	    "$$BEGIN INSERT INTO {T}_log VALUES (1); RETURN NULL; END$$;"
	    " CREATE TRIGGER t AFTER INSERT ON {T} FOR EACH STATEMENT "
	    "EXECUTE FUNCTION {T}_f()",
	    "INSERT INTO {T} (v, n) VALUES ($1, $2::int)", 2,
	    "SELECT count(*) FROM {T}_log", 20);
}

TEST(transition_table_not_merged)
{
	refused(
	    "trans",
	    "CREATE TABLE {T} (v text, n int); CREATE TABLE {T}_log (x int);"
	    " CREATE FUNCTION {T}_f() RETURNS trigger LANGUAGE plpgsql AS "
	    "$$BEGIN INSERT INTO {T}_log SELECT count(*) FROM nt; RETURN "
	    "NULL; END$$; CREATE TRIGGER t AFTER INSERT ON {T} "
	    "REFERENCING NEW TABLE AS nt FOR EACH STATEMENT EXECUTE "
	    "FUNCTION {T}_f()",
	    "INSERT INTO {T} (v, n) VALUES ($1, $2::int)", 2,
	    "SELECT count(*) FROM {T}_log WHERE x = 1", 20);
}

TEST(after_row_trigger_not_merged)
{
	/* each row's trigger sees the table as its own statement left it:
	 * 1..20 rows, twenty different counts */
	refused(
	    "arow",
	    "CREATE TABLE {T} (v text, n int); CREATE TABLE {T}_log (x int);"
	    " CREATE FUNCTION {T}_f() RETURNS trigger LANGUAGE plpgsql AS "
	    "$$BEGIN INSERT INTO {T}_log SELECT count(*) FROM {T}; RETURN "
	    "NULL; END$$; CREATE TRIGGER t AFTER INSERT ON {T} FOR EACH ROW "
	    "EXECUTE FUNCTION {T}_f()",
	    "INSERT INTO {T} (v, n) VALUES ($1, $2::int)", 2,
	    "SELECT count(DISTINCT x) FROM {T}_log", 20);
}

TEST(rule_not_merged)
{
	refused(
	    "rule",
	    "CREATE TABLE {T} (v text, n int); CREATE TABLE {T}_log (x int);"
	    " CREATE RULE r AS ON INSERT TO {T} DO ALSO INSERT INTO {T}_log "
	    "SELECT count(*) FROM {T}",
	    "INSERT INTO {T} (v, n) VALUES ($1, $2::int)", 2,
	    "SELECT count(DISTINCT x) FROM {T}_log", 20);
}

TEST(partition_trigger_not_merged)
{
	/* the trigger is on a partition only */
	refused("part",
	        "CREATE TABLE {T} (v text, n int) PARTITION BY RANGE (n);"
	        " CREATE TABLE {T}_p PARTITION OF {T} FOR VALUES FROM (0) TO "
	        "(1000); CREATE TABLE {T}_log (x int);"
	        " CREATE FUNCTION {T}_f() RETURNS trigger LANGUAGE plpgsql AS "
	        "$$BEGIN INSERT INTO {T}_log SELECT count(*) FROM {T}; RETURN "
	        "NULL; END$$; CREATE TRIGGER t AFTER INSERT ON {T}_p FOR EACH "
	        "ROW EXECUTE FUNCTION {T}_f()",
	        "INSERT INTO {T} (v, n) VALUES ($1, $2::int)", 2,
	        "SELECT count(DISTINCT x) FROM {T}_log", 20);
}

/* A foreign key to the table itself: row 0 refers to row 1. One statement
 * per call refuses message 0 (its parent is not there yet); a merged
 * statement would have accepted it. */
TEST(self_reference_not_merged)
{
	ASSERT_OK(admin_exec(sqlf("CREATE TABLE {T} (v text PRIMARY KEY, "
	                          "parent text REFERENCES {T} (v))",
	                          "self")));
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	/* the message's v and n: n is the parent */
	mx x = {"", 2, 0, 0};
	snprintf(x.sql, sizeof(x.sql), "%s",
	         sqlf("INSERT INTO {T} (v, parent) VALUES ($1, $2)", "self"));
	inbox_consumer *c = mx_consumer(st, "self", &x);
	ASSERT_TRUE(c != NULL);
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4] = {INBOX_RESULT_INIT};
	const char *pl[4] = {
	    "{\"id\":\"s0\",\"v\":\"a\",\"n\":\"b\"}", /* refers ahead */
	    "{\"id\":\"s1\",\"v\":\"b\",\"n\":\"b\"}", /* to itself */
	    "{\"id\":\"s2\",\"v\":\"c\",\"n\":\"b\"}", /* back */
	    "{\"id\":\"s3\",\"v\":\"d\",\"n\":\"c\"}"};
	TEST_DELIVERIES_INIT(d, 4);
	for (int i = 0; i < 4; i++) {
		d[i].payload = pl[i];
		d[i].payload_len = strlen(pl[i]);
	}
	ASSERT_OK(inbox_consumer_process_batch(c, d, 4, res));
	ASSERT_EQ(res[0].outcome, INBOX_RETRY);
	for (int i = 1; i < 4; i++)
		ASSERT_EQ(res[i].outcome, INBOX_APPLIED);
	ASSERT_EQ(scalar(sqlf("SELECT count(*) FROM {T}", "self")), 3);
	ASSERT_EQ(merged_on(st, "self"), 0);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* A foreign key to another table is no reason not to merge. */
TEST(foreign_key_merged)
{
	ASSERT_OK(admin_exec(
	    sqlf("CREATE TABLE {T}_parent (v text PRIMARY KEY); INSERT INTO "
	         "{T}_parent SELECT 'v' || g FROM generate_series(0, 9) g; "
	         "CREATE TABLE {T} (v text REFERENCES {T}_parent, n int)",
	         "fk")));
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	mx x = {"", 2, 0, 0};
	snprintf(x.sql, sizeof(x.sql), "%s",
	         sqlf("INSERT INTO {T} (v, n) VALUES ($1, $2::int)", "fk"));
	inbox_consumer *c = mx_consumer(st, "fk", &x);
	ASSERT_TRUE(c != NULL);
	inbox_result res[10] = {INBOX_RESULT_INIT};
	ASSERT_OK(mx_batch(c, "k", 10, 0, res));
	ASSERT_TRUE(all_applied(res, 10));
	ASSERT_EQ(scalar(sqlf("SELECT count(*) FROM {T}", "fk")), 10);
	ASSERT_TRUE(merged_on(st, "fk") > 0);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

static void drop_all(void)
{
	char sql[1024];
	snprintf(sql, sizeof(sql),
	         "DO $$DECLARE t text; BEGIN FOR t IN SELECT tablename FROM "
	         "pg_tables WHERE schemaname = current_schema() AND "
	         "tablename LIKE '%s%%' LOOP EXECUTE format('DROP TABLE IF "
	         "EXISTS %%I CASCADE', t); END LOOP; FOR t IN SELECT proname "
	         "FROM pg_proc WHERE proname LIKE '%s%%' LOOP EXECUTE "
	         "format('DROP FUNCTION IF EXISTS %%I CASCADE', t); END LOOP; "
	         "END$$",
	         prefix, prefix);
	admin_exec(sql);
}

int main(void)
{
	RUN(parse_accepts_single_row_inserts);
	RUN(parse_refuses_everything_else);
	RUN(merged_text_renumbers_parameters_only);
	url = getenv("INBOX_TEST_PG_URL");
	if (!url || !*url) {
		fprintf(stderr, "test_pg_merge: INBOX_TEST_PG_URL is not set "
		                "(tests/run-suite.sh sets it)\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	snprintf(prefix, sizeof(prefix), "pgm%d_", (int)getpid());
	admin = PQconnectdb(url);
	if (PQstatus(admin) != CONNECTION_OK) {
		fprintf(stderr, "test_pg_merge: cannot connect: %s",
		        PQerrorMessage(admin));
		printf("0 passed, 1 failed\n");
		return 1;
	}
	PQclear(PQexec(admin, "SET client_min_messages = warning"));
	drop_all();
	RUN(merged_rows_in_order);
	RUN(merged_on_conflict_do_nothing);
	RUN(merged_failure_reaches_its_handler);
	RUN(statement_trigger_not_merged);
	RUN(transition_table_not_merged);
	RUN(after_row_trigger_not_merged);
	RUN(rule_not_merged);
	RUN(partition_trigger_not_merged);
	RUN(self_reference_not_merged);
	RUN(foreign_key_merged);
	drop_all();
	PQfinish(admin);
	return test_summary();
}
