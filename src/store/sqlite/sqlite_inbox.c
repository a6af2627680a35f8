/*
 * Inbox records, consumers and dead letters on SQLite.
 *
 * Every write transaction holds SQLite's write lock from BEGIN IMMEDIATE,
 * so no other writer can insert or change a row between our statements:
 * "one statement" per claim batch buys nothing here, and one prepared
 * INSERT ... ON CONFLICT DO NOTHING per key (plus a re-read of the keys
 * that were present) costs no round trip and no allocation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "store/sqlite/sqlite_store.h"

static int bad_arg(sq_store *s, const char *what)
{
	inbox__store_seterr(&s->base, "", "%s: invalid arguments", what);
	return INBOX_ERR_INVALID;
}

static void bind_opt_ms(sqlite3_stmt *stmt, int i, int set, int64_t ms)
{
	if (set)
		sqlite3_bind_int64(stmt, i, ms);
	else
		sqlite3_bind_null(stmt, i);
}

static int terminal(inbox_status st)
{
	return st == INBOX_ST_COMPLETED || st == INBOX_ST_DEAD;
}

int inbox__sq_register_consumer(inbox_store *st, const char *consumer,
                                int64_t retention_seconds)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *stmt;
	if (!consumer || retention_seconds <= 0)
		return bad_arg(s, "register consumer");
	int err = inbox__sq_fixed(s, SQ_REGISTER, &stmt);
	if (err)
		return err;
	inbox__sq_bind_str(stmt, 1, consumer);
	sqlite3_bind_int64(stmt, 2, retention_seconds);
	sqlite3_bind_int64(stmt, 3, inbox__now_ms());
	return inbox__sq_run(s, stmt, "register consumer");
}

/* The record's stored result (columns 5-7 of SQ_CLAIM_SELECT) into the
 * claim's version 7 fields, copied: the column's memory is SQLite's
 * until the next step. NULLs (no result) cost nothing. */
static int read_result(sq_store *s, sqlite3_stmt *stmt, inbox_claim *c)
{
	c->first_outcome = (inbox_outcome)inbox__outcome_parse(
	    (const char *)sqlite3_column_text(stmt, 7));
	if (sqlite3_column_type(stmt, 5) == SQLITE_NULL)
		return INBOX_OK;
	const void *b = sqlite3_column_blob(stmt, 5);
	size_t n = (size_t)sqlite3_column_bytes(stmt, 5);
	const char *t = (const char *)sqlite3_column_text(stmt, 6);
	c->result = malloc(n + 1);
	c->result_type = t ? strdup(t) : NULL;
	if (!c->result || (t && !c->result_type)) {
		free(c->result);
		free(c->result_type);
		c->result = NULL;
		c->result_type = NULL;
		inbox__store_seterr(&s->base, "SQLITE_NOMEM",
		                    "claim: out of memory");
		return INBOX_ERR_NOMEM;
	}
	if (n)
		memcpy(c->result, b, n);
	((char *)c->result)[n] = '\0';
	c->result_len = n;
	return INBOX_OK;
}

/* Fill the out fields of a claim whose key was already present (possibly
 * inserted by an earlier claim of the same call). */
static int read_existing(sq_store *s, const char *consumer, inbox_claim *c,
                         int64_t now)
{
	sqlite3_stmt *stmt;
	int err = inbox__sq_fixed(s, SQ_CLAIM_SELECT, &stmt);
	if (err)
		return err;
	inbox__sq_bind_str(stmt, 1, consumer);
	inbox__sq_bind_str(stmt, 2, c->key);
	int rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW) {
		const char *fp = (const char *)sqlite3_column_text(stmt, 1);
		c->status = inbox__status_parse(
		    (const char *)sqlite3_column_text(stmt, 0));
		snprintf(c->stored_fingerprint, sizeof(c->stored_fingerprint),
		         "%s", fp ? fp : "");
		c->attempts = sqlite3_column_int(stmt, 2);
		c->fence = sqlite3_column_int64(stmt, 3);
		c->lease_expired =
		    c->status == INBOX_ST_PROCESSING &&
		    sqlite3_column_type(stmt, 4) != SQLITE_NULL &&
		    sqlite3_column_int64(stmt, 4) < now;
		err = read_result(s, stmt, c);
	} else if (rc != SQLITE_DONE) {
		err = inbox__sq_fail(s, rc, "claim");
	}
	/* SQLITE_DONE cannot happen under the write lock: the insert just
	 * conflicted with the row. Should it, status stays NONE. */
	inbox__sq_done(stmt);
	return err;
}

static int claim_one(sq_store *s, sqlite3_stmt *ins, const char *consumer,
                     inbox_claim *c, inbox_status status, int64_t now,
                     int64_t lease_ms)
{
	c->is_new = 0;
	c->status = INBOX_ST_NONE;
	c->stored_fingerprint[0] = '\0';
	c->attempts = 0;
	c->fence = 1;
	c->lease_expired = 0;
	int processing = status == INBOX_ST_PROCESSING;
	inbox__sq_bind_str(ins, 1, consumer);
	inbox__sq_bind_str(ins, 2, c->key);
	inbox__sq_bind_str(ins, 3, c->fingerprint);
	sqlite3_bind_text(ins, 4, inbox__status_name(status), -1,
	                  SQLITE_STATIC);
	bind_opt_ms(ins, 5, processing, now + lease_ms);
	inbox__sq_bind_str(ins, 6, c->message_id);
	sqlite3_bind_int64(ins, 7, now);
	bind_opt_ms(ins, 8, !processing, now);
	inbox__sq_bind_str(ins, 9, c->position);
	int rc = sqlite3_step(ins);
	int err = INBOX_OK;
	if (rc == SQLITE_DONE)
		c->is_new = sqlite3_changes(s->db) == 1;
	else
		err = inbox__sq_fail(s, rc, "claim");
	inbox__sq_done(ins);
	if (!err && !c->is_new)
		err = read_existing(s, consumer, c, now);
	return err;
}

int inbox__sq_claim(inbox_store *st, const char *consumer, inbox_claim *claims,
                    size_t n, inbox_status status, int64_t lease_ms)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *ins;
	if (!consumer || (n && !claims) ||
	    (status != INBOX_ST_COMPLETED && status != INBOX_ST_PROCESSING))
		return bad_arg(s, "claim");
	for (size_t i = 0; i < n; i++)
		if (!claims[i].key || !claims[i].fingerprint)
			return bad_arg(s, "claim");
	int err = inbox__sq_need_txn(s, "claim");
	if (err || (err = inbox__sq_fixed(s, SQ_CLAIM_INSERT, &ins)) != 0)
		return err;
	int64_t now = inbox__now_ms();
	for (size_t i = 0; i < n && !err; i++)
		err = claim_one(s, ins, consumer, &claims[i], status, now,
		                lease_ms);
	return err;
}

int inbox__sq_reclaim(inbox_store *st, const char *consumer, const char *key,
                      inbox_status status, int64_t lease_ms, int *taken,
                      int32_t *attempts, int64_t *fence)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *stmt;
	*taken = 0;
	if (!consumer || !key ||
	    (status != INBOX_ST_COMPLETED && status != INBOX_ST_PROCESSING))
		return bad_arg(s, "reclaim");
	int err = inbox__sq_need_txn(s, "reclaim");
	if (err || (err = inbox__sq_fixed(s, SQ_RECLAIM, &stmt)) != 0)
		return err;
	int64_t now = inbox__now_ms();
	int processing = status == INBOX_ST_PROCESSING;
	inbox__sq_bind_str(stmt, 1, consumer);
	inbox__sq_bind_str(stmt, 2, key);
	sqlite3_bind_text(stmt, 3, inbox__status_name(status), -1,
	                  SQLITE_STATIC);
	bind_opt_ms(stmt, 4, processing, now + lease_ms);
	bind_opt_ms(stmt, 5, !processing, now);
	sqlite3_bind_int64(stmt, 6, now);
	int rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW) {
		*taken = 1;
		if (attempts)
			*attempts = sqlite3_column_int(stmt, 0);
		if (fence)
			*fence = sqlite3_column_int64(stmt, 1);
		rc = sqlite3_step(stmt); /* the key is unique: DONE */
	}
	if (rc != SQLITE_DONE) {
		*taken = 0;
		err = inbox__sq_fail(s, rc, "reclaim");
	}
	inbox__sq_done(stmt);
	return err;
}

int inbox__sq_finish(inbox_store *st, const char *consumer, const char *key,
                     int64_t fence, inbox_status expect, inbox_status status,
                     int32_t attempts, int64_t *rows)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *stmt;
	*rows = 0;
	if (!consumer || !key || status == INBOX_ST_NONE)
		return bad_arg(s, "finish");
	int err = inbox__sq_need_txn(s, "finish");
	if (err || (err = inbox__sq_fixed(s, SQ_FINISH, &stmt)) != 0)
		return err;
	int64_t now = inbox__now_ms();
	inbox__sq_bind_str(stmt, 1, consumer);
	inbox__sq_bind_str(stmt, 2, key);
	sqlite3_bind_text(stmt, 3, inbox__status_name(status), -1,
	                  SQLITE_STATIC);
	sqlite3_bind_int(stmt, 4, attempts);
	bind_opt_ms(stmt, 5, terminal(status), now);
	sqlite3_bind_int64(stmt, 6, now);
	sqlite3_bind_int64(stmt, 7, fence);
	inbox__sq_bind_str(
	    stmt, 8,
	    expect == INBOX_ST_NONE ? NULL : inbox__status_name(expect));
	err = inbox__sq_run(s, stmt, "finish");
	if (!err)
		*rows = sqlite3_changes64(s->db);
	return err;
}

int inbox__sq_extend(inbox_store *st, const char *consumer, const char *key,
                     int64_t fence, int64_t lease_ms, int64_t *rows)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *stmt;
	*rows = 0;
	if (!consumer || !key)
		return bad_arg(s, "extend");
	int err = inbox__sq_need_txn(s, "extend");
	if (err || (err = inbox__sq_fixed(s, SQ_EXTEND, &stmt)) != 0)
		return err;
	int64_t now = inbox__now_ms();
	inbox__sq_bind_str(stmt, 1, consumer);
	inbox__sq_bind_str(stmt, 2, key);
	sqlite3_bind_int64(stmt, 3, now + lease_ms);
	sqlite3_bind_int64(stmt, 4, now);
	sqlite3_bind_int64(stmt, 5, fence);
	err = inbox__sq_run(s, stmt, "extend");
	if (!err)
		*rows = sqlite3_changes64(s->db);
	return err;
}

int inbox__sq_dead_letter(inbox_store *st, const inbox_dead_letter *dl,
                          int64_t *id)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *stmt;
	*id = 0;
	if (!dl || !dl->consumer || (!dl->payload && dl->payload_len))
		return bad_arg(s, "dead letter");
	int err = inbox__sq_need_txn(s, "dead letter");
	if (err || (err = inbox__sq_fixed(s, SQ_DEAD_LETTER, &stmt)) != 0)
		return err;
	inbox__sq_bind_str(stmt, 1, dl->consumer);
	inbox__sq_bind_str(stmt, 2, dl->key);
	inbox__sq_bind_str(stmt, 3, dl->message_id);
	/* A BLOB, byte for byte: the payload may not be valid UTF-8. A NULL
	 * pointer would bind SQL NULL, so an empty payload is a zero blob. */
	if (dl->payload_len)
		sqlite3_bind_blob64(stmt, 4, dl->payload, dl->payload_len,
		                    SQLITE_STATIC);
	else
		sqlite3_bind_zeroblob(stmt, 4, 0);
	inbox__sq_bind_str(stmt, 5, dl->headers);
	inbox__sq_bind_str(stmt, 6, dl->position);
	sqlite3_bind_int(stmt, 7, dl->attempts);
	inbox__sq_bind_str(stmt, 8, dl->reason ? dl->reason : "");
	inbox__sq_bind_str(stmt, 9, dl->fingerprint);
	inbox__sq_bind_str(stmt, 10, dl->stored_fingerprint);
	sqlite3_bind_int64(stmt, 11, inbox__now_ms());
	inbox__sq_bind_str(stmt, 12, dl->dedup_key);
	int rc = sqlite3_step(stmt);
	if (rc == SQLITE_ROW) {
		*id = sqlite3_column_int64(stmt, 0);
		rc = sqlite3_step(stmt);
	}
	if (rc != SQLITE_DONE) {
		*id = 0;
		err = inbox__sq_fail(s, rc, "dead letter");
	}
	inbox__sq_done(stmt);
	return err;
}

int inbox__sq_set_result(inbox_store *st, const char *consumer, const char *key,
                         inbox_outcome outcome, const char *content_type,
                         const void *data, size_t len)
{
	sq_store *s = SQ(st);
	sqlite3_stmt *stmt;
	if (!consumer || !key || (!data && len))
		return bad_arg(s, "set result");
	int err = inbox__sq_need_txn(s, "set result");
	if (err || (err = inbox__sq_fixed(s, SQ_SET_RESULT, &stmt)) != 0)
		return err;
	inbox__sq_bind_str(stmt, 1, consumer);
	inbox__sq_bind_str(stmt, 2, key);
	/* a BLOB, byte for byte; an empty result is a zero blob, not NULL */
	if (!data)
		sqlite3_bind_null(stmt, 3);
	else if (len)
		sqlite3_bind_blob64(stmt, 3, data, len, SQLITE_STATIC);
	else
		sqlite3_bind_zeroblob(stmt, 3, 0);
	inbox__sq_bind_str(stmt, 4, data ? content_type : NULL);
	sqlite3_bind_text(stmt, 5, inbox_outcome_name(outcome), -1,
	                  SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 6, inbox__now_ms());
	return inbox__sq_run(s, stmt, "set result");
}
