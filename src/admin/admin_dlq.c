/*
 * Dead letters for operators: list, read one with its payload, mark it
 * replayed, drop it, and replay it through the consumer.
 *
 * Payloads are read as hex text, whatever the store, so bytes that are not
 * UTF-8 (or NUL) come back exactly as they were written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin_sql.h"
#include "base/log.h"
#include "base/url.h"
#include "core/consumer.h"

#define DL_COLUMNS                                                             \
	"id, consumer, key, message_id, {len:payload}, headers, position,"     \
	" attempts, reason, fingerprint, stored_fingerprint,"                  \
	" {ms:created_at}, {ms:replayed_at}, deliveries,"                      \
	" {ms:coalesce(last_seen_at, created_at)}"
#define DL_NCOLS 15

static int first_num(int ncols, const char *const *v, void *payload)
{
	int64_t *out = payload;
	if (ncols > 0)
		out[0] = inbox__admin_num(v[0]);
	return 1;
}

void inbox_admin_dead_letter_free(inbox_admin_dead_letter *dl)
{
	if (!dl)
		return;
	free(dl->consumer);
	free(dl->key);
	free(dl->message_id);
	free(dl->payload);
	free(dl->headers);
	free(dl->position);
	free(dl->reason);
	free(dl->fingerprint);
	free(dl->stored_fingerprint);
	free(dl);
}

/* Fill dl from the DL_COLUMNS of a row (strings duplicated). */
static void fill(inbox_admin_dead_letter *dl, const char *const *v, int *oom)
{
	dl->id = inbox__admin_num(v[0]);
	dl->consumer = inbox__admin_dup(v[1], oom);
	dl->key = inbox__admin_dup(v[2], oom);
	dl->message_id = inbox__admin_dup(v[3], oom);
	dl->payload_len = (size_t)inbox__admin_num(v[4]);
	dl->headers = inbox__admin_dup(v[5], oom);
	dl->position = inbox__admin_dup(v[6], oom);
	dl->attempts = (int32_t)inbox__admin_num(v[7]);
	dl->reason = inbox__admin_dup(v[8], oom);
	dl->fingerprint = inbox__admin_dup(v[9], oom);
	dl->stored_fingerprint = inbox__admin_dup(v[10], oom);
	dl->created_at_ms = inbox__admin_num(v[11]);
	dl->replayed_at_ms = inbox__admin_num(v[12]);
	dl->deliveries = inbox__admin_num(v[13]);
	dl->last_seen_at_ms = inbox__admin_num(v[14]);
}

static void clear(inbox_admin_dead_letter *dl)
{
	free(dl->consumer);
	free(dl->key);
	free(dl->message_id);
	free(dl->headers);
	free(dl->position);
	free(dl->reason);
	free(dl->fingerprint);
	free(dl->stored_fingerprint);
	memset(dl, 0, sizeof(*dl));
}

/* ---- list -------------------------------------------------------------- */

typedef struct list_ctx {
	inbox_admin_dlq_fn fn;
	void *payload;
	int oom;
} list_ctx;

static int list_row(int ncols, const char *const *v, void *payload)
{
	list_ctx *x = payload;
	if (ncols < DL_NCOLS)
		return 1;
	inbox_admin_dead_letter dl;
	memset(&dl, 0, sizeof(dl));
	fill(&dl, v, &x->oom);
	int stop = x->oom ? 1 : x->fn(&dl, x->payload);
	clear(&dl);
	return stop;
}

int inbox_admin_dlq_list(inbox_store *st, const inbox_admin_dlq_filter *f,
                         inbox_admin_dlq_fn fn, void *payload)
{
	inbox_admin_dlq_filter all = INBOX_ADMIN_DLQ_FILTER_INIT;
	if (!st || !fn)
		return INBOX_ERR_INVALID;
	if (!f)
		f = &all;
	if (inbox__vcheck_store(st, INBOX__V_DLQ_FILTER, f->version) < 0)
		return INBOX_ERR_INVALID;
	inbox__admin_filter w;
	inbox__admin_filter_init(
	    &w, "SELECT " DL_COLUMNS " FROM {dead_letters}", f->after_id);
	inbox__admin_filter_eq(&w, "consumer", f->consumer);
	inbox__admin_filter_eq(&w, "key", f->key);
	inbox__admin_filter_if(&w, f->pending_only, "replayed_at IS NULL");
	inbox__admin_filter_if(&w, f->version >= 2 && f->messages_only,
	                       "(position IS NULL OR position NOT LIKE "
	                       "'outbox:%')");
	if (f->version >= 3) {
		inbox__admin_filter_if(&w, f->resolved_only,
		                       "replayed_at IS NOT NULL");
		inbox__admin_filter_if(&w, f->outbox_only,
		                       "position LIKE 'outbox:%'");
		inbox__admin_filter_older(&w,
		                          "coalesce(last_seen_at, created_at)",
		                          f->older_than_seconds);
	}
	list_ctx x = {fn, payload, 0};
	int rc = inbox__admin_filter_run(&w, st, f->limit, list_row, &x);
	if (rc == INBOX_OK && x.oom) {
		inbox__store_seterr(st, "", "dead letters: out of memory");
		rc = INBOX_ERR_NOMEM;
	}
	return rc;
}

/* ---- one, with its payload -------------------------------------------- */

static int get_row(int ncols, const char *const *v, void *payload)
{
	inbox__admin_one *x = payload;
	if (ncols < DL_NCOLS + 1 || x->row)
		return 1;
	inbox_admin_dead_letter *dl = calloc(1, sizeof(*dl));
	if (!dl) {
		x->oom = 1;
		return 1;
	}
	fill(dl, v, &x->oom);
	dl->payload = inbox__admin_unhex(v[DL_NCOLS], &dl->payload_len);
	if (!dl->payload)
		x->oom = 1;
	x->row = dl;
	return 1;
}

int inbox_admin_dlq_get(inbox_store *st, int64_t id, const char *consumer,
                        inbox_admin_dead_letter **out)
{
	if (!out)
		return INBOX_ERR_INVALID;
	*out = NULL;
	if (!st)
		return INBOX_ERR_INVALID;
	inbox__admin_one x = {NULL, 0};
	int rc = inbox__admin_get(st,
	                          "SELECT " DL_COLUMNS ", {hex:payload} FROM"
	                          " {dead_letters}",
	                          id, consumer, "dead letter", get_row, &x);
	if (rc != INBOX_OK) {
		inbox_admin_dead_letter_free(x.row);
		return rc;
	}
	*out = x.row;
	return INBOX_OK;
}

/* ---- changes ----------------------------------------------------------- */

static int exec_id(inbox_store *st, const char *tmpl, int64_t id,
                   const char *what)
{
	char ids[24];
	snprintf(ids, sizeof(ids), "%lld", (long long)id);
	const char *p[1] = {ids};
	inbox__buf b = INBOX__BUF_INIT;
	int64_t rows = 0;
	int rc = inbox__admin_sql(&b, st, tmpl);
	if (rc == INBOX_OK)
		rc = inbox_store_exec(st, b.data, 1, p, &rows);
	inbox__buf_free(&b);
	if (rc == INBOX_OK && rows == 0) {
		inbox__store_seterr(st, "", "%s: no dead letter %lld", what,
		                    (long long)id);
		return INBOX_ERR_NOTFOUND;
	}
	return rc;
}

int inbox_admin_dlq_mark_replayed(inbox_store *st, int64_t id)
{
	if (!st)
		return INBOX_ERR_INVALID;
	return exec_id(st,
	               "UPDATE {dead_letters} SET replayed_at = {nowts}"
	               " WHERE id = {i:1}",
	               id, "mark replayed");
}

int inbox_admin_dlq_drop(inbox_store *st, int64_t id)
{
	if (!st)
		return INBOX_ERR_INVALID;
	return exec_id(st, "DELETE FROM {dead_letters} WHERE id = {i:1}", id,
	               "drop");
}

typedef struct ids {
	int64_t *v;
	size_t n, cap;
	int oom;
} ids;

static int collect_id(const inbox_admin_dead_letter *dl, void *payload)
{
	ids *x = payload;
	if (x->n == x->cap) {
		size_t cap = x->cap ? 2 * x->cap : 64;
		int64_t *v = realloc(x->v, cap * sizeof(*v));
		if (!v) {
			x->oom = 1;
			return 1;
		}
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n++] = dl->id;
	return 0;
}

int inbox_admin_dlq_drop_matching(inbox_store *st,
                                  const inbox_admin_dlq_filter *f, int dry_run,
                                  int64_t *dropped)
{
	if (dropped)
		*dropped = 0;
	if (!st || !f)
		return INBOX_ERR_INVALID;
	ids x = {NULL, 0, 0, 0};
	int rc = inbox_admin_dlq_list(st, f, collect_id, &x);
	if (rc == INBOX_OK && x.oom) {
		inbox__store_seterr(st, "", "dead letters: out of memory");
		rc = INBOX_ERR_NOMEM;
	}
	int64_t n = 0;
	for (size_t i = 0; rc == INBOX_OK && i < x.n; i++) {
		if (dry_run) {
			n++;
			continue;
		}
		rc = inbox_admin_dlq_drop(st, x.v[i]);
		if (rc == INBOX_OK)
			n++;
		else if (rc == INBOX_ERR_NOTFOUND) /* gone meanwhile */
			rc = INBOX_OK;
	}
	free(x.v);
	if (dropped)
		*dropped = n;
	if (!dry_run && n > 0)
		inbox__log(INBOX_LOG_WARN, f->consumer,
		           "\"event\":\"dead_letters_dropped\",\"count\":%lld",
		           (long long)n);
	return rc;
}

int inbox_admin_dlq_purge(inbox_store *st, const char *consumer,
                          int64_t older_than_seconds, int batch_limit,
                          int dry_run, int64_t *deleted)
{
	if (!st || !deleted)
		return INBOX_ERR_INVALID;
	*deleted = 0;
	if (older_than_seconds <= 0)
		return inbox__admin_invalid(
		    st, "dead letter purge: a retention > 0 is required");
	if (older_than_seconds > INBOX__ADMIN_MAX_WINDOW_S)
		older_than_seconds = INBOX__ADMIN_MAX_WINDOW_S;
	if (batch_limit <= 0)
		batch_limit = 1000;
	char older[24], lim[16];
	snprintf(older, sizeof(older), "%lld", (long long)older_than_seconds);
	snprintf(lim, sizeof(lim), "%d", batch_limit);
	const char *p[3] = {older, lim, consumer};
	inbox__buf b = INBOX__BUF_INIT;
	int rc;
	if (dry_run) {
		int64_t got[2] = {0, 0};
		rc = inbox__admin_sql(
		    &b, st,
		    consumer ? "SELECT count(*) FROM {dead_letters} WHERE"
		               " replayed_at < {cutoff:1} AND consumer = $2"
		             : "SELECT count(*) FROM {dead_letters} WHERE"
		               " replayed_at < {cutoff:1}");
		p[1] = consumer;
		if (rc == INBOX_OK)
			rc = inbox_store_query(st, b.data, consumer ? 2 : 1, p,
			                       first_num, got);
		*deleted = got[0];
		inbox__buf_free(&b);
		return rc;
	}
	rc = inbox__admin_sql(
	    &b, st,
	    consumer ? "DELETE FROM {dead_letters} WHERE id IN (SELECT id FROM"
	               " {dead_letters} WHERE replayed_at < {cutoff:1} AND"
	               " consumer = $3 ORDER BY replayed_at LIMIT {i:2})"
	             : "DELETE FROM {dead_letters} WHERE id IN (SELECT id FROM"
	               " {dead_letters} WHERE replayed_at < {cutoff:1}"
	               " ORDER BY replayed_at LIMIT {i:2})");
	for (int64_t n = batch_limit; rc == INBOX_OK && n >= batch_limit;) {
		n = 0;
		rc = inbox_store_exec(st, b.data, consumer ? 3 : 2, p, &n);
		*deleted += n;
	}
	inbox__buf_free(&b);
	return rc;
}

/* ---- replay ------------------------------------------------------------ */

/* Delete the key's record if (and only if) it is `dead`, in one
 * statement: a record another worker completed meanwhile stays. */
static int release_dead(inbox_store *st, const char *consumer, const char *key)
{
	const char *p[2] = {consumer, key};
	inbox__buf b = INBOX__BUF_INIT;
	int rc = inbox__admin_sql(&b, st,
	                          "DELETE FROM {inbox} WHERE consumer = $1"
	                          " AND key = $2 AND status = 'dead'");
	if (rc == INBOX_OK)
		rc = inbox_store_exec(st, b.data, 2, p, NULL);
	inbox__buf_free(&b);
	return rc;
}

int inbox_admin_dlq_replay(inbox_store *st, inbox_consumer *c, int64_t id,
                           inbox_result *res)
{
	if (!st || !c || !res)
		return INBOX_ERR_INVALID;
	if (inbox__vbegin_store(st, INBOX__V_RESULT, res) < 0)
		return INBOX_ERR_INVALID;
	if (c->st != st)
		return inbox__admin_invalid(
		    st, "replay: the consumer was opened on another store");
	inbox_admin_dead_letter *dl = NULL;
	int rc = inbox_admin_dlq_get(st, id, NULL, &dl);
	if (rc != INBOX_OK)
		return rc;
	if (strcmp(dl->consumer, inbox_consumer_name(c)) != 0) {
		inbox__store_seterr(st, "",
		                    "replay: dead letter %lld belongs to "
		                    "consumer \"%s\", not \"%s\"",
		                    (long long)id, dl->consumer,
		                    inbox_consumer_name(c));
		inbox_admin_dead_letter_free(dl);
		return INBOX_ERR_INVALID;
	}
	/* The outbox's dead letters hold a request body, not a message:
	 * feeding it to the consumer would be wrong. */
	if (dl->position && strncmp(dl->position, "outbox:", 7) == 0) {
		inbox__store_seterr(
		    st, "",
		    "replay: dead letter %lld is a failed outbox "
		    "effect (%s), not a message; it cannot go "
		    "through the consumer again",
		    (long long)id, dl->position);
		inbox_admin_dead_letter_free(dl);
		return INBOX_ERR_INVALID;
	}
	if (dl->key)
		rc = release_dead(st, dl->consumer, dl->key);
	if (rc == INBOX_OK) {
		inbox_delivery d = INBOX_DELIVERY_INIT;
		d.id = dl->message_id;
		d.payload = dl->payload;
		d.payload_len = dl->payload_len;
		d.headers = dl->headers;
		d.position = dl->position;
		d.delivery_count = 1;
		rc = inbox_consumer_process(c, &d, res);
		if (rc < 0)
			inbox__store_seterr(st, "", "replay: %s",
			                    inbox_consumer_errmsg(c));
	}
	/* Dead-lettered again into this very dead letter (the same key and
	 * bytes): counted there and pending again, not replayed. */
	if (rc == INBOX_OK && res->outcome != INBOX_RETRY &&
	    res->outcome != INBOX_IN_PROGRESS && res->dead_letter_id != id)
		rc = inbox_admin_dlq_mark_replayed(st, id);
	inbox_admin_dead_letter_free(dl);
	return rc;
}
