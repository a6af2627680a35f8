/* inbox_row_column_name(): the column names of the query whose row
 * callback runs, on SQLite and on the server in INBOX_TEST_PG_URL (the
 * suite always sets it; missing is a failure), through the public API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <inbox/inbox.h>

#include "test.h"

static inbox_store *st;

typedef struct seen {
	int rows;
	char outer0[32], outer1[32], inner0[32], after_inner[32];
	int beyond_null, negative_null;
} seen;

static void copy(char *dst, const char *s)
{
	snprintf(dst, 32, "%s", s ? s : "(null)");
}

static int inner_row(int ncols, const char *const *v, void *payload)
{
	(void)ncols;
	(void)v;
	seen *s = payload;
	copy(s->inner0, inbox_row_column_name(0));
	return 0;
}

static int outer_row(int ncols, const char *const *v, void *payload)
{
	(void)v;
	seen *s = payload;
	if (s->rows++ == 0) {
		copy(s->outer0, inbox_row_column_name(0));
		copy(s->outer1, inbox_row_column_name(1));
		s->beyond_null = inbox_row_column_name(ncols) == NULL;
		s->negative_null = inbox_row_column_name(-1) == NULL;
		/* a query of its own from inside the callback */
		if (inbox_store_query(st, "SELECT 7 AS inner_col", 0, NULL,
		                      inner_row, s) < 0)
			copy(s->inner0, "query failed");
		copy(s->after_inner, inbox_row_column_name(0));
	}
	return 0;
}

static int stop_at_once(int ncols, const char *const *v, void *payload)
{
	(void)ncols;
	(void)v;
	(void)payload;
	return 1;
}

TEST(names)
{
	ASSERT_TRUE(st != NULL);
	ASSERT_TRUE(inbox_row_column_name(0) == NULL);
	ASSERT_OK(inbox_store_exec(
	    st, "CREATE TEMP TABLE rn (order_id text, total_cents bigint)", 0,
	    NULL, NULL));
	ASSERT_OK(inbox_store_exec(
	    st, "INSERT INTO rn VALUES ('o-1', 4200), ('o-2', 100)", 0, NULL,
	    NULL));
	seen s;
	memset(&s, 0, sizeof s);
	ASSERT_OK(inbox_store_query(
	    st, "SELECT order_id, total_cents AS cents FROM rn ORDER BY 1", 0,
	    NULL, outer_row, &s));
	ASSERT_EQ(s.rows, 2);
	ASSERT_STREQ(s.outer0, "order_id");
	ASSERT_STREQ(s.outer1, "cents");
	ASSERT_TRUE(s.beyond_null);
	ASSERT_TRUE(s.negative_null);
	ASSERT_STREQ(s.inner0, "inner_col");
	ASSERT_STREQ(s.after_inner, "order_id");
	/* after the query, and after one stopped early: none */
	ASSERT_TRUE(inbox_row_column_name(0) == NULL);
	ASSERT_OK(inbox_store_query(st, "SELECT order_id FROM rn", 0, NULL,
	                            stop_at_once, NULL));
	ASSERT_TRUE(inbox_row_column_name(0) == NULL);
	ASSERT_OK(inbox_store_exec(st, "DROP TABLE rn", 0, NULL, NULL));
}

static int open_store(const char *url)
{
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	o.auto_migrate = 0;
	st = NULL;
	int rc = inbox_store_open(&st, url, &o);
	if (rc < 0) {
		fprintf(stderr, "test_row_names: cannot open %s: %s\n",
		        strncmp(url, "sqlite", 6) == 0 ? url : "the PG store",
		        st ? inbox_store_errmsg(st) : inbox_strerror(rc));
		inbox_store_close(st);
		st = NULL;
	}
	return rc;
}

int main(void)
{
	char dir[] = "/tmp/inbox-rownames-XXXXXX", url[128];
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(url, sizeof url, "sqlite:%s/t.db", dir);
	open_store(url);
	RUN(names);
	inbox_store_close(st);
	snprintf(url, sizeof url, "%s/t.db", dir);
	unlink(url);
	rmdir(dir);

	const char *pg = getenv("INBOX_TEST_PG_URL");
	if (!pg || !*pg) {
		fprintf(stderr, "test_row_names: INBOX_TEST_PG_URL is not set "
		                "(tests/run-suite.sh sets it)\n");
		test__failed++;
	} else {
		open_store(pg);
		RUN(names);
		inbox_store_close(st);
	}
	return test_summary();
}
