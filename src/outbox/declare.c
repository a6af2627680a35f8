/*
 * The outbox, as handlers and tools see it: idempotency keys, declaring an
 * effect inside the inbox's transaction, and the counters an operator
 * reads. The dispatcher that performs the rows is in src/outbox/.
 */
#include <inbox/outbox.h>

#include <stdio.h>
#include <string.h>

#include "core/consumer.h"
#include "outbox/outbox.h"

static const char *const state_names[] = {
    "none", "pending", "in_flight", "done", "failed", "unknown", "dead"};

const char *inbox_outbox_state_name(inbox_outbox_state s)
{
	if ((int)s < 0 ||
	    (size_t)s >= sizeof(state_names) / sizeof(*state_names))
		return "none";
	return state_names[s];
}

inbox_outbox_state inbox__outbox_state_parse(const char *s)
{
	if (!s)
		return INBOX_OUTBOX_NONE;
	for (size_t i = 1; i < sizeof(state_names) / sizeof(*state_names); i++)
		if (strcmp(s, state_names[i]) == 0)
			return (inbox_outbox_state)i;
	return INBOX_OUTBOX_NONE;
}

int inbox_outbox_key(const char *consumer, const char *key, const char *step,
                     char out[INBOX_OUTBOX_KEY_LEN + 1])
{
	if (!consumer || !key || !step || !out)
		return INBOX_ERR_INVALID;
	/* NUL separators: ("a", "b\0c") and ("a\0b", "c") cannot collide,
	 * because none of the three may contain a NUL. */
	inbox__buf b = INBOX__BUF_INIT;
	size_t lc = strlen(consumer) + 1, lk = strlen(key) + 1;
	if (inbox__buf_append(&b, consumer, lc) < 0 ||
	    inbox__buf_append(&b, key, lk) < 0 ||
	    inbox__buf_append(&b, step, strlen(step)) < 0) {
		inbox__buf_free(&b);
		return INBOX_ERR_NOMEM;
	}
	inbox__sha256_hex(b.data, b.len, out);
	inbox__buf_free(&b);
	/* "" only when OpenSSL ran out of memory */
	return out[0] ? INBOX_OK : INBOX_ERR_NOMEM;
}

int inbox__outbox_supported(const inbox_store *st)
{
	return st && st->vt->version >= 2 && st->vt->outbox_add;
}

/* ---- validation of a declared effect -------------------------------- */

static int printable_word(const char *s, size_t max)
{
	if (!s || !*s || strlen(s) > max)
		return 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x21 || *p == 0x7f)
			return 0;
	return 1;
}

/* An HTTP token (RFC 9110): header names, methods. */
static int token(const char *s, size_t max)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";
	if (!s || !*s || strlen(s) > max)
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr(extra, *p)))
			return 0;
	return 1;
}

static int http_url(const char *u)
{
	if (!u ||
	    (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0))
		return 0;
	return printable_word(u, 4096);
}

/* JSON object of header name -> string value without CR/LF: 1, 0 (why
 * says what is wrong) or INBOX_ERR_NOMEM. */
static int headers_valid(const char *h, char *why, size_t len)
{
	json_t *root = NULL;
	int rc = inbox__json_parse(h, strlen(h), &root, why, len);
	if (rc < 0)
		return rc == INBOX_ERR_NOMEM ? rc : 0;
	int ok = json_is_object(root);
	const char *k;
	json_t *v;
	if (!ok)
		snprintf(why, len, "headers must be a JSON object");
	json_object_foreach(root, k, v)
	{
		if (!ok)
			break;
		/* A U+0000 would cut the value where it is used as a C
		 * string (and hide a line break after it from strpbrk). */
		if (!token(k, 128) || !json_is_string(v) ||
		    memchr(json_string_value(v), '\0', json_string_length(v)) ||
		    strpbrk(json_string_value(v), "\r\n")) {
			snprintf(why, len,
			         "header \"%s\": names are HTTP tokens, values "
			         "strings without line breaks or U+0000",
			         k);
			ok = 0;
		}
	}
	json_decref(root);
	return ok;
}

/* 0, INBOX_ERR_INVALID with the reason in why, or INBOX_ERR_NOMEM. */
int inbox__outbox_effect_check(const inbox_outbox_effect *e, char *why,
                               size_t len)
{
	if (!e) {
		snprintf(why, len, "no effect");
		return INBOX_ERR_INVALID;
	}
	if (inbox__vcheck(INBOX__V_OUTBOX_EFFECT, e->version, why, len) < 0)
		return INBOX_ERR_INVALID;
	const char *kind = e->kind ? e->kind : "http";
	if (!printable_word(e->step, 100)) {
		snprintf(why, len,
		         "step must be 1-100 printable characters without "
		         "spaces");
		return INBOX_ERR_INVALID;
	}
	if (!token(kind, 32)) {
		snprintf(why, len, "step %s: kind must be a word", e->step);
		return INBOX_ERR_INVALID;
	}
	if (e->method && !token(e->method, 16)) {
		snprintf(why, len, "step %s: method must be an HTTP method",
		         e->step);
		return INBOX_ERR_INVALID;
	}
	if (!e->url || !*e->url ||
	    (strcmp(kind, "http") == 0 ? !http_url(e->url)
	                               : !printable_word(e->url, 4096))) {
		snprintf(why, len,
		         "step %s: url must be an http:// or https:// URL "
		         "without spaces",
		         e->step);
		return INBOX_ERR_INVALID;
	}
	if (e->headers) {
		int ok = headers_valid(e->headers, why, len);
		if (ok <= 0)
			return ok < 0 ? ok : INBOX_ERR_INVALID;
	}
	if (e->key_header && !token(e->key_header, 128)) {
		snprintf(why, len, "step %s: key_header must be a header name",
		         e->step);
		return INBOX_ERR_INVALID;
	}
	if (e->reconcile_url && (!http_url(e->reconcile_url) ||
	                         !strstr(e->reconcile_url, "{key}"))) {
		snprintf(why, len,
		         "step %s: reconcile_url must be an http(s) URL "
		         "containing {key}",
		         e->step);
		return INBOX_ERR_INVALID;
	}
	if (e->max_attempts < 0 || (e->body_len > 0 && !e->body)) {
		snprintf(why, len, "step %s: bad max_attempts or body",
		         e->step);
		return INBOX_ERR_INVALID;
	}
	return 0;
}

int inbox_txn_outbox_add(inbox_txn *t, const inbox_outbox_effect *e,
                         char idempotency_key[INBOX_OUTBOX_KEY_LEN + 1],
                         int *added)
{
	char why[300], ik[INBOX_OUTBOX_KEY_LEN + 1];
	int dummy;
	if (!t || !t->msg || !t->msg->key.len)
		return INBOX_ERR_INVALID;
	if (!inbox__outbox_supported(t->st)) {
		inbox__store_seterr(t->st, "",
		                    "outbox: this store backend has no outbox "
		                    "(vtable version %u)",
		                    t->st->vt->version);
		t->failed = 1;
		return INBOX_ERR_STATE;
	}
	int rc = inbox__outbox_effect_check(e, why, sizeof(why));
	if (rc == INBOX_ERR_NOMEM) {
		t->nomem = 1;
		return rc;
	}
	if (rc < 0) {
		/* A handler that ignores this and returns OK would lose the
		 * effect silently: OK becomes RETRY, then a dead letter. */
		inbox__store_seterr(t->st, "", "outbox: %s", why);
		inbox_txn_set_reason(t, t->st->errmsg);
		t->failed = 1;
		return INBOX_ERR_INVALID;
	}
	rc = inbox_outbox_key(t->c->name, t->msg->key.data, e->step, ik);
	if (rc < 0) {
		t->failed = 1; /* as below: OK must not lose the effect */
		t->nomem |= rc == INBOX_ERR_NOMEM;
		return rc;
	}
	inbox_outbox_item row;
	memset(&row, 0, sizeof(row));
	row.consumer = t->c->name;
	row.key = t->msg->key.data;
	row.step = e->step;
	row.idempotency_key = ik;
	row.kind = e->kind ? e->kind : "http";
	row.method = e->method ? e->method : "POST";
	row.url = e->url;
	row.headers = e->headers;
	row.key_header = e->key_header;
	row.body = e->body ? e->body : "";
	row.body_len = e->body ? e->body_len : 0;
	row.idempotent = e->idempotent != 0;
	row.reconcile_url = e->reconcile_url;
	row.max_attempts = e->max_attempts;
	rc = t->st->vt->outbox_add(t->st, &row, added ? added : &dummy);
	if (rc < 0) {
		t->failed = 1;
		t->nomem |= rc == INBOX_ERR_NOMEM;
		return rc;
	}
	if (idempotency_key)
		memcpy(idempotency_key, ik, sizeof(ik));
	return INBOX_OK;
}

/* ---- counters and purge --------------------------------------------- */

static int outside_txn(inbox_store *st)
{
	if (!st)
		return INBOX_ERR_INVALID;
	if (!inbox__outbox_supported(st)) {
		inbox__store_seterr(st, "", "this store backend has no outbox");
		return INBOX_ERR_STATE;
	}
	if (st->in_txn)
		return INBOX_ERR_STATE;
	inbox__store_clearerr(st);
	return INBOX_OK;
}

int inbox_outbox_counts_get(inbox_store *st, const char *consumer,
                            inbox_outbox_counts *out)
{
	int rc = outside_txn(st);
	if (rc < 0)
		return rc;
	if (!out)
		return INBOX_ERR_INVALID;
	if (inbox__vcheck_store(st, INBOX__V_OUTBOX_COUNTS, out->version) < 0)
		return INBOX_ERR_INVALID;
	/* the backend fills the library's own struct; the caller gets the
	 * fields of its version */
	inbox_outbox_counts full = INBOX_OUTBOX_COUNTS_INIT;
	rc = st->vt->outbox_counts(st, consumer, &full);
	if (rc == INBOX_OK)
		inbox__vfill(INBOX__V_OUTBOX_COUNTS, out, &full);
	return rc;
}

int inbox_outbox_pending(inbox_store *st, const char *consumer,
                         int64_t *pending, double *oldest_age_seconds)
{
	inbox_outbox_counts c = INBOX_OUTBOX_COUNTS_INIT;
	int rc = inbox_outbox_counts_get(st, consumer, &c);
	if (rc < 0)
		return rc;
	if (pending)
		*pending = c.pending + c.in_flight + c.failed + c.unknown;
	if (oldest_age_seconds)
		*oldest_age_seconds = c.oldest_age_seconds;
	return INBOX_OK;
}

int inbox_outbox_purge(inbox_store *st, const char *consumer,
                       int64_t older_than_seconds, int batch_limit,
                       int64_t *deleted)
{
	int64_t dummy;
	int rc = outside_txn(st);
	if (rc < 0)
		return rc;
	if (older_than_seconds < 0 || batch_limit < 0)
		return INBOX_ERR_INVALID;
	return st->vt->outbox_purge(st, consumer, older_than_seconds,
	                            batch_limit ? batch_limit : 1000,
	                            deleted ? deleted : &dummy);
}
