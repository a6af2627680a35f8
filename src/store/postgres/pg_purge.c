/* Purge of the PostgreSQL store: one purger at a time (a session advisory
 * lock), bounded DELETE statements each in its own transaction.
 *
 * A purge shares the server with the consumers, so it keeps out of their
 * way (bench/README.md, "purge under load"):
 *   - its transactions commit asynchronously (synchronous_commit off for
 *     the purge's duration): a purge batch lost in a crash only leaves
 *     rows to purge again, and the consumers' commits no longer queue
 *     behind a WAL flush per purge batch;
 *   - after each batch it pauses as long as the batch took, so it never
 *     takes more than half of a backend's time from the consumers;
 *   - a batch deletes at most batch_limit rows, so a claim that meets one
 *     of its rows (a very late redelivery of a purged key) waits for one
 *     short transaction at most. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/postgres/pg_store.h"

/* Longest window accepted (s): beyond it, now() - window overflows. */
#define MAX_RETENTION_S 10000000000LL

/* Yield as long as the last batch took (at most a second). */
static void pause_s(double secs)
{
	if (secs > 1.0)
		secs = 1.0;
	struct timespec ts = {0, (long)(secs * 1e9)};
	nanosleep(&ts, NULL);
}

static int purge_one(pg_store *s, const char *consumer, int64_t retention,
                     int limit, int dry_run, int64_t *total)
{
	char ret[24], lim[16];
	if (retention > MAX_RETENTION_S)
		retention = MAX_RETENTION_S;
	snprintf(ret, sizeof(ret), "%lld", (long long)retention);
	snprintf(lim, sizeof(lim), "%d", limit);
	const char *params[3] = {consumer, ret, lim};
	int rc;
	if (dry_run) {
		PGresult *r = inbox__pg_run(s, PGQ_PURGE_COUNT, NULL, 2, params,
		                            NULL, NULL, "purge", &rc);
		if (r)
			*total += inbox__pg_int(r, 0, 0);
		PQclear(r);
		return rc;
	}
	int64_t rows;
	do {
		rows = 0;
		double t0 = inbox__mono_seconds();
		rc = inbox__pg_run_cmd(s, PGQ_PURGE_DELETE, NULL, 3, params,
		                       "purge", &rows);
		*total += rows;
		if (rc == INBOX_OK && rows >= limit)
			pause_s(inbox__mono_seconds() - t0);
	} while (rc == INBOX_OK && rows >= limit);
	return rc;
}

static int purge_named(pg_store *s, const char *consumer, int64_t retention,
                       int limit, int dry_run, int64_t *total)
{
	if (retention <= 0) {
		int rc;
		PGresult *r =
		    inbox__pg_run(s, PGQ_RETENTION, NULL, 1, &consumer, NULL,
		                  NULL, "purge", &rc);
		if (!r)
			return rc;
		if (PQntuples(r) == 1)
			retention = inbox__pg_int(r, 0, 0);
		PQclear(r);
		if (retention <= 0) {
			inbox__store_seterr(&s->base, "",
			                    "purge: consumer \"%s\" has no "
			                    "registered retention window; give "
			                    "one",
			                    consumer);
			return INBOX_ERR_INVALID;
		}
	}
	return purge_one(s, consumer, retention, limit, dry_run, total);
}

/* Every registered consumer, each with its registered window. */
static int purge_all(pg_store *s, int limit, int dry_run, int64_t *total)
{
	int rc;
	PGresult *r = inbox__pg_run(s, PGQ_CONSUMERS, NULL, 0, NULL, NULL, NULL,
	                            "purge", &rc);
	if (!r)
		return rc;
	for (int i = 0; i < PQntuples(r) && rc == INBOX_OK; i++) {
		int64_t retention = inbox__pg_int(r, i, 1);
		if (retention > 0)
			rc = purge_one(s, PQgetvalue(r, i, 0), retention, limit,
			               dry_run, total);
	}
	PQclear(r);
	return rc;
}

static int try_lock(pg_store *s, const char *key)
{
	int rc;
	PGresult *r =
	    inbox__pg_run(s, -1, "SELECT pg_try_advisory_lock($1::bigint)", 1,
	                  &key, NULL, NULL, "purge", &rc);
	if (!r)
		return rc;
	int got = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (!got) {
		inbox__store_seterr(&s->base, "",
		                    "purge: another purge of these tables is "
		                    "running (advisory lock %s)",
		                    key);
		return INBOX_ERR_BUSY;
	}
	return INBOX_OK;
}

/* synchronous_commit off for this session, the old value kept in old
 * ("" if it could not be read: then it is left alone). */
static void async_commit(pg_store *s, char *old, size_t n)
{
	PGresult *r =
	    PQexec(s->conn, "SELECT current_setting('synchronous_commit'), "
	                    "set_config('synchronous_commit', 'off', false)");
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		snprintf(old, n, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
}

static void restore_commit(pg_store *s, const char *old)
{
	const char *v = old;
	PGresult *r = PQexecParams(
	    s->conn, "SELECT set_config('synchronous_commit', $1, false)", 1,
	    NULL, &v, NULL, NULL, 0);
	PQclear(r);
}

static void unlock(pg_store *s, const char *key)
{
	PGresult *r =
	    PQexecParams(s->conn, "SELECT pg_advisory_unlock($1::bigint)", 1,
	                 NULL, &key, NULL, NULL, 0);
	PQclear(r);
}

int inbox__pg_purge(inbox_store *st, const char *consumer,
                    int64_t retention_seconds, int batch_limit, int dry_run,
                    int64_t *deleted)
{
	pg_store *s = (pg_store *)st;
	*deleted = 0;
	if (st->in_txn || (PQstatus(s->conn) == CONNECTION_OK &&
	                   PQtransactionStatus(s->conn) != PQTRANS_IDLE)) {
		inbox__store_seterr(st, "", "purge: a transaction is open");
		return INBOX_ERR_STATE;
	}
	inbox__pg_ensure_connected(s);
	if (batch_limit <= 0)
		batch_limit = 1000;
	char key[24];
	snprintf(key, sizeof(key), "%lld",
	         (long long)inbox__pg_lock_key(st, "purge"));
	int rc = try_lock(s, key);
	if (rc < 0)
		return rc;
	char sync[32] = "";
	if (!dry_run)
		async_commit(s, sync, sizeof(sync));
	if (consumer)
		rc = purge_named(s, consumer, retention_seconds, batch_limit,
		                 dry_run, deleted);
	else
		rc = purge_all(s, batch_limit, dry_run, deleted);
	if (sync[0])
		restore_commit(s, sync);
	unlock(s, key);
	return rc;
}
