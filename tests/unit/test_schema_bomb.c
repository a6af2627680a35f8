/*
 * Work per message is bounded by its size, whatever the schema: the
 * "schema bomb" family (tests/schema_bombs.h) — a recursive oneOf with
 * the discriminator last, anyOf/allOf chains of $refs, nesting to the
 * parser's limit, catastrophic regexes, uniqueItems on big arrays — each
 * at sizes up to max_payload (1 MiB), every one validated in a child
 * process that must finish within CPU_LIMIT (a naive validator takes
 * hours; the kernel stops the child at CPU_LIMIT + 1 CPU seconds through
 * RLIMIT_CPU, whatever the machine's load, and the bomb counts as
 * failed). A message either validates as it should or stops at a limit
 * with the reason "schema validation ..." (a dead letter); the bombs
 * that are ordinary messages (a deep tree, nesting to the parser's limit)
 * must validate.
 *
 * The other steps of a message (parsing, the key template, the canonical
 * form and its SHA-256, pointers) get messages shaped against them, each
 * through a consumer in a child under the same limit.
 *
 * Built with -DBOMB_PUBLIC_ONLY the file uses the public API alone, so
 * that it can be run against an older library.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <inbox/inbox.h>

#include "schema_bombs.h"
#include "test.h"
#ifndef BOMB_PUBLIC_ONLY
#include "base/json.h"
#include "schema/node.h"
#endif

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* CPU seconds one validation may take (the parse included): generous, so
 * that a loaded machine does not make it flake; the fix takes
 * milliseconds, the old validator hours. */
#define CPU_LIMIT (SANITIZED ? 10.0 : 2.0)
/* Wall seconds before a child is killed: a backstop for a child that
 * hangs without using CPU. The CPU limit is the kernel's (RLIMIT_CPU):
 * on a machine at load average 25 a child of the ASan build got too
 * little of a core to finish an ordinary 1 MiB validation within the 20
 * wall seconds this used to allow. */
#define WALL_LIMIT 300

static const size_t SIZES[] = {1024, 32 * 1024, 1024 * 1024};

typedef struct outcome {
	int finished; /* 0: killed after WALL_LIMIT */
	int rc;       /* inbox_schema_validate's */
	int valid;
	double cpu; /* seconds */
	char reason[700];
} outcome;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* In a child: the kernel ends it past CPU_LIMIT + 1 CPU seconds
 * (SIGXCPU, then SIGKILL a second later). */
static void limit_cpu(void)
{
	rlim_t lim = (rlim_t)CPU_LIMIT + 1;
	struct rlimit rl = {lim, lim + 1};
	setrlimit(RLIMIT_CPU, &rl);
}

/* Wait for the child `pid` writing its outcome on `rfd` into o, with
 * its CPU seconds in o->cpu. */
static void wait_child(pid_t pid, int rfd, outcome *o)
{
	double t0 = now();
	int status = 0;
	struct rusage ru;
	int killed = 0;
	while (wait4(pid, &status, WNOHANG, &ru) == 0) {
		if (now() - t0 > WALL_LIMIT) {
			kill(pid, SIGKILL);
			wait4(pid, &status, 0, &ru);
			killed = 1;
			break;
		}
		struct timespec nap = {0, 2000000};
		nanosleep(&nap, NULL);
	}
	double cpu =
	    (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	if (killed) {
		memset(o, 0, sizeof(*o));
		snprintf(o->reason, sizeof(o->reason),
		         "did not finish in %d s (killed)", WALL_LIMIT);
	} else if (read(rfd, o, sizeof(*o)) != (ssize_t)sizeof(*o)) {
		memset(o, 0, sizeof(*o));
		if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGXCPU ||
		                            WTERMSIG(status) == SIGKILL))
			snprintf(o->reason, sizeof(o->reason),
			         "stopped at the CPU limit (%.0f s)",
			         CPU_LIMIT + 1);
		else
			snprintf(o->reason, sizeof(o->reason),
			         "child died (status %d)", status);
	}
	close(rfd);
	o->cpu = cpu;
}

/* Open `schema` and validate [msg, msg+len) in a child process. */
static void validate_in_child(const char *schema, const char *msg, size_t len,
                              outcome *o)
{
	memset(o, 0, sizeof(*o));
	int fd[2];
	if (pipe(fd) != 0) {
		snprintf(o->reason, sizeof(o->reason), "pipe failed");
		return;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(o->reason, sizeof(o->reason), "fork failed");
		return;
	}
	if (pid == 0) {
		close(fd[0]);
		limit_cpu();
		outcome r;
		memset(&r, 0, sizeof(r));
		inbox_schema *s = NULL;
		char err[512];
		r.rc = inbox_schema_open(&s, schema, strlen(schema), err,
		                         sizeof(err));
		if (r.rc == INBOX_OK) {
			r.rc = inbox_schema_validate(
			    s, msg, len, &r.valid, r.reason, sizeof(r.reason));
			inbox_schema_close(s);
		} else {
			snprintf(r.reason, sizeof(r.reason), "schema: %s", err);
		}
		r.finished = 1;
		ssize_t w = write(fd[1], &r, sizeof(r));
		_exit(w == (ssize_t)sizeof(r) ? 0 : 1);
	}
	close(fd[1]);
	wait_child(pid, fd[0], o);
}

/* ---- the other steps of a message ---------------------------------- */

static char db_dir[] = "/tmp/inbox-bomb-test-XXXXXX";
static int db_seq;

/* Process [msg, msg+len) through a consumer on a fresh SQLite store (key
 * "{/id}:{/k}", fingerprint of the whole payload, no schema) in a child;
 * outcome in o->valid (the inbox_outcome), reason in o->reason. */
static void process_in_child(const char *msg, size_t len, outcome *o)
{
	memset(o, 0, sizeof(*o));
	int fd[2];
	if (pipe(fd) != 0)
		return;
	char url[700];
	snprintf(url, sizeof(url), "sqlite:%s/%d.db", db_dir, ++db_seq);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return;
	if (pid == 0) {
		close(fd[0]);
		limit_cpu();
		outcome r;
		memset(&r, 0, sizeof(r));
		inbox_store *st = NULL;
		inbox_consumer *c = NULL;
		inbox_consumer_options opt = INBOX_CONSUMER_OPTIONS_INIT;
		opt.name = "bombs";
		opt.key_template = "{/id}:{/k}";
		r.rc = inbox_store_open(&st, url, NULL);
		if (r.rc == INBOX_OK)
			r.rc = inbox_consumer_open(&c, st, &opt, r.reason,
			                           sizeof(r.reason));
		if (r.rc == INBOX_OK) {
			inbox_delivery d = INBOX_DELIVERY_INIT;
			inbox_result res = INBOX_RESULT_INIT;
			d.payload = msg;
			d.payload_len = len;
			r.rc = inbox_consumer_process(c, &d, &res);
			r.valid = (int)res.outcome;
			snprintf(r.reason, sizeof(r.reason), "%s",
			         res.reason ? res.reason : "");
		}
		inbox_consumer_close(c);
		inbox_store_close(st);
		r.finished = 1;
		ssize_t w = write(fd[1], &r, sizeof(r));
		_exit(w == (ssize_t)sizeof(r) ? 0 : 1);
	}
	close(fd[1]);
	wait_child(pid, fd[0], o);
}

/* Messages up to max_payload shaped against the steps besides the
 * schema: many members to sort for the canonical form, long shared
 * prefixes, nesting to the parser's limit, escapes, numbers whose
 * shortest form takes the longest search, a key field as long as the
 * message. */
static int gen_members(inbox__buf *b, size_t target, int prefix)
{
	inbox__buf_reset(b);
	if (inbox__buf_puts(b, "{\"id\":\"m\",\"k\":\"x\"") < 0)
		return -1;
	for (size_t i = 0; b->len + 40 + (size_t)prefix < target; i++) {
		if (inbox__buf_puts(b, ",\"") < 0)
			return -1;
		for (int j = 0; j < prefix; j++)
			if (inbox__buf_putc(b, 'p') < 0)
				return -1;
		if (inbox__buf_printf(b, "%zu\":%zu", 1000000 - i, i) < 0)
			return -1;
	}
	return inbox__buf_puts(b, "}");
}

static int gen_sorting(inbox__buf *b, size_t target)
{
	return gen_members(b, target, 0);
}

static int gen_prefixes(inbox__buf *b, size_t target)
{
	return gen_members(b, target, 1000);
}

static int gen_escapes(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	if (inbox__buf_puts(b, "{\"id\":\"m\",\"k\":\"x\",\"s\":\"") < 0)
		return -1;
	while (b->len + 16 < target)
		if (inbox__buf_puts(b, "\\u0001\\ud83d\\ude00\\\"") < 0)
			return -1;
	return inbox__buf_puts(b, "\"}");
}

static int gen_doubles(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	if (inbox__buf_puts(b, "{\"id\":\"m\",\"k\":\"x\",\"n\":[0") < 0)
		return -1;
	for (size_t i = 1; b->len + 32 < target; i++)
		if (inbox__buf_printf(b, ",%.17g",
		                      5e-324 * (double)(i * 2654435761u)) < 0)
			return -1;
	return inbox__buf_puts(b, "]}");
}

static int gen_nesting(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	if (inbox__buf_puts(b, "{\"id\":\"m\",\"k\":\"x\",\"d\":[") < 0)
		return -1;
	for (size_t n = 0; b->len + 4 * BOMB_MAX_DEPTH + 8 < target; n++) {
		if (n && inbox__buf_putc(b, ',') < 0)
			return -1;
		for (int i = 0; i < BOMB_MAX_DEPTH - 4; i++)
			if (inbox__buf_puts(b, i % 2 ? "[" : "{\"a\":") < 0)
				return -1;
		for (int i = BOMB_MAX_DEPTH - 4; i-- > 0;)
			if (inbox__buf_puts(b, i % 2 ? "]" : "}") < 0)
				return -1;
	}
	return inbox__buf_puts(b, "]}");
}

static int gen_long_key(inbox__buf *b, size_t target)
{
	inbox__buf_reset(b);
	if (inbox__buf_puts(b, "{\"id\":\"m\",\"k\":\"") < 0)
		return -1;
	while (b->len + 4 < target)
		if (inbox__buf_putc(b, 'k') < 0)
			return -1;
	return inbox__buf_puts(b, "\"}");
}

TEST(every_other_step_is_bounded)
{
	static const struct {
		const char *name;
		int (*gen)(inbox__buf *, size_t);
	} kinds[] = {
	    {"members to sort", gen_sorting},
	    {"members with a 1000-byte prefix", gen_prefixes},
	    {"escapes and surrogate pairs", gen_escapes},
	    {"doubles of 17 digits", gen_doubles},
	    {"nesting to the parser's limit", gen_nesting},
	    {"a key field of the whole size", gen_long_key},
	};
	inbox__buf msg = INBOX__BUF_INIT;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		ASSERT_EQ(kinds[k].gen(&msg, 1024 * 1024), 0);
		ASSERT_TRUE(msg.len <= 1024 * 1024);
		outcome o;
		process_in_child(msg.data, msg.len, &o);
		printf("     %-40s %8zu B %9.3f s cpu  outcome %d %.100s\n",
		       kinds[k].name, msg.len, o.cpu, o.valid, o.reason);
		if (!o.finished || o.rc != INBOX_OK || o.cpu >= CPU_LIMIT ||
		    (o.valid != INBOX_APPLIED &&
		     o.valid != INBOX_DEAD_LETTERED))
			TEST_FAIL_("%s: rc %d, outcome %d, %s (%.3f s cpu)",
			           kinds[k].name, o.rc, o.valid, o.reason,
			           o.cpu);
	}
	inbox__buf_free(&msg);
}

static int stopped(const char *reason)
{
	return strncmp(reason, "schema validation ", 18) == 0;
}

/* ---- the family -------------------------------------------------------- */

TEST(every_bomb_is_bounded)
{
	bomb fam[32];
	size_t n = bomb_family(fam, 32);
	inbox__buf msg = INBOX__BUF_INIT;
	int bad = 0;
	for (size_t b = 0; b < n; b++) {
		for (size_t k = 0; k < sizeof(SIZES) / sizeof(SIZES[0]); k++) {
			ASSERT_EQ(fam[b].gen(&msg, SIZES[k]), 0);
			ASSERT_TRUE(msg.len <= SIZES[k]);
			outcome o;
			validate_in_child(fam[b].schema, msg.data, msg.len, &o);
			const char *what = !o.finished         ? o.reason
			                   : o.rc != INBOX_OK  ? o.reason
			                   : o.valid           ? "valid"
			                   : stopped(o.reason) ? o.reason
			                                       : "violation";
			printf("     %-40s %8zu B %9.3f s cpu  %.140s\n",
			       fam[b].name, msg.len, o.cpu, what);
			int good =
			    o.finished && o.rc == INBOX_OK && o.cpu < CPU_LIMIT;
			if (good && !o.valid && stopped(o.reason))
				good = !fam[b].must_finish;
			else if (good)
				good = o.valid == (fam[b].expect == BOMB_VALID);
			if (!good) {
				TEST_FAIL_("%s at %zu bytes: %s (%.3f s cpu, "
				           "limit %.1f)",
				           fam[b].name, msg.len, o.reason,
				           o.cpu, CPU_LIMIT);
				bad++;
				if (!o.finished)
					break; /* bigger ones would hang too */
			}
		}
	}
	inbox__buf_free(&msg);
	ASSERT_EQ(bad, 0);
}

/* ---- what a limit means --------------------------------------------------
 */

static char reason[700];

static int check(inbox_schema *s, const char *json, size_t len)
{
	int valid = -1;
	reason[0] = '\0';
	if (inbox_schema_validate(s, json, len, &valid, reason,
	                          sizeof(reason)) != INBOX_OK)
		return -1;
	return valid;
}

static inbox_schema *open_schema(const char *text)
{
	inbox_schema *s = NULL;
	char err[512];
	if (inbox_schema_open(&s, text, strlen(text), err, sizeof(err)) !=
	    INBOX_OK)
		fprintf(stderr, "  schema refused: %s\n", err);
	return s;
}

/* A match that could not finish is undecided: inside "not" it must not
 * count as a "no" (which would make the message valid). */
TEST(a_stop_inside_not_is_not_a_yes)
{
	inbox_schema *s = open_schema("{\"not\": {\"pattern\": \"^(a+)+$\"}}");
	ASSERT_TRUE(s != NULL);
	char doc[64];
	memset(doc, 'a', sizeof(doc));
	doc[0] = '"';
	doc[sizeof(doc) - 3] = 'b';
	doc[sizeof(doc) - 2] = '"';
	doc[sizeof(doc) - 1] = '\0';
	ASSERT_EQ(check(s, doc, strlen(doc)), 0);
	ASSERT_CONTAINS(reason, "schema validation stopped: pattern: ");
	ASSERT_CONTAINS(reason, "is too costly to match against");
	inbox_schema_close(s);
	/* and in anyOf: not a "no" that another branch turns into a yes */
	s = open_schema("{\"anyOf\": [{\"pattern\": \"^(a+)+$\"}, "
	                "{\"type\": \"string\"}]}");
	ASSERT_TRUE(s != NULL);
	ASSERT_EQ(check(s, doc, strlen(doc)), 0);
	ASSERT_CONTAINS(reason, "schema validation stopped: pattern: ");
	inbox_schema_close(s);
}

/* A long string against a group repeated over it: more than PCRE2's
 * default JIT stack, matched on the interpreter's heap instead of being
 * refused as too costly. */
TEST(a_long_string_matches_a_repeated_group)
{
	inbox_schema *s = open_schema("{\"pattern\": \"^(a|b)*$\"}");
	ASSERT_TRUE(s != NULL);
	size_t n = 50000;
	char *doc = malloc(n + 3);
	ASSERT_TRUE(doc != NULL);
	doc[0] = '"';
	memset(doc + 1, 'a', n);
	doc[n + 1] = '"';
	doc[n + 2] = '\0';
	int v = check(s, doc, n + 2);
	if (v != 1)
		TEST_FAIL_("50,000 a's: %s", reason);
	doc[n] = 'c'; /* and no match is a plain violation */
	if (v == 1) {
		ASSERT_EQ(check(s, doc, n + 2), 0);
		ASSERT_CONTAINS(reason, "pattern: ");
		ASSERT_CONTAINS(reason, "does not match");
	}
	free(doc);
	inbox_schema_close(s);
}

/* uniqueItems names the first duplicate pair, small arrays or big. */
TEST(unique_items_names_the_first_pair)
{
	inbox_schema *s = open_schema("{\"uniqueItems\": true}");
	ASSERT_TRUE(s != NULL);
	const char *doc = "[1, 2, {\"a\": [3]}, 2.0, {\"a\": [3.0]}, 1]";
	ASSERT_EQ(check(s, doc, strlen(doc)), 0);
	ASSERT_CONTAINS(reason, "uniqueItems: items 1 and 3 are equal");
	inbox_schema_close(s);
}

#ifndef BOMB_PUBLIC_ONLY

/* ---- the budget and the memo (internal) ------------------------------ */

static uint64_t steps_of(inbox_schema *s, const inbox__buf *m, int *valid)
{
	json_t *root = NULL;
	char e[300];
	if (inbox__json_parse(m->data, m->len, &root, e, sizeof(e)) != 0)
		return 0;
	*valid =
	    inbox__schema_check(s, root, m->len, reason, sizeof(reason)) == 0;
	json_decref(root);
	return inbox__schema_last_steps(s);
}

/* Steps grow with the message, not exponentially: sixteen times the
 * bytes cost at most twenty times the steps. */
TEST(steps_grow_linearly)
{
	bomb fam[32];
	size_t n = bomb_family(fam, 32);
	inbox__buf m = INBOX__BUF_INIT;
	for (size_t b = 0; b < n; b++) {
		if (!fam[b].must_finish)
			continue;
		inbox_schema *s = open_schema(fam[b].schema);
		ASSERT_TRUE(s != NULL);
		int valid = 0;
		ASSERT_EQ(fam[b].gen(&m, 16 * 1024), 0);
		size_t small = m.len;
		uint64_t a = steps_of(s, &m, &valid);
		ASSERT_EQ(fam[b].gen(&m, 256 * 1024), 0);
		uint64_t z = steps_of(s, &m, &valid);
		printf("     %-40s %7zu B %8llu steps, %7zu B %9llu steps\n",
		       fam[b].name, small, (unsigned long long)a, m.len,
		       (unsigned long long)z);
		ASSERT_TRUE(a > 0);
		ASSERT_TRUE((double)z / (double)a <=
		            20.0 * (double)m.len / (16.0 * (double)small));
		ASSERT_TRUE(z <= inbox__schema_budget(m.len));
		inbox_schema_close(s);
	}
	inbox__buf_free(&m);
}

/* Without the memo, allOf of two $refs to a recursive schema costs
 * 2^depth again: the budget still stops it, quickly, with its reason. */
TEST(the_budget_stops_what_the_memo_would_not)
{
	inbox_schema *s = open_schema(BOMB_ALLOF_SCHEMA);
	ASSERT_TRUE(s != NULL);
	s->memo_off = 1;
	inbox__buf m = INBOX__BUF_INIT;
	ASSERT_EQ(bomb_nested_arrays(&m, 128), 0);
	clock_t t0 = clock();
	int valid = 1;
	uint64_t steps = steps_of(s, &m, &valid);
	double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	ASSERT_EQ(valid, 0);
	char want[200];
	snprintf(want, sizeof(want),
	         "schema validation exceeded %llu steps (the budget of a "
	         "message of %zu bytes): too costly to validate against "
	         "this schema (at /0/0/0/",
	         (unsigned long long)inbox__schema_budget(m.len), m.len);
	ASSERT_TRUE(strncmp(reason, want, strlen(want)) == 0);
	ASSERT_TRUE(steps > inbox__schema_budget(m.len));
	ASSERT_TRUE(secs < CPU_LIMIT);
	/* with the memo: valid, in a few thousand steps */
	s->memo_off = 0;
	steps = steps_of(s, &m, &valid);
	ASSERT_EQ(valid, 1);
	ASSERT_TRUE(steps < 10000);
	inbox__buf_free(&m);
	inbox_schema_close(s);
}

static int count_limit(const char *path, const char *kw, const char *spath,
                       const char *msg, void *payload)
{
	int *n = payload;
	if (strcmp(kw, "limit") == 0 &&
	    strncmp(msg, "schema validation exceeded ", 27) == 0)
		n[0]++;
	else
		n[1]++;
	return 0;
}

/* Reporting every violation stops at the budget too, reported once. */
TEST(validate_all_reports_the_stop_once)
{
	inbox_schema *s = open_schema(bomb_wide_schema());
	ASSERT_TRUE(s != NULL);
	inbox__buf m = INBOX__BUF_INIT;
	ASSERT_EQ(bomb_numbers(&m, 64 * 1024), 0);
	int counts[2] = {0, 0};
	size_t nerr = 0;
	ASSERT_OK(inbox_schema_validate_all(s, m.data, m.len, count_limit,
	                                    counts, &nerr));
	ASSERT_EQ(counts[0], 1);
	ASSERT_EQ(counts[1], 0);
	ASSERT_EQ(nerr, 1);
	inbox__buf_free(&m);
	inbox_schema_close(s);
}

/* The memo keeps a violation found quietly from hiding the report of
 * the same value when it is met again outside the quiet evaluation. */
TEST(memo_reports_what_it_found_quietly)
{
	inbox_schema *s = open_schema(
	    "{\"definitions\": {\"n\": {\"type\": \"integer\"}}, "
	    "\"properties\": {\"a\": {\"anyOf\": [{\"$ref\": "
	    "\"#/definitions/n\"}, {\"type\": \"string\"}]}, \"b\": "
	    "{\"$ref\": \"#/definitions/n\"}}, \"allOf\": [{\"properties\": "
	    "{\"a\": {\"$ref\": \"#/definitions/n\"}}}]}");
	ASSERT_TRUE(s != NULL);
	const char *doc = "{\"a\": \"x\", \"b\": 1}";
	ASSERT_EQ(check(s, doc, strlen(doc)), 0);
	ASSERT_STREQ(reason, "schema violation at /a: type: expected "
	                     "integer, got string \"x\"");
	inbox_schema_close(s);
}

#endif

int main(void)
{
	if (!mkdtemp(db_dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(a_stop_inside_not_is_not_a_yes);
	RUN(a_long_string_matches_a_repeated_group);
	RUN(unique_items_names_the_first_pair);
#ifndef BOMB_PUBLIC_ONLY
	RUN(steps_grow_linearly);
	RUN(the_budget_stops_what_the_memo_would_not);
	RUN(validate_all_reports_the_stop_once);
	RUN(memo_reports_what_it_found_quietly);
#endif
	RUN(every_bomb_is_bounded);
	RUN(every_other_step_is_bounded);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", db_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", db_dir);
	return test_summary();
}
