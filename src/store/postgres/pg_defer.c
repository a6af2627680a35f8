/* The PostgreSQL store's queue of deferred commands and its cache of
 * prepared handler statements (see pg_store.h for why both exist). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_store.h"

void inbox__pg_queue_clear(pg_store *s)
{
	s->npending = 0;
	s->pending_stmts = 0;
	inbox__buf_reset(&s->args);
}

static pg_pending *push(pg_store *s)
{
	if (s->npending == s->pending_cap) {
		int cap = s->pending_cap ? s->pending_cap * 2 : 16;
		pg_pending *p = realloc(s->pending, sizeof(*p) * (size_t)cap);
		if (!p)
			return NULL;
		s->pending = p;
		s->pending_cap = cap;
	}
	pg_pending *e = &s->pending[s->npending++];
	memset(e, 0, sizeof(*e));
	e->hs = -1;
	return e;
}

static int nomem(pg_store *s)
{
	inbox__store_seterr(&s->base, "", "out of memory queueing a statement");
	return INBOX_ERR_NOMEM;
}

/* Send the queue before it grows past its limits. */
static int make_room(pg_store *s, size_t bytes)
{
	if (s->npending < PG_MAX_PENDING && s->args.len + bytes < PG_MAX_ARGS)
		return INBOX_OK;
	return inbox__pg_flush(s);
}

int inbox__pg_queue_op(pg_store *s, enum pg_op op)
{
	int rc = make_room(s, 0);
	if (rc < 0)
		return rc;
	pg_pending *e = push(s);
	if (!e)
		return nomem(s);
	e->op = (unsigned char)op;
	return INBOX_OK;
}

static int put_str(inbox__buf *b, const char *v)
{
	return inbox__buf_append(b, v, strlen(v) + 1);
}

/* Queue a statement, prepared (cached) or not. */
static int queue(pg_store *s, const char *sql, int nparams,
                 const char *const *params, int cached)
{
	size_t bytes = strlen(sql) + 1;
	for (int i = 0; i < nparams; i++)
		bytes += 1 + (params[i] ? strlen(params[i]) + 1 : 0);
	int rc = make_room(s, bytes);
	if (rc < 0)
		return rc;
	int hs = cached ? inbox__pg_hstmt(s, sql) : -1;
	size_t mark = s->args.len;
	pg_pending *e = push(s);
	if (!e)
		return nomem(s);
	e->stmt = 1;
	e->hs = hs;
	e->nparams = nparams;
	e->sql = s->args.len;
	int bad = hs < 0 ? put_str(&s->args, sql) : 0;
	e->params = s->args.len;
	for (int i = 0; i < nparams && !bad; i++) {
		bad |= inbox__buf_putc(&s->args, params[i] ? 1 : 0);
		if (params[i])
			bad |= put_str(&s->args, params[i]);
	}
	if (bad) {
		s->npending--;
		s->args.len = mark;
		return nomem(s);
	}
	s->pending_stmts++;
	return INBOX_OK;
}

int inbox__pg_queue_stmt(pg_store *s, const char *sql, int nparams,
                         const char *const *params)
{
	return queue(s, sql, nparams, params, 1);
}

/* Never prepared: planned for the arrays it has, against the table as
 * it is now. A generic plan, made once while the inbox is still small
 * (a hash join over a scan of every row), would be kept as the inbox
 * grows, and the statement would cost a scan of the table per batch;
 * planned at every execution, it is an index probe per record, for
 * about a tenth of a millisecond of planning per batch. */
int inbox__pg_queue_result(pg_store *s, const char *const *params)
{
	int rc = queue(s, s->sql[PGQ_SET_RESULT], PG_RESULT_PARAMS, params, 0);
	if (rc == INBOX_OK)
		s->pending[s->npending - 1].result = 1;
	return rc;
}

/* Parameter j of a queued stored result: a one-element array literal
 * (inbox__pg_set_result makes every one; a NULL would be the SQL NULL). */
static const char *param_at(const pg_store *s, const pg_pending *e, int j)
{
	const char *p = s->args.data + e->params;
	for (int i = 0; i < j; i++)
		p += *p ? strlen(p + 1) + 2 : 1;
	return *p ? p + 1 : "{NULL}";
}

/* A batch stores a result per message: sent one by one, each is an
 * UPDATE the server binds, plans and runs on its own, and it stands
 * between the handlers' INSERTs, so that those are never consecutive
 * and never merged (pg_merge.c). Folded, the batch's results are one
 * UPDATE over arrays, after every statement that was queued before the
 * last of them. A record's result may so be written after statements
 * queued later than it: none of ours touches the record again in the
 * transaction, and a handler's own statement that read the inbox table
 * would see it at the commit, not before. */
int inbox__pg_queue_fold(pg_store *s)
{
	int n = 0, last = -1;
	for (int i = 0; i < s->npending; i++)
		if (s->pending[i].result) {
			n++;
			last = i;
		}
	if (n < 2)
		return 0;
	/* Each array: the elements of every one-element literal "{e}". */
	inbox__buf *b = &s->fold;
	inbox__buf_reset(b);
	int bad = 0;
	for (int j = 0; j < PG_RESULT_PARAMS && !bad; j++) {
		bad |= inbox__buf_putc(b, 1) | inbox__buf_putc(b, '{');
		int first = 1;
		for (int i = 0; i <= last && !bad; i++) {
			if (!s->pending[i].result)
				continue;
			const char *v = param_at(s, &s->pending[i], j);
			size_t len = strlen(v);
			if (!first)
				bad |= inbox__buf_putc(b, ',');
			bad |= inbox__buf_append(b, v + 1, len - 2);
			first = 0;
		}
		bad |= inbox__buf_putc(b, '}') | inbox__buf_putc(b, '\0');
	}
	size_t at = s->args.len;
	if (bad || inbox__buf_append(&s->args, b->data, b->len) < 0) {
		s->args.len = at;
		return -2;
	}
	s->pending[last].params = at;
	int w = 0;
	for (int i = 0; i < s->npending; i++)
		if (!s->pending[i].result || i == last)
			s->pending[w++] = s->pending[i];
	s->npending = w;
	s->pending_stmts -= n - 1;
	return 0;
}

/* ---- the handler statement cache ------------------------------------- */

static int queued(const pg_store *s, int hs)
{
	for (int i = 0; i < s->npending; i++)
		if (s->pending[i].stmt && s->pending[i].hs == hs)
			return 1;
	return 0;
}

/* Forget slot `hs`; a statement prepared on this connection is
 * deallocated in the next pipeline (in the open transaction, where it
 * cannot fail unless the transaction already has). */
static int deallocate(pg_store *s, const char *name)
{
	pg_pending *e = push(s);
	if (!e)
		return -1;
	e->op = PGOP_DEALLOCATE;
	e->params = s->args.len;
	if (put_str(&s->args, name) < 0) {
		s->npending--;
		return -1;
	}
	return 0;
}

static int evict(pg_store *s, int hs)
{
	pg_hstmt *h = &s->hcache[hs];
	if (s->base.in_txn) {
		char name[48];
		if (h->ready_conn && h->ready_conn == s->conn_id) {
			snprintf(name, sizeof(name), "inbox__h%u", h->id);
			if (deallocate(s, name) < 0)
				return -1;
		}
		for (int k = 0; k < PG_MERGE_SLOTS; k++) {
			if (h->m.ready_id != h->id ||
			    h->m.ready[k] != s->conn_id)
				continue;
			snprintf(name, sizeof(name), "inbox__h%u_%d", h->id, k);
			if (deallocate(s, name) < 0)
				return -1;
		}
	}
	free(h->sql);
	memset(h, 0, sizeof(*h));
	return 0;
}

int inbox__pg_hstmt(pg_store *s, const char *sql)
{
	uint64_t hash = inbox__fnv1a(INBOX__FNV_INIT, sql, strlen(sql));
	int victim = -1;
	s->htick++;
	for (int i = 0; i < PG_HCACHE; i++) {
		pg_hstmt *h = &s->hcache[i];
		if (h->sql && h->hash == hash && strcmp(h->sql, sql) == 0) {
			h->used = s->htick;
			return i;
		}
		if (!h->sql) {
			if (victim < 0 || s->hcache[victim].sql)
				victim = i;
		} else if ((victim < 0 || (s->hcache[victim].sql &&
		                           h->used < s->hcache[victim].used)) &&
		           !queued(s, i)) {
			victim = i;
		}
	}
	if (victim < 0)
		return -1;
	char *copy = strdup(sql);
	if (!copy)
		return -1;
	if (s->hcache[victim].sql && evict(s, victim) < 0) {
		free(copy);
		return -1;
	}
	pg_hstmt *h = &s->hcache[victim];
	h->sql = copy;
	h->hash = hash;
	h->id = ++s->hnext;
	h->ready_conn = 0;
	h->used = s->htick;
	inbox__pg_merge_parse(copy, &h->m);
	return victim;
}

/* A cached statement that failed in a way a new preparation may cure (a
 * table changed under a plan that returns rows): drop it, without
 * DEALLOCATE (the transaction has failed; the name is never reused). */
void inbox__pg_hstmt_failed(pg_store *s, int hs, const char *sqlstate)
{
	if (hs < 0 || !sqlstate || strcmp(sqlstate, "0A000") != 0)
		return;
	free(s->hcache[hs].sql);
	memset(&s->hcache[hs], 0, sizeof(s->hcache[hs]));
}

void inbox__pg_hcache_free(pg_store *s)
{
	for (int i = 0; i < PG_HCACHE; i++) {
		free(s->hcache[i].sql);
		s->hcache[i].sql = NULL;
	}
	free(s->pending);
	s->pending = NULL;
	s->npending = s->pending_cap = 0;
	inbox__buf_free(&s->args);
	free(s->vals);
	s->vals = NULL;
	s->vals_cap = 0;
	free(s->sent);
	s->sent = NULL;
	s->nsent = s->sent_cap = 0;
	inbox__buf_free(&s->mtext);
	inbox__buf_free(&s->fold);
	inbox__buf_free(&s->lit);
}
