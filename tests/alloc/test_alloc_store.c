/*
 * Allocation failures over a whole batch, on one store (argv[1]: "sqlite"
 * or "postgresql", the latter at INBOX_TEST_PG_URL).
 *
 * For every N, the Nth allocation of inbox_consumer_process_batch() fails
 * (fault.h: ours, jansson's, SQLite's, OpenSSL's) over a batch mixing new
 * keys, a duplicate, a repeat inside the batch, malformed JSON, a schema
 * violation, a fingerprint conflict, a rejected message (dead letters), a
 * retry, an outbox row and a versioned upsert. Each call must either
 * report INBOX_ERR_NOMEM with nothing of the batch in the database, or
 * succeed with exactly the expected results and rows (an allocation
 * failure is never the message's fault: no dead letter, no attempt
 * counted). Then the same batch with the hook off processes everything
 * exactly once, and the store takes one more message. The loop ends at
 * the first N the batch no longer reaches. The ASan build checks that
 * nothing leaks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <inbox/inbox.h>
#include <inbox/outbox.h>

#include "fault.h"
#include "test.h"

static const char *store_url;
static char prefix[48]; /* PostgreSQL: unique per run, tables dropped */
static char tmpdir[] = "/tmp/inbox-alloc-XXXXXX";
static int is_pg;

/* ---- SQL helpers, hook off ---- */

static const char *tbl(const char *name)
{
	static char buf[4][96];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s%s", prefix, name);
	return buf[i];
}

typedef struct text_out {
	char s[2048];
} text_out;

/* Rows joined by ',' with their columns joined by ':'. */
static int join_row(int ncols, const char *const *v, void *payload)
{
	text_out *t = payload;
	size_t len = strlen(t->s);
	if (len)
		snprintf(t->s + len, sizeof(t->s) - len, ",");
	for (int i = 0; i < ncols; i++) {
		len = strlen(t->s);
		snprintf(t->s + len, sizeof(t->s) - len, "%s%s", i ? ":" : "",
		         v[i] ? v[i] : "NULL");
	}
	return 0;
}

/* The rows of `sql` ($1 = consumer) as text; "ERROR" if it failed. */
static const char *rows_of(inbox_store *st, const char *sql,
                           const char *consumer)
{
	static text_out t;
	t.s[0] = '\0';
	const char *p[1] = {consumer};
	if (inbox_store_query(st, sql, 1, p, join_row, &t) != INBOX_OK) {
		fprintf(stderr, "  query %s: %s\n", sql,
		        inbox_store_errmsg(st));
		return "ERROR";
	}
	return t.s;
}

static int exec_sql(inbox_store *st, const char *sql)
{
	int rc = inbox_store_exec(st, sql, 0, NULL, NULL);
	if (rc != INBOX_OK)
		fprintf(stderr, "  exec %s: %s\n", sql, inbox_store_errmsg(st));
	return rc;
}

/* ---- the handler ---- */

/* By the payload's "op": "reject", "retry", "upsert" (a versioned
 * projection row) or the default: an effect row plus, for "outbox", an
 * outbox row. Every effect also records the key's /data as text. */
static int handler(inbox_txn *t, const inbox_msg *m, void *payload)
{
	(void)payload;
	const char *op = NULL, *data = NULL;
	if (inbox_msg_get(m, "/op", &op) == INBOX_ERR_NOMEM ||
	    inbox_msg_get(m, "/data", &data) < 0)
		return INBOX_HANDLER_RETRY;
	if (op && strcmp(op, "reject") == 0)
		return INBOX_HANDLER_REJECT;
	if (op && strcmp(op, "retry") == 0)
		return INBOX_HANDLER_RETRY;
	char sql[256];
	const inbox_delivery *d = inbox_msg_delivery(m);
	const char *pos = d->position ? d->position : "";
	if (op && strcmp(op, "upsert") == 0) {
		const char *cols[] = {"v"};
		const char *vals[] = {data};
		char k[256];
		snprintf(k, sizeof(k), "%s/%s", pos, inbox_msg_key(m));
		int applied = 0;
		if (inbox_txn_upsert_versioned(t, tbl("alloc_proj"), "id", k,
		                               "version", 1, 1, cols, vals,
		                               &applied) < 0)
			return INBOX_HANDLER_RETRY;
		return INBOX_HANDLER_OK;
	}
	snprintf(sql, sizeof(sql),
	         "INSERT INTO %s (consumer, key, data) VALUES ($1, $2, $3)",
	         tbl("alloc_effects"));
	const char *params[] = {pos, inbox_msg_key(m), data};
	if (inbox_txn_exec(t, sql, 3, params, NULL) < 0)
		return INBOX_HANDLER_RETRY;
	if (op && strcmp(op, "outbox") == 0) {
		inbox_outbox_effect e = INBOX_OUTBOX_EFFECT_INIT;
		e.step = "notify";
		e.url = "http://127.0.0.1:9/notify";
		e.body = data;
		e.body_len = strlen(data);
		e.idempotent = 1;
		if (inbox_txn_outbox_add(t, &e, NULL, NULL) < 0)
			return INBOX_HANDLER_RETRY;
	}
	return INBOX_HANDLER_OK;
}

/* ---- the batch ---- */

static const char *const before[] = {
    "{\"id\":\"dup\",\"data\":{\"v\":1}}",
    "{\"id\":\"conf\",\"data\":{\"v\":1}}",
};

static const char *const batch[] = {
    "{\"id\":\"new1\",\"data\":{\"v\":1},\"op\":\"outbox\"}",
    "{\"id\":\"dup\",\"data\":{\"v\":1}}",
    "{\"id\":\"broken\",",
    "{\"id\":\"conf\",\"data\":{\"v\":2}}",
    "{\"id\":\"rej\",\"data\":{\"v\":1},\"op\":\"reject\"}",
    "{\"id\":\"new1\",\"data\":{\"v\":1},\"op\":\"outbox\"}",
    "{\"id\":\"new2\",\"data\":{\"v\":[1,2.5,\"x\"]},\"op\":\"upsert\"}",
    "{\"id\":\"retry\",\"data\":{\"v\":1},\"op\":\"retry\"}",
    "{\"id\":\"neg\",\"data\":{\"v\":1},\"n\":-1}",
};
#define NB (sizeof(batch) / sizeof(*batch))

static const inbox_outcome expect_outcome[NB] = {
    INBOX_APPLIED,  INBOX_DUPLICATE,     INBOX_DEAD_LETTERED,
    INBOX_CONFLICT, INBOX_DEAD_LETTERED, INBOX_DUPLICATE,
    INBOX_APPLIED,  INBOX_RETRY,         INBOX_DEAD_LETTERED};

static const char *const schema_text =
    "{\"type\":\"object\",\"required\":[\"id\",\"data\"],"
    "\"properties\":{\"id\":{\"type\":\"string\",\"minLength\":1},"
    "\"n\":{\"type\":\"integer\",\"minimum\":0},"
    "\"data\":{\"type\":\"object\"}}}";

static void fill(inbox_delivery *d, const char *const *payloads, size_t n,
                 const char *consumer)
{
	for (size_t i = 0; i < n; i++) {
		d[i] = (inbox_delivery)INBOX_DELIVERY_INIT;
		d[i].payload = payloads[i];
		d[i].payload_len = strlen(payloads[i]);
		d[i].position = consumer;
		d[i].headers = "{\"h\":\"x\"}";
		d[i].delivery_count = 1;
	}
}

static int open_consumer(inbox_consumer **c, inbox_store *st, const char *name)
{
	char err[256];
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = name;
	o.key_template = "order-{/id}";
	o.fingerprint_pointer = "/data";
	o.handler = handler;
	o.json_schema = schema_text;
	int rc = inbox_consumer_open(c, st, &o, err, sizeof(err));
	if (rc != INBOX_OK && rc != INBOX_ERR_NOMEM)
		fprintf(stderr, "  consumer_open: %s %s\n", inbox_err_name(rc),
		        err);
	return rc;
}

/* ---- the expected database states ---- */

typedef struct state {
	char inbox[512];
	char effects[512];
	char dead[1024];
	char outbox[256];
	char proj[256];
} state;

static void read_state(inbox_store *st, const char *consumer, state *s)
{
	char sql[256];
	snprintf(sql, sizeof(sql),
	         "SELECT key, status, attempts FROM %s WHERE consumer = $1 "
	         "ORDER BY key",
	         tbl("inbox"));
	snprintf(s->inbox, sizeof(s->inbox), "%s", rows_of(st, sql, consumer));
	snprintf(sql, sizeof(sql),
	         "SELECT key, count(*) FROM %s WHERE consumer = $1 "
	         "GROUP BY key ORDER BY key",
	         tbl("alloc_effects"));
	snprintf(s->effects, sizeof(s->effects), "%s",
	         rows_of(st, sql, consumer));
	snprintf(sql, sizeof(sql),
	         "SELECT key, attempts, substr(reason, 1, 24) FROM %s WHERE "
	         "consumer = $1 ORDER BY id",
	         tbl("dead_letters"));
	snprintf(s->dead, sizeof(s->dead), "%s", rows_of(st, sql, consumer));
	snprintf(sql, sizeof(sql),
	         "SELECT key, step, state, attempts FROM %s WHERE consumer = "
	         "$1 ORDER BY key, step",
	         tbl("outbox"));
	snprintf(s->outbox, sizeof(s->outbox), "%s",
	         rows_of(st, sql, consumer));
	snprintf(sql, sizeof(sql),
	         "SELECT id, version, v FROM %s WHERE id LIKE $1 || '/%%' "
	         "ORDER BY id",
	         tbl("alloc_proj"));
	snprintf(s->proj, sizeof(s->proj), "%s", rows_of(st, sql, consumer));
}

/* What the database holds after `before` only, and after the batch. */
static void expected_state(const char *consumer, int done, state *s)
{
	snprintf(s->inbox, sizeof(s->inbox), "%s",
	         done ? "order-conf:completed:1,order-dup:completed:1,"
	                "order-new1:completed:1,order-new2:completed:1,"
	                "order-rej:dead:1,order-retry:failed:1"
	              : "order-conf:completed:1,order-dup:completed:1");
	snprintf(s->effects, sizeof(s->effects), "%s",
	         done ? "order-conf:1,order-dup:1,order-new1:1"
	              : "order-conf:1,order-dup:1");
	snprintf(s->dead, sizeof(s->dead), "%s",
	         done ? "NULL:1:malformed JSON: string o,"
	                "order-conf:1:fingerprint conflict: ke,"
	                "order-rej:1:handler rejected the mes,"
	                "order-neg:1:schema violation at /n: "
	              : "");
	snprintf(s->outbox, sizeof(s->outbox), "%s",
	         done ? "order-new1:notify:pending:0" : "");
	if (done)
		snprintf(s->proj, sizeof(s->proj),
		         "%s/order-new2:1:{\"v\":[1,2.5,\"x\"]}", consumer);
	else
		s->proj[0] = '\0';
}

static int same_state(const state *a, const state *b, long n, const char *when)
{
	int ok = 1;
#define CMP(f)                                                                 \
	if (strcmp(a->f, b->f) != 0) {                                         \
		fprintf(stderr,                                                \
		        "  N=%ld %s: " #f " is \"%s\", expected "              \
		        "\"%s\"\n",                                            \
		        n, when, a->f, b->f);                                  \
		ok = 0;                                                        \
	}
	CMP(inbox);
	CMP(effects);
	CMP(dead);
	CMP(outbox);
	CMP(proj);
#undef CMP
	return ok;
}

static int check_results(const inbox_result *res, long n)
{
	for (size_t i = 0; i < NB; i++) {
		if (res[i].outcome != expect_outcome[i]) {
			fprintf(stderr,
			        "  N=%ld: delivery %zu is %s (%s), expected "
			        "%s\n",
			        n, i, inbox_outcome_name(res[i].outcome),
			        res[i].reason ? res[i].reason : "",
			        inbox_outcome_name(expect_outcome[i]));
			return 0;
		}
		int dl = res[i].outcome == INBOX_DEAD_LETTERED ||
		         res[i].outcome == INBOX_CONFLICT;
		if (dl != (res[i].dead_letter_id > 0)) {
			fprintf(stderr,
			        "  N=%ld: delivery %zu dead letter %lld\n", n,
			        i, (long long)res[i].dead_letter_id);
			return 0;
		}
	}
	return 1;
}

static inbox_store *open_store(int migrate);

/* One N: returns 1 if the fault fired (go on), 0 if the batch made fewer
 * than n allocations (done), -1 on a failed check. The batch runs on a
 * store handle of its own, opened for it, so that its statement caches
 * start cold; `chk` writes the keys recorded before and reads what was
 * committed. */
static int one_round(inbox_store *chk, long n, long *nomem)
{
	char name[64];
	inbox_consumer *c = NULL;
	inbox_delivery pre[2], d[NB], one = INBOX_DELIVERY_INIT;
	inbox_result res[NB] = {INBOX_RESULT_INIT};
	state got, want;
	snprintf(name, sizeof(name), "alloc-%ld", n);
	if (open_consumer(&c, chk, name) != INBOX_OK)
		return -1;
	fill(pre, before, 2, name);
	int rc = inbox_consumer_process_batch(c, pre, 2, res);
	inbox_consumer_close(c);
	c = NULL;
	if (rc != INBOX_OK) {
		fprintf(stderr, "  N=%ld before: %s\n", n, inbox_err_name(rc));
		return -1;
	}
	inbox_store *st = open_store(0);
	if (!st)
		return -1;
	if (open_consumer(&c, st, name) != INBOX_OK) {
		inbox_store_close(st);
		return -1;
	}
	fill(d, batch, NB, name);
	fault_arm(n);
	rc = inbox_consumer_process_batch(c, d, NB, res);
	int fired = fault_disarm();
	int ok = 1;
	if (rc != INBOX_OK && rc != INBOX_ERR_NOMEM) {
		fprintf(stderr, "  N=%ld: process_batch returned %s: %s\n", n,
		        inbox_err_name(rc), inbox_consumer_errmsg(c));
		ok = 0;
	}
	if (!fired && rc != INBOX_OK)
		ok = 0;
	read_state(chk, name, &got);
	expected_state(name, rc == INBOX_OK, &want);
	if (!same_state(&got, &want, n,
	                rc == INBOX_OK ? "after success" : "after NOMEM"))
		ok = 0;
	if (rc == INBOX_OK && !check_results(res, n))
		ok = 0;
	if (rc == INBOX_ERR_NOMEM) {
		(*nomem)++;
		rc = inbox_consumer_process_batch(c, d, NB, res);
		if (rc != INBOX_OK) {
			fprintf(stderr,
			        "  N=%ld: the next call returned %s: %s\n", n,
			        inbox_err_name(rc), inbox_consumer_errmsg(c));
			ok = 0;
		} else {
			if (!check_results(res, n))
				ok = 0;
			read_state(chk, name, &got);
			expected_state(name, 1, &want);
			if (!same_state(&got, &want, n, "after the next call"))
				ok = 0;
		}
	}
	/* The store and the consumer still work. */
	static const char *const last[] = {"{\"id\":\"last\",\"data\":{}}"};
	fill(&one, last, 1, name);
	rc = inbox_consumer_process_batch(c, &one, 1, res);
	if (rc != INBOX_OK || res[0].outcome != INBOX_APPLIED) {
		fprintf(stderr, "  N=%ld: one more message: %s %s\n", n,
		        inbox_err_name(rc), inbox_consumer_errmsg(c));
		ok = 0;
	}
	inbox_consumer_close(c);
	inbox_store_close(st);
	if (!ok)
		return -1;
	return fired;
}

/* Allocation failures while opening the consumer: INVALID never, NOMEM
 * or success, and nothing leaks. */
static int consumer_open_faults(inbox_store *st, long *rounds)
{
	for (long n = 1;; n++) {
		char name[64];
		inbox_consumer *c = NULL;
		snprintf(name, sizeof(name), "alloc-open-%ld", n);
		fault_arm(n);
		int rc = open_consumer(&c, st, name);
		int fired = fault_disarm();
		inbox_consumer_close(c);
		if (rc != INBOX_OK && rc != INBOX_ERR_NOMEM) {
			fprintf(stderr, "  open N=%ld: %s\n", n,
			        inbox_err_name(rc));
			return -1;
		}
		if (rc != INBOX_OK && !c && !fired)
			return -1;
		if (!fired) {
			*rounds = n;
			return 0;
		}
	}
}

/* migrate = 0 once the tables exist: a round then costs a connection,
 * not a migration's transaction too. */
static inbox_store *open_store(int migrate)
{
	inbox_store *st = NULL;
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	o.table_prefix = prefix;
	o.auto_migrate = migrate;
	int rc = inbox_store_open(&st, store_url, &o);
	if (rc != INBOX_OK) {
		fprintf(stderr, "  open: %s\n",
		        st ? inbox_store_errmsg(st) : inbox_err_name(rc));
		inbox_store_close(st);
		return NULL;
	}
	/* Durability is not what is tested here, and a thousand rounds of
	 * fsyncs on a shared machine's disk take minutes. */
	if (inbox_store_exec(st,
	                     is_pg ? "SET synchronous_commit = off"
	                           : "PRAGMA synchronous = OFF",
	                     0, NULL, NULL)) {
		inbox_store_close(st);
		return NULL;
	}
	return st;
}

TEST(consumer_open)
{
	inbox_store *st = open_store(1);
	ASSERT_TRUE(st);
	long rounds = 0;
	int rc = consumer_open_faults(st, &rounds);
	inbox_store_close(st);
	ASSERT_EQ(rc, 0);
	printf("  consumer_open: %ld allocations\n", rounds - 1);
	ASSERT_TRUE(rounds > 5);
}

TEST(process_batch)
{
	inbox_store *st = open_store(1);
	ASSERT_TRUE(st);
	char sql[256];
	snprintf(sql, sizeof(sql),
	         "CREATE TABLE %s (consumer TEXT NOT NULL, key TEXT NOT NULL, "
	         "data TEXT)",
	         tbl("alloc_effects"));
	ASSERT_OK(exec_sql(st, sql));
	snprintf(sql, sizeof(sql),
	         "CREATE TABLE %s (id TEXT PRIMARY KEY, version BIGINT NOT "
	         "NULL, v TEXT)",
	         tbl("alloc_proj"));
	ASSERT_OK(exec_sql(st, sql));
	/* INBOX_ALLOC_FROM=N starts there (to trace one failure). */
	const char *from = getenv("INBOX_ALLOC_FROM");
	long n = from ? atol(from) : 1, nomem = 0;
	int r;
	while ((r = one_round(st, n, &nomem)) == 1)
		n++;
	inbox_store_close(st);
	printf("  process_batch: %ld allocations, %ld reported NOMEM\n", n - 1,
	       nomem);
	ASSERT_EQ(r, 0);
	/* A batch that allocates nothing would make this test vacuous. */
	ASSERT_TRUE(n > 20);
	ASSERT_TRUE(nomem > 0);
}

static void drop_pg_tables(void)
{
	inbox_store *st = NULL;
	if (inbox_store_open(&st, store_url, NULL) != INBOX_OK) {
		inbox_store_close(st);
		return;
	}
	char sql[512];
	snprintf(sql, sizeof(sql),
	         "DO $$DECLARE t text; BEGIN FOR t IN SELECT tablename FROM "
	         "pg_tables WHERE schemaname = current_schema() AND "
	         "tablename LIKE '%s%%' LOOP EXECUTE format('DROP TABLE IF "
	         "EXISTS %%I CASCADE', t); END LOOP; END$$",
	         prefix);
	exec_sql(st, sql);
	inbox_store_close(st);
}

int main(int argc, char **argv)
{
	static char url[512];
	/* batch_failed and poll_failed warnings are expected by the hundred */
	setenv("INBOX_LOG_LEVEL", "error", 1);
	if (fault_install() < 0) {
		printf("0 passed, 1 failed\n");
		return 1;
	}
	if (argc < 2 || (strcmp(argv[1], "sqlite") != 0 &&
	                 strcmp(argv[1], "postgresql") != 0)) {
		fprintf(stderr, "usage: test_alloc_store sqlite|postgresql\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	is_pg = strcmp(argv[1], "postgresql") == 0;
	if (is_pg) {
		store_url = getenv("INBOX_TEST_PG_URL");
		if (!store_url || !*store_url) {
			fprintf(stderr, "INBOX_TEST_PG_URL is not set "
			                "(tests/run-suite.sh sets it)\n");
			printf("0 passed, 1 failed\n");
			return 1;
		}
		snprintf(prefix, sizeof(prefix), "alloc%d_", (int)getpid());
		drop_pg_tables();
	} else {
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			return 1;
		}
		snprintf(url, sizeof(url), "sqlite:%s/alloc.db", tmpdir);
		store_url = url;
	}
	RUN(consumer_open);
	RUN(process_batch);
	if (is_pg) {
		drop_pg_tables();
	} else {
		char cmd[600];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", tmpdir);
	}
	return test_summary();
}
