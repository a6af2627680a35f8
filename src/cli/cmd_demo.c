/*
 * inbox demo: the whole story on the embedded default, no server.
 *
 * Writes a stream of order-created events with the troubles real brokers
 * produce (redeliveries, a producer retry under a new message id, a
 * same-key-different-payload event, a malformed line, invalid UTF-8),
 * runs the real `inbox run` on it as a child process, SIGKILLs it
 * mid-stream, restarts it until it finishes, and prints what the database
 * says. Every figure is computed from the input and the database.
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include <inbox/admin.h>

#include "core/internal.h"

const char cli_demo_usage[] =
    "usage: inbox demo [--dir DIR] [--orders N] [--print-config]\n"
    "\n"
    "A self-contained demo (SQLite store, JSONL source, no server): "
    "writes a stream\nof order-created events containing exact "
    "duplicates, a producer retry with a\nnew message id, a "
    "same-key-different-payload event, a malformed line and an\n"
    "invalid-UTF-8 line; runs `inbox run` on it, kills it with SIGKILL "
    "mid-stream,\nrestarts it, and summarizes what the database holds.\n"
    "\n"
    "  --dir DIR        work in DIR (created; default: a new temp dir, "
    "kept)\n"
    "  --orders N       number of orders (default 200)\n"
    "  --print-config   print the demo's config file and exit\n"
    "Exit codes: 0 every order billed exactly once, 1 otherwise.\n";

/* Kept identical to examples/demo/inbox.yaml (a test checks it). */
static const char demo_config[] =
    "# libinbox demo: bill every order exactly once.\n"
    "#\n"
    "# Order-created events arrive as JSON lines in orders.jsonl. For "
    "each new\n"
    "# order the consumer inserts one invoice, in the same SQLite "
    "transaction\n"
    "# that records the message's key in the inbox table; the file "
    "position is\n"
    "# checkpointed (acked) only after that commit. Run it yourself:\n"
    "#   inbox run inbox.yaml --once\n"
    "#   inbox stats inbox.yaml\n"
    "store: sqlite:billing.db\n"
    "\n"
    "consumers:\n"
    "  - name: billing.order-created.v1\n"
    "    source: jsonl:orders.jsonl?checkpoint=orders.checkpoint\n"
    "    # Producer retries mint a new message id for the same order, so "
    "the\n"
    "    # key is the business key: one invoice per order.\n"
    "    key: \"create-invoice:{/data/orderId}\"\n"
    "    # Two events with the same key must carry the same order data;\n"
    "    # otherwise it is a conflict (dead letter), never a silent "
    "duplicate.\n"
    "    fingerprint: /data\n"
    "    batch_size: 10\n"
    "    batch_pause: 20ms   # slow enough for the demo to kill it "
    "mid-stream\n"
    "    max_attempts: 5\n"
    "    retention: 7d\n"
    "    setup: |\n"
    "      CREATE TABLE IF NOT EXISTS invoices (\n"
    "        id          INTEGER PRIMARY KEY,\n"
    "        order_id    TEXT    NOT NULL,  -- deliberately NOT unique:\n"
    "        customer    TEXT    NOT NULL,  -- a double effect would show\n"
    "        total_cents INTEGER NOT NULL\n"
    "      );\n"
    "    effect:\n"
    "      - sql: |\n"
    "          INSERT INTO invoices (order_id, customer, total_cents)\n"
    "          VALUES ($1, $2, $3)\n"
    "        params: [/data/orderId, /data/customer, /data/totalCents]\n";

#define CONSUMER "billing.order-created.v1"

typedef struct demo {
	char dir[4096];
	char path[4200]; /* scratch */
	int orders;
	/* what the generator wrote */
	int lines, redeliveries, retries, conflicts, malformed, bad_utf8;
	int kills;
	int64_t killed_after; /* invoices in the database at the kill */
} demo;

static const char *in_dir(demo *d, const char *name)
{
	snprintf(d->path, sizeof(d->path), "%s/%s", d->dir, name);
	return d->path;
}

static void order_line(char *buf, size_t len, const char *msg_id, int order,
                       int total)
{
	snprintf(buf, len,
	         "{\"id\":\"%s\",\"type\":\"order.created\",\"data\":"
	         "{\"orderId\":\"ord-%04d\",\"customer\":\"cust-%03d\","
	         "\"totalCents\":%d}}\n",
	         msg_id, order, order % 37, total);
}

static int total_of(int order)
{
	return 1000 + (order * 7919) % 90000;
}

/* The stream: every order once, plus the troubles. */
static int generate(demo *d)
{
	FILE *f = fopen(in_dir(d, "orders.jsonl"), "w");
	if (!f)
		return -1;
	char line[512], id[64];
	char recent[4][512] = {{0}};
	for (int i = 1; i <= d->orders; i++) {
		snprintf(id, sizeof(id), "msg-%05d", i);
		order_line(line, sizeof(line), id, i, total_of(i));
		fputs(line, f);
		d->lines++;
		memcpy(recent[i % 4], line, sizeof(line));
		/* A broker redelivers a message it was not sure was acked: the
		 * exact same line again, a little later. */
		if (i % 7 == 0 && i > 3) {
			fputs(recent[(i - 3) % 4], f);
			d->lines++;
			d->redeliveries++;
		}
		/* A producer timed out and sent the order again, minting a
		 * new message id: same order data, different id. */
		if (i % 50 == 25) {
			snprintf(id, sizeof(id), "msg-%05d-retry", i);
			order_line(line, sizeof(line), id, i, total_of(i));
			fputs(line, f);
			d->lines++;
			d->retries++;
		}
		if (i == d->orders / 2) {
			/* Same key (orderId), different payload: a bug
			 * upstream. Must not be silently dropped. */
			int o = i - 30; /* billed long ago */
			snprintf(id, sizeof(id), "msg-%05d-changed", o);
			order_line(line, sizeof(line), id, o, total_of(o) + 1);
			fputs(line, f);
			d->lines++;
			d->conflicts++;
			/* A truncated write. */
			fputs("{\"id\":\"msg-truncated\",\"data\":{\"orderId\":"
			      "\n",
			      f);
			d->lines++;
			d->malformed++;
			/* Bytes that are not UTF-8. */
			fputs("{\"id\":\"msg-latin1\",\"data\":{\"orderId\":"
			      "\"ord-caf\xe9\",\"customer\":\"x\","
			      "\"totalCents\":1}}\n",
			      f);
			d->lines++;
			d->bad_utf8++;
		}
	}
	return fclose(f) == 0 ? 0 : -1;
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -1;
}

static const char *self_exe(void)
{
	static char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return cli_argv0;
	buf[n] = '\0';
	return buf;
}

/* Start `inbox run inbox.yaml --once`, output appended to daemon.log. */
static pid_t spawn(demo *d)
{
	char cfg[4200], log[4200];
	snprintf(cfg, sizeof(cfg), "%s/inbox.yaml", d->dir);
	snprintf(log, sizeof(log), "%s/daemon.log", d->dir);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	FILE *f = freopen(log, "a", stderr);
	if (!f || dup2(fileno(stderr), 1) < 0)
		_exit(127);
	const char *exe = self_exe();
	execl(exe, exe, "run", cfg, "--once", (char *)NULL);
	_exit(127);
}

static int count_row(int ncols, const char *const *v, void *payload)
{
	if (ncols > 0 && v[0])
		*(int64_t *)payload = strtoll(v[0], NULL, 10);
	return 1;
}

/* The store on billing.db, as it is (never migrated here). */
static int open_billing(demo *d, inbox_store **st)
{
	char url[4300];
	snprintf(url, sizeof(url), "sqlite:%s", in_dir(d, "billing.db"));
	inbox_store_options o = INBOX_STORE_OPTIONS_INIT;
	o.auto_migrate = 0;
	return inbox_store_open(st, url, &o);
}

/* Invoices now in the database (-1 before the table exists). */
static int64_t count_invoices(demo *d, int distinct)
{
	struct stat sb;
	int64_t n = -1;
	inbox_store *st = NULL;
	/* Not before the daemon made it: opening would create it. */
	if (stat(in_dir(d, "billing.db"), &sb) < 0)
		return -1;
	const char *sql = distinct
	                      ? "SELECT COUNT(DISTINCT order_id) FROM invoices"
	                      : "SELECT COUNT(*) FROM invoices";
	if (open_billing(d, &st) == INBOX_OK)
		inbox_store_query(st, sql, 0, NULL, count_row, &n);
	inbox_store_close(st);
	return n;
}

static void nap(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Wait for the child; -1 on timeout (it is then killed). */
static int wait_child(pid_t pid, double timeout_s)
{
	double end = inbox__mono_seconds() + timeout_s;
	int status;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status)
			                         : 128 + WTERMSIG(status);
		if (r < 0)
			return -1;
		if (inbox__mono_seconds() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		nap(10);
	}
}

/* First run: kill it once a good part of the orders is billed. */
static int run_and_kill(demo *d)
{
	pid_t pid = spawn(d);
	if (pid < 0)
		return -1;
	int64_t target = d->orders * 2 / 5;
	double end = inbox__mono_seconds() + 30;
	int status;
	while (inbox__mono_seconds() < end) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid) {
			printf("  (the daemon finished before it could be "
			       "killed)\n");
			return 0;
		}
		int64_t n = count_invoices(d, 0);
		if (n >= target) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			d->kills++;
			d->killed_after = count_invoices(d, 0);
			printf("  killed it with SIGKILL after %lld invoices "
			       "(no drain, no goodbye)\n",
			       (long long)d->killed_after);
			return 0;
		}
		nap(5);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

static int count_lines(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	int c, n = 0;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static void show_log_tail(demo *d)
{
	FILE *f = fopen(in_dir(d, "daemon.log"), "r");
	if (!f)
		return;
	char line[2048];
	char last[8][2048];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		memcpy(last[n++ % 8], line, sizeof(line));
	fclose(f);
	fprintf(stderr, "last lines of %s/daemon.log:\n", d->dir);
	for (int i = n > 8 ? n - 8 : 0; i < n; i++)
		fprintf(stderr, "  %s", last[i % 8]);
}

/* What the database says, and the dead letters' distinct input lines. */
typedef struct demo_stats {
	inbox_admin_stats a;
	int64_t dead_letter_positions; /* distinct source positions */
	int64_t conflict_positions;    /* ... of the conflicts */
	char **pos;                    /* scratch: "c" or "d" + position */
	size_t npos, cap;
	int oom;
} demo_stats;

static int dl_row(const inbox_admin_dead_letter *dl, void *payload)
{
	demo_stats *s = payload;
	if (!dl->position)
		return 0;
	if (s->npos == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		char **p = realloc(s->pos, cap * sizeof(*p));
		if (!p)
			return s->oom = 1;
		s->pos = p;
		s->cap = cap;
	}
	size_t n = strlen(dl->position);
	char *e = malloc(n + 2);
	if (!e)
		return s->oom = 1;
	e[0] = dl->stored_fingerprint ? 'c' : 'd';
	memcpy(e + 1, dl->position, n + 1);
	s->pos[s->npos++] = e;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_str_at1(const void *a, const void *b)
{
	return strcmp(*(char *const *)a + 1, *(char *const *)b + 1);
}

/* Distinct positions, and distinct positions of conflicts. */
static void count_positions(demo_stats *s)
{
	/* Sorted with the marker: a position's conflicts are adjacent. */
	qsort(s->pos, s->npos, sizeof(*s->pos), cmp_str);
	for (size_t i = 0; i < s->npos; i++)
		if (s->pos[i][0] == 'c' &&
		    (i == 0 || strcmp(s->pos[i - 1], s->pos[i]) != 0))
			s->conflict_positions++;
	/* Sorted without it: every kind of a position is adjacent. */
	qsort(s->pos, s->npos, sizeof(*s->pos), cmp_str_at1);
	for (size_t i = 0; i < s->npos; i++)
		if (i == 0 || cmp_str_at1(&s->pos[i - 1], &s->pos[i]) != 0)
			s->dead_letter_positions++;
}

static int read_stats(demo *d, demo_stats *s)
{
	inbox_store *st = NULL;
	memset(s, 0, sizeof(*s));
	s->a.version = INBOX_ADMIN_STATS_VERSION;
	int rc = open_billing(d, &st);
	if (rc == INBOX_OK)
		rc = inbox_admin_stats_read(st, CONSUMER, &s->a);
	if (rc == INBOX_OK) {
		inbox_admin_dlq_filter f = INBOX_ADMIN_DLQ_FILTER_INIT;
		f.consumer = CONSUMER;
		rc = inbox_admin_dlq_list(st, &f, dl_row, s);
		if (rc == INBOX_OK && s->oom)
			rc = INBOX_ERR_NOMEM;
	}
	if (rc == INBOX_OK)
		count_positions(s);
	for (size_t i = 0; i < s->npos; i++)
		free(s->pos[i]);
	free(s->pos);
	s->pos = NULL;
	if (rc < 0)
		cli_error("cannot read sqlite:%s: %s", in_dir(d, "billing.db"),
		          st ? inbox_store_errmsg(st) : inbox_strerror(rc));
	inbox_store_close(st);
	return rc;
}

static int summary(demo *d)
{
	demo_stats s;
	if (read_stats(d, &s) < 0)
		return CLI_EXIT_RUNTIME;
	int read = count_lines(in_dir(d, "orders.jsonl"));
	int64_t invoices = count_invoices(d, 0);
	int64_t billed = count_invoices(d, 1);
	/* A dead letter written, then its line re-read after the kill,
	 * is written again: count distinct input lines. */
	int64_t dead = s.dead_letter_positions > 0 ? s.dead_letter_positions
	                                           : s.a.dead_letters;
	int64_t conflicts =
	    s.conflict_positions > 0 ? s.conflict_positions : s.a.conflicts;
	int64_t applied = s.a.completed;
	int64_t dups = read - applied - dead;
	int ok = invoices == d->orders && billed == d->orders &&
	         applied == d->orders;
	printf("\nlibinbox demo — " CONSUMER " on SQLite, JSONL source\n");
	printf("  messages read ........ %-5d (lines in the stream)\n", read);
	printf("  applied .............. %-5lld (one invoice each)\n",
	       (long long)applied);
	printf("  duplicates dropped ... %-5lld (redeliveries and producer "
	       "retries)\n",
	       (long long)dups);
	printf("  conflicts ............ %-5lld (same key, different payload "
	       "-> dead letter)\n",
	       (long long)conflicts);
	printf("  dead letters ......... %-5lld (conflict, malformed JSON, "
	       "invalid UTF-8)\n",
	       (long long)dead);
	if (s.a.dead_letters > dead)
		printf(
		    "                         (%lld more rows: the same lines "
		    "dead-lettered again\n"
		    "                          when re-read after the kill)\n",
		    (long long)(s.a.dead_letters - dead));
	if (ok)
		printf("  invoices created ..... %-5lld (one per order — no "
		       "order billed twice)\n",
		       (long long)invoices);
	else
		printf("  invoices created ..... %-5lld !! for %lld distinct "
		       "orders, %d orders in the stream\n",
		       (long long)invoices, (long long)billed, d->orders);
	if (d->kills)
		printf("  the daemon was killed with SIGKILL %s mid-stream and "
		       "restarted\n",
		       d->kills == 1 ? "once" : "several times");
	printf("\n  the stream had %d orders, %d redeliveries, %d producer "
	       "retr%s, %d conflict,\n  %d malformed and %d invalid-UTF-8 "
	       "line%s; the figures above come from the database.\n",
	       d->orders, d->redeliveries, d->retries,
	       d->retries == 1 ? "y" : "ies", d->conflicts, d->malformed,
	       d->bad_utf8, d->bad_utf8 == 1 ? "" : "s");
	printf("\nlook yourself:\n"
	       "  sqlite3 %s/billing.db 'SELECT * FROM invoices LIMIT 5'\n"
	       "  sqlite3 %s/billing.db 'SELECT key, reason FROM "
	       "dead_letters'\n"
	       "  %s stats %s/inbox.yaml\n"
	       "  daemon log (JSON lines): %s/daemon.log\n",
	       d->dir, d->dir, self_exe(), d->dir, d->dir);
	return ok ? CLI_EXIT_OK : CLI_EXIT_RUNTIME;
}

static int make_dir(demo *d, const char *dir)
{
	if (dir) {
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return -1;
		snprintf(d->dir, sizeof(d->dir), "%s", dir);
		/* A previous demo's files would skew the counts. */
		static const char *const old[] = {
		    "orders.jsonl",   "orders.checkpoint",
		    "billing.db",     "billing.db-wal",
		    "billing.db-shm", "daemon.log",
		    "inbox.yaml",     NULL};
		for (const char *const *o = old; *o; o++)
			unlink(in_dir(d, *o));
		return 0;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(d->dir, sizeof(d->dir), "%s/inbox-demo.XXXXXX",
	         tmp && *tmp ? tmp : "/tmp");
	return mkdtemp(d->dir) ? 0 : -1;
}

int cli_cmd_demo(int argc, char **argv)
{
	demo d;
	memset(&d, 0, sizeof(d));
	d.orders = 200;
	const char *dir = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--print-config")) {
			fputs(demo_config, stdout);
			return CLI_EXIT_OK;
		} else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
			dir = argv[++i];
		} else if (!strcmp(argv[i], "--orders") && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);
			if (!isdigit((unsigned char)argv[i][0]) || *end ||
			    v < 10 || v > 100000) {
				cli_error("--orders: between 10 and 100000");
				return CLI_EXIT_USAGE;
			}
			d.orders = (int)v;
		} else {
			cli_error("demo: unexpected argument \"%s\"", argv[i]);
			fputs(cli_demo_usage, stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (make_dir(&d, dir) < 0) {
		cli_error("cannot create the demo directory %s: %s",
		          dir ? dir : d.dir, strerror(errno));
		return CLI_EXIT_RUNTIME;
	}
	if (write_file(in_dir(&d, "inbox.yaml"), demo_config) < 0 ||
	    generate(&d) < 0) {
		cli_error("cannot write in %s: %s", d.dir, strerror(errno));
		return CLI_EXIT_RUNTIME;
	}
	printf("libinbox demo, in %s\n\n", d.dir);
	printf("1. A producer wrote %d order-created events to orders.jsonl "
	       "(%d lines):\n"
	       "   %d broker redeliveries (the same line twice), %d producer "
	       "retr%s (same order,\n"
	       "   new message id), 1 event reusing an order id with a "
	       "different total,\n"
	       "   1 truncated line and 1 line that is not UTF-8.\n",
	       d.orders, d.lines, d.redeliveries, d.retries,
	       d.retries == 1 ? "y" : "ies");
	printf("2. The consumer (inbox.yaml) keys each event by its order "
	       "(create-invoice:{/data/orderId})\n"
	       "   and inserts an invoice in the same SQLite transaction "
	       "that records the key;\n"
	       "   the file position is checkpointed only after the "
	       "commit.\n");
	printf("3. Running `inbox run inbox.yaml --once`...\n");
	if (run_and_kill(&d) < 0) {
		cli_error("the daemon made no progress in 30 s");
		show_log_tail(&d);
		return CLI_EXIT_RUNTIME;
	}
	int rc = 0;
	for (int attempt = 0; attempt < 5; attempt++) {
		printf("4. Restarting it: it resumes after the last "
		       "checkpoint, re-reading what was\n"
		       "   committed but not yet checkpointed; the inbox "
		       "drops those as duplicates.\n");
		pid_t pid = spawn(&d);
		rc = pid < 0 ? -1 : wait_child(pid, 60);
		if (rc == 0)
			break;
		printf("   the daemon exited with %d; restarting\n", rc);
	}
	if (rc != 0) {
		cli_error("the daemon did not finish (exit %d)", rc);
		show_log_tail(&d);
		return CLI_EXIT_RUNTIME;
	}
	printf("   it reached the end of the stream and exited 0.\n");
	return summary(&d);
}
