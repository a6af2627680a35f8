/*
 * The store conformance suite: the seed's eight scenarios and the rest of
 * the core contract, run through the public API against one store URL
 * (argv[1]). CTest runs it once per store (SQLite and PostgreSQL).
 *
 * Each test gets its own table prefix, so tests never see each other's
 * rows. Effect tables have no unique constraint: a double effect shows as
 * a second row.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <inbox/admin.h>
#include <inbox/inbox.h>
#include <inbox/sys/store.h>

#include "../clock.h"
#include "test.h"

static const char *URL;
static int is_pg;
static int test_seq;

/* ---- per-test environment ---- */

typedef struct env {
	char prefix[48];
	char invoices[96]; /* quoted table names */
	char projection[96];
	char saga[96];
	char inbox_tbl[96];
	char dl_tbl[96];
	inbox_store *st;
} env;

static inbox_store *open_store(const env *e)
{
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = e->prefix;
	inbox_store *st = NULL;
	int rc = inbox_store_open(&st, URL, &so);
	if (rc != 0) {
		fprintf(stderr, "store open: %d %s\n", rc,
		        inbox_store_errmsg(st));
		inbox_store_close(st);
		return NULL;
	}
	return st;
}

static int sql(inbox_store *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int sql(inbox_store *st, const char *fmt, ...)
{
	char q[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(q, sizeof(q), fmt, ap);
	va_end(ap);
	int64_t rows;
	int rc = st->vt->exec(st, q, 0, NULL, &rows);
	if (rc != 0)
		fprintf(stderr, "sql failed: %s: %s\n", q,
		        inbox_store_errmsg(st));
	return rc;
}

static int first_col(int n, const char *const *v, void *p)
{
	char *out = p;
	snprintf(out, 256, "%s", n > 0 && v[0] ? v[0] : "(null)");
	return 1;
}

/* First column of the first row as text, into a static buffer. */
static const char *scalar(inbox_store *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *scalar(inbox_store *st, const char *fmt, ...)
{
	static char out[256];
	char q[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(q, sizeof(q), fmt, ap);
	va_end(ap);
	snprintf(out, sizeof(out), "(no row)");
	if (st->vt->query(st, q, 0, NULL, first_col, out) != 0)
		snprintf(out, sizeof(out), "(error: %s)",
		         inbox_store_errmsg(st));
	return out;
}

static long count(inbox_store *st, const char *table, const char *where)
{
	return atol(scalar(st, "SELECT COUNT(*) FROM %s%s%s", table,
	                   where ? " WHERE " : "", where ? where : ""));
}

static int env_setup(env *e)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->prefix, sizeof(e->prefix), "c%d_%d_", (int)getpid(),
	         ++test_seq);
	snprintf(e->invoices, sizeof(e->invoices), "\"%sinvoices\"", e->prefix);
	snprintf(e->projection, sizeof(e->projection), "\"%sorders\"",
	         e->prefix);
	snprintf(e->saga, sizeof(e->saga), "\"%ssaga\"", e->prefix);
	snprintf(e->inbox_tbl, sizeof(e->inbox_tbl), "\"%sinbox\"", e->prefix);
	snprintf(e->dl_tbl, sizeof(e->dl_tbl), "\"%sdead_letters\"", e->prefix);
	e->st = open_store(e);
	if (!e->st)
		return -1;
	if (sql(e->st, "CREATE TABLE %s (order_id TEXT, total BIGINT)",
	        e->invoices) ||
	    sql(e->st,
	        "CREATE TABLE %s (id TEXT PRIMARY KEY, status TEXT, "
	        "version BIGINT NOT NULL)",
	        e->projection) ||
	    sql(e->st, "CREATE TABLE %s (id TEXT PRIMARY KEY, step INT)",
	        e->saga))
		return -1;
	return 0;
}

static void env_teardown(env *e)
{
	inbox_store_close(e->st);
	e->st = NULL;
}

/* ---- handlers ---- */

typedef struct hctx {
	const env *e;
	int retries_left; /* RETRY this many times first */
	int always_retry;
	int sleep_ms;
	int calls;
} hctx;

/* Creates an invoice from /data/orderId and /data/totalCents. Negative
 * totals are rejected (permanent), as a business rule would. */
static int invoice_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	hctx *h = p;
	h->calls++;
	const char *order = NULL, *total = NULL;
	if (inbox_msg_get(m, "/data/orderId", &order) != 0 ||
	    inbox_msg_get(m, "/data/totalCents", &total) != 0) {
		inbox_txn_set_reason(t, "schema: orderId/totalCents missing");
		return INBOX_HANDLER_REJECT;
	}
	if (total && total[0] == '-') {
		inbox_txn_set_reason(t, "negative total");
		return INBOX_HANDLER_REJECT;
	}
	char q[256];
	snprintf(q, sizeof(q),
	         "INSERT INTO %s (order_id, total) VALUES ($1, $2)",
	         h->e->invoices);
	const char *params[] = {order, total};
	if (inbox_txn_exec(t, q, 2, params, NULL) != 0)
		return INBOX_HANDLER_RETRY;
	if (h->sleep_ms)
		sleep_ms(h->sleep_ms);
	if (h->always_retry || h->retries_left > 0) {
		h->retries_left--;
		inbox_txn_set_reason(t, "gateway unavailable");
		return INBOX_HANDLER_RETRY;
	}
	return INBOX_HANDLER_OK;
}

static int projection_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	hctx *h = p;
	h->calls++;
	const char *id, *status, *ver;
	if (inbox_msg_get(m, "/data/orderId", &id) ||
	    inbox_msg_get(m, "/data/status", &status) ||
	    inbox_msg_get(m, "/data/version", &ver))
		return INBOX_HANDLER_REJECT;
	const char *cols[] = {"status"};
	const char *vals[] = {status};
	char tbl[64];
	snprintf(tbl, sizeof(tbl), "%sorders", h->e->prefix);
	int applied = -1;
	if (inbox_txn_upsert_versioned(t, tbl, "id", id, "version", atoll(ver),
	                               1, cols, vals, &applied) != 0)
		return INBOX_HANDLER_RETRY;
	return INBOX_HANDLER_OK;
}

/* A saga step: a non-idempotent increment, guarded only by the inbox. */
static int saga_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	hctx *h = p;
	h->calls++;
	const char *saga;
	if (inbox_msg_get(m, "/data/sagaId", &saga))
		return INBOX_HANDLER_REJECT;
	char q[256];
	snprintf(q, sizeof(q), "UPDATE %s SET step = step + 1 WHERE id = $1",
	         h->e->saga);
	const char *params[] = {saga};
	int64_t rows = 0;
	if (inbox_txn_exec(t, q, 1, params, &rows) != 0 || rows != 1)
		return INBOX_HANDLER_RETRY;
	return INBOX_HANDLER_OK;
}

/* A consumer of st with options o, or NULL (the reason on stderr): what
 * every case's open_* helper ends with. */
static inbox_consumer *open_with(inbox_store *st,
                                 const inbox_consumer_options *o)
{
	inbox_consumer *c = NULL;
	char err[256];
	int rc = inbox_consumer_open(&c, st, o, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "consumer open: %d %s\n", rc, err);
	return c;
}

static inbox_consumer *open_consumer(inbox_store *st, inbox_handler_fn fn,
                                     hctx *h, const char *key_template,
                                     const char *fp_pointer)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.order-created.v1";
	o.key_template = key_template;
	o.fingerprint_pointer = fp_pointer;
	o.handler = fn;
	o.handler_payload = h;
	o.max_attempts = 3;
	o.lease_ms = 300;
	o.max_payload = 512;
	o.retention_seconds = 3600;
	return open_with(st, &o);
}

static char *order_json(char *buf, size_t n, const char *id, const char *order,
                        long total)
{
	snprintf(buf, n,
	         "{\"id\":\"%s\",\"type\":\"order-created\",\"data\":{"
	         "\"orderId\":\"%s\",\"totalCents\":%ld}}",
	         id, order, total);
	return buf;
}

static inbox_delivery delivery(const char *json)
{
	inbox_delivery d = INBOX_DELIVERY_INIT;
	d.payload = json;
	d.payload_len = strlen(json);
	d.position = "test:1";
	return d;
}

static int process1(inbox_consumer *c, const char *json, inbox_result *r)
{
	inbox_delivery d = delivery(json);
	int rc = inbox_consumer_process(c, &d, r);
	if (rc != 0)
		fprintf(stderr, "process: %d %s\n", rc,
		        inbox_consumer_errmsg(c));
	return rc;
}

/* ---- 1. the same message twice -> one effect ---- */
TEST(same_message_twice)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h, NULL, NULL);
	ASSERT_TRUE(c);
	char js[256];
	inbox_result r = INBOX_RESULT_INIT;
	order_json(js, sizeof(js), "e-9f31", "o-1", 1500);
	ASSERT_OK(process1(c, js, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_STREQ(r.key, "e-9f31");
	ASSERT_OK(process1(c, js, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_EQ(h.calls, 1);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &s);
	ASSERT_EQ(s.applied, 1);
	ASSERT_EQ(s.duplicates, 1);
	ASSERT_EQ(s.processing_count, 2);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* ---- 2. two deliveries at once from two processes ---- */
static int child_process_one(const env *e, const char *json, int go_fd,
                             int sleep_in_handler)
{
	inbox_store *st = open_store(e);
	if (!st)
		return 100;
	hctx h = {.e = e, .sleep_ms = sleep_in_handler};
	inbox_consumer *c = open_consumer(st, invoice_handler, &h, NULL, NULL);
	if (!c)
		return 101;
	char b;
	if (read(go_fd, &b, 1) != 1) /* wait for the starting gun */
		return 102;
	inbox_result r = INBOX_RESULT_INIT;
	inbox_delivery d = delivery(json);
	int rc = inbox_consumer_process(c, &d, &r);
	inbox_consumer_close(c);
	inbox_store_close(st);
	return rc != 0 ? 103 : 10 + (int)r.outcome;
}

TEST(two_deliveries_at_once)
{
	env e;
	ASSERT_OK(env_setup(&e));
	char js[256];
	order_json(js, sizeof(js), "e-race", "o-race", 700);
	int go[2];
	ASSERT_OK(pipe(go));
	pid_t kids[2];
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			close(go[1]);
			_exit(child_process_one(&e, js, go[0], 300));
		}
	}
	close(go[0]);
	sleep_ms(200); /* both children connected and waiting */
	ASSERT_EQ(write(go[1], "xx", 2), 2);
	close(go[1]);
	int applied = 0, dup = 0, other = 0;
	for (int i = 0; i < 2; i++) {
		int status;
		waitpid(kids[i], &status, 0);
		int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (code == 10 + INBOX_APPLIED)
			applied++;
		else if (code == 10 + INBOX_DUPLICATE)
			dup++;
		else {
			fprintf(stderr, "  child exit %d\n", code);
			other++;
		}
	}
	ASSERT_EQ(other, 0);
	ASSERT_EQ(applied, 1);
	ASSERT_EQ(dup, 1);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	env_teardown(&e);
}

/* ---- 3. crash after commit and before ack ---- */
TEST(crash_after_commit_before_ack)
{
	env e;
	ASSERT_OK(env_setup(&e));
	char js[256];
	order_json(js, sizeof(js), "e-crash", "o-crash", 990);
	int ack[2];
	ASSERT_OK(pipe(ack));
	pid_t pid = fork();
	if (pid == 0) {
		close(ack[0]);
		inbox_store *st = open_store(&e);
		hctx h = {.e = &e};
		inbox_consumer *c =
		    open_consumer(st, invoice_handler, &h, NULL, NULL);
		inbox_result r = INBOX_RESULT_INIT;
		inbox_delivery d = delivery(js);
		if (!c || inbox_consumer_process(c, &d, &r) != 0 ||
		    r.outcome != INBOX_APPLIED)
			_exit(1);
		/* committed; die exactly here, before the ack */
		raise(SIGKILL);
		ssize_t w = write(ack[1], "A", 1);
		(void)w;
		_exit(0);
	}
	close(ack[1]);
	int status;
	waitpid(pid, &status, 0);
	ASSERT_TRUE(WIFSIGNALED(status));
	ASSERT_EQ(WTERMSIG(status), SIGKILL);
	char b;
	ASSERT_EQ(read(ack[0], &b, 1), 0); /* no ack ever came */
	close(ack[0]);
	/* the broker redelivers */
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h, NULL, NULL);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(process1(c, js, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_EQ(h.calls, 0);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* ---- 4. transient error: rollback, retry, max attempts ---- */
TEST(transient_error_then_max_attempts)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .retries_left = 2};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h, NULL, NULL);
	char js[256];
	inbox_result r = INBOX_RESULT_INIT;
	order_json(js, sizeof(js), "e-flaky", "o-flaky", 100);
	ASSERT_OK(process1(c, js, &r));
	ASSERT_EQ(r.outcome, INBOX_RETRY);
	ASSERT_EQ(r.attempts, 1);
	ASSERT_CONTAINS(r.reason, "gateway unavailable");
	ASSERT_EQ(count(e.st, e.invoices, NULL), 0); /* rolled back */
	ASSERT_OK(process1(c, js, &r));
	ASSERT_EQ(r.outcome, INBOX_RETRY);
	ASSERT_EQ(r.attempts, 2);
	ASSERT_OK(process1(c, js, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_EQ(r.attempts, 3);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	ASSERT_STREQ(scalar(e.st,
	                    "SELECT attempts FROM %s WHERE key = 'e-flaky'",
	                    e.inbox_tbl),
	             "3");
	ASSERT_OK(process1(c, js, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);

	/* always failing: dead letter at the third attempt */
	h.always_retry = 1;
	order_json(js, sizeof(js), "e-broken", "o-broken", 100);
	ASSERT_OK(process1(c, js, &r));
	ASSERT_EQ(r.outcome, INBOX_RETRY);
	ASSERT_OK(process1(c, js, &r));
	ASSERT_EQ(r.outcome, INBOX_RETRY);
	ASSERT_OK(process1(c, js, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(r.attempts, 3);
	ASSERT_CONTAINS(r.reason, "max attempts (3)");
	ASSERT_TRUE(r.dead_letter_id > 0);
	ASSERT_STREQ(scalar(e.st,
	                    "SELECT attempts || ' ' || reason FROM %s "
	                    "WHERE key = 'e-broken'",
	                    e.dl_tbl),
	             "3 max attempts (3) reached: gateway unavailable");
	ASSERT_OK(process1(c, js, &r)); /* redelivery after the dead letter */
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &s);
	ASSERT_EQ(s.retries, 4);
	ASSERT_EQ(s.dead_letters, 1);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* ---- 5. same key, different payload ---- */
TEST(same_key_different_payload)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h, NULL, NULL);
	char a[256], b[256];
	inbox_result r = INBOX_RESULT_INIT;
	order_json(a, sizeof(a), "e-1", "o-1", 1500);
	order_json(b, sizeof(b), "e-1", "o-1", 9900);
	ASSERT_OK(process1(c, a, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	char fp_a[65];
	ASSERT_OK(inbox_fingerprint(a, strlen(a), "", fp_a, NULL, 0));
	ASSERT_OK(process1(c, b, &r));
	ASSERT_EQ(r.outcome, INBOX_CONFLICT);
	ASSERT_CONTAINS(r.reason, "fingerprint conflict");
	char fp_b[65];
	ASSERT_OK(inbox_fingerprint(b, strlen(b), "", fp_b, NULL, 0));
	ASSERT_STREQ(
	    scalar(e.st, "SELECT stored_fingerprint FROM %s", e.dl_tbl), fp_a);
	ASSERT_STREQ(scalar(e.st, "SELECT fingerprint FROM %s", e.dl_tbl),
	             fp_b);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	ASSERT_STREQ(scalar(e.st, "SELECT total FROM %s", e.invoices), "1500");
	/* key order and whitespace do not make a conflict */
	const char *same = "{ \"data\": {\"totalCents\": 1500, \"orderId\": "
	                   "\"o-1\"}, \"type\": \"order-created\", "
	                   "\"id\": \"e-1\" }";
	ASSERT_OK(process1(c, same, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &s);
	ASSERT_EQ(s.conflicts, 1);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* ---- 6. out of order: version 2, then version 1 ---- */
TEST(out_of_order_versions)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, projection_handler, &h, NULL, NULL);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(process1(c,
	                   "{\"id\":\"v2\",\"data\":{\"orderId\":\"o-7\","
	                   "\"status\":\"shipped\",\"version\":2}}",
	                   &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_OK(process1(c,
	                   "{\"id\":\"v1\",\"data\":{\"orderId\":\"o-7\","
	                   "\"status\":\"created\",\"version\":1}}",
	                   &r));
	ASSERT_EQ(r.outcome, INBOX_STALE);
	ASSERT_STREQ(scalar(e.st, "SELECT status || ':' || version FROM %s",
	                    e.projection),
	             "shipped:2");
	ASSERT_OK(process1(c,
	                   "{\"id\":\"v3\",\"data\":{\"orderId\":\"o-7\","
	                   "\"status\":\"delivered\",\"version\":3}}",
	                   &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_STREQ(scalar(e.st, "SELECT status || ':' || version FROM %s",
	                    e.projection),
	             "delivered:3");
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &s);
	ASSERT_EQ(s.stale, 1);
	inbox_consumer_close(c);
	env_teardown(&e);
}

static void age_inbox(env *e, int seconds)
{
	if (is_pg)
		sql(e->st,
		    "UPDATE %s SET processed_at = processed_at - "
		    "interval '%d seconds'",
		    e->inbox_tbl, seconds);
	else
		sql(e->st, "UPDATE %s SET processed_at = processed_at - %lld",
		    e->inbox_tbl, (long long)seconds * 1000);
}

/* ---- 7. replay after retention ---- */
TEST(replay_after_retention)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h, NULL, NULL);
	char js[256];
	order_json(js, sizeof(js), "e-old", "o-old", 500);
	inbox_delivery d = delivery(js);
	d.timestamp_ms = (int64_t)time(NULL) * 1000;
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	/* a record inside the window is never purged */
	int64_t deleted = -1;
	ASSERT_OK(inbox_store_purge(e.st, "billing.order-created.v1", 0, 10, 0,
	                            &deleted));
	ASSERT_EQ(deleted, 0);
	/* two hours later (the window is one hour) */
	age_inbox(&e, 7200);
	ASSERT_OK(inbox_store_purge(e.st, "billing.order-created.v1", 0, 10, 1,
	                            &deleted));
	ASSERT_EQ(deleted, 1); /* dry run */
	ASSERT_OK(inbox_store_purge(e.st, "billing.order-created.v1", 0, 10, 0,
	                            &deleted));
	ASSERT_EQ(deleted, 1);
	ASSERT_EQ(count(e.st, e.inbox_tbl, NULL), 0);
	/* someone replays yesterday's queue */
	d.timestamp_ms -= 7200 * 1000;
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_CONTAINS(r.reason, "too old to deduplicate");
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	ASSERT_EQ(count(e.st, e.dl_tbl, NULL), 1);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* The retention window is a promise to every process of a consumer and to
 * the purge: a consumer opened with another window than the stored one is
 * refused, naming both; it is changed on purpose only
 * (inbox_admin_set_retention); a purge is never given a shorter one.
 * (Before, opening a consumer with retention 2s rewrote the stored 1h
 * window, and the next purge deleted every record older than 2s.) */
TEST(retention_window_is_a_promise)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h, NULL, NULL);
	ASSERT_TRUE(c != NULL);
	char js[256];
	order_json(js, sizeof(js), "e-1", "o-1", 500);
	inbox_delivery d = delivery(js);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	inbox_consumer_close(c);
	age_inbox(&e, 60); /* a minute old: inside the hour */

	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.order-created.v1";
	o.handler = invoice_handler;
	o.handler_payload = &h;
	o.retention_seconds = 2;
	char err[512] = "";
	c = NULL;
	ASSERT_EQ(inbox_consumer_open(&c, e.st, &o, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(c == NULL);
	ASSERT_CONTAINS(err, "retention 2s differs from the 1h stored");
	inbox_admin_stats as = INBOX_ADMIN_STATS_INIT;
	ASSERT_OK(inbox_admin_stats_read(e.st, o.name, &as));
	ASSERT_EQ(as.retention_seconds, 3600); /* unchanged */

	/* nor can a purge go below it, by consumer or for all */
	int64_t deleted = -1;
	ASSERT_EQ(inbox_store_purge(e.st, o.name, 2, 10, 0, &deleted),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_store_errmsg(e.st), "shorter than the 3600s");
	ASSERT_EQ(inbox_store_purge(e.st, NULL, 2, 10, 0, &deleted),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(count(e.st, e.inbox_tbl, NULL), 1);
	ASSERT_OK(inbox_store_purge(e.st, o.name, 7200, 10, 0, &deleted));
	ASSERT_EQ(deleted, 0);

	/* changed on purpose: then that window is the one */
	int64_t was = 0;
	ASSERT_OK(inbox_admin_set_retention(e.st, o.name, 30, &was));
	ASSERT_EQ(was, 3600);
	o.retention_seconds = 30;
	ASSERT_OK(inbox_consumer_open(&c, e.st, &o, err, sizeof(err)));
	inbox_consumer_close(c);
	ASSERT_OK(inbox_store_purge(e.st, o.name, 0, 10, 0, &deleted));
	ASSERT_EQ(deleted, 1); /* a minute old, the window 30 s */
	/* a consumer that never ran here is registered by it */
	ASSERT_OK(inbox_admin_set_retention(e.st, "new.consumer", 86400, &was));
	ASSERT_EQ(was, 0);
	ASSERT_OK(inbox_admin_stats_read(e.st, "new.consumer", &as));
	ASSERT_EQ(as.retention_seconds, 86400);
	ASSERT_EQ(inbox_admin_set_retention(e.st, "x", 0, NULL),
	          INBOX_ERR_INVALID);
	env_teardown(&e);
}

TEST(purge_in_bounded_batches)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h, NULL, NULL);
	inbox_delivery d[25] = {INBOX_DELIVERY_INIT};
	char js[25][160];
	inbox_result r[25] = {INBOX_RESULT_INIT};
	for (int i = 0; i < 25; i++) {
		char id[16], o[16];
		snprintf(id, sizeof(id), "old-%02d", i);
		snprintf(o, sizeof(o), "o-%02d", i);
		order_json(js[i], sizeof(js[i]), id, o, 100 + i);
		d[i] = delivery(js[i]);
	}
	ASSERT_OK(inbox_consumer_process_batch(c, d, 25, r));
	age_inbox(&e, 7200);
	for (int i = 0; i < 5; i++) {
		char id[16];
		snprintf(id, sizeof(id), "new-%02d", i);
		order_json(js[i], sizeof(js[i]), id, id, 1);
		d[i] = delivery(js[i]);
	}
	ASSERT_OK(inbox_consumer_process_batch(c, d, 5, r));
	int64_t deleted = 0;
	ASSERT_OK(inbox_store_purge(e.st, NULL, 0, 10, 0, &deleted));
	ASSERT_EQ(deleted, 25);
	ASSERT_EQ(count(e.st, e.inbox_tbl, NULL), 5);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* ---- 8. a long handler whose lease expires ---- */
static int complete_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	return invoice_handler(t, m, p);
}

TEST(lease_expires_and_is_taken_over)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_store *st2 = open_store(&e);
	ASSERT_TRUE(st2);
	hctx h1 = {.e = &e}, h2 = {.e = &e};
	inbox_consumer *w1 =
	    open_consumer(e.st, invoice_handler, &h1, NULL, NULL);
	inbox_consumer *w2 =
	    open_consumer(st2, invoice_handler, &h2, NULL, NULL);
	char js[256];
	order_json(js, sizeof(js), "e-long", "o-long", 4200);
	inbox_delivery d = delivery(js);
	inbox_lease *l1 = NULL, *l2 = NULL;
	inbox_outcome o;
	ASSERT_OK(inbox_lease_acquire(w1, &d, &l1, &o));
	ASSERT_EQ(o, INBOX_ACQUIRED);
	ASSERT_EQ(inbox_lease_fence(l1), 1);
	ASSERT_STREQ(scalar(e.st, "SELECT status FROM %s", e.inbox_tbl),
	             "processing");
	/* while the lease is valid, others see it in progress */
	ASSERT_OK(inbox_lease_acquire(w2, &d, &l2, &o));
	ASSERT_EQ(o, INBOX_IN_PROGRESS);
	ASSERT_TRUE(l2 == NULL);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_consumer_process(w2, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_IN_PROGRESS);
	ASSERT_EQ(inbox_lease_extend(l1), 0);
	sleep_ms(450); /* the lease (300 ms) expires: worker 1 is stuck */
	ASSERT_OK(inbox_lease_acquire(w2, &d, &l2, &o));
	ASSERT_EQ(o, INBOX_ACQUIRED);
	ASSERT_EQ(inbox_lease_fence(l2), 2);
	/* worker 1 wakes up and tries to complete: refused */
	ASSERT_EQ(inbox_lease_extend(l1), INBOX_ERR_FENCED);
	ASSERT_EQ(inbox_lease_complete(l1, complete_handler, &h1, &o),
	          INBOX_ERR_FENCED);
	ASSERT_CONTAINS(inbox_consumer_errmsg(w1), "taken over");
	ASSERT_EQ(count(e.st, e.invoices, NULL), 0);
	ASSERT_OK(inbox_lease_complete(l2, complete_handler, &h2, &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	ASSERT_STREQ(
	    scalar(e.st, "SELECT status || ':' || fence FROM %s", e.inbox_tbl),
	    "completed:2");
	inbox_lease_free(l1);
	l1 = NULL;
	ASSERT_OK(inbox_lease_acquire(w1, &d, &l1, &o));
	ASSERT_EQ(o, INBOX_DUPLICATE);
	inbox_stats s1 = INBOX_STATS_INIT, s2 = INBOX_STATS_INIT;
	inbox_consumer_stats(w1, &s1);
	inbox_consumer_stats(w2, &s2);
	ASSERT_EQ(s1.fenced, 1);
	ASSERT_EQ(s2.lease_takeovers, 1);
	inbox_lease_free(l1);
	inbox_lease_free(l2);
	inbox_consumer_close(w1);
	inbox_consumer_close(w2);
	inbox_store_close(st2);
	env_teardown(&e);
}

TEST(lease_fail_then_retry)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h, NULL, NULL);
	char js[256];
	order_json(js, sizeof(js), "e-lf", "o-lf", 1);
	inbox_delivery d = delivery(js);
	inbox_lease *l = NULL;
	inbox_outcome o;
	ASSERT_OK(inbox_lease_acquire(c, &d, &l, &o));
	ASSERT_EQ(o, INBOX_ACQUIRED);
	ASSERT_OK(inbox_lease_fail(l, "partner down"));
	inbox_lease_free(l);
	ASSERT_STREQ(scalar(e.st, "SELECT status || ':' || attempts FROM %s",
	                    e.inbox_tbl),
	             "failed:1");
	ASSERT_OK(inbox_lease_acquire(c, &d, &l, &o));
	ASSERT_EQ(o, INBOX_ACQUIRED);
	ASSERT_EQ(inbox_msg_attempt(inbox_lease_msg(l)), 2);
	ASSERT_OK(inbox_lease_complete(l, complete_handler, &h, &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	inbox_lease_free(l);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	/* failing at the last attempt buries the message */
	order_json(js, sizeof(js), "e-lf3", "o-lf3", 1);
	d = delivery(js);
	for (int i = 1; i <= 3; i++) {
		ASSERT_OK(inbox_lease_acquire(c, &d, &l, &o));
		ASSERT_EQ(o, INBOX_ACQUIRED);
		ASSERT_OK(inbox_lease_fail(l, "partner down"));
		inbox_lease_free(l);
	}
	ASSERT_STREQ(scalar(e.st,
	                    "SELECT status || ':' || attempts FROM %s "
	                    "WHERE key = 'e-lf3'",
	                    e.inbox_tbl),
	             "dead:3");
	ASSERT_EQ(count(e.st, e.dl_tbl, "key = 'e-lf3'"), 1);
	ASSERT_OK(inbox_lease_acquire(c, &d, &l, &o));
	ASSERT_EQ(o, INBOX_DUPLICATE);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* ---- saga: a repeated reply advances the state once ---- */
/* ---- the store slots themselves (vtable level) ---- */

#define SLOT_FP                                                                \
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

/* One claim in its own call; the transaction must be open. */
static int slot_claim(inbox_store *st, const char *key, int64_t lease_ms,
                      inbox_claim *c)
{
	memset(c, 0, sizeof(*c));
	c->key = key;
	c->fingerprint = SLOT_FP;
	return st->vt->claim(st, "c", c, 1, INBOX_ST_PROCESSING, lease_ms);
}

/* claim/reclaim/extend/finish: a lease expires, is taken over with the
 * next fence, and the stale holder is fenced out of extend and finish;
 * a valid lease is neither expired nor taken. (Was written twice, in
 * test_sqlite_store and test_pg_store.) */
TEST(slot_lease_and_fence)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_store *st = e.st;
	const inbox_store_vtable *vt = st->vt;
	inbox_claim c;
	int64_t n = -1, fence = 0;
	int taken = -1;
	int32_t attempts = 0;
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(slot_claim(st, "k", 100, &c));
	ASSERT_EQ(c.is_new, 1);
	ASSERT_OK(slot_claim(st, "long", 60000, &c));
	ASSERT_EQ(c.is_new, 1);
	ASSERT_OK(vt->commit(st));
	ASSERT_EQ(count(st, e.inbox_tbl,
	                "processed_at IS NULL AND lease_until IS NOT NULL"),
	          2);
	/* within its lease: seen in progress, not taken */
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(slot_claim(st, "k", 100, &c));
	ASSERT_EQ(c.is_new, 0);
	ASSERT_EQ(c.status, INBOX_ST_PROCESSING);
	ASSERT_EQ(c.lease_expired, 0);
	ASSERT_OK(vt->reclaim(st, "c", "k", INBOX_ST_PROCESSING, 30000, &taken,
	                      &attempts, &fence));
	ASSERT_EQ(taken, 0);
	ASSERT_OK(vt->commit(st));
	sleep_ms(200);
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(slot_claim(st, "k", 100, &c));
	ASSERT_EQ(c.is_new, 0);
	ASSERT_EQ(c.status, INBOX_ST_PROCESSING);
	ASSERT_EQ(c.lease_expired, 1);
	ASSERT_EQ(c.fence, 1);
	/* a valid lease is neither expired nor taken */
	ASSERT_OK(slot_claim(st, "long", 100, &c));
	ASSERT_EQ(c.lease_expired, 0);
	ASSERT_OK(vt->reclaim(st, "c", "long", INBOX_ST_PROCESSING, 1000,
	                      &taken, &attempts, &fence));
	ASSERT_EQ(taken, 0);
	ASSERT_OK(vt->reclaim(st, "c", "k", INBOX_ST_PROCESSING, 30000, &taken,
	                      &attempts, &fence));
	ASSERT_EQ(taken, 1);
	ASSERT_EQ(fence, 2);
	ASSERT_EQ(attempts, 2);
	ASSERT_OK(vt->commit(st));
	/* the stale holder (fence 1) is fenced out */
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(vt->extend(st, "c", "k", 1, 30000, &n));
	ASSERT_EQ(n, 0);
	ASSERT_OK(vt->finish(st, "c", "k", 1, INBOX_ST_PROCESSING,
	                     INBOX_ST_COMPLETED, 0, &n));
	ASSERT_EQ(n, 0);
	ASSERT_OK(vt->finish(st, "c", "k", 1, INBOX_ST_NONE, INBOX_ST_COMPLETED,
	                     0, &n));
	ASSERT_EQ(n, 0);
	ASSERT_OK(vt->extend(st, "c", "k", 2, 30000, &n));
	ASSERT_EQ(n, 1);
	ASSERT_OK(vt->finish(st, "c", "k", 2, INBOX_ST_PROCESSING,
	                     INBOX_ST_COMPLETED, 0, &n));
	ASSERT_EQ(n, 1);
	ASSERT_OK(vt->extend(st, "c", "k", 2, 30000, &n)); /* not processing */
	ASSERT_EQ(n, 0);
	ASSERT_OK(vt->commit(st));
	ASSERT_EQ(count(st, e.inbox_tbl,
	                "key = 'k' AND consumer = 'c' AND status = "
	                "'completed' AND lease_until IS NULL AND processed_at "
	                "IS NOT NULL AND fence = 2 AND attempts = 2"),
	          1);
	env_teardown(&e);
}

/* finish/reclaim on a FAILED record: finish only from the expected status
 * and fence (0: any), reclaim takes a failed record once (attempts and
 * fence + 1), never a completed or a missing one. (Was written twice, in
 * test_sqlite_store and test_pg_store.) */
TEST(slot_reclaim_failed)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_store *st = e.st;
	const inbox_store_vtable *vt = st->vt;
	inbox_claim c;
	int64_t n = -1, fence = 0;
	int taken = -1;
	int32_t attempts = 0;
	ASSERT_OK(vt->begin(st));
	memset(&c, 0, sizeof(c));
	c.key = "k";
	c.fingerprint = SLOT_FP;
	ASSERT_OK(vt->claim(st, "c", &c, 1, INBOX_ST_COMPLETED, 0));
	ASSERT_EQ(c.is_new, 1);
	/* wrong expected status, wrong fence: nothing */
	ASSERT_OK(vt->finish(st, "c", "k", 0, INBOX_ST_PROCESSING,
	                     INBOX_ST_FAILED, 0, &n));
	ASSERT_EQ(n, 0);
	ASSERT_OK(
	    vt->finish(st, "c", "k", 7, INBOX_ST_NONE, INBOX_ST_FAILED, 0, &n));
	ASSERT_EQ(n, 0);
	ASSERT_OK(vt->finish(st, "c", "k", 1, INBOX_ST_COMPLETED,
	                     INBOX_ST_FAILED, 3, &n));
	ASSERT_EQ(n, 1);
	ASSERT_OK(vt->commit(st));
	ASSERT_EQ(count(st, e.inbox_tbl,
	                "key = 'k' AND status = 'failed' AND processed_at IS "
	                "NULL"),
	          1);
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(slot_claim(st, "k", 0, &c));
	ASSERT_EQ(c.is_new, 0);
	ASSERT_EQ(c.status, INBOX_ST_FAILED);
	ASSERT_EQ(c.attempts, 3);
	ASSERT_OK(vt->reclaim(st, "c", "k", INBOX_ST_COMPLETED, 0, &taken,
	                      &attempts, &fence));
	ASSERT_EQ(taken, 1);
	ASSERT_EQ(attempts, 4);
	ASSERT_EQ(fence, 2);
	ASSERT_OK(vt->reclaim(st, "c", "k", INBOX_ST_COMPLETED, 0, &taken,
	                      &attempts, &fence));
	ASSERT_EQ(taken, 0);
	ASSERT_OK(vt->commit(st));
	ASSERT_EQ(count(st, e.inbox_tbl,
	                "key = 'k' AND status = 'completed' AND processed_at "
	                "IS NOT NULL"),
	          1);
	ASSERT_OK(vt->begin(st));
	ASSERT_OK(vt->reclaim(st, "c", "k", INBOX_ST_COMPLETED, 0, &taken,
	                      &attempts, &fence));
	ASSERT_EQ(taken, 0);
	ASSERT_OK(vt->reclaim(st, "c", "missing", INBOX_ST_COMPLETED, 0, &taken,
	                      &attempts, &fence));
	ASSERT_EQ(taken, 0);
	/* finish with expect: only from the expected status */
	ASSERT_OK(
	    vt->finish(st, "c", "k", 0, INBOX_ST_FAILED, INBOX_ST_DEAD, 0, &n));
	ASSERT_EQ(n, 0);
	ASSERT_OK(vt->finish(st, "c", "k", 2, INBOX_ST_COMPLETED, INBOX_ST_DEAD,
	                     7, &n));
	ASSERT_EQ(n, 1);
	ASSERT_OK(vt->commit(st));
	ASSERT_EQ(count(st, e.inbox_tbl,
	                "key = 'k' AND status = 'dead' AND attempts = 7"),
	          1);
	env_teardown(&e);
}

TEST(saga_step_advances_once)
{
	env e;
	ASSERT_OK(env_setup(&e));
	ASSERT_OK(
	    sql(e.st, "INSERT INTO %s (id, step) VALUES ('s-1', 0)", e.saga));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, saga_handler, &h,
	                  "saga:{/data/sagaId}:step:{/data/step}", "/data");
	inbox_result r = INBOX_RESULT_INIT;
	const char *reply = "{\"id\":\"r-1\",\"data\":{\"sagaId\":\"s-1\","
	                    "\"step\":\"reserve-stock\",\"ok\":true}}";
	const char *again = "{\"id\":\"r-2\",\"data\":{\"sagaId\":\"s-1\","
	                    "\"step\":\"reserve-stock\",\"ok\":true}}";
	ASSERT_OK(process1(c, reply, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_STREQ(r.key, "saga:s-1:step:reserve-stock");
	ASSERT_OK(process1(c, reply, &r)); /* the same reply again */
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_OK(process1(c, again, &r)); /* new id, same saga step */
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_STREQ(scalar(e.st, "SELECT step FROM %s", e.saga), "1");
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* ---- business key merges two message ids ---- */
TEST(business_key_merges_ids)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h,
	                  "create-invoice:{/data/orderId}", "/data");
	char a[256], b[256];
	inbox_result r = INBOX_RESULT_INIT;
	order_json(a, sizeof(a), "e-100", "o-42", 1234);
	order_json(b, sizeof(b), "e-101", "o-42", 1234); /* producer retry */
	ASSERT_OK(process1(c, a, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_STREQ(r.key, "create-invoice:o-42");
	ASSERT_OK(process1(c, b, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* ---- a batch with one failing message commits the others ---- */
TEST(batch_with_failures_commits_the_rest)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h, NULL, NULL);
	char js[6][256];
	order_json(js[0], 256, "b-1", "o-1", 10);
	order_json(js[1], 256, "b-2", "o-2", -5); /* rejected */
	order_json(js[2], 256, "b-3", "o-3", 30);
	order_json(js[3], 256, "b-1", "o-1", 10); /* repeat inside the batch */
	order_json(js[4], 256, "b-5", "o-5", 50);
	order_json(js[5], 256, "b-1", "o-1", 11); /* conflict inside batch */
	inbox_delivery d[6] = {INBOX_DELIVERY_INIT};
	inbox_result r[6] = {INBOX_RESULT_INIT};
	for (int i = 0; i < 6; i++)
		d[i] = delivery(js[i]);
	ASSERT_OK(inbox_consumer_process_batch(c, d, 6, r));
	ASSERT_EQ(r[0].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[1].outcome, INBOX_DEAD_LETTERED);
	ASSERT_CONTAINS(r[1].reason, "negative total");
	ASSERT_EQ(r[2].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[3].outcome, INBOX_DUPLICATE);
	ASSERT_EQ(r[4].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[5].outcome, INBOX_CONFLICT);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 3);
	ASSERT_EQ(count(e.st, e.invoices, "order_id = 'o-2'"), 0);
	ASSERT_EQ(count(e.st, e.dl_tbl, NULL), 2);
	/* a repeat of a primary that will be redelivered is not acked */
	h.retries_left = 1;
	order_json(js[0], 256, "b-9", "o-9", 90);
	order_json(js[3], 256, "b-9", "o-9", 90);
	ASSERT_OK(inbox_consumer_process_batch(c, d, 6, r));
	ASSERT_EQ(r[0].outcome, INBOX_RETRY);
	ASSERT_EQ(r[3].outcome, INBOX_RETRY);
	ASSERT_CONTAINS(r[3].reason, "gateway unavailable");
	order_json(js[0], 256, "b-1", "o-1", 10);
	order_json(js[3], 256, "b-1", "o-1", 10);
	/* the whole batch again: all settled */
	ASSERT_OK(inbox_consumer_process_batch(c, d, 6, r));
	ASSERT_EQ(r[0].outcome, INBOX_DUPLICATE);
	ASSERT_EQ(r[1].outcome, INBOX_DUPLICATE);
	ASSERT_EQ(r[5].outcome, INBOX_CONFLICT);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 3);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* ---- two processes, overlapping batches in opposite order ---- */
#define POOL  120
#define BATCH 40
static int overlap_child(const env *e, int reverse, int go_fd)
{
	inbox_store *st = open_store(e);
	if (!st)
		return 100;
	hctx h = {.e = e};
	inbox_consumer *c = open_consumer(st, invoice_handler, &h, NULL, NULL);
	if (!c)
		return 101;
	char b;
	if (read(go_fd, &b, 1) != 1)
		return 102;
	static char js[POOL][160];
	inbox_delivery d[BATCH] = {INBOX_DELIVERY_INIT};
	inbox_result r[BATCH] = {INBOX_RESULT_INIT};
	for (int i = 0; i < POOL; i++) {
		char id[16];
		snprintf(id, sizeof(id), "k-%03d", i);
		order_json(js[i], sizeof(js[i]), id, id, i);
	}
	for (int round = 0; round < POOL / BATCH * 2; round++) {
		for (int j = 0; j < BATCH; j++) {
			int k = (round * BATCH / 2 + j) % POOL;
			if (reverse)
				k = POOL - 1 - k;
			d[j] = delivery(js[k]);
		}
		int rc = inbox_consumer_process_batch(c, d, BATCH, r);
		if (rc != 0) {
			fprintf(stderr, "  overlap child: %d %s\n", rc,
			        inbox_consumer_errmsg(c));
			return 103;
		}
	}
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &s);
	inbox_consumer_close(c);
	inbox_store_close(st);
	if (s.transient_retries) {
		fprintf(stderr, "  overlap child: %llu transient retries\n",
		        (unsigned long long)s.transient_retries);
		return 104;
	}
	return 0;
}

TEST(overlapping_batches_opposite_order)
{
	env e;
	ASSERT_OK(env_setup(&e));
	int go[2];
	ASSERT_OK(pipe(go));
	pid_t kids[2];
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			close(go[1]);
			_exit(overlap_child(&e, i, go[0]));
		}
	}
	close(go[0]);
	sleep_ms(200);
	ASSERT_EQ(write(go[1], "xx", 2), 2);
	close(go[1]);
	for (int i = 0; i < 2; i++) {
		int status;
		waitpid(kids[i], &status, 0);
		ASSERT_TRUE(WIFEXITED(status));
		ASSERT_EQ(WEXITSTATUS(status), 0);
	}
	ASSERT_EQ(count(e.st, e.invoices, NULL), POOL);
	ASSERT_EQ(atol(scalar(e.st, "SELECT COUNT(DISTINCT order_id) FROM %s",
	                      e.invoices)),
	          POOL);
	env_teardown(&e);
}

/* ---- bad input becomes dead letters and the consumer goes on ---- */
TEST(bad_input_is_dead_lettered)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h,
	                  "create-invoice:{/data/orderId}", "/data");
	char big[700];
	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "{\"id\":\"big\"}", 12);
	const char bad_utf8[] =
	    "{\"id\":\"u\",\"data\":{\"orderId\":\"\xc3\x28\"}}";
	const char *inputs[] = {
	    "{\"id\":\"m1\",\"data\":{\"orderId\":", /* malformed */
	    bad_utf8,
	    "{\"id\":\"m3\",\"data\":{\"totalCents\":5}}", /* no orderId */
	    big,
	    "{\"id\":\"m5\",\"data\":{\"orderId\":\"o-ok\",\"totalCents\":5}}",
	    "",
	};
	const char *want[] = {"malformed JSON",
	                      "invalid UTF-8",
	                      "missing key field /data/orderId",
	                      "exceeds max_payload",
	                      NULL,
	                      "empty payload"};
	inbox_delivery d[6] = {INBOX_DELIVERY_INIT};
	inbox_result r[6] = {INBOX_RESULT_INIT};
	for (int i = 0; i < 6; i++)
		d[i] = delivery(inputs[i]);
	d[1].payload_len = sizeof(bad_utf8) - 1;
	ASSERT_OK(inbox_consumer_process_batch(c, d, 6, r));
	for (int i = 0; i < 6; i++) {
		if (!want[i]) {
			ASSERT_EQ(r[i].outcome, INBOX_APPLIED);
			continue;
		}
		ASSERT_EQ(r[i].outcome, INBOX_DEAD_LETTERED);
		ASSERT_CONTAINS(r[i].reason, want[i]);
		ASSERT_TRUE(r[i].dead_letter_id > 0);
	}
	ASSERT_EQ(count(e.st, e.dl_tbl, NULL), 5);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	/* the raw bytes are kept exactly, invalid UTF-8 included */
	ASSERT_STREQ(scalar(e.st,
	                    is_pg
	                        ? "SELECT length(payload) FROM %s WHERE "
	                          "reason LIKE 'invalid UTF-8%%'"
	                        : "SELECT length(CAST(payload AS BLOB)) "
	                          "FROM %s WHERE reason LIKE 'invalid UTF-8%%'",
	                    e.dl_tbl),
	             "34");
	ASSERT_STREQ(scalar(e.st,
	                    "SELECT position FROM %s WHERE reason LIKE "
	                    "'malformed%%'",
	                    e.dl_tbl),
	             "test:1");
	/* and the consumer goes on */
	inbox_result r1 = INBOX_RESULT_INIT;
	ASSERT_OK(process1(c,
	                   "{\"id\":\"m6\",\"data\":{\"orderId\":\"o-next\","
	                   "\"totalCents\":6}}",
	                   &r1));
	ASSERT_EQ(r1.outcome, INBOX_APPLIED);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* ---- U+0000 inside a string never cuts it ---- */

/* Ids (and so {id} keys) that differ only after a U+0000: each is a dead
 * letter naming the field, never the key "m" (which made the second a
 * false duplicate, or with other data a false conflict), and a crafted
 * "order-1\u0000x" never pre-empts the real "order-1". */
TEST(nul_in_an_id_is_never_cut)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h, NULL, "/data");
	ASSERT_TRUE(c);
	const char *js[] = {
	    "{\"id\":\"m\\u0000first\",\"data\":{\"orderId\":\"o-n\","
	    "\"totalCents\":1}}",
	    "{\"id\":\"m\\u0000second\",\"data\":{\"orderId\":\"o-n\","
	    "\"totalCents\":1}}",
	    "{\"id\":\"m\\u0000third\",\"data\":{\"orderId\":\"o-other\","
	    "\"totalCents\":2}}",
	    "{\"id\":\"order-1\\u0000x\",\"data\":{\"orderId\":\"o-fake\","
	    "\"totalCents\":3}}",
	};
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result r[4] = {INBOX_RESULT_INIT};
	TEST_RESULTS_INIT(r, 4);
	for (int i = 0; i < 4; i++)
		d[i] = delivery(js[i]);
	/* the first two in one batch, the others one by one */
	ASSERT_OK(inbox_consumer_process_batch(c, d, 2, r));
	ASSERT_OK(inbox_consumer_process(c, &d[2], &r[2]));
	ASSERT_OK(inbox_consumer_process(c, &d[3], &r[3]));
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(r[i].outcome, INBOX_DEAD_LETTERED);
		ASSERT_TRUE(r[i].key == NULL);
		ASSERT_CONTAINS(r[i].reason,
		                "U+0000 in /id (the message id): cannot be "
		                "stored as text");
	}
	ASSERT_EQ(h.calls, 0);
	ASSERT_EQ(count(e.st, e.inbox_tbl, NULL), 0);
	/* each its own dead letter, with neither a key nor a cut id */
	ASSERT_EQ(count(e.st, e.dl_tbl, NULL), 4);
	ASSERT_EQ(count(e.st, e.dl_tbl, "key IS NULL AND message_id IS NULL"),
	          4);
	/* the real order-1 comes after the crafted one: applied */
	inbox_result r1 = INBOX_RESULT_INIT;
	ASSERT_OK(process1(c,
	                   "{\"id\":\"order-1\",\"data\":{\"orderId\":"
	                   "\"o-real\",\"totalCents\":4}}",
	                   &r1));
	ASSERT_EQ(r1.outcome, INBOX_APPLIED);
	ASSERT_STREQ(r1.key, "order-1");
	ASSERT_EQ(count(e.st, e.invoices, "order_id = 'o-real'"), 1);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* A value handed to the handler as a C string: a string holding U+0000
 * is refused (inbox_msg_get), never cut; a key field holding one is a
 * dead letter naming it. */
static int nul_param_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	hctx *h = p;
	h->calls++;
	const char *order = NULL;
	int rc = inbox_msg_get(m, "/data/orderId", &order);
	if (rc != INBOX_OK || !order) {
		inbox_txn_set_reason(t, "orderId is not text");
		return INBOX_HANDLER_REJECT;
	}
	char q[256];
	snprintf(q, sizeof(q),
	         "INSERT INTO %s (order_id, total) VALUES ($1, 0)",
	         h->e->invoices);
	const char *params[] = {order};
	return inbox_txn_exec(t, q, 1, params, NULL) == 0 ? INBOX_HANDLER_OK
	                                                  : INBOX_HANDLER_RETRY;
}

TEST(nul_in_a_value_is_never_cut)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, nul_param_handler, &h, NULL, NULL);
	ASSERT_TRUE(c);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(process1(c,
	                   "{\"id\":\"p-1\",\"data\":{\"orderId\":"
	                   "\"abc\\u0000def\"}}",
	                   &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(h.calls, 1);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 0);
	ASSERT_OK(
	    process1(c, "{\"id\":\"p-2\",\"data\":{\"orderId\":\"abc\"}}", &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_EQ(count(e.st, e.invoices, "order_id = 'abc'"), 1);
	inbox_consumer_close(c);
	/* the same value as a key field */
	c = open_consumer(e.st, invoice_handler, &h, "inv:{/data/orderId}",
	                  NULL);
	ASSERT_TRUE(c);
	ASSERT_OK(process1(c,
	                   "{\"id\":\"p-3\",\"data\":{\"orderId\":"
	                   "\"abc\\u0000def\",\"totalCents\":1}}",
	                   &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_TRUE(r.key == NULL);
	ASSERT_CONTAINS(r.reason, "U+0000 in key field /data/orderId");
	ASSERT_EQ(count(e.st, e.inbox_tbl, "key LIKE 'inv:%'"), 0);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* A delivery its source refused (inbox_delivery.refused, the reason) is
 * a dead letter with that reason, without key or id (the id is ignored);
 * a missing key field leaves no half-rendered key behind. */
TEST(refused_and_keyless_deliveries)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h,
	                  "create-invoice:{/data/orderId}", "/data");
	ASSERT_TRUE(c);
	const char js[] = "{\"id\":\"r-1\",\"data\":{\"orderId\":\"o-r\","
	                  "\"totalCents\":1}}";
	inbox_delivery d = delivery(js);
	d.id = "r-1";
	d.refused = "payload of 10485760 bytes exceeds max_payload 512";
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_STREQ(r.reason,
	             "payload of 10485760 bytes exceeds max_payload 512");
	ASSERT_TRUE(r.key == NULL);
	ASSERT_EQ(h.calls, 0);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 0);
	ASSERT_EQ(count(e.st, e.dl_tbl,
	                "key IS NULL AND message_id IS NULL AND reason LIKE "
	                "'payload of 10485760 bytes%'"),
	          1);
	/* the key field is missing: no key, the field named */
	ASSERT_OK(
	    process1(c, "{\"id\":\"r-2\",\"data\":{\"totalCents\":1}}", &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_TRUE(r.key == NULL);
	ASSERT_CONTAINS(r.reason, "missing key field /data/orderId");
	ASSERT_EQ(count(e.st, e.dl_tbl, "key IS NOT NULL"), 0);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* ---- dead letters are idempotent too ---- */

static long dl_sum(const env *e, const char *where)
{
	return atol(
	    scalar(e->st, "SELECT coalesce(sum(deliveries), 0) FROM %s%s%s",
	           e->dl_tbl, where ? " WHERE " : "", where ? where : ""));
}

/* The same poison message delivered five times is one dead letter
 * counting its deliveries, whether no key can be derived (malformed
 * JSON, a missing key field: five), the handler rejects it (its dead
 * record answers the repeats as duplicates: one) or it conflicts (the
 * repeats inside one batch are duplicates of the first: three); distinct
 * messages stay distinct;
 * a replay that fails again is counted on the same dead letter, which is
 * pending again. */
TEST(dead_letters_are_idempotent)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h,
	                  "create-invoice:{/data/orderId}", "/data");
	ASSERT_TRUE(c);
	const char *bad = "{\"id\":\"x\",\"data\":";
	const char *nokey = "{\"id\":\"k\",\"data\":{\"totalCents\":1}}";
	const char *neg =
	    "{\"id\":\"n\",\"data\":{\"orderId\":\"o-neg\",\"totalCents\":-1}}";
	char good[256], other[256];
	order_json(good, sizeof(good), "g1", "o-c", 100);
	order_json(other, sizeof(other), "g2", "o-c", 200); /* conflicts */
	inbox_result r = INBOX_RESULT_INIT, first[4] = {INBOX_RESULT_INIT};
	ASSERT_OK(process1(c, good, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	const char *msgs[4] = {bad, nokey, neg, other};
	/* five deliveries each: one by one, then three in one batch */
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 4; i++) {
			ASSERT_OK(process1(c, msgs[i], &r));
			if (round == 0)
				first[i] = r;
			else
				ASSERT_EQ(r.dead_letter_id,
				          i == 2 ? 0 : first[i].dead_letter_id);
		}
	inbox_delivery d[12] = {INBOX_DELIVERY_INIT};
	inbox_result rs[12] = {INBOX_RESULT_INIT};
	for (int i = 0; i < 12; i++)
		d[i] = delivery(msgs[i % 4]);
	ASSERT_OK(inbox_consumer_process_batch(c, d, 12, rs));
	/* in one batch, repeats of a key are duplicates of its first (the
	 * conflict); what has no key is each a delivery of its own */
	for (int i = 0; i < 12; i++)
		ASSERT_EQ(rs[i].dead_letter_id,
		          i % 4 == 2 || i == 7 || i == 11
		              ? 0
		              : first[i % 4].dead_letter_id);
	ASSERT_EQ(first[0].outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(first[1].outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(first[2].outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(first[3].outcome, INBOX_CONFLICT);
	ASSERT_EQ(count(e.st, e.dl_tbl, NULL), 4);
	ASSERT_EQ(dl_sum(&e, "key IS NULL"), 10);
	ASSERT_EQ(dl_sum(&e, "stored_fingerprint IS NOT NULL"), 3);
	/* the rejected one: its repeats are duplicates of its dead record */
	ASSERT_EQ(dl_sum(&e, "key = 'create-invoice:o-neg'"), 1);
	/* no half-rendered key for the missing field */
	ASSERT_EQ(count(e.st, e.dl_tbl, "key = 'create-invoice:'"), 0);
	/* another malformed message is another dead letter */
	ASSERT_OK(process1(c, "{\"id\":\"y\",\"data\":", &r));
	ASSERT_NE(r.dead_letter_id, first[0].dead_letter_id);
	ASSERT_EQ(count(e.st, e.dl_tbl, NULL), 5);
	/* the admin API shows it once, with the count */
	inbox_admin_dead_letter *dl = NULL;
	ASSERT_OK(
	    inbox_admin_dlq_get(e.st, first[0].dead_letter_id, NULL, &dl));
	ASSERT_EQ(dl->deliveries, 5);
	ASSERT_TRUE(dl->last_seen_at_ms >= dl->created_at_ms);
	inbox_admin_dead_letter_free(dl);
	inbox_admin_stats as = INBOX_ADMIN_STATS_INIT;
	ASSERT_OK(
	    inbox_admin_stats_read(e.st, "billing.order-created.v1", &as));
	ASSERT_EQ(as.dead_letters, 5);
	ASSERT_EQ(as.dead_letters_pending, 5);
	/* replay: fails again, counted on the same one, still pending */
	ASSERT_OK(inbox_admin_dlq_replay(e.st, c, first[0].dead_letter_id, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(r.dead_letter_id, first[0].dead_letter_id);
	ASSERT_OK(inbox_admin_dlq_replay(e.st, c, first[2].dead_letter_id, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(r.dead_letter_id, first[2].dead_letter_id);
	ASSERT_EQ(count(e.st, e.dl_tbl, NULL), 5);
	ASSERT_EQ(count(e.st, e.dl_tbl, "replayed_at IS NULL"), 5);
	/* malformed 5 + 1 replay, no key 5, rejected 1 + 1 replay,
	 * conflict 3, the other malformed one 1 */
	ASSERT_EQ(dl_sum(&e, NULL), 6 + 5 + 2 + 3 + 1);
	/* one replayed for good, then seen again: pending again */
	ASSERT_OK(inbox_admin_dlq_mark_replayed(e.st, first[1].dead_letter_id));
	ASSERT_EQ(count(e.st, e.dl_tbl, "replayed_at IS NULL"), 4);
	ASSERT_OK(process1(c, nokey, &r));
	ASSERT_EQ(count(e.st, e.dl_tbl, "replayed_at IS NULL"), 5);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* Four processes deliver the same 60 poison messages (each its own
 * bytes) at the same time, in batches: 60 dead letters, 240 deliveries
 * counted — not one row per delivery. */
static int child_poison(const env *e, int go_fd, int nmsg)
{
	inbox_store *st = open_store(e);
	if (!st)
		return 100;
	hctx h = {.e = e};
	inbox_consumer *c = open_consumer(
	    st, invoice_handler, &h, "create-invoice:{/data/orderId}", NULL);
	if (!c)
		return 101;
	char b;
	if (read(go_fd, &b, 1) != 1)
		return 102;
	static char js[64][64];
	inbox_delivery d[64] = {INBOX_DELIVERY_INIT};
	inbox_result r[64] = {INBOX_RESULT_INIT};
	TEST_RESULTS_INIT(r, 64);
	for (int i = 0; i < nmsg; i++) {
		snprintf(js[i], sizeof(js[i]), "{\"id\":\"p-%d\",\"data\":", i);
		d[i] = delivery(js[i]);
	}
	int rc = 0;
	for (int i = 0; i < nmsg && rc == 0; i += 20)
		rc = inbox_consumer_process_batch(
		    c, d + i, nmsg - i < 20 ? nmsg - i : 20, r + i);
	for (int i = 0; rc == 0 && i < nmsg; i++)
		if (r[i].outcome != INBOX_DEAD_LETTERED)
			rc = -1;
	inbox_consumer_close(c);
	inbox_store_close(st);
	return rc == 0 ? 0 : 103;
}

TEST(dead_letters_idempotent_across_processes)
{
	env e;
	ASSERT_OK(env_setup(&e));
	/* the tables exist before the children race to write them */
	hctx h = {.e = &e};
	inbox_consumer *c0 =
	    open_consumer(e.st, invoice_handler, &h, NULL, NULL);
	ASSERT_TRUE(c0);
	inbox_consumer_close(c0);
	enum { KIDS = 4, MSGS = 60 };
	int go[2];
	ASSERT_OK(pipe(go));
	pid_t kids[KIDS];
	for (int i = 0; i < KIDS; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			close(go[1]);
			_exit(child_poison(&e, go[0], MSGS));
		}
	}
	close(go[0]);
	sleep_ms(200);
	ASSERT_EQ(write(go[1], "xxxx", KIDS), KIDS);
	close(go[1]);
	for (int i = 0; i < KIDS; i++) {
		int status;
		waitpid(kids[i], &status, 0);
		ASSERT_TRUE(WIFEXITED(status));
		ASSERT_EQ(WEXITSTATUS(status), 0);
	}
	ASSERT_EQ(count(e.st, e.dl_tbl, NULL), MSGS);
	ASSERT_EQ(dl_sum(&e, NULL), MSGS * KIDS);
	ASSERT_EQ(count(e.st, e.dl_tbl, "deliveries <> 4"), 0);
	env_teardown(&e);
}

/* ---- a broker's delivery count is not the message's attempts ---- */
TEST(broker_delivery_count_is_not_attempts)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, invoice_handler, &h, NULL, NULL);
	char js[256];
	order_json(js, sizeof(js), "e-dc", "o-dc", 1);
	inbox_delivery d = delivery(js);
	/* delivered 7 times (restarts during an outage, hand-backs): none
	 * of it the message's fault, max_attempts is 3 */
	d.delivery_count = 7;
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_EQ(r.attempts, 1);
	ASSERT_EQ(h.calls, 1);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1);
	ASSERT_STREQ(scalar(e.st, "SELECT attempts FROM %s WHERE key = 'e-dc'",
	                    e.inbox_tbl),
	             "1");
	/* a failing message: its own failures count, not the broker's */
	h.always_retry = 1;
	order_json(js, sizeof(js), "e-dc2", "o-dc2", 1);
	d = delivery(js);
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_RETRY);
	ASSERT_EQ(r.attempts, 1);
	d.delivery_count = 9;
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_RETRY);
	ASSERT_EQ(r.attempts, 2);
	d.delivery_count = 10;
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(r.attempts, 3);
	ASSERT_CONTAINS(r.reason, "max attempts (3) reached");
	/* bad input: dead-lettered at its one attempt */
	d = delivery("{not json");
	d.delivery_count = 6;
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(r.attempts, 1);
	ASSERT_EQ(count(e.st, e.dl_tbl, "attempts = 1"), 1);
	inbox_consumer_close(c);
	env_teardown(&e);
}

static inbox_consumer *open_bounded(inbox_store *st, hctx *h, int max_del)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.order-created.v1";
	o.handler = invoice_handler;
	o.handler_payload = h;
	o.max_attempts = 3;
	o.max_deliveries = max_del;
	o.retention_seconds = 3600;
	return open_with(st, &o);
}

static int deliver(inbox_consumer *c, const char *id, int32_t count,
                   inbox_result *r)
{
	char js[256];
	order_json(js, sizeof(js), id, id, 1);
	inbox_delivery d = delivery(js);
	d.delivery_count = count;
	return inbox_consumer_process(c, &d, r);
}

/* ---- max_deliveries: a message that crashes the process, again ---- */
TEST(max_deliveries_bounds_a_crash_loop)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c = open_bounded(e.st, &h, 4);
	ASSERT_TRUE(c != NULL);
	inbox_result r = INBOX_RESULT_INIT;
	/* never recorded (each delivery killed the process before its
	 * commit), delivered a 5th time: dead-lettered unrun */
	ASSERT_OK(deliver(c, "e-crash", 5, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(h.calls, 0);
	ASSERT_STREQ(r.reason, "delivered 5 times without completing "
	                       "(max_deliveries 4): a crash loop?");
	ASSERT_STREQ(scalar(e.st,
	                    "SELECT attempts || ' ' || reason FROM %s "
	                    "WHERE key = 'e-crash'",
	                    e.dl_tbl),
	             "0 delivered 5 times without completing "
	             "(max_deliveries 4): a crash loop?");
	ASSERT_STREQ(scalar(e.st, "SELECT status FROM %s WHERE key = 'e-crash'",
	                    e.inbox_tbl),
	             "dead");
	ASSERT_OK(deliver(c, "e-crash", 6, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	/* at the bound: run */
	ASSERT_OK(deliver(c, "e-fourth", 4, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_EQ(r.attempts, 1);
	/* a duplicate is never bounded */
	ASSERT_OK(deliver(c, "e-fourth", 1000, &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	/* failed once, then crash-looped: dead with its recorded attempts */
	h.retries_left = 1;
	ASSERT_OK(deliver(c, "e-failed", 1, &r));
	ASSERT_EQ(r.outcome, INBOX_RETRY);
	ASSERT_OK(deliver(c, "e-failed", 5, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_EQ(r.attempts, 1);
	ASSERT_CONTAINS(r.reason, "delivered 5 times without completing");
	ASSERT_EQ(h.calls, 2);
	ASSERT_EQ(count(e.st, e.invoices, NULL), 1); /* e-fourth only */
	inbox_consumer_close(c);

	/* the default: 10 x max_attempts, at least 20 (here 30) */
	c = open_bounded(e.st, &h, 0);
	ASSERT_TRUE(c != NULL);
	ASSERT_OK(deliver(c, "e-30", 30, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	ASSERT_OK(deliver(c, "e-31", 31, &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_CONTAINS(r.reason, "(max_deliveries 30)");
	inbox_consumer_close(c);
	/* no bound */
	c = open_bounded(e.st, &h, -1);
	ASSERT_TRUE(c != NULL);
	ASSERT_OK(deliver(c, "e-many", 100000, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	inbox_consumer_close(c);
	/* below max_attempts: refused */
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.order-created.v1";
	o.max_attempts = 3;
	o.max_deliveries = 2;
	char err[256] = "";
	c = NULL;
	ASSERT_EQ(inbox_consumer_open(&c, e.st, &o, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(c == NULL);
	ASSERT_CONTAINS(err, "max_deliveries (2) must be at least "
	                     "max_attempts (3)");
	env_teardown(&e);
}

/* A handler that ignores a failed statement and returns OK: the message is
 * retried, never recorded as applied with its effect half written. */
static int careless_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	hctx *h = p;
	(void)m;
	h->calls++;
	char q[256];
	snprintf(q, sizeof(q), "INSERT INTO %s (order_id) VALUES ('x')",
	         h->e->invoices);
	inbox_txn_exec(t, q, 0, NULL, NULL);
	inbox_txn_exec(t, "INSERT INTO no_such_table VALUES (1)", 0, NULL,
	               NULL);
	return INBOX_HANDLER_OK;
}

TEST(handler_statement_failure_is_retry)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e};
	inbox_consumer *c =
	    open_consumer(e.st, careless_handler, &h, NULL, NULL);
	ASSERT_TRUE(c);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(process1(c, "{\"id\":\"careless\"}", &r));
	ASSERT_EQ(r.outcome, INBOX_RETRY);
	ASSERT_EQ(r.attempts, 1);
	ASSERT_CONTAINS(r.reason, "a statement failed");
	ASSERT_EQ(count(e.st, e.invoices, NULL), 0); /* rolled back */
	ASSERT_STREQ(scalar(e.st, "SELECT status FROM %s", e.inbox_tbl),
	             "failed");
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(no_handler_deduplicates_only)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_consumer *c = open_consumer(e.st, NULL, NULL, NULL, NULL);
	ASSERT_TRUE(c);
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(process1(c, "{\"id\":\"nohandler\"}", &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED); /* dedup only, no handler */
	ASSERT_OK(process1(c, "{\"id\":\"nohandler\"}", &r));
	ASSERT_EQ(r.outcome, INBOX_DUPLICATE);
	ASSERT_OK(process1(c, "{\"data\":{}}", &r));
	ASSERT_EQ(r.outcome, INBOX_DEAD_LETTERED);
	ASSERT_CONTAINS(r.reason, "missing message id (/id)");
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* A statement the server refuses, in the middle of a batch: only its
 * message fails, with the database's reason, and a later message of the
 * batch reading its own write sees it. (PostgreSQL sends a batch's
 * handler statements together and learns of the failure late; the
 * outcome must be the same as statement by statement.) */
typedef struct uctx {
	const env *e;
	char table[96];
	int calls, blind;
} uctx;

static int unique_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	uctx *u = p;
	const char *order = NULL;
	char q[256];
	u->calls++;
	if (inbox_msg_get(m, "/data/orderId", &order) != 0)
		return INBOX_HANDLER_REJECT;
	snprintf(q, sizeof(q), "INSERT INTO %s (order_id) VALUES ($1)",
	         u->table);
	if (inbox_txn_exec(t, q, 1, &order, NULL) != 0) {
		const char *code = inbox_store_errcode(inbox_txn_store(t));
		inbox_txn_set_reason(t, inbox_store_errmsg(inbox_txn_store(t)));
		return strncmp(code, "23", 2) == 0 ||
		               strncmp(code, "SQLITE_CONSTRAINT", 17) == 0
		           ? INBOX_HANDLER_REJECT
		           : INBOX_HANDLER_RETRY;
	}
	if (strcmp(order, "u-4") == 0) {
		char seen[256] = "";
		snprintf(q, sizeof(q),
		         "SELECT count(*) FROM %s WHERE order_id = $1",
		         u->table);
		if (inbox_txn_query(t, q, 1, &order, first_col, seen) != 0)
			return INBOX_HANDLER_RETRY;
		if (strcmp(seen, "1") != 0)
			u->blind++;
	}
	return INBOX_HANDLER_OK;
}

TEST(statement_failure_inside_a_batch)
{
	env e;
	ASSERT_OK(env_setup(&e));
	uctx u = {.e = &e};
	snprintf(u.table, sizeof(u.table), "\"%suniq\"", e.prefix);
	ASSERT_OK(
	    sql(e.st, "CREATE TABLE %s (order_id TEXT PRIMARY KEY)", u.table));
	ASSERT_OK(sql(e.st, "INSERT INTO %s VALUES ('u-3')", u.table));
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "conformance.unique";
	o.handler = unique_handler;
	o.handler_payload = &u;
	inbox_consumer *c = NULL;
	ASSERT_OK(inbox_consumer_open(&c, e.st, &o, NULL, 0));
	char js[5][256];
	inbox_delivery d[5] = {INBOX_DELIVERY_INIT};
	inbox_result r[5] = {INBOX_RESULT_INIT};
	for (int i = 0; i < 5; i++) {
		char id[16];
		snprintf(id, sizeof(id), "u-%d", i + 1);
		order_json(js[i], 256, id, id, 10 * (i + 1));
		d[i] = delivery(js[i]);
	}
	ASSERT_OK(inbox_consumer_process_batch(c, d, 5, r));
	for (int i = 0; i < 5; i++)
		if (i != 2)
			ASSERT_EQ(r[i].outcome, INBOX_APPLIED);
	ASSERT_EQ(r[2].outcome, INBOX_DEAD_LETTERED);
	ASSERT_TRUE(r[2].reason != NULL);
	ASSERT_EQ(u.blind, 0);
	ASSERT_EQ(count(e.st, u.table, NULL), 5);
	ASSERT_EQ(count(e.st, e.dl_tbl, NULL), 1);
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &s);
	ASSERT_EQ(s.applied, 4);
	ASSERT_EQ(s.dead_letters, 1);
	ASSERT_EQ(s.transient_retries, 0);
	/* the same batch again: all settled, the handler not called */
	int calls = u.calls;
	ASSERT_OK(inbox_consumer_process_batch(c, d, 5, r));
	for (int i = 0; i < 5; i++)
		ASSERT_EQ(r[i].outcome, INBOX_DUPLICATE);
	ASSERT_EQ(u.calls, calls);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* Many statements in one batch, of many different texts: more than a
 * store may keep queued or prepared at once (PostgreSQL sends its queue
 * early and recycles its statement cache), all in one transaction. */
static int many_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	const uctx *u = p;
	const char *order = NULL;
	if (inbox_msg_get(m, "/data/orderId", &order) != 0)
		return INBOX_HANDLER_REJECT;
	int n = atoi(order + 2);
	for (int k = 0; k < 3; k++) {
		char q[256];
		snprintf(q, sizeof(q),
		         "INSERT INTO %s (order_id) VALUES ($1 || '/%d') -- %d",
		         u->table, k, (n + k) % 37);
		if (inbox_txn_exec(t, q, 1, &order, NULL) != 0)
			return INBOX_HANDLER_RETRY;
	}
	return INBOX_HANDLER_OK;
}

TEST(many_statements_in_a_batch)
{
	env e;
	ASSERT_OK(env_setup(&e));
	uctx u = {.e = &e};
	snprintf(u.table, sizeof(u.table), "\"%smany\"", e.prefix);
	ASSERT_OK(
	    sql(e.st, "CREATE TABLE %s (order_id TEXT PRIMARY KEY)", u.table));
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "conformance.many";
	o.handler = many_handler;
	o.handler_payload = &u;
	inbox_consumer *c = NULL;
	ASSERT_OK(inbox_consumer_open(&c, e.st, &o, NULL, 0));
	enum { N = 400 };
	static char js[N][128];
	static inbox_delivery d[N] = {INBOX_DELIVERY_INIT};
	static inbox_result r[N];
	TEST_RESULTS_INIT(r, N);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++) {
			char id[16];
			snprintf(id, sizeof(id), "m-%d", round * N + i);
			order_json(js[i], sizeof(js[i]), id, id, i);
			d[i] = delivery(js[i]);
		}
		ASSERT_OK(inbox_consumer_process_batch(c, d, N, r));
		for (int i = 0; i < N; i++)
			ASSERT_EQ(r[i].outcome, INBOX_APPLIED);
	}
	ASSERT_EQ(count(e.st, u.table, NULL), 2 * N * 3);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(invalid_options_are_refused)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	inbox_consumer *c = NULL;
	char err[256];
	o.name = "bad name";
	ASSERT_EQ(inbox_consumer_open(&c, e.st, &o, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	o.name = "ok";
	o.key_template = "x:{data/orderId}";
	ASSERT_EQ(inbox_consumer_open(&c, e.st, &o, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(err[0] != '\0');
	o.key_template = NULL;
	o.fingerprint_pointer = "data";
	ASSERT_EQ(inbox_consumer_open(&c, e.st, &o, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "fingerprint");
	ASSERT_TRUE(c == NULL);
	o.fingerprint_pointer = NULL;
	o.max_attempts = 0;
	ASSERT_EQ(inbox_consumer_open(&c, e.st, &o, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "max_attempts");
	o.max_attempts = 3;
	o.replay_policy = (inbox_replay_policy)7;
	ASSERT_EQ(inbox_consumer_open(&c, e.st, &o, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "replay_policy");
	o.replay_policy = INBOX_REPLAY_APPLY;
	ASSERT_EQ(inbox_consumer_open(&c, NULL, &o, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "store");
	ASSERT_EQ(inbox_consumer_open(&c, e.st, NULL, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_consumer_open(NULL, e.st, &o, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "out");
	ASSERT_TRUE(c == NULL);
	/* the options are fine now: the consumer opens */
	ASSERT_OK(inbox_consumer_open(&c, e.st, &o, NULL, 0));
	inbox_result r = INBOX_RESULT_INIT;
	inbox_delivery d = delivery("{\"id\":\"x\"}");
	ASSERT_EQ(inbox_consumer_process_batch(NULL, &d, 1, &r),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_consumer_process_batch(c, NULL, 1, &r),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_consumer_process_batch(c, &d, 1, NULL),
	          INBOX_ERR_INVALID);
	/* inside a transaction of the caller's: refused, nothing done */
	ASSERT_OK(e.st->vt->begin(e.st));
	ASSERT_EQ(inbox_consumer_process_batch(c, &d, 1, &r), INBOX_ERR_STATE);
	e.st->vt->rollback(e.st);
	ASSERT_OK(inbox_consumer_process_batch(c, &d, 1, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED); /* nothing recorded before */
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(unmigrated_store_is_refused_by_consumers)
{
	char prefix[48];
	snprintf(prefix, sizeof(prefix), "u%d_%d_", (int)getpid(), ++test_seq);
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = prefix;
	so.auto_migrate = 0;
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, URL, &so));
	int v = -1;
	ASSERT_OK(inbox_store_schema_version(st, &v));
	ASSERT_EQ(v, 0);
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.order-created.v1";
	inbox_consumer *c = NULL;
	char err[256];
	ASSERT_EQ(inbox_consumer_open(&c, st, &o, err, sizeof(err)),
	          INBOX_ERR_SCHEMA);
	ASSERT_CONTAINS(err, "inbox migrate");
	ASSERT_OK(inbox_store_migrate(st));
	ASSERT_OK(inbox_consumer_open(&c, st, &o, err, sizeof(err)));
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* ---- the vtable's version-6 slots (setup SQL, statement check, the
 * admin dialect, registration) ---- */

TEST(setup_sql_runs_and_reports_errors)
{
	env e;
	ASSERT_OK(env_setup(&e));
	char q[512];
	/* several statements in one text, run for real */
	snprintf(q, sizeof(q),
	         "CREATE TABLE IF NOT EXISTS \"%ssetup\" (id TEXT);"
	         " INSERT INTO \"%ssetup\" VALUES ('a');"
	         " INSERT INTO \"%ssetup\" VALUES ('b')",
	         e.prefix, e.prefix, e.prefix);
	ASSERT_OK(inbox_store_exec_setup(e.st, q));
	char t[96];
	snprintf(t, sizeof(t), "\"%ssetup\"", e.prefix);
	ASSERT_EQ(count(e.st, t, NULL), 2);
	/* the SQL's fault: STORE, the database's words on the handle */
	snprintf(q, sizeof(q), "INSERT INTO \"%snowhere\" VALUES (1)",
	         e.prefix);
	ASSERT_EQ(inbox_store_exec_setup(e.st, q), INBOX_ERR_STORE);
	ASSERT_CONTAINS(inbox_store_errmsg(e.st), "nowhere");
	/* the handle is still usable (no transaction left open) */
	ASSERT_EQ(count(e.st, t, NULL), 2);
	ASSERT_EQ(inbox_store_exec_setup(NULL, q), INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_store_exec_setup(e.st, NULL), INBOX_ERR_INVALID);
	/* inside a transaction: refused, nothing run */
	ASSERT_OK(e.st->vt->begin(e.st));
	e.st->in_txn = 1;
	snprintf(q, sizeof(q), "INSERT INTO \"%ssetup\" VALUES ('c')",
	         e.prefix);
	ASSERT_EQ(inbox_store_exec_setup(e.st, q), INBOX_ERR_STATE);
	ASSERT_EQ(inbox_store_check_sql(e.st, q, NULL), INBOX_ERR_STATE);
	e.st->vt->rollback(e.st);
	e.st->in_txn = 0;
	ASSERT_EQ(count(e.st, t, NULL), 2);
	env_teardown(&e);
}

/* Daemons starting together run the same CREATE ... IF NOT EXISTS: every
 * one succeeds (PostgreSQL alone can fail one of two concurrent creates
 * on its catalog's unique index). */
TEST(setup_sql_of_processes_starting_together)
{
	env e;
	ASSERT_OK(env_setup(&e));
	for (int round = 0; round < 4; round++) {
		char q[512];
		snprintf(q, sizeof(q),
		         "CREATE TABLE IF NOT EXISTS \"%sboot%d\" (id TEXT"
		         " PRIMARY KEY, n BIGINT);"
		         " CREATE INDEX IF NOT EXISTS \"%sboot%d_n\" ON"
		         " \"%sboot%d\" (n)",
		         e.prefix, round, e.prefix, round, e.prefix, round);
		pid_t kids[4];
		for (int i = 0; i < 4; i++) {
			kids[i] = fork();
			if (kids[i] == 0) {
				inbox_store *st = open_store(&e);
				int rc =
				    st ? inbox_store_exec_setup(st, q) : -1;
				if (rc != 0)
					fprintf(stderr, "setup %d: %s\n", rc,
					        st ? inbox_store_errmsg(st)
					           : "no store");
				inbox_store_close(st);
				_exit(rc == 0 ? 0 : 1);
			}
		}
		int bad = 0;
		for (int i = 0; i < 4; i++) {
			int status = 0;
			if (kids[i] < 0 || waitpid(kids[i], &status, 0) < 0 ||
			    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
				bad++;
		}
		ASSERT_EQ(bad, 0);
	}
	env_teardown(&e);
}

TEST(check_sql_prepares_without_running)
{
	env e;
	ASSERT_OK(env_setup(&e));
	char q[512];
	int np = -1;
	snprintf(q, sizeof(q),
	         "INSERT INTO %s (order_id, total) VALUES ($1, $2)",
	         e.invoices);
	ASSERT_OK(inbox_store_check_sql(e.st, q, &np));
	ASSERT_EQ(np, 2);
	ASSERT_OK(inbox_store_check_sql(e.st, q, NULL));
	ASSERT_EQ(count(e.st, e.invoices, NULL), 0); /* prepared, not run */
	snprintf(q, sizeof(q), "SELECT 1 FROM %s", e.invoices);
	ASSERT_OK(inbox_store_check_sql(e.st, q, &np));
	ASSERT_EQ(np, 0);
	/* refused: an unknown table, bad syntax */
	snprintf(q, sizeof(q), "INSERT INTO \"%sinvoicez\" VALUES ($1)",
	         e.prefix);
	np = 7;
	ASSERT_EQ(inbox_store_check_sql(e.st, q, &np), INBOX_ERR_STORE);
	ASSERT_EQ(np, 0);
	ASSERT_CONTAINS(inbox_store_errmsg(e.st), "invoicez");
	ASSERT_EQ(inbox_store_check_sql(e.st, "SELEC 1", NULL),
	          INBOX_ERR_STORE);
	ASSERT_TRUE(inbox_store_errmsg(e.st)[0] != '\0');
	/* the handle goes on */
	ASSERT_OK(inbox_store_check_sql(e.st, "SELECT 1", NULL));
	ASSERT_EQ(inbox_store_check_sql(e.st, NULL, NULL), INBOX_ERR_INVALID);
	env_teardown(&e);
}

/* The expression e with arg, through the backend, into out. */
static int spell(inbox_store *st, inbox_sql_expr e, const char *arg, char *out,
                 size_t len)
{
	return st->vt->sql_expr(st, e, arg, out, len);
}

TEST(admin_dialect_spells_every_expression)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_store *st = e.st;
	ASSERT_TRUE(st->vt->version >= 6 && st->vt->sql_expr);
	char ex[256], q[1024], small[2];
	for (int x = INBOX_SQL_NOW_MS; x <= INBOX_SQL_LEN; x++) {
		int n = spell(st, (inbox_sql_expr)x, "1", ex, sizeof(ex));
		ASSERT_TRUE(n > 0 && (size_t)n < sizeof(ex));
		/* snprintf's contract: the length needed, cut and ended */
		ASSERT_EQ(
		    spell(st, (inbox_sql_expr)x, "1", small, sizeof(small)), n);
		ASSERT_EQ(strlen(small), 1);
	}
	ASSERT_TRUE(spell(st, (inbox_sql_expr)999, NULL, ex, sizeof(ex)) < 0);
	/* Each one means what it says. {now} is the store's clock. */
	spell(st, INBOX_SQL_NOW_MS, NULL, ex, sizeof(ex));
	snprintf(q, sizeof(q), "SELECT %s", ex);
	int64_t db_now = atoll(scalar(st, "%s", q)), here = wall_ms();
	ASSERT_TRUE(db_now > here - 60000 && db_now < here + 60000);
	/* A parameter as an integer, compared with an integer. */
	spell(st, INBOX_SQL_INT_PARAM, "1", ex, sizeof(ex));
	snprintf(q, sizeof(q), "SELECT %s + 1", ex);
	char got[256] = "";
	const char *p[1] = {"41"};
	ASSERT_OK(inbox_store_query(st, q, 1, p, first_col, got));
	ASSERT_STREQ(got, "42");
	/* A timestamp written now, read back in ms, is after the cutoff of
	 * an hour and before the cutoff of -1 hour. */
	char tbl[96], ts[128], ms[256], cut[256];
	snprintf(tbl, sizeof(tbl), "\"%sts\"", e.prefix);
	ASSERT_OK(sql(st, "CREATE TABLE %s (t %s, b %s)", tbl,
	              is_pg ? "timestamptz" : "INTEGER",
	              is_pg ? "bytea" : "BLOB"));
	spell(st, INBOX_SQL_NOW_TS, NULL, ts, sizeof(ts));
	snprintf(q, sizeof(q), "INSERT INTO %s (t) VALUES (%s)", tbl, ts);
	ASSERT_OK(inbox_store_exec(st, q, 0, NULL, NULL));
	spell(st, INBOX_SQL_MS, "t", ms, sizeof(ms));
	int64_t t_ms = atoll(scalar(st, "SELECT %s FROM %s", ms, tbl));
	here = wall_ms();
	ASSERT_TRUE(t_ms > here - 60000 && t_ms <= here + 60000);
	spell(st, INBOX_SQL_CUTOFF, "1", cut, sizeof(cut));
	snprintf(q, sizeof(q), "SELECT count(*) FROM %s WHERE t > %s", tbl,
	         cut);
	p[0] = "3600";
	ASSERT_OK(inbox_store_query(st, q, 1, p, first_col, got));
	ASSERT_STREQ(got, "1");
	p[0] = "-3600";
	ASSERT_OK(inbox_store_query(st, q, 1, p, first_col, got));
	ASSERT_STREQ(got, "0");
	/* A binary column: hex (lower case) and length in bytes, NUL
	 * included. */
	ASSERT_OK(sql(st, "UPDATE %s SET b = %s", tbl,
	              is_pg ? "'\\x00ff41'::bytea" : "X'00FF41'"));
	char hx[128], ln[128];
	spell(st, INBOX_SQL_HEX, "b", hx, sizeof(hx));
	spell(st, INBOX_SQL_LEN, "b", ln, sizeof(ln));
	snprintf(q, sizeof(q), "SELECT lower(%s) FROM %s", hx, tbl);
	ASSERT_STREQ(scalar(st, "%s", q), "00ff41");
	snprintf(q, sizeof(q), "SELECT %s FROM %s", ln, tbl);
	ASSERT_STREQ(scalar(st, "%s", q), "3");
	env_teardown(&e);
}

/* The admin API reads outside transactions only: inside one (the
 * caller's), a read would see its uncommitted rows, or wait on them. */
TEST(admin_reads_refuse_an_open_transaction)
{
	env e;
	ASSERT_OK(env_setup(&e));
	inbox_admin_stats as = INBOX_ADMIN_STATS_INIT;
	inbox_admin_generations g = INBOX_ADMIN_GENERATIONS_INIT;
	ASSERT_OK(inbox_admin_stats_read(e.st, "c", &as));
	ASSERT_OK(e.st->vt->begin(e.st));
	ASSERT_TRUE(e.st->in_txn);
	ASSERT_EQ(inbox_admin_stats_read(e.st, "c", &as), INBOX_ERR_STATE);
	ASSERT_EQ(inbox_admin_generations_read(e.st, &g), INBOX_ERR_STATE);
	e.st->vt->rollback(e.st);
	ASSERT_OK(inbox_admin_stats_read(e.st, "c", &as));
	env_teardown(&e);
}

static int dummy_open(inbox_store **out, const char *url,
                      const inbox_store_options *o)
{
	(void)url;
	(void)o;
	*out = NULL;
	return INBOX_ERR_URL;
}

/* What registration accepts, and what an older backend gets from the
 * admin API: a refusal, never another store's dialect. */
TEST(registration_checks_what_a_vtable_claims)
{
	env e;
	ASSERT_OK(env_setup(&e));
	const inbox_store_vtable *real = e.st->vt;
	static inbox_store_vtable v6, v5, future, taken;
	v6 = *real;
	v6.scheme = is_pg ? "conf-pg-v6" : "conf-sq-v6";
	v6.alias = NULL;
	v6.open = dummy_open;
	v6.sql_expr = NULL; /* claims version 6 without its slots */
	ASSERT_EQ(inbox_store_register(&v6), INBOX_ERR_INVALID);
	v6.sql_expr = real->sql_expr;
	v6.check_sql = NULL;
	ASSERT_EQ(inbox_store_register(&v6), INBOX_ERR_INVALID);
	v6.check_sql = real->check_sql;
	v6.exec_setup = NULL;
	ASSERT_EQ(inbox_store_register(&v6), INBOX_ERR_INVALID);
	future = *real;
	future.scheme = "conf-future";
	future.alias = NULL;
	future.version = INBOX_STORE_VTABLE_VERSION + 1;
	ASSERT_EQ(inbox_store_register(&future), INBOX_ERR_INVALID);
	/* a scheme or an alias already taken */
	taken = *real;
	taken.alias = NULL;
	ASSERT_EQ(inbox_store_register(&taken), INBOX_ERR_INVALID);
	if (is_pg) {
		taken.scheme = "conf-taken";
		taken.alias = "postgres";
		ASSERT_EQ(inbox_store_register(&taken), INBOX_ERR_INVALID);
	}
	/* Version 5: registers (its struct may end before the version-6
	 * fields, which are then never read), and is listed. */
	v5 = *real;
	v5.version = 5;
	v5.open = dummy_open;
	v5.scheme = is_pg ? "conf-pg-v5" : "conf-sq-v5";
	v5.sql_expr = NULL;
	v5.exec_setup = NULL;
	v5.check_sql = NULL;
	v5.native_type = NULL;
	ASSERT_OK(inbox_store_register(&v5));
	int listed = 0;
	for (size_t i = 0; inbox_store_scheme(i); i++)
		listed += strcmp(inbox_store_scheme(i), v5.scheme) == 0;
	ASSERT_EQ(listed, 1);
	char url[64];
	snprintf(url, sizeof(url), "%s:x", v5.scheme);
	ASSERT_EQ(inbox_store_known_url(url), 1);
	ASSERT_EQ(inbox_store_known_url("conf-nothing:x"), 0);
	/* a database private to its connection: the backend says so */
	ASSERT_EQ(inbox_store_url_private(URL), 0);
	ASSERT_EQ(inbox_store_url_private("sqlite::memory:"), 1);
	ASSERT_EQ(inbox_store_url_private("sqlite::memory:?sync=off"), 1);
	ASSERT_EQ(inbox_store_url_private("sqlite:/tmp/memory.db"), 0);
	ASSERT_EQ(inbox_store_url_private("postgresql://h/db"), 0);
	ASSERT_EQ(inbox_store_url_private("conf-nothing::memory:"), 0);
	ASSERT_EQ(inbox_store_url_private(NULL), 0);
	ASSERT_EQ(inbox_store_known_url(is_pg ? "postgres://h/db" : "sqlite:x"),
	          1);
	/* A handle of the older backend (the real connection behind it):
	 * the admin API and the operator's SQL refuse it. */
	e.st->vt = &v5;
	inbox_admin_stats as = INBOX_ADMIN_STATS_INIT;
	ASSERT_EQ(inbox_admin_stats_read(e.st, "x", &as), INBOX_ERR_STATE);
	ASSERT_CONTAINS(inbox_store_errmsg(e.st), "version 5");
	inbox_admin_record *r = NULL;
	ASSERT_EQ(inbox_admin_inspect(e.st, "x", "k", &r), INBOX_ERR_STATE);
	ASSERT_EQ(inbox_store_exec_setup(e.st, "SELECT 1"), INBOX_ERR_STATE);
	ASSERT_EQ(inbox_store_check_sql(e.st, "SELECT 1", NULL),
	          INBOX_ERR_STATE);
	e.st->vt = real;
	ASSERT_OK(inbox_admin_stats_read(e.st, "x", &as));
	env_teardown(&e);
}

/* inbox_claim as store vtable 7 laid it out (before the position): what
 * a backend built against it steps through. */
typedef struct claim_v7_layout {
	const char *key;
	const char *fingerprint;
	const char *message_id;
	int is_new;
	inbox_status status;
	char stored_fingerprint[65];
	int32_t attempts;
	int64_t fence;
	int lease_expired;
	void *result;
	size_t result_len;
	char *result_type;
	inbox_outcome first_outcome;
} claim_v7_layout;

static const inbox_store_vtable *v7_real;
static size_t v7_claimed;
static int v7_garbled;

/* A version-7 backend's claim: it reads the array at its own stride,
 * and runs the real claim on a copy in this library's layout. */
static int v7_claim(inbox_store *st, const char *consumer, inbox_claim *claims,
                    size_t n, inbox_status status, int64_t lease_ms)
{
	claim_v7_layout *old = (claim_v7_layout *)(void *)claims;
	inbox_claim *cur = calloc(n ? n : 1, sizeof(*cur));
	if (!cur)
		return INBOX_ERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		v7_garbled |= !old[i].key || !old[i].fingerprint ||
		              strlen(old[i].fingerprint) != 64;
		cur[i].key = old[i].key;
		cur[i].fingerprint = old[i].fingerprint;
		cur[i].message_id = old[i].message_id;
	}
	int rc = v7_garbled
	             ? INBOX_ERR_INVALID
	             : v7_real->claim(st, consumer, cur, n, status, lease_ms);
	for (size_t i = 0; i < n; i++) {
		old[i].is_new = cur[i].is_new;
		old[i].status = cur[i].status;
		memcpy(old[i].stored_fingerprint, cur[i].stored_fingerprint,
		       sizeof(old[i].stored_fingerprint));
		old[i].attempts = cur[i].attempts;
		old[i].fence = cur[i].fence;
		old[i].lease_expired = cur[i].lease_expired;
		old[i].result = cur[i].result;
		old[i].result_len = cur[i].result_len;
		old[i].result_type = cur[i].result_type;
		old[i].first_outcome = cur[i].first_outcome;
	}
	v7_claimed += n;
	free(cur);
	return rc;
}

static int v7_result_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	(void)p;
	const char *id = inbox_msg_id(m);
	return inbox_txn_set_result(t, "text/plain", id, strlen(id)) == 0
	           ? INBOX_HANDLER_OK
	           : INBOX_HANDLER_RETRY;
}

/* A backend of vtable version 7 (inbox_claim without the position) is
 * handed claims in its own layout: a batch is claimed key by key as
 * written, the stored results come back, and its records have no
 * position (the backend knows none). */
TEST(claims_for_a_version_7_backend)
{
	env e;
	ASSERT_OK(env_setup(&e));
	static inbox_store_vtable v7;
	v7_real = e.st->vt;
	v7 = *v7_real;
	v7.version = 7;
	v7.claim = v7_claim;
	e.st->vt = &v7;
	v7_claimed = 0;
	v7_garbled = 0;
	inbox_consumer *c =
	    open_consumer(e.st, v7_result_handler, NULL, NULL, NULL);
	ASSERT_TRUE(c);
	char js[4][256];
	inbox_delivery d[4];
	inbox_result r[4] = {INBOX_RESULT_INIT, INBOX_RESULT_INIT,
	                     INBOX_RESULT_INIT, INBOX_RESULT_INIT};
	for (int i = 0; i < 4; i++) {
		char id[16];
		snprintf(id, sizeof(id), "v7-%d", i);
		order_json(js[i], sizeof(js[i]), id, id, 100 + i);
		d[i] = delivery(js[i]);
	}
	ASSERT_OK(inbox_consumer_process_batch(c, d, 4, r));
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(r[i].outcome, INBOX_APPLIED);
	ASSERT_OK(inbox_consumer_process_batch(c, d, 4, r));
	for (int i = 0; i < 4; i++) {
		char id[16];
		snprintf(id, sizeof(id), "v7-%d", i);
		ASSERT_EQ(r[i].outcome, INBOX_DUPLICATE);
		ASSERT_EQ(r[i].first_outcome, INBOX_APPLIED);
		ASSERT_EQ(r[i].result_len, strlen(id));
		ASSERT_TRUE(r[i].result &&
		            !memcmp(r[i].result, id, strlen(id)));
		ASSERT_STREQ(r[i].result_type, "text/plain");
	}
	ASSERT_EQ(v7_garbled, 0);
	ASSERT_EQ(v7_claimed, 8);
	inbox_consumer_close(c);
	e.st->vt = v7_real;
	inbox_admin_record *rec = NULL;
	ASSERT_OK(inbox_admin_inspect(e.st, "billing.order-created.v1", "v7-2",
	                              &rec));
	ASSERT_TRUE(rec->position == NULL);
	inbox_admin_record_free(rec);
	env_teardown(&e);
}

/* Stored results: their own cases, in their own file. */
#include "results.c"
/* Stored results under leases: their own file. */
#include "lease_results.c"
/* the cases at the vtable (the store slots) */
#include "store_slots.c"
/* the on_handlers option */
#include "hook.c"

int main(int argc, char **argv)
{
	URL = argc > 1 ? argv[1] : getenv("INBOX_TEST_STORE_URL");
	if (!URL || !*URL) {
		fprintf(stderr, "usage: conformance STORE_URL\n");
		printf("0 passed, 1 failed\n");
		return 1;
	}
	is_pg = strncmp(URL, "postgres", 8) == 0;
	char *shown = inbox_redact_url(URL);
	printf("store conformance against %s\n", shown ? shown : "?");
	free(shown);
	RUN(same_message_twice);
	RUN(two_deliveries_at_once);
	RUN(crash_after_commit_before_ack);
	RUN(transient_error_then_max_attempts);
	RUN(same_key_different_payload);
	RUN(out_of_order_versions);
	RUN(replay_after_retention);
	RUN(retention_window_is_a_promise);
	RUN(purge_in_bounded_batches);
	RUN(lease_expires_and_is_taken_over);
	RUN(lease_fail_then_retry);
	RUN(slot_lease_and_fence);
	RUN(slot_reclaim_failed);
	RUN(saga_step_advances_once);
	RUN(business_key_merges_ids);
	RUN(batch_with_failures_commits_the_rest);
	RUN(overlapping_batches_opposite_order);
	RUN(bad_input_is_dead_lettered);
	RUN(nul_in_an_id_is_never_cut);
	RUN(nul_in_a_value_is_never_cut);
	RUN(refused_and_keyless_deliveries);
	RUN(dead_letters_are_idempotent);
	RUN(dead_letters_idempotent_across_processes);
	RUN(broker_delivery_count_is_not_attempts);
	RUN(max_deliveries_bounds_a_crash_loop);
	RUN(handler_statement_failure_is_retry);
	RUN(no_handler_deduplicates_only);
	RUN(statement_failure_inside_a_batch);
	RUN(many_statements_in_a_batch);
	RUN(invalid_options_are_refused);
	RUN(unmigrated_store_is_refused_by_consumers);
	RUN(setup_sql_runs_and_reports_errors);
	RUN(setup_sql_of_processes_starting_together);
	RUN(check_sql_prepares_without_running);
	RUN(admin_dialect_spells_every_expression);
	RUN(admin_reads_refuse_an_open_transaction);
	RUN(registration_checks_what_a_vtable_claims);
	RUN(claims_for_a_version_7_backend);
	RUN(on_handlers_lists_exactly_the_handled);
	run_result_cases();
	run_lease_result_cases();
	/* store_slots.c */
	RUN(slot_stored_retention);
	RUN(slot_claim_new_and_duplicate);
	RUN(slot_savepoints);
	RUN(slot_dead_letter_payload);
	RUN(slot_dead_letter_dedup);
	RUN(slot_purge_batches);
	RUN(slot_client_version);
	RUN(slot_upgrade_from_v4_results);
	RUN(slot_upgrade_from_v5_positions);
	return test_summary();
}
