/* The result a declaration stores (inbox_decl_set_result): a JSON value
 * built from the message and from the first row an SQL step returned,
 * stored with inbox_txn_set_result() for every message it applies. */
#include "effect/decl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strings.h>

#include "base/buf.h"
#include "base/json.h"

#define RESULT_MAX_VALUES 10000
#define RESULT_MAX_DEPTH  16

static int say(char *why, size_t len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int say(char *why, size_t len, int rc, const char *fmt, ...)
{
	if (why && len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* A "#N", "#N.column" or "#N.column:json" leaf: N (1-based), the column
 * (NULL for the whole row, else malloc'ed) and whether its text is JSON.
 * 0, or -1 when the leaf is not of that form. */
static int row_ref(const char *s, int *step, char **column, int *as_json)
{
	*column = NULL;
	*as_json = 0;
	if (s[0] != '#' || s[1] < '1' || s[1] > '9')
		return -1;
	char *end;
	long n = strtol(s + 1, &end, 10);
	if (n < 1 || n > 100000)
		return -1;
	*step = (int)n;
	if (!*end)
		return 0;
	if (*end != '.' || !end[1])
		return -1;
	const char *col = end + 1;
	size_t cl = strlen(col);
	if (cl > 5 && strcmp(col + cl - 5, ":json") == 0) {
		*as_json = 1;
		cl -= 5;
	}
	if (cl == 0)
		return -1;
	*column = strndup(col, cl);
	return *column ? 0 : -1;
}

/* The template's leaves: "/pointer", "#N[.column[:json]]", "{key}" or
 * "=text"; "#N" must name an SQL step already added (its first row is
 * then kept: d->steps[N-1].returns). */
static int check(inbox_decl *d, const json_t *v, int depth, int *values,
                 char *why, size_t len)
{
	if (depth > RESULT_MAX_DEPTH)
		return say(why, len, INBOX_ERR_INVALID,
		           "result: nested too deep");
	if (++*values > RESULT_MAX_VALUES)
		return say(why, len, INBOX_ERR_INVALID,
		           "result: more than %d values", RESULT_MAX_VALUES);
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		if (s[0] == '=' || !strcmp(s, "{key}") ||
		    (s[0] == '/' && inbox__pointer_valid(s)))
			return 0;
		int step, as_json;
		char *col;
		if (row_ref(s, &step, &col, &as_json) < 0)
			return say(why, len, INBOX_ERR_INVALID,
			           "result: \"%s\" is neither a JSON pointer "
			           "(/data/orderId), a returned row (#1, "
			           "#1.column, #1.column:json), {key} nor a "
			           "literal (=text)",
			           s);
		free(col);
		if (step > d->nsteps)
			return say(why, len, INBOX_ERR_INVALID,
			           "result: \"%s\" names effect step %d, but "
			           "there are %d",
			           s, step, d->nsteps);
		if (d->steps[step - 1].kind != INBOX__DECL_SQL)
			return say(why, len, INBOX_ERR_INVALID,
			           "result: \"%s\": effect step %d is an "
			           "upsert, which returns no row",
			           s, step);
		d->steps[step - 1].returns = 1;
		return 0;
	}
	size_t i;
	const char *k;
	json_t *e;
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
		{
			int rc = check(d, e, depth + 1, values, why, len);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, e)
		{
			int rc = check(d, e, depth + 1, values, why, len);
			if (rc)
				return rc;
		}
		return 0;
	}
	return say(why, len, INBOX_ERR_INVALID,
	           "result: a number, boolean or null is no template leaf "
	           "(write \"=text\" for a literal)");
}

int inbox_decl_set_result(inbox_decl *d, const char *result_template, char *why,
                          size_t len)
{
	if (!d || !result_template)
		return say(why, len, INBOX_ERR_INVALID,
		           "a declaration and a template are required");
	if (d->result)
		return say(why, len, INBOX_ERR_INVALID,
		           "result: declared twice");
	json_error_t jerr;
	json_t *t = json_loads(result_template,
	                       JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
	if (!t)
		return say(why, len, INBOX_ERR_INVALID,
		           "result template: %s (line %d)", jerr.text,
		           jerr.line);
	int values = 0;
	/* what check() marks is only kept when the whole template is good */
	int *was = calloc((size_t)d->nsteps + 1, sizeof(*was));
	if (!was) {
		json_decref(t);
		return say(why, len, INBOX_ERR_NOMEM, "out of memory");
	}
	for (int i = 0; i < d->nsteps; i++)
		was[i] = d->steps[i].returns;
	int rc = check(d, t, 0, &values, why, len);
	if (rc) {
		for (int i = 0; i < d->nsteps; i++)
			d->steps[i].returns = was[i];
		free(was);
		json_decref(t);
		return rc;
	}
	free(was);
	d->result = t;
	return INBOX_OK;
}

/* Headers the http:// source writes itself, or that frame the message:
 * a route cannot store them. */
static const char *const own_headers[] = {"content-type",
                                          "content-length",
                                          "transfer-encoding",
                                          "connection",
                                          "keep-alive",
                                          "upgrade",
                                          "te",
                                          "trailer",
                                          "retry-after",
                                          "idempotent-replayed",
                                          "allow",
                                          "date",
                                          NULL};

static int token_char(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* The {leaf} parts of a header template, each checked as a result leaf
 * ("{key}" is the key). */
static int check_header(inbox_decl *d, const char *tmpl, char *why, size_t len)
{
	int values = 0;
	for (const char *p = tmpl; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return say(why, len, INBOX_ERR_INVALID,
			           "headers: a control character in a "
			           "template");
		if (*p == '}')
			return say(why, len, INBOX_ERR_INVALID,
			           "headers: an unmatched '}' in \"%s\"", tmpl);
		if (*p != '{')
			continue;
		const char *end = strchr(p + 1, '}');
		if (!end || end == p + 1)
			return say(why, len, INBOX_ERR_INVALID,
			           "headers: an unclosed or empty {} in \"%s\"",
			           tmpl);
		size_t n = (size_t)(end - p - 1);
		char leaf[600];
		if (n + 3 > sizeof(leaf))
			return say(why, len, INBOX_ERR_INVALID,
			           "headers: a {} part is too long");
		if (n == 3 && !strncmp(p + 1, "key", 3))
			memcpy(leaf, "{key}", 6);
		else {
			memcpy(leaf, p + 1, n);
			leaf[n] = '\0';
			if (leaf[0] == '=')
				return say(
				    why, len, INBOX_ERR_INVALID,
				    "headers: write literal text outside "
				    "{}");
		}
		json_t *l = json_string(leaf);
		if (!l)
			return say(why, len, INBOX_ERR_INVALID,
			           "headers: a {} part is not UTF-8");
		int rc = check(d, l, 0, &values, why, len);
		json_decref(l);
		if (rc)
			return rc;
		p = end;
	}
	return 0;
}

int inbox__decl_add_header(inbox_decl *d, const char *name, const char *tmpl,
                           char *why, size_t len)
{
	if (!d || !name || !tmpl || !*name)
		return say(why, len, INBOX_ERR_INVALID,
		           "headers: a name and a template are required");
	for (const char *p = name; *p; p++)
		if (!token_char((unsigned char)*p))
			return say(why, len, INBOX_ERR_INVALID,
			           "headers: \"%s\" is not a header name",
			           name);
	for (int i = 0; own_headers[i]; i++)
		if (!strcasecmp(name, own_headers[i]))
			return say(why, len, INBOX_ERR_INVALID,
			           "headers: %s is the source's own header",
			           name);
	if (d->headers) {
		const char *k;
		json_t *e;
		json_object_foreach(d->headers, k, e) if (
		    !strcasecmp(k, name)) return say(why, len,
		                                     INBOX_ERR_INVALID,
		                                     "headers: %s named twice",
		                                     name);
	}
	int *was = calloc((size_t)d->nsteps + 1, sizeof(*was));
	if (!was)
		return say(why, len, INBOX_ERR_NOMEM, "out of memory");
	for (int i = 0; i < d->nsteps; i++)
		was[i] = d->steps[i].returns;
	int rc = check_header(d, tmpl, why, len);
	if (rc == 0 && !d->headers && !(d->headers = json_object()))
		rc = say(why, len, INBOX_ERR_NOMEM, "out of memory");
	if (rc == 0 && json_object_set_new(d->headers, name, json_string(tmpl)))
		rc = say(why, len, INBOX_ERR_NOMEM, "out of memory");
	if (rc)
		for (int i = 0; i < d->nsteps; i++)
			d->steps[i].returns = was[i];
	free(was);
	return rc;
}

int inbox__decl_row_fn(int ncols, const char *const *values, void *payload)
{
	inbox__decl_row *r = payload;
	if (r->row)
		return 1;
	json_t *o = json_object();
	for (int i = 0; o && i < ncols; i++) {
		const char *name = inbox_row_column_name(i);
		char fallback[16];
		if (!name) {
			snprintf(fallback, sizeof(fallback), "%d", i + 1);
			name = fallback;
		}
		json_t *v = values[i] ? json_string(values[i]) : json_null();
		/* a text that is not UTF-8 cannot be a JSON string */
		if (!v) {
			r->bad_text = 1;
			json_decref(o);
			o = NULL;
			break;
		}
		if (json_object_set_new(o, name, v) < 0) {
			json_decref(o);
			o = NULL;
		}
	}
	if (!o && !r->bad_text)
		r->nomem = 1;
	r->row = o;
	return 1; /* the first row only */
}

/* One leaf's value (a new reference), or NULL with *verdict and the
 * reason set. */
static json_t *leaf(const char *s, const inbox_msg *m, json_t *const *rows,
                    int *verdict, char *why, size_t len)
{
	if (s[0] == '=')
		return json_string(s + 1);
	if (!strcmp(s, "{key}"))
		return json_string(inbox_msg_key(m));
	if (s[0] == '/') {
		json_t *root = inbox_msg_json(m);
		json_t *v = root ? inbox__pointer_get(root, s) : NULL;
		if (!v) {
			*verdict = INBOX_HANDLER_REJECT;
			snprintf(why, len, "result field %s is missing", s);
			return NULL;
		}
		return json_incref(v);
	}
	int step, as_json;
	char *col;
	if (row_ref(s, &step, &col, &as_json) < 0)
		return NULL; /* checked when declared: out of memory */
	json_t *row = rows[step - 1];
	if (!col) /* the whole row; none returned: null */
		return row ? json_incref(row) : json_null();
	json_t *v = row ? json_object_get(row, col) : NULL;
	if (row && !v) {
		/* the declaration's fault, not the message's: kept as a
		 * dead letter with the reason, replayable once fixed */
		*verdict = INBOX_HANDLER_REJECT;
		snprintf(why, len,
		         "result: effect step %d returned no column \"%s\"",
		         step, col);
		free(col);
		return NULL;
	}
	if (!v || json_is_null(v) || !as_json) {
		free(col);
		return v ? json_incref(v) : json_null();
	}
	json_error_t jerr;
	json_t *parsed =
	    json_loads(json_string_value(v), JSON_DECODE_ANY, &jerr);
	if (!parsed) {
		*verdict = INBOX_HANDLER_REJECT;
		snprintf(why, len,
		         "result: column \"%s\" of effect step %d is not JSON: "
		         "%s",
		         col, step, jerr.text);
	}
	free(col);
	return parsed;
}

static json_t *render(const json_t *t, const inbox_msg *m, json_t *const *rows,
                      int *verdict, char *why, size_t len)
{
	if (json_is_string(t))
		return leaf(json_string_value(t), m, rows, verdict, why, len);
	size_t i;
	const char *k;
	json_t *e;
	if (json_is_array(t)) {
		json_t *a = json_array();
		json_array_foreach(t, i, e)
		{
			json_t *r =
			    a ? render(e, m, rows, verdict, why, len) : NULL;
			if (!r || json_array_append_new(a, r) < 0) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	}
	json_t *o = json_object();
	json_object_foreach((json_t *)t, k, e)
	{
		json_t *r = o ? render(e, m, rows, verdict, why, len) : NULL;
		if (!r || json_object_set_new(o, k, r) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* One header's value: the template's text with each {leaf} replaced by
 * its value (a string as it is, null as nothing, anything else as
 * compact JSON). NULL with *verdict and why set. */
static json_t *render_header(const char *name, const char *tmpl,
                             const inbox_msg *m, json_t *const *rows,
                             int *verdict, char *why, size_t len)
{
	inbox__buf b = {0};
	int bad = 0;
	for (const char *p = tmpl; *p;) {
		if (*p != '{') {
			const char *q = strchr(p, '{');
			size_t n = q ? (size_t)(q - p) : strlen(p);
			bad |= inbox__buf_append(&b, p, n);
			p += n;
			continue;
		}
		const char *end = strchr(p, '}'); /* checked when declared */
		size_t n = (size_t)(end - p - 1);
		char leafs[600];
		if (n == 3 && !strncmp(p + 1, "key", 3))
			memcpy(leafs, "{key}", 6);
		else {
			memcpy(leafs, p + 1, n);
			leafs[n] = '\0';
		}
		json_t *v = leaf(leafs, m, rows, verdict, why, len);
		if (!v) {
			inbox__buf_free(&b);
			return NULL;
		}
		if (json_is_string(v)) {
			bad |= inbox__buf_append(&b, json_string_value(v),
			                         json_string_length(v));
		} else if (!json_is_null(v)) {
			char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
			bad |= t ? inbox__buf_puts(&b, t) : -1;
			free(t);
		}
		json_decref(v);
		p = end + 1;
	}
	for (size_t i = 0; !bad && i < b.len; i++)
		if ((unsigned char)b.data[i] < 0x20 || b.data[i] == 0x7f) {
			/* never a second header line (response splitting) */
			*verdict = INBOX_HANDLER_REJECT;
			snprintf(why, len,
			         "header %s: its value holds a control "
			         "character",
			         name);
			inbox__buf_free(&b);
			return NULL;
		}
	json_t *s = bad ? NULL : json_stringn(b.data ? b.data : "", b.len);
	if (!s && !bad) {
		*verdict = INBOX_HANDLER_REJECT;
		snprintf(why, len, "header %s: its value is not UTF-8", name);
	}
	inbox__buf_free(&b);
	return s;
}

/* {"headers":{...},"body":BODY}, BODY the declared result or null. */
static json_t *render_http(const inbox_decl *d, const inbox_msg *m,
                           json_t *const *rows, int *verdict, char *why,
                           size_t len)
{
	json_t *h = json_object(), *o = json_object();
	const char *k;
	json_t *e;
	int bad = !h || !o;
	json_object_foreach(d->headers, k, e)
	{
		json_t *v = bad ? NULL
		                : render_header(k, json_string_value(e), m,
		                                rows, verdict, why, len);
		if (!v || json_object_set_new(h, k, v) < 0) {
			bad = 1;
			break;
		}
	}
	json_t *body = bad ? NULL
	               : d->result
	                   ? render(d->result, m, rows, verdict, why, len)
	                   : json_null();
	if (bad || !body) {
		json_decref(body);
		json_decref(h);
		json_decref(o);
		return NULL;
	}
	if (json_object_set_new(o, "headers", h) < 0) { /* h taken */
		json_decref(body);
		json_decref(o);
		return NULL;
	}
	if (json_object_set_new(o, "body", body) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int inbox__decl_result_run(inbox_txn *t, const inbox_msg *m,
                           const inbox_decl *d, json_t *const *rows)
{
	char why[400] = "";
	int verdict = INBOX_HANDLER_RETRY; /* out of memory: not the message */
	json_t *v =
	    d->headers ? render_http(d, m, rows, &verdict, why, sizeof(why))
	               : render(d->result, m, rows, &verdict, why, sizeof(why));
	/* compact, in the template's order: the answer as declared */
	char *text = v ? json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER |
	                                   JSON_ENCODE_ANY)
	               : NULL;
	json_decref(v);
	if (!text) {
		if (!why[0])
			snprintf(why, sizeof(why),
			         "result: out of memory building it");
		inbox_txn_set_reason(t, why);
		return verdict;
	}
	size_t n = strlen(text);
	int rc = inbox_txn_set_result(
	    t, d->headers ? INBOX__HTTP_RESULT_TYPE : "application/json", text,
	    n);
	free(text);
	if (rc == INBOX_OK)
		return INBOX_HANDLER_OK;
	if (rc == INBOX_ERR_TOO_LARGE) {
		snprintf(why, sizeof(why),
		         "result of %zu bytes exceeds the consumer's "
		         "max_result_bytes",
		         n);
		inbox_txn_set_reason(t, why);
		return INBOX_HANDLER_REJECT;
	}
	snprintf(why, sizeof(why), "result: %s", inbox_strerror(rc));
	inbox_txn_set_reason(t, why);
	return INBOX_HANDLER_RETRY;
}
