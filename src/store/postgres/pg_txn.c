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
	return inbox__pg_reconnect(s, "reconnect");
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

static int is_op(const pg_pending *e, enum pg_op op)
{
	return !e->stmt && e->op == op;
}

static int last_op(const pg_store *s)
{
	const pg_pending *e = s->npending ? &s->pending[s->npending - 1] : NULL;
	return e && !e->stmt ? (int)e->op : -1;
}

/* Index of the open savepoint's SAVEPOINT in the queue when nothing but
 * handler statements follows it (nothing under it was sent), or -1. */
static int unsent_savepoint(const pg_store *s)
{
	for (int i = s->npending - 1; i >= 0; i--) {
		const pg_pending *e = &s->pending[i];
		if (is_op(e, PGOP_SAVEPOINT))
			return i;
		if (!e->stmt)
			return -1;
	}
	return -1;
}

/* Drop queue entries [from, npending): nothing of them was sent. */
static void drop_from(pg_store *s, int from)
{
	for (int i = from; i < s->npending; i++)
		if (s->pending[i].stmt) {
			s->pending_stmts--;
			if (s->args.len > s->pending[i].sql)
				s->args.len = s->pending[i].sql;
		}
	s->npending = from;
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
	inbox__pg_queue_clear(s);
	if ((rc = inbox__pg_queue_op(s, PGOP_BEGIN)) < 0)
		return rc;
	if (s->limits_sql[0] && (rc = inbox__pg_queue_op(s, PGOP_LIMITS)) < 0)
		return rc;
	s->claimed = 0;
	s->defer_failed = 0;
	s->defer_ok = !s->sync_next;
	s->sync_next = 0;
	st->in_txn = 1;
	return INBOX_OK;
}

int inbox__pg_commit(inbox_store *st)
{
	pg_store *s = (pg_store *)st;
	if (!st->in_txn)
		return not_in_txn(s, "commit");
	if (s->npending > 0 && is_op(&s->pending[0], PGOP_BEGIN) &&
	    s->pending_stmts == 0) {
		/* nothing was sent: nothing to commit */
		inbox__pg_queue_clear(s);
		st->in_txn = 0;
		return INBOX_OK;
	}
	/* COMMIT releases every savepoint itself. */
	while (last_op(s) == PGOP_RELEASE)
		s->npending--;
	int rc;
	PGresult *r =
	    inbox__pg_run(s, -1, "COMMIT", 0, NULL, NULL, NULL, "commit", &rc);
	st->in_txn = 0; /* after the run: it must not reconnect under us */
	s->defer_failed = 0;
	s->claimed = 0;
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
	inbox__pg_queue_clear(s);
	s->defer_failed = 0;
	s->claimed = 0;
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
	return inbox__pg_queue_op(s, PGOP_SAVEPOINT);
}

int inbox__pg_release(inbox_store *st)
{
	pg_store *s = (pg_store *)st;
	if (!st->in_txn)
		return not_in_txn(s, "release");
	int sp = unsent_savepoint(s);
	if (sp >= 0) {
		/* Never sent: drop it. What was queued under it runs without
		 * a savepoint; should it fail, the batch runs again. */
		memmove(&s->pending[sp], &s->pending[sp + 1],
		        sizeof(*s->pending) * (size_t)(s->npending - sp - 1));
		s->npending--;
		return INBOX_OK;
	}
	return inbox__pg_queue_op(s, PGOP_RELEASE);
}

int inbox__pg_rollback_to(inbox_store *st)
{
	pg_store *s = (pg_store *)st;
	if (!st->in_txn)
		return not_in_txn(s, "rollback_to");
	/* Nothing ran since the savepoint or since the last ROLLBACK TO. */
	if (last_op(s) == PGOP_SAVEPOINT || last_op(s) == PGOP_ROLLBACK_TO)
		return INBOX_OK;
	/* What ran under it is still queued: unqueue it instead. */
	int sp = unsent_savepoint(s);
	if (sp >= 0) {
		drop_from(s, sp + 1);
		return INBOX_OK;
	}
	return inbox__pg_queue_op(s, PGOP_ROLLBACK_TO);
}

int inbox__pg_defers(const pg_store *s)
{
	return s->base.in_txn && s->claimed && s->defer_ok;
}

int inbox__pg_exec(inbox_store *st, const char *sql, int nparams,
                   const char *const *params, int64_t *rows)
{
	pg_store *s = (pg_store *)st;
	if (!sql || nparams < 0 || (nparams > 0 && !params)) {
		inbox__store_seterr(st, "", "exec: invalid arguments");
		return INBOX_ERR_INVALID;
	}
	/* A batch's statement whose count nobody needs: travel later. */
	if (!rows && inbox__pg_defers(s)) {
		if (s->defer_failed)
			return s->defer_failed;
		return inbox__pg_queue_stmt(s, sql, nparams, params);
	}
	int rc;
	PGresult *r = inbox__pg_run_sql(s, sql, nparams, params, "exec", &rc);
	if (!r)
		return rc;
	if (rows)
		*rows = strtoll(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return INBOX_OK;
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

static const char *pg_colname(void *ctx, int col)
{
	return PQfname((const PGresult *)ctx, col);
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
	PGresult *r = inbox__pg_run_sql(s, sql, nparams, params, "query", &rc);
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
	inbox__row_names names = {pg_colname, r, ncols, NULL};
	inbox__row_names_push(&names);
	call_rows(r, fn, payload, vals);
	inbox__row_names_pop(&names);
	if (vals != small)
		free(vals);
	PQclear(r);
	return INBOX_OK;
}
