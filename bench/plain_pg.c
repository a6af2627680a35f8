/*
 * plain_pg: the PostgreSQL ceiling of bench/run — the durable work
 * libinbox does for the workload (the same inbox table, created by
 * libinbox's migration, the same fingerprints, one invoice per distinct
 * event, 100 messages per transaction, fsync'ed commits) by a bare libpq
 * loop written to be as cheap as a program can:
 *
 *   every statement prepared once; the batch's keys, fingerprints and
 *   invoice rows as binary array parameters (no text to build or parse);
 *   pipeline mode throughout; per batch two round trips —
 *     BEGIN + claim    INSERT INTO inbox ... SELECT ... FROM
 *                      unnest($3::text[], $4::text[]) ON CONFLICT DO
 *                      NOTHING RETURNING key   (the new keys)
 *     invoices + COMMIT  INSERT INTO invoices SELECT * FROM
 *                      unnest($1::text[], $2::int8[]) for the new ones
 *   — the shape of any consumer that decides in its own code what to do
 *   with a message it has not seen (the claim's answer is needed before
 *   the effect), which is libinbox's shape too.
 *
 * Per message it parses the JSON (jansson) and fingerprints it, as a
 * hand-written consumer must (plain.h); with --pre-extracted every field
 * and fingerprint is computed before the clock starts: the bare durable
 * work. --one-statement decides the effect in SQL instead (one statement
 * inserts the keys and the invoices of those inserted: one round trip per
 * batch) — a bound for effects that SQL alone can express, beside the
 * ceiling, not the ceiling.
 *
 * --row-inserts sends the invoices as one single-row INSERT each (in the
 * same pipeline), the statements a libinbox handler issues.
 *
 * Prints one RESULT line: the rate (timed: the batches only), client CPU
 * per message (getrusage user + sys over the batches) and the backend's
 * CPU per message (/proc/PID/stat utime + stime of pg_backend_pid()). It
 * checks its counts (exit 1 when wrong), never a timing.
 *
 *   plain_pg URL N BATCH [--pre-extracted] [--one-statement]
 *            [--row-inserts] [--keep-inbox]
 */
#include <inbox/inbox.h>

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plain.h"
#include "workload.h"

#define CONSUMER "billing.order-created.v1"

#define OID_INT4       23
#define OID_TEXT       25
#define OID_INT8       20
#define OID_TEXT_ARRAY 1009
#define OID_INT8_ARRAY 1016

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(PGconn *c, const char *what, PGresult *r)
{
	fprintf(stderr, "plain_pg: %s: %s", what,
	        r ? PQresultErrorMessage(r) : PQerrorMessage(c));
	exit(1);
}

/* ---- binary arrays ---------------------------------------------------- */

/* One-dimensional array in PostgreSQL's binary form (array_send):
 * ndim, has-null flag, element type, then the dimension's length and
 * lower bound, then each element as length + bytes; big-endian. */
typedef struct arr {
	char *p;
	size_t len, cap;
	size_t count_at; /* offset of the dimension's length */
	uint32_t n;
} arr;

static void put(arr *a, const void *v, size_t n)
{
	if (a->len + n > a->cap) {
		a->cap = (a->len + n) * 2;
		a->p = realloc(a->p, a->cap);
		if (!a->p)
			exit(1);
	}
	memcpy(a->p + a->len, v, n);
	a->len += n;
}

static void put32(arr *a, uint32_t v)
{
	v = htonl(v);
	put(a, &v, 4);
}

static void arr_start(arr *a, uint32_t elem_oid)
{
	a->len = 0;
	a->n = 0;
	put32(a, 1);
	put32(a, 0);
	put32(a, elem_oid);
	a->count_at = a->len;
	put32(a, 0);
	put32(a, 1);
}

static void arr_text(arr *a, const char *s)
{
	size_t n = strlen(s);
	put32(a, (uint32_t)n);
	put(a, s, n);
	a->n++;
}

static void arr_int8(arr *a, int64_t v)
{
	uint64_t u = (uint64_t)v;
	uint32_t hi = htonl((uint32_t)(u >> 32)), lo = htonl((uint32_t)u);
	put32(a, 8);
	put(a, &hi, 4);
	put(a, &lo, 4);
	a->n++;
}

static void arr_end(arr *a)
{
	uint32_t v = htonl(a->n);
	memcpy(a->p + a->count_at, &v, 4);
}

/* ---- the loop ---------------------------------------------------------- */

static PGresult *exec(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType t = PQresultStatus(r);
	if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK)
		die(c, sql, r);
	return r;
}

static long count(PGconn *c, const char *sql)
{
	PGresult *r = exec(c, sql);
	long v = atol(PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

static void prepare(PGconn *c, const char *name, const char *sql, int n,
                    const Oid *types)
{
	PGresult *r = PQprepare(c, name, sql, n, types);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		die(c, name, r);
	PQclear(r);
}

/* Read one command's result in the pipeline (and the NULL after it);
 * the caller PQclear()s it. */
static PGresult *result(PGconn *c, const char *what)
{
	PGresult *r = PQgetResult(c);
	ExecStatusType t = PQresultStatus(r);
	if (!r || (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK))
		die(c, what, r);
	PGresult *end = PQgetResult(c);
	if (end)
		die(c, "pipeline out of step", end);
	return r;
}

static void sync_point(PGconn *c)
{
	PGresult *r = PQgetResult(c);
	if (PQresultStatus(r) != PGRES_PIPELINE_SYNC)
		die(c, "sync", r);
	PQclear(r);
}

static void send_prepared(PGconn *c, const char *name, int n,
                          const char *const *v, const int *len, const int *fmt)
{
	if (!PQsendQueryPrepared(c, name, n, v, len, fmt, 0))
		die(c, name, NULL);
}

typedef struct batch {
	const plain_row *rows;
	long n;
	char gen[16];
	arr keys, fps, orders, totals;
	char *isnew;
	int row_inserts;
} batch;

/* Mark the rows whose key the claim returned. RETURNING gives the
 * inserted keys in the order of the input, a subsequence of it (a key
 * repeated in the batch is inserted once, at its first place): walk both.
 * Should an order ever differ, look each one up. */
static void mark_new(batch *b, const PGresult *r)
{
	int nr = PQntuples(r), j = 0;
	memset(b->isnew, 0, (size_t)b->n);
	for (long k = 0; k < b->n && j < nr; k++)
		if (strcmp(b->rows[k].id, PQgetvalue(r, j, 0)) == 0) {
			b->isnew[k] = 1;
			j++;
		}
	if (j == nr)
		return;
	memset(b->isnew, 0, (size_t)b->n);
	for (j = 0; j < nr; j++)
		for (long k = 0; k < b->n; k++)
			if (!b->isnew[k] &&
			    strcmp(b->rows[k].id, PQgetvalue(r, j, 0)) == 0) {
				b->isnew[k] = 1;
				break;
			}
}

static void claim_arrays(batch *b)
{
	arr_start(&b->keys, OID_TEXT);
	arr_start(&b->fps, OID_TEXT);
	for (long k = 0; k < b->n; k++) {
		arr_text(&b->keys, b->rows[k].id);
		arr_text(&b->fps, b->rows[k].fp);
	}
	arr_end(&b->keys);
	arr_end(&b->fps);
}

/* Two round trips: BEGIN + claim; invoices of the new keys + COMMIT. */
static void run_batch(PGconn *c, batch *b)
{
	claim_arrays(b);
	const char *v[4] = {b->gen, CONSUMER, b->keys.p, b->fps.p};
	int len[4] = {0, 0, (int)b->keys.len, (int)b->fps.len};
	int fmt[4] = {0, 0, 1, 1};
	send_prepared(c, "begin", 0, NULL, NULL, NULL);
	send_prepared(c, "claim", 4, v, len, fmt);
	if (!PQpipelineSync(c))
		die(c, "sync", NULL);
	PQclear(result(c, "begin"));
	PGresult *r = result(c, "claim");
	sync_point(c);
	mark_new(b, r);
	PQclear(r);

	arr_start(&b->orders, OID_TEXT);
	arr_start(&b->totals, OID_INT8);
	for (long k = 0; k < b->n; k++)
		if (b->isnew[k]) {
			arr_text(&b->orders, b->rows[k].order);
			arr_int8(&b->totals, b->rows[k].total);
		}
	arr_end(&b->orders);
	arr_end(&b->totals);
	int ninv = b->orders.n > 0;
	if (b->row_inserts) {
		ninv = 0;
		for (long k = 0; k < b->n; k++)
			if (b->isnew[k]) {
				char tot[24];
				snprintf(tot, sizeof(tot), "%ld",
				         b->rows[k].total);
				const char *iv[2] = {b->rows[k].order, tot};
				send_prepared(c, "invoice", 2, iv, NULL, NULL);
				ninv++;
			}
		send_prepared(c, "commit", 0, NULL, NULL, NULL);
		if (!PQpipelineSync(c))
			die(c, "sync", NULL);
		for (int k = 0; k < ninv; k++)
			PQclear(result(c, "invoice"));
		PQclear(result(c, "commit"));
		sync_point(c);
		return;
	}
	if (ninv) {
		const char *iv[2] = {b->orders.p, b->totals.p};
		int il[2] = {(int)b->orders.len, (int)b->totals.len};
		int ifm[2] = {1, 1};
		send_prepared(c, "invoices", 2, iv, il, ifm);
	}
	send_prepared(c, "commit", 0, NULL, NULL, NULL);
	if (!PQpipelineSync(c))
		die(c, "sync", NULL);
	if (ninv)
		PQclear(result(c, "invoices"));
	PQclear(result(c, "commit"));
	sync_point(c);
}

/* One round trip: BEGIN + (claim and invoices in one statement) + COMMIT. */
static void run_batch_one(PGconn *c, batch *b)
{
	claim_arrays(b);
	arr_start(&b->orders, OID_TEXT);
	arr_start(&b->totals, OID_INT8);
	for (long k = 0; k < b->n; k++) {
		arr_text(&b->orders, b->rows[k].order);
		arr_int8(&b->totals, b->rows[k].total);
	}
	arr_end(&b->orders);
	arr_end(&b->totals);
	const char *v[6] = {b->gen,   CONSUMER,    b->keys.p,
	                    b->fps.p, b->orders.p, b->totals.p};
	int len[6] = {0,
	              0,
	              (int)b->keys.len,
	              (int)b->fps.len,
	              (int)b->orders.len,
	              (int)b->totals.len};
	int fmt[6] = {0, 0, 1, 1, 1, 1};
	send_prepared(c, "begin", 0, NULL, NULL, NULL);
	send_prepared(c, "claim_all", 6, v, len, fmt);
	send_prepared(c, "commit", 0, NULL, NULL, NULL);
	if (!PQpipelineSync(c))
		die(c, "sync", NULL);
	PQclear(result(c, "begin"));
	PQclear(result(c, "claim"));
	PQclear(result(c, "commit"));
	sync_point(c);
}

#define CLAIM_INSERT                                                           \
	"INSERT INTO bench_inbox AS x (gen, consumer, key, fingerprint, "      \
	"status, attempts, fence, message_id, processed_at) SELECT $1, $2, "   \
	"t.k, t.f, 'completed', 1, 1, t.k, now() FROM unnest($3::text[], "     \
	"$4::text[]) AS t(k, f) ON CONFLICT DO NOTHING RETURNING x.key"

static void prepare_all(PGconn *c)
{
	static const Oid claim_t[] = {OID_INT4,       OID_TEXT,
	                              OID_TEXT_ARRAY, OID_TEXT_ARRAY,
	                              OID_TEXT_ARRAY, OID_INT8_ARRAY};
	static const Oid inv_t[] = {OID_TEXT_ARRAY, OID_INT8_ARRAY};
	prepare(c, "begin", "BEGIN", 0, NULL);
	prepare(c, "commit", "COMMIT", 0, NULL);
	prepare(c, "claim", CLAIM_INSERT, 4, claim_t);
	prepare(c, "invoice",
	        "INSERT INTO bench_invoices (order_id, total_cents) "
	        "VALUES ($1, $2)",
	        0, NULL);
	prepare(c, "invoices",
	        "INSERT INTO bench_invoices (order_id, total_cents) "
	        "SELECT * FROM unnest($1::text[], $2::int8[])",
	        2, inv_t);
	/* DISTINCT ON: a key twice in the batch is invoiced once */
	prepare(c, "claim_all",
	        "WITH ins AS (" CLAIM_INSERT
	        ") INSERT INTO bench_invoices (order_id, total_cents) "
	        "SELECT DISTINCT ON (t.k) t.o, t.c FROM unnest($3::text[], "
	        "$5::text[], $6::int8[]) AS t(k, o, c) "
	        "WHERE t.k IN (SELECT key FROM ins)",
	        6, claim_t);
}

static int usage(void)
{
	fprintf(stderr, "usage: plain_pg URL N BATCH [--pre-extracted] "
	                "[--one-statement] [--row-inserts] [--keep-inbox]\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return usage();
	const char *url = argv[1];
	long n = atol(argv[2]), bs = atol(argv[3]);
	int pre = 0, one = 0, keep = 0, rowins = 0;
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--pre-extracted") == 0)
			pre = 1;
		else if (strcmp(argv[i], "--one-statement") == 0)
			one = 1;
		else if (strcmp(argv[i], "--keep-inbox") == 0)
			keep = 1;
		else if (strcmp(argv[i], "--row-inserts") == 0)
			rowins = 1;
		else
			return usage();
	}
	if (n <= 0 || bs <= 0)
		return usage();

	/* The schema: libinbox's own (prefix bench_). */
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = "bench_";
	inbox_store *st = NULL;
	if (inbox_store_open(&st, url, &so) != INBOX_OK) {
		fprintf(stderr, "open: %s\n", inbox_store_errmsg(st));
		return 1;
	}
	inbox_store_close(st);

	PGconn *c = PQconnectdb(url);
	if (PQstatus(c) != CONNECTION_OK)
		die(c, "connect", NULL);
	PQclear(exec(c, "SET client_min_messages = warning"));
	PQclear(exec(c,
	             "CREATE TABLE IF NOT EXISTS bench_invoices ("
	             "order_id TEXT NOT NULL, total_cents BIGINT NOT NULL)"));
	PQclear(exec(c, keep ? "TRUNCATE bench_invoices"
	                     : "TRUNCATE bench_invoices, bench_inbox"));
	long before = count(c, "SELECT count(*) FROM bench_inbox");

	/* The messages as the broker hands them over, all made before the
	 * clock starts (as for every contender); with --pre-extracted their
	 * fields and fingerprints too. */
	plain_row *rows = malloc(sizeof(*rows) * (size_t)(pre ? n : bs));
	wl_msg *msgs = pre ? NULL : malloc(sizeof(*msgs) * (size_t)n);
	batch b = {0};
	b.row_inserts = rowins;
	b.isnew = malloc((size_t)bs);
	if (!rows || (!pre && !msgs) || !b.isnew)
		return 1;
	wl_msg m;
	for (long i = 0; i < n; i++) {
		wl_message(i, pre ? &m : &msgs[i]);
		if (!pre)
			continue;
		memcpy(rows[i].id, m.id, sizeof(m.id));
		memcpy(rows[i].order, m.order, sizeof(m.order));
		rows[i].total = m.total;
		inbox_fingerprint(m.json, (size_t)m.len, "", rows[i].fp, NULL,
		                  0);
	}
	EVP_MD *md = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (!md)
		return 1;
	snprintf(b.gen, sizeof(b.gen), "%ld",
	         count(c, "SELECT max(gen) FROM bench_inbox_generations"));
	prepare_all(c);
	int pid = PQbackendPID(c);
	if (!PQenterPipelineMode(c))
		die(c, "pipeline mode", NULL);

	double busy = 0, cpu = 0;
	double srv0 = plain_proc_cpu_s(pid);
	for (long i = 0; i < n; i += bs) {
		double t0 = now_s(), c0 = plain_cpu_s();
		b.n = n - i < bs ? n - i : bs;
		if (pre) {
			b.rows = &rows[i];
		} else {
			for (long k = 0; k < b.n; k++)
				if (plain_parse(msgs[i + k].json,
				                (size_t)msgs[i + k].len, md,
				                &rows[k]) < 0) {
					fprintf(stderr,
					        "plain_pg: bad message\n");
					return 1;
				}
			b.rows = rows;
		}
		if (one)
			run_batch_one(c, &b);
		else
			run_batch(c, &b);
		cpu += plain_cpu_s() - c0;
		busy += now_s() - t0;
	}
	double srv1 = plain_proc_cpu_s(pid);
	PQexitPipelineMode(c);

	long invoices = count(c, "SELECT count(*) FROM bench_invoices");
	long records = count(c, "SELECT count(*) FROM bench_inbox");
	long distinct = wl_distinct(n);
	int ok = invoices == distinct && records == before + distinct;
	/* the same fingerprints as libinbox's, or the comparison is off */
	if (!pre) {
		char want[65];
		plain_row r;
		wl_message(0, &m);
		ok = ok && plain_parse(m.json, (size_t)m.len, md, &r) == 0;
		inbox_fingerprint(m.json, (size_t)m.len, "", want, NULL, 0);
		ok = ok && strcmp(want, r.fp) == 0;
	}
	char srv[32] = "-";
	if (srv0 >= 0 && srv1 >= 0)
		snprintf(srv, sizeof(srv), "%.2f", (srv1 - srv0) * 1e6 / n);
	printf("RESULT store=pg-plain batch=%ld messages=%ld distinct=%ld "
	       "invoices=%ld inbox_rows=%ld counts=%s seconds=%.3f rate=%.0f "
	       "client_cpu_us=%.2f server_cpu_us=%s\n",
	       bs, n, distinct, invoices, records, ok ? "ok" : "WRONG", busy,
	       (double)n / busy, cpu * 1e6 / n, srv);
	PQfinish(c);
	EVP_MD_free(md);
	free(rows);
	free(msgs);
	free(b.isnew);
	free(b.keys.p);
	free(b.fps.p);
	free(b.orders.p);
	free(b.totals.p);
	return ok ? 0 : 1;
}
