/*
 * The outbox on SQLite.
 *
 * Claims run under BEGIN IMMEDIATE (the core's begin): the write lock is
 * held from the SELECT of due rows to the UPDATE that makes them in_flight,
 * so two dispatchers — threads or processes on one file — can never claim
 * the same row; the second waits for the lock (busy timeout) and then sees
 * the rows in flight. The lease lives in the row (lease_until, and
 * next_attempt_at = lease_until, so a single partial index finds both the
 * due rows and the expired leases). Times are INTEGER milliseconds.
 *
 * add, claim and finish are the store's fixed statements (sqlite_stmt.c),
 * prepared once; counts and purge, run by operators, are prepared per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "outbox/outbox.h"
#include "store/sqlite/sqlite_outbox.h"
#include "store/sqlite/sqlite_store.h"

/* Longest delay accepted (ms), as on PostgreSQL: beyond it, now + delay
 * would overflow int64. */
#define MAX_DELAY_MS 1000000000000LL

static int64_t clamp_delay(int64_t ms)
{
	return ms < 0 ? 0 : ms > MAX_DELAY_MS ? MAX_DELAY_MS : ms;
}

const char inbox__sq_outbox_schema[] =
    "CREATE TABLE IF NOT EXISTS {outbox} ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " consumer TEXT NOT NULL,"
    " key TEXT NOT NULL,"
    " step TEXT NOT NULL,"
    " idempotency_key TEXT NOT NULL,"
    " kind TEXT NOT NULL,"
    " method TEXT NOT NULL,"
    " target TEXT NOT NULL,"
    " headers TEXT,"
    " key_header TEXT,"
    " body BLOB NOT NULL,"
    " idempotent INTEGER NOT NULL,"
    " reconcile_url TEXT,"
    " max_attempts INTEGER NOT NULL DEFAULT 0,"
    " state TEXT NOT NULL CHECK (state IN ('pending', 'in_flight', 'done',"
    "  'failed', 'unknown', 'dead')),"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " reconciliations INTEGER NOT NULL DEFAULT 0,"
    " fence INTEGER NOT NULL DEFAULT 0,"
    " next_attempt_at INTEGER NOT NULL,"
    " lease_until INTEGER,"
    " last_status INTEGER,"
    " last_error TEXT,"
    " response BLOB,"
    " created_at INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL,"
    " done_at INTEGER,"
    " UNIQUE (consumer, key, step)"
    ");"
    "CREATE INDEX IF NOT EXISTS {outbox_due_idx}"
    " ON {outbox} (next_attempt_at) WHERE state IN " SQ_OUTBOX_UNDONE ";"
    "CREATE INDEX IF NOT EXISTS {outbox_state_idx}"
    " ON {outbox} (state, consumer, created_at) WHERE state <> 'done';"
    "CREATE INDEX IF NOT EXISTS {outbox_done_idx}"
    " ON {outbox} (done_at) WHERE state = 'done';";

static int prepare(sq_store *s, const char *tmpl, sqlite3_stmt **out)
{
	*out = NULL;
	if (!s->db) {
		inbox__store_seterr(&s->base, "", "the database is not open");
		return INBOX_ERR_STATE;
	}
	return inbox__sq_prepare_tmpl(s, tmpl, out);
}

int inbox__sq_outbox_add(inbox_store *st, const inbox_outbox_item *r,
                         int *added)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *stmt;
	*added = 0;
	int err = inbox__sq_need_txn(s, "outbox add");
	if (err || (err = inbox__sq_fixed(s, SQ_OUTBOX_ADD, &stmt)))
		return err;
	inbox__sq_bind_str(stmt, 1, r->consumer);
	inbox__sq_bind_str(stmt, 2, r->key);
	inbox__sq_bind_str(stmt, 3, r->step);
	inbox__sq_bind_str(stmt, 4, r->idempotency_key);
	inbox__sq_bind_str(stmt, 5, r->kind);
	inbox__sq_bind_str(stmt, 6, r->method);
	inbox__sq_bind_str(stmt, 7, r->url);
	inbox__sq_bind_str(stmt, 8, r->headers);
	inbox__sq_bind_str(stmt, 9, r->key_header);
	sqlite3_bind_blob64(stmt, 10, r->body ? r->body : "",
	                    (sqlite3_uint64)r->body_len, SQLITE_STATIC);
	sqlite3_bind_int(stmt, 11, r->idempotent ? 1 : 0);
	inbox__sq_bind_str(stmt, 12, r->reconcile_url);
	sqlite3_bind_int(stmt, 13, r->max_attempts);
	sqlite3_bind_int64(stmt, 14, inbox__now_ms());
	int rc = sqlite3_step(stmt);
	if (rc == SQLITE_DONE)
		*added = sqlite3_changes(s->db) > 0;
	else
		err = inbox__sq_fail(s, rc, "outbox add");
	inbox__sq_done(stmt);
	return err;
}

/* Column order of the claim's RETURNING. */
enum {
	C_ID,
	C_CONSUMER,
	C_KEY,
	C_STEP,
	C_IKEY,
	C_KIND,
	C_METHOD,
	C_TARGET,
	C_HEADERS,
	C_KEY_HEADER,
	C_BODY,
	C_IDEMPOTENT,
	C_RECONCILE,
	C_MAX_ATTEMPTS,
	C_ATTEMPTS,
	C_FENCE,
	C_RECONCILIATIONS,
	C_LAST_STATUS,
	C_OLD_STATE
};

static const char *col_text(sqlite3_stmt *stmt, int i)
{
	return (const char *)sqlite3_column_text(stmt, i);
}

static void read_item(sqlite3_stmt *stmt, inbox_outbox_item *it)
{
	memset(it, 0, sizeof(*it));
	it->id = sqlite3_column_int64(stmt, C_ID);
	it->consumer = col_text(stmt, C_CONSUMER);
	it->key = col_text(stmt, C_KEY);
	it->step = col_text(stmt, C_STEP);
	it->idempotency_key = col_text(stmt, C_IKEY);
	it->kind = col_text(stmt, C_KIND);
	it->method = col_text(stmt, C_METHOD);
	it->url = col_text(stmt, C_TARGET);
	it->headers = col_text(stmt, C_HEADERS);
	it->key_header = col_text(stmt, C_KEY_HEADER);
	it->body = sqlite3_column_blob(stmt, C_BODY);
	it->body_len = (size_t)sqlite3_column_bytes(stmt, C_BODY);
	if (!it->body)
		it->body = "";
	it->idempotent = sqlite3_column_int(stmt, C_IDEMPOTENT) != 0;
	it->reconcile_url = col_text(stmt, C_RECONCILE);
	it->max_attempts = sqlite3_column_int(stmt, C_MAX_ATTEMPTS);
	it->attempts = sqlite3_column_int(stmt, C_ATTEMPTS);
	it->fence = sqlite3_column_int64(stmt, C_FENCE);
	it->reconciliations = sqlite3_column_int(stmt, C_RECONCILIATIONS);
	it->last_status = sqlite3_column_int(stmt, C_LAST_STATUS);
	it->state = inbox__outbox_state_parse(col_text(stmt, C_OLD_STATE));
}

#define MAX_CLAIM 1000

typedef struct due {
	int64_t id;
	char state[16];
} due;

/* The due rows, read completely before any of them is updated (an UPDATE
 * moving rows under a running SELECT of the same index is best avoided).
 * The write lock is ours since BEGIN IMMEDIATE: they stay due. */
static int select_due(sq_store *s, const char *consumer, int limit, int64_t now,
                      due *out, int *n)
{
	sqlite3_stmt *sel;
	*n = 0;
	int err = inbox__sq_fixed(s, SQ_OUTBOX_DUE, &sel);
	if (err)
		return err;
	sqlite3_bind_int64(sel, 1, now);
	inbox__sq_bind_str(sel, 2, consumer);
	sqlite3_bind_int(sel, 3, limit);
	int rc;
	while ((rc = sqlite3_step(sel)) == SQLITE_ROW && *n < limit) {
		out[*n].id = sqlite3_column_int64(sel, 0);
		snprintf(out[*n].state, sizeof(out[*n].state), "%s",
		         col_text(sel, 1) ? col_text(sel, 1) : "");
		(*n)++;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		err = inbox__sq_fail(s, rc, "outbox claim");
	inbox__sq_done(sel);
	return err;
}

int inbox__sq_outbox_claim(
    inbox_store *st, const char *consumer, int limit, int64_t lease_ms,
    int (*fn)(const inbox_outbox_item *row, void *payload), void *payload)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *upd = NULL;
	int err = inbox__sq_need_txn(s, "outbox claim");
	if (err)
		return err;
	if (limit <= 0 || limit > MAX_CLAIM)
		limit = limit <= 0 ? 1 : MAX_CLAIM;
	due *rows = calloc((size_t)limit, sizeof(*rows));
	if (!rows) {
		inbox__store_seterr(st, "SQLITE_NOMEM", "out of memory");
		return INBOX_ERR_NOMEM;
	}
	int64_t now = inbox__now_ms(),
	        lease_until = now + clamp_delay(lease_ms);
	int n = 0;
	err = select_due(s, consumer, limit, now, rows, &n);
	if (!err && n > 0)
		err = inbox__sq_fixed(s, SQ_OUTBOX_CLAIM, &upd);
	for (int i = 0; i < n && !err; i++) {
		sqlite3_bind_int64(upd, 1, rows[i].id);
		sqlite3_bind_int64(upd, 2, lease_until);
		sqlite3_bind_int64(upd, 3, now);
		sqlite3_bind_text(upd, 4, rows[i].state, -1, SQLITE_STATIC);
		int rc = sqlite3_step(upd);
		if (rc == SQLITE_ROW) {
			inbox_outbox_item it;
			read_item(upd, &it);
			if (fn(&it, payload) != 0) {
				inbox__store_seterr(
				    st, "SQLITE_NOMEM",
				    "outbox claim: out of memory");
				err = INBOX_ERR_NOMEM;
			}
			while (rc == SQLITE_ROW)
				rc = sqlite3_step(upd);
		}
		if (!err && rc != SQLITE_DONE)
			err = inbox__sq_fail(s, rc, "outbox claim");
		sqlite3_reset(upd);
	}
	if (upd)
		inbox__sq_done(upd);
	free(rows);
	return err;
}

int inbox__sq_outbox_finish(inbox_store *st, const inbox_outbox_finish *f,
                            int64_t *rows)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *stmt;
	*rows = 0;
	int err = inbox__sq_need_txn(s, "outbox finish");
	if (err || (err = inbox__sq_fixed(s, SQ_OUTBOX_FINISH, &stmt)))
		return err;
	int64_t now = inbox__now_ms();
	sqlite3_bind_int64(stmt, 1, f->id);
	sqlite3_bind_int64(stmt, 2, f->fence);
	sqlite3_bind_text(stmt, 3, inbox_outbox_state_name(f->state), -1,
	                  SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 4, now + clamp_delay(f->retry_in_ms));
	if (f->last_status)
		sqlite3_bind_int(stmt, 5, f->last_status);
	else
		sqlite3_bind_null(stmt, 5);
	inbox__sq_bind_str(stmt, 6, f->last_error);
	if (f->response)
		sqlite3_bind_blob64(stmt, 7, f->response,
		                    (sqlite3_uint64)f->response_len,
		                    SQLITE_STATIC);
	else
		sqlite3_bind_null(stmt, 7);
	sqlite3_bind_int(stmt, 8, f->reconciled);
	sqlite3_bind_int(stmt, 9, f->attempts_delta);
	sqlite3_bind_int64(stmt, 10, now);
	int rc = sqlite3_step(stmt);
	if (rc == SQLITE_DONE)
		*rows = sqlite3_changes(s->db);
	else
		err = inbox__sq_fail(s, rc, "outbox finish");
	inbox__sq_done(stmt);
	return err;
}

int inbox__sq_outbox_counts(inbox_store *st, const char *consumer,
                            inbox_outbox_counts *out)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *stmt;
	int err = prepare(s,
	                  "SELECT state, count(*), min(created_at)"
	                  " FROM {outbox} WHERE state <> 'done'"
	                  " AND (?1 IS NULL OR consumer = ?1)"
	                  " GROUP BY state",
	                  &stmt);
	if (err)
		return err;
	inbox__sq_bind_str(stmt, 1, consumer);
	int64_t now = inbox__now_ms(), oldest = 0;
	int rc;
	memset(out, 0, sizeof(*out));
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		int64_t n = sqlite3_column_int64(stmt, 1);
		int64_t first = sqlite3_column_int64(stmt, 2);
		inbox_outbox_state state =
		    inbox__outbox_state_parse(col_text(stmt, 0));
		switch (state) {
		case INBOX_OUTBOX_PENDING:
			out->pending = n;
			break;
		case INBOX_OUTBOX_IN_FLIGHT:
			out->in_flight = n;
			break;
		case INBOX_OUTBOX_FAILED:
			out->failed = n;
			break;
		case INBOX_OUTBOX_UNKNOWN:
			out->unknown = n;
			break;
		case INBOX_OUTBOX_DEAD:
			out->dead = n;
			break;
		default:
			break;
		}
		if (state != INBOX_OUTBOX_DEAD && (!oldest || first < oldest))
			oldest = first;
	}
	if (rc != SQLITE_DONE)
		err = inbox__sq_fail(s, rc, "outbox counts");
	sqlite3_finalize(stmt);
	if (oldest && now > oldest)
		out->oldest_age_seconds = (double)(now - oldest) / 1000.0;
	return err;
}

int inbox__sq_outbox_purge(inbox_store *st, const char *consumer,
                           int64_t older_than_seconds, int batch_limit,
                           int64_t *deleted)
{
	sq_store *s = SQ(st);
	*deleted = 0;
	if (older_than_seconds > MAX_DELAY_MS / 1000)
		older_than_seconds = MAX_DELAY_MS / 1000;
	int64_t cutoff = inbox__now_ms() - older_than_seconds * 1000;
	for (;;) {
		sqlite3_stmt *stmt;
		int err = inbox__sq_begin(st);
		if (err)
			return err;
		err = prepare(s,
		              "DELETE FROM {outbox} WHERE id IN ("
		              "SELECT id FROM {outbox} WHERE state = 'done'"
		              " AND done_at < ?1"
		              " AND (?2 IS NULL OR consumer = ?2)"
		              " ORDER BY done_at LIMIT ?3)",
		              &stmt);
		int64_t n = 0;
		if (!err) {
			sqlite3_bind_int64(stmt, 1, cutoff);
			inbox__sq_bind_str(stmt, 2, consumer);
			sqlite3_bind_int(stmt, 3, batch_limit);
			int rc = sqlite3_step(stmt);
			if (rc == SQLITE_DONE)
				n = sqlite3_changes(s->db);
			else
				err = inbox__sq_fail(s, rc, "outbox purge");
			sqlite3_finalize(stmt);
		}
		if (!err)
			err = inbox__sq_commit(st);
		if (err) {
			inbox__sq_rollback(st);
			return err;
		}
		*deleted += n;
		if (n < batch_limit)
			return INBOX_OK;
	}
}
