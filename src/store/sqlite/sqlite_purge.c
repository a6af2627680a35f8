/*
 * Purge of expired inbox records on SQLite.
 *
 * Each batch is its own short BEGIN IMMEDIATE transaction deleting at most
 * batch_limit rows, so consumers wait for the write lock (busy timeout) at
 * most one batch long. Only 'completed' and 'dead' records processed
 * before the cut-off are deleted; 'processing' and 'failed' ones never.
 *
 * One purger at a time: SQLite already serialises writers, and each batch
 * re-selects what is expired when it holds the lock, so two purgers merely
 * interleave their batches and never delete anything twice or anything
 * inside the window. No separate purge lock is taken, so the SQLite store
 * never answers INBOX_ERR_BUSY; a purger that cannot get the write lock
 * within the busy timeout gets INBOX_ERR_TRANSIENT (batches that already
 * committed stay deleted and are counted in *deleted).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "store/sqlite/sqlite_store.h"

/* The consumer's registered window in seconds; 0 if unregistered. */
static int registered(sq_store *s, const char *consumer, int64_t *ret)
{
	sqlite3_stmt *stmt;
	*ret = 0;
	int err = inbox__sq_fixed(s, SQ_RETENTION, &stmt);
	if (err)
		return err;
	sqlite3_bind_text(stmt, 1, consumer, -1, SQLITE_STATIC);
	int rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW)
		*ret = sqlite3_column_int64(stmt, 0);
	else if (rc != SQLITE_DONE)
		err = inbox__sq_fail(s, rc, "purge");
	inbox__sq_done(stmt);
	return err;
}

static int count_expired(sq_store *s, const char *consumer, int64_t cutoff,
                         int64_t *deleted)
{
	sqlite3_stmt *stmt;
	int err = inbox__sq_fixed(s, SQ_PURGE_COUNT, &stmt);
	if (err)
		return err;
	sqlite3_bind_text(stmt, 1, consumer, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 2, cutoff);
	int rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW)
		*deleted += sqlite3_column_int64(stmt, 0);
	else
		err = inbox__sq_fail(s, rc, "purge");
	inbox__sq_done(stmt);
	return err;
}

static int delete_batch(sq_store *s, const char *consumer, int64_t cutoff,
                        int batch_limit, int64_t *n)
{
	sqlite3_stmt *stmt;
	*n = 0;
	int err = inbox__sq_begin(&s->base);
	if (err)
		return err;
	err = inbox__sq_fixed(s, SQ_PURGE_DELETE, &stmt);
	if (!err) {
		sqlite3_bind_text(stmt, 1, consumer, -1, SQLITE_STATIC);
		sqlite3_bind_int64(stmt, 2, cutoff);
		sqlite3_bind_int(stmt, 3, batch_limit);
		err = inbox__sq_run(s, stmt, "purge");
	}
	if (!err) {
		*n = sqlite3_changes64(s->db);
		err = inbox__sq_commit(&s->base);
	}
	if (err) {
		*n = 0;
		inbox__sq_rollback(&s->base);
	}
	return err;
}

static int purge_one(sq_store *s, const char *consumer, int64_t retention,
                     int batch_limit, int dry_run, int64_t *deleted)
{
	int64_t now = inbox__now_ms();
	/* A window too long to express deletes nothing. */
	if (retention > INT64_MAX / 2000)
		return INBOX_OK;
	int64_t cutoff = now - retention * 1000;
	if (dry_run)
		return count_expired(s, consumer, cutoff, deleted);
	for (;;) {
		int64_t n;
		int err = delete_batch(s, consumer, cutoff, batch_limit, &n);
		if (err)
			return err;
		*deleted += n;
		if (n < batch_limit)
			return INBOX_OK;
	}
}

typedef struct registry_row {
	char *name;
	int64_t retention;
} registry_row;

/* The whole consumer registry, read before any batch starts. */
static int read_registry(sq_store *s, registry_row **out, size_t *n)
{
	sqlite3_stmt *stmt;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	int err = inbox__sq_prepare_tmpl(
	    s, "SELECT name, retention_seconds FROM {consumers} ORDER BY name",
	    &stmt);
	if (err)
		return err;
	int rc = SQLITE_DONE;
	while (!err && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			registry_row *p = realloc(*out, cap * sizeof(**out));
			if (!p) {
				err = INBOX_ERR_NOMEM;
				break;
			}
			*out = p;
		}
		const char *name = (const char *)sqlite3_column_text(stmt, 0);
		(*out)[*n].name = strdup(name ? name : "");
		(*out)[*n].retention = sqlite3_column_int64(stmt, 1);
		if (!(*out)[*n].name)
			err = INBOX_ERR_NOMEM;
		else
			(*n)++;
	}
	if (err == INBOX_ERR_NOMEM)
		inbox__store_seterr(&s->base, "", "purge: out of memory");
	else if (rc != SQLITE_DONE)
		err = inbox__sq_fail(s, rc, "purge");
	sqlite3_finalize(stmt);
	return err;
}

static int purge_all(sq_store *s, int64_t retention_seconds, int batch_limit,
                     int dry_run, int64_t *deleted)
{
	registry_row *rows;
	size_t n;
	int err = read_registry(s, &rows, &n);
	for (size_t i = 0; i < n; i++) {
		int64_t ret = retention_seconds > 0 ? retention_seconds
		                                    : rows[i].retention;
		/* A registry row without a window promises nothing we could
		 * honour: leave its records alone. */
		if (!err && ret > 0)
			err = purge_one(s, rows[i].name, ret, batch_limit,
			                dry_run, deleted);
		free(rows[i].name);
	}
	free(rows);
	return err;
}

int inbox__sq_purge(inbox_store *st, const char *consumer,
                    int64_t retention_seconds, int batch_limit, int dry_run,
                    int64_t *deleted)
{
	sq_store *s = SQ(st);
	*deleted = 0;
	if (batch_limit <= 0) {
		inbox__store_seterr(st, "", "purge: batch_limit must be > 0");
		return INBOX_ERR_INVALID;
	}
	if (st->in_txn) {
		inbox__store_seterr(st, "", "purge: a transaction is open");
		return INBOX_ERR_STATE;
	}
	if (!consumer)
		return purge_all(s, retention_seconds, batch_limit, dry_run,
		                 deleted);
	int64_t ret = retention_seconds;
	if (ret <= 0) {
		int err = registered(s, consumer, &ret);
		if (err)
			return err;
		if (ret <= 0) {
			inbox__store_seterr(st, "",
			                    "purge: consumer \"%s\" has no "
			                    "registered retention window; give "
			                    "retention_seconds > 0",
			                    consumer);
			return INBOX_ERR_INVALID;
		}
	}
	return purge_one(s, consumer, ret, batch_limit, dry_run, deleted);
}
