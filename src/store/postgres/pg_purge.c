/* Purge of the PostgreSQL store: one purger at a time (a session advisory
 * lock), bounded DELETE statements each in its own transaction. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_store.h"

/* Longest window accepted (s): beyond it, now() - window overflows. */
#define MAX_RETENTION_S 10000000000LL

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
		rc = inbox__pg_run_cmd(s, PGQ_PURGE_DELETE, NULL, 3, params,
		                       "purge", &rows);
		*total += rows;
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
	if (PQstatus(s->conn) != CONNECTION_OK) {
		PQreset(s->conn);
		s->prepared = 0;
	}
	if (batch_limit <= 0)
		batch_limit = 1000;
	char key[24];
	snprintf(key, sizeof(key), "%lld",
	         (long long)inbox__pg_lock_key(st, "purge"));
	int rc = try_lock(s, key);
	if (rc < 0)
		return rc;
	if (consumer)
		rc = purge_named(s, consumer, retention_seconds, batch_limit,
		                 dry_run, deleted);
	else
		rc = purge_all(s, batch_limit, dry_run, deleted);
	unlock(s, key);
	return rc;
}
