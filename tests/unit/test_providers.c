/*
 * The dispatcher's providers without a network: names, settings, the
 * circuit breaker's states, the concurrency cap, the rate limit and the
 * Retry-After hold (on a clock the test moves), the /metrics families;
 * then inbox_dispatcher_run() with a perform callback on SQLite (its store
 * thread, on_tick, a version 1 options struct).
 */
#include <inbox/inbox.h>
#include <inbox/metrics.h>
#include <inbox/outbox.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "outbox/engine.h"
#include "test.h"

static char tmpdir[256];

/* The provider entry of `url` in its registry's snapshot. */
static inbox_provider_info info_of(inbox_providers *r, const char *name)
{
	inbox_provider_info *a = NULL, found;
	size_t n = 0;
	memset(&found, 0, sizeof(found));
	found.breaker = (inbox_breaker_state)-1;
	if (inbox_providers_info(r, INBOX_PROVIDER_INFO_VERSION, &a, &n) ==
	    INBOX_OK)
		for (size_t i = 0; i < n; i++)
			if (strcmp(a[i].name, name) == 0 &&
			    a[i].version == INBOX_PROVIDER_INFO_VERSION) {
				found = a[i];
				found.name = NULL; /* freed below */
			}
	free(a);
	return found;
}

TEST(names_are_scheme_host_port)
{
	char out[320];
	ASSERT_OK(inbox_provider_name("HTTP://Pay.Example/v1/charges?x=1", out,
	                              sizeof(out)));
	ASSERT_STREQ(out, "http://pay.example:80");
	ASSERT_OK(inbox_provider_name("https://user:s3cret@mail.example:8443/p",
	                              out, sizeof(out)));
	ASSERT_STREQ(out, "https://mail.example:8443"); /* no user, no secret */
	ASSERT_OK(inbox_provider_name("https://h.example", out, sizeof(out)));
	ASSERT_STREQ(out, "https://h.example:443");
	ASSERT_OK(inbox_provider_name("http://[::1]:9/x", out, sizeof(out)));
	ASSERT_STREQ(out, "http://[::1]:9");
	ASSERT_EQ(inbox_provider_name("ftp://h.example/", out, sizeof(out)),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_provider_name("mailto:a@b.example", out, sizeof(out)),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_provider_name("no scheme", out, sizeof(out)),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_provider_name("http://h.example", out, 8),
	          INBOX_ERR_INVALID); /* does not fit */
}

TEST(settings_are_checked)
{
	inbox_providers *r = NULL;
	inbox_provider_options o = INBOX_PROVIDER_OPTIONS_INIT;
	o.concurrency = -1;
	ASSERT_EQ(inbox_providers_open(&r, &o), INBOX_ERR_INVALID);
	ASSERT_TRUE(r == NULL);
	ASSERT_OK(inbox_providers_open(&r, NULL));
	o = (inbox_provider_options)INBOX_PROVIDER_OPTIONS_INIT;
	o.breaker_max_open_ms = o.breaker_open_ms - 1;
	ASSERT_EQ(inbox_providers_set(r, "http://a.example", &o),
	          INBOX_ERR_INVALID);
	o = (inbox_provider_options)INBOX_PROVIDER_OPTIONS_INIT;
	o.rate = -2;
	ASSERT_EQ(inbox_providers_set(r, "http://a.example", &o),
	          INBOX_ERR_INVALID);
	o.rate = 5;
	ASSERT_EQ(inbox_providers_set(r, "gopher://a.example", &o),
	          INBOX_ERR_INVALID);
	ASSERT_OK(inbox_providers_set(r, "http://a.example/x", &o));
	inbox_providers_close(r);
	inbox_providers_close(NULL);
}

/* The registry's events, as letters: O(pened) H(alf-open) C(losed)
 * P(aused), each with its ms. */
static char events[256];
static void on_event(const char *provider, inbox_provider_event ev, int64_t ms,
                     void *payload)
{
	(void)provider;
	(void)payload;
	size_t n = strlen(events);
	snprintf(events + n, sizeof(events) - n, "%c%lld ", " OHCP"[ev],
	         (long long)ms);
}

TEST(breaker_opens_half_opens_and_closes)
{
	inbox_providers *r = NULL;
	inbox_provider_options o = INBOX_PROVIDER_OPTIONS_INIT;
	o.breaker_failures = 3;
	o.breaker_open_ms = 100000; /* the test's clock moves, not time */
	o.breaker_max_open_ms = 300000;
	ASSERT_OK(inbox_providers_open(&r, &o));
	events[0] = '\0';
	ASSERT_OK(inbox_providers_on_event(r, on_event, NULL));
	inbox__prov *p = inbox__provider_get(r, "http://b.example/pay");
	ASSERT_TRUE(p != NULL);
	ASSERT_TRUE(inbox__provider_get(r, "http://B.example:80/other") == p);
	const char *name = "http://b.example:80";
	double t = inbox__mono_seconds() * 1000.0;
	inbox__ticket tk[8];
	int64_t wait;
	const char *why;
	memset(tk, 0, sizeof(tk));
	/* Two failures, an answer: still closed, the count starts again. */
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(
		    inbox__provider_acquire(p, t, i, 32, &tk[i], &wait, &why),
		    INBOX__ADMIT);
	inbox__provider_release(p, &tk[0], t, INBOX__CALL_FAILED, 0);
	inbox__provider_release(p, &tk[1], t, INBOX__CALL_FAILED, 0);
	inbox__provider_release(p, &tk[2], t, INBOX__CALL_OK, 0);
	ASSERT_EQ(info_of(r, name).breaker, INBOX_BREAKER_CLOSED);
	/* Three in a row, and a fourth call started before they ended. */
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(
		    inbox__provider_acquire(p, t, i, 32, &tk[i], &wait, &why),
		    INBOX__ADMIT);
	for (int i = 0; i < 3; i++)
		inbox__provider_release(p, &tk[i], t, INBOX__CALL_FAILED, 0);
	inbox_provider_info in = info_of(r, name);
	ASSERT_EQ(in.breaker, INBOX_BREAKER_OPEN);
	ASSERT_EQ(in.opens, 1);
	ASSERT_EQ(in.in_flight, 1);
	/* Its late answer decides nothing. */
	inbox__provider_release(p, &tk[3], t + 10, INBOX__CALL_OK, 0);
	ASSERT_EQ(info_of(r, name).breaker, INBOX_BREAKER_OPEN);
	/* Open: rows are put back until the open time is over. */
	ASSERT_EQ(
	    inbox__provider_acquire(p, t + 1000, 0, 32, &tk[0], &wait, &why),
	    INBOX__REJECT);
	ASSERT_EQ(wait, 99000);
	ASSERT_CONTAINS(why, "circuit breaker is open");
	/* Half-open: one trial, the others wait for it. */
	ASSERT_EQ(
	    inbox__provider_acquire(p, t + 100000, 0, 32, &tk[0], &wait, &why),
	    INBOX__ADMIT);
	ASSERT_TRUE(tk[0].trial);
	ASSERT_EQ(
	    inbox__provider_acquire(p, t + 100001, 1, 32, &tk[1], &wait, &why),
	    INBOX__WAIT);
	ASSERT_EQ(info_of(r, name).breaker, INBOX_BREAKER_HALF_OPEN);
	/* The trial fails: open again, twice as long. */
	inbox__provider_release(p, &tk[0], t + 100002, INBOX__CALL_FAILED, 0);
	in = info_of(r, name);
	ASSERT_EQ(in.breaker, INBOX_BREAKER_OPEN);
	ASSERT_EQ(in.opens, 2);
	ASSERT_EQ(in.trials, 1);
	ASSERT_EQ(inbox__provider_acquire(p, t + 100002 + 199000, 0, 32, &tk[0],
	                                  &wait, &why),
	          INBOX__REJECT);
	ASSERT_EQ(wait, 1000);
	/* The next trial answers: closed. */
	double t2 = t + 100002 + 200000;
	ASSERT_EQ(inbox__provider_acquire(p, t2, 0, 32, &tk[0], &wait, &why),
	          INBOX__ADMIT);
	ASSERT_TRUE(tk[0].trial);
	inbox__provider_release(p, &tk[0], t2, INBOX__CALL_OK, 0);
	in = info_of(r, name);
	ASSERT_EQ(in.breaker, INBOX_BREAKER_CLOSED);
	ASSERT_EQ(in.trials, 2);
	ASSERT_EQ(in.in_flight, 0);
	ASSERT_EQ(in.calls, 3 + 4 + 2);
	ASSERT_EQ(in.failures, 2 + 3 + 1);
	ASSERT_EQ(in.rejected, 2);
	/* Closed again, with the first open time: 3 failures reopen it for
	 * 100 s, not 400. */
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(
		    inbox__provider_acquire(p, t2, 0, 32, &tk[i], &wait, &why),
		    INBOX__ADMIT);
		inbox__provider_release(p, &tk[i], t2, INBOX__CALL_FAILED, 0);
	}
	ASSERT_EQ(inbox__provider_acquire(p, t2, 0, 32, &tk[0], &wait, &why),
	          INBOX__REJECT);
	ASSERT_EQ(wait, 100000);
	ASSERT_STREQ(events, "O100000 H0 O200000 H0 C0 O100000 ");
	inbox_providers_close(r);
}

TEST(breaker_off_with_zero_failures)
{
	inbox_providers *r = NULL;
	inbox_provider_options o = INBOX_PROVIDER_OPTIONS_INIT;
	o.breaker_failures = 0;
	ASSERT_OK(inbox_providers_open(&r, &o));
	inbox__prov *p = inbox__provider_get(r, "http://c.example");
	double t = inbox__mono_seconds() * 1000.0;
	inbox__ticket tk = {0};
	int64_t wait;
	const char *why;
	for (int i = 0; i < 100; i++) {
		ASSERT_EQ(inbox__provider_acquire(p, t, 0, 1, &tk, &wait, &why),
		          INBOX__ADMIT);
		inbox__provider_release(p, &tk, t, INBOX__CALL_FAILED, 0);
	}
	ASSERT_EQ(info_of(r, "http://c.example:80").opens, 0);
	inbox_providers_close(r);
}

TEST(concurrency_caps_and_rate_limit)
{
	inbox_providers *r = NULL;
	ASSERT_OK(inbox_providers_open(&r, NULL));
	inbox_provider_options o = INBOX_PROVIDER_OPTIONS_INIT;
	o.concurrency = 2; /* over every dispatcher of the registry */
	ASSERT_OK(inbox_providers_set(r, "http://d.example", &o));
	inbox__prov *p = inbox__provider_get(r, "http://d.example/x");
	double t = inbox__mono_seconds() * 1000.0;
	inbox__ticket tk[4];
	int64_t wait;
	const char *why;
	memset(tk, 0, sizeof(tk));
	/* A dispatcher's own limit: it waits for one of its calls. */
	ASSERT_EQ(inbox__provider_acquire(p, t, 1, 1, &tk[0], &wait, &why),
	          INBOX__WAIT);
	ASSERT_EQ(wait, 0);
	ASSERT_EQ(inbox__provider_acquire(p, t, 0, 32, &tk[0], &wait, &why),
	          INBOX__ADMIT);
	ASSERT_EQ(inbox__provider_acquire(p, t, 0, 32, &tk[1], &wait, &why),
	          INBOX__ADMIT);
	/* The provider's cap: another dispatcher with none of its own in
	 * flight looks again soon. */
	ASSERT_EQ(inbox__provider_acquire(p, t, 0, 32, &tk[2], &wait, &why),
	          INBOX__WAIT);
	ASSERT_EQ(wait, 10);
	inbox__provider_release(p, &tk[0], t, INBOX__CALL_OK, 0);
	ASSERT_EQ(inbox__provider_acquire(p, t, 0, 32, &tk[2], &wait, &why),
	          INBOX__ADMIT);
	inbox__provider_release(p, &tk[1], t, INBOX__CALL_OK, 0);
	inbox__provider_release(p, &tk[2], t, INBOX__CALL_OK, 0);

	/* 10 calls a second, 2 at once after a quiet spell. */
	o.concurrency = 0;
	o.rate = 10;
	o.burst = 2;
	ASSERT_OK(inbox_providers_set(r, "http://e.example", &o));
	inbox__prov *q = inbox__provider_get(r, "http://e.example");
	double u = inbox__mono_seconds() * 1000.0 + 1000.0;
	memset(tk, 0, sizeof(tk));
	ASSERT_EQ(inbox__provider_acquire(q, u, 0, 32, &tk[0], &wait, &why),
	          INBOX__ADMIT);
	ASSERT_EQ(inbox__provider_acquire(q, u, 1, 32, &tk[1], &wait, &why),
	          INBOX__ADMIT);
	ASSERT_EQ(inbox__provider_acquire(q, u, 2, 32, &tk[2], &wait, &why),
	          INBOX__WAIT);
	ASSERT_EQ(wait, 100);
	ASSERT_EQ(
	    inbox__provider_acquire(q, u + 50, 2, 32, &tk[2], &wait, &why),
	    INBOX__WAIT);
	ASSERT_EQ(wait, 50);
	ASSERT_EQ(
	    inbox__provider_acquire(q, u + 100, 2, 32, &tk[2], &wait, &why),
	    INBOX__ADMIT);
	ASSERT_EQ(info_of(r, "http://e.example:80").rate_limited, 1);
	inbox_providers_close(r);
}

TEST(retry_after_holds_every_call)
{
	inbox_providers *r = NULL;
	inbox_provider_options o = INBOX_PROVIDER_OPTIONS_INIT;
	o.breaker_max_open_ms = 30000;
	ASSERT_OK(inbox_providers_open(&r, &o));
	events[0] = '\0';
	ASSERT_OK(inbox_providers_on_event(r, on_event, NULL));
	inbox__prov *p = inbox__provider_get(r, "https://f.example");
	double t = inbox__mono_seconds() * 1000.0;
	inbox__ticket tk = {0};
	int64_t wait;
	const char *why;
	ASSERT_EQ(inbox__provider_acquire(p, t, 0, 32, &tk, &wait, &why),
	          INBOX__ADMIT);
	inbox__provider_release(p, &tk, t, INBOX__CALL_FAILED, 2000);
	ASSERT_EQ(inbox__provider_acquire(p, t + 500, 0, 32, &tk, &wait, &why),
	          INBOX__REJECT);
	ASSERT_EQ(wait, 1500);
	ASSERT_CONTAINS(why, "Retry-After");
	ASSERT_EQ(inbox__provider_acquire(p, t + 2000, 0, 32, &tk, &wait, &why),
	          INBOX__ADMIT);
	/* A pause longer than breaker_max_open_ms is cut to it. */
	inbox__provider_release(p, &tk, t + 2000, INBOX__CALL_FAILED, 86400000);
	ASSERT_EQ(inbox__provider_acquire(p, t + 2000, 0, 32, &tk, &wait, &why),
	          INBOX__REJECT);
	ASSERT_EQ(wait, 30000);
	ASSERT_EQ(info_of(r, "https://f.example:443").retry_after, 2);
	ASSERT_STREQ(events, "P2000 P30000 "); /* one per pause */
	inbox_providers_close(r);
}

TEST(metrics_families)
{
	inbox_provider_info ps[2];
	memset(ps, 0, sizeof(ps));
	ps[0].version = ps[1].version = INBOX_PROVIDER_INFO_VERSION;
	ps[0].name = "http://a.example:80";
	ps[0].breaker = INBOX_BREAKER_OPEN;
	ps[0].in_flight = 3;
	ps[0].calls = 12;
	ps[0].opens = 1;
	ps[1].name = "https://b\"x.example:443";
	char *out = NULL;
	size_t len = 0;
	ASSERT_OK(inbox_metrics_render_providers(&out, &len, ps, 2));
	ASSERT_EQ(len, strlen(out));
	ASSERT_CONTAINS(out, "# TYPE inbox_provider_breaker_state gauge\n");
	ASSERT_CONTAINS(out, "inbox_provider_breaker_state{provider=\"http://"
	                     "a.example:80\"} 1\n");
	ASSERT_CONTAINS(out, "inbox_provider_calls_in_flight{provider=\"http://"
	                     "a.example:80\"} 3\n");
	ASSERT_CONTAINS(out, "inbox_provider_calls_total{provider=\"http://"
	                     "a.example:80\"} 12\n");
	ASSERT_CONTAINS(out,
	                "inbox_provider_breaker_opens_total{provider=\"http:"
	                "//a.example:80\"} 1\n");
	ASSERT_CONTAINS(out, "{provider=\"https://b\\\"x.example:443\"} 0\n");
	free(out);
	ASSERT_OK(inbox_metrics_render_providers(&out, &len, NULL, 0));
	ASSERT_EQ(len, 0);
	free(out);
}

/* ---- inbox_dispatcher_run() with a perform callback ----------------- */

typedef struct perf {
	int calls;
	int fail_first; /* answer RETRY to the first n calls */
} perf;

static int perform_cb(const inbox_outbox_item *it, inbox_effect_result *res,
                      void *payload)
{
	perf *p = payload;
	(void)it;
	memset(res, 0, sizeof(*res));
	res->outcome =
	    p->calls++ < p->fail_first ? INBOX_EFFECT_RETRY : INBOX_EFFECT_DONE;
	res->status = res->outcome == INBOX_EFFECT_DONE ? 200 : 503;
	return 0;
}

typedef struct ticks {
	int idle, progress;
	inbox_store *st;
	int64_t pending_at_idle;
} ticks;

static int on_tick(inbox_dispatcher *d, inbox_dispatch_event ev, void *payload)
{
	ticks *t = payload;
	(void)d;
	if (ev == INBOX_DISPATCH_PROGRESS)
		t->progress++;
	if (ev != INBOX_DISPATCH_IDLE)
		return 0;
	t->idle++;
	/* The store thread is idle: the store may be used here. */
	inbox_outbox_pending(t->st, NULL, &t->pending_at_idle, NULL);
	return t->pending_at_idle == 0;
}

static int handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	(void)p;
	const char *order;
	if (inbox_msg_get(m, "/id", &order))
		return INBOX_HANDLER_REJECT;
	inbox_outbox_effect e = INBOX_OUTBOX_EFFECT_INIT;
	e.step = "notify";
	e.kind = "callback";
	e.url = "http://callback.example/notify";
	e.idempotent = 1;
	return inbox_txn_outbox_add(t, &e, NULL, NULL) == INBOX_OK
	           ? INBOX_HANDLER_OK
	           : INBOX_HANDLER_RETRY;
}

static int run_with(int version, int concurrency, int rows, perf *pf, ticks *tk,
                    inbox_outbox_stats *s)
{
	char url[512];
	static int seq;
	snprintf(url, sizeof(url), "sqlite:%s/run%d.db", tmpdir, ++seq);
	inbox_store *st = NULL;
	if (inbox_store_open(&st, url, NULL) != INBOX_OK)
		return -1;
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = "c";
	co.handler = handler;
	inbox_consumer *c = NULL;
	int rc = inbox_consumer_open(&c, st, &co, NULL, 0);
	for (int i = 0; rc == INBOX_OK && i < rows; i++) {
		char js[64];
		snprintf(js, sizeof(js), "{\"id\":\"m%d\"}", i);
		inbox_delivery dl = INBOX_DELIVERY_INIT;
		dl.payload = js;
		dl.payload_len = strlen(js);
		inbox_result r = INBOX_RESULT_INIT;
		rc = inbox_consumer_process(c, &dl, &r);
	}
	inbox_consumer_close(c);
	inbox_dispatcher_options o = INBOX_DISPATCHER_OPTIONS_INIT;
	o.perform = perform_cb;
	o.perform_payload = pf;
	o.backoff_ms = 10;
	o.max_backoff_ms = 20;
	o.poll_ms = 10;
	o.on_tick = on_tick;
	o.tick_payload = tk;
	o.concurrency = concurrency;
	tk->st = st;
	/* A program built against version 1 hands a shorter struct: the
	 * dispatcher must read no more of it (ASan sees an over-read). */
	size_t size = version >= 2
	                  ? sizeof(o)
	                  : offsetof(inbox_dispatcher_options, concurrency);
	inbox_dispatcher_options *copy = malloc(size);
	memcpy(copy, &o, size);
	copy->version = (unsigned)version;
	inbox_dispatcher *d = NULL;
	if (rc == INBOX_OK)
		rc = inbox_dispatcher_open(&d, st, copy, NULL, 0);
	free(copy);
	volatile sig_atomic_t stop = 0;
	if (rc == INBOX_OK && version >= 2)
		rc = inbox_dispatcher_run(d, &stop);
	/* version 1: no on_tick, run_once rounds. */
	for (int i = 0; rc == INBOX_OK && version < 2 && i < 200; i++) {
		int n = 0;
		int64_t pending = 0;
		rc = inbox_dispatcher_run_once(d, &n);
		if (rc == INBOX_OK)
			rc = inbox_outbox_pending(st, NULL, &pending, NULL);
		if (pending == 0)
			break;
		if (n == 0)
			usleep(5000);
	}
	inbox_dispatcher_stats(d, s);
	inbox_dispatcher_close(d);
	inbox_store_close(st);
	return rc;
}

TEST(run_with_a_perform_callback)
{
	perf pf = {.fail_first = 3};
	ticks tk = {0};
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	ASSERT_OK(run_with(2, 32, 50, &pf, &tk, &s));
	ASSERT_EQ(s.claimed, 50 + 3);
	ASSERT_EQ(s.done, 50);
	ASSERT_EQ(s.attempts, 53);
	ASSERT_EQ(s.retries, 3);
	ASSERT_EQ(pf.calls, 53);
	ASSERT_TRUE(tk.progress > 0);
	ASSERT_TRUE(tk.idle >= 1);
	ASSERT_EQ(tk.pending_at_idle, 0); /* on_tick stopped the run */
}

TEST(run_one_at_a_time)
{
	perf pf = {0};
	ticks tk = {0};
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	ASSERT_OK(run_with(2, 1, 12, &pf, &tk, &s));
	ASSERT_EQ(s.done, 12);
	ASSERT_EQ(s.attempts, 12);
	/* One commit per outcome. */
	ASSERT_EQ(tk.progress, 12);
}

TEST(version_1_options)
{
	perf pf = {0};
	ticks tk = {0};
	inbox_outbox_stats s = INBOX_OUTBOX_STATS_INIT;
	ASSERT_OK(run_with(1, 0, 20, &pf, &tk, &s));
	ASSERT_EQ(s.done, 20);
	ASSERT_EQ(tk.idle, 0); /* no on_tick in version 1 */
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "%s/inbox-providers-XXXXXX",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpdir)) {
		printf("FAIL cannot make a temp dir\n");
		return 1;
	}
	RUN(names_are_scheme_host_port);
	RUN(settings_are_checked);
	RUN(breaker_opens_half_opens_and_closes);
	RUN(breaker_off_with_zero_failures);
	RUN(concurrency_caps_and_rate_limit);
	RUN(retry_after_holds_every_call);
	RUN(metrics_families);
	RUN(run_with_a_perform_callback);
	RUN(run_one_at_a_time);
	RUN(version_1_options);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", tmpdir);
	return test_summary();
}
