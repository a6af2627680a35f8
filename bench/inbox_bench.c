/*
 * inbox_bench: messages/s of libinbox for the seed's workload.
 *
 *   inbox_bench STORE_URL [MESSAGES] [BATCH] [DUP_PERCENT]
 *
 * Builds MESSAGES order-created events {id, data:{orderId,totalCents}}
 * where DUP_PERCENT of them are redeliveries of earlier ids, processes
 * them in batches of BATCH through the C API (one transaction per batch,
 * the handler inserts one invoice), checks that exactly the distinct
 * orders were invoiced, and prints one line of figures. Tables are
 * dropped first. Not a test: it never fails on a timing.
 */
#include <inbox/inbox.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static int handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	(void)p;
	const char *order, *total;
	if (inbox_msg_get(m, "/data/orderId", &order) ||
	    inbox_msg_get(m, "/data/totalCents", &total))
		return INBOX_HANDLER_REJECT;
	const char *params[] = {order, total};
	if (inbox_txn_exec(t,
	                   "INSERT INTO bench_invoices (order_id, total_cents) "
	                   "VALUES ($1, $2)",
	                   2, params, NULL))
		return INBOX_HANDLER_RETRY;
	return INBOX_HANDLER_OK;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int first_col(int n, const char *const *v, void *p)
{
	*(long *)p = n > 0 && v[0] ? atol(v[0]) : -1;
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr,
		        "usage: inbox_bench STORE_URL [MESSAGES] [BATCH] "
		        "[DUP_PERCENT]\n");
		return 2;
	}
	const char *url = argv[1];
	long total = argc > 2 ? atol(argv[2]) : 100000;
	size_t batch = argc > 3 ? (size_t)atol(argv[3]) : 100;
	int dup_pct = argc > 4 ? atoi(argv[4]) : 10;
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = "bench_";
	inbox_store *st = NULL;
	if (inbox_store_open(&st, url, &so) != INBOX_OK) {
		fprintf(stderr, "open: %s\n", inbox_store_errmsg(st));
		return 1;
	}
	inbox_store_exec(st, "DROP TABLE IF EXISTS bench_invoices", 0, NULL,
	                 NULL);
	inbox_store_exec(st,
	                 "CREATE TABLE bench_invoices (order_id TEXT NOT NULL, "
	                 "total_cents BIGINT NOT NULL)",
	                 0, NULL, NULL);
	inbox_store_exec(st, "DELETE FROM bench_inbox", 0, NULL, NULL);
	inbox_store_exec(st, "DELETE FROM bench_dead_letters", 0, NULL, NULL);

	/* The workload: every 10th message (at 10%) repeats an earlier id. */
	char **payload = malloc(sizeof(char *) * (size_t)total);
	long distinct = 0;
	srand(42);
	for (long i = 0; i < total; i++) {
		long id;
		if (distinct > 0 && (rand() % 100) < dup_pct)
			id = rand() % distinct;
		else
			id = distinct++;
		char buf[160];
		int n = snprintf(buf, sizeof(buf),
		                 "{\"id\":\"evt-%08ld\",\"data\":{\"orderId\":"
		                 "\"ord-%08ld\",\"totalCents\":%ld}}",
		                 id, id, 100 + id % 9000);
		payload[i] = malloc((size_t)n + 1);
		memcpy(payload[i], buf, (size_t)n + 1);
	}

	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.order-created.v1";
	o.handler = handler;
	inbox_consumer *c = NULL;
	char err[256];
	if (inbox_consumer_open(&c, st, &o, err, sizeof(err)) != INBOX_OK) {
		fprintf(stderr, "consumer: %s\n", err);
		return 1;
	}
	inbox_delivery *d = calloc(batch, sizeof(*d));
	inbox_result *r = calloc(batch, sizeof(*r));
	double t0 = now();
	for (long i = 0; i < total; i += (long)batch) {
		size_t n = (size_t)(total - i) < batch ? (size_t)(total - i)
		                                      : batch;
		for (size_t k = 0; k < n; k++) {
			d[k].payload = payload[i + (long)k];
			d[k].payload_len = strlen(payload[i + (long)k]);
		}
		int rc = inbox_consumer_process_batch(c, d, n, r);
		if (rc != INBOX_OK) {
			fprintf(stderr, "batch: %s\n", inbox_consumer_errmsg(c));
			return 1;
		}
	}
	double dt = now() - t0;
	inbox_stats s;
	inbox_consumer_stats(c, &s);
	long invoices = -1;
	inbox_store_query(st, "SELECT COUNT(*) FROM bench_invoices", 0, NULL,
	                  first_col, &invoices);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	int ok = invoices == distinct && (long)s.applied == distinct;
	printf("%-10s batch=%-5zu messages=%ld distinct=%ld applied=%llu "
	       "duplicates=%llu invoices=%ld %s  %.0f msg/s  (%.2f s, "
	       "maxrss %ld KiB)\n",
	       inbox_store_kind(st), batch, total, distinct,
	       (unsigned long long)s.applied,
	       (unsigned long long)s.duplicates, invoices,
	       ok ? "COUNTS-OK" : "COUNTS-WRONG", (double)total / dt, dt,
	       ru.ru_maxrss);
	inbox_consumer_close(c);
	inbox_store_close(st);
	for (long i = 0; i < total; i++)
		free(payload[i]);
	free(payload);
	free(d);
	free(r);
	return ok ? 0 : 1;
}
