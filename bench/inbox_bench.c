/*
 * inbox_bench: the libinbox side of bench/run, and the generators of the
 * workload files the other contenders read.
 *
 *   inbox_bench gen-jsonl N FILE
 *       the N messages of bench/workload.h, one JSON per line
 *   inbox_bench gen-pgbench START COUNT BATCH FILE
 *       the ceiling's pgbench script for messages [START, START+COUNT):
 *       per BATCH messages one transaction (claim with INSERT ... SELECT
 *       FROM unnest(ARRAY[...]) ON CONFLICT DO NOTHING RETURNING, then the
 *       invoices of the new ids, COMMIT). bench/run feeds pgbench chunks
 *       of it: pgbench's script parser is quadratic in the file's size.
 *   inbox_bench run STORE_URL N BATCH [--replay | --keep-inbox]
 *                  [--purge-during]
 *       process the N messages through the C API in batches of BATCH (one
 *       transaction each; the handler inserts one invoice), then check
 *       the counts and print one RESULT line. The inbox, invoices and
 *       dead letters are emptied first; --keep-inbox empties only the
 *       invoices (rows put in the inbox beforehand stay), --replay
 *       nothing (the same messages again: all duplicates now).
 *       --purge-during: once a fifth of the messages are done, another
 *       thread (its own connection) purges the expired rows; the line
 *       then gives throughput before and during the purge and the longest
 *       claim of each period.
 *       --positions: each delivery carries a Kafka-like source position
 *       ("orders/P@OFFSET", 8 partitions), as a source would give it.
 *
 * Not a test: it never fails on a timing, only on wrong counts (exit 1).
 */
#include <inbox/inbox.h>
#include <inbox/sys/store.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "plain.h"
#include "workload.h"

#define CONSUMER "billing.order-created.v1"
#define PREFIX   "bench_"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- generators ------------------------------------------------------ */

static int gen_jsonl(long n, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	wl_msg m;
	for (long i = 0; i < n; i++) {
		wl_message(i, &m);
		fputs(m.json, f);
		fputc('\n', f);
	}
	return fclose(f) == 0 ? 0 : 1;
}

/* One text[] literal of the batch's ids, orders or fingerprints. */
static void put_array(FILE *f, const wl_msg *m, const char (*fp)[65], long n,
                      int which)
{
	fputs("ARRAY[", f);
	for (long k = 0; k < n; k++) {
		const char *v = which == 0   ? m[k].id
		                : which == 1 ? m[k].order
		                             : fp[k];
		fprintf(f, "%s'%s'", k ? "," : "", v);
	}
	fputs("]::text[]", f);
}

/* The ceiling: the same rows (same inbox table, same fingerprints, the
 * same invoices) written by SQL alone. DISTINCT ON keeps one invoice for
 * a key repeated inside a batch, as the inbox does. */
static int gen_pgbench(long start, long n, long batch, const char *path)
{
	FILE *f = fopen(path, "w");
	wl_msg *m = calloc((size_t)batch, sizeof(*m));
	char(*fp)[65] = calloc((size_t)batch, sizeof(*fp));
	if (!f || !m || !fp) {
		perror(path);
		return 1;
	}
	for (long i = start; i < start + n; i += batch) {
		long b = start + n - i < batch ? start + n - i : batch;
		for (long k = 0; k < b; k++) {
			wl_message(i + k, &m[k]);
			inbox_fingerprint(m[k].json, (size_t)m[k].len, "",
			                  fp[k], NULL, 0);
		}
		fputs("BEGIN;\n", f);
		fputs(
		    "WITH ins AS (INSERT INTO " PREFIX
		    "inbox AS x (gen, consumer, key, fingerprint, status, "
		    "attempts, fence, message_id, processed_at)\n SELECT "
		    "(SELECT max(gen) FROM " PREFIX "inbox_generations), "
		    "'" CONSUMER
		    "', t.k, t.f, 'completed', 1, 1, t.k, now()\n FROM unnest(",
		    f);
		put_array(f, m, fp, b, 0);
		fputs(", ", f);
		put_array(f, m, fp, b, 2);
		fputs(
		    ") AS t(k, f)\n ON CONFLICT DO NOTHING RETURNING x.key)\n"
		    "SELECT coalesce(array_agg(key), '{}') AS new_ids FROM ins "
		    "\\gset\n",
		    f);
		fputs("INSERT INTO " PREFIX "invoices (order_id, total_cents)\n"
		      " SELECT DISTINCT ON (t.k) t.o, t.c FROM unnest(",
		      f);
		put_array(f, m, fp, b, 0);
		fputs(", ", f);
		put_array(f, m, fp, b, 1);
		fputs(", ARRAY[", f);
		for (long k = 0; k < b; k++)
			fprintf(f, "%s%ld", k ? "," : "", m[k].total);
		fputs("]::bigint[]) AS t(k, o, c)\n"
		      " WHERE t.k = ANY(:new_ids::text[]);\n",
		      f);
		fputs("COMMIT;\n", f);
	}
	free(m);
	free(fp);
	return fclose(f) == 0 ? 0 : 1;
}

/* ---- the libinbox run ------------------------------------------------ */

static int handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	(void)p;
	const char *order, *total;
	if (inbox_msg_get(m, "/data/orderId", &order) ||
	    inbox_msg_get(m, "/data/totalCents", &total))
		return INBOX_HANDLER_REJECT;
	const char *params[] = {order, total};
	if (inbox_txn_exec(t,
	                   "INSERT INTO " PREFIX "invoices (order_id, "
	                   "total_cents) VALUES ($1, $2)",
	                   2, params, NULL))
		return INBOX_HANDLER_RETRY;
	return INBOX_HANDLER_OK;
}

static int first_col(int n, const char *const *v, void *p)
{
	*(long *)p = n > 0 && v[0] ? atol(v[0]) : -1;
	return 1;
}

static long count(inbox_store *st, const char *sql)
{
	long v = -1;
	if (inbox_store_query(st, sql, 0, NULL, first_col, &v) != INBOX_OK)
		fprintf(stderr, "count: %s\n", inbox_store_errmsg(st));
	return v;
}

static int reset_tables(inbox_store *st, int keep_inbox)
{
	int pg = strcmp(inbox_store_kind(st), "postgresql") == 0;
	const char *sql[] = {
	    pg ? "TRUNCATE " PREFIX "invoices, " PREFIX "dead_letters"
	       : "DELETE FROM " PREFIX "invoices",
	    pg || keep_inbox ? NULL : "DELETE FROM " PREFIX "dead_letters",
	    keep_inbox ? NULL
	    : pg       ? "TRUNCATE " PREFIX "inbox"
	               : "DELETE FROM " PREFIX "inbox"};
	for (size_t i = 0; i < sizeof(sql) / sizeof(*sql); i++)
		if (sql[i] &&
		    inbox_store_exec(st, sql[i], 0, NULL, NULL) != INBOX_OK) {
			fprintf(stderr, "reset: %s\n", inbox_store_errmsg(st));
			return -1;
		}
	return 0;
}

/* Claim timing: the store's claim slot, wrapped. */
static inbox_store_vtable timed_vt;
static int (*real_claim)(inbox_store *, const char *, inbox_claim *, size_t,
                         inbox_status, int64_t);
static double claim_max[2];    /* [0] before the purge, [1] during it */
static atomic_int purge_phase; /* 0 before, 1 running, 2 done */

static int timed_claim(inbox_store *st, const char *consumer, inbox_claim *c,
                       size_t n, inbox_status status, int64_t lease_ms)
{
	int phase = purge_phase == 1;
	double t0 = now_s();
	int rc = real_claim(st, consumer, c, n, status, lease_ms);
	double dt = now_s() - t0;
	if (dt > claim_max[phase])
		claim_max[phase] = dt;
	return rc;
}

typedef struct purge_job {
	const char *url;
	int64_t deleted;
	double t0, t1;
	int rc;
	char err[512];
} purge_job;

static void *purge_main(void *arg)
{
	purge_job *j = arg;
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = PREFIX;
	inbox_store *st = NULL;
	j->t0 = now_s();
	purge_phase = 1;
	j->rc = inbox_store_open(&st, j->url, &so);
	if (j->rc == INBOX_OK)
		j->rc = inbox_store_purge(st, CONSUMER, 0, 0, 0, &j->deleted);
	if (j->rc != INBOX_OK)
		snprintf(j->err, sizeof(j->err), "%s", inbox_store_errmsg(st));
	inbox_store_close(st);
	j->t1 = now_s();
	purge_phase = 2;
	return NULL;
}

typedef struct run_opts {
	const char *url;
	long n;
	size_t batch;
	int replay;
	int keep_inbox;
	int purge;
	int positions;
} run_opts;

static int run(const run_opts *o)
{
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = PREFIX;
	inbox_store *st = NULL;
	if (inbox_store_open(&st, o->url, &so) != INBOX_OK) {
		fprintf(stderr, "open: %s\n", inbox_store_errmsg(st));
		return 1;
	}
	inbox_store_exec(st,
	                 "CREATE TABLE IF NOT EXISTS " PREFIX "invoices ("
	                 "order_id TEXT NOT NULL, total_cents BIGINT NOT NULL)",
	                 0, NULL, NULL);
	long before_rows = count(st, "SELECT count(*) FROM " PREFIX "inbox");
	if (!o->replay && reset_tables(st, o->keep_inbox) < 0)
		return 1;
	timed_vt = *st->vt;
	real_claim = timed_vt.claim;
	timed_vt.claim = timed_claim;
	st->vt = &timed_vt;

	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = CONSUMER;
	co.handler = handler;
	inbox_consumer *c = NULL;
	char err[256];
	if (o->keep_inbox)
		before_rows = count(st, "SELECT count(*) FROM " PREFIX "inbox");
	else if (!o->replay)
		before_rows = 0;
	if (inbox_consumer_open(&c, st, &co, err, sizeof(err)) != INBOX_OK) {
		fprintf(stderr, "consumer: %s\n", err);
		return 1;
	}
	wl_msg *m = calloc(o->batch, sizeof(*m));
	inbox_delivery *d = calloc(o->batch, sizeof(*d));
	inbox_result *r = calloc(o->batch, sizeof(*r));
	char(*pos)[32] = calloc(o->batch, sizeof(*pos));
	if (!m || !d || !r || !pos)
		return 1;
	r[0].version = INBOX_RESULT_VERSION;
	purge_job job = {.url = o->url};
	pthread_t th;
	/* Only the processing calls are timed: making up the messages is the
	 * broker's work, done by the other contenders before their clock. */
	long purge_at = o->purge ? o->n / 5 : -1, at_start = 0, at_end = -1;
	double batch_max = 0, busy = 0, busy_start = 0, busy_end = -1, cpu = 0;
	/* The backend's CPU, as for plain_pg (PostgreSQL only). */
	long pid = strcmp(inbox_store_kind(st), "postgresql") == 0
	               ? count(st, "SELECT pg_backend_pid()")
	               : -1;
	double srv0 = pid > 0 ? plain_proc_cpu_s((int)pid) : -1;
	for (long i = 0; i < o->n; i += (long)o->batch) {
		if (i >= purge_at && purge_at >= 0) {
			at_start = i;
			busy_start = busy;
			pthread_create(&th, NULL, purge_main, &job);
			purge_at = -1;
		}
		if (purge_phase == 2 && at_end < 0) {
			at_end = i;
			busy_end = busy;
		}
		size_t b = (size_t)(o->n - i) < o->batch ? (size_t)(o->n - i)
		                                         : o->batch;
		for (size_t k = 0; k < b; k++) {
			wl_message(i + (long)k, &m[k]);
			d[k] = (inbox_delivery)INBOX_DELIVERY_INIT;
			d[k].payload = m[k].json;
			d[k].payload_len = (size_t)m[k].len;
			if (o->positions) {
				snprintf(pos[k], sizeof(pos[k]),
				         "orders/%ld@%ld", (i + (long)k) % 8,
				         (i + (long)k) / 8);
				d[k].position = pos[k];
			}
		}
		double tb = now_s(), cb = plain_cpu_s();
		int rc = inbox_consumer_process_batch(c, d, b, r);
		cpu += plain_cpu_s() - cb;
		tb = now_s() - tb;
		busy += tb;
		if (tb > batch_max)
			batch_max = tb;
		if (rc != INBOX_OK) {
			fprintf(stderr, "batch: %s\n",
			        inbox_consumer_errmsg(c));
			return 1;
		}
	}
	double dt = busy;
	double srv1 = pid > 0 ? plain_proc_cpu_s((int)pid) : -1;
	char srv[32] = "-";
	if (srv0 >= 0 && srv1 >= 0)
		snprintf(srv, sizeof(srv), "%.2f", (srv1 - srv0) * 1e6 / o->n);
	if (o->purge) {
		if (at_end < 0) {
			at_end = o->n;
			busy_end = busy;
		}
		pthread_join(th, NULL);
	}
	inbox_stats s = INBOX_STATS_INIT;
	inbox_consumer_stats(c, &s);
	long invoices = count(st, "SELECT count(*) FROM " PREFIX "invoices");
	long records = count(st, "SELECT count(*) FROM " PREFIX "inbox");
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	long distinct = wl_distinct(o->n);
	long want_applied = o->replay ? 0 : distinct;
	int ok = invoices == distinct && (long)s.applied == want_applied &&
	         (long)s.duplicates == o->n - want_applied &&
	         s.dead_letters == 0;
	/* every inbox row is accounted for: those there before (less the
	 * purged ones) and one per new event */
	if (o->purge)
		ok = ok && job.rc == INBOX_OK &&
		     records == before_rows - job.deleted + want_applied;
	else
		ok = ok && records == before_rows + want_applied;
	printf("RESULT store=%s batch=%zu messages=%ld distinct=%ld "
	       "applied=%llu duplicates=%llu invoices=%ld inbox_rows=%ld "
	       "inbox_rows_before=%ld "
	       "counts=%s seconds=%.3f rate=%.0f maxrss_kb=%ld "
	       "max_batch_ms=%.1f max_claim_ms=%.1f client_cpu_us=%.2f "
	       "server_cpu_us=%s",
	       inbox_store_kind(st), o->batch, o->n, distinct,
	       (unsigned long long)s.applied, (unsigned long long)s.duplicates,
	       invoices, records, before_rows, ok ? "ok" : "WRONG", dt,
	       (double)o->n / dt, ru.ru_maxrss, batch_max * 1e3,
	       claim_max[0] * 1e3, cpu * 1e6 / o->n, srv);
	if (o->purge) {
		/* During = from the purge's start to its end, or to the end
		 * of the stream if the purge outlasted it. */
		double before = busy_start, during = busy_end - busy_start;
		long during_msgs = at_end - at_start;
		printf(" purge_rc=%s purged=%lld purge_seconds=%.2f "
		       "rate_before=%.0f rate_during=%.0f "
		       "max_claim_before_ms=%.1f max_claim_during_ms=%.1f%s%s",
		       inbox_err_name(job.rc), (long long)job.deleted,
		       job.t1 - job.t0,
		       before > 0 ? (double)at_start / before : 0.0,
		       during > 0 ? (double)during_msgs / during : 0.0,
		       claim_max[0] * 1e3, claim_max[1] * 1e3,
		       job.err[0] ? " purge_error=" : "", job.err);
	}
	printf("\n");
	inbox_consumer_close(c);
	inbox_store_close(st);
	free(m);
	free(d);
	free(r);
	free(pos);
	return ok ? 0 : 1;
}

/* Seal the newest generation of the inbox (whatever it holds) and build
 * its filter, as `inbox purge` does once it holds enough rows. */
static int seal(const char *url)
{
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = PREFIX;
	inbox_store *st = NULL;
	int rc = inbox_store_open(&st, url, &so);
	double t0 = now_s();
	int sealed = 0;
	if (rc == INBOX_OK)
		rc = inbox_store_seal(st, 0, &sealed);
	if (rc != INBOX_OK) {
		fprintf(stderr, "seal: %s\n", inbox_store_errmsg(st));
		inbox_store_close(st);
		return 1;
	}
	printf("RESULT sealed=%d seconds=%.2f\n", sealed, now_s() - t0);
	inbox_store_close(st);
	return 0;
}

static int usage(void)
{
	fprintf(stderr,
	        "usage: inbox_bench gen-jsonl N FILE\n"
	        "       inbox_bench gen-pgbench START COUNT BATCH FILE\n"
	        "       inbox_bench run STORE_URL N BATCH [--replay | "
	        "--keep-inbox] [--purge-during] [--positions]\n"
	        "       inbox_bench seal STORE_URL\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "gen-jsonl") == 0)
		return gen_jsonl(atol(argv[2]), argv[3]);
	if (argc == 6 && strcmp(argv[1], "gen-pgbench") == 0)
		return gen_pgbench(atol(argv[2]), atol(argv[3]), atol(argv[4]),
		                   argv[5]);
	if (argc == 3 && strcmp(argv[1], "seal") == 0)
		return seal(argv[2]);
	if (argc >= 5 && strcmp(argv[1], "run") == 0) {
		run_opts o = {
		    argv[2], atol(argv[3]), (size_t)atol(argv[4]), 0, 0, 0, 0};
		for (int i = 5; i < argc; i++) {
			if (strcmp(argv[i], "--replay") == 0)
				o.replay = 1;
			else if (strcmp(argv[i], "--keep-inbox") == 0)
				o.keep_inbox = 1;
			else if (strcmp(argv[i], "--purge-during") == 0)
				o.purge = 1;
			else if (strcmp(argv[i], "--positions") == 0)
				o.positions = 1;
			else
				return usage();
		}
		if (o.n <= 0 || o.batch == 0)
			return usage();
		return run(&o);
	}
	return usage();
}
