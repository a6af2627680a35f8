/*
 * The log callback (<inbox/log.h>): the runner's and the JSONL source's
 * events reach it with the right level, consumer, event and fields; the
 * minimum level filters; with none installed nothing reaches stdout or
 * stderr, not even what a client library (librdkafka) would print; it
 * can be replaced while threads log, and once inbox_log_set() returns the
 * old one is never called again.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <inbox/inbox.h>
#include <inbox/sys/source.h>

#include "base/log.h"
#include "test.h"

static char tmpdir[256];

/* ---- a callback that records what it gets ---------------------------- */

#define MAXEV 64

typedef struct event {
	int level;
	char consumer[64]; /* "(null)" for NULL */
	char name[64];
	char fields[8192];
} event;

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static event evs[MAXEV];
static int nev;

static void record(inbox_log_level level, const char *consumer,
                   const char *name, const char *fields, void *payload)
{
	(void)payload;
	pthread_mutex_lock(&ev_mu);
	if (nev < MAXEV) {
		event *e = &evs[nev++];
		e->level = (int)level;
		snprintf(e->consumer, sizeof(e->consumer), "%s",
		         consumer ? consumer : "(null)");
		snprintf(e->name, sizeof(e->name), "%s", name ? name : "NULL");
		snprintf(e->fields, sizeof(e->fields), "%s",
		         fields ? fields : "NULL");
	}
	pthread_mutex_unlock(&ev_mu);
}

static void reset_events(void)
{
	pthread_mutex_lock(&ev_mu);
	nev = 0;
	pthread_mutex_unlock(&ev_mu);
}

static const event *find_event(const char *name)
{
	for (int i = 0; i < nev; i++)
		if (strcmp(evs[i].name, name) == 0)
			return &evs[i];
	return NULL;
}

/* 1 if text is one JSON object. */
static int is_object(const char *text)
{
	json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	int ok = j && json_is_object(j);
	json_decref(j);
	return ok;
}

/* ---- a source whose first poll fails (the runner logs poll_failed) --- */

typedef struct flaky {
	inbox_source base;
	int polls;
} flaky;

static int flaky_open(inbox_source **out, const char *url,
                      const inbox_source_options *opts)
{
	(void)url;
	(void)opts;
	flaky *f = calloc(1, sizeof(*f));
	*out = f ? &f->base : NULL;
	return f ? INBOX_OK : INBOX_ERR_NOMEM;
}

static void flaky_close(inbox_source *src)
{
	free(src);
}

static int flaky_poll(inbox_source *src, inbox_delivery *out, size_t max,
                      size_t *n, int timeout_ms, int *eof)
{
	flaky *f = (flaky *)src;
	(void)out;
	(void)max;
	(void)timeout_ms;
	*n = 0;
	if (f->polls++ == 0) {
		inbox__source_seterr(src, "flaky: the \"broker\" went away");
		return INBOX_ERR_SOURCE;
	}
	*eof = 1;
	return INBOX_OK;
}

static int flaky_settle(inbox_source *src, const inbox_result *res, size_t n)
{
	return INBOX_OK;
}

static const inbox_source_vtable flaky_vt = {
    INBOX_SOURCE_VTABLE_VERSION,
    "flaky",
    flaky_open,
    flaky_close,
    flaky_poll,
    flaky_settle,
    NULL,
    NULL, /* client_version */
    NULL, /* alias */
    NULL, /* check */
};

static int noop_handler(inbox_txn *t, const inbox_msg *m, void *payload)
{
	return INBOX_HANDLER_OK;
}

/* inbox_run over the flaky source: one poll_failed event. */
static int run_flaky(void)
{
	char err[256];
	inbox_store *st = NULL;
	inbox_consumer *c = NULL;
	inbox_source *src = NULL;
	int rc = inbox_store_open(&st, "sqlite::memory:", NULL);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = "log.test";
	co.handler = noop_handler;
	if (rc == 0)
		rc = inbox_consumer_open(&c, st, &co, err, sizeof(err));
	inbox_source_options so = INBOX_SOURCE_OPTIONS_INIT;
	so.consumer = "log.test";
	if (rc == 0)
		rc = inbox_source_open(&src, "flaky:", &so);
	inbox_runner_options ro = INBOX_RUNNER_OPTIONS_INIT;
	ro.backoff_initial_ms = 1;
	if (rc == 0)
		rc = inbox_run(c, src, &ro, NULL);
	inbox_source_close(src);
	inbox_consumer_close(c);
	inbox_store_close(st);
	return rc;
}

/* A JSONL source whose checkpoint lies beyond the end of its file: open
 * logs jsonl_restart. */
static int open_restarting_jsonl(void)
{
	char path[512], ck[512], url[1100];
	snprintf(path, sizeof(path), "%s/in.jsonl", tmpdir);
	snprintf(ck, sizeof(ck), "%s/in.ck", tmpdir);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs("{\"id\":\"a\"}\n{\"id\":\"b\"}\n", f);
	fclose(f);
	if (!(f = fopen(ck, "w")))
		return -1;
	fputs("99999 7\n", f);
	fclose(f);
	snprintf(url, sizeof(url), "jsonl:%s?checkpoint=%s", path, ck);
	inbox_source_options so = INBOX_SOURCE_OPTIONS_INIT;
	so.consumer = "log.jsonl";
	inbox_source *src = NULL;
	int rc = inbox_source_open(&src, url, &so);
	inbox_source_close(src);
	return rc;
}

/* A Kafka source whose broker refuses connections (a port nobody listens
 * on), polled ~1.5 s: librdkafka logs the refused connection, which it
 * would print on stderr by itself. */
static int poll_dead_kafka(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t alen = sizeof(a);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(s, (struct sockaddr *)&a, &alen) < 0)
		return -1;
	close(s); /* bound, never listened: connections are refused */
	char url[200];
	snprintf(url, sizeof(url),
	         "kafka://127.0.0.1:%d/log_test?open_timeout_ms=0"
	         "&rdkafka.reconnect.backoff.ms=50",
	         ntohs(a.sin_port));
	inbox_source_options so = INBOX_SOURCE_OPTIONS_INIT;
	so.consumer = "log.kafka";
	inbox_source *src = NULL;
	int rc = inbox_source_open(&src, url, &so);
	for (int i = 0; rc == 0 && i < 15; i++) {
		inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
		size_t n = 0;
		int eof = 0;
		/* a refused broker is an infrastructure fault: retried */
		inbox_source_poll(src, d, 4, &n, 100, &eof);
		if (n)
			rc = -1;
	}
	inbox_source_close(src);
	return rc;
}

/* ---- tests ----------------------------------------------------------- */

TEST(level_names)
{
	inbox_log_level l = INBOX_LOG_ERROR;
	ASSERT_OK(inbox_log_level_parse("debug", &l));
	ASSERT_EQ(l, INBOX_LOG_DEBUG);
	ASSERT_OK(inbox_log_level_parse("warn", &l));
	ASSERT_EQ(l, INBOX_LOG_WARN);
	const char *bad[] = {"", "Info", "warning", "info ", "verbose", NULL};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		ASSERT_EQ(inbox_log_level_parse(bad[i], &l), INBOX_ERR_INVALID);
		ASSERT_EQ(l, INBOX_LOG_WARN); /* untouched */
	}
	for (int i = INBOX_LOG_DEBUG; i <= INBOX_LOG_ERROR; i++) {
		ASSERT_OK(inbox_log_level_parse(inbox_log_level_name(i), &l));
		ASSERT_EQ(l, i);
	}
	ASSERT_TRUE(inbox_log_level_name(4) == NULL);
	ASSERT_TRUE(inbox_log_level_name(-1) == NULL);
	ASSERT_EQ(inbox_log_set(record, (inbox_log_level)4, NULL),
	          INBOX_ERR_INVALID);
	ASSERT_EQ(inbox_log_set(record, (inbox_log_level)-1, NULL),
	          INBOX_ERR_INVALID);
}

TEST(runner_event_reaches_the_callback)
{
	reset_events();
	ASSERT_OK(inbox_log_set(record, INBOX_LOG_DEBUG, NULL));
	ASSERT_OK(run_flaky());
	ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL));
	const event *e = find_event("poll_failed");
	ASSERT_TRUE(e != NULL);
	ASSERT_EQ(e->level, INBOX_LOG_WARN);
	ASSERT_STREQ(e->consumer, "log.test");
	ASSERT_STREQ(e->fields, "{\"error\":\"flaky: the \\\"broker\\\" went "
	                        "away\"}");
	ASSERT_TRUE(is_object(e->fields));
}

TEST(jsonl_event_reaches_the_callback)
{
	reset_events();
	ASSERT_OK(inbox_log_set(record, INBOX_LOG_INFO, NULL));
	ASSERT_OK(open_restarting_jsonl());
	ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_INFO, NULL));
	const event *e = find_event("jsonl_restart");
	ASSERT_TRUE(e != NULL);
	ASSERT_EQ(e->level, INBOX_LOG_WARN);
	ASSERT_STREQ(e->consumer, "log.jsonl");
	ASSERT_TRUE(is_object(e->fields));
	json_t *j = json_loads(e->fields, 0, NULL);
	ASSERT_TRUE(j != NULL);
	char want[600];
	snprintf(want, sizeof(want), "%s/in.jsonl", tmpdir);
	const char *path = json_string_value(json_object_get(j, "path"));
	const char *why = json_string_value(json_object_get(j, "reason"));
	int path_ok = path && strcmp(path, want) == 0;
	int why_ok = why && strstr(why, "beyond the end");
	json_decref(j);
	ASSERT_TRUE(path_ok);
	ASSERT_TRUE(why_ok);
}

TEST(min_level_filters)
{
	reset_events();
	ASSERT_OK(inbox_log_set(record, INBOX_LOG_ERROR, NULL));
	ASSERT_TRUE(!inbox__log_enabled(INBOX_LOG_WARN));
	ASSERT_TRUE(inbox__log_enabled(INBOX_LOG_ERROR));
	ASSERT_OK(run_flaky()); /* poll_failed is a warning */
	inbox__log(INBOX_LOG_ERROR, "x", "\"event\":\"kept\"");
	ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL));
	ASSERT_TRUE(!inbox__log_enabled(INBOX_LOG_ERROR));
	ASSERT_EQ(nev, 1);
	ASSERT_STREQ(evs[0].name, "kept");
	ASSERT_STREQ(evs[0].fields, "{}");
}

/* Runs f with fds 1 and 2 on a file; the bytes written there. */
static long captured(int (*f)(void), int *rc)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/captured", tmpdir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	int out = dup(1), err = dup(2);
	dup2(fd, 1);
	dup2(fd, 2);
	*rc = f();
	fflush(stdout);
	fflush(stderr);
	dup2(out, 1);
	dup2(err, 2);
	close(out);
	close(err);
	struct stat sb;
	long size = fstat(fd, &sb) == 0 ? (long)sb.st_size : -1;
	close(fd);
	return size;
}

static int both_events(void)
{
	int rc = run_flaky();
	return rc ? rc : open_restarting_jsonl();
}

TEST(nothing_printed_without_a_callback)
{
	reset_events();
	ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL));
	int rc = -1;
	ASSERT_EQ(captured(both_events, &rc), 0);
	ASSERT_OK(rc);
	ASSERT_EQ(nev, 0);
	/* and the same calls do raise events when one is installed */
	ASSERT_OK(inbox_log_set(record, INBOX_LOG_DEBUG, NULL));
	ASSERT_EQ(captured(both_events, &rc), 0);
	ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL));
	ASSERT_OK(rc);
	ASSERT_TRUE(find_event("poll_failed") != NULL);
	ASSERT_TRUE(find_event("jsonl_restart") != NULL);
}

TEST(kafka_log_is_routed)
{
	/* none installed: librdkafka's lines are not printed either */
	reset_events();
	ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL));
	int rc = -1;
	ASSERT_EQ(captured(poll_dead_kafka, &rc), 0);
	ASSERT_OK(rc);
	ASSERT_EQ(nev, 0);
	/* installed: they arrive as kafka_log events of the consumer */
	ASSERT_OK(inbox_log_set(record, INBOX_LOG_DEBUG, NULL));
	ASSERT_EQ(captured(poll_dead_kafka, &rc), 0);
	ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL));
	ASSERT_OK(rc);
	const event *e = find_event("kafka_log");
	ASSERT_TRUE(e != NULL);
	ASSERT_STREQ(e->consumer, "log.kafka");
	ASSERT_TRUE(is_object(e->fields));
	json_t *j = json_loads(e->fields, 0, NULL);
	ASSERT_TRUE(j != NULL);
	json_int_t sl = json_integer_value(json_object_get(j, "syslog_level"));
	int has = json_is_integer(json_object_get(j, "syslog_level")) &&
	          json_is_string(json_object_get(j, "facility")) &&
	          json_is_string(json_object_get(j, "client")) &&
	          json_is_string(json_object_get(j, "message"));
	json_decref(j);
	ASSERT_TRUE(has);
	/* the level follows the syslog level (kafka.h) */
	int want = sl <= 2   ? INBOX_LOG_ERROR
	           : sl <= 4 ? INBOX_LOG_WARN
	           : sl <= 6 ? INBOX_LOG_INFO
	                     : INBOX_LOG_DEBUG;
	ASSERT_EQ(e->level, want);
	/* the refused connection itself: syslog 3, a warning (retried) */
	int refused = 0;
	for (int i = 0; i < nev; i++)
		if (strcmp(evs[i].name, "kafka_log") == 0 &&
		    strstr(evs[i].fields, "\"syslog_level\":3,") &&
		    evs[i].level == INBOX_LOG_WARN)
			refused = 1;
	ASSERT_TRUE(refused);
}

TEST(event_shapes)
{
	reset_events();
	ASSERT_OK(inbox_log_set(record, INBOX_LOG_DEBUG, NULL));
	inbox__log(INBOX_LOG_INFO, NULL, "\"event\":\"bare\"");
	inbox__log(INBOX_LOG_INFO, "", "\"event\":\"empty_consumer\",\"n\":%d",
	           7);
	/* longer than the stack buffer: passed whole, still JSON */
	char *big = malloc(6001);
	ASSERT_TRUE(big != NULL);
	memset(big, 'x', 6000);
	big[6000] = '\0';
	inbox__log(INBOX_LOG_DEBUG, "c", "\"event\":\"big\",\"s\":\"%s\"", big);
	free(big);
	inbox__log(INBOX_LOG_INFO, "c", "\"n\":1"); /* no name first */
	ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL));
	ASSERT_EQ(nev, 4);
	ASSERT_STREQ(evs[0].name, "bare");
	ASSERT_STREQ(evs[0].consumer, "(null)");
	ASSERT_STREQ(evs[0].fields, "{}");
	ASSERT_STREQ(evs[1].consumer, "(null)");
	ASSERT_STREQ(evs[1].fields, "{\"n\":7}");
	ASSERT_STREQ(evs[2].name, "big");
	ASSERT_EQ(strlen(evs[2].fields), 6000 + strlen("{\"s\":\"\"}"));
	ASSERT_TRUE(is_object(evs[2].fields));
	ASSERT_STREQ(evs[3].name, "log");
	ASSERT_STREQ(evs[3].fields, "{\"n\":1}");
}

TEST(escape)
{
	ASSERT_STREQ(inbox__log_escape("a\"b\\c\n\x01"),
	             "a\\\"b\\\\c\\u000a\\u0001");
	ASSERT_STREQ(inbox__log_escape(NULL), "");
	/* a long text is cut on a character boundary: still UTF-8 */
	char s[1400] = "";
	for (int i = 0; i < 600; i++)
		strcat(s, i % 2 ? "\xc3\xa9" : "a"); /* é */
	const char *e = inbox__log_escape(s);
	size_t n = strlen(e);
	ASSERT_TRUE(n > 400 && n < 512);
	char quoted[600];
	snprintf(quoted, sizeof(quoted), "\"%s\"", e);
	json_t *j = json_loads(quoted, JSON_DECODE_ANY, NULL);
	ASSERT_TRUE(j != NULL); /* jansson refuses invalid UTF-8 */
	json_decref(j);
	/* bytes that are not UTF-8 (a lone continuation, an overlong lead, a
	 * sequence cut short) become the text \\xHH, a valid JSON string;
	 * a valid character beside them stays as it is */
	e = inbox__log_escape("f\xffo\x80\xc3\xa9\xe2\x82");
	ASSERT_STREQ(e, "f\\\\xffo\\\\x80\xc3\xa9\\\\xe2\\\\x82");
	snprintf(quoted, sizeof(quoted), "\"%s\"", e);
	j = json_loads(quoted, JSON_DECODE_ANY, NULL);
	ASSERT_TRUE(j != NULL);
	ASSERT_STREQ(json_string_value(j), "f\\xffo\\x80\xc3\xa9\\xe2\\x82");
	json_decref(j);
	char small[12];
	ASSERT_STREQ(
	    inbox__log_escape_into(small, sizeof(small), "abcdefghijklmnop"),
	    "abcde");
	/* four results live at once, per thread */
	const char *a = inbox__log_escape("1"), *b = inbox__log_escape("2");
	const char *c = inbox__log_escape("3"), *d = inbox__log_escape("4");
	ASSERT_STREQ(a, "1");
	ASSERT_STREQ(b, "2");
	ASSERT_STREQ(c, "3");
	ASSERT_STREQ(d, "4");
}

/* ---- replacing the callback from inside it, and while threads log ---- */

static int inner_rc;

static void reentrant(inbox_log_level level, const char *consumer,
                      const char *name, const char *fields, void *payload)
{
	inner_rc = inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL);
	/* what the callback's own thread raises meanwhile is dropped */
	inbox__log(INBOX_LOG_ERROR, NULL, "\"event\":\"recursion\"");
	record(level, consumer, name, fields, payload);
}

TEST(set_from_the_callback_is_refused)
{
	reset_events();
	inner_rc = 0;
	ASSERT_OK(inbox_log_set(reentrant, INBOX_LOG_DEBUG, NULL));
	inbox__log(INBOX_LOG_INFO, NULL, "\"event\":\"outer\"");
	ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL));
	ASSERT_EQ(inner_rc, INBOX_ERR_STATE);
	ASSERT_EQ(nev, 1);
	ASSERT_STREQ(evs[0].name, "outer");
}

typedef struct counter {
	atomic_long calls;
	atomic_long wrong_payload;
	atomic_int inside;
} counter;

static counter ca, cb;

static void count_a(inbox_log_level level, const char *consumer,
                    const char *name, const char *fields, void *payload)
{
	atomic_fetch_add(&ca.inside, 1);
	atomic_fetch_add(&ca.calls, 1);
	if (payload != &ca)
		atomic_fetch_add(&ca.wrong_payload, 1);
	atomic_fetch_sub(&ca.inside, 1);
}

static void count_b(inbox_log_level level, const char *consumer,
                    const char *name, const char *fields, void *payload)
{
	atomic_fetch_add(&cb.inside, 1);
	atomic_fetch_add(&cb.calls, 1);
	if (payload != &cb)
		atomic_fetch_add(&cb.wrong_payload, 1);
	/* a slow callback: set() must wait for it */
	struct timespec ts = {0, 20000};
	nanosleep(&ts, NULL);
	atomic_fetch_sub(&cb.inside, 1);
}

static atomic_int stop_loggers;

static void *logger(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_loggers))
		inbox__log(INBOX_LOG_INFO, "t", "\"event\":\"tick\",\"n\":%d",
		           1);
	return NULL;
}

TEST(replaced_while_threads_log)
{
	pthread_t th[4];
	atomic_store(&stop_loggers, 0);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, logger, NULL), 0);
	int stale = 0;
	for (int round = 0; round < 50; round++) {
		struct timespec gap = {0, 100000};
		ASSERT_OK(inbox_log_set(count_a, INBOX_LOG_DEBUG, &ca));
		nanosleep(&gap, NULL);
		ASSERT_OK(inbox_log_set(count_b, INBOX_LOG_INFO, &cb));
		/* count_b is installed: count_a is not running, and never
		 * runs again until it is installed again */
		if (atomic_load(&ca.inside))
			stale++;
		nanosleep(&gap, NULL);
		ASSERT_OK(inbox_log_set(NULL, INBOX_LOG_DEBUG, NULL));
		if (atomic_load(&cb.inside))
			stale++;
	}
	long a = atomic_load(&ca.calls), b = atomic_load(&cb.calls);
	struct timespec ts = {0, 20 * 1000000L};
	nanosleep(&ts, NULL);
	long a2 = atomic_load(&ca.calls), b2 = atomic_load(&cb.calls);
	atomic_store(&stop_loggers, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	ASSERT_EQ(stale, 0);
	ASSERT_EQ(a2, a); /* none after set(NULL) returned */
	ASSERT_EQ(b2, b);
	ASSERT_NE(a, 0);
	ASSERT_NE(b, 0);
	ASSERT_EQ(atomic_load(&ca.wrong_payload), 0);
	ASSERT_EQ(atomic_load(&cb.wrong_payload), 0);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/inbox_test_log_XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	if (inbox_source_register(&flaky_vt) < 0) {
		fprintf(stderr, "cannot register the flaky source\n");
		return 1;
	}
	RUN(level_names);
	RUN(runner_event_reaches_the_callback);
	RUN(jsonl_event_reaches_the_callback);
	RUN(min_level_filters);
	RUN(nothing_printed_without_a_callback);
	RUN(kafka_log_is_routed);
	RUN(event_shapes);
	RUN(escape);
	RUN(set_from_the_callback_is_refused);
	RUN(replaced_while_threads_log);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return test_summary();
}
