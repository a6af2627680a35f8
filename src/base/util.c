/*
 * Public utilities: error and outcome names, canonical JSON, fingerprints,
 * URL redaction.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <inbox/inbox.h>

#include "base/json.h"
#include "base/url.h"
#include "base/util.h"

/* ------------------------------------------------------------------ */
/* Errors and outcomes                                                  */
/* ------------------------------------------------------------------ */

typedef struct err_info {
	int code;
	const char *name;
	const char *text;
} err_info;

static const err_info errs[] = {
    {INBOX_OK, "INBOX_OK", "success"},
    {INBOX_ERR_NOMEM, "INBOX_ERR_NOMEM", "out of memory"},
    {INBOX_ERR_INVALID, "INBOX_ERR_INVALID", "invalid argument or option"},
    {INBOX_ERR_URL, "INBOX_ERR_URL", "malformed or unsupported URL"},
    {INBOX_ERR_CONNECT, "INBOX_ERR_CONNECT",
     "cannot connect to the database or broker"},
    {INBOX_ERR_STORE, "INBOX_ERR_STORE", "database error"},
    {INBOX_ERR_SCHEMA, "INBOX_ERR_SCHEMA",
     "database schema missing or newer than this library"},
    {INBOX_ERR_TRANSIENT, "INBOX_ERR_TRANSIENT",
     "transient failure, nothing committed: retry"},
    {INBOX_ERR_BUSY, "INBOX_ERR_BUSY", "another process holds the lock"},
    {INBOX_ERR_FENCED, "INBOX_ERR_FENCED",
     "lease lost: a newer holder owns the record"},
    {INBOX_ERR_STATE, "INBOX_ERR_STATE",
     "call not valid in the handle's state"},
    {INBOX_ERR_NOTFOUND, "INBOX_ERR_NOTFOUND", "not found"},
    {INBOX_ERR_SOURCE, "INBOX_ERR_SOURCE", "broker or source error"},
    {INBOX_ERR_CONFIG, "INBOX_ERR_CONFIG", "configuration error"},
    {INBOX_ERR_IO, "INBOX_ERR_IO", "I/O error"},
    {INBOX_ERR_TIMEOUT, "INBOX_ERR_TIMEOUT", "operation timed out"},
    {INBOX_ERR_HANDLER, "INBOX_ERR_HANDLER",
     "handler returned an invalid verdict"},
    {INBOX_ERR_NUL, "INBOX_ERR_NUL",
     "the text holds U+0000 and cannot be passed as a C string"},
    {INBOX_ERR_TOO_LARGE, "INBOX_ERR_TOO_LARGE",
     "over a configured size limit"},
};

static const err_info *find_err(int err)
{
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (errs[i].code == err)
			return &errs[i];
	return NULL;
}

const char *inbox_strerror(int err)
{
	const err_info *e = find_err(err);
	return e ? e->text : "unknown error";
}

const char *inbox_err_name(int err)
{
	const err_info *e = find_err(err);
	return e ? e->name : "INBOX_ERR_UNKNOWN";
}

const char *inbox_outcome_name(inbox_outcome o)
{
	switch (o) {
	case INBOX_OUTCOME_NONE:
		return "none";
	case INBOX_APPLIED:
		return "applied";
	case INBOX_DUPLICATE:
		return "duplicate";
	case INBOX_CONFLICT:
		return "conflict";
	case INBOX_STALE:
		return "stale";
	case INBOX_RETRY:
		return "retry";
	case INBOX_DEAD_LETTERED:
		return "dead_lettered";
	case INBOX_IN_PROGRESS:
		return "in_progress";
	case INBOX_ACQUIRED:
		return "acquired";
	case INBOX_SKIPPED:
		return "skipped";
	}
	return "unknown";
}

int inbox__outcome_parse(const char *name)
{
	if (!name)
		return INBOX_OUTCOME_NONE;
	for (int o = INBOX_APPLIED; o <= INBOX_SKIPPED; o++)
		if (strcmp(name, inbox_outcome_name((inbox_outcome)o)) == 0)
			return o;
	return INBOX_OUTCOME_NONE;
}

int inbox_outcome_ackable(inbox_outcome o)
{
	switch (o) {
	case INBOX_APPLIED:
	case INBOX_DUPLICATE:
	case INBOX_CONFLICT:
	case INBOX_STALE:
	case INBOX_DEAD_LETTERED:
	case INBOX_SKIPPED:
		return 1;
	default:
		return 0;
	}
}

/* ------------------------------------------------------------------ */
/* Canonical JSON and fingerprints                                      */
/* ------------------------------------------------------------------ */

/* Messages quote user text, which is UTF-8: never end them inside a
 * character cut by a short buffer. */
void inbox__seterr(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	size_t n = strlen(err), i = n;
	while (i > 0 && ((unsigned char)err[i - 1] & 0xC0) == 0x80)
		i--;
	if (i > 0 && (unsigned char)err[i - 1] >= 0xC0 &&
	    !inbox__utf8_valid(err + i - 1, n - (i - 1)))
		err[i - 1] = '\0';
}

int inbox_json_canonicalize(const char *json, size_t len, char **out,
                            size_t *outlen, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (out)
		*out = NULL;
	if (outlen)
		*outlen = 0;
	if (!out) {
		inbox__seterr(err, errlen, "out is NULL");
		return INBOX_ERR_INVALID;
	}
	json_t *root;
	int prc = inbox__json_parse(json, len, &root, err, errlen);
	if (prc < 0)
		return prc;
	inbox__buf b = INBOX__BUF_INIT;
	int rc = inbox__canon_append(&b, root);
	json_decref(root);
	if (rc < 0) {
		inbox__buf_free(&b);
		inbox__seterr(err, errlen, "out of memory");
		return INBOX_ERR_NOMEM;
	}
	*out = b.data;
	if (outlen)
		*outlen = b.len;
	return INBOX_OK;
}

int inbox_fingerprint(const char *json, size_t len, const char *pointer,
                      char hex[65], char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!hex) {
		inbox__seterr(err, errlen, "hex is NULL");
		return INBOX_ERR_INVALID;
	}
	hex[0] = '\0';
	if (!pointer)
		pointer = "";
	if (!inbox__pointer_valid(pointer)) {
		inbox__seterr(err, errlen, "invalid JSON pointer \"%s\"",
		              pointer);
		return INBOX_ERR_INVALID;
	}
	json_t *root;
	int prc = inbox__json_parse(json, len, &root, err, errlen);
	if (prc < 0)
		return prc;
	json_t *part = inbox__pointer_get(root, pointer);
	if (!part) {
		json_decref(root);
		inbox__seterr(err, errlen, "fingerprint field %s not found",
		              pointer);
		return INBOX_ERR_NOTFOUND;
	}
	inbox__buf b = INBOX__BUF_INIT;
	int rc = inbox__canon_append(&b, part);
	json_decref(root);
	if (rc == 0)
		inbox__sha256_hex(b.data, b.len, hex);
	inbox__buf_free(&b);
	if (rc < 0 || hex[0] == '\0') {
		hex[0] = '\0';
		inbox__seterr(err, errlen, "out of memory");
		return INBOX_ERR_NOMEM;
	}
	return INBOX_OK;
}

/* ------------------------------------------------------------------ */
/* URL redaction                                                        */
/* ------------------------------------------------------------------ */

/* The secret spans of a URL (inbox__url_secrets), collected. */
typedef struct spans {
	size_t n, cap;
	struct {
		size_t from, to;
	} * v;
} spans;

static int add_span(size_t from, size_t to, void *payload)
{
	spans *s = payload;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		void *v = realloc(s->v, cap * sizeof(*s->v));
		if (!v)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	/* Kept in order of from: insertion (there are few). */
	size_t at = s->n++;
	while (at > 0 && s->v[at - 1].from > from) {
		s->v[at] = s->v[at - 1];
		at--;
	}
	s->v[at].from = from;
	s->v[at].to = to;
	return 0;
}

/* Every secret (see base/url.h) replaced by "***"; overlapping or
 * touching spans become one. */
char *inbox_redact_url(const char *url)
{
	if (!url)
		return NULL;
	spans sp = {0, 0, NULL};
	inbox__buf out = INBOX__BUF_INIT;
	size_t pos = 0, n = strlen(url);
	int bad = inbox__url_secrets(url, add_span, &sp) != 0 ||
	          inbox__buf_reserve(&out, n + 8) < 0;
	for (size_t i = 0; i < sp.n && !bad; i++) {
		size_t from = sp.v[i].from, to = sp.v[i].to;
		while (i + 1 < sp.n && sp.v[i + 1].from <= to) {
			if (sp.v[i + 1].to > to)
				to = sp.v[i + 1].to;
			i++;
		}
		if (from < pos) /* inside the previous one */
			from = pos;
		bad = inbox__buf_append(&out, url + pos, from - pos) < 0 ||
		      inbox__buf_puts(&out, "***") < 0;
		pos = to > pos ? to : pos;
	}
	if (!bad)
		bad = inbox__buf_append(&out, url + pos, n - pos) < 0;
	free(sp.v);
	if (bad) {
		inbox__buf_free(&out);
		return NULL;
	}
	return out.data;
}
