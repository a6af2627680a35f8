/*
 * A declaration's result (inbox_decl_set_result, stored results of issue
 * 14) through the public API only: a JSON result built from the message
 * and from the first row an SQL step returned (RETURNING), stored with
 * the record, and the same bytes on every duplicate; the template's
 * static checks; what a message or a declaration gets wrong at run time
 * (a dead letter with the reason, nothing stored). On SQLite and on the
 * suite's PostgreSQL (INBOX_TEST_PG_URL; unset is a failure).
 */
#include <inbox/decl.h>
#include <inbox/inbox.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

static const char *URL;
static char prefix[64];
static char invoices[96];
static int seq;

#define CONSUMER "billing.decl-result.v1"

static inbox_store *open_store(void)
{
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = prefix;
	inbox_store *st = NULL;
	if (inbox_store_open(&st, URL, &so) != INBOX_OK) {
		fprintf(stderr, "  cannot open: %s\n",
		        st ? inbox_store_errmsg(st) : "?");
		inbox_store_close(st);
		return NULL;
	}
	return st;
}

/* One invoice per order, its generated number returned. */
static inbox_decl *invoicing(const char *tmpl, char *why, size_t len)
{
	char setup[512], sql[256];
	snprintf(setup, sizeof(setup),
	         "CREATE TABLE IF NOT EXISTS %s (n INTEGER PRIMARY KEY, "
	         "order_id TEXT NOT NULL UNIQUE, cents INTEGER, note TEXT)",
	         invoices);
	inbox_decl_options o = INBOX_DECL_OPTIONS_INIT;
	o.consumer = CONSUMER;
	o.setup_sql = setup;
	inbox_decl *d = NULL;
	if (inbox_decl_new(&d, &o, why, len) != INBOX_OK)
		return NULL;
	snprintf(sql, sizeof(sql),
	         "INSERT INTO %s (n, order_id, cents, note) VALUES "
	         "((SELECT coalesce(max(n), 1000) + 1 FROM %s), $1, $2, NULL) "
	         "RETURNING n, order_id, note",
	         invoices, invoices);
	const char *params[] = {"/data/orderId", "/data/cents"};
	if (inbox_decl_add_sql(d, sql, 2, params, why, len) != INBOX_OK ||
	    (tmpl && inbox_decl_set_result(d, tmpl, why, len) != INBOX_OK)) {
		inbox_decl_free(d);
		return NULL;
	}
	return d;
}

static int first_col(int ncols, const char *const *v, void *payload)
{
	snprintf(payload, 32, "%s", ncols > 0 && v[0] ? v[0] : "");
	return 1;
}

static int process(inbox_consumer *c, const char *json, inbox_result *r)
{
	inbox_delivery d;
	d = (inbox_delivery)INBOX_DELIVERY_INIT;
	d.payload = json;
	d.payload_len = strlen(json);
	return inbox_consumer_process(c, &d, r);
}

static int result_is(const inbox_result *r, const char *want)
{
	if (!r->result || r->result_len != strlen(want) ||
	    memcmp(r->result, want, r->result_len) != 0) {
		fprintf(stderr, "  result %.*s, want %s\n",
		        r->result ? (int)r->result_len : 6,
		        r->result ? (const char *)r->result : "(none)", want);
		return 0;
	}
	return r->result_type &&
	       strcmp(r->result_type, "application/json") == 0;
}

TEST(template_checks)
{
	char why[512];
	inbox_decl *d = invoicing(NULL, why, sizeof(why));
	ASSERT_TRUE(d != NULL);
	ASSERT_EQ(inbox_decl_set_result(d, "{\"a\": 1}", why, sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(why, "no template leaf");
	ASSERT_EQ(inbox_decl_set_result(d, "\"#2\"", why, sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(why, "names effect step 2, but there are 1");
	ASSERT_EQ(
	    inbox_decl_set_result(d, "{\"x\": \"data\"}", why, sizeof(why)),
	    INBOX_ERR_INVALID);
	ASSERT_CONTAINS(why, "neither a JSON pointer");
	ASSERT_EQ(
	    inbox_decl_set_result(d, "{\"x\": \"#1.\"}", why, sizeof(why)),
	    INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_decl_set_result(d, "{oops", why, sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(why, "result template");
	/* an upsert returns no row */
	const char *cols[] = {"note"};
	const char *ptrs[] = {"/data/note"};
	inbox_decl_upsert u = INBOX_DECL_UPSERT_INIT;
	u.table = invoices;
	u.key_column = "order_id";
	u.key_pointer = "/data/orderId";
	u.version_column = "n";
	u.version_pointer = "/data/v";
	u.nset = 1;
	u.set_columns = cols;
	u.set_pointers = ptrs;
	ASSERT_OK(inbox_decl_add_upsert(d, &u, why, sizeof(why)));
	ASSERT_EQ(inbox_decl_set_result(d, "\"#2.n\"", why, sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(why, "upsert");
	ASSERT_OK(inbox_decl_set_result(d, "{\"n\": \"#1.n:json\"}", why,
	                                sizeof(why)));
	ASSERT_EQ(inbox_decl_set_result(d, "\"#1\"", why, sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(why, "declared twice");
	inbox_decl_free(d);
}

/* The stored answer: the same bytes for the message and its duplicates
 * (the handler is not run again: the invoice number is not drawn twice),
 * also after the store is opened again. */
TEST(result_from_returning_on_duplicates)
{
	char why[512];
	snprintf(prefix, sizeof(prefix), "dres%d_%d_", (int)getpid(), ++seq);
	snprintf(invoices, sizeof(invoices), "%sinvoices", prefix);
	inbox_decl *d = invoicing(
	    "{\"invoice\": \"#1.n:json\", \"order\": \"/data/orderId\", "
	    "\"row\": \"#1\", \"key\": \"{key}\", \"via\": [\"=decl\"]}",
	    why, sizeof(why));
	ASSERT_TRUE(d != NULL);
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	ASSERT_OK(inbox_decl_prepare(d, st, NULL, why, sizeof(why)));
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = CONSUMER;
	co.handler = inbox_decl_handler;
	co.handler_payload = d;
	inbox_consumer *c = NULL;
	ASSERT_OK(inbox_consumer_open(&c, st, &co, why, sizeof(why)));
	const char *m1 = "{\"id\":\"e1\",\"data\":{\"orderId\":\"o-1\","
	                 "\"cents\":250}}";
	const char *want =
	    "{\"invoice\":1001,\"order\":\"o-1\",\"row\":{\"n\":\"1001\","
	    "\"order_id\":\"o-1\",\"note\":null},\"key\":\"e1\","
	    "\"via\":[\"decl\"]}";
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(process(c, m1, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_TRUE(result_is(&r, want));
	ASSERT_OK(process(c, m1, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_EQ(r.first_outcome, INBOX_APPLIED);
	ASSERT_TRUE(result_is(&r, want));
	/* a second order gets the next number, its own answer */
	const char *m2 = "{\"id\":\"e2\",\"data\":{\"orderId\":\"o-2\","
	                 "\"cents\":10}}";
	inbox_delivery dd[2];
	TEST_DELIVERIES_INIT(dd, 2);
	dd[0].payload = m2;
	dd[0].payload_len = strlen(m2);
	dd[1] = dd[0];
	inbox_result rr[2];
	TEST_RESULTS_INIT(rr, 2);
	ASSERT_OK(inbox_consumer_process_batch(c, dd, 2, rr));
	ASSERT_EQ(rr[0].outcome, INBOX_APPLIED);
	ASSERT_EQ(rr[1].outcome, INBOX_DUPLICATE);
	ASSERT_CONTAINS((const char *)rr[0].result, "\"invoice\":1002");
	ASSERT_TRUE(rr[1].result && rr[1].result_len == rr[0].result_len &&
	            !memcmp(rr[1].result, rr[0].result, rr[0].result_len));
	inbox_consumer_close(c);
	inbox_store_close(st);
	/* another connection: the database still has the answer */
	st = open_store();
	ASSERT_TRUE(st != NULL);
	ASSERT_OK(inbox_consumer_open(&c, st, &co, why, sizeof(why)));
	ASSERT_OK(process(c, m1, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_TRUE(result_is(&r, want));
	inbox_consumer_close(c);
	inbox_store_close(st);
	inbox_decl_free(d);
}

/* A field the message lacks, or a column the row lacks: a dead letter
 * with the reason, the step's effect rolled back, nothing stored; a
 * result over max_result_bytes: the same. */
TEST(result_failures_are_dead_letters)
{
	char why[512];
	snprintf(prefix, sizeof(prefix), "dres%d_%d_", (int)getpid(), ++seq);
	snprintf(invoices, sizeof(invoices), "%sinvoices", prefix);
	inbox_decl *d = invoicing("{\"n\": \"#1.n\", \"who\": "
	                          "\"/data/customer\", \"x\": \"#1.nope\"}",
	                          why, sizeof(why));
	ASSERT_TRUE(d != NULL);
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	ASSERT_OK(inbox_decl_prepare(d, st, NULL, why, sizeof(why)));
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = CONSUMER;
	co.handler = inbox_decl_handler;
	co.handler_payload = d;
	co.max_result_bytes = 40;
	inbox_consumer *c = NULL;
	ASSERT_OK(inbox_consumer_open(&c, st, &co, why, sizeof(why)));
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(process(c,
	                  "{\"id\":\"f1\",\"data\":{\"orderId\":\"o-1\","
	                  "\"cents\":1}}",
	                  &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_CONTAINS(r.reason, "result field /data/customer is missing");
	ASSERT_TRUE(r.result == NULL);
	ASSERT_OK(process(c,
	                  "{\"id\":\"f2\",\"data\":{\"orderId\":\"o-2\","
	                  "\"cents\":1,\"customer\":\"c\"}}",
	                  &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_CONTAINS(r.reason, "returned no column \"nope\"");
	inbox_consumer_close(c);
	inbox_decl_free(d);
	d = invoicing("{\"order\": \"/data/orderId\", \"row\": \"#1\"}", why,
	              sizeof(why));
	ASSERT_TRUE(d != NULL);
	co.handler_payload = d;
	ASSERT_OK(inbox_consumer_open(&c, st, &co, why, sizeof(why)));
	ASSERT_OK(process(c,
	                  "{\"id\":\"f3\",\"data\":{\"orderId\":\"o-3\","
	                  "\"cents\":1}}",
	                  &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_CONTAINS(r.reason, "exceeds the consumer's max_result_bytes");
	/* every effect of the dead-lettered messages was rolled back */
	inbox_consumer_close(c);
	char q[256], n[32] = "?";
	snprintf(q, sizeof(q), "SELECT count(*) FROM %s", invoices);
	ASSERT_OK(inbox_store_query(st, q, 0, NULL, first_col, n));
	ASSERT_STREQ(n, "0");
	inbox_decl_free(d);
	inbox_store_close(st);
}

static void run_all(void)
{
	RUN(result_from_returning_on_duplicates);
	RUN(result_failures_are_dead_letters);
}

int main(void)
{
	int pid = (int)getpid();
	snprintf(prefix, sizeof(prefix), "dres%d_", pid);
	snprintf(invoices, sizeof(invoices), "dres%d_invoices", pid);
	RUN(template_checks);
	char db[256], url[300];
	snprintf(db, sizeof(db), "/tmp/inbox-test-decl-result-%d.db", pid);
	snprintf(url, sizeof(url), "sqlite:%s", db);
	URL = url;
	printf("# store sqlite\n");
	run_all();
	const char *pg = getenv("INBOX_TEST_PG_URL");
	if (pg && *pg) {
		URL = pg;
		printf("# store postgresql (INBOX_TEST_PG_URL)\n");
		run_all();
	} else {
		printf("FAIL postgresql: INBOX_TEST_PG_URL is not set\n");
		test__failed++;
	}
	const char *sfx[] = {"", "-wal", "-shm"};
	for (int i = 0; i < 3; i++) {
		char f[300];
		snprintf(f, sizeof(f), "%s%s", db, sfx[i]);
		unlink(f);
	}
	return test_summary();
}
