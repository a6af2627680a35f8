/* Transactions and generic statements of the PostgreSQL store.
 *
 * BEGIN, SAVEPOINT, RELEASE and ROLLBACK TO are queued and travel with
 * the next statement (see pg_store.h); COMMIT and ROLLBACK are sent at
 * once. A transaction in which nothing was sent commits or rolls back
 * without a round trip. */
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_store.h"

static int reconnect(pg_store *s)
{
	PQreset(s->conn);
	s->prepared = 0;
	s->npending = 0;
	if (PQstatus(s->conn) != CONNECTION_OK)
		return inbox__pg_fail(s, NULL, "reconnect");
	return INBOX_OK;
}

/* Leave any transaction the server still has open (after a failed COMMIT,
 * or one a handler opened through the native connection). */
static int end_stray_transaction(pg_store *s, const char *what)
{
	PGTransactionStatusType ts = PQtransactionStatus(s->conn);
	if (ts != PQTRANS_INTRANS && ts != PQTRANS_INERROR)
		return INBOX_OK;
	PGresult *r = PQexec(s->conn, "ROLLBACK");
	int rc = INBOX_OK;
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = inbox__pg_fail(s, r, what);
	PQclear(r);
	return rc;
}

static int push(pg_store *s, enum pg_op op)
{
	if (s->npending == PG_MAX_PENDING) {
		int rc = inbox__pg_flush(s);
		if (rc < 0)
			return rc;
	}
	s->pending[s->npending++] = op;
	return INBOX_OK;
}

static int last_op(const pg_store *s)
{
	return s->npending ? (int)s->pending[s->npending - 1] : -1;
}

static int not_in_txn(pg_store *s, const char *what)
{
	inbox__store_seterr(&s->base, "", "%s: no transaction is open", what);
	return INBOX_ERR_STATE;
}

int inbox__pg_begin(inbox_store *st)
{
	pg_store *s = (pg_store *)st;
	if (st->in_txn) {
		inbox__store_seterr(st, "", "begin: a transaction is open");
		return INBOX_ERR_STATE;
	}
	int rc;
	if (PQstatus(s->conn) != CONNECTION_OK ||
	    PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF ||
	    PQtransactionStatus(s->conn) == PQTRANS_ACTIVE ||
	    PQtransactionStatus(s->conn) == PQTRANS_UNKNOWN) {
		if ((rc = reconnect(s)) < 0)
			return rc;
	}
	if ((rc = end_stray_transaction(s, "begin")) < 0)
		return rc;
	s->npending = 0;
	s->pending[s->npending++] = PGOP_BEGIN;
	st->in_txn = 1;
	return INBOX_OK;
}

int inbox__pg_commit(inbox_store *st)
{
	pg_store *s = (pg_store *)st;
	if (!st->in_txn)
		return not_in_txn(s, "commit");
	if (s->npending > 0 && s->pending[0] == PGOP_BEGIN) {
		s->npending = 0; /* nothing was sent: nothing to commit */
		st->in_txn = 0;
		return INBOX_OK;
	}
	/* COMMIT releases every savepoint itself. */
	while (s->npending > 0 && s->pending[s->npending - 1] == PGOP_RELEASE)
		s->npending--;
	int rc;
	PGresult *r =
	    inbox__pg_run(s, -1, "COMMIT", 0, NULL, NULL, NULL, "commit", &rc);
	st->in_txn = 0; /* after the run: it must not reconnect under us */
	if (r && strcmp(PQcmdStatus(r), "ROLLBACK") == 0) {
		inbox__store_seterr(st, "25P02",
		                    "commit: the transaction had failed and "
		                    "was rolled back");
		rc = INBOX_ERR_STORE;
	}
	PQclear(r);
	if (rc < 0 && PQstatus(s->conn) == CONNECTION_OK) {
		char keep[sizeof(st->errmsg)], code[sizeof(st->errcode)];
		memcpy(keep, st->errmsg, sizeof(keep));
		memcpy(code, st->errcode, sizeof(code));
		end_stray_transaction(s, "commit");
		memcpy(st->errmsg, keep, sizeof(keep));
		memcpy(st->errcode, code, sizeof(code));
	}
	return rc;
}

int inbox__pg_rollback(inbox_store *st)
{
	pg_store *s = (pg_store *)st;
	st->in_txn = 0;
	s->npending = 0;
	/* A lost connection took its transaction with it. */
	if (PQstatus(s->conn) != CONNECTION_OK)
		return INBOX_OK;
	if (PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF)
		return reconnect(s);
	return end_stray_transaction(s, "rollback");
}

int inbox__pg_savepoint(inbox_store *st)
{
	pg_store *s = (pg_store *)st;
	if (!st->in_txn)
		return not_in_txn(s, "savepoint");
	return push(s, PGOP_SAVEPOINT);
}

int inbox__pg_release(inbox_store *st)
{
	pg_store *s = (pg_store *)st;
	if (!st->in_txn)
		return not_in_txn(s, "release");
	if (last_op(s) == PGOP_SAVEPOINT) {
		s->npending--; /* nothing ran under it */
		return INBOX_OK;
	}
	return push(s, PGOP_RELEASE);
}

int inbox__pg_rollback_to(inbox_store *st)
{
	pg_store *s = (pg_store *)st;
	if (!st->in_txn)
		return not_in_txn(s, "rollback_to");
	/* Nothing ran since the savepoint or since the last ROLLBACK TO. */
	if (last_op(s) == PGOP_SAVEPOINT || last_op(s) == PGOP_ROLLBACK_TO)
		return INBOX_OK;
	return push(s, PGOP_ROLLBACK_TO);
}

int inbox__pg_exec(inbox_store *st, const char *sql, int nparams,
                   const char *const *params, int64_t *rows)
{
	pg_store *s = (pg_store *)st;
	if (!sql || nparams < 0 || (nparams > 0 && !params)) {
		inbox__store_seterr(st, "", "exec: invalid arguments");
		return INBOX_ERR_INVALID;
	}
	return inbox__pg_run_cmd(s, -1, sql, nparams, params, "exec", rows);
}

static void call_rows(const PGresult *r, inbox_row_fn fn, void *payload,
                      const char **vals)
{
	int nrows = PQntuples(r), ncols = PQnfields(r);
	for (int i = 0; i < nrows; i++) {
		for (int j = 0; j < ncols; j++)
			vals[j] =
			    PQgetisnull(r, i, j) ? NULL : PQgetvalue(r, i, j);
		if (fn(ncols, vals, payload) != 0)
			return;
	}
}

int inbox__pg_query(inbox_store *st, const char *sql, int nparams,
                    const char *const *params, inbox_row_fn fn, void *payload)
{
	pg_store *s = (pg_store *)st;
	if (!sql || !fn || nparams < 0 || (nparams > 0 && !params)) {
		inbox__store_seterr(st, "", "query: invalid arguments");
		return INBOX_ERR_INVALID;
	}
	int rc;
	PGresult *r = inbox__pg_run(s, -1, sql, nparams, params, NULL, NULL,
	                            "query", &rc);
	if (!r)
		return rc;
	const char *small[32];
	const char **vals = small;
	int ncols = PQnfields(r);
	if (ncols > 32 && !(vals = malloc(sizeof(*vals) * (size_t)ncols))) {
		PQclear(r);
		inbox__store_seterr(st, "", "query: out of memory");
		return INBOX_ERR_NOMEM;
	}
	call_rows(r, fn, payload, vals);
	if (vals != small)
		free(vals);
	PQclear(r);
	return INBOX_OK;
}
