/* Outbox steps of a declaration: bodies rendered from templates. */
#include "effect/decl.h"

#include <inbox/outbox.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/json.h"

void inbox__decl_outbox_effect(inbox_outbox_effect *e,
                               const inbox__decl_outbox *s)
{
	*e = (inbox_outbox_effect)INBOX_OUTBOX_EFFECT_INIT;
	e->step = s->step;
	e->kind = s->kind;
	e->method = s->method;
	e->url = s->url;
	e->headers = s->headers;
	e->key_header = s->key_header;
	e->idempotent = s->idempotent;
	e->reconcile_url = s->reconcile_url;
}

/* The value of one template leaf (a new reference), or NULL with the
 * reason in why. */
static json_t *leaf(const char *spec, const inbox_msg *m, const inbox_decl *d,
                    const char *step, char *why, size_t len)
{
	if (spec[0] == '=')
		return json_string(spec + 1);
	if (strcmp(spec, "{key}") == 0)
		return json_string(inbox_msg_key(m));
	if (strcmp(spec, "{idempotency_key}") == 0) {
		char k[INBOX_OUTBOX_KEY_LEN + 1];
		if (inbox_outbox_key(d->consumer, inbox_msg_key(m), step, k) <
		    0)
			return NULL;
		return json_string(k);
	}
	json_t *root = inbox_msg_json(m);
	json_t *v = root ? inbox__pointer_get(root, spec) : NULL;
	if (!v) {
		snprintf(why, len, "outbox step %s: body field %s is missing",
		         step, spec);
		return NULL;
	}
	/* Shared, not copied: the rendered body is only read (canonicalized)
	 * and released before the message is. */
	return json_incref(v);
}

static json_t *render(const json_t *tmpl, const inbox_msg *m,
                      const inbox_decl *d, const char *step, char *why,
                      size_t len)
{
	if (json_is_string(tmpl))
		return leaf(json_string_value(tmpl), m, d, step, why, len);
	if (json_is_array(tmpl)) {
		json_t *a = json_array();
		size_t i;
		json_t *v;
		json_array_foreach(tmpl, i, v)
		{
			json_t *r = render(v, m, d, step, why, len);
			if (!r || json_array_append_new(a, r)) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	}
	json_t *o = json_object();
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)tmpl, k, v)
	{
		json_t *r = render(v, m, d, step, why, len);
		if (!r || json_object_set_new(o, k, r)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static int declare(inbox_txn *t, const inbox_msg *m, const inbox_decl *d,
                   const inbox__decl_outbox *s)
{
	char why[400] = "";
	inbox__buf body = INBOX__BUF_INIT;
	if (s->body) {
		json_t *v = render(s->body, m, d, s->step, why, sizeof(why));
		/* Canonical (RFC 8785): the same message always gives the
		 * same bytes, which is what an idempotent provider compares. */
		int bad = !v || inbox__canon_append(&body, v) < 0;
		json_decref(v);
		if (bad) {
			inbox__buf_free(&body);
			if (!why[0]) {
				snprintf(
				    why, sizeof(why),
				    "outbox step %s: cannot build the body",
				    s->step);
				inbox_txn_set_reason(t, why);
				return INBOX_HANDLER_RETRY;
			}
			inbox_txn_set_reason(t, why);
			return INBOX_HANDLER_REJECT;
		}
	}
	inbox_outbox_effect e;
	inbox__decl_outbox_effect(&e, s);
	e.body = body.data;
	e.body_len = body.len;
	e.max_attempts =
	    s->max_attempts ? s->max_attempts : d->outbox_max_attempts;
	int rc = inbox_txn_outbox_add(t, &e, NULL, NULL);
	inbox__buf_free(&body);
	if (rc == INBOX_OK)
		return INBOX_HANDLER_OK;
	inbox_store *st = inbox_txn_store(t);
	snprintf(why, sizeof(why), "outbox step %s: %s", s->step,
	         inbox_store_errmsg(st));
	inbox_txn_set_reason(t, why);
	return rc == INBOX_ERR_INVALID ? INBOX_HANDLER_REJECT
	                               : INBOX_HANDLER_RETRY;
}

int inbox__decl_outbox_run(inbox_txn *t, const inbox_msg *m,
                           const inbox_decl *d, int *ran)
{
	for (int i = 0; i < d->noutbox; i++) {
		int h = inbox__decl_holds(&d->outbox[i].when, m);
		if (h < 0) {
			inbox_txn_set_reason(t, "out of memory");
			return INBOX_HANDLER_RETRY;
		}
		if (!h)
			continue;
		++*ran;
		int v = declare(t, m, d, &d->outbox[i]);
		if (v != INBOX_HANDLER_OK)
			return v;
	}
	return INBOX_HANDLER_OK;
}
