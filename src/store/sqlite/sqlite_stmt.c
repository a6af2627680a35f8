/* The SQLite store's own statements: templates, lazy preparation, reuse. */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "store/sqlite/sqlite_outbox.h"
#include "store/sqlite/sqlite_store.h"

/* "{name}" is the quoted, prefixed table or index name. Every statement
 * touches one row through the primary key (consumer, key), except purge. */
static const char *const fixed_sql[SQ_NFIXED] = {
    [SQ_BEGIN] = "BEGIN IMMEDIATE",
    [SQ_COMMIT] = "COMMIT",
    [SQ_ROLLBACK] = "ROLLBACK",
    [SQ_SAVEPOINT] = "SAVEPOINT inbox_sp",
    [SQ_RELEASE] = "RELEASE inbox_sp",
    [SQ_ROLLBACK_TO] = "ROLLBACK TO inbox_sp",
    [SQ_CLAIM_INSERT] =
        "INSERT INTO {inbox} (consumer, key, fingerprint, status, "
        "attempts, fence, lease_until, message_id, created_at, "
        "processed_at, updated_at, position) "
        "VALUES (?1, ?2, ?3, ?4, 1, 1, ?5, ?6, ?7, ?8, ?7, ?9) "
        "ON CONFLICT (consumer, key) DO NOTHING",
    /* The stored result comes with the record: a duplicate costs no
     * second statement, and one without a result reads two NULLs. */
    [SQ_CLAIM_SELECT] =
        "SELECT status, fingerprint, attempts, fence, lease_until, "
        "result, result_type, outcome "
        "FROM {inbox} WHERE consumer = ?1 AND key = ?2",
    [SQ_RECLAIM] = "UPDATE {inbox} SET status = ?3, attempts = attempts + 1, "
                   "fence = fence + 1, lease_until = ?4, processed_at = ?5, "
                   "updated_at = ?6 "
                   "WHERE consumer = ?1 AND key = ?2 AND (status = 'failed' OR "
                   "(status = 'processing' AND lease_until < ?6)) "
                   "RETURNING attempts, fence",
    [SQ_FINISH] =
        "UPDATE {inbox} SET status = ?3, "
        "attempts = CASE WHEN ?4 > 0 THEN ?4 ELSE attempts END, "
        "processed_at = ?5, lease_until = NULL, updated_at = ?6 "
        "WHERE consumer = ?1 AND key = ?2 AND (?7 <= 0 OR fence = ?7) "
        "AND (?8 IS NULL OR status = ?8)",
    [SQ_EXTEND] = "UPDATE {inbox} SET lease_until = ?3, updated_at = ?4 "
                  "WHERE consumer = ?1 AND key = ?2 AND status = 'processing' "
                  "AND (?5 <= 0 OR fence = ?5)",
    /* One row per (consumer, dedup_key): a repeat is counted on the row
     * there is, which is pending again (a NULL dedup_key never
     * conflicts). */
    [SQ_DEAD_LETTER] =
        "INSERT INTO {dead_letters} (consumer, key, message_id, "
        "payload, headers, position, attempts, reason, fingerprint, "
        "stored_fingerprint, created_at, dedup_key, last_seen_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?11) "
        "ON CONFLICT (consumer, dedup_key) DO UPDATE SET "
        "deliveries = deliveries + 1, last_seen_at = excluded.last_seen_at, "
        "attempts = excluded.attempts, reason = excluded.reason, "
        "replayed_at = NULL "
        "RETURNING id",
    [SQ_REGISTER] =
        "INSERT INTO {consumers} (name, retention_seconds, created_at, "
        "updated_at) VALUES (?1, ?2, ?3, ?3) "
        "ON CONFLICT (name) DO NOTHING",
    [SQ_RETENTION] =
        "SELECT retention_seconds FROM {consumers} WHERE name = ?1",
    [SQ_PURGE_COUNT] =
        "SELECT count(*) FROM {inbox} WHERE consumer = ?1 "
        "AND status IN ('completed', 'dead') AND processed_at < ?2",
    /* The table is WITHOUT ROWID (see sqlite_schema.c): a batch is
     * chosen through the (consumer, processed_at) index, whose entries
     * carry the primary key, and deleted by primary key. */
    [SQ_PURGE_DELETE] =
        "DELETE FROM {inbox} WHERE consumer = ?1 AND key IN ("
        "SELECT key FROM {inbox} WHERE consumer = ?1 "
        "AND status IN ('completed', 'dead') AND processed_at < ?2 "
        "LIMIT ?3)",
    /* The outbox (sqlite_outbox.c): one add per declared effect, a claim
     * and a finish per dispatched one. */
    [SQ_OUTBOX_ADD] =
        "INSERT INTO {outbox} (consumer, key, step, idempotency_key, kind, "
        "method, target, headers, key_header, body, idempotent, "
        "reconcile_url, max_attempts, state, next_attempt_at, created_at, "
        "updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
        "?12, ?13, 'pending', ?14, ?14, ?14) "
        "ON CONFLICT (consumer, key, step) DO NOTHING",
    [SQ_OUTBOX_DUE] =
        "SELECT id, state FROM {outbox} WHERE state IN " SQ_OUTBOX_UNDONE
        " AND next_attempt_at <= ?1 AND (?2 IS NULL OR consumer = ?2)"
        " ORDER BY next_attempt_at, id LIMIT ?3",
    /* RETURNING shows new values only: the old state comes in as ?4. */
    [SQ_OUTBOX_CLAIM] =
        "UPDATE {outbox} SET state = 'in_flight', attempts = attempts + 1,"
        " fence = fence + 1, lease_until = ?2, next_attempt_at = ?2,"
        " updated_at = ?3 WHERE id = ?1"
        " RETURNING id, consumer, key, step, idempotency_key, kind, method,"
        " target, headers, key_header, body, idempotent, reconcile_url,"
        " max_attempts, attempts, fence, reconciliations, last_status, ?4",
    [SQ_OUTBOX_FINISH] =
        "UPDATE {outbox} SET state = ?3, next_attempt_at = ?4,"
        " lease_until = NULL, last_status = coalesce(?5, last_status),"
        " last_error = ?6, response = coalesce(?7, response),"
        " reconciliations = reconciliations + ?8,"
        " attempts = max(attempts + ?9, 0),"
        " done_at = CASE WHEN ?3 = 'done' THEN ?10 END, updated_at = ?10"
        " WHERE id = ?1 AND fence = ?2 AND state = 'in_flight'",
    [SQ_SET_RESULT] =
        "UPDATE {inbox} SET result = ?3, result_type = ?4, outcome = ?5, "
        "updated_at = ?6 WHERE consumer = ?1 AND key = ?2",
};

int inbox__sq_need_txn(sq_store *s, const char *what)
{
	if (s->base.in_txn)
		return INBOX_OK;
	inbox__store_seterr(&s->base, "", "%s: no transaction is open", what);
	return INBOX_ERR_STATE;
}

void inbox__sq_bind_str(sqlite3_stmt *stmt, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(stmt, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(stmt, i);
}

int inbox__sq_expand(const sq_store *s, inbox__buf *out, const char *tmpl)
{
	const char *p = tmpl;
	while (*p) {
		const char *open = strchr(p, '{');
		if (!open)
			return inbox__buf_puts(out, p);
		const char *close = strchr(open, '}');
		if (!close)
			return -1; /* templates are ours: cannot happen */
		char full[128];
		size_t pl = strlen(s->base.prefix);
		size_t nl = (size_t)(close - open - 1);
		if (pl + nl + 1 > sizeof(full))
			return -1;
		memcpy(full, s->base.prefix, pl);
		memcpy(full + pl, open + 1, nl);
		full[pl + nl] = '\0';
		if (inbox__buf_append(out, p, (size_t)(open - p)) < 0 ||
		    inbox__quote_ident(out, full) < 0)
			return -1;
		p = close + 1;
	}
	return 0;
}

int inbox__sq_prepare_tmpl(sq_store *s, const char *tmpl, sqlite3_stmt **out)
{
	*out = NULL;
	inbox__buf_reset(&s->sql);
	if (inbox__sq_expand(s, &s->sql, tmpl) < 0) {
		inbox__store_seterr(&s->base, "SQLITE_NOMEM",
		                    "out of memory building SQL");
		return INBOX_ERR_NOMEM;
	}
	int rc = sqlite3_prepare_v3(s->db, s->sql.data, (int)s->sql.len + 1,
	                            SQLITE_PREPARE_PERSISTENT, out, NULL);
	if (rc != SQLITE_OK)
		return inbox__sq_fail(s, rc, "prepare");
	return INBOX_OK;
}

int inbox__sq_fixed(sq_store *s, int id, sqlite3_stmt **out)
{
	if (!s->db) {
		inbox__store_seterr(&s->base, "", "the database is not open");
		return INBOX_ERR_STATE;
	}
	if (!s->fixed[id]) {
		int err =
		    inbox__sq_prepare_tmpl(s, fixed_sql[id], &s->fixed[id]);
		if (err)
			return err;
	}
	*out = s->fixed[id];
	return INBOX_OK;
}

void inbox__sq_done(sqlite3_stmt *stmt)
{
	sqlite3_reset(stmt);
	sqlite3_clear_bindings(stmt);
}

int inbox__sq_run(sq_store *s, sqlite3_stmt *stmt, const char *what)
{
	int rc;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
		;
	int err = rc == SQLITE_DONE ? INBOX_OK : inbox__sq_fail(s, rc, what);
	inbox__sq_done(stmt);
	return err;
}

void inbox__sq_finalize_all(sq_store *s)
{
	for (int i = 0; i < SQ_NFIXED; i++) {
		sqlite3_finalize(s->fixed[i]);
		s->fixed[i] = NULL;
	}
	for (int i = 0; i < SQ_CACHE_SIZE; i++) {
		sqlite3_finalize(s->cache[i].stmt);
		free(s->cache[i].sql);
		s->cache[i].stmt = NULL;
		s->cache[i].sql = NULL;
	}
}
