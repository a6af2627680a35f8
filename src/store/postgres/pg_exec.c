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
    [PGOP_DEALLOCATE] = "DEALLOCATE ",
};

/* Infrastructure faults, never the statement's or the message's: the
 * transaction is rolled back and run again, uncounted.
 *   08xxx  connection exception
 *   25P03  idle_in_transaction_session_timeout ended the session
 *   25P04  transaction_timeout (PostgreSQL 17)
 *   26000  one of *our* prepared statements is gone (a pooler's DISCARD
 *          ALL, a server that lost it): prepared again on the next try
 *   40001  serialization failure    40P01  deadlock    40003  completion
 *          unknown
 *   53xxx  insufficient resources (disk full, out of memory, too many
 *          connections)
 *   55P03  lock not available: our lock_timeout (a stuck holder), NOWAIT
 *   57014  statement cancelled: our statement_timeout or an operator's
 *          pg_cancel_backend (our own refusal of a COPY FROM, which
 *          also ends in 57014, is reported as 0A000). Decided transient: a
 * database too slow or blocked is not the message's fault; an effect that is
 * always slower than the timeout therefore stalls its consumer (a batch_failed
 * line per try) rather than being dead-lettered — raise statement_timeout or
 * fix the effect. 57P01..57P03, 57P05  shutdown, crash, starting up, idle
 * session 58030  I/O error and any error of severity FATAL or PANIC (the
 * session is ending), and a lost connection whatever its text ("the database
 * system is shutting down"). */
static int transient_state(const char *code)
{
	static const char *const exact[] = {"25P03", "25P04", "40001", "40P01",
	                                    "40003", "55P03", "57014", "57P01",
	                                    "57P02", "57P03", "57P05", "58030"};
	if (strlen(code) != 5)
		return 0;
	if (strncmp(code, "08", 2) == 0 || strncmp(code, "53", 2) == 0)
		return 1;
	for (size_t i = 0; i < sizeof(exact) / sizeof(*exact); i++)
		if (strcmp(code, exact[i]) == 0)
			return 1;
	return 0;
}

/* 26000 about a statement of ours ("inbox__q3", "inbox__h12"), not one a
 * handler's SQL names itself (EXECUTE x: that one is the SQL's bug). */
static int lost_our_statement(const PGresult *r, const char *code)
{
	const char *msg =
	    r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	return code && strcmp(code, "26000") == 0 && msg &&
	       strstr(msg, "\"inbox__") != NULL;
}

int inbox__pg_classify(PGconn *conn, const PGresult *r, const char *sqlstate)
{
	if (!conn || PQstatus(conn) != CONNECTION_OK)
		return INBOX_ERR_TRANSIENT;
	const char *sev =
	    r ? PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED) : NULL;
	if (sev && (strcmp(sev, "FATAL") == 0 || strcmp(sev, "PANIC") == 0))
		return INBOX_ERR_TRANSIENT;
	if (!sqlstate)
		return INBOX_ERR_STORE;
	if (transient_state(sqlstate) || lost_our_statement(r, sqlstate))
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
	if (lost_our_statement(r, code))
		inbox__pg_forget_statements(s);
	return inbox__pg_classify(s->conn, r, code);
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

/* The prepared bits describe connection prepared_conn only. */
static void forget_prepared_if_new_connection(pg_store *s)
{
	if (s->prepared_conn != s->conn_id) {
		s->prepared = 0;
		s->prepared_conn = s->conn_id;
	}
}

static int needs_prepare(pg_store *s, int q)
{
	return q >= 0 && !(s->prepared & (1u << q));
}

static int hs_ready(pg_store *s, int hs)
{
	return s->hcache[hs].ready_conn == s->conn_id;
}

/* The statement at the end of a pipeline, whose result the caller wants:
 * a fixed statement (q), a cached handler statement (hs) or unnamed SQL. */
typedef struct final_stmt {
	int q, hs;
	const char *sql; /* unnamed, when q < 0 and hs < 0; NULL: none */
	int nparams;
	const char *const *values;
	const int *lengths, *formats;
	int parse; /* a Parse precedes it */
} final_stmt;

static int has_stmt(const final_stmt *f)
{
	return f->q >= 0 || f->hs >= 0 || f->sql;
}

static int send_hs(pg_store *s, int hs, int nparams, const char *const *vals,
                   const int *lengths, const int *formats, unsigned char *parse)
{
	char name[32];
	snprintf(name, sizeof(name), "inbox__h%u", s->hcache[hs].id);
	*parse = 0;
	if (!hs_ready(s, hs) && !s->hsent[hs]) {
		if (!PQsendPrepare(s->conn, name, s->hcache[hs].sql, 0, NULL))
			return -1;
		s->hsent[hs] = 1;
		*parse = 1;
	}
	return PQsendQueryPrepared(s->conn, name, nparams, vals, lengths,
	                           formats, 0)
	           ? 0
	           : -1;
}

/* Decode the parameters of a queued statement into s->vals. */
static const char **queued_params(pg_store *s, const pg_pending *e)
{
	if ((size_t)e->nparams > s->vals_cap) {
		const char **v =
		    realloc(s->vals, sizeof(*v) * (size_t)e->nparams);
		if (!v)
			return NULL;
		s->vals = v;
		s->vals_cap = (size_t)e->nparams;
	}
	const char *p = s->args.data + e->params;
	for (int i = 0; i < e->nparams; i++) {
		if (*p++) {
			s->vals[i] = p;
			p += strlen(p) + 1;
		} else {
			s->vals[i] = NULL;
		}
	}
	return s->vals;
}

static int limits_ready(const pg_store *s)
{
	return s->limits_ready_conn == s->conn_id &&
	       s->limits_ready_id == s->limits_id &&
	       s->limits_ready_epoch == s->qepoch;
}

static void limits_set_ready(pg_store *s)
{
	s->limits_ready_conn = s->conn_id;
	s->limits_ready_id = s->limits_id;
	s->limits_ready_epoch = s->qepoch;
}

/* The transaction's limits, as a statement prepared on this connection
 * (its Parse first when it is not yet): it has no parameters, so the
 * server plans it once per connection, not once per transaction. */
static int send_limits(pg_store *s, pg_pending *e)
{
	char name[48];
	snprintf(name, sizeof(name), "inbox__l%u_%u", s->limits_id, s->qepoch);
	if (!limits_ready(s)) {
		if (!PQsendPrepare(s->conn, name, s->limits_sql, 0, NULL))
			return -1;
		e->parse = 1;
	}
	return PQsendQueryPrepared(s->conn, name, 0, NULL, NULL, NULL, 0) ? 0
	                                                                  : -1;
}

static int send_pending(pg_store *s, pg_pending *e)
{
	e->parse = 0;
	if (!e->stmt && e->op == PGOP_LIMITS)
		return send_limits(s, e);
	if (!e->stmt) {
		if (e->op != PGOP_DEALLOCATE)
			return PQsendQueryParams(s->conn, op_sql[e->op], 0,
			                         NULL, NULL, NULL, NULL, 0)
			           ? 0
			           : -1;
		char sql[64];
		snprintf(sql, sizeof(sql), "%s%s", op_sql[e->op],
		         s->args.data + e->params);
		return PQsendQueryParams(s->conn, sql, 0, NULL, NULL, NULL,
		                         NULL, 0)
		           ? 0
		           : -1;
	}
	const char **vals = queued_params(s, e);
	if (!vals && e->nparams > 0)
		return -2; /* out of memory, not libpq */
	if (e->hs >= 0)
		return send_hs(s, e->hs, e->nparams, vals, NULL, NULL,
		               &e->parse);
	return PQsendQueryParams(s->conn, s->args.data + e->sql, e->nparams,
	                         NULL, vals, NULL, NULL, 0)
	           ? 0
	           : -1;
}

/* Remember what a command just sent stands for (collect reads them in
 * this order). 0 or -2 (no memory). */
static int note_sent(pg_store *s, int hs, int slot, int parse, int stmt)
{
	if (s->nsent == s->sent_cap) {
		int cap = s->sent_cap ? s->sent_cap * 2 : 64;
		pg_sent *p = realloc(s->sent, sizeof(*p) * (size_t)cap);
		if (!p)
			return -2;
		s->sent = p;
		s->sent_cap = cap;
	}
	s->sent[s->nsent++] = (pg_sent){
	    hs, (signed char)slot, (unsigned char)parse, (unsigned char)stmt};
	return 0;
}

static int merge_ready(const pg_store *s, const pg_hstmt *h, int slot)
{
	return h->m.ready_id == h->id && h->m.ready[slot] == s->conn_id;
}

static void merge_set_ready(pg_store *s, pg_hstmt *h, int slot)
{
	if (h->m.ready_id != h->id) {
		memset(h->m.ready, 0, sizeof(h->m.ready));
		h->m.ready_id = h->id;
	}
	h->m.ready[slot] = s->conn_id;
}

/* Execute merge slot `slot` of cached statement hs (its Parse first when
 * it is not prepared on this connection yet). 0, -1 (libpq refused) or
 * -2 (out of memory). */
static int send_merge_slot(pg_store *s, int hs, int slot, int nparams,
                           const char *const *vals)
{
	pg_hstmt *h = &s->hcache[hs];
	char name[48];
	snprintf(name, sizeof(name), "inbox__h%u_%d", h->id, slot);
	int parse = 0;
	if (!merge_ready(s, h, slot) && !(s->msent[hs] & (1u << slot))) {
		if (inbox__pg_merge_sql(h->sql, &h->m, slot, &s->mtext) < 0)
			return -2;
		if (!PQsendPrepare(s->conn, name, s->mtext.data, 0, NULL))
			return -1;
		s->msent[hs] |= (uint16_t)(1u << slot);
		parse = 1;
	}
	if (!PQsendQueryPrepared(s->conn, name, nparams, vals, NULL, NULL, 0))
		return -1;
	return note_sent(s, hs, slot, parse, 1);
}

static int same_stmt(const pg_pending *a, const pg_pending *b)
{
	return b->stmt && b->hs == a->hs && b->nparams == a->nparams;
}

/* Decode the parameters of queued statement e into dst. */
static void decode_params(const pg_store *s, const pg_pending *e,
                          const char **dst)
{
	const char *p = s->args.data + e->params;
	for (int i = 0; i < e->nparams; i++) {
		if (*p++) {
			dst[i] = p;
			p += strlen(p) + 1;
		} else {
			dst[i] = NULL;
		}
	}
}

/* Send the run of executions of one mergeable statement that starts at
 * queue entry i as multi-row INSERTs (pg_merge.c), after the table's
 * LOCK and guard. Returns the entries it sent (0: none, it is no such
 * run; a last single one is left to the caller), -1 (libpq refused) or
 * -2 (out of memory). */
static int send_merged(pg_store *s, int i)
{
	const pg_pending *e = &s->pending[i];
	if (!e->stmt || e->hs < 0)
		return 0;
	pg_hstmt *h = &s->hcache[e->hs];
	int m = h->m.nparams;
	if (!m || h->m.refused || e->nparams != m)
		return 0;
	int run = 1;
	while (i + run < s->npending && same_stmt(e, &s->pending[i + run]))
		run++;
	if (run < 2 || inbox__pg_merge_slot_for(&h->m, run) < 0)
		return 0;
	int hs = e->hs;
	if (!s->mguard[hs]) {
		inbox__buf name = INBOX__BUF_INIT;
		int rc = inbox__buf_append(&name, h->sql + h->m.target_at,
		                           h->m.target_len) < 0
		             ? -2
		             : 0;
		const char *v[1] = {name.data};
		if (rc == 0)
			rc = send_merge_slot(s, hs, PG_MERGE_LOCK, 0, NULL);
		if (rc == 0)
			rc = send_merge_slot(s, hs, PG_MERGE_GUARD, 1, v);
		inbox__buf_free(&name);
		if (rc < 0)
			return rc;
		s->mguard[hs] = 1;
	}
	int done = 0, slot;
	while ((slot = inbox__pg_merge_slot_for(&h->m, run - done)) >= 0) {
		int rows = inbox__pg_merge_rows(&h->m, slot);
		size_t need = (size_t)rows * (size_t)m;
		if (need > s->vals_cap) {
			const char **v = realloc(s->vals, sizeof(*v) * need);
			if (!v)
				return -2;
			s->vals = v;
			s->vals_cap = need;
		}
		for (int r = 0; r < rows; r++)
			decode_params(s, &s->pending[i + done + r],
			              s->vals + (size_t)r * (size_t)m);
		int rc = send_merge_slot(s, hs, slot, (int)need, s->vals);
		if (rc < 0)
			return rc;
		done += rows;
	}
	return done;
}

/* Send the whole pipeline: the queue, then the final statement (with its
 * Parse when not prepared yet), then Sync. 0, -1 (libpq refused) or -2
 * (out of memory). */
static int send_pipeline(pg_store *s, final_stmt *f)
{
	memset(s->hsent, 0, sizeof(s->hsent));
	memset(s->msent, 0, sizeof(s->msent));
	memset(s->mguard, 0, sizeof(s->mguard));
	s->nsent = 0;
	if (inbox__pg_queue_fold(s) < 0)
		return -2;
	for (int i = 0; i < s->npending;) {
		int merged = send_merged(s, i);
		if (merged < 0)
			return merged;
		if (merged > 0) {
			i += merged;
			continue;
		}
		pg_pending *e = &s->pending[i++];
		int rc = send_pending(s, e);
		int limits = !e->stmt && e->op == PGOP_LIMITS;
		if (rc == 0)
			rc = note_sent(s, e->stmt ? e->hs : -1,
			               limits ? PG_SENT_LIMITS : -1, e->parse,
			               e->stmt);
		if (rc < 0)
			return rc;
	}
	f->parse = 0;
	if (f->q >= 0) {
		char name[32];
		inbox__pg_stmt_name(s, f->q, name, sizeof(name));
		if (needs_prepare(s, f->q)) {
			if (!PQsendPrepare(s->conn, name, s->sql[f->q],
			                   inbox__pg_qdefs[f->q].nparams,
			                   inbox__pg_qdefs[f->q].types))
				return -1;
			f->parse = 1;
		}
		if (!PQsendQueryPrepared(s->conn, name, f->nparams, f->values,
		                         f->lengths, f->formats, 0))
			return -1;
	} else if (f->hs >= 0) {
		unsigned char parse;
		if (send_hs(s, f->hs, f->nparams, f->values, f->lengths,
		            f->formats, &parse) < 0)
			return -1;
		f->parse = parse;
	} else if (f->sql) {
		if (!PQsendQueryParams(s->conn, f->sql, f->nparams, NULL,
		                       f->values, f->lengths, f->formats, 0))
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

/* What came back from a pipeline. */
typedef struct collected {
	PGresult *last;   /* the final statement's result, if it succeeded */
	PGresult *err;    /* the first failure */
	int err_deferred; /* ... was a queued handler statement */
	int err_hs;       /* ... its cache slot, or -1 */
	int err_slot;     /* ... the merge slot it was, or -1 */
	int copied;
	int lost; /* the connection went away mid-read */
} collected;

/* Read one command's result (after its Parse, if any): a queued entry or
 * a merge's statement (slot >= 0) of cached statement hs, or the final
 * statement. Returns the result unless it was the first failure (then
 * kept in c->err) or not wanted (cleared). */
static PGresult *read_one(pg_store *s, collected *c, int parse, int hs,
                          int slot, int deferred, int want)
{
	for (int k = parse ? 0 : 1; k < 2; k++) {
		PGresult *r = next_result(s, &c->copied);
		if (!r) {
			c->lost = 1;
			return NULL;
		}
		ExecStatusType t = PQresultStatus(r);
		if (k == 0 && t == PGRES_COMMAND_OK && hs >= 0) {
			if (slot < 0)
				s->hcache[hs].ready_conn = s->conn_id;
			else
				merge_set_ready(s, &s->hcache[hs], slot);
		}
		if (k == 0 && t == PGRES_COMMAND_OK && slot == PG_SENT_LIMITS)
			limits_set_ready(s);
		/* A merge the server cannot even prepare is not tried again. */
		if (k == 0 && t == PGRES_FATAL_ERROR && hs >= 0 && slot >= 0)
			s->hcache[hs].m.refused = 1;
		if (!ok_status(t) && t != PGRES_PIPELINE_ABORTED && !c->err) {
			c->err = r;
			c->err_deferred = deferred;
			c->err_hs = hs;
			c->err_slot = slot;
			continue;
		}
		if (k == 1 && want && ok_status(t))
			return r;
		PQclear(r);
	}
	return NULL;
}

/* Collect every result of the pipeline, then the sync point. */
static void collect(pg_store *s, const final_stmt *f, collected *c)
{
	for (int i = 0; i < s->nsent && !c->lost; i++) {
		const pg_sent *e = &s->sent[i];
		read_one(s, c, e->parse, e->hs, e->slot, e->stmt, 0);
	}
	if (has_stmt(f) && !c->lost) {
		/* A fixed statement's Parse: prepared even if a later
		 * command failed (statements outlive transactions). */
		if (f->q >= 0 && f->parse) {
			PGresult *r = next_result(s, &c->copied);
			if (!r) {
				c->lost = 1;
			} else {
				ExecStatusType t = PQresultStatus(r);
				if (t == PGRES_COMMAND_OK)
					s->prepared |= 1u << f->q;
				if (!ok_status(t) &&
				    t != PGRES_PIPELINE_ABORTED && !c->err) {
					c->err = r;
					c->err_hs = -1;
				} else {
					PQclear(r);
				}
			}
			if (!c->lost)
				c->last = read_one(s, c, 0, -1, -1, 0, 1);
		} else {
			c->last = read_one(s, c, f->parse, f->hs, -1, 0, 1);
		}
	}
	if (PQstatus(s->conn) == CONNECTION_OK)
		PQclear(PQgetResult(s->conn)); /* PGRES_PIPELINE_SYNC */
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

/* A queued handler statement failed: the transaction is lost. Unless
 * the cause is transient (a lost connection, a deadlock: the batch is
 * retried as such), the batch must run again without deferring. */
static int deferred_failure(pg_store *s, int rc)
{
	if (rc != INBOX_ERR_TRANSIENT) {
		rc = INBOX__ERR_REDO;
		s->sync_next = 1;
	}
	s->defer_failed = rc;
	return rc;
}

static PGresult *run_pipelined(pg_store *s, final_stmt *f, const char *what,
                               int *rc)
{
	collected c = {NULL, NULL, 0, -1, -1, 0, 0};
	if (!PQenterPipelineMode(s->conn)) {
		inbox__pg_queue_clear(s);
		*rc = inbox__pg_fail(s, NULL, what);
		return NULL;
	}
	int sent = send_pipeline(s, f);
	if (sent == 0)
		collect(s, f, &c);
	inbox__pg_queue_clear(s);
	if (c.copied && !c.err) {
		PQclear(c.last);
		c.last = NULL;
		c.err = PQmakeEmptyPGresult(s->conn, PGRES_FATAL_ERROR);
	}
	if (c.err || sent < 0 || c.lost || (has_stmt(f) && !c.last)) {
		*rc = inbox__pg_fail(s, c.err, c.err_deferred ? "exec" : what);
		if (sent == -2) {
			/* What was sent ran; the caller rolls back. */
			inbox__store_seterr(&s->base, "", "%s: out of memory",
			                    what);
			*rc = INBOX_ERR_NOMEM;
		}
		/* The guard refused the merge (or the table cannot be
		 * locked): the statement runs unmerged from now on. */
		if (c.err && c.err_hs >= 0 &&
		    (c.err_slot == PG_MERGE_LOCK ||
		     c.err_slot == PG_MERGE_GUARD))
			s->hcache[c.err_hs].m.refused = 1;
		if (c.err && c.err_hs >= 0)
			inbox__pg_hstmt_failed(
			    s, c.err_hs,
			    PQresultErrorField(c.err, PG_DIAG_SQLSTATE));
		if (c.copied) {
			inbox__store_seterr(&s->base, "0A000",
			                    "%s: COPY is not supported", what);
			*rc = INBOX_ERR_STORE;
		}
		if (c.err_deferred)
			*rc = deferred_failure(s, *rc);
		PQclear(c.err);
		PQclear(c.last);
		leave_pipeline(s, sent == 0);
		return NULL;
	}
	leave_pipeline(s, 1);
	*rc = INBOX_OK;
	if (!c.last)
		c.last = PQmakeEmptyPGresult(s->conn, PGRES_COMMAND_OK);
	return c.last;
}

static PGresult *run_direct(pg_store *s, const final_stmt *f, const char *what,
                            int *rc)
{
	PGresult *r;
	char name[32];
	if (f->q >= 0) {
		inbox__pg_stmt_name(s, f->q, name, sizeof(name));
		r = PQexecPrepared(s->conn, name, f->nparams, f->values,
		                   f->lengths, f->formats, 0);
	} else if (f->hs >= 0) {
		snprintf(name, sizeof(name), "inbox__h%u", s->hcache[f->hs].id);
		r = PQexecPrepared(s->conn, name, f->nparams, f->values,
		                   f->lengths, f->formats, 0);
	} else {
		r = PQexecParams(s->conn, f->sql, f->nparams, NULL, f->values,
		                 f->lengths, f->formats, 0);
	}
	if (is_copy(r)) {
		/* Refused by us (a COPY FROM ends with 57014, which is not a
		 * timeout here): the statement's fault, unless the connection
		 * went away meanwhile. */
		r = refuse_copy(s, r);
		if (PQstatus(s->conn) == CONNECTION_OK) {
			PQclear(r);
			inbox__store_seterr(&s->base, "0A000",
			                    "%s: COPY is not supported", what);
			*rc = INBOX_ERR_STORE;
			return NULL;
		}
	}
	if (!r || !ok_status(PQresultStatus(r))) {
		*rc = inbox__pg_fail(s, r, what);
		if (r && f->hs >= 0)
			inbox__pg_hstmt_failed(
			    s, f->hs, PQresultErrorField(r, PG_DIAG_SQLSTATE));
		PQclear(r);
		return NULL;
	}
	*rc = INBOX_OK;
	return r;
}

static PGresult *run(pg_store *s, final_stmt *f, const char *what, int *rc)
{
	/* The transaction lost its deferred work: nothing more can run in
	 * it; the caller rolls back (and runs the batch again). */
	if (s->defer_failed && s->base.in_txn) {
		*rc = s->defer_failed;
		inbox__pg_queue_clear(s);
		return NULL;
	}
	/* Outside a transaction nothing is lost by reconnecting; inside one,
	 * only begin() may (the caller must see the failure first). */
	if (!s->base.in_txn)
		inbox__pg_ensure_connected(s);
	forget_prepared_if_new_connection(s);
	if (s->npending > 0 || needs_prepare(s, f->q) ||
	    (f->hs >= 0 && !hs_ready(s, f->hs)))
		return run_pipelined(s, f, what, rc);
	if (!has_stmt(f)) {
		*rc = INBOX_OK;
		return PQmakeEmptyPGresult(s->conn, PGRES_COMMAND_OK);
	}
	return run_direct(s, f, what, rc);
}

PGresult *inbox__pg_run(pg_store *s, int q, const char *sql, int nparams,
                        const char *const *values, const int *lengths,
                        const int *formats, const char *what, int *rc)
{
	final_stmt f = {q, -1, sql, nparams, values, lengths, formats, 0};
	return run(s, &f, what, rc);
}

PGresult *inbox__pg_run_sql(pg_store *s, const char *sql, int nparams,
                            const char *const *values, const char *what,
                            int *rc)
{
	/* Only a transaction's statements are worth preparing: outside one
	 * they are DDL and tools, run once. */
	int hs = s->base.in_txn ? inbox__pg_hstmt(s, sql) : -1;
	final_stmt f = {-1, hs, sql, nparams, values, NULL, NULL, 0};
	return run(s, &f, what, rc);
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

int inbox__pg_simple(pg_store *s, const char *sql, const char *param,
                     PGresult **out, const char *what)
{
	PGresult *r =
	    param ? PQexecParams(s->conn, sql, 1, NULL, &param, NULL, NULL, 0)
	          : PQexec(s->conn, sql);
	ExecStatusType t = PQresultStatus(r);
	if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK) {
		int rc = inbox__pg_fail(s, r, what);
		PQclear(r);
		return rc;
	}
	if (out)
		*out = r;
	else
		PQclear(r);
	return INBOX_OK;
}
