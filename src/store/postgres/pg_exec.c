/* Running statements on the PostgreSQL store: error classification, the
 * pipeline that carries the deferred transaction-control commands, and
 * the transaction and generic statement slots of the vtable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_store.h"

static const char *const op_sql[] = {
    [PGOP_BEGIN] = "BEGIN",
    [PGOP_SAVEPOINT] = "SAVEPOINT inbox_sp",
    [PGOP_RELEASE] = "RELEASE SAVEPOINT inbox_sp",
    [PGOP_ROLLBACK_TO] = "ROLLBACK TO SAVEPOINT inbox_sp",
};

int inbox__pg_classify(PGconn *conn, const char *sqlstate)
{
	static const char *const transient[] = {"40001", "40P01", "55P03",
	                                        "57P01", "57P02", "57P03"};
	if (!conn || PQstatus(conn) != CONNECTION_OK)
		return INBOX_ERR_TRANSIENT;
	if (!sqlstate)
		return INBOX_ERR_STORE;
	if (strncmp(sqlstate, "08", 2) == 0)
		return INBOX_ERR_TRANSIENT;
	for (size_t i = 0; i < sizeof(transient) / sizeof(*transient); i++)
		if (strcmp(sqlstate, transient[i]) == 0)
			return INBOX_ERR_TRANSIENT;
	return INBOX_ERR_STORE;
}

int inbox__pg_fail(pg_store *s, const PGresult *r, const char *what)
{
	const char *code = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *msg =
	    r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *detail =
	    r ? PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL) : NULL;
	if (!msg || !*msg)
		msg = r ? PQresultErrorMessage(r) : "";
	if (!*msg && s->conn)
		msg = PQerrorMessage(s->conn);
	if (!*msg)
		msg = "unknown libpq error";
	if (!code && (!s->conn || PQstatus(s->conn) != CONNECTION_OK))
		code = "08006"; /* connection_failure: libpq's own error */
	inbox__store_seterr(&s->base, code, "%s: %s%s%s%s", what, msg,
	                    detail ? " (" : "", detail ? detail : "",
	                    detail ? ")" : "");
	/* Multi-line libpq messages: keep the handle's message on one line. */
	for (char *p = s->base.errmsg; *p; p++)
		if (*p == '\n' || *p == '\t')
			*p = ' ';
	return inbox__pg_classify(s->conn, code);
}

static int ok_status(ExecStatusType t)
{
	return t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK ||
	       t == PGRES_EMPTY_QUERY;
}

/* A statement that started COPY is not supported: end it and drain. */
static PGresult *refuse_copy(pg_store *s, PGresult *r)
{
	ExecStatusType t = PQresultStatus(r);
	PQclear(r);
	if (t == PGRES_COPY_IN)
		PQputCopyEnd(s->conn, "COPY FROM STDIN is not supported");
	if (t == PGRES_COPY_OUT) {
		char *buf;
		while (PQgetCopyData(s->conn, &buf, 0) > 0)
			PQfreemem(buf);
	}
	PGresult *last = NULL, *n;
	while ((n = PQgetResult(s->conn)) != NULL) {
		PQclear(last);
		last = n;
	}
	return last;
}

static void forget_prepared_if_new_backend(pg_store *s)
{
	int pid = PQbackendPID(s->conn);
	if (pid != s->prepared_pid) {
		s->prepared = 0;
		s->prepared_pid = pid;
	}
}

static int needs_prepare(pg_store *s, int q)
{
	return q >= 0 && !(s->prepared & (1u << q));
}

static void stmt_name(char *out, size_t n, int q)
{
	snprintf(out, n, "inbox__q%d", q);
}

/* Send the whole pipeline: deferred commands, an optional Parse, the
 * statement (if q >= 0 or sql). 0 or -1 (libpq refused; see conn). */
static int send_pipeline(pg_store *s, int q, const char *sql, int nparams,
                         const char *const *values, const int *lengths,
                         const int *formats, int prepare)
{
	char name[32];
	for (int i = 0; i < s->npending; i++)
		if (!PQsendQueryParams(s->conn, op_sql[s->pending[i]], 0, NULL,
		                       NULL, NULL, NULL, 0))
			return -1;
	if (q >= 0) {
		stmt_name(name, sizeof(name), q);
		if (prepare && !PQsendPrepare(s->conn, name, s->sql[q],
		                              inbox__pg_qdefs[q].nparams,
		                              inbox__pg_qdefs[q].types))
			return -1;
		if (!PQsendQueryPrepared(s->conn, name, nparams, values,
		                         lengths, formats, 0))
			return -1;
	} else if (sql) {
		if (!PQsendQueryParams(s->conn, sql, nparams, NULL, values,
		                       lengths, formats, 0))
			return -1;
	}
	return PQpipelineSync(s->conn) ? 0 : -1;
}

static int is_copy(const PGresult *r)
{
	ExecStatusType t = PQresultStatus(r);
	return r && (t == PGRES_COPY_IN || t == PGRES_COPY_OUT ||
	             t == PGRES_COPY_BOTH);
}

/* Read one result of the pipeline and the NULL that ends it. A COPY is
 * ended at once (libpq would return its result forever); *copied = 1. */
static PGresult *next_result(pg_store *s, int *copied)
{
	PGresult *r = PQgetResult(s->conn);
	if (is_copy(r)) {
		*copied = 1;
		return refuse_copy(s, r); /* also reads the NULL */
	}
	if (r) {
		PGresult *extra;
		while ((extra = PQgetResult(s->conn)) != NULL) {
			ExecStatusType t = PQresultStatus(extra);
			PQclear(extra);
			if (t == PGRES_PIPELINE_SYNC)
				break; /* cannot happen: protocol confusion */
		}
	}
	return r;
}

/* Collect nq results then the sync point. The first failure is kept in
 * *err, the last command's result in *last; returns 1 if the Parse at
 * index prepare_at succeeded (the statement then exists on the backend
 * even if a later command failed). */
static int collect(pg_store *s, int nq, int prepare_at, PGresult **last,
                   PGresult **err, int *copied)
{
	int prepared = 0;
	for (int i = 0; i < nq; i++) {
		PGresult *r = next_result(s, copied);
		if (!r)
			break; /* connection lost: nothing more will come */
		ExecStatusType t = PQresultStatus(r);
		if (i == prepare_at && t == PGRES_COMMAND_OK)
			prepared = 1;
		if (!ok_status(t) && t != PGRES_PIPELINE_ABORTED && !*err) {
			*err = r;
			continue;
		}
		if (i == nq - 1 && ok_status(t)) {
			*last = r;
			continue;
		}
		PQclear(r);
	}
	if (PQstatus(s->conn) == CONNECTION_OK)
		PQclear(PQgetResult(s->conn)); /* PGRES_PIPELINE_SYNC */
	return prepared;
}

/* Read until the sync point (or until nothing more can come). */
static void drain_to_sync(pg_store *s)
{
	int nulls = 0;
	while (nulls < 2 && PQstatus(s->conn) == CONNECTION_OK) {
		PGresult *r = PQgetResult(s->conn);
		if (!r) {
			nulls++;
			continue;
		}
		nulls = 0;
		ExecStatusType t = PQresultStatus(r);
		PQclear(r);
		if (t == PGRES_PIPELINE_SYNC)
			return;
	}
}

/* Leave pipeline mode; a connection that cannot is reset by the next
 * begin(). */
static void leave_pipeline(pg_store *s, int synced)
{
	if (!synced && PQstatus(s->conn) == CONNECTION_OK &&
	    PQpipelineSync(s->conn))
		drain_to_sync(s);
	if (!PQexitPipelineMode(s->conn)) {
		drain_to_sync(s);
		PQexitPipelineMode(s->conn);
	}
}

static PGresult *run_pipelined(pg_store *s, int q, const char *sql, int nparams,
                               const char *const *values, const int *lengths,
                               const int *formats, const char *what, int *rc)
{
	int prepare = needs_prepare(s, q);
	int has_stmt = q >= 0 || sql;
	int nq = s->npending + prepare + has_stmt;
	int prepare_at = prepare ? s->npending : -1;
	PGresult *last = NULL, *err = NULL;
	int copied = 0;
	if (!PQenterPipelineMode(s->conn)) {
		*rc = inbox__pg_fail(s, NULL, what);
		return NULL;
	}
	int sent = send_pipeline(s, q, sql, nparams, values, lengths, formats,
	                         prepare);
	s->npending = 0;
	if (sent == 0 && collect(s, nq, prepare_at, &last, &err, &copied))
		s->prepared |= 1u << q;
	if (copied && !err) {
		PQclear(last);
		last = NULL;
		err = PQmakeEmptyPGresult(s->conn, PGRES_FATAL_ERROR);
	}
	if (err || sent < 0 || (has_stmt && !last)) {
		*rc = inbox__pg_fail(s, err, what);
		if (copied) {
			inbox__store_seterr(&s->base, "0A000",
			                    "%s: COPY is not supported", what);
			*rc = INBOX_ERR_STORE;
		}
		PQclear(err);
		PQclear(last);
		leave_pipeline(s, sent == 0);
		return NULL;
	}
	leave_pipeline(s, 1);
	*rc = INBOX_OK;
	if (!last)
		last = PQmakeEmptyPGresult(s->conn, PGRES_COMMAND_OK);
	return last;
}

PGresult *inbox__pg_run(pg_store *s, int q, const char *sql, int nparams,
                        const char *const *values, const int *lengths,
                        const int *formats, const char *what, int *rc)
{
	/* Outside a transaction nothing is lost by reconnecting; inside one,
	 * only begin() may (the caller must see the failure first). */
	if (!s->base.in_txn && PQstatus(s->conn) != CONNECTION_OK) {
		PQreset(s->conn);
		s->prepared = 0;
	}
	forget_prepared_if_new_backend(s);
	if (s->npending > 0 || needs_prepare(s, q))
		return run_pipelined(s, q, sql, nparams, values, lengths,
		                     formats, what, rc);
	PGresult *r;
	if (q >= 0) {
		char name[32];
		stmt_name(name, sizeof(name), q);
		r = PQexecPrepared(s->conn, name, nparams, values, lengths,
		                   formats, 0);
	} else {
		r = PQexecParams(s->conn, sql, nparams, NULL, values, lengths,
		                 formats, 0);
	}
	if (is_copy(r)) {
		r = refuse_copy(s, r);
		if (r && ok_status(PQresultStatus(r))) {
			PQclear(r);
			inbox__store_seterr(&s->base, "0A000",
			                    "%s: COPY is not supported", what);
			*rc = INBOX_ERR_STORE;
			return NULL;
		}
	}
	if (!r || !ok_status(PQresultStatus(r))) {
		*rc = inbox__pg_fail(s, r, what);
		PQclear(r);
		return NULL;
	}
	*rc = INBOX_OK;
	return r;
}

int inbox__pg_run_cmd(pg_store *s, int q, const char *sql, int nparams,
                      const char *const *values, const char *what,
                      int64_t *rows)
{
	int rc;
	PGresult *r =
	    inbox__pg_run(s, q, sql, nparams, values, NULL, NULL, what, &rc);
	if (!r)
		return rc;
	if (rows)
		*rows = strtoll(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return INBOX_OK;
}

int inbox__pg_flush(pg_store *s)
{
	if (s->npending == 0)
		return INBOX_OK;
	int rc;
	PGresult *r =
	    inbox__pg_run(s, -1, NULL, 0, NULL, NULL, NULL, "begin", &rc);
	PQclear(r);
	return rc;
}

int64_t inbox__pg_int(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return 0;
	return strtoll(PQgetvalue(r, row, col), NULL, 10);
}
