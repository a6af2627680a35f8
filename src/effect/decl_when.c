/*
 * Filters of a declaration (inbox_decl_add_when, include/inbox/decl.h):
 * conditions on a message that decide which steps run for it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "core/internal.h"
#include "effect/decl.h"

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

static void when_free(inbox__decl_when *w)
{
	free(w->pointer);
	for (int i = 0; i < w->nvalues; i++)
		free(w->values ? w->values[i] : NULL);
	free(w->values);
	free(w->lens);
}

void inbox__decl_whens_free(inbox__decl_whens *w)
{
	for (int i = 0; w && i < w->n; i++)
		when_free(&w->v[i]);
	if (w) {
		free(w->v);
		w->v = NULL;
		w->n = 0;
	}
}

int inbox_decl_add_when(inbox_decl *d, inbox_decl_scope scope,
                        const inbox_decl_when *w, char *why, size_t len)
{
	if (!d || !w)
		return say(why, len, INBOX_ERR_INVALID, "d or w is NULL");
	if (w->version < 1 || w->version > INBOX_DECL_WHEN_VERSION)
		return say(why, len, INBOX_ERR_INVALID,
		           "inbox_decl_when version %u is not known (1..%d)",
		           w->version, INBOX_DECL_WHEN_VERSION);
	if (!w->pointer || !inbox__pointer_valid(w->pointer))
		return say(why, len, INBOX_ERR_INVALID,
		           "when: \"%s\" is not a JSON pointer (RFC 6901: \"\" "
		           "or /a/b)",
		           w->pointer ? w->pointer : "(null)");
	int n = 0;
	switch (w->op) {
	case INBOX_DECL_EQUALS:
		if (w->nvalues != 1 || !w->values || !w->values[0])
			return say(why, len, INBOX_ERR_INVALID,
			           "when: equals takes one value");
		n = 1;
		break;
	case INBOX_DECL_IN:
		if (w->nvalues < 1 || w->nvalues > INBOX_DECL_MAX_PARAMS ||
		    !w->values)
			return say(why, len, INBOX_ERR_INVALID,
			           "when: in takes 1 to %d values",
			           INBOX_DECL_MAX_PARAMS);
		for (int i = 0; i < w->nvalues; i++)
			if (!w->values[i])
				return say(why, len, INBOX_ERR_INVALID,
				           "when: in: value %d is NULL", i + 1);
		n = w->nvalues;
		break;
	case INBOX_DECL_EXISTS:
		if (w->exists != 0 && w->exists != 1)
			return say(why, len, INBOX_ERR_INVALID,
			           "when: exists is 1 or 0");
		break;
	default:
		return say(why, len, INBOX_ERR_INVALID,
		           "when: unknown operator %d (equals, in, exists)",
		           (int)w->op);
	}
	inbox__decl_whens *to;
	if (scope == INBOX_DECL_MESSAGE)
		to = &d->when;
	else if (scope == INBOX_DECL_LAST_STEP && d->last == 1)
		to = &d->steps[d->nsteps - 1].when;
	else if (scope == INBOX_DECL_LAST_STEP && d->last == 2)
		to = &d->outbox[d->noutbox - 1].when;
	else if (scope == INBOX_DECL_LAST_STEP)
		return say(why, len, INBOX_ERR_INVALID,
		           "when: no step added yet");
	else
		return say(why, len, INBOX_ERR_INVALID,
		           "when: unknown scope %d", (int)scope);
	void *p = realloc(to->v, (size_t)(to->n + 1) * sizeof(*to->v));
	if (!p)
		return say(why, len, INBOX_ERR_NOMEM, "out of memory");
	to->v = p;
	inbox__decl_when *c = &to->v[to->n];
	memset(c, 0, sizeof(*c));
	c->op = w->op;
	c->exists = w->exists;
	c->pointer = strdup(w->pointer);
	int bad = !c->pointer;
	if (!bad && n) {
		c->values = calloc((size_t)n, sizeof(*c->values));
		c->lens = calloc((size_t)n, sizeof(*c->lens));
		bad = !c->values || !c->lens;
		for (int i = 0; !bad && i < n; i++) {
			c->values[i] = strdup(w->values[i]);
			c->lens[i] = strlen(w->values[i]);
			bad = !c->values[i];
			c->nvalues = i + 1;
		}
	}
	if (bad) {
		when_free(c);
		return say(why, len, INBOX_ERR_NOMEM, "out of memory");
	}
	to->n++;
	return INBOX_OK;
}

/* One condition: 1 holds, 0 not, or INBOX_ERR_NOMEM. */
static int holds(const inbox__decl_when *w, const inbox_msg *m)
{
	const char *v = NULL;
	size_t n = 0;
	int rc = inbox_msg_getn(m, w->pointer, &v, &n);
	if (rc == INBOX_ERR_NOMEM)
		return rc;
	int found = rc == INBOX_OK;
	if (w->op == INBOX_DECL_EXISTS)
		return found == w->exists;
	if (!found)
		return 0;
	if (!v) { /* JSON null compares as "null" */
		v = "null";
		n = 4;
	}
	for (int i = 0; i < w->nvalues; i++)
		if (w->lens[i] == n && memcmp(w->values[i], v, n) == 0)
			return 1;
	return 0;
}

int inbox__decl_holds(const inbox__decl_whens *w, const inbox_msg *m)
{
	for (int i = 0; i < w->n; i++) {
		int h = holds(&w->v[i], m);
		if (h <= 0)
			return h;
	}
	return 1;
}
