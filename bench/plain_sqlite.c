/*
 * plain_sqlite: the SQLite reference for bench/run — the same rows as
 * libinbox writes (the same inbox table, created by libinbox's migration,
 * the same fingerprints, the same invoices), in the same batches, with
 * the same durability (WAL, synchronous=FULL), by a bare sqlite3 loop, as
 * one would write it by hand:
 *
 *   BEGIN IMMEDIATE
 *   per message: parse it and fingerprint it (plain.h),
 *                INSERT INTO inbox ... ON CONFLICT DO NOTHING;
 *                if a row went in: INSERT INTO invoices ...
 *   COMMIT
 *
 * With --pre-extracted every field and fingerprint is computed before the
 * clock starts: no JSON, no hashing — the bare durable work on SQLite.
 *
 *   plain_sqlite DBFILE N BATCH [--pre-extracted]
 */
#include <inbox/inbox.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plain.h"
#include "workload.h"

#define CONSUMER "billing.order-created.v1"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef plain_row row;

static int check(sqlite3 *db, int rc, const char *what)
{
	if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW)
		return 0;
	fprintf(stderr, "plain_sqlite: %s: %s\n", what, sqlite3_errmsg(db));
	exit(1);
}

static void exec(sqlite3 *db, const char *sql)
{
	check(db, sqlite3_exec(db, sql, NULL, NULL, NULL), sql);
}

static void step(sqlite3 *db, sqlite3_stmt *s, const char *what)
{
	check(db, sqlite3_step(s), what);
	sqlite3_reset(s);
}

int main(int argc, char **argv)
{
	if (argc < 4 || argc > 5 ||
	    (argc == 5 && strcmp(argv[4], "--pre-extracted") != 0)) {
		fprintf(
		    stderr,
		    "usage: plain_sqlite DBFILE N BATCH [--pre-extracted]\n");
		return 2;
	}
	const char *path = argv[1];
	long n = atol(argv[2]), batch = atol(argv[3]);
	int pre = argc == 5;
	if (n <= 0 || batch <= 0)
		return 2;

	/* The schema: libinbox's own (prefix bench_), then emptied. */
	char url[4200];
	snprintf(url, sizeof(url), "sqlite:%s", path);
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = "bench_";
	inbox_store *st = NULL;
	if (inbox_store_open(&st, url, &so) != INBOX_OK) {
		fprintf(stderr, "open: %s\n", inbox_store_errmsg(st));
		return 1;
	}
	inbox_store_close(st);

	/* The messages as they come from the broker (all of them made up
	 * before the clock starts, as for every contender), and, with
	 * --pre-extracted, their fields too. */
	row *rows = malloc(sizeof(*rows) * (size_t)(pre ? n : batch));
	wl_msg *msgs = pre ? NULL : malloc(sizeof(*msgs) * (size_t)n);
	if (!rows || (!pre && !msgs))
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

	sqlite3 *db;
	check(NULL, sqlite3_open(path, &db), "open");
	sqlite3_busy_timeout(db, 5000);
	exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;");
	exec(db, "CREATE TABLE IF NOT EXISTS bench_invoices (order_id TEXT "
	         "NOT NULL, total_cents BIGINT NOT NULL)");
	exec(db, "DELETE FROM bench_invoices; DELETE FROM bench_inbox;");
	sqlite3_stmt *ins, *inv, *begin, *commit;
	check(
	    db,
	    sqlite3_prepare_v2(
	        db,
	        "INSERT INTO bench_inbox (consumer, key, fingerprint, status, "
	        "attempts, fence, lease_until, message_id, created_at, "
	        "processed_at, updated_at) VALUES (?1, ?2, ?3, 'completed', "
	        "1, 1, NULL, ?2, ?4, ?4, ?4) ON CONFLICT DO NOTHING",
	        -1, &ins, NULL),
	    "prepare");
	check(db,
	      sqlite3_prepare_v2(db,
	                         "INSERT INTO bench_invoices (order_id, "
	                         "total_cents) VALUES (?1, ?2)",
	                         -1, &inv, NULL),
	      "prepare");
	check(db, sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, NULL),
	      "prepare");
	check(db, sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL),
	      "prepare");

	double t0 = now_s();
	for (long i = 0; i < n; i += batch) {
		long b = n - i < batch ? n - i : batch;
		int64_t ts = now_ms();
		step(db, begin, "begin");
		for (long k = i; k < i + b; k++) {
			row *r = pre ? &rows[k] : &rows[k - i];
			if (!pre &&
			    plain_parse(msgs[k].json, (size_t)msgs[k].len, md,
			                r) < 0) {
				fprintf(stderr, "plain_sqlite: bad message\n");
				return 1;
			}
			sqlite3_bind_text(ins, 1, CONSUMER, -1, SQLITE_STATIC);
			sqlite3_bind_text(ins, 2, r->id, -1, SQLITE_STATIC);
			sqlite3_bind_text(ins, 3, r->fp, -1, SQLITE_STATIC);
			sqlite3_bind_int64(ins, 4, ts);
			step(db, ins, "insert inbox");
			if (sqlite3_changes(db) != 1)
				continue;
			sqlite3_bind_text(inv, 1, r->order, -1, SQLITE_STATIC);
			sqlite3_bind_int64(inv, 2, r->total);
			step(db, inv, "insert invoice");
		}
		step(db, commit, "commit");
	}
	double dt = now_s() - t0;

	sqlite3_stmt *q;
	long invoices = -1;
	check(db,
	      sqlite3_prepare_v2(db, "SELECT count(*) FROM bench_invoices", -1,
	                         &q, NULL),
	      "prepare");
	if (sqlite3_step(q) == SQLITE_ROW)
		invoices = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	long distinct = wl_distinct(n);
	int ok = invoices == distinct;
	/* the same fingerprints as libinbox's, or the comparison is off */
	if (!pre) {
		char want[65];
		row r;
		wl_message(0, &m);
		ok = ok && plain_parse(m.json, (size_t)m.len, md, &r) == 0;
		inbox_fingerprint(m.json, (size_t)m.len, "", want, NULL, 0);
		ok = ok && strcmp(want, r.fp) == 0;
	}
	printf("RESULT store=sqlite-plain batch=%ld messages=%ld distinct=%ld "
	       "invoices=%ld counts=%s seconds=%.3f rate=%.0f\n",
	       batch, n, distinct, invoices, ok ? "ok" : "WRONG", dt,
	       (double)n / dt);
	sqlite3_finalize(ins);
	sqlite3_finalize(inv);
	sqlite3_finalize(begin);
	sqlite3_finalize(commit);
	sqlite3_close(db);
	EVP_MD_free(md);
	free(rows);
	free(msgs);
	return ok ? 0 : 1;
}
