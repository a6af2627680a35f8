/* Schema migrations of the PostgreSQL store: versioned, in one
 * transaction, serialized between processes by an advisory lock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_outbox.h"
#include "store/postgres/pg_store.h"

static int step(pg_store *s, const char *sql, const char *param, PGresult **out)
{
	return inbox__pg_simple(s, sql, param, out, "migrate");
}

static int current_version(pg_store *s, int *version)
{
	inbox__buf b = INBOX__BUF_INIT;
	PGresult *r = NULL;
	if (inbox__buf_printf(&b,
	                      "CREATE TABLE IF NOT EXISTS %s "
	                      "(version int NOT NULL)",
	                      s->t_version.data) < 0)
		return INBOX_ERR_NOMEM;
	int rc = step(s, b.data, NULL, NULL);
	inbox__buf_free(&b);
	if (rc == INBOX_OK)
		rc = step(s, s->sql[PGQ_VERSION], NULL, &r);
	if (rc == INBOX_OK) {
		*version = (int)inbox__pg_int(r, 0, 0);
		PQclear(r);
	}
	return rc;
}

static int apply(pg_store *s, char *ddl)
{
	if (!ddl)
		return INBOX_ERR_NOMEM;
	int rc = step(s, ddl, NULL, NULL);
	free(ddl);
	return rc;
}

static int record_version(pg_store *s, int v)
{
	inbox__buf b = INBOX__BUF_INIT;
	if (inbox__buf_printf(&b, "INSERT INTO %s (version) VALUES (%d)",
	                      s->t_version.data, v) < 0)
		return INBOX_ERR_NOMEM;
	int rc = step(s, b.data, NULL, NULL);
	inbox__buf_free(&b);
	return rc;
}

static int create_schema(pg_store *s)
{
	if (!s->base.schema[0])
		return INBOX_OK;
	inbox__buf b = INBOX__BUF_INIT;
	int rc = INBOX_ERR_NOMEM;
	if (inbox__buf_puts(&b, "CREATE SCHEMA IF NOT EXISTS ") == 0 &&
	    inbox__quote_ident(&b, s->base.schema) == 0)
		rc = step(s, b.data, NULL, NULL);
	inbox__buf_free(&b);
	return rc;
}

static int migrate_locked(pg_store *s, int target)
{
	char key[32];
	int version = 0;
	snprintf(key, sizeof(key), "%lld",
	         (long long)inbox__pg_lock_key(&s->base, "migrate"));
	int rc = step(s, "SELECT pg_advisory_xact_lock($1::bigint)", key, NULL);
	if (rc == INBOX_OK)
		rc = create_schema(s);
	if (rc == INBOX_OK)
		rc = current_version(s, &version);
	if (rc < 0)
		return rc;
	if (version > INBOX_PG_SCHEMA_VERSION) {
		inbox__store_seterr(
		    &s->base, "",
		    "migrate: the database schema is at version "
		    "%d, newer than this library's %d",
		    version, INBOX_PG_SCHEMA_VERSION);
		return INBOX_ERR_SCHEMA;
	}
	if (target >= 1 && version < 1 &&
	    (rc = apply(s, inbox__pg_schema_v1(s))) == INBOX_OK)
		rc = record_version(s, 1);
	/* v2: the outbox; a v1 database upgrades in place. */
	if (rc == INBOX_OK && target >= 2 && version < 2 &&
	    (rc = inbox__pg_outbox_migrate(s)) == INBOX_OK)
		rc = record_version(s, 2);
	/* v3: the inbox in generations (pg_gens.c). */
	if (rc == INBOX_OK && target >= 3 && version < 3 &&
	    (rc = inbox__pg_gens_migrate(s)) == INBOX_OK)
		rc = record_version(s, 3);
	/* v4: idempotent dead letters, in place (pg_sql.c). */
	if (rc == INBOX_OK && target >= 4 && version < 4 &&
	    (rc = apply(s, inbox__pg_schema_v4(s))) == INBOX_OK)
		rc = record_version(s, 4);
	/* v5: stored results, in place (pg_sql.c). */
	if (rc == INBOX_OK && target >= 5 && version < 5 &&
	    (rc = apply(s, inbox__pg_schema_v5(s))) == INBOX_OK)
		rc = record_version(s, 5);
	/* v6: the source position on the record, in place (pg_sql.c). */
	if (rc == INBOX_OK && target >= 6 && version < 6 &&
	    (rc = apply(s, inbox__pg_schema_v6(s))) == INBOX_OK)
		rc = record_version(s, 6);
	return rc;
}

int inbox__pg_migrate(inbox_store *st)
{
	return inbox__pg_migrate_to(st, INBOX_PG_SCHEMA_VERSION);
}

int inbox__pg_migrate_to(inbox_store *st, int target)
{
	pg_store *s = (pg_store *)st;
	if (st->in_txn) {
		inbox__store_seterr(st, "", "migrate: a transaction is open");
		return INBOX_ERR_STATE;
	}
	inbox__pg_ensure_connected(s);
	int rc = step(s, "BEGIN", NULL, NULL);
	if (rc < 0)
		return rc;
	rc = migrate_locked(s, target);
	if (rc == INBOX_OK)
		rc = step(s, "COMMIT", NULL, NULL);
	if (rc < 0)
		PQclear(PQexec(s->conn, "ROLLBACK"));
	return rc;
}

int inbox__pg_schema_version(inbox_store *st, int *version)
{
	pg_store *s = (pg_store *)st;
	const char *name = s->t_version.data;
	int rc;
	*version = 0;
	PGresult *r =
	    inbox__pg_run(s, -1, "SELECT to_regclass($1) IS NOT NULL", 1, &name,
	                  NULL, NULL, "schema_version", &rc);
	if (!r)
		return rc;
	int exists = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (!exists)
		return INBOX_OK;
	r = inbox__pg_run(s, PGQ_VERSION, NULL, 0, NULL, NULL, NULL,
	                  "schema_version", &rc);
	if (!r)
		return rc;
	*version = (int)inbox__pg_int(r, 0, 0);
	PQclear(r);
	return INBOX_OK;
}
