/* What the admin API and declared effects ask of the PostgreSQL store
 * (vtable version 6): the dialect of the admin SQL, the operator's setup
 * SQL under an advisory lock, and a statement check by preparing. */
#include <stdio.h>
#include <string.h>

#include "store/postgres/pg_store.h"

int inbox__pg_sql_expr(inbox_store *st, inbox_sql_expr e, const char *arg,
                       char *out, size_t len)
{
	(void)st;
	const char *a = arg ? arg : "";
	switch (e) {
	case INBOX_SQL_NOW_MS:
		return snprintf(out, len,
		                "(EXTRACT(EPOCH FROM now()) * 1000)::bigint");
	case INBOX_SQL_NOW_TS:
		return snprintf(out, len, "now()");
	case INBOX_SQL_MS:
		return snprintf(out, len,
		                "(EXTRACT(EPOCH FROM %s) * 1000)::bigint", a);
	case INBOX_SQL_INT_PARAM:
		return snprintf(out, len, "$%s::bigint", a);
	case INBOX_SQL_CUTOFF:
		return snprintf(out, len,
		                "now() - $%s::bigint * interval '1 second'", a);
	case INBOX_SQL_HEX:
		return snprintf(out, len, "encode(%s, 'hex')", a);
	case INBOX_SQL_LEN:
		return snprintf(out, len, "length(%s)", a);
	case INBOX_SQL_EXPLAIN_ROWS:
		return snprintf(out, len, "EXPLAIN (FORMAT JSON) ");
	}
	return -1;
}

/* The operator's SQL failed: "relation "x" does not exist (SQLSTATE
 * 42P01, at character 13)", the primary message on one line rather than
 * libpq's multi-line text. TRANSIENT when the database went away (a
 * restart under us while starting), not the SQL's fault. */
static int sql_failed(pg_store *s, const PGresult *r)
{
	const char *primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
	const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	const char *at = PQresultErrorField(r, PG_DIAG_STATEMENT_POSITION);
	if (!primary)
		return inbox__pg_fail(s, r, "SQL");
	inbox__store_seterr(&s->base, code, "%s (SQLSTATE %s%s%s)", primary,
	                    code ? code : "?", at ? ", at character " : "",
	                    at ? at : "");
	return inbox__pg_classify(s->conn, r, code);
}

static int ok_status(const PGresult *r)
{
	ExecStatusType t = PQresultStatus(r);
	return t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK ||
	       t == PGRES_EMPTY_QUERY;
}

/* The connection, reconnected if it was lost, with nothing queued. */
static int ready(pg_store *s)
{
	inbox__pg_ensure_connected(s);
	int rc = inbox__pg_flush(s);
	if (rc == INBOX_OK && PQstatus(s->conn) != CONNECTION_OK)
		rc = inbox__pg_fail(s, NULL, "connect");
	return rc;
}

int inbox__pg_exec_setup(inbox_store *st, const char *sql)
{
	pg_store *s = (pg_store *)st;
	int rc = ready(s);
	if (rc < 0)
		return rc;
	/* A session advisory lock serializes the setup of daemons starting
	 * together: concurrent CREATE TABLE IF NOT EXISTS can otherwise fail
	 * on PostgreSQL's catalog unique index. */
	PGresult *r = PQexec(s->conn, "SELECT pg_advisory_lock("
	                              "hashtext('inbox-cli-setup'))");
	int locked = PQresultStatus(r) == PGRES_TUPLES_OK;
	PQclear(r);
	r = PQexec(s->conn, sql);
	rc = ok_status(r) ? INBOX_OK : sql_failed(s, r);
	PQclear(r);
	if (locked) {
		r = PQexec(s->conn, "SELECT pg_advisory_unlock("
		                    "hashtext('inbox-cli-setup'))");
		PQclear(r);
	}
	return rc;
}

int inbox__pg_check_sql(inbox_store *st, const char *sql, int *nparams)
{
	pg_store *s = (pg_store *)st;
	int rc = ready(s);
	if (rc < 0)
		return rc;
	/* The unnamed statement: the next one replaces it. */
	PGresult *r = PQprepare(s->conn, "", sql, 0, NULL);
	rc =
	    PQresultStatus(r) == PGRES_COMMAND_OK ? INBOX_OK : sql_failed(s, r);
	PQclear(r);
	if (rc == INBOX_OK && nparams) {
		r = PQdescribePrepared(s->conn, "");
		if (PQresultStatus(r) == PGRES_COMMAND_OK)
			*nparams = PQnparams(r);
		else
			rc = sql_failed(s, r);
		PQclear(r);
	}
	return rc;
}
