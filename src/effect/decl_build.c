/*
 * Building a declaration (include/inbox/decl.h): every step checked
 * without a database and copied, so the handler only reads it.
 */
#include "effect/decl.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "core/internal.h"
#include "outbox/outbox.h"

/* Values in one body template, and how deep it nests: what the config
 * reader allows too. */
#define BODY_MAX_VALUES 10000
#define BODY_MAX_DEPTH  16

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

static int nomem(char *why, size_t len)
{
	return say(why, len, INBOX_ERR_NOMEM, "out of memory");
}

/* A copy of s (NULL stays NULL): 0, or -1 when out of memory. */
static int dup(char **out, const char *s)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : -1;
}

/* A copy of n strings, NULL-terminated: 0 or -1. */
static int dup_list(char ***out, const char *const *v, int n)
{
	*out = calloc((size_t)n + 1, sizeof(char *));
	if (!*out)
		return -1;
	for (int i = 0; i < n; i++)
		if (dup(&(*out)[i], v[i]) < 0)
			return -1;
	return 0;
}

static void free_list(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

static void free_step(inbox__decl_step *s)
{
	free(s->sql);
	free_list(s->params);
	free(s->table);
	free(s->key_column);
	free(s->key_value);
	free(s->version_column);
	free(s->version_value);
	free_list(s->set_columns);
	free_list(s->set_values);
	inbox__decl_whens_free(&s->when);
}

static void free_outbox(inbox__decl_outbox *s)
{
	free(s->step);
	free(s->kind);
	free(s->method);
	free(s->url);
	free(s->headers);
	free(s->key_header);
	free(s->reconcile_url);
	json_decref(s->body);
	inbox__decl_whens_free(&s->when);
}

int inbox_decl_new(inbox_decl **out, const inbox_decl_options *opts, char *why,
                   size_t len)
{
	inbox_decl_options def = INBOX_DECL_OPTIONS_INIT;
	if (!out)
		return say(why, len, INBOX_ERR_INVALID, "out is NULL");
	*out = NULL;
	if (!opts)
		opts = &def;
	if (opts->version < 1 || opts->version > INBOX_DECL_OPTIONS_VERSION)
		return say(why, len, INBOX_ERR_INVALID,
		           "inbox_decl_options version %u is not known (1..%d)",
		           opts->version, INBOX_DECL_OPTIONS_VERSION);
	if (opts->outbox_max_attempts < 0)
		return say(why, len, INBOX_ERR_INVALID,
		           "outbox_max_attempts must not be negative");
	inbox_decl *d = calloc(1, sizeof(*d));
	if (!d || dup(&d->consumer, opts->consumer) < 0 ||
	    dup(&d->setup, opts->setup_sql) < 0) {
		inbox_decl_free(d);
		return nomem(why, len);
	}
	d->outbox_max_attempts = opts->outbox_max_attempts;
	*out = d;
	return INBOX_OK;
}

void inbox_decl_free(inbox_decl *d)
{
	if (!d)
		return;
	for (int i = 0; i < d->nsteps; i++)
		free_step(&d->steps[i]);
	for (int i = 0; i < d->noutbox; i++)
		free_outbox(&d->outbox[i]);
	free(d->steps);
	free(d->outbox);
	free(d->consumer);
	free(d->setup);
	inbox__decl_whens_free(&d->when);
	json_decref(d->result);
	json_decref(d->headers);
	free(d);
}

int inbox_decl_steps(const inbox_decl *d)
{
	return d ? d->nsteps : 0;
}

int inbox_decl_outbox_steps(const inbox_decl *d)
{
	return d ? d->noutbox : 0;
}

/* Room for one more SQL or upsert step: a zeroed slot, or NULL. */
static inbox__decl_step *new_step(inbox_decl *d)
{
	if (d->nsteps == d->capsteps) {
		int cap = d->capsteps ? 2 * d->capsteps : 4;
		void *p = realloc(d->steps, (size_t)cap * sizeof(*d->steps));
		if (!p)
			return NULL;
		d->steps = p;
		d->capsteps = cap;
	}
	inbox__decl_step *s = &d->steps[d->nsteps];
	memset(s, 0, sizeof(*s));
	return s;
}

static int pointer_check(const char *ptr, const char *what, int n, char *why,
                         size_t len)
{
	if (ptr && inbox__pointer_valid(ptr))
		return 0;
	char num[16] = "";
	if (n > 0)
		snprintf(num, sizeof(num), " $%d", n);
	return say(why, len, INBOX_ERR_INVALID,
	           "%s%s: \"%s\" is not a JSON pointer (RFC 6901: \"\" or "
	           "/a/b)",
	           what, num, ptr ? ptr : "(null)");
}

int inbox_decl_add_sql(inbox_decl *d, const char *sql, int nparams,
                       const char *const *params, char *why, size_t len)
{
	if (!d || !sql)
		return say(why, len, INBOX_ERR_INVALID,
		           "no declaration or SQL");
	if (nparams < 0 || nparams > INBOX_DECL_MAX_PARAMS ||
	    (nparams > 0 && !params))
		return say(why, len, INBOX_ERR_INVALID,
		           "at most %d parameters (%d given)",
		           INBOX_DECL_MAX_PARAMS, nparams);
	for (int i = 0; i < nparams; i++)
		if (pointer_check(params[i], "effect parameter", i + 1, why,
		                  len))
			return INBOX_ERR_INVALID;
	char reason[512];
	if (inbox__decl_sql_check(sql, nparams, params, reason,
	                          sizeof(reason)) < 0)
		return say(why, len, INBOX_ERR_INVALID, "%s", reason);
	inbox__decl_step *s = new_step(d);
	if (!s)
		return nomem(why, len);
	s->kind = INBOX__DECL_SQL;
	s->nparams = nparams;
	if (dup(&s->sql, sql) < 0 || dup_list(&s->params, params, nparams)) {
		free_step(s);
		return nomem(why, len);
	}
	d->nsteps++;
	d->last = 1;
	return INBOX_OK;
}

int inbox_decl_add_upsert(inbox_decl *d, const inbox_decl_upsert *u, char *why,
                          size_t len)
{
	if (!d || !u)
		return say(why, len, INBOX_ERR_INVALID,
		           "no declaration or upsert");
	if (u->version < 1 || u->version > INBOX_DECL_UPSERT_VERSION)
		return say(why, len, INBOX_ERR_INVALID,
		           "inbox_decl_upsert version %u is not known (1..%d)",
		           u->version, INBOX_DECL_UPSERT_VERSION);
	if (!u->table || !*u->table || !u->key_column || !*u->key_column ||
	    !u->version_column || !*u->version_column)
		return say(why, len, INBOX_ERR_INVALID,
		           "upsert: table, key_column and version_column are "
		           "required");
	if (u->nset < 0 || u->nset > INBOX_DECL_MAX_PARAMS - 2 ||
	    (u->nset > 0 && (!u->set_columns || !u->set_pointers)))
		return say(why, len, INBOX_ERR_INVALID,
		           "upsert set: at most %d columns",
		           INBOX_DECL_MAX_PARAMS - 2);
	if (pointer_check(u->key_pointer, "upsert key", 0, why, len) ||
	    pointer_check(u->version_pointer, "upsert version", 0, why, len))
		return INBOX_ERR_INVALID;
	for (int i = 0; i < u->nset; i++) {
		if (!u->set_columns[i] || !*u->set_columns[i])
			return say(why, len, INBOX_ERR_INVALID,
			           "upsert set: column %d has no name", i + 1);
		if (pointer_check(u->set_pointers[i], "upsert value", 0, why,
		                  len))
			return INBOX_ERR_INVALID;
	}
	inbox__decl_step *s = new_step(d);
	if (!s)
		return nomem(why, len);
	s->kind = INBOX__DECL_UPSERT;
	s->nset = u->nset;
	if (dup(&s->table, u->table) < 0 ||
	    dup(&s->key_column, u->key_column) < 0 ||
	    dup(&s->key_value, u->key_pointer) < 0 ||
	    dup(&s->version_column, u->version_column) < 0 ||
	    dup(&s->version_value, u->version_pointer) < 0 ||
	    dup_list(&s->set_columns, u->set_columns, u->nset) < 0 ||
	    dup_list(&s->set_values, u->set_pointers, u->nset) < 0) {
		free_step(s);
		return nomem(why, len);
	}
	d->nsteps++;
	d->last = 1;
	return INBOX_OK;
}

/* A body template's leaves: strings only, each a pointer, a placeholder
 * or a literal. 0, or INBOX_ERR_INVALID with the reason. */
static int body_check(const json_t *v, int depth, int *values, char *why,
                      size_t len)
{
	if (depth > BODY_MAX_DEPTH)
		return say(why, len, INBOX_ERR_INVALID,
		           "body: nested too deep");
	if (++*values > BODY_MAX_VALUES)
		return say(why, len, INBOX_ERR_INVALID,
		           "body: more than %d values", BODY_MAX_VALUES);
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		if (s[0] == '=' || !strcmp(s, "{idempotency_key}") ||
		    !strcmp(s, "{key}") ||
		    (s[0] == '/' && inbox__pointer_valid(s)))
			return 0;
		return say(why, len, INBOX_ERR_INVALID,
		           "body: \"%s\" is neither a JSON pointer "
		           "(/data/orderId), {idempotency_key}, {key} nor a "
		           "literal (=text)",
		           s);
	}
	size_t i;
	const char *k;
	json_t *e;
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
		{
			int rc = body_check(e, depth + 1, values, why, len);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, e)
		{
			int rc = body_check(e, depth + 1, values, why, len);
			if (rc)
				return rc;
		}
		return 0;
	}
	return say(why, len, INBOX_ERR_INVALID,
	           "body: a number, boolean or null is no template leaf "
	           "(write \"=text\" for a literal)");
}

int inbox_decl_add_outbox(inbox_decl *d, const inbox_outbox_effect *e,
                          const char *body_template, char *why, size_t len)
{
	if (!d || !e)
		return say(why, len, INBOX_ERR_INVALID,
		           "no declaration or effect");
	if (e->version < 1 || e->version > INBOX_OUTBOX_EFFECT_VERSION)
		return say(
		    why, len, INBOX_ERR_INVALID,
		    "inbox_outbox_effect version %u is not known (1..%d)",
		    e->version, INBOX_OUTBOX_EFFECT_VERSION);
	if (!d->consumer || !*d->consumer)
		return say(why, len, INBOX_ERR_INVALID,
		           "outbox steps need the consumer's name "
		           "(inbox_decl_options.consumer)");
	if (e->body || e->body_len)
		return say(why, len, INBOX_ERR_INVALID,
		           "step %s: the body comes from the template (set "
		           "body NULL)",
		           e->step ? e->step : "(null)");
	char reason[300] = "";
	int rc = inbox__outbox_effect_check(e, reason, sizeof(reason));
	if (rc == INBOX_ERR_NOMEM)
		return nomem(why, len);
	if (rc < 0)
		return say(why, len, INBOX_ERR_INVALID, "%s", reason);
	for (int i = 0; i < d->noutbox; i++)
		if (!strcmp(d->outbox[i].step, e->step))
			return say(why, len, INBOX_ERR_INVALID,
			           "step \"%s\" is declared twice", e->step);
	json_t *body = NULL;
	if (body_template) {
		json_error_t jerr;
		body =
		    json_loads(body_template,
		               JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
		if (!body)
			return say(why, len, INBOX_ERR_INVALID,
			           "step %s: body template: %s (line %d)",
			           e->step, jerr.text, jerr.line);
		int values = 0;
		rc = body_check(body, 0, &values, reason, sizeof(reason));
		if (rc) {
			json_decref(body);
			return say(why, len, rc, "step %s: %s", e->step,
			           reason);
		}
	}
	if (d->noutbox == d->capoutbox) {
		int cap = d->capoutbox ? 2 * d->capoutbox : 4;
		void *p = realloc(d->outbox, (size_t)cap * sizeof(*d->outbox));
		if (!p) {
			json_decref(body);
			return nomem(why, len);
		}
		d->outbox = p;
		d->capoutbox = cap;
	}
	inbox__decl_outbox *s = &d->outbox[d->noutbox];
	memset(s, 0, sizeof(*s));
	s->body = body;
	s->idempotent = e->idempotent;
	s->max_attempts = e->max_attempts;
	if (dup(&s->step, e->step) < 0 || dup(&s->kind, e->kind) < 0 ||
	    dup(&s->method, e->method) < 0 || dup(&s->url, e->url) < 0 ||
	    dup(&s->headers, e->headers) < 0 ||
	    dup(&s->key_header, e->key_header) < 0 ||
	    dup(&s->reconcile_url, e->reconcile_url) < 0) {
		free_outbox(s);
		return nomem(why, len);
	}
	d->noutbox++;
	d->last = 2;
	return INBOX_OK;
}
