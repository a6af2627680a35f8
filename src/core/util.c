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

#include "core/internal.h"
#include "core/json.h"
#include "core/url.h"

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
	}
	return "unknown";
}

int inbox_outcome_ackable(inbox_outcome o)
{
	switch (o) {
	case INBOX_APPLIED:
	case INBOX_DUPLICATE:
	case INBOX_CONFLICT:
	case INBOX_STALE:
	case INBOX_DEAD_LETTERED:
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

/* Query or keyword parameters whose values are secrets. */
static const char *const secret_params[] = {
    "password", "passwd", "pwd", "sslpassword", "secret", "token",
};

/* Length of a secret parameter name starting at s and followed by '=',
 * 0 if none. */
static size_t secret_param_at(const char *s)
{
	for (size_t i = 0; i < sizeof(secret_params) / sizeof(*secret_params);
	     i++) {
		size_t n = strlen(secret_params[i]);
		if (strncasecmp(s, secret_params[i], n) == 0 && s[n] == '=')
			return n;
	}
	return 0;
}

/* Replace [from, to) of src by "***", appending to out. */
static int put_redacted(inbox__buf *out, const char *src, size_t *pos,
                        size_t from, size_t to)
{
	if (inbox__buf_append(out, src + *pos, from - *pos) < 0 ||
	    inbox__buf_puts(out, "***") < 0)
		return -1;
	*pos = to;
	return 0;
}

/* The password span of scheme://user:password@host/... : after the first
 * ':' of the user info, up to the last '@' before the first '/' following
 * "//" (so an '@' inside the password stays inside). */
static int userinfo_password(const char *url, size_t *from, size_t *to)
{
	const char *sep = strstr(url, "://");
	if (!sep)
		return 0;
	const char *auth = sep + 3;
	const char *at = inbox__url_userinfo_end(auth);
	if (!at)
		return 0;
	const char *colon = memchr(auth, ':', (size_t)(at - auth));
	if (!colon || colon + 1 == at) /* no password, or an empty one */
		return 0;
	*from = (size_t)(colon + 1 - url);
	*to = (size_t)(at - url);
	return 1;
}

char *inbox_redact_url(const char *url)
{
	if (!url)
		return NULL;
	inbox__buf out = INBOX__BUF_INIT;
	size_t pos = 0, from, to, n = strlen(url);
	size_t scan = 0; /* where parameter scanning starts */
	if (inbox__buf_reserve(&out, n + 8) < 0)
		return NULL;
	if (userinfo_password(url, &from, &to)) {
		if (put_redacted(&out, url, &pos, from, to) < 0)
			goto nomem;
		scan = to;
	}
	/* password=... in a query string or a libpq keyword/value string. */
	for (size_t i = scan; i < n; i++) {
		int boundary = i == 0 || url[i - 1] == '?' ||
		               url[i - 1] == '&' || url[i - 1] == ';' ||
		               isspace((unsigned char)url[i - 1]);
		size_t k = boundary ? secret_param_at(url + i) : 0;
		if (!k)
			continue;
		size_t v = i + k + 1, e = v;
		if (url[v] == '\'') { /* libpq quoted value, \' escapes */
			for (e = v + 1; e < n && url[e] != '\''; e++)
				if (url[e] == '\\' && e + 1 < n)
					e++;
			if (e < n)
				e++;
		} else {
			while (e < n && url[e] != '&' && url[e] != '#' &&
			       !isspace((unsigned char)url[e]))
				e++;
		}
		if (e > v && put_redacted(&out, url, &pos, v, e) < 0)
			goto nomem;
		i = e > i ? e - 1 : i;
	}
	if (inbox__buf_append(&out, url + pos, n - pos) < 0)
		goto nomem;
	return out.data;
nomem:
	inbox__buf_free(&out);
	return NULL;
}
