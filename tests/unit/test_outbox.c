/*
 * The outbox and its dispatcher, against SQLite and PostgreSQL
 * (INBOX_TEST_PG_URL; unset is a failure, not a skip), with the test
 * provider (tests/tools/provider.c) playing the payment and email APIs.
 * The provider is found next to this binary (integration/outbox/) or
 * through INBOX_TEST_PROVIDER.
 *
 * Each test gets its own table prefix; PostgreSQL tables are dropped at
 * the end of each test.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <inbox/inbox.h>
#include <inbox/outbox.h>
#include <inbox/sys/store.h>

#include "../clock.h"
#include "test.h"

static const char *URL;
static int is_pg;
static int seq;
static char provider_path[4096];
static pid_t provider_pid;
static int provider_port;

/* ---- the provider ------------------------------------------------- */

static int find_provider(void)
{
	const char *env = getenv("INBOX_TEST_PROVIDER");
	if (env && *env) {
		snprintf(provider_path, sizeof(provider_path), "%s", env);
		return access(provider_path, X_OK);
	}
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	snprintf(provider_path, sizeof(provider_path),
	         "%s/integration/outbox/inbox-test-provider", self);
	return access(provider_path, X_OK);
}

static int start_provider(void)
{
	int fd[2];
	if (pipe(fd) < 0)
		return -1;
	provider_pid = fork();
	if (provider_pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		execl(provider_path, provider_path, "--slow-ms", "1500",
		      "--seed", "7", (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	char buf[64] = "";
	size_t got = 0;
	while (got < sizeof(buf) - 1 && !strchr(buf, '\n')) {
		ssize_t r = read(fd[0], buf + got, sizeof(buf) - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		buf[got] = '\0';
	}
	close(fd[0]);
	if (sscanf(buf, "port=%d", &provider_port) != 1)
		return -1;
	return 0;
}

static void stop_provider(void)
{
	if (provider_pid > 0) {
		kill(provider_pid, SIGTERM);
		waitpid(provider_pid, NULL, 0);
		provider_pid = 0;
	}
}

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	size_t len = size * n, *used = arg;
	char *buf = (char *)(used + 1);
	size_t room = 16384 - sizeof(size_t) - *used - 1;
	if (len < room)
		room = len;
	memcpy(buf + *used, p, room);
	*used += room;
	buf[*used] = '\0';
	return len;
}

/* An HTTP request to the provider; the body of the answer in a static
 * buffer, the status in *status. */
static const char *http(const char *method, const char *path, const char *key,
                        const char *body, long *status)
{
	static union {
		size_t used;
		char raw[16384];
	} out;
	char url[256];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", provider_port,
	         path);
	out.used = 0;
	out.raw[sizeof(size_t)] = '\0';
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	char kh[128];
	if (key) {
		snprintf(kh, sizeof(kh), "Idempotency-Key: %s", key);
		h = curl_slist_append(h, kh);
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &out.used);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
	}
	long st = 0;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	if (status)
		*status = st;
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return out.raw + sizeof(size_t);
}

static void fault(const char *path, const char *kind, int count)
{
	char q[128];
	snprintf(q, sizeof(q), "/control/fault?path=%s&kind=%s&count=%d", path,
	         kind, count);
	http("POST", q, NULL, "", NULL);
}

/* A counter of GET /stats, "pay.charges" style. */
static long stat(const char *dotted)
{
	const char *js = http("GET", "/stats", NULL, NULL, NULL);
	json_t *root = json_loads(js, 0, NULL);
	char path[128];
	snprintf(path, sizeof(path), "%s", dotted);
	json_t *v = root;
	for (char *save = NULL, *t = strtok_r(path, ".", &save); t && v;
	     t = strtok_r(NULL, ".", &save))
		v = json_object_get(v, t);
	long n = json_is_integer(v) ? (long)json_integer_value(v) : -1;
	json_decref(root);
	return n;
}

/* ---- per-test environment ------------------------------------------ */

typedef struct env {
	char prefix[48];
	char outbox[96];
	char dl[96];
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

static int env_setup(env *e)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->prefix, sizeof(e->prefix), "ob%d_%d_", (int)getpid(),
	         ++seq);
	snprintf(e->outbox, sizeof(e->outbox), "%soutbox", e->prefix);
	snprintf(e->dl, sizeof(e->dl), "%sdead_letters", e->prefix);
	e->st = open_store(e);
	http("POST", "/control/reset", NULL, "", NULL);
	return e->st ? 0 : -1;
}

static void env_teardown(env *e)
{
	if (e->st && is_pg) {
		const char *t[] = {"inbox",     "dead_letters",
		                   "consumers", "schema_version",
		                   "outbox",    "inbox_generations"};
		for (size_t i = 0; i < sizeof(t) / sizeof(*t); i++) {
			char q[160];
			snprintf(q, sizeof(q), "DROP TABLE IF EXISTS %s%s",
			         e->prefix, t[i]);
			inbox_store_exec(e->st, q, 0, NULL, NULL);
		}
	}
	inbox_store_close(e->st);
	e->st = NULL;
}

static int first_col(int n, const char *const *v, void *p)
{
	snprintf(p, 512, "%s", n > 0 && v[0] ? v[0] : "(null)");
	return 1;
}

static const char *scalar(inbox_store *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *scalar(inbox_store *st, const char *fmt, ...)
{
	static char out[512];
	char q[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(q, sizeof(q), fmt, ap);
	va_end(ap);
	snprintf(out, sizeof(out), "(no row)");
	if (inbox_store_query(st, q, 0, NULL, first_col, out) != 0)
		snprintf(out, sizeof(out), "(error: %s)",
		         inbox_store_errmsg(st));
	return out;
}

static long count_rows(const env *e, const char *table, const char *where)
{
	return atol(scalar(e->st, "SELECT count(*) FROM %s%s%s", table,
	                   where ? " WHERE " : "", where ? where : ""));
}

/* ---- a handler declaring effects ------------------------------------ */

typedef struct hctx {
	const env *e;
	int pay, email; /* declare these steps */
	int twice;      /* declare each step twice */
	int verdict;    /* returned after declaring */
	int max_attempts;
	int added[4];
	int nadded;
	long outside_count; /* outbox rows seen from another handle */
	inbox_store *other;
	char key[INBOX_OUTBOX_KEY_LEN + 1];
} hctx;

static int add_step(inbox_txn *t, const inbox_msg *m, hctx *h, const char *step)
{
	const char *order;
	if (inbox_msg_get(m, "/data/orderId", &order))
		return -1;
	char body[256], url[128], rec[160];
	snprintf(body, sizeof(body), "{\"orderId\":\"%s\",\"amount\":1500}",
	         order);
	inbox_outbox_effect e = INBOX_OUTBOX_EFFECT_INIT;
	e.step = step;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/%s", provider_port,
	         strcmp(step, "charge") == 0 ? "pay" : "email");
	e.url = url;
	e.body = body;
	e.body_len = strlen(body);
	e.max_attempts = h->max_attempts;
	if (strcmp(step, "charge") == 0) {
		e.idempotent = 1;
	} else {
		snprintf(rec, sizeof(rec),
		         "http://127.0.0.1:%d/email?reference={key}",
		         provider_port);
		e.reconcile_url = rec;
	}
	int added = -1;
	if (inbox_txn_outbox_add(t, &e, h->key, &added) != 0)
		return -1;
	if (h->nadded < 4)
		h->added[h->nadded++] = added;
	return 0;
}

static int effect_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	hctx *h = p;
	for (int i = 0; i < (h->twice ? 2 : 1); i++) {
		if (h->pay && add_step(t, m, h, "charge") < 0)
			return INBOX_HANDLER_RETRY;
		if (h->email && add_step(t, m, h, "email") < 0)
			return INBOX_HANDLER_RETRY;
	}
	if (h->other) {
		char q[160];
		snprintf(q, sizeof(q), "SELECT count(*) FROM %s", h->e->outbox);
		char out[512] = "";
		inbox_store_query(h->other, q, 0, NULL, first_col, out);
		h->outside_count = atol(out);
	}
	if (h->verdict != INBOX_HANDLER_OK)
		inbox_txn_set_reason(t, "test verdict");
	return h->verdict;
}

static inbox_consumer *open_consumer(inbox_store *st, hctx *h)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.orders";
	o.key_template = "order:{/data/orderId}";
	o.fingerprint_pointer = "/data";
	o.handler = effect_handler;
	o.handler_payload = h;
	o.max_attempts = 5;
	inbox_consumer *c = NULL;
	char err[256];
	if (inbox_consumer_open(&c, st, &o, err, sizeof(err)) != 0)
		fprintf(stderr, "consumer open: %s\n", err);
	return c;
}

static int process_order(inbox_consumer *c, const char *order,
                         inbox_outcome *out)
{
	char js[256];
	snprintf(js, sizeof(js),
	         "{\"id\":\"m-%s\",\"data\":{\"orderId\":\"%s\"}}", order,
	         order);
	inbox_delivery d = INBOX_DELIVERY_INIT;
	d.payload = js;
	d.payload_len = strlen(js);
	inbox_result r = INBOX_RESULT_INIT;
	int rc = inbox_consumer_process(c, &d, &r);
	if (rc != 0)
		fprintf(stderr, "process: %s\n", inbox_consumer_errmsg(c));
	*out = r.outcome;
	return rc;
}

static inbox_dispatcher *
open_dispatcher_backoff(inbox_store *st, int max_attempts, int64_t backoff_ms)
{
	inbox_dispatcher_options o = INBOX_DISPATCHER_OPTIONS_INIT;
	o.connect_timeout_ms = 500;
	o.timeout_ms = 700;
	o.backoff_ms = backoff_ms;
	o.max_backoff_ms = 3 * backoff_ms;
	o.max_attempts = max_attempts;
	o.poll_ms = 20;
	inbox_dispatcher *d = NULL;
	char err[256];
	if (inbox_dispatcher_open(&d, st, &o, err, sizeof(err)) != 0)
		fprintf(stderr, "dispatcher open: %s\n", err);
	return d;
}

static inbox_dispatcher *open_dispatcher(inbox_store *st, int max_attempts)
{
	return open_dispatcher_backoff(st, max_attempts, 100);
}

/* Run the dispatcher until no row is left to do (or ~10 s). */
static int drain(inbox_dispatcher *d, inbox_store *st)
{
	for (int i = 0; i < 500; i++) {
		int n = 0;
		int rc = inbox_dispatcher_run_once(d, &n);
		if (rc != 0) {
			fprintf(stderr, "run_once: %s\n",
			        inbox_dispatcher_errmsg(d));
			return rc;
		}
		int64_t pending = 0;
		if (inbox_outbox_pending(st, NULL, &pending, NULL) != 0)
			return -1;
		if (pending == 0)
			return 0;
		if (n == 0)
			sleep_ms(20);
	}
	return INBOX_ERR_TIMEOUT;
}

static const char *row_state(const env *e, const char *step)
{
	return scalar(e->st, "SELECT state FROM %s WHERE step = '%s'",
	              e->outbox, step);
}

static long row_int(const env *e, const char *col, const char *step)
{
	return atol(scalar(e->st, "SELECT %s FROM %s WHERE step = '%s'", col,
	                   e->outbox, step));
}

/* ---- tests ----------------------------------------------------------- */

TEST(idempotency_key_is_deterministic)
{
	char a[65], b[65], c[65], d[65];
	ASSERT_OK(inbox_outbox_key("billing", "order:1", "charge", a));
	ASSERT_OK(inbox_outbox_key("billing", "order:1", "charge", b));
	ASSERT_OK(inbox_outbox_key("billing", "order:1", "email", c));
	ASSERT_OK(inbox_outbox_key("billing", "order:1c", "harge", d));
	ASSERT_STREQ(a, b);
	ASSERT_TRUE(strcmp(a, c) != 0);
	ASSERT_TRUE(strcmp(a, d) != 0); /* separators matter */
	ASSERT_EQ(strlen(a), 64);
	ASSERT_EQ(strspn(a, "0123456789abcdef"), 64);
	/* sha256("billing\0order:1\0charge"), pinned: a key never changes
	 * between versions. */
	ASSERT_STREQ(a, "65468eb5a888f9f297627e142e045725"
	                "463c509a8c99ef76288820fe6f7c012b");
}

TEST(rows_appear_only_after_commit)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .pay = 1, .email = 1};
	h.other = open_store(&e);
	ASSERT_TRUE(h.other);
	inbox_consumer *c = open_consumer(e.st, &h);
	ASSERT_TRUE(c);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-1", &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	ASSERT_EQ(h.outside_count, 0); /* invisible before the commit */
	ASSERT_EQ(count_rows(&e, e.outbox, NULL), 2);
	ASSERT_STREQ(row_state(&e, "charge"), "pending");
	char want[65];
	ASSERT_OK(
	    inbox_outbox_key("billing.orders", "order:o-1", "email", want));
	ASSERT_STREQ(h.key, want);
	ASSERT_STREQ(scalar(e.st,
	                    "SELECT idempotency_key FROM %s WHERE step "
	                    "= 'email'",
	                    e.outbox),
	             want);
	/* The redelivery is a duplicate: no handler, no second row. */
	ASSERT_OK(process_order(c, "o-1", &o));
	ASSERT_EQ(o, INBOX_DUPLICATE);
	ASSERT_EQ(count_rows(&e, e.outbox, NULL), 2);
	inbox_consumer_close(c);
	inbox_store_close(h.other);
	env_teardown(&e);
}

TEST(retry_and_reject_remove_the_rows)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {
	    .e = &e, .pay = 1, .email = 1, .verdict = INBOX_HANDLER_RETRY};
	inbox_consumer *c = open_consumer(e.st, &h);
	ASSERT_TRUE(c);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-2", &o));
	ASSERT_EQ(o, INBOX_RETRY);
	ASSERT_EQ(count_rows(&e, e.outbox, NULL), 0);
	h.verdict = INBOX_HANDLER_REJECT;
	ASSERT_OK(process_order(c, "o-3", &o));
	ASSERT_EQ(o, INBOX_DEAD_LETTERED);
	ASSERT_EQ(count_rows(&e, e.outbox, NULL), 0);
	/* The retried message succeeds: its rows appear, once. */
	h.verdict = INBOX_HANDLER_OK;
	ASSERT_OK(process_order(c, "o-2", &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	ASSERT_EQ(count_rows(&e, e.outbox, NULL), 2);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(a_step_declared_twice_is_one_row)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .pay = 1, .twice = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	ASSERT_TRUE(c);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-4", &o));
	ASSERT_EQ(o, INBOX_APPLIED);
	ASSERT_EQ(h.nadded, 2);
	ASSERT_EQ(h.added[0], 1);
	ASSERT_EQ(h.added[1], 0);
	ASSERT_EQ(count_rows(&e, e.outbox, NULL), 1);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(dispatch_performs_once)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .pay = 1, .email = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-5", &o));
	inbox_dispatcher *d = open_dispatcher(e.st, 5);
	ASSERT_TRUE(d);
	ASSERT_OK(drain(d, e.st));
	ASSERT_STREQ(row_state(&e, "charge"), "done");
	ASSERT_STREQ(row_state(&e, "email"), "done");
	ASSERT_EQ(stat("pay.charges"), 1);
	ASSERT_EQ(stat("email.sent"), 1);
	ASSERT_CONTAINS(scalar(e.st,
	                       is_pg ? "SELECT convert_from(response, 'UTF8') "
	                               "FROM %s WHERE step = 'charge'"
	                             : "SELECT CAST(response AS TEXT) FROM %s "
	                               "WHERE step = 'charge'",
	                       e.outbox),
	                "chargeId");
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	inbox_dispatcher_stats(d, &s);
	ASSERT_EQ(s.done, 2);
	ASSERT_EQ(s.attempts, 2);
	ASSERT_EQ(s.claimed, 2);
	/* Nothing left: a second pass claims nothing. */
	int n = -1;
	ASSERT_OK(inbox_dispatcher_run_once(d, &n));
	ASSERT_EQ(n, 0);
	inbox_dispatcher_close(d);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(unknown_payment_retried_with_the_same_key)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .pay = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-6", &o));
	inbox_dispatcher *d = open_dispatcher(e.st, 5);
	fault("pay", "timeout", 1); /* charge, then answer too late */
	int n = 0;
	ASSERT_OK(inbox_dispatcher_run_once(d, &n));
	ASSERT_EQ(n, 1);
	ASSERT_STREQ(row_state(&e, "charge"), "unknown");
	ASSERT_EQ(stat("pay.charges"), 1);
	ASSERT_OK(drain(d, e.st));
	ASSERT_STREQ(row_state(&e, "charge"), "done");
	ASSERT_EQ(stat("pay.charges"), 1); /* charged once */
	ASSERT_EQ(stat("pay.replays"), 1); /* the retry got the first answer */
	ASSERT_EQ(stat("pay.keys"), 1); /* ... because the key was the same */
	ASSERT_EQ(row_int(&e, "attempts", "charge"), 2);
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	inbox_dispatcher_stats(d, &s);
	ASSERT_EQ(s.unknown_outcomes, 1);
	ASSERT_EQ(s.reconciliations, 0);
	inbox_dispatcher_close(d);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(email_dropped_after_sending_is_reconciled_not_resent)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .email = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-7", &o));
	inbox_dispatcher *d = open_dispatcher(e.st, 5);
	fault("email", "drop", 1);
	int n = 0;
	ASSERT_OK(inbox_dispatcher_run_once(d, &n));
	ASSERT_STREQ(row_state(&e, "email"), "unknown");
	ASSERT_OK(drain(d, e.st));
	ASSERT_STREQ(row_state(&e, "email"), "done");
	ASSERT_EQ(stat("email.sent"), 1);
	ASSERT_EQ(stat("email.requests"), 1); /* never sent again */
	ASSERT_EQ(stat("email.found"), 1);
	ASSERT_EQ(row_int(&e, "reconciliations", "email"), 1);
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	inbox_dispatcher_stats(d, &s);
	ASSERT_EQ(s.reconciliations, 1);
	ASSERT_EQ(s.reconciled_found, 1);
	ASSERT_EQ(s.attempts, 1);
	inbox_dispatcher_close(d);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(email_500_not_sent_is_reconciled_then_sent)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .email = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-8", &o));
	inbox_dispatcher *d = open_dispatcher(e.st, 5);
	fault("email", "500", 1); /* refused before sending */
	ASSERT_OK(drain(d, e.st));
	ASSERT_STREQ(row_state(&e, "email"), "done");
	ASSERT_EQ(stat("email.sent"), 1);
	ASSERT_EQ(stat("email.lookups"), 1);
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	inbox_dispatcher_stats(d, &s);
	ASSERT_EQ(s.reconciled_not_found, 1);
	ASSERT_EQ(s.attempts, 2);
	inbox_dispatcher_close(d);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(conflict_409_is_a_dead_letter)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .pay = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-9", &o));
	/* Someone used the same key with other parameters first. */
	long st = 0;
	http("POST", "/pay", h.key, "{\"orderId\":\"o-9\",\"amount\":99}", &st);
	ASSERT_EQ(st, 200);
	inbox_dispatcher *d = open_dispatcher(e.st, 5);
	ASSERT_OK(drain(d, e.st));
	ASSERT_STREQ(row_state(&e, "charge"), "dead");
	ASSERT_EQ(row_int(&e, "last_status", "charge"), 409);
	ASSERT_EQ(row_int(&e, "attempts", "charge"), 1);
	ASSERT_EQ(count_rows(&e, e.dl, NULL), 1);
	ASSERT_CONTAINS(scalar(e.st, "SELECT reason FROM %s", e.dl),
	                "outbox step charge: HTTP 409");
	ASSERT_STREQ(scalar(e.st, "SELECT position FROM %s", e.dl),
	             scalar(e.st, "SELECT 'outbox:' || id FROM %s", e.outbox));
	ASSERT_STREQ(scalar(e.st, "SELECT consumer FROM %s", e.dl),
	             "billing.orders");
	ASSERT_CONTAINS(scalar(e.st, "SELECT headers FROM %s", e.dl), h.key);
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	inbox_dispatcher_stats(d, &s);
	ASSERT_EQ(s.dead_letters, 1);
	inbox_outbox_counts cnt = INBOX_OUTBOX_COUNTS_INIT;
	ASSERT_OK(inbox_outbox_counts_get(e.st, NULL, &cnt));
	ASSERT_EQ(cnt.dead, 1);
	ASSERT_EQ(cnt.pending + cnt.failed + cnt.unknown + cnt.in_flight, 0);
	inbox_dispatcher_close(d);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(transient_429_and_500_are_retried_with_backoff)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .pay = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-10", &o));
	/* A backoff (800-1200 ms) that a loaded machine's pause between two
	 * run_once calls does not outlast: at 100 ms the row was due again
	 * once on a machine at load average 25. */
	inbox_dispatcher *d = open_dispatcher_backoff(e.st, 5, 1000);
	fault("pay", "429", 1);
	fault("pay", "500", 1);
	int n = 0;
	ASSERT_OK(inbox_dispatcher_run_once(d, &n));
	ASSERT_EQ(n, 1);
	ASSERT_STREQ(row_state(&e, "charge"), "failed");
	/* Not due again before its backoff. */
	ASSERT_OK(inbox_dispatcher_run_once(d, &n));
	ASSERT_EQ(n, 0);
	ASSERT_OK(drain(d, e.st));
	ASSERT_STREQ(row_state(&e, "charge"), "done");
	ASSERT_EQ(row_int(&e, "attempts", "charge"), 3);
	ASSERT_EQ(stat("pay.charges"), 1);
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	inbox_dispatcher_stats(d, &s);
	ASSERT_EQ(s.retries, 2);
	ASSERT_EQ(s.attempts, 3);
	inbox_dispatcher_close(d);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(max_attempts_is_a_dead_letter)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .pay = 1, .max_attempts = 2};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-11", &o));
	inbox_dispatcher *d = open_dispatcher(e.st, 5);
	fault("pay", "500", 5);
	ASSERT_OK(drain(d, e.st));
	ASSERT_STREQ(row_state(&e, "charge"), "dead");
	ASSERT_EQ(row_int(&e, "attempts", "charge"), 2);
	ASSERT_EQ(stat("pay.charges"), 0);
	ASSERT_CONTAINS(scalar(e.st, "SELECT reason FROM %s", e.dl),
	                "max attempts (2) reached");
	inbox_dispatcher_close(d);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(unknown_at_max_attempts_is_reconciled_not_dead)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .email = 1, .max_attempts = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-15", &o));
	inbox_dispatcher *d = open_dispatcher(e.st, 5);
	fault("email", "drop", 1); /* sent, then no answer: unknown */
	ASSERT_OK(drain(d, e.st));
	ASSERT_STREQ(row_state(&e, "email"), "done");
	ASSERT_EQ(stat("email.sent"), 1);
	ASSERT_EQ(stat("email.found"), 1);
	ASSERT_EQ(count_rows(&e, e.dl, NULL), 0);
	inbox_dispatcher_close(d);
	inbox_consumer_close(c);
	env_teardown(&e);
}

static int keep_first(const inbox_outbox_item *row, void *p)
{
	inbox_outbox_item *out = p;
	out->id = row->id;
	out->fence = row->fence;
	out->state = row->state;
	return 0;
}

/* Claim the due rows as a dispatcher that then dies would. */
static int claim_and_vanish(inbox_store *st, int64_t lease_ms,
                            inbox_outbox_item *first)
{
	int rc = st->vt->begin(st);
	if (rc == 0)
		rc = st->vt->outbox_claim(st, NULL, 10, lease_ms, keep_first,
		                          first);
	if (rc == 0)
		rc = st->vt->commit(st);
	else
		st->vt->rollback(st);
	return rc;
}

TEST(expired_lease_is_an_unknown_outcome_reconciled)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .email = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-12", &o));
	inbox_outbox_item it;
	memset(&it, 0, sizeof(it));
	ASSERT_OK(claim_and_vanish(e.st, 200, &it));
	ASSERT_EQ(it.state, INBOX_OUTBOX_PENDING);
	ASSERT_STREQ(row_state(&e, "email"), "in_flight");
	inbox_dispatcher *d = open_dispatcher(e.st, 5);
	int n = -1;
	ASSERT_OK(inbox_dispatcher_run_once(d, &n));
	ASSERT_EQ(n, 0); /* the lease still holds */
	sleep_ms(300);
	ASSERT_OK(drain(d, e.st));
	ASSERT_STREQ(row_state(&e, "email"), "done");
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	inbox_dispatcher_stats(d, &s);
	ASSERT_EQ(s.lease_expired, 1);
	ASSERT_EQ(s.reconciliations, 1); /* asked before sending */
	ASSERT_EQ(s.reconciled_not_found, 1);
	ASSERT_EQ(stat("email.sent"), 1);
	inbox_dispatcher_close(d);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(fence_refuses_a_late_completion)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .pay = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-13", &o));
	inbox_outbox_item a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ASSERT_OK(claim_and_vanish(e.st, 100, &a));
	sleep_ms(200);
	ASSERT_OK(claim_and_vanish(e.st, 60000, &b));
	ASSERT_EQ(b.id, a.id);
	ASSERT_EQ(b.fence, a.fence + 1);
	ASSERT_EQ(b.state, INBOX_OUTBOX_IN_FLIGHT); /* expired lease */
	inbox_outbox_finish f = {
	    .id = a.id, .fence = a.fence, .state = INBOX_OUTBOX_DONE};
	int64_t rows = -1;
	ASSERT_OK(e.st->vt->begin(e.st));
	ASSERT_OK(e.st->vt->outbox_finish(e.st, &f, &rows));
	ASSERT_OK(e.st->vt->commit(e.st));
	ASSERT_EQ(rows, 0);
	ASSERT_STREQ(row_state(&e, "charge"), "in_flight");
	f.fence = b.fence;
	ASSERT_OK(e.st->vt->begin(e.st));
	ASSERT_OK(e.st->vt->outbox_finish(e.st, &f, &rows));
	ASSERT_OK(e.st->vt->commit(e.st));
	ASSERT_EQ(rows, 1);
	ASSERT_STREQ(row_state(&e, "charge"), "done");
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* A lease, a retry delay or a purge age too large for the clock is
 * clamped (about 30 years), not wrapped into the past. */
TEST(huge_delays_are_clamped)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .pay = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-15", &o));
	inbox_outbox_item a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ASSERT_OK(claim_and_vanish(e.st, INT64_MAX, &a));
	ASSERT_TRUE(a.id != 0);
	ASSERT_OK(claim_and_vanish(e.st, 1000, &b));
	ASSERT_EQ(b.id, 0); /* the lease holds */
	inbox_outbox_finish f = {.id = a.id,
	                         .fence = a.fence,
	                         .state = INBOX_OUTBOX_FAILED,
	                         .retry_in_ms = INT64_MAX};
	int64_t rows = -1;
	ASSERT_OK(e.st->vt->begin(e.st));
	ASSERT_OK(e.st->vt->outbox_finish(e.st, &f, &rows));
	ASSERT_OK(e.st->vt->commit(e.st));
	ASSERT_EQ(rows, 1);
	ASSERT_STREQ(row_state(&e, "charge"), "failed");
	ASSERT_OK(claim_and_vanish(e.st, 1000, &b));
	ASSERT_EQ(b.id, 0); /* not due for years */
	int64_t deleted = -1;
	ASSERT_OK(inbox_outbox_purge(e.st, NULL, INT64_MAX, 0, &deleted));
	ASSERT_EQ(deleted, 0);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* A child process dispatching until nothing is left. */
static int child_dispatch(const env *e, int go_fd)
{
	inbox_store *st = open_store(e);
	if (!st)
		return 100;
	inbox_dispatcher *d = open_dispatcher(st, 5);
	if (!d)
		return 101;
	char b;
	if (read(go_fd, &b, 1) != 1)
		return 102;
	int rc = drain(d, st);
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	inbox_dispatcher_stats(d, &s);
	inbox_dispatcher_close(d);
	inbox_store_close(st);
	if (rc != 0)
		return 103;
	return s.claimed > 0 ? 0 : 10; /* 10: this one got nothing */
}

TEST(two_dispatchers_never_perform_a_row_twice)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .pay = 1, .email = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	enum { N = 60 };
	for (int i = 0; i < N; i++) {
		char order[32];
		inbox_outcome o;
		snprintf(order, sizeof(order), "two-%d", i);
		ASSERT_OK(process_order(c, order, &o));
	}
	ASSERT_EQ(count_rows(&e, e.outbox, NULL), 2 * N);
	int go[2];
	ASSERT_OK(pipe(go));
	pid_t kids[2];
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			close(go[1]);
			_exit(child_dispatch(&e, go[0]));
		}
	}
	close(go[0]);
	sleep_ms(200);
	ASSERT_EQ(write(go[1], "gg", 2), 2);
	close(go[1]);
	int got_nothing = 0;
	for (int i = 0; i < 2; i++) {
		int status = 0;
		waitpid(kids[i], &status, 0);
		ASSERT_TRUE(WIFEXITED(status));
		int code = WEXITSTATUS(status);
		ASSERT_TRUE(code == 0 || code == 10);
		got_nothing += code == 10;
	}
	ASSERT_EQ(count_rows(&e, e.outbox, "state = 'done'"), 2 * N);
	/* The outside world saw every row exactly once. */
	ASSERT_EQ(stat("email.sent"), N);
	ASSERT_EQ(stat("email.requests"), N);
	ASSERT_EQ(stat("pay.requests"), N);
	ASSERT_EQ(stat("pay.keys_requested_twice"), 0);
	ASSERT_EQ(stat("pay.charges"), N);
	printf("     (dispatchers that got no row: %d of 2)\n", got_nothing);
	inbox_consumer_close(c);
	env_teardown(&e);
}

TEST(counters_and_purge)
{
	env e;
	ASSERT_OK(env_setup(&e));
	hctx h = {.e = &e, .pay = 1, .email = 1};
	inbox_consumer *c = open_consumer(e.st, &h);
	inbox_outcome o;
	ASSERT_OK(process_order(c, "o-14", &o));
	sleep_ms(50);
	int64_t pending = -1;
	double age = -1;
	ASSERT_OK(inbox_outbox_pending(e.st, NULL, &pending, &age));
	ASSERT_EQ(pending, 2);
	ASSERT_TRUE(age > 0.0 && age < 60.0);
	ASSERT_OK(inbox_outbox_pending(e.st, "nobody", &pending, &age));
	ASSERT_EQ(pending, 0);
	ASSERT_TRUE(age == 0.0);
	inbox_dispatcher *d = open_dispatcher(e.st, 5);
	ASSERT_OK(drain(d, e.st));
	ASSERT_OK(inbox_outbox_pending(e.st, "billing.orders", &pending, &age));
	ASSERT_EQ(pending, 0);
	ASSERT_TRUE(age == 0.0);
	int64_t deleted = -1;
	ASSERT_OK(inbox_outbox_purge(e.st, NULL, 3600, 0, &deleted));
	ASSERT_EQ(deleted, 0); /* too recent */
	sleep_ms(1100);
	ASSERT_OK(inbox_outbox_purge(e.st, "billing.orders", 1, 1, &deleted));
	ASSERT_EQ(deleted, 2);
	ASSERT_EQ(count_rows(&e, e.outbox, NULL), 0);
	inbox_dispatcher_close(d);
	inbox_consumer_close(c);
	env_teardown(&e);
}

/* A store at schema version 1 (no outbox) upgrades in place. */
TEST(version_1_store_migrates_up)
{
	env e;
	ASSERT_OK(env_setup(&e));
	char q[256];
	snprintf(q, sizeof(q), "DROP TABLE %soutbox", e.prefix);
	ASSERT_OK(inbox_store_exec(e.st, q, 0, NULL, NULL));
	snprintf(q, sizeof(q),
	         "DELETE FROM %sschema_version WHERE version >= 2", e.prefix);
	ASSERT_OK(inbox_store_exec(e.st, q, 0, NULL, NULL));
	int v = 0;
	ASSERT_OK(inbox_store_schema_version(e.st, &v));
	ASSERT_EQ(v, 1);
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = e.prefix;
	so.auto_migrate = 0;
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, URL, &so));
	/* a consumer refuses the older schema until it is migrated */
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = "billing.order-confirmed.v1";
	inbox_consumer *c = NULL;
	ASSERT_EQ(inbox_consumer_open(&c, st, &co, NULL, 0), INBOX_ERR_SCHEMA);
	inbox_store_close(st);
	ASSERT_OK(inbox_store_migrate(e.st));
	ASSERT_OK(inbox_store_schema_version(e.st, &v));
	ASSERT_EQ(v,
	          6); /* 4: idempotent dead letters, 5: results, 6: positions */
	ASSERT_EQ(count_rows(&e, e.outbox, NULL), 0);
	env_teardown(&e);
}

static void run_all(void)
{
	RUN(rows_appear_only_after_commit);
	RUN(retry_and_reject_remove_the_rows);
	RUN(a_step_declared_twice_is_one_row);
	RUN(dispatch_performs_once);
	RUN(unknown_payment_retried_with_the_same_key);
	RUN(email_dropped_after_sending_is_reconciled_not_resent);
	RUN(email_500_not_sent_is_reconciled_then_sent);
	RUN(conflict_409_is_a_dead_letter);
	RUN(transient_429_and_500_are_retried_with_backoff);
	RUN(max_attempts_is_a_dead_letter);
	RUN(unknown_at_max_attempts_is_reconciled_not_dead);
	RUN(expired_lease_is_an_unknown_outcome_reconciled);
	RUN(fence_refuses_a_late_completion);
	RUN(huge_delays_are_clamped);
	RUN(two_dispatchers_never_perform_a_row_twice);
	RUN(counters_and_purge);
	RUN(version_1_store_migrates_up);
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (find_provider() != 0 || start_provider() != 0) {
		printf("FAIL cannot start the test provider (%s); set "
		       "INBOX_TEST_PROVIDER\n",
		       provider_path);
		printf("0 passed, 1 failed\n");
		return 1;
	}
	RUN(idempotency_key_is_deterministic);
	char db[256];
	snprintf(db, sizeof(db), "/tmp/inbox-test-outbox-%d.db", (int)getpid());
	char url[300];
	snprintf(url, sizeof(url), "sqlite:%s", db);
	URL = url;
	is_pg = 0;
	printf("# store %s\n", URL);
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
	stop_provider();
	for (const char *sfx = ""; sfx; sfx = *sfx ? NULL : "-wal") {
		char p[320];
		snprintf(p, sizeof(p), "%s%s", db, sfx);
		unlink(p);
	}
	char shm[320];
	snprintf(shm, sizeof(shm), "%s-shm", db);
	unlink(shm);
	return test_summary();
}
