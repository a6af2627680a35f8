/* The inbox statements of the PostgreSQL store: claim, reclaim, finish,
 * extend, dead letters and the consumer registry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "store/postgres/pg_store.h"

/* Longest lease accepted (ms): beyond it, now() + lease overflows. */
#define MAX_LEASE_MS 1000000000000LL

static void fmt_i64(char *out, size_t n, int64_t v)
{
	snprintf(out, n, "%lld", (long long)v);
}

static int64_t clamp_lease(int64_t ms)
{
	return ms < 0 ? 0 : ms > MAX_LEASE_MS ? MAX_LEASE_MS : ms;
}

static int bad_status(pg_store *s, const char *what, inbox_status st)
{
	inbox__store_seterr(&s->base, "", "%s: invalid status %d", what,
	                    (int)st);
	return INBOX_ERR_INVALID;
}

/* The claim's keys, fingerprints, message ids and source positions as
 * binary text[] parameters. A position is UTF-8 already: the core gives
 * one that is not as text (inbox_claim.position). */
static int build_arrays(pg_store *s, const inbox_claim *claims, size_t n)
{
	int bad = 0;
	for (int a = 0; a < 4; a++)
		bad |= inbox__pg_barr_start(&s->arr[a], PG_OID_TEXT);
	for (size_t i = 0; i < n && !bad; i++)
		bad = inbox__pg_barr_text(&s->arr[0], claims[i].key) ||
		      inbox__pg_barr_text(&s->arr[1], claims[i].fingerprint) ||
		      inbox__pg_barr_text(&s->arr[2], claims[i].message_id) ||
		      inbox__pg_barr_text(&s->arr[3], claims[i].position);
	return bad ? -1 : 0;
}

/* The stored result at columns c (bytea, as text), c + 1 (type) and
 * c + 2 (outcome) of row i, copied into malloc'ed memory (the claim's
 * version 7 fields). INBOX_OK or INBOX_ERR_NOMEM. */
static int fill_result(pg_store *s, inbox_claim *cl, const PGresult *r, int i,
                       int c)
{
	cl->first_outcome =
	    PQgetisnull(r, i, c + 2)
	        ? INBOX_OUTCOME_NONE
	        : (inbox_outcome)inbox__outcome_parse(PQgetvalue(r, i, c + 2));
	if (PQgetisnull(r, i, c))
		return INBOX_OK;
	size_t n = 0;
	unsigned char *raw =
	    PQunescapeBytea((const unsigned char *)PQgetvalue(r, i, c), &n);
	cl->result = raw ? malloc(n + 1) : NULL;
	cl->result_type =
	    !PQgetisnull(r, i, c + 1) ? strdup(PQgetvalue(r, i, c + 1)) : NULL;
	if (!cl->result || (!PQgetisnull(r, i, c + 1) && !cl->result_type)) {
		PQfreemem(raw);
		free(cl->result);
		free(cl->result_type);
		cl->result = NULL;
		cl->result_type = NULL;
		inbox__store_seterr(&s->base, "", "claim: out of memory");
		return INBOX_ERR_NOMEM;
	}
	if (n)
		memcpy(cl->result, raw, n);
	((char *)cl->result)[n] = '\0';
	cl->result_len = n;
	PQfreemem(raw);
	return INBOX_OK;
}

/* Fill a claim that is not new from columns c..c+4 of row i: status,
 * fingerprint, attempts, fence, lease expired (then the stored result,
 * c+5..c+7, by fill_result). A NULL status means the row is invisible to
 * this statement's snapshot. */
static void fill_existing(inbox_claim *cl, const PGresult *r, int i, int c)
{
	cl->is_new = 0;
	cl->lease_expired = 0;
	if (PQgetisnull(r, i, c)) {
		cl->status = INBOX_ST_NONE;
		cl->stored_fingerprint[0] = '\0';
		cl->attempts = 0;
		cl->fence = 0;
		return;
	}
	cl->status = inbox__status_parse(PQgetvalue(r, i, c));
	snprintf(cl->stored_fingerprint, sizeof(cl->stored_fingerprint), "%s",
	         PQgetvalue(r, i, c + 1));
	cl->attempts = (int32_t)inbox__pg_int(r, i, c + 2);
	cl->fence = inbox__pg_int(r, i, c + 3);
	cl->lease_expired = PQgetvalue(r, i, c + 4)[0] == 't';
}

static void fill_new(inbox_claim *cl)
{
	cl->is_new = 1;
	cl->status = INBOX_ST_NONE;
	snprintf(cl->stored_fingerprint, sizeof(cl->stored_fingerprint), "%s",
	         cl->fingerprint ? cl->fingerprint : "");
	cl->attempts = 0;
	cl->fence = 1;
	cl->lease_expired = 0;
}

/* A key given twice: the first claim inserted it (its later copies
 * conflicted with it inside the statement), so a copy is reported as
 * that row. The core gives sorted keys: then copies are adjacent. */
static void copy_of(inbox_claim *cl, const inbox_claim *first,
                    inbox_status status)
{
	cl->is_new = 0;
	cl->status = status;
	snprintf(cl->stored_fingerprint, sizeof(cl->stored_fingerprint), "%s",
	         first->fingerprint ? first->fingerprint : "");
	cl->attempts = 1;
	cl->fence = 1;
	cl->lease_expired = 0;
}

static void repeats(inbox_claim *claims, size_t n, inbox_status status)
{
	int sorted = 1;
	for (size_t i = 1; i < n && sorted; i++)
		sorted = strcmp(claims[i - 1].key, claims[i].key) <= 0;
	size_t run = 0; /* sorted: first claim of the current key */
	for (size_t i = 1; i < n; i++) {
		if (sorted) {
			if (strcmp(claims[run].key, claims[i].key) != 0)
				run = i;
			else if (claims[run].is_new)
				copy_of(&claims[i], &claims[run], status);
			continue;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(claims[j].key, claims[i].key) == 0) {
				if (claims[j].is_new)
					copy_of(&claims[i], &claims[j], status);
				break;
			}
	}
}

static int invisible(const inbox_claim *cl)
{
	return !cl->is_new && cl->status == INBOX_ST_NONE;
}

/* Keys inserted by a transaction that committed while the claim waited on
 * the unique index are invisible to the claim's snapshot; a new statement
 * (READ COMMITTED: a new snapshot) sees them. */
static int reread(pg_store *s, const char *consumer, inbox_claim *claims,
                  size_t n)
{
	inbox__buf *b = &s->arr[0];
	int bad = inbox__pg_barr_start(b, PG_OID_TEXT);
	for (size_t i = 0; i < n && !bad; i++)
		if (invisible(&claims[i]))
			bad = inbox__pg_barr_text(b, claims[i].key);
	if (bad)
		return INBOX_ERR_NOMEM;
	const char *params[2] = {consumer, b->data};
	int lengths[2] = {0, (int)b->len}, formats[2] = {0, 1};
	int rc;
	PGresult *r = inbox__pg_run(s, PGQ_CLAIM_REREAD, NULL, 2, params,
	                            lengths, formats, "claim", &rc);
	if (!r)
		return rc;
	int rows = PQntuples(r);
	for (size_t i = 0; i < n; i++) {
		if (!invisible(&claims[i]))
			continue;
		for (int j = 0; j < rows; j++)
			if (strcmp(PQgetvalue(r, j, 0), claims[i].key) == 0) {
				fill_existing(&claims[i], r, j, 1);
				if (!invisible(&claims[i]) &&
				    fill_result(s, &claims[i], r, j, 6) < 0) {
					PQclear(r);
					return INBOX_ERR_NOMEM;
				}
				break;
			}
		/* Still absent (deleted meanwhile): stays NONE, never new. */
	}
	PQclear(r);
	return INBOX_OK;
}

int inbox__pg_claim(inbox_store *st, const char *consumer, inbox_claim *claims,
                    size_t n, inbox_status status, int64_t lease_ms)
{
	pg_store *s = (pg_store *)st;
	if (status != INBOX_ST_COMPLETED && status != INBOX_ST_PROCESSING)
		return bad_status(s, "claim", status);
	if (n == 0)
		return INBOX_OK;
	if (build_arrays(s, claims, n) < 0) {
		inbox__store_seterr(st, "", "claim: out of memory");
		return INBOX_ERR_NOMEM;
	}
	char lease[24], upto[16], cur[16];
	fmt_i64(lease, sizeof(lease), clamp_lease(lease_ms));
	int lookup = 1;
	int rc =
	    inbox__pg_gens_maybe(s, consumer, claims, n, upto, cur, &lookup);
	if (rc != INBOX_OK)
		return rc;
	/* Nothing to look up in sealed generations: the plain claim, which
	 * does not read $7. */
	const char *params[10] = {consumer,
	                          s->arr[0].data,
	                          s->arr[1].data,
	                          s->arr[2].data,
	                          inbox__status_name(status),
	                          lease,
	                          lookup ? s->maybe.data : NULL,
	                          upto,
	                          cur,
	                          s->arr[3].data};
	int lengths[10] = {0,
	                   (int)s->arr[0].len,
	                   (int)s->arr[1].len,
	                   (int)s->arr[2].len,
	                   0,
	                   0,
	                   lookup ? (int)s->maybe.len : 0,
	                   0,
	                   0,
	                   (int)s->arr[3].len};
	int formats[10] = {0, 1, 1, 1, 0, 0, 1, 0, 0, 1};
	PGresult *r =
	    inbox__pg_run(s, lookup ? PGQ_CLAIM : PGQ_CLAIM_NEWEST, NULL, 10,
	                  params, lengths, formats, "claim", &rc);
	if (!r) {
		/* Maybe our newest generation was sealed: read them again
		 * before the batch re-runs. */
		s->gens_checked = 0;
		return rc;
	}
	/* Rows come back only for the keys that were not inserted. */
	for (size_t i = 0; i < n; i++)
		fill_new(&claims[i]);
	for (int i = 0; i < PQntuples(r); i++) {
		int64_t ord = inbox__pg_int(r, i, 0);
		if (ord < 1 || (size_t)ord > n)
			continue;
		fill_existing(&claims[ord - 1], r, i, 1);
		if (!invisible(&claims[ord - 1]) &&
		    fill_result(s, &claims[ord - 1], r, i, 6) < 0) {
			PQclear(r);
			return INBOX_ERR_NOMEM;
		}
	}
	PQclear(r);
	repeats(claims, n, status);
	s->claimed = 1;
	size_t missing = 0;
	for (size_t i = 0; i < n; i++)
		missing += invisible(&claims[i]);
	return missing ? reread(s, consumer, claims, n) : INBOX_OK;
}

int inbox__pg_reclaim(inbox_store *st, const char *consumer, const char *key,
                      inbox_status status, int64_t lease_ms, int *taken,
                      int32_t *attempts, int64_t *fence)
{
	pg_store *s = (pg_store *)st;
	*taken = 0;
	if (status != INBOX_ST_COMPLETED && status != INBOX_ST_PROCESSING)
		return bad_status(s, "reclaim", status);
	char lease[24];
	fmt_i64(lease, sizeof(lease), clamp_lease(lease_ms));
	const char *params[4] = {consumer, key, inbox__status_name(status),
	                         lease};
	int rc;
	PGresult *r = inbox__pg_run(s, PGQ_RECLAIM, NULL, 4, params, NULL, NULL,
	                            "reclaim", &rc);
	if (!r)
		return rc;
	if (PQntuples(r) == 1) {
		*taken = 1;
		*attempts = (int32_t)inbox__pg_int(r, 0, 0);
		*fence = inbox__pg_int(r, 0, 1);
	}
	PQclear(r);
	return INBOX_OK;
}

int inbox__pg_finish(inbox_store *st, const char *consumer, const char *key,
                     int64_t fence, inbox_status expect, inbox_status status,
                     int32_t attempts, int64_t *rows)
{
	pg_store *s = (pg_store *)st;
	if (status == INBOX_ST_NONE || status > INBOX_ST_DEAD)
		return bad_status(s, "finish", status);
	char att[16], fen[24];
	snprintf(att, sizeof(att), "%d", (int)attempts);
	fmt_i64(fen, sizeof(fen), fence);
	const char *params[6] = {
	    consumer,
	    key,
	    inbox__status_name(status),
	    att,
	    fen,
	    expect == INBOX_ST_NONE ? NULL : inbox__status_name(expect)};
	int64_t dummy;
	return inbox__pg_run_cmd(s, PGQ_FINISH, NULL, 6, params, "finish",
	                         rows ? rows : &dummy);
}

int inbox__pg_extend(inbox_store *st, const char *consumer, const char *key,
                     int64_t fence, int64_t lease_ms, int64_t *rows)
{
	pg_store *s = (pg_store *)st;
	char fen[24], lease[24];
	fmt_i64(fen, sizeof(fen), fence);
	fmt_i64(lease, sizeof(lease), clamp_lease(lease_ms));
	const char *params[4] = {consumer, key, fen, lease};
	int64_t dummy;
	return inbox__pg_run_cmd(s, PGQ_EXTEND, NULL, 4, params, "extend",
	                         rows ? rows : &dummy);
}

int inbox__pg_register_consumer(inbox_store *st, const char *consumer,
                                int64_t retention_seconds)
{
	pg_store *s = (pg_store *)st;
	char ret[24];
	fmt_i64(ret, sizeof(ret), retention_seconds);
	const char *params[2] = {consumer, ret};
	return inbox__pg_run_cmd(s, PGQ_REGISTER, NULL, 2, params,
	                         "register_consumer", NULL);
}

/* A text column refuses invalid UTF-8, but a dead letter must be kept:
 * return v itself, or a copy in tmp with each bad byte as U+FFFD. */
static const char *utf8_text(const char *v, inbox__buf *tmp, int *nomem)
{
	if (!v)
		return NULL;
	size_t n = strlen(v), k;
	if (inbox__utf8_valid(v, n))
		return v;
	const unsigned char *p = (const unsigned char *)v, *end = p + n;
	for (; p < end; p += k ? k : 1) {
		k = inbox__utf8_seq_len(p, (size_t)(end - p));
		if ((k ? inbox__buf_append(tmp, p, k)
		       : inbox__buf_puts(tmp, "\xEF\xBF\xBD")) < 0) {
			*nomem = 1;
			return NULL;
		}
	}
	return tmp->data;
}

int inbox__pg_dead_letter(inbox_store *st, const inbox_dead_letter *dl,
                          int64_t *id)
{
	pg_store *s = (pg_store *)st;
	if (!dl || !dl->consumer) {
		inbox__store_seterr(st, "", "dead_letter: no consumer");
		return INBOX_ERR_INVALID;
	}
	char att[16];
	snprintf(att, sizeof(att), "%d", (int)dl->attempts);
	enum { N = 11 };
	const char *v[N] = {dl->consumer,
	                    dl->key,
	                    dl->message_id,
	                    dl->payload ? dl->payload : "",
	                    dl->headers,
	                    dl->position,
	                    att,
	                    dl->reason ? dl->reason : "unknown",
	                    dl->fingerprint,
	                    dl->stored_fingerprint,
	                    dl->dedup_key};
	inbox__buf tmp[N] = {INBOX__BUF_INIT};
	int nomem = 0, rc;
	for (int i = 0; i < N; i++)
		if (i != 3)
			v[i] = utf8_text(v[i], &tmp[i], &nomem);
	int lengths[N] = {0}, formats[N] = {0};
	lengths[3] = dl->payload ? (int)dl->payload_len : 0;
	formats[3] = 1; /* binary: the payload may be any bytes */
	PGresult *r = NULL;
	if (nomem) {
		inbox__store_seterr(st, "", "dead_letter: out of memory");
		rc = INBOX_ERR_NOMEM;
	} else if (dl->payload_len > 0x7fffffff) {
		inbox__store_seterr(st, "", "dead_letter: payload too large");
		rc = INBOX_ERR_INVALID;
	} else {
		r = inbox__pg_run(s, PGQ_DEAD_LETTER, NULL, N, v, lengths,
		                  formats, "dead_letter", &rc);
	}
	if (r) {
		if (id)
			*id = inbox__pg_int(r, 0, 0);
		PQclear(r);
	}
	for (int i = 0; i < N; i++)
		inbox__buf_free(&tmp[i]);
	return rc;
}

/* Append to b an array literal of one text element (NULL: the SQL
 * NULL), quoted and escaped as array_in reads it, and its NUL. */
static int one_element(inbox__buf *b, const char *v)
{
	if (!v)
		return inbox__buf_append(b, "{NULL}", 7);
	int bad = inbox__buf_puts(b, "{\"");
	for (; *v && !bad; v++) {
		if (*v == '"' || *v == '\\')
			bad |= inbox__buf_putc(b, '\\');
		bad |= inbox__buf_putc(b, *v);
	}
	return bad | inbox__buf_append(b, "\"}", 3);
}

/* The same for bytes, as their hex text (no character to escape). */
static int one_hex_element(inbox__buf *b, const unsigned char *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	if (inbox__buf_reserve(b, n * 2 + 5) < 0)
		return -1;
	inbox__buf_puts(b, "{\"");
	for (size_t i = 0; i < n; i++) {
		b->data[b->len++] = digits[p[i] >> 4];
		b->data[b->len++] = digits[p[i] & 15];
	}
	return inbox__buf_append(b, "\"}", 3);
}

int inbox__pg_set_result(inbox_store *st, const char *consumer, const char *key,
                         inbox_outcome outcome, const char *content_type,
                         const void *data, size_t len)
{
	pg_store *s = (pg_store *)st;
	if (!consumer || !key || (!data && len)) {
		inbox__store_seterr(st, "", "set_result: invalid arguments");
		return INBOX_ERR_INVALID;
	}
	/* Each value as a one-element array literal (the queue's results go
	 * as one statement: inbox__pg_queue_fold), the bytes as hex text
	 * (the queue's parameters are strings), all five in s->lit one
	 * after another: no allocation once it has grown. */
	inbox__buf *b = &s->lit;
	inbox__buf_reset(b);
	size_t at[PG_RESULT_PARAMS];
	int bad = 0;
	at[0] = b->len;
	bad |= one_element(b, consumer);
	at[1] = b->len;
	bad |= one_element(b, key);
	at[2] = b->len;
	bad |= data ? one_hex_element(b, data, len) : one_element(b, NULL);
	at[3] = b->len;
	bad |= one_element(b, data ? content_type : NULL);
	at[4] = b->len;
	bad |= one_element(b, inbox_outcome_name(outcome));
	if (bad) {
		inbox__store_seterr(st, "", "set_result: out of memory");
		return INBOX_ERR_NOMEM;
	}
	const char *params[PG_RESULT_PARAMS];
	for (int i = 0; i < PG_RESULT_PARAMS; i++)
		params[i] = b->data + at[i];
	if (inbox__pg_defers(s))
		return s->defer_failed ? s->defer_failed
		                       : inbox__pg_queue_result(s, params);
	/* unprepared, as in the queue (inbox__pg_queue_result) */
	return inbox__pg_run_cmd(s, -1, s->sql[PGQ_SET_RESULT],
	                         PG_RESULT_PARAMS, params, "set_result", NULL);
}
