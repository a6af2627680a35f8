/*
 * The SQLite schema and its versioned migrations.
 *
 * Why the inbox table is WITHOUT ROWID: its primary key (consumer, key) is
 * what every hot statement looks rows up by — the claim's insert and its
 * re-read, reclaim, finish, extend. In a rowid table that key is a second
 * b-tree beside the table, so each claimed message writes three b-trees
 * (table, key index, processed_at index) and each lookup walks two; WITHOUT
 * ROWID stores the row in the key's b-tree: two writes, one walk. Rows are
 * small (two short texts, a 64-char fingerprint, a few integers), well
 * within what WITHOUT ROWID is meant for. Purge does not need a rowid: the
 * (consumer, processed_at) index entries carry the primary key, so a batch
 * is picked from the index and deleted by key (see SQ_PURGE_DELETE).
 *
 * Timestamps are INTEGER milliseconds since the Unix epoch.
 * dead_letters.id is AUTOINCREMENT so an id an operator has seen is never
 * reused for another letter after deletions.
 */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "store/sqlite/sqlite_outbox.h"
#include "store/sqlite/sqlite_store.h"

/* migrations[v] upgrades a database from version v-1 to v. */
static const char *const migrations[SQ_SCHEMA_VERSION + 1] = {
    [1] = "CREATE TABLE IF NOT EXISTS {inbox} ("
          " consumer TEXT NOT NULL,"
          " key TEXT NOT NULL,"
          " fingerprint TEXT NOT NULL,"
          " status TEXT NOT NULL CHECK (status IN"
          "  ('completed', 'processing', 'failed', 'dead')),"
          " attempts INTEGER NOT NULL DEFAULT 1,"
          " fence INTEGER NOT NULL DEFAULT 1,"
          " lease_until INTEGER,"
          " message_id TEXT,"
          " created_at INTEGER NOT NULL,"
          " processed_at INTEGER,"
          " updated_at INTEGER NOT NULL,"
          " PRIMARY KEY (consumer, key)"
          ") WITHOUT ROWID;"
          "CREATE INDEX IF NOT EXISTS {inbox_processed_idx}"
          " ON {inbox} (consumer, processed_at);"
          "CREATE TABLE IF NOT EXISTS {dead_letters} ("
          " id INTEGER PRIMARY KEY AUTOINCREMENT,"
          " consumer TEXT NOT NULL,"
          " key TEXT,"
          " message_id TEXT,"
          " payload BLOB NOT NULL,"
          " headers TEXT,"
          " position TEXT,"
          " attempts INTEGER NOT NULL DEFAULT 0,"
          " reason TEXT NOT NULL,"
          " fingerprint TEXT,"
          " stored_fingerprint TEXT,"
          " created_at INTEGER NOT NULL,"
          " replayed_at INTEGER"
          ");"
          "CREATE INDEX IF NOT EXISTS {dead_letters_created_idx}"
          " ON {dead_letters} (consumer, created_at);"
          "CREATE TABLE IF NOT EXISTS {consumers} ("
          " name TEXT PRIMARY KEY,"
          " retention_seconds INTEGER NOT NULL,"
          " created_at INTEGER,"
          " updated_at INTEGER"
          ");",
    /* The outbox (sqlite_outbox.c): a v1 database upgrades in place. */
    [2] = inbox__sq_outbox_schema,
    /* 3: PostgreSQL's inbox generations; nothing for SQLite. */
    [3] = "",
    /* 4: idempotent dead letters (sqlite_inbox.c), in place: existing
     * rows keep their values (deliveries 1, a NULL last_seen_at reads as
     * created_at, a NULL dedup_key never conflicts). The columns come
     * first, from v4_columns. */
    [4] = "CREATE UNIQUE INDEX IF NOT EXISTS {dead_letters_dedup_idx}"
          " ON {dead_letters} (consumer, dedup_key);",
    /* 5: stored results, in place (the columns, from v5_columns: NULL
     * for every existing record, which holds no result). */
    [5] = "",
    /* 6: the source position on the record (sqlite_inbox.c), in place
     * (the column, from v6_columns: NULL for every existing record, as
     * for a delivery that gave none). No index: a look-up by position
     * is an operator's, and scans the consumer's records. */
    [6] = "",
};

/* SQLite has no ADD COLUMN IF NOT EXISTS: these run only when dedup_key is
 * missing, so that a migration run again over them does not fail. */
static const char v4_columns[] =
    "ALTER TABLE {dead_letters} ADD COLUMN dedup_key TEXT;"
    "ALTER TABLE {dead_letters} ADD COLUMN"
    " deliveries INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE {dead_letters} ADD COLUMN last_seen_at INTEGER;";

/* v5: what the record keeps of its first processing (sqlite_inbox.c):
 * the handler's result, its content type, the outcome. Only when the
 * result column is missing, like v4_columns. */
static const char v5_columns[] =
    "ALTER TABLE {inbox} ADD COLUMN result BLOB;"
    "ALTER TABLE {inbox} ADD COLUMN result_type TEXT;"
    "ALTER TABLE {inbox} ADD COLUMN outcome TEXT;";

/* v6: the delivery's source position, only when missing. */
static const char v6_columns[] =
    "ALTER TABLE {inbox} ADD COLUMN position TEXT;";

static int exec_tmpl(sq_store *s, const char *tmpl, const char *what)
{
	inbox__buf_reset(&s->sql);
	if (inbox__sq_expand(s, &s->sql, tmpl) < 0) {
		inbox__store_seterr(&s->base, "SQLITE_NOMEM",
		                    "out of memory building SQL");
		return INBOX_ERR_NOMEM;
	}
	int rc = sqlite3_exec(s->db, s->sql.data, NULL, NULL, NULL);
	return rc == SQLITE_OK ? INBOX_OK : inbox__sq_fail(s, rc, what);
}

/* One integer from a one-row statement; the statement is finalized. */
static int scalar(sq_store *s, sqlite3_stmt *stmt, int64_t *out)
{
	int rc = sqlite3_step(stmt);
	int err = INBOX_OK;
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int64(stmt, 0);
	else if (rc == SQLITE_DONE)
		*out = 0;
	else
		err = inbox__sq_fail(s, rc, "schema version");
	sqlite3_finalize(stmt);
	return err;
}

int inbox__sq_schema_version(inbox_store *st, int *version)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *stmt;
	int64_t n = 0;
	char name[128];
	*version = 0;
	if (!s->db) {
		inbox__store_seterr(st, "", "the database is not open");
		return INBOX_ERR_STATE;
	}
	snprintf(name, sizeof(name), "%sschema_version", st->prefix);
	int err = inbox__sq_prepare_tmpl(s,
	                                 "SELECT count(*) FROM sqlite_master "
	                                 "WHERE type = 'table' AND name = ?1",
	                                 &stmt);
	if (err)
		return err;
	sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
	if ((err = scalar(s, stmt, &n)) != INBOX_OK || n == 0)
		return err;
	err = inbox__sq_prepare_tmpl(
	    s, "SELECT coalesce(max(version), 0) FROM {schema_version}", &stmt);
	if (err || (err = scalar(s, stmt, &n)) != INBOX_OK)
		return err;
	*version = (int)n;
	return INBOX_OK;
}

/* *n = 1 if the prefixed table has the column, else 0. */
static int has_column(sq_store *s, const char *table, const char *column,
                      int64_t *n)
{
	sqlite3_stmt *stmt;
	char name[128];
	snprintf(name, sizeof(name), "%s%s", s->base.prefix, table);
	int err =
	    inbox__sq_prepare_tmpl(s,
	                           "SELECT count(*) FROM "
	                           "pragma_table_info(?1) WHERE name = ?2",
	                           &stmt);
	if (err)
		return err;
	sqlite3_bind_text(stmt, 1, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(stmt, 2, column, -1, SQLITE_STATIC);
	return scalar(s, stmt, n);
}

static int apply(sq_store *s, int v)
{
	int64_t n = 0;
	int err = INBOX_OK;
	if (v == 4 &&
	    (err = has_column(s, "dead_letters", "dedup_key", &n)) == 0 &&
	    n == 0)
		err = exec_tmpl(s, v4_columns, "migrate");
	if (!err && v == 5 &&
	    (err = has_column(s, "inbox", "result", &n)) == 0 && n == 0)
		err = exec_tmpl(s, v5_columns, "migrate");
	if (!err && v == 6 &&
	    (err = has_column(s, "inbox", "position", &n)) == 0 && n == 0)
		err = exec_tmpl(s, v6_columns, "migrate");
	return err ? err : exec_tmpl(s, migrations[v], "migrate");
}

static int record_version(sq_store *s, int v)
{
	sqlite3_stmt *stmt;
	int err = inbox__sq_prepare_tmpl(
	    s,
	    "INSERT INTO {schema_version} (version, applied_at) "
	    "VALUES (?1, ?2)",
	    &stmt);
	if (err)
		return err;
	sqlite3_bind_int(stmt, 1, v);
	sqlite3_bind_int64(stmt, 2, inbox__now_ms());
	int rc = sqlite3_step(stmt);
	err = rc == SQLITE_DONE ? INBOX_OK : inbox__sq_fail(s, rc, "migrate");
	sqlite3_finalize(stmt);
	return err;
}

static int upgrade(sq_store *s, int target)
{
	int v = 0;
	int err = exec_tmpl(s,
	                    "CREATE TABLE IF NOT EXISTS {schema_version} ("
	                    " version INTEGER PRIMARY KEY,"
	                    " applied_at INTEGER NOT NULL)",
	                    "migrate");
	if (err || (err = inbox__sq_schema_version(&s->base, &v)) != 0)
		return err;
	if (v > SQ_SCHEMA_VERSION) {
		inbox__store_seterr(&s->base, "",
		                    "schema version %d is newer than this "
		                    "library's %d",
		                    v, SQ_SCHEMA_VERSION);
		return INBOX_ERR_SCHEMA;
	}
	for (int next = v + 1; next <= target; next++) {
		if ((err = apply(s, next)) != 0 ||
		    (err = record_version(s, next)) != 0)
			return err;
	}
	return INBOX_OK;
}

/* The whole upgrade runs under BEGIN IMMEDIATE: a concurrent migrator
 * waits for the write lock, then finds the new version and does nothing. */
int inbox__sq_migrate(inbox_store *st)
{
	return inbox__sq_migrate_to(st, SQ_SCHEMA_VERSION);
}

int inbox__sq_migrate_to(inbox_store *st, int target)
{
	sq_store *s = SQ(st);
	if (target > SQ_SCHEMA_VERSION)
		target = SQ_SCHEMA_VERSION;
	if (st->in_txn) {
		inbox__store_seterr(st, "", "migrate: a transaction is open");
		return INBOX_ERR_STATE;
	}
	int err = inbox__sq_begin(st);
	if (err)
		return err;
	err = upgrade(s, target);
	if (err) {
		inbox__sq_rollback(st);
		return err;
	}
	return inbox__sq_commit(st);
}
