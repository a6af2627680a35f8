/*
 * Declared effects through the public API only (include/inbox/decl.h, no
 * CLI, no private header): a declaration with setup SQL, an SQL step, a
 * versioned upsert and an outbox step, run by inbox_decl_handler through a
 * consumer on SQLite and on the suite's PostgreSQL (INBOX_TEST_PG_URL;
 * unset is a failure, not a skip). The rows are read back with
 * inbox_store_query.
 */
#include <inbox/decl.h>
#include <inbox/inbox.h>
#include <inbox/outbox.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

static const char *URL;
static int is_pg;
static char prefix[64];   /* the inbox's tables */
static char invoices[96]; /* the effect's tables */
static char balances[96];

#define CONSUMER "billing.decl.v1"

static inbox_store *open_store(void)
{
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = prefix;
	inbox_store *st = NULL;
	if (inbox_store_open(&st, URL, &so) != INBOX_OK) {
		fprintf(stderr, "  cannot open %s: %s\n", is_pg ? "pg" : URL,
		        st ? inbox_store_errmsg(st) : "?");
		inbox_store_close(st);
		return NULL;
	}
	return st;
}

/* The first column of the first row, as text ("" when NULL, "(none)"
 * without a row). */
typedef struct first {
	char v[3][512];
	int rows;
} first;

static int first_row(int ncols, const char *const *values, void *payload)
{
	first *f = payload;
	if (f->rows++ == 0)
		for (int i = 0; i < ncols && i < 3; i++)
			snprintf(f->v[i], sizeof(f->v[i]), "%s",
			         values[i] ? values[i] : "");
	return 0;
}

static first query(inbox_store *st, const char *sql, const char *param)
{
	first f;
	memset(&f, 0, sizeof(f));
	snprintf(f.v[0], sizeof(f.v[0]), "(none)");
	const char *p[1] = {param};
	if (inbox_store_query(st, sql, param ? 1 : 0, p, first_row, &f) !=
	    INBOX_OK)
		snprintf(f.v[0], sizeof(f.v[0]), "query failed: %s",
		         inbox_store_errmsg(st));
	return f;
}

static inbox_outcome deliver(inbox_consumer *c, const char *id,
                             const char *payload, char *reason, size_t len)
{
	inbox_delivery d = INBOX_DELIVERY_INIT;
	d.id = id;
	d.payload = payload;
	d.payload_len = strlen(payload);
	d.delivery_count = 1;
	inbox_result r = INBOX_RESULT_INIT;
	if (inbox_consumer_process(c, &d, &r) != INBOX_OK) {
		snprintf(reason, len, "process failed: %s",
		         inbox_consumer_errmsg(c));
		return INBOX_OUTCOME_NONE;
	}
	snprintf(reason, len, "%s", r.reason ? r.reason : "");
	return r.outcome;
}

/* The declaration of the tests: setup creates both tables; an invoice per
 * order (cents must not be negative), the customer's balance upserted by
 * version, a charge in the outbox. */
static inbox_decl *billing(char *why, size_t len)
{
	char setup[1024];
	snprintf(setup, sizeof(setup),
	         "CREATE TABLE IF NOT EXISTS %s (order_id TEXT PRIMARY KEY, "
	         "cents INTEGER NOT NULL CHECK (cents >= 0));"
	         "CREATE TABLE IF NOT EXISTS %s (customer TEXT PRIMARY KEY, "
	         "version BIGINT NOT NULL, balance TEXT, tier TEXT)",
	         invoices, balances);
	inbox_decl_options o = INBOX_DECL_OPTIONS_INIT;
	o.consumer = CONSUMER;
	o.setup_sql = setup;
	o.outbox_max_attempts = 7;
	inbox_decl *d = NULL;
	if (inbox_decl_new(&d, &o, why, len) != INBOX_OK)
		return NULL;
	/* The setup text was copied. */
	memset(setup, 'x', sizeof(setup) - 1);

	char sql[256];
	snprintf(sql, sizeof(sql),
	         "INSERT INTO %s (order_id, cents) VALUES ($1, $2)", invoices);
	const char *params[] = {"/data/orderId", "/data/cents"};
	const char *cols[] = {"balance", "tier"};
	const char *ptrs[] = {"/data/balance", "/data/tier"};
	inbox_decl_upsert u = INBOX_DECL_UPSERT_INIT;
	u.table = balances;
	u.key_column = "customer";
	u.key_pointer = "/data/customer";
	u.version_column = "version";
	u.version_pointer = "/data/version";
	u.nset = 2;
	u.set_columns = cols;
	u.set_pointers = ptrs;
	inbox_outbox_effect e = INBOX_OUTBOX_EFFECT_INIT;
	e.step = "charge";
	e.url = "http://127.0.0.1:9/charges";
	e.idempotent = 1;
	if (inbox_decl_add_sql(d, sql, 2, params, why, len) != INBOX_OK ||
	    inbox_decl_add_upsert(d, &u, why, len) != INBOX_OK ||
	    inbox_decl_add_outbox(
	        d, &e,
	        "{\"amount\": \"/data/cents\", \"order\": [\"{key}\", "
	        "\"=EUR\"], \"ref\": \"{idempotency_key}\"}",
	        why, len) != INBOX_OK) {
		inbox_decl_free(d);
		return NULL;
	}
	return d;
}

static void drop_tables(inbox_store *st)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS %s", invoices);
	inbox_store_exec(st, sql, 0, NULL, NULL);
	snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS %s", balances);
	inbox_store_exec(st, sql, 0, NULL, NULL);
}

TEST(static_checks_refuse_bad_steps)
{
	char why[512];
	inbox_decl *d = NULL;
	inbox_decl_options bad = INBOX_DECL_OPTIONS_INIT;
	bad.version = 99;
	ASSERT_EQ(inbox_decl_new(&d, &bad, why, sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(d == NULL);
	/* No consumer name: the outbox keys cannot be derived. */
	ASSERT_EQ(inbox_decl_new(&d, NULL, why, sizeof(why)), INBOX_OK);
	inbox_outbox_effect e = INBOX_OUTBOX_EFFECT_INIT;
	e.step = "charge";
	e.url = "http://127.0.0.1:9/c";
	e.idempotent = 1;
	ASSERT_EQ(inbox_decl_add_outbox(d, &e, NULL, why, sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(strstr(why, "consumer") != NULL);
	inbox_decl_free(d);

	inbox_decl_options o = INBOX_DECL_OPTIONS_INIT;
	o.consumer = CONSUMER;
	ASSERT_EQ(inbox_decl_new(&d, &o, why, sizeof(why)), INBOX_OK);
	const char *one[] = {"/id"};
	ASSERT_EQ(inbox_decl_add_sql(d, "BEGIN", 0, NULL, why, sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(strstr(why, "transaction control") != NULL);
	ASSERT_EQ(inbox_decl_add_sql(d, "SELECT 1; SELECT 2", 0, NULL, why,
	                             sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(strstr(why, "one SQL statement per step") != NULL);
	ASSERT_EQ(inbox_decl_add_sql(d, "SELECT $2", 1, one, why, sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(strstr(why, "uses $2") != NULL);
	const char *badptr[] = {"id"};
	ASSERT_EQ(
	    inbox_decl_add_sql(d, "SELECT $1", 1, badptr, why, sizeof(why)),
	    INBOX_ERR_INVALID);
	ASSERT_TRUE(strstr(why, "not a JSON pointer") != NULL);
	inbox_decl_upsert u = INBOX_DECL_UPSERT_INIT;
	u.table = "t";
	u.key_column = "k";
	u.key_pointer = "/k";
	u.version_column = "v";
	ASSERT_EQ(inbox_decl_add_upsert(d, &u, why, sizeof(why)),
	          INBOX_ERR_INVALID); /* no version pointer */
	ASSERT_EQ(inbox_decl_add_outbox(d, &e, "{\"n\": 5}", why, sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(strstr(why, "no template leaf") != NULL);
	ASSERT_EQ(
	    inbox_decl_add_outbox(d, &e, "{\"n\": \"data\"}", why, sizeof(why)),
	    INBOX_ERR_INVALID);
	ASSERT_TRUE(strstr(why, "neither a JSON pointer") != NULL);
	/* A template may be a bare leaf: the body is that value. */
	ASSERT_EQ(inbox_decl_add_outbox(d, &e, "\"/data\"", why, sizeof(why)),
	          INBOX_OK);
	ASSERT_EQ(inbox_decl_add_outbox(d, &e, NULL, why, sizeof(why)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(strstr(why, "declared twice") != NULL);
	/* Nothing refused was added. */
	ASSERT_EQ(inbox_decl_steps(d), 0);
	ASSERT_EQ(inbox_decl_outbox_steps(d), 1);
	ASSERT_EQ(inbox_decl_add_sql(d, "SELECT $1", 1, one, why, sizeof(why)),
	          INBOX_OK);
	ASSERT_EQ(inbox_decl_steps(d), 1);
	inbox_decl_free(d);
}

TEST(prepare_runs_setup_and_finds_a_missing_table)
{
	char why[512] = "";
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	drop_tables(st);
	inbox_decl *d = billing(why, sizeof(why));
	if (!d)
		TEST_FAIL_("billing: %s", why);
	ASSERT_TRUE(d != NULL);
	int step = -1;
	ASSERT_EQ(inbox_decl_prepare(d, st, &step, why, sizeof(why)), INBOX_OK);
	ASSERT_EQ(step, 0);
	/* Setup created the tables. */
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", balances);
	ASSERT_STREQ(query(st, sql, NULL).v[0], "0");
	/* Again: setup is idempotent, the steps still check. */
	ASSERT_EQ(inbox_decl_prepare(d, st, &step, why, sizeof(why)), INBOX_OK);
	inbox_decl_free(d);

	/* A step on a table that does not exist: STORE, step 2. */
	inbox_decl_options o = INBOX_DECL_OPTIONS_INIT;
	ASSERT_EQ(inbox_decl_new(&d, &o, why, sizeof(why)), INBOX_OK);
	const char *p[] = {"/id"};
	snprintf(sql, sizeof(sql),
	         "INSERT INTO %s (order_id, cents) "
	         "VALUES ($1, 1)",
	         invoices);
	ASSERT_EQ(inbox_decl_add_sql(d, sql, 1, p, why, sizeof(why)), INBOX_OK);
	ASSERT_EQ(inbox_decl_add_sql(d, "INSERT INTO decl_nosuch_t VALUES ($1)",
	                             1, p, why, sizeof(why)),
	          INBOX_OK);
	ASSERT_EQ(inbox_decl_prepare(d, st, &step, why, sizeof(why)),
	          INBOX_ERR_STORE);
	ASSERT_EQ(step, 2);
	ASSERT_TRUE(strstr(why, "the database rejects the SQL") != NULL);
	ASSERT_TRUE(strstr(why, "decl_nosuch_t") != NULL);
	inbox_decl_free(d);
	inbox_store_close(st);
}

TEST(messages_run_the_declared_effects)
{
	char why[512] = "", sql[512];
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	drop_tables(st);
	inbox_decl *d = billing(why, sizeof(why));
	if (!d)
		TEST_FAIL_("billing: %s", why);
	ASSERT_TRUE(d != NULL);
	ASSERT_EQ(inbox_decl_prepare(d, st, NULL, why, sizeof(why)), INBOX_OK);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = CONSUMER;
	co.handler = inbox_decl_handler;
	co.handler_payload = d;
	inbox_consumer *c = NULL;
	ASSERT_EQ(inbox_consumer_open(&c, st, &co, why, sizeof(why)), INBOX_OK);

	/* The first order: an invoice, the balance at version 2, a charge. */
	ASSERT_EQ(deliver(c, "m1",
	                  "{\"data\": {\"orderId\": \"o-1\", \"cents\": 1250, "
	                  "\"customer\": \"ana\", \"version\": 2, \"balance\": "
	                  "\"100\", \"tier\": \"gold\"}}",
	                  why, sizeof(why)),
	          INBOX_APPLIED);
	snprintf(sql, sizeof(sql), "SELECT cents FROM %s WHERE order_id = $1",
	         invoices);
	ASSERT_STREQ(query(st, sql, "o-1").v[0], "1250");
	snprintf(sql, sizeof(sql),
	         "SELECT version, balance, tier FROM %s WHERE customer = $1",
	         balances);
	first f = query(st, sql, "ana");
	ASSERT_STREQ(f.v[0], "2");
	ASSERT_STREQ(f.v[1], "100");
	ASSERT_STREQ(f.v[2], "gold");

	/* The outbox row: the key derived from (consumer, key, step), the
	 * body rendered canonically, the declaration's max_attempts. */
	char ik[INBOX_OUTBOX_KEY_LEN + 1];
	ASSERT_EQ(inbox_outbox_key(CONSUMER, "m1", "charge", ik), INBOX_OK);
	snprintf(sql, sizeof(sql),
	         "SELECT idempotency_key, %s, max_attempts FROM %soutbox "
	         "WHERE key = $1 AND step = 'charge'",
	         is_pg ? "convert_from(body, 'UTF8')" : "CAST(body AS TEXT)",
	         prefix);
	f = query(st, sql, "m1");
	ASSERT_EQ(f.rows, 1);
	ASSERT_STREQ(f.v[0], ik);
	char body[256];
	snprintf(body, sizeof(body),
	         "{\"amount\":1250,\"order\":[\"m1\",\"EUR\"],\"ref\":\"%s\"}",
	         ik);
	ASSERT_STREQ(f.v[1], body);
	ASSERT_STREQ(f.v[2], "7");

	/* The same message again: a duplicate, nothing runs twice. */
	ASSERT_EQ(deliver(c, "m1",
	                  "{\"data\": {\"orderId\": \"o-1\", \"cents\": 1250, "
	                  "\"customer\": \"ana\", \"version\": 2, \"balance\": "
	                  "\"100\", \"tier\": \"gold\"}}",
	                  why, sizeof(why)),
	          INBOX_DUPLICATE);

	/* An older version of the balance: the invoice is written, the
	 * balance kept; the message is STALE. */
	ASSERT_EQ(deliver(c, "m2",
	                  "{\"data\": {\"orderId\": \"o-2\", \"cents\": 5, "
	                  "\"customer\": \"ana\", \"version\": 1, \"balance\": "
	                  "\"7\", \"tier\": \"none\"}}",
	                  why, sizeof(why)),
	          INBOX_STALE);
	snprintf(sql, sizeof(sql),
	         "SELECT version, balance, tier FROM %s WHERE customer = $1",
	         balances);
	f = query(st, sql, "ana");
	ASSERT_STREQ(f.v[0], "2");
	ASSERT_STREQ(f.v[1], "100");
	/* A newer one wins; a JSON null sets NULL. */
	ASSERT_EQ(deliver(c, "m3",
	                  "{\"data\": {\"orderId\": \"o-3\", \"cents\": 0, "
	                  "\"customer\": \"ana\", \"version\": 3, \"balance\": "
	                  "\"90\", \"tier\": null}}",
	                  why, sizeof(why)),
	          INBOX_APPLIED);
	f = query(st, sql, "ana");
	ASSERT_STREQ(f.v[0], "3");
	ASSERT_STREQ(f.v[1], "90");
	ASSERT_STREQ(f.v[2], "");

	/* A missing parameter: a dead letter naming it, nothing written. */
	ASSERT_EQ(deliver(c, "m4",
	                  "{\"data\": {\"orderId\": \"o-4\", \"customer\": "
	                  "\"bo\", \"version\": 1}}",
	                  why, sizeof(why)),
	          INBOX_DEAD_LETTERED);
	ASSERT_TRUE(strstr(why, "effect parameter $2 (/data/cents) is "
	                        "missing") != NULL);
	/* A CHECK violation (SQLSTATE 23514, SQLITE_CONSTRAINT_CHECK) is
	 * the message's: a dead letter, not a retry. */
	ASSERT_EQ(deliver(c, "m5",
	                  "{\"data\": {\"orderId\": \"o-5\", \"cents\": -1, "
	                  "\"customer\": \"bo\", \"version\": 1, \"balance\": "
	                  "\"1\", \"tier\": \"x\"}}",
	                  why, sizeof(why)),
	          INBOX_DEAD_LETTERED);
	ASSERT_TRUE(strstr(why, "effect step 1") != NULL);
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM %s WHERE order_id IN "
	         "('o-4', 'o-5')",
	         invoices);
	ASSERT_STREQ(query(st, sql, NULL).v[0], "0");
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %soutbox", prefix);
	ASSERT_STREQ(query(st, sql, NULL).v[0], "3"); /* m1, m2, m3 */

	inbox_consumer_close(c);
	drop_tables(st);
	inbox_store_close(st);
	inbox_decl_free(d);
}

TEST(missing_body_field_rolls_back_the_sql_steps)
{
	char why[512] = "", sql[512];
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	drop_tables(st);
	snprintf(sql, sizeof(sql),
	         "CREATE TABLE %s (order_id TEXT PRIMARY KEY, cents INTEGER)",
	         invoices);
	ASSERT_EQ(inbox_store_exec(st, sql, 0, NULL, NULL), INBOX_OK);
	inbox_decl_options o = INBOX_DECL_OPTIONS_INIT;
	o.consumer = "billing.decl.body.v1";
	inbox_decl *d = NULL;
	ASSERT_EQ(inbox_decl_new(&d, &o, why, sizeof(why)), INBOX_OK);
	snprintf(sql, sizeof(sql),
	         "INSERT INTO %s (order_id, cents) VALUES ($1, 1)", invoices);
	const char *p[] = {"/orderId"};
	ASSERT_EQ(inbox_decl_add_sql(d, sql, 1, p, why, sizeof(why)), INBOX_OK);
	inbox_outbox_effect e = INBOX_OUTBOX_EFFECT_INIT;
	e.step = "mail";
	e.url = "http://127.0.0.1:9/mail";
	e.idempotent = 1;
	ASSERT_EQ(inbox_decl_add_outbox(d, &e, "{\"to\": \"/email\"}", why,
	                                sizeof(why)),
	          INBOX_OK);
	/* A bare leaf: the body is the value itself. */
	e.step = "notify";
	ASSERT_EQ(inbox_decl_add_outbox(d, &e, "\"/email\"", why, sizeof(why)),
	          INBOX_OK);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = o.consumer;
	co.handler = inbox_decl_handler;
	co.handler_payload = d;
	inbox_consumer *c = NULL;
	ASSERT_EQ(inbox_consumer_open(&c, st, &co, why, sizeof(why)), INBOX_OK);
	ASSERT_EQ(deliver(c, "b1", "{\"orderId\": \"o-9\"}", why, sizeof(why)),
	          INBOX_DEAD_LETTERED);
	ASSERT_TRUE(strstr(why, "outbox step mail: body field /email is "
	                        "missing") != NULL);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", invoices);
	ASSERT_STREQ(query(st, sql, NULL).v[0], "0");
	ASSERT_EQ(deliver(c, "b2",
	                  "{\"orderId\": \"o-9\", \"email\": "
	                  "\"a@b.c\"}",
	                  why, sizeof(why)),
	          INBOX_APPLIED);
	ASSERT_STREQ(query(st, sql, NULL).v[0], "1");
	snprintf(sql, sizeof(sql),
	         "SELECT %s FROM %soutbox WHERE key = 'b2' AND step = $1",
	         is_pg ? "convert_from(body, 'UTF8')" : "CAST(body AS TEXT)",
	         prefix);
	ASSERT_STREQ(query(st, sql, "mail").v[0], "{\"to\":\"a@b.c\"}");
	ASSERT_STREQ(query(st, sql, "notify").v[0], "\"a@b.c\"");
	inbox_consumer_close(c);
	drop_tables(st);
	inbox_store_close(st);
	inbox_decl_free(d);
}

TEST(consumer_without_its_declaration_retries)
{
	char why[512] = "";
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = "billing.decl.none.v1";
	co.handler = inbox_decl_handler; /* handler_payload forgotten */
	inbox_consumer *c = NULL;
	ASSERT_EQ(inbox_consumer_open(&c, st, &co, why, sizeof(why)), INBOX_OK);
	ASSERT_EQ(deliver(c, "n1", "{}", why, sizeof(why)), INBOX_RETRY);
	ASSERT_TRUE(strstr(why, "no declaration") != NULL);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* Filters (inbox_decl_add_when): the consumer's condition decides whether
 * anything runs, each step's whether that step runs; a message no step
 * wants is SKIPPED — recorded (its redelivery a duplicate), counted, no
 * effect, no outbox row. */
TEST(filters_decide_which_steps_run)
{
	char why[512] = "", sql[512];
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	drop_tables(st);
	inbox_decl *d = billing(why, sizeof(why)); /* sql, upsert, charge */
	ASSERT_TRUE(d != NULL);
	inbox_decl_when w = INBOX_DECL_WHEN_INIT;
	/* LAST_STEP is the charge: only for order.created */
	const char *created[] = {"order.created"};
	w.pointer = "/type";
	w.op = INBOX_DECL_EQUALS;
	w.nvalues = 1;
	w.values = created;
	ASSERT_EQ(
	    inbox_decl_add_when(d, INBOX_DECL_LAST_STEP, &w, why, sizeof(why)),
	    INBOX_OK);
	/* the message: created or updated */
	const char *types[] = {"order.created", "order.updated"};
	w.op = INBOX_DECL_IN;
	w.nvalues = 2;
	w.values = types;
	ASSERT_EQ(
	    inbox_decl_add_when(d, INBOX_DECL_MESSAGE, &w, why, sizeof(why)),
	    INBOX_OK);
	/* refusals */
	w.pointer = "type";
	ASSERT_EQ(
	    inbox_decl_add_when(d, INBOX_DECL_MESSAGE, &w, why, sizeof(why)),
	    INBOX_ERR_INVALID);
	ASSERT_TRUE(strstr(why, "not a JSON pointer") != NULL);
	w.pointer = "/type";
	w.nvalues = 0;
	ASSERT_EQ(
	    inbox_decl_add_when(d, INBOX_DECL_MESSAGE, &w, why, sizeof(why)),
	    INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_decl_prepare(d, st, NULL, why, sizeof(why)), INBOX_OK);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = CONSUMER;
	co.handler = inbox_decl_handler;
	co.handler_payload = d;
	inbox_consumer *c = NULL;
	ASSERT_EQ(inbox_consumer_open(&c, st, &co, why, sizeof(why)), INBOX_OK);

	const char *upd =
	    "{\"type\": \"order.updated\", \"data\": "
	    "{\"orderId\": \"f-2\", \"cents\": 5, \"customer\": \"bo\", "
	    "\"version\": 1, \"balance\": \"1\", \"tier\": \"t\"}}";
	ASSERT_EQ(deliver(c, "f1",
	                  "{\"type\": \"order.created\", \"data\": "
	                  "{\"orderId\": \"f-1\", \"cents\": 9, "
	                  "\"customer\": \"al\", \"version\": 1, \"balance\": "
	                  "\"1\", \"tier\": \"t\"}}",
	                  why, sizeof(why)),
	          INBOX_APPLIED);
	ASSERT_EQ(deliver(c, "f2", upd, why, sizeof(why)), INBOX_APPLIED);
	const char *del = "{\"type\": \"order.deleted\", \"data\": "
	                  "{\"orderId\": \"f-3\"}}";
	ASSERT_EQ(deliver(c, "f3", del, why, sizeof(why)), INBOX_SKIPPED);
	ASSERT_STREQ(inbox_outcome_name(INBOX_SKIPPED), "skipped");
	ASSERT_TRUE(inbox_outcome_ackable(INBOX_SKIPPED));
	/* redelivered: a duplicate, still nothing runs */
	ASSERT_EQ(deliver(c, "f3", del, why, sizeof(why)), INBOX_DUPLICATE);
	/* no type at all: IN is false, skipped, not a dead letter */
	ASSERT_EQ(deliver(c, "f4", "{\"data\": {}}", why, sizeof(why)),
	          INBOX_SKIPPED);

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", invoices);
	ASSERT_STREQ(query(st, sql, NULL).v[0], "2");
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM %soutbox WHERE key = $1", prefix);
	ASSERT_STREQ(query(st, sql, "f1").v[0], "1"); /* charged */
	ASSERT_STREQ(query(st, sql, "f2").v[0], "0"); /* updated: not */
	ASSERT_STREQ(query(st, sql, "f3").v[0], "0");
	snprintf(sql, sizeof(sql), "SELECT status FROM %sinbox WHERE key = $1",
	         prefix);
	ASSERT_EQ(query(st, sql, "f3").rows, 1); /* the record is written */

	inbox_stats stats = INBOX_STATS_INIT;
	ASSERT_EQ(inbox_consumer_stats(c, &stats), INBOX_OK);
	ASSERT_EQ(stats.skipped, 2);
	ASSERT_EQ(stats.applied, 2);
	ASSERT_EQ(stats.duplicates, 1);
	ASSERT_EQ(stats.dead_letters, 0);
	inbox_consumer_close(c);
	drop_tables(st);
	inbox_store_close(st);
	inbox_decl_free(d);
}

/* exists: true / false on one step; a step filtered out while another
 * runs leaves the message APPLIED. */
TEST(exists_filters_one_step)
{
	char why[512] = "", sql[512];
	inbox_store *st = open_store();
	ASSERT_TRUE(st != NULL);
	drop_tables(st);
	inbox_decl *d = billing(why, sizeof(why));
	ASSERT_TRUE(d != NULL);
	inbox_decl_when w = INBOX_DECL_WHEN_INIT;
	w.pointer = "/data/coupon";
	w.op = INBOX_DECL_EXISTS;
	w.exists = 1; /* the charge only with a coupon */
	ASSERT_EQ(
	    inbox_decl_add_when(d, INBOX_DECL_LAST_STEP, &w, why, sizeof(why)),
	    INBOX_OK);
	w.exists = 2;
	ASSERT_EQ(
	    inbox_decl_add_when(d, INBOX_DECL_MESSAGE, &w, why, sizeof(why)),
	    INBOX_ERR_INVALID);
	w.exists = 0; /* and never for a test order */
	w.pointer = "/test";
	ASSERT_EQ(
	    inbox_decl_add_when(d, INBOX_DECL_MESSAGE, &w, why, sizeof(why)),
	    INBOX_OK);
	ASSERT_EQ(inbox_decl_prepare(d, st, NULL, why, sizeof(why)), INBOX_OK);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = "billing.decl.exists.v1";
	co.handler = inbox_decl_handler;
	co.handler_payload = d;
	inbox_consumer *c = NULL;
	ASSERT_EQ(inbox_consumer_open(&c, st, &co, why, sizeof(why)), INBOX_OK);
	ASSERT_EQ(
	    deliver(c, "e1",
	            "{\"data\": {\"orderId\": \"e-1\", \"cents\": 1, "
	            "\"customer\": \"cy\", \"version\": 1, "
	            "\"coupon\": null, \"balance\": \"1\", \"tier\": \"t\"}}",
	            why, sizeof(why)),
	    INBOX_APPLIED);
	ASSERT_EQ(deliver(c, "e2",
	                  "{\"data\": {\"orderId\": \"e-2\", \"cents\": 1, "
	                  "\"customer\": \"cy\", \"version\": 2, \"balance\": "
	                  "\"1\", \"tier\": \"t\"}}",
	                  why, sizeof(why)),
	          INBOX_APPLIED);
	ASSERT_EQ(deliver(c, "e3", "{\"test\": true, \"data\": {}}", why,
	                  sizeof(why)),
	          INBOX_SKIPPED);
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM %soutbox WHERE consumer = $1", prefix);
	ASSERT_STREQ(query(st, sql, "billing.decl.exists.v1").v[0], "1");
	snprintf(sql, sizeof(sql),
	         "SELECT count(*) FROM %soutbox WHERE key = $1", prefix);
	ASSERT_STREQ(query(st, sql, "e1").v[0], "1"); /* null exists */
	ASSERT_STREQ(query(st, sql, "e2").v[0], "0");
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", invoices);
	ASSERT_STREQ(query(st, sql, NULL).v[0], "2");
	inbox_consumer_close(c);
	drop_tables(st);
	inbox_store_close(st);
	inbox_decl_free(d);
}

static void run_all(void)
{
	RUN(consumer_without_its_declaration_retries);
	RUN(prepare_runs_setup_and_finds_a_missing_table);
	RUN(messages_run_the_declared_effects);
	RUN(missing_body_field_rolls_back_the_sql_steps);
	RUN(filters_decide_which_steps_run);
	RUN(exists_filters_one_step);
}

int main(void)
{
	int pid = (int)getpid();
	snprintf(prefix, sizeof(prefix), "decl%d_", pid);
	snprintf(invoices, sizeof(invoices), "decl%d_invoices", pid);
	snprintf(balances, sizeof(balances), "decl%d_balances", pid);
	RUN(static_checks_refuse_bad_steps);
	char db[256], url[300];
	snprintf(db, sizeof(db), "/tmp/inbox-test-decl-%d.db", pid);
	snprintf(url, sizeof(url), "sqlite:%s", db);
	URL = url;
	is_pg = 0;
	printf("# store sqlite\n");
	run_all();
	const char *pg = getenv("INBOX_TEST_PG_URL");
	if (pg && *pg) {
		URL = pg;
		is_pg = 1;
		printf("# store postgresql (INBOX_TEST_PG_URL)\n");
		run_all();
	} else {
		printf("FAIL postgresql: INBOX_TEST_PG_URL is not set\n");
		test__failed++;
	}
	const char *sfx[] = {"", "-wal", "-shm"};
	for (int i = 0; i < 3; i++) {
		char p[320];
		snprintf(p, sizeof(p), "%s%s", db, sfx[i]);
		unlink(p);
	}
	return test_summary();
}
