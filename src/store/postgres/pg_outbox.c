/*
 * The outbox on PostgreSQL.
 *
 * A claim is one statement: the due rows are picked with FOR UPDATE SKIP
 * LOCKED, so concurrent dispatchers never wait for each other nor take the
 * same row — a row another claim holds (not yet committed) is skipped, and
 * once that claim commits the row is in_flight and no longer due. The
 * lease lives in the row (lease_until, and next_attempt_at = lease_until
 * so one partial index finds both the due rows and the expired leases);
 * every completion names the claim's fencing token.
 *
 * add, claim and finish run once per effect: they are among the store's
 * prepared statements (PGQ_OUTBOX_*, built at open by pg_sql.c); the
 * operators' counts and purge are expanded per call. Parameters are cast
 * explicitly because they are sent untyped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox.h"
#include "store/postgres/pg_outbox.h"

#define UNDONE "('pending', 'in_flight', 'failed', 'unknown')"

/* Longest delay accepted (ms): beyond it, now() + delay overflows. */
#define MAX_DELAY_MS 1000000000000LL

static int64_t clamp_delay(int64_t ms)
{
	return ms < 0 ? 0 : ms > MAX_DELAY_MS ? MAX_DELAY_MS : ms;
}

/* tmpl expanded (see inbox__pg_expand). */
static int build(pg_store *s, const char *tmpl, inbox__buf *out)
{
	if (inbox__pg_expand(s, tmpl, out) == 0)
		return INBOX_OK;
	inbox__store_seterr(&s->base, "", "outbox: out of memory");
	return INBOX_ERR_NOMEM;
}

/* Run tmpl; the result (or NULL with *rc) like inbox__pg_run. */
static PGresult *run(pg_store *s, const char *tmpl, int n,
                     const char *const *vals, const int *lens, const int *fmts,
                     const char *what, int *rc)
{
	inbox__buf b = INBOX__BUF_INIT;
	if ((*rc = build(s, tmpl, &b)) < 0)
		return NULL;
	PGresult *r =
	    inbox__pg_run(s, -1, b.data, n, vals, lens, fmts, what, rc);
	inbox__buf_free(&b);
	return r;
}

static int need_txn(pg_store *s, const char *what)
{
	if (s->base.in_txn)
		return INBOX_OK;
	inbox__store_seterr(&s->base, "", "%s: no transaction is open", what);
	return INBOX_ERR_STATE;
}

/* clang-format off */
static const char schema_v2[] =
	"CREATE TABLE IF NOT EXISTS {O} ("
	" id bigserial PRIMARY KEY,"
	" consumer text NOT NULL,"
	" key text NOT NULL,"
	" step text NOT NULL,"
	" idempotency_key text NOT NULL,"
	" kind text NOT NULL,"
	" method text NOT NULL,"
	" target text NOT NULL,"
	" headers text,"
	" key_header text,"
	" body bytea NOT NULL,"
	" idempotent boolean NOT NULL,"
	" reconcile_url text,"
	" max_attempts int NOT NULL DEFAULT 0,"
	" state text NOT NULL CHECK (state IN ('pending', 'in_flight',"
	"  'done', 'failed', 'unknown', 'dead')),"
	" attempts int NOT NULL DEFAULT 0,"
	" reconciliations int NOT NULL DEFAULT 0,"
	" fence bigint NOT NULL DEFAULT 0,"
	" next_attempt_at timestamptz NOT NULL DEFAULT now(),"
	" lease_until timestamptz,"
	" last_status int,"
	" last_error text,"
	" response bytea,"
	" created_at timestamptz NOT NULL DEFAULT now(),"
	" updated_at timestamptz NOT NULL DEFAULT now(),"
	" done_at timestamptz,"
	" UNIQUE (consumer, key, step));\n"
	"CREATE INDEX IF NOT EXISTS \"{P}outbox_due_idx\""
	" ON {O} (next_attempt_at) WHERE state IN " UNDONE ";\n"
	"CREATE INDEX IF NOT EXISTS \"{P}outbox_state_idx\""
	" ON {O} (state, consumer, created_at) WHERE state <> 'done';\n"
	"CREATE INDEX IF NOT EXISTS \"{P}outbox_done_idx\""
	" ON {O} (done_at) WHERE state = 'done';\n";
/* clang-format on */

int inbox__pg_outbox_migrate(pg_store *s)
{
	inbox__buf b = INBOX__BUF_INIT;
	int rc = build(s, schema_v2, &b);
	if (rc < 0)
		return rc;
	/* Several statements: the simple query protocol (PQexec). */
	PGresult *r = PQexec(s->conn, b.data);
	inbox__buf_free(&b);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = inbox__pg_fail(s, r, "migrate (outbox)");
	PQclear(r);
	return rc;
}

const char inbox__pg_outbox_add_sql[] =
    "INSERT INTO {O} (consumer, key, step, idempotency_key, kind,"
    " method, target, headers, key_header, body, idempotent,"
    " reconcile_url, max_attempts, state)"
    " VALUES ($1::text, $2::text, $3::text, $4::text, $5::text,"
    " $6::text, $7::text, $8::text, $9::text, $10::bytea,"
    " $11::boolean, $12::text, $13::int, 'pending')"
    " ON CONFLICT (consumer, key, step) DO NOTHING";

int inbox__pg_outbox_add(inbox_store *st, const inbox_outbox_item *row,
                         int *added)
{
	pg_store *s = (pg_store *)st;
	*added = 0;
	int rc = need_txn(s, "outbox add");
	if (rc < 0)
		return rc;
	char max[16];
	snprintf(max, sizeof(max), "%d", (int)row->max_attempts);
	const char *vals[13] = {row->consumer,
	                        row->key,
	                        row->step,
	                        row->idempotency_key,
	                        row->kind,
	                        row->method,
	                        row->url,
	                        row->headers,
	                        row->key_header,
	                        row->body ? row->body : "",
	                        row->idempotent ? "t" : "f",
	                        row->reconcile_url,
	                        max};
	int lens[13] = {0}, fmts[13] = {0};
	lens[9] = (int)row->body_len;
	fmts[9] = 1; /* the body travels as bytes */
	PGresult *r = inbox__pg_run(s, PGQ_OUTBOX_ADD, NULL, 13, vals, lens,
	                            fmts, "outbox add", &rc);
	if (!r)
		return rc;
	*added = strtol(PQcmdTuples(r), NULL, 10) > 0;
	PQclear(r);
	return INBOX_OK;
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

static const char *val(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}

/* Give one claimed row to fn; the body is decoded from bytea's text
 * form. 0, or -1 (no memory, or fn refused). */
static int emit(const PGresult *r, int i,
                int (*fn)(const inbox_outbox_item *row, void *payload),
                void *payload)
{
	inbox_outbox_item it;
	memset(&it, 0, sizeof(it));
	it.id = inbox__pg_int(r, i, C_ID);
	it.consumer = val(r, i, C_CONSUMER);
	it.key = val(r, i, C_KEY);
	it.step = val(r, i, C_STEP);
	it.idempotency_key = val(r, i, C_IKEY);
	it.kind = val(r, i, C_KIND);
	it.method = val(r, i, C_METHOD);
	it.url = val(r, i, C_TARGET);
	it.headers = val(r, i, C_HEADERS);
	it.key_header = val(r, i, C_KEY_HEADER);
	size_t blen = 0;
	unsigned char *body = PQunescapeBytea(
	    (const unsigned char *)PQgetvalue(r, i, C_BODY), &blen);
	if (!body)
		return -1;
	it.body = (const char *)body;
	it.body_len = blen;
	it.idempotent = PQgetvalue(r, i, C_IDEMPOTENT)[0] == 't';
	it.reconcile_url = val(r, i, C_RECONCILE);
	it.max_attempts = (int32_t)inbox__pg_int(r, i, C_MAX_ATTEMPTS);
	it.attempts = (int32_t)inbox__pg_int(r, i, C_ATTEMPTS);
	it.fence = inbox__pg_int(r, i, C_FENCE);
	it.reconciliations = (int32_t)inbox__pg_int(r, i, C_RECONCILIATIONS);
	it.last_status = (int)inbox__pg_int(r, i, C_LAST_STATUS);
	it.state = inbox__outbox_state_parse(val(r, i, C_OLD_STATE));
	int bad = fn(&it, payload);
	PQfreemem(body);
	return bad ? -1 : 0;
}

const char inbox__pg_outbox_claim_sql[] =
    "WITH due AS ("
    " SELECT id, state FROM {O}"
    " WHERE state IN " UNDONE " AND next_attempt_at <= now()"
    " AND ($1::text IS NULL OR consumer = $1::text)"
    " ORDER BY next_attempt_at, id LIMIT $2::int"
    " FOR UPDATE SKIP LOCKED)"
    " UPDATE {O} o SET state = 'in_flight',"
    " attempts = o.attempts + 1, fence = o.fence + 1,"
    " lease_until = now() + $3::bigint * interval '1 millisecond',"
    " next_attempt_at = now() + $3::bigint * interval '1 millisecond',"
    " updated_at = now()"
    " FROM due WHERE o.id = due.id"
    " RETURNING o.id, o.consumer, o.key, o.step, o.idempotency_key,"
    " o.kind, o.method, o.target, o.headers, o.key_header, o.body,"
    " o.idempotent, o.reconcile_url, o.max_attempts, o.attempts,"
    " o.fence, o.reconciliations, o.last_status, due.state";

int inbox__pg_outbox_claim(
    inbox_store *st, const char *consumer, int limit, int64_t lease_ms,
    int (*fn)(const inbox_outbox_item *row, void *payload), void *payload)
{
	pg_store *s = (pg_store *)st;
	int rc = need_txn(s, "outbox claim");
	if (rc < 0)
		return rc;
	char lim[16], lease[24];
	snprintf(lim, sizeof(lim), "%d", limit > 0 ? limit : 1);
	snprintf(lease, sizeof(lease), "%lld",
	         (long long)clamp_delay(lease_ms));
	const char *vals[3] = {consumer, lim, lease};
	PGresult *r = inbox__pg_run(s, PGQ_OUTBOX_CLAIM, NULL, 3, vals, NULL,
	                            NULL, "outbox claim", &rc);
	if (!r)
		return rc;
	for (int i = 0; i < PQntuples(r); i++) {
		if (emit(r, i, fn, payload) < 0) {
			inbox__store_seterr(st, "",
			                    "outbox claim: out of "
			                    "memory");
			rc = INBOX_ERR_NOMEM;
			break;
		}
	}
	PQclear(r);
	return rc;
}

const char inbox__pg_outbox_finish_sql[] =
    "UPDATE {O} SET state = $3::text,"
    " next_attempt_at = now() + $4::bigint * interval '1 millisecond',"
    " lease_until = NULL,"
    " last_status = coalesce($5::int, last_status),"
    " last_error = $6::text,"
    " response = coalesce($7::bytea, response),"
    " reconciliations = reconciliations + $8::int,"
    " attempts = greatest(attempts + $9::int, 0),"
    " done_at = CASE WHEN $3::text = 'done' THEN now() END,"
    " updated_at = now()"
    " WHERE id = $1::bigint AND fence = $2::bigint AND state = 'in_flight'";

int inbox__pg_outbox_finish(inbox_store *st, const inbox_outbox_finish *f,
                            int64_t *rows)
{
	pg_store *s = (pg_store *)st;
	*rows = 0;
	int rc = need_txn(s, "outbox finish");
	if (rc < 0)
		return rc;
	char id[24], fence[24], delay[24], status[16], rec[16], att[16];
	snprintf(id, sizeof(id), "%lld", (long long)f->id);
	snprintf(fence, sizeof(fence), "%lld", (long long)f->fence);
	snprintf(delay, sizeof(delay), "%lld",
	         (long long)clamp_delay(f->retry_in_ms));
	snprintf(status, sizeof(status), "%d", f->last_status);
	snprintf(rec, sizeof(rec), "%d", (int)f->reconciled);
	snprintf(att, sizeof(att), "%d", (int)f->attempts_delta);
	const char *vals[9] = {id,
	                       fence,
	                       inbox_outbox_state_name(f->state),
	                       delay,
	                       f->last_status ? status : NULL,
	                       f->last_error,
	                       f->response,
	                       rec,
	                       att};
	int lens[9] = {0}, fmts[9] = {0};
	lens[6] = (int)f->response_len;
	fmts[6] = 1;
	PGresult *r = inbox__pg_run(s, PGQ_OUTBOX_FINISH, NULL, 9, vals, lens,
	                            fmts, "outbox finish", &rc);
	if (!r)
		return rc;
	*rows = strtoll(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return INBOX_OK;
}

int inbox__pg_outbox_counts(inbox_store *st, const char *consumer,
                            inbox_outbox_counts *out)
{
	pg_store *s = (pg_store *)st;
	int rc;
	PGresult *r = run(s,
	                  "SELECT state, count(*),"
	                  " extract(epoch FROM now() - min(created_at))"
	                  " FROM {O} WHERE state <> 'done'"
	                  " AND ($1::text IS NULL OR consumer = $1::text)"
	                  " GROUP BY state",
	                  1, &consumer, NULL, NULL, "outbox counts", &rc);
	if (!r)
		return rc;
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < PQntuples(r); i++) {
		int64_t n = inbox__pg_int(r, i, 1);
		double age = strtod(PQgetvalue(r, i, 2), NULL);
		inbox_outbox_state state =
		    inbox__outbox_state_parse(PQgetvalue(r, i, 0));
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
		if (state != INBOX_OUTBOX_DEAD && age > out->oldest_age_seconds)
			out->oldest_age_seconds = age;
	}
	PQclear(r);
	return INBOX_OK;
}

int inbox__pg_outbox_purge(inbox_store *st, const char *consumer,
                           int64_t older_than_seconds, int batch_limit,
                           int64_t *deleted)
{
	pg_store *s = (pg_store *)st;
	char older[24], lim[16];
	*deleted = 0;
	if (older_than_seconds > MAX_DELAY_MS / 1000)
		older_than_seconds = MAX_DELAY_MS / 1000;
	snprintf(older, sizeof(older), "%lld", (long long)older_than_seconds);
	snprintf(lim, sizeof(lim), "%d", batch_limit);
	const char *vals[3] = {consumer, older, lim};
	for (;;) {
		int rc;
		/* Each statement is its own transaction (autocommit). */
		PGresult *r = run(s,
		                  "DELETE FROM {O} WHERE id IN (SELECT id FROM"
		                  " {O} WHERE state = 'done' AND done_at <"
		                  " now() - $2::bigint * interval '1 second'"
		                  " AND ($1::text IS NULL OR consumer ="
		                  " $1::text) ORDER BY done_at LIMIT $3::int)",
		                  3, vals, NULL, NULL, "outbox purge", &rc);
		if (!r)
			return rc;
		int64_t n = strtoll(PQcmdTuples(r), NULL, 10);
		PQclear(r);
		*deleted += n;
		if (n < batch_limit)
			return INBOX_OK;
	}
}
