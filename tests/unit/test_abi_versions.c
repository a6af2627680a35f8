/*
 * Versioned structs (docs/abi.md, "Structs and vtables"): per kind of
 * entry point — an open taking options, a call filling an output struct,
 * an output array, an input array, an array the library allocates — the
 * oldest version is accepted and 0 (never set) or the next version (newer
 * headers than the library) is refused with INBOX_ERR_INVALID and the
 * reason, nothing done. An old-version struct is allocated at exactly that
 * version's size, so a read or write past it is an ASan error in the
 * sanitizer build.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <inbox/admin.h>
#include <inbox/metrics.h>
#include <inbox/outbox.h>
#include <inbox/source.h>

#include "test.h"

#define END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* The log events of the calls that have no handle to say it on. */
static char logged[4096];

static void on_log(inbox_log_level level, const char *consumer,
                   const char *event, const char *fields, void *payload)
{
	(void)level;
	(void)consumer;
	(void)payload;
	size_t n = strlen(logged);
	snprintf(logged + n, sizeof(logged) - n, "%s %s\n", event, fields);
}

static int applied(inbox_txn *t, const inbox_msg *m, void *p)
{
	(void)t;
	(void)m;
	(*(int *)p)++;
	return INBOX_HANDLER_OK;
}

static int calls;

/* The first n bytes of `full` (a struct of this build's headers) as a
 * program built with headers of version v hands them over: malloc'ed at
 * that size exactly, version v. */
static void *old_version(const void *full, size_t n, unsigned v)
{
	unsigned char *p = malloc(n);
	if (p) {
		memcpy(p, full, n);
		memcpy(p, &v, sizeof(v));
	}
	return p;
}

static int count_dl(const inbox_admin_dead_letter *dl, void *p)
{
	(void)dl;
	(*(int *)p)++;
	return 0;
}

static inbox_consumer *open_consumer(inbox_store *st)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "abi.versions";
	o.handler = applied;
	o.handler_payload = &calls;
	inbox_consumer *c = NULL;
	char err[300] = "";
	if (inbox_consumer_open(&c, st, &o, err, sizeof(err)) != INBOX_OK)
		fprintf(stderr, "  open: %s\n", err);
	return c;
}

static inbox_delivery delivery(const char *json)
{
	inbox_delivery d = INBOX_DELIVERY_INIT;
	d.payload = json;
	d.payload_len = strlen(json);
	return d;
}

/* ---- options at an open ---- */

TEST(consumer_options)
{
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, "sqlite::memory:", NULL));
	/* version 1 (no json_schema, batch timeout, max_deliveries): a
	 * struct of that size only */
	size_t n1 = END(inbox_consumer_options, handler_payload);
	inbox_consumer_options full = INBOX_CONSUMER_OPTIONS_INIT;
	full.name = "abi.v1";
	full.handler = applied;
	full.handler_payload = &calls;
	inbox_consumer_options *v1 = old_version(&full, n1, 1);
	ASSERT_TRUE(v1 != NULL);
	inbox_consumer *c = NULL;
	char err[300] = "";
	ASSERT_OK(inbox_consumer_open(&c, st, v1, err, sizeof(err)));
	inbox_consumer_close(c);
	free(v1);
	/* 0: never set */
	full.version = 0;
	c = (inbox_consumer *)&full; /* must be set to NULL */
	ASSERT_EQ(inbox_consumer_open(&c, st, &full, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(c == NULL);
	ASSERT_STREQ(err, "inbox_consumer_options.version is 0: set it with "
	                  "INBOX_CONSUMER_OPTIONS_INIT");
	/* newer than the library */
	full.version = INBOX_CONSUMER_OPTIONS_VERSION + 1;
	ASSERT_EQ(inbox_consumer_open(&c, st, &full, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	char want[128];
	snprintf(want, sizeof(want),
	         "inbox_consumer_options.version is %d, newer than this "
	         "library knows (%d)",
	         INBOX_CONSUMER_OPTIONS_VERSION + 1,
	         INBOX_CONSUMER_OPTIONS_VERSION);
	ASSERT_CONTAINS(err, want);
	inbox_store_close(st);
}

TEST(store_and_source_options_without_a_handle)
{
	logged[0] = '\0';
	ASSERT_OK(inbox_log_set(on_log, INBOX_LOG_DEBUG, NULL));
	/* store: version 1 (no timeouts) at its size */
	size_t n1 = END(inbox_store_options, busy_timeout_ms);
	inbox_store_options full = INBOX_STORE_OPTIONS_INIT;
	inbox_store_options *v1 = old_version(&full, n1, 1);
	ASSERT_TRUE(v1 != NULL);
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, "sqlite::memory:", v1));
	inbox_store_close(st);
	free(v1);
	full.version = 0;
	ASSERT_EQ(inbox_store_open(&st, "sqlite::memory:", &full),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(st == NULL);
	full.version = INBOX_STORE_OPTIONS_VERSION + 1;
	ASSERT_EQ(inbox_store_open(&st, "sqlite::memory:", &full),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(logged, "bad_version {\"struct\":"
	                        "\"inbox_store_options\",\"version\":0");
	ASSERT_CONTAINS(logged, "set it with INBOX_STORE_OPTIONS_INIT");
	ASSERT_CONTAINS(logged, "\"struct\":\"inbox_store_options\","
	                        "\"version\":3,\"max\":2");
	/* source */
	inbox_source_options so = INBOX_SOURCE_OPTIONS_INIT;
	so.consumer = "abi";
	inbox_source *src = NULL;
	ASSERT_OK(inbox_source_open(&src, "jsonl:/dev/null", &so));
	inbox_source_close(src);
	so.version = 0;
	ASSERT_EQ(inbox_source_open(&src, "jsonl:/dev/null", &so),
	          INBOX_ERR_INVALID);
	so.version = INBOX_SOURCE_OPTIONS_VERSION + 1;
	ASSERT_EQ(inbox_source_open(&src, "jsonl:/dev/null", &so),
	          INBOX_ERR_INVALID);
	ASSERT_TRUE(src == NULL);
	ASSERT_CONTAINS(logged, "\"struct\":\"inbox_source_options\","
	                        "\"version\":0");
	ASSERT_CONTAINS(logged, "\"struct\":\"inbox_source_options\","
	                        "\"version\":2");
	ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL));
}

TEST(runner_dispatcher_provider_filter_options)
{
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, "sqlite::memory:", NULL));
	inbox_consumer *c = open_consumer(st);
	ASSERT_TRUE(c != NULL);
	/* runner: refused before it polls anything */
	inbox_source_options so = INBOX_SOURCE_OPTIONS_INIT;
	so.consumer = "abi.versions";
	inbox_source *src = NULL;
	ASSERT_OK(inbox_source_open(&src, "jsonl:/dev/null", &so));
	inbox_runner_options ro = INBOX_RUNNER_OPTIONS_INIT;
	ASSERT_OK(inbox_run(c, src, &ro, NULL)); /* /dev/null: at its end */
	ro.version = 0;
	ASSERT_EQ(inbox_run(c, src, &ro, NULL), INBOX_ERR_INVALID);
	ro.version = INBOX_RUNNER_OPTIONS_VERSION + 1;
	ASSERT_EQ(inbox_run(c, src, &ro, NULL), INBOX_ERR_INVALID);
	inbox_source_close(src);
	/* dispatcher: version 1 (no concurrency, providers, on_tick) */
	size_t n1 = END(inbox_dispatcher_options, event_payload);
	inbox_dispatcher_options full = INBOX_DISPATCHER_OPTIONS_INIT;
	inbox_dispatcher_options *v1 = old_version(&full, n1, 1);
	ASSERT_TRUE(v1 != NULL);
	inbox_dispatcher *d = NULL;
	char err[300] = "";
	ASSERT_OK(inbox_dispatcher_open(&d, st, v1, err, sizeof(err)));
	free(v1);
	/* its counters: an output struct */
	inbox_outbox_stats *os = malloc(sizeof(*os));
	ASSERT_TRUE(os != NULL);
	memset(os, 0xab, sizeof(*os));
	os->version = INBOX_OUTBOX_STATS_VERSION;
	ASSERT_OK(inbox_dispatcher_stats(d, os));
	ASSERT_EQ(os->version, INBOX_OUTBOX_STATS_VERSION);
	ASSERT_EQ(os->claimed, 0);
	ASSERT_EQ(os->released, 0);
	os->version = 0;
	ASSERT_EQ(inbox_dispatcher_stats(d, os), INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_dispatcher_errmsg(d),
	                "inbox_outbox_stats.version is 0");
	os->version = INBOX_OUTBOX_STATS_VERSION + 1;
	ASSERT_EQ(inbox_dispatcher_stats(d, os), INBOX_ERR_INVALID);
	free(os);
	inbox_dispatcher_close(d);
	full.version = 0;
	ASSERT_EQ(inbox_dispatcher_open(&d, st, &full, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "inbox_dispatcher_options.version is 0");
	full.version = INBOX_DISPATCHER_OPTIONS_VERSION + 1;
	ASSERT_EQ(inbox_dispatcher_open(&d, st, &full, err, sizeof(err)),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(err, "newer than this library knows (2)");
	/* providers */
	inbox_provider_options po = INBOX_PROVIDER_OPTIONS_INIT;
	inbox_providers *r = NULL;
	ASSERT_OK(inbox_providers_open(&r, &po));
	ASSERT_OK(inbox_providers_set(r, "http://a.example", &po));
	po.version = 0;
	ASSERT_EQ(inbox_providers_set(r, "http://a.example", &po),
	          INBOX_ERR_INVALID);
	inbox_providers *r2 = NULL;
	ASSERT_EQ(inbox_providers_open(&r2, &po), INBOX_ERR_INVALID);
	po.version = INBOX_PROVIDER_OPTIONS_VERSION + 1;
	ASSERT_EQ(inbox_providers_open(&r2, &po), INBOX_ERR_INVALID);
	ASSERT_TRUE(r2 == NULL);
	/* the library-allocated array: in the version asked for (a
	 * registry lists a provider once it was called: none here; the
	 * elements' version is checked in test_providers' info_of) */
	inbox_provider_info *ps = NULL;
	size_t nps = 0;
	ASSERT_OK(
	    inbox_providers_info(r, INBOX_PROVIDER_INFO_VERSION, &ps, &nps));
	ASSERT_EQ(nps, 0);
	free(ps);
	ps = NULL;
	/* rendered by the first element's version */
	inbox_provider_info pi[1];
	memset(pi, 0, sizeof(pi));
	pi[0].version = INBOX_PROVIDER_INFO_VERSION;
	pi[0].name = "http://a.example:80";
	pi[0].calls = 3;
	char *out = NULL;
	size_t len = 0;
	ASSERT_OK(inbox_metrics_render_providers(&out, &len, pi, 1));
	ASSERT_CONTAINS(out, "inbox_provider_calls_total{provider=\"http://"
	                     "a.example:80\"} 3\n");
	free(out);
	pi[0].version = 0;
	ASSERT_EQ(inbox_metrics_render_providers(&out, &len, pi, 1),
	          INBOX_ERR_INVALID);
	pi[0].version = INBOX_PROVIDER_INFO_VERSION + 1;
	ASSERT_EQ(inbox_metrics_render_providers(&out, &len, pi, 1),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_providers_info(r, 0, &ps, &nps), INBOX_ERR_INVALID);
	ASSERT_EQ(
	    inbox_providers_info(r, INBOX_PROVIDER_INFO_VERSION + 1, &ps, &nps),
	    INBOX_ERR_INVALID);
	ASSERT_TRUE(ps == NULL);
	inbox_providers_close(r);
	/* the dead-letter filter: version 1 (no messages_only) */
	size_t f1 = END(inbox_admin_dlq_filter, pending_only);
	inbox_admin_dlq_filter ff = INBOX_ADMIN_DLQ_FILTER_INIT;
	inbox_admin_dlq_filter *fv1 = old_version(&ff, f1, 1);
	ASSERT_TRUE(fv1 != NULL);
	int k = 0;
	ASSERT_OK(inbox_admin_dlq_list(st, fv1, count_dl, &k));
	free(fv1);
	ff.version = 0;
	ASSERT_EQ(inbox_admin_dlq_list(st, &ff, count_dl, &k),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_store_errmsg(st),
	                "inbox_admin_dlq_filter.version is 0");
	ff.version = INBOX_ADMIN_DLQ_FILTER_VERSION + 1;
	ASSERT_EQ(inbox_admin_dlq_list(st, &ff, count_dl, &k),
	          INBOX_ERR_INVALID);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* ---- output structs and the output array ---- */

TEST(output_structs)
{
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, "sqlite::memory:", NULL));
	inbox_consumer *c = open_consumer(st);
	ASSERT_TRUE(c != NULL);
	inbox_delivery d = delivery("{\"id\":\"o-1\"}");
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_OK(inbox_consumer_process(c, &d, &r));
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	/* consumer counters, at their size exactly */
	inbox_stats *s = malloc(sizeof(*s));
	ASSERT_TRUE(s != NULL);
	memset(s, 0xab, sizeof(*s));
	s->version = INBOX_STATS_VERSION;
	ASSERT_OK(inbox_consumer_stats(c, s));
	ASSERT_EQ(s->version, INBOX_STATS_VERSION);
	ASSERT_EQ(s->applied, 1);
	ASSERT_EQ(s->messages, 1);
	s->version = 0;
	ASSERT_EQ(inbox_consumer_stats(c, s), INBOX_ERR_INVALID);
	ASSERT_STREQ(inbox_consumer_errmsg(c), "inbox_stats.version is 0: set "
	                                       "it with INBOX_STATS_INIT");
	s->version = INBOX_STATS_VERSION + 1;
	ASSERT_EQ(inbox_consumer_stats(c, s), INBOX_ERR_INVALID);
	char newer[96];
	snprintf(newer, sizeof(newer),
	         "inbox_stats.version is %d, newer than this library",
	         INBOX_STATS_VERSION + 1);
	ASSERT_CONTAINS(inbox_consumer_errmsg(c), newer);
	/* a caller built against version 1 gets version 1's bytes only:
	 * `skipped` (version 2) is not written */
	memset(s, 0xab, sizeof(*s));
	s->version = 1;
	ASSERT_OK(inbox_consumer_stats(c, s));
	ASSERT_EQ(s->applied, 1);
	ASSERT_TRUE(s->skipped == 0xababababababababULL);
	free(s);
	/* the store's numbers */
	inbox_admin_stats a = INBOX_ADMIN_STATS_INIT;
	ASSERT_OK(inbox_admin_stats_read(st, "abi.versions", &a));
	ASSERT_EQ(a.version, INBOX_ADMIN_STATS_VERSION);
	ASSERT_EQ(a.completed, 1);
	ASSERT_TRUE(inbox_admin_headroom_ms(&a) != INT64_MAX);
	a.version = 0;
	ASSERT_EQ(inbox_admin_headroom_ms(&a), INT64_MAX);
	ASSERT_EQ(inbox_admin_stats_read(st, "abi.versions", &a),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_store_errmsg(st),
	                "inbox_admin_stats.version is 0");
	a.version = INBOX_ADMIN_STATS_VERSION + 1;
	ASSERT_EQ(inbox_admin_stats_read(st, "abi.versions", &a),
	          INBOX_ERR_INVALID);
	inbox_admin_generations g = INBOX_ADMIN_GENERATIONS_INIT;
	ASSERT_OK(inbox_admin_generations_read(st, &g));
	g.version = 0;
	ASSERT_EQ(inbox_admin_generations_read(st, &g), INBOX_ERR_INVALID);
	/* the outbox's counts: filled by the backend into the library's
	 * struct, copied out at the caller's size */
	inbox_outbox_counts *oc = malloc(sizeof(*oc));
	ASSERT_TRUE(oc != NULL);
	memset(oc, 0xab, sizeof(*oc));
	oc->version = INBOX_OUTBOX_COUNTS_VERSION;
	ASSERT_OK(inbox_outbox_counts_get(st, NULL, oc));
	ASSERT_EQ(oc->version, INBOX_OUTBOX_COUNTS_VERSION);
	ASSERT_EQ(oc->pending, 0);
	oc->version = 0;
	ASSERT_EQ(inbox_outbox_counts_get(st, NULL, oc), INBOX_ERR_INVALID);
	oc->version = INBOX_OUTBOX_COUNTS_VERSION + 1;
	ASSERT_EQ(inbox_outbox_counts_get(st, NULL, oc), INBOX_ERR_INVALID);
	free(oc);
	/* a replay's result */
	inbox_result rr = INBOX_RESULT_INIT;
	rr.version = 0;
	ASSERT_EQ(inbox_admin_dlq_replay(st, c, 1, &rr), INBOX_ERR_INVALID);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

TEST(result_array)
{
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, "sqlite::memory:", NULL));
	inbox_consumer *c = open_consumer(st);
	ASSERT_TRUE(c != NULL);
	inbox_delivery d[3] = {delivery("{\"id\":\"a-1\"}"),
	                       delivery("{\"id\":\"a-2\"}"),
	                       delivery("{\"id\":\"a-3\"}")};
	/* refused, nothing processed: the messages are new afterwards */
	inbox_result *res = malloc(3 * sizeof(*res));
	ASSERT_TRUE(res != NULL);
	memset(res, 0, 3 * sizeof(*res));
	calls = 0;
	ASSERT_EQ(inbox_consumer_process_batch(c, d, 3, res),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_consumer_errmsg(c), "inbox_result.version is 0");
	res[0].version = INBOX_RESULT_VERSION + 1;
	ASSERT_EQ(inbox_consumer_process_batch(c, d, 3, res),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(calls, 0);
	/* the first element's version is the array's: the others get it */
	memset(res, 0xab, 3 * sizeof(*res));
	res[0].version = INBOX_RESULT_VERSION;
	ASSERT_OK(inbox_consumer_process_batch(c, d, 3, res));
	ASSERT_EQ(calls, 3);
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(res[i].version, INBOX_RESULT_VERSION);
		ASSERT_EQ(res[i].outcome, INBOX_APPLIED);
		ASSERT_EQ(res[i].dead_letter_id, 0);
	}
	ASSERT_STREQ(res[2].key, "a-3");
	/* version 1 (before stored results): an array of that size only,
	 * stepped through by it (ASan sees any write past it) */
	size_t v1 = END(inbox_result, dead_letter_id);
	unsigned char *old = malloc(3 * v1);
	ASSERT_TRUE(old != NULL);
	memset(old, 0xab, 3 * v1);
	((inbox_result *)(void *)old)->version = 1;
	ASSERT_OK(
	    inbox_consumer_process_batch(c, d, 3, (inbox_result *)(void *)old));
	for (int i = 0; i < 3; i++) {
		const inbox_result *o =
		    (const inbox_result *)(const void *)(old + (size_t)i * v1);
		ASSERT_EQ(o->version, 1);
		ASSERT_EQ(o->outcome, INBOX_DUPLICATE);
	}
	free(old);
	/* settle reads the array by its first element's version too */
	inbox_source_options so = INBOX_SOURCE_OPTIONS_INIT;
	so.consumer = "abi";
	inbox_source *src = NULL;
	char path[] = "/tmp/inbox-abi-XXXXXX";
	int fd = mkstemp(path);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n", 24), 24);
	close(fd);
	char url[64], ck[80];
	snprintf(ck, sizeof(ck), "%s.ck", path);
	snprintf(url, sizeof(url), "jsonl:%s?checkpoint=%s", path, ck);
	ASSERT_OK(inbox_source_open(&src, url, &so));
	inbox_delivery sd[3] = {INBOX_DELIVERY_INIT};
	size_t n = 0;
	ASSERT_OK(inbox_source_poll(src, sd, 3, &n, 0, NULL));
	ASSERT_EQ(n, 3);
	res[0].version = 0;
	ASSERT_EQ(inbox_source_settle(src, sd, res, 3), INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "version");
	/* a version 1 array (exactly that size) settles: the source reads
	 * it widened, so all three are acked and none comes back */
	inbox_source_close(src);
	src = NULL;
	ASSERT_OK(inbox_source_open(&src, url, &so));
	ASSERT_OK(inbox_source_poll(src, sd, 3, &n, 0, NULL));
	ASSERT_EQ(n, 3);
	size_t v1s = END(inbox_result, dead_letter_id);
	unsigned char *old1 = calloc(3, v1s);
	ASSERT_TRUE(old1 != NULL);
	for (int i = 0; i < 3; i++) {
		unsigned one = 1;
		inbox_outcome ap = INBOX_APPLIED;
		unsigned char *o = old1 + (size_t)i * v1s;
		memcpy(o + offsetof(inbox_result, version), &one, sizeof(one));
		memcpy(o + offsetof(inbox_result, outcome), &ap, sizeof(ap));
	}
	ASSERT_OK(
	    inbox_source_settle(src, sd, (inbox_result *)(void *)old1, 3));
	free(old1);
	inbox_source_close(src);
	src = NULL;
	ASSERT_OK(inbox_source_open(&src, url, &so));
	ASSERT_OK(inbox_source_poll(src, sd, 3, &n, 0, NULL));
	ASSERT_EQ(n, 0);
	inbox_source_close(src);
	unlink(path);
	unlink(ck);
	free(res);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* ---- deliveries: an input array (every element) and poll's output
 * array (the first element) ---- */

TEST(delivery_array)
{
	inbox_store *st = NULL;
	ASSERT_OK(inbox_store_open(&st, "sqlite::memory:", NULL));
	inbox_consumer *c = open_consumer(st);
	ASSERT_TRUE(c != NULL);
	inbox_delivery d[3] = {delivery("{\"id\":\"d-1\"}"),
	                       delivery("{\"id\":\"d-2\"}"),
	                       delivery("{\"id\":\"d-3\"}")};
	inbox_result res[3] = {INBOX_RESULT_INIT};
	calls = 0;
	/* never set, newer, or mixed: refused, nothing processed */
	d[0].version = 0;
	ASSERT_EQ(inbox_consumer_process_batch(c, d, 3, res),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_consumer_errmsg(c),
	                "inbox_delivery.version is 0: set it with "
	                "INBOX_DELIVERY_INIT");
	ASSERT_EQ(inbox_consumer_process(c, d, res), INBOX_ERR_INVALID);
	inbox_lease *l = NULL;
	inbox_outcome o = INBOX_OUTCOME_NONE;
	ASSERT_EQ(inbox_lease_acquire(c, d, &l, &o), INBOX_ERR_INVALID);
	ASSERT_TRUE(l == NULL);
	d[0].version = INBOX_DELIVERY_VERSION + 1;
	ASSERT_EQ(inbox_consumer_process_batch(c, d, 3, res),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_consumer_errmsg(c), "newer than this library");
	d[0].version = INBOX_DELIVERY_VERSION;
	d[2].version = 0;
	ASSERT_EQ(inbox_consumer_process_batch(c, d, 3, res),
	          INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_consumer_errmsg(c),
	                "inbox_delivery.version of element 2 is 0");
	ASSERT_EQ(calls, 0);
	d[2].version = INBOX_DELIVERY_VERSION;
	ASSERT_OK(inbox_consumer_process_batch(c, d, 3, res));
	ASSERT_EQ(calls, 3);
	ASSERT_EQ(res[2].outcome, INBOX_APPLIED);

	/* poll: out[0].version says the layout; every delivery gets it */
	inbox_source_options so = INBOX_SOURCE_OPTIONS_INIT;
	so.consumer = "abi";
	inbox_source *src = NULL;
	char path[] = "/tmp/inbox-abi-XXXXXX";
	int fd = mkstemp(path);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n", 24), 24);
	close(fd);
	char url[64], ck[80];
	snprintf(ck, sizeof(ck), "%s.ck", path);
	snprintf(url, sizeof(url), "jsonl:%s?checkpoint=%s", path, ck);
	ASSERT_OK(inbox_source_open(&src, url, &so));
	inbox_delivery sd[3];
	memset(sd, 0, sizeof(sd));
	size_t n = 9;
	ASSERT_EQ(inbox_source_poll(src, sd, 3, &n, 0, NULL),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(n, 0);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "inbox_delivery.version");
	sd[0].version = INBOX_DELIVERY_VERSION + 1;
	ASSERT_EQ(inbox_source_poll(src, sd, 3, &n, 0, NULL),
	          INBOX_ERR_INVALID);
	sd[0].version = INBOX_DELIVERY_VERSION;
	ASSERT_OK(inbox_source_poll(src, sd, 3, &n, 0, NULL));
	ASSERT_EQ(n, 3);
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(sd[i].version, INBOX_DELIVERY_VERSION);
	/* settle reads the deliveries by their version too: an unknown
	 * one acks nothing (the batch comes again) */
	sd[0].version = 0;
	ASSERT_EQ(inbox_source_settle(src, sd, res, 3), INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "inbox_delivery.version");
	inbox_source_close(src);
	unlink(path);
	unlink(ck);
	inbox_consumer_close(c);
	inbox_store_close(st);
}

/* ---- the input array of the metrics ---- */

TEST(metrics_consumer_array)
{
	inbox_stats s = INBOX_STATS_INIT;
	s.applied = 7;
	inbox_metrics_consumer cs[2] = {INBOX_METRICS_CONSUMER_INIT,
	                                INBOX_METRICS_CONSUMER_INIT};
	cs[0].name = "one";
	cs[0].counters = &s;
	cs[1].name = "two";
	char *out = NULL;
	size_t len = 0;
	ASSERT_OK(inbox_metrics_render(&out, &len, cs, 2));
	ASSERT_CONTAINS(out, "inbox_applied_total{consumer=\"one\"} 7\n");
	ASSERT_TRUE(!strstr(out, "inbox_applied_total{consumer=\"two\"}"));
	/* INIT: running unknown, so no consumer_up sample */
	ASSERT_TRUE(!strstr(out, "inbox_consumer_up{"));
	free(out);
	logged[0] = '\0';
	ASSERT_OK(inbox_log_set(on_log, INBOX_LOG_DEBUG, NULL));
	/* the first element's version: 0, newer */
	cs[0].version = 0;
	ASSERT_EQ(inbox_metrics_render(&out, &len, cs, 2), INBOX_ERR_INVALID);
	cs[0].version = INBOX_METRICS_CONSUMER_VERSION + 1;
	ASSERT_EQ(inbox_metrics_render(&out, &len, cs, 2), INBOX_ERR_INVALID);
	/* elements of different versions */
	cs[0].version = INBOX_METRICS_CONSUMER_VERSION;
	cs[1].version = 0;
	ASSERT_EQ(inbox_metrics_render(&out, &len, cs, 2), INBOX_ERR_INVALID);
	cs[1].version = INBOX_METRICS_CONSUMER_VERSION;
	/* a struct it points to, by its own version */
	s.version = 0;
	ASSERT_EQ(inbox_metrics_render(&out, &len, cs, 2), INBOX_ERR_INVALID);
	ASSERT_TRUE(out == NULL);
	ASSERT_CONTAINS(logged, "\"struct\":\"inbox_metrics_consumer\","
	                        "\"version\":0");
	ASSERT_CONTAINS(logged, "\"struct\":\"inbox_metrics_consumer\","
	                        "\"version\":3");
	ASSERT_CONTAINS(logged, "\"struct\":\"inbox_stats\",\"version\":0");
	ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL));
	/* An array of version 1 (built before estimated, lag, lag_bytes):
	 * read with its own stride, no lag shown. */
	s.version = INBOX_STATS_VERSION;
	struct v1 {
		unsigned version;
		const char *name;
		const inbox_stats *counters;
		const inbox_admin_stats *store;
		int running;
		const inbox_outbox_stats *outbox;
		const inbox_admin_generations *generations;
	} one[2] = {{1, "one", &s, NULL, -1, NULL, NULL},
	            {1, "two", NULL, NULL, 1, NULL, NULL}};
	ASSERT_OK(inbox_metrics_render(
	    &out, &len, (const inbox_metrics_consumer *)(const void *)one, 2));
	ASSERT_CONTAINS(out, "inbox_applied_total{consumer=\"one\"} 7\n");
	ASSERT_CONTAINS(out, "inbox_consumer_up{consumer=\"two\"} 1\n");
	ASSERT_TRUE(!strstr(out, "inbox_source_lag"));
	free(out);
}

int main(void)
{
	RUN(consumer_options);
	RUN(store_and_source_options_without_a_handle);
	RUN(runner_dispatcher_provider_filter_options);
	RUN(output_structs);
	RUN(result_array);
	RUN(delivery_array);
	RUN(metrics_consumer_array);
	return test_summary();
}
