/*
 * Key templates: "create-invoice:{/data/orderId}". Literal text, {id} for
 * the message id, {/json/pointer} for a value of the payload, "{{" and "}}"
 * for literal braces. Compiled once per consumer, rendered per message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "core/internal.h"

#define KEY_MAX 512

typedef enum part_kind { PART_LIT, PART_ID, PART_PTR } part_kind;

typedef struct part {
	part_kind kind;
	char *text; /* literal bytes or the pointer; NULL for PART_ID */
	size_t len;
} part;

struct inbox__keytmpl {
	part *parts;
	size_t n;
	int uses_id;
};

static int add_part(inbox__keytmpl *t, part_kind kind, const char *text,
                    size_t len)
{
	/* Merge adjacent literals ("a{{b" is one literal "a{b"). */
	if (kind == PART_LIT && t->n && t->parts[t->n - 1].kind == PART_LIT) {
		part *last = &t->parts[t->n - 1];
		char *p = realloc(last->text, last->len + len + 1);
		if (!p)
			return -1;
		memcpy(p + last->len, text, len);
		last->len += len;
		p[last->len] = '\0';
		last->text = p;
		return 0;
	}
	part *ps = realloc(t->parts, (t->n + 1) * sizeof(*ps));
	if (!ps)
		return -1;
	t->parts = ps;
	part *np = &ps[t->n];
	np->kind = kind;
	np->len = len;
	np->text = NULL;
	if (kind != PART_ID) {
		np->text = malloc(len + 1);
		if (!np->text)
			return -1;
		memcpy(np->text, text, len);
		np->text[len] = '\0';
	}
	t->n++;
	if (kind == PART_ID)
		t->uses_id = 1;
	return 0;
}

/* The placeholder whose '{' is at tmpl[at]; *end receives the offset just
 * after its '}'. */
static int compile_placeholder(inbox__keytmpl *t, const char *tmpl, size_t at,
                               size_t *end, char *err, size_t errlen)
{
	const char *body = tmpl + at + 1;
	size_t len = strcspn(body, "{}");
	if (body[len] != '}') {
		if (body[len] == '{')
			inbox__seterr(
			    err, errlen,
			    "key template: '{' inside the placeholder "
			    "opened at byte %zu",
			    at);
		else
			inbox__seterr(err, errlen,
			              "key template: unclosed '{' at byte %zu",
			              at);
		return INBOX_ERR_INVALID;
	}
	*end = at + 1 + len + 1;
	if (len == 0) {
		inbox__seterr(err, errlen,
		              "key template: empty placeholder {} at byte %zu",
		              at);
		return INBOX_ERR_INVALID;
	}
	if (len == 2 && memcmp(body, "id", 2) == 0)
		return add_part(t, PART_ID, NULL, 0) < 0 ? INBOX_ERR_NOMEM : 0;
	if (body[0] != '/') {
		inbox__seterr(
		    err, errlen,
		    "key template: invalid placeholder {%.*s} at byte %zu: "
		    "expected {id} or a JSON pointer such as {/data/id}",
		    (int)len, body, at);
		return INBOX_ERR_INVALID;
	}
	if (add_part(t, PART_PTR, body, len) < 0)
		return INBOX_ERR_NOMEM;
	if (!inbox__pointer_valid(t->parts[t->n - 1].text)) {
		inbox__seterr(
		    err, errlen,
		    "key template: invalid JSON pointer {%.*s} at byte %zu "
		    "('~' must be followed by 0 or 1)",
		    (int)len, body, at);
		return INBOX_ERR_INVALID;
	}
	return 0;
}

static int compile(inbox__keytmpl *t, const char *tmpl, char *err,
                   size_t errlen)
{
	size_t n = strlen(tmpl);
	if (!inbox__utf8_valid(tmpl, n)) {
		inbox__seterr(err, errlen, "key template is not valid UTF-8");
		return INBOX_ERR_INVALID;
	}
	size_t i = 0;
	while (i < n) {
		size_t lit = strcspn(tmpl + i, "{}");
		if (lit && add_part(t, PART_LIT, tmpl + i, lit) < 0)
			goto nomem;
		i += lit;
		if (i >= n)
			break;
		if (tmpl[i] == tmpl[i + 1]) { /* "{{" or "}}" */
			if (add_part(t, PART_LIT, tmpl + i, 1) < 0)
				goto nomem;
			i += 2;
		} else if (tmpl[i] == '}') {
			inbox__seterr(
			    err, errlen,
			    "key template: unmatched '}' at byte %zu (write "
			    "\"}}\" for a literal brace)",
			    i);
			return INBOX_ERR_INVALID;
		} else {
			size_t end;
			int rc =
			    compile_placeholder(t, tmpl, i, &end, err, errlen);
			if (rc == INBOX_ERR_NOMEM)
				goto nomem;
			if (rc < 0)
				return rc;
			i = end;
		}
	}
	return 0;
nomem:
	inbox__seterr(err, errlen, "out of memory");
	return INBOX_ERR_NOMEM;
}

int inbox__keytmpl_compile(inbox__keytmpl **out, const char *tmpl, char *err,
                           size_t errlen)
{
	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (!tmpl || !tmpl[0])
		tmpl = "{id}";
	inbox__keytmpl *t = calloc(1, sizeof(*t));
	if (!t) {
		inbox__seterr(err, errlen, "out of memory");
		return INBOX_ERR_NOMEM;
	}
	int rc = compile(t, tmpl, err, errlen);
	if (rc < 0) {
		inbox__keytmpl_free(t);
		return rc;
	}
	if (t->n == 0) { /* unreachable: "" became "{id}" */
		inbox__keytmpl_free(t);
		inbox__seterr(err, errlen, "key template: empty");
		return INBOX_ERR_INVALID;
	}
	*out = t;
	return 0;
}

/* Append the value of one pointer placeholder. */
static int render_ptr(const part *p, json_t *root, inbox__buf *out, char *err,
                      size_t errlen)
{
	json_t *v = root ? inbox__pointer_get(root, p->text) : NULL;
	if (!v || json_is_null(v)) {
		inbox__seterr(err, errlen, "missing key field %s", p->text);
		return INBOX_ERR_INVALID;
	}
	if (!json_is_string(v) && !json_is_number(v)) {
		inbox__seterr(err, errlen,
		              "key field %s is not a string or number",
		              p->text);
		return INBOX_ERR_INVALID;
	}
	size_t mark = out->len;
	if (inbox__value_text(out, v) < 0) {
		inbox__seterr(err, errlen, "out of memory");
		return INBOX_ERR_NOMEM;
	}
	/* A NUL would truncate the key where it is used as a C string and
	 * make different values collide. */
	if (memchr(out->data + mark, '\0', out->len - mark)) {
		inbox__seterr(
		    err, errlen,
		    "U+0000 in key field %s: cannot be stored as text",
		    p->text);
		return INBOX_ERR_INVALID;
	}
	return 0;
}

int inbox__keytmpl_render(const inbox__keytmpl *t, json_t *root,
                          const char *msg_id, inbox__buf *out, char *err,
                          size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	inbox__buf_reset(out);
	for (size_t i = 0; i < t->n; i++) {
		const part *p = &t->parts[i];
		int rc = 0;
		switch (p->kind) {
		case PART_LIT:
			rc = inbox__buf_append(out, p->text, p->len);
			break;
		case PART_ID:
			if (!msg_id) {
				inbox__seterr(err, errlen,
				              "missing message id");
				return INBOX_ERR_INVALID;
			}
			rc = inbox__buf_puts(out, msg_id);
			break;
		case PART_PTR:
			rc = render_ptr(p, root, out, err, errlen);
			if (rc < 0)
				return rc;
			break;
		}
		if (rc < 0) {
			inbox__seterr(err, errlen, "out of memory");
			return INBOX_ERR_NOMEM;
		}
		if (out->len > KEY_MAX) {
			inbox__seterr(err, errlen, "key longer than %d bytes",
			              KEY_MAX);
			return INBOX_ERR_INVALID;
		}
	}
	if (out->len == 0) {
		inbox__seterr(err, errlen, "empty key");
		return INBOX_ERR_INVALID;
	}
	/* Template and JSON strings are valid UTF-8; a message id from the
	 * broker may not be, and databases reject such text. */
	if (!inbox__utf8_valid(out->data, out->len)) {
		inbox__seterr(err, errlen, "key is not valid UTF-8");
		return INBOX_ERR_INVALID;
	}
	return 0;
}

int inbox__keytmpl_uses_id(const inbox__keytmpl *t)
{
	return t ? t->uses_id : 0;
}

void inbox__keytmpl_free(inbox__keytmpl *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->parts[i].text);
	free(t->parts);
	free(t);
}
