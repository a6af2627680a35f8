/* What the admin API and declared effects ask of the SQLite store
 * (vtable version 6): the dialect of the admin SQL, the operator's setup
 * SQL, and a statement check by preparing. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "store/sqlite/sqlite_store.h"

int inbox__sq_sql_expr(inbox_store *st, inbox_sql_expr e, const char *arg,
                       char *out, size_t len)
{
	(void)st;
	const char *a = arg ? arg : "";
	switch (e) {
	case INBOX_SQL_NOW_MS:
	case INBOX_SQL_NOW_TS:
		/* The clock this store writes its timestamps with (integer
		 * ms, computed in C), as a literal: julianday('now') can
		 * round a millisecond away. */
		return snprintf(out, len, "%lld", (long long)inbox__now_ms());
	case INBOX_SQL_MS:
		return snprintf(out, len, "%s", a);
	case INBOX_SQL_INT_PARAM:
		return snprintf(out, len, "CAST($%s AS INTEGER)", a);
	case INBOX_SQL_CUTOFF:
		return snprintf(out, len,
		                "(%lld - CAST($%s AS INTEGER) * 1000)",
		                (long long)inbox__now_ms(), a);
	case INBOX_SQL_HEX:
		return snprintf(out, len, "hex(%s)", a);
	case INBOX_SQL_LEN:
		return snprintf(out, len, "length(CAST(%s AS BLOB))", a);
	case INBOX_SQL_EXPLAIN_ROWS:
		/* no row estimates: the admin API counts exactly */
		break;
	}
	return -1;
}

/* The SQL's message as SQLite words it, and whose fault it is. */
static int sql_failed(sq_store *s, int rc, const char *msg)
{
	int err = inbox__sq_fail(s, rc, "SQL");
	inbox__store_seterr(&s->base, inbox__sq_code_name(rc), "%s",
	                    msg ? msg : sqlite3_errmsg(s->db));
	return err;
}

/* Concurrent setups need nothing more: SQLite's database lock (and the
 * busy timeout) serializes writers across processes. */
int inbox__sq_exec_setup(inbox_store *st, const char *sql)
{
	sq_store *s = SQ(st);
	char *msg = NULL;
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
	int err = rc == SQLITE_OK ? INBOX_OK : sql_failed(s, rc, msg);
	sqlite3_free(msg);
	return err;
}

int inbox__sq_check_sql(inbox_store *st, const char *sql, int *nparams)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *stmt = NULL;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &stmt, NULL);
	int err = rc == SQLITE_OK ? INBOX_OK : sql_failed(s, rc, NULL);
	if (err == INBOX_OK && nparams)
		*nparams = stmt ? sqlite3_bind_parameter_count(stmt) : 0;
	sqlite3_finalize(stmt);
	return err;
}

/* sqlite::memory: (any query after it): each connection has its own. */
int inbox__sq_url_private(const char *url)
{
	const char *p = strchr(url, ':');
	p = p ? p + 1 : url;
	return strcspn(p, "?") == 8 && strncmp(p, ":memory:", 8) == 0;
}
