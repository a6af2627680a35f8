/* A /metrics scrape's store reading (inbox_admin_stats_estimate,
 * inbox_admin_generations_estimate) on PostgreSQL, against the server in
 * INBOX_TEST_PG_URL (the suite always sets it): below the threshold every
 * number is exactly inbox_admin_stats_read()'s; past it (a threshold of a
 * few rows here, so the inbox stays small) the numbers promised exact
 * stay exact and the estimates are the planner's, flagged as such. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include <inbox/admin.h>
#include <inbox/inbox.h>
#include <inbox/metrics.h>

#include "test.h"

static const char *url;
static char prefix[48]; /* unique per run: pgs<pid>_ */
static PGconn *admin;
static inbox_store *st;

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

static void drop_all(void)
{
	char sql[512];
	snprintf(sql, sizeof(sql),
	         "DO $$DECLARE t text; BEGIN FOR t IN SELECT tablename FROM "
	         "pg_tables WHERE schemaname = current_schema() AND "
	         "tablename LIKE '%s%%' LOOP EXECUTE format('DROP TABLE IF "
	         "EXISTS %%I CASCADE', t); END LOOP; END$$",
	         prefix);
	admin_exec(sql);
}

/* 3000 records of consumer "big" (2990 completed, 3 processing, 4
 * failed, 3 dead; the completed ones processed 10 days ago and more) and
 * 5 of "small", then ANALYZE as autovacuum would. */
static int fill(void)
{
	char sql[2048];
	snprintf(sql, sizeof(sql),
	         "INSERT INTO \"%sinbox\" (consumer, key, fingerprint, status,"
	         " created_at, processed_at, gen)"
	         " SELECT 'big', 'k' || g, 'f',"
	         " CASE WHEN g <= 3 THEN 'processing' WHEN g <= 7 THEN "
	         "'failed' WHEN g <= 10 THEN 'dead' ELSE 'completed' END,"
	         " now() - interval '20 days' + g * interval '1 second',"
	         " CASE WHEN g > 7 THEN now() - interval '10 days' - g *"
	         " interval '1 second' END, 1"
	         " FROM generate_series(1, 3000) g;"
	         "INSERT INTO \"%sinbox\" (consumer, key, fingerprint, status,"
	         " processed_at, gen) SELECT 'small', 's' || g, 'f',"
	         " 'completed', now(), 1 FROM generate_series(1, 5) g;"
	         "INSERT INTO \"%sconsumers\" (name, retention_seconds)"
	         " VALUES ('big', 86400);"
	         "ANALYZE \"%sinbox\";",
	         prefix, prefix, prefix, prefix);
	return admin_exec(sql);
}

TEST(small_inbox_is_exact)
{
	inbox_admin_stats exact = INBOX_ADMIN_STATS_INIT;
	inbox_admin_stats est = INBOX_ADMIN_STATS_INIT;
	unsigned flags = 99;
	ASSERT_OK(inbox_admin_stats_read(st, "big", &exact));
	ASSERT_OK(inbox_admin_stats_estimate(
	    st, "big", INBOX_METRICS_EXACT_BELOW, &est, &flags));
	ASSERT_EQ(flags, 0);
	ASSERT_EQ(exact.records, 3000);
	ASSERT_EQ(exact.expired, 2993);
	/* every number the same as the exact reading's */
	ASSERT_EQ(est.records, exact.records);
	ASSERT_EQ(est.completed, exact.completed);
	ASSERT_EQ(est.processing, 3);
	ASSERT_EQ(est.failed, 4);
	ASSERT_EQ(est.dead, 3);
	ASSERT_EQ(est.expired, exact.expired);
	ASSERT_EQ(est.oldest_age_ms / 1000, exact.oldest_age_ms / 1000);
	ASSERT_EQ(est.oldest_created_age_ms / 1000,
	          exact.oldest_created_age_ms / 1000);
	ASSERT_EQ(est.retention_seconds, exact.retention_seconds);
	ASSERT_EQ(est.dead_letters, exact.dead_letters);
	inbox_admin_generations g = INBOX_ADMIN_GENERATIONS_INIT;
	ASSERT_OK(inbox_admin_generations_estimate(
	    st, INBOX_METRICS_EXACT_BELOW, &g, &flags));
	ASSERT_EQ(flags, 0);
	ASSERT_EQ(g.newest_records, 3005);
}

TEST(big_inbox_estimates_flagged_exact_parts_exact)
{
	inbox_admin_stats exact = INBOX_ADMIN_STATS_INIT;
	inbox_admin_stats est = INBOX_ADMIN_STATS_INIT;
	unsigned flags = 0;
	ASSERT_OK(inbox_admin_stats_read(st, "big", &exact));
	/* "big" past a threshold of 100 records: estimates */
	ASSERT_OK(inbox_admin_stats_estimate(st, "big", 100, &est, &flags));
	ASSERT_EQ(flags & INBOX_ADMIN_EST_RECORDS, INBOX_ADMIN_EST_RECORDS);
	ASSERT_EQ(flags & INBOX_ADMIN_EST_EXPIRED, INBOX_ADMIN_EST_EXPIRED);
	/* promised exact */
	ASSERT_EQ(est.processing, 3);
	ASSERT_EQ(est.failed, 4);
	ASSERT_EQ(est.retention_seconds, 86400);
	ASSERT_EQ(est.dead_letters, exact.dead_letters);
	ASSERT_EQ(est.oldest_age_ms / 1000, exact.oldest_age_ms / 1000);
	/* the planner's estimates: ANALYZE sampled every row of so small a
	 * table, so they are close; the parts add up */
	ASSERT_EQ(est.records >= 2700 && est.records <= 3300, 1);
	ASSERT_EQ(est.expired >= 2700 && est.expired <= 3300, 1);
	ASSERT_EQ(est.dead <= 30, 1);
	ASSERT_EQ(est.completed + est.processing + est.failed + est.dead,
	          est.records);
	/* the oldest created record (the first unprocessed one here) */
	ASSERT_EQ(est.oldest_created_age_ms / 1000,
	          exact.oldest_created_age_ms / 1000);
	/* "small" stays exact at the same threshold */
	inbox_admin_stats s = INBOX_ADMIN_STATS_INIT;
	ASSERT_OK(inbox_admin_stats_estimate(st, "small", 100, &s, &flags));
	ASSERT_EQ(flags, 0);
	ASSERT_EQ(s.records, 5);
	ASSERT_EQ(s.completed, 5);
	inbox_admin_generations g = INBOX_ADMIN_GENERATIONS_INIT;
	ASSERT_OK(inbox_admin_generations_estimate(st, 100, &g, &flags));
	ASSERT_EQ(flags, INBOX_ADMIN_EST_NEWEST);
	ASSERT_EQ(g.newest_records >= 2700 && g.newest_records <= 3300, 1);
}

TEST(estimated_flag_rendered)
{
	inbox_admin_stats est = INBOX_ADMIN_STATS_INIT;
	unsigned flags = 0;
	ASSERT_OK(inbox_admin_stats_estimate(st, "big", 100, &est, &flags));
	inbox_metrics_consumer c[2] = {INBOX_METRICS_CONSUMER_INIT,
	                               INBOX_METRICS_CONSUMER_INIT};
	inbox_admin_stats ex = INBOX_ADMIN_STATS_INIT;
	ASSERT_OK(inbox_admin_stats_read(st, "small", &ex));
	c[0].name = "big";
	c[0].store = &est;
	c[0].estimated = flags;
	c[1].name = "small";
	c[1].store = &ex;
	char *out = NULL;
	size_t len = 0;
	ASSERT_OK(inbox_metrics_render(&out, &len, c, 2));
	ASSERT_EQ(
	    strstr(out, "inbox_records_estimated{consumer=\"big\"} 1\n") !=
	        NULL,
	    1);
	ASSERT_EQ(strstr(out, "inbox_records_estimated{consumer=\"small\"} "
	                      "0\n") != NULL,
	          1);
	ASSERT_EQ(strstr(out, "inbox_records{consumer=\"small\"} 5\n") != NULL,
	          1);
	free(out);
}

int main(void)
{
	url = getenv("INBOX_TEST_PG_URL");
	if (!url || !*url) {
		fprintf(stderr, "test_pg_scrape: INBOX_TEST_PG_URL is not set "
		                "(tests/run-suite.sh sets it)\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	snprintf(prefix, sizeof(prefix), "pgs%d_", (int)getpid());
	admin = PQconnectdb(url);
	if (PQstatus(admin) != CONNECTION_OK) {
		fprintf(stderr, "test_pg_scrape: cannot connect: %s",
		        PQerrorMessage(admin));
		printf("0 passed, 1 failed\n");
		return 1;
	}
	PQclear(PQexec(admin, "SET client_min_messages = warning"));
	drop_all();
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	o.table_prefix = prefix;
	if (inbox_store_open(&st, url, &o) != INBOX_OK || fill() < 0) {
		fprintf(stderr, "test_pg_scrape: setup: %s\n",
		        st ? inbox_store_errmsg(st) : "");
		printf("0 passed, 1 failed\n");
		inbox_store_close(st);
		drop_all();
		PQfinish(admin);
		return 1;
	}
	RUN(small_inbox_is_exact);
	RUN(big_inbox_estimates_flagged_exact_parts_exact);
	RUN(estimated_flag_rendered);
	inbox_store_close(st);
	drop_all();
	PQfinish(admin);
	return test_summary();
}
