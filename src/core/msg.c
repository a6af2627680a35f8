/* Messages: parsing a delivery into id, key and fingerprint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/consumer.h"
#include "schema/schema.h"

void inbox__msg_reset(inbox_msg *m)
{
	if (m->root)
		json_decref(m->root);
	m->root = NULL;
	m->id = NULL;
	inbox__buf_reset(&m->idbuf);
	inbox__buf_reset(&m->key);
	m->fp[0] = '\0';
	m->attempt = 1;
	m->d = NULL;
	m->nomem = 0;
	m->position = NULL;
	while (m->strs) {
		inbox__str *n = m->strs->next;
		free(m->strs);
		m->strs = n;
	}
}

void inbox__msg_free(inbox_msg *m)
{
	inbox__msg_reset(m);
	inbox__buf_free(&m->idbuf);
	inbox__buf_free(&m->key);
	inbox__buf_free(&m->posbuf);
}

/* Text of an id into m->idbuf; m->id stays NULL when there is none.
 * INBOX_ERR_INVALID when the id holds U+0000: as a C string it would be
 * cut short, and two ids differing after it would collide ("m\u0000a",
 * "m\u0000b"); INBOX_ERR_NOMEM. */
static int set_id(inbox_msg *m, json_t *v)
{
	int rc = inbox__value_text(&m->idbuf, v);
	if (rc < 0)
		return INBOX_ERR_NOMEM;
	if (rc != 0 || !m->idbuf.data)
		return INBOX_OK;
	if (memchr(m->idbuf.data, '\0', m->idbuf.len)) {
		inbox__buf_reset(&m->idbuf);
		return INBOX_ERR_INVALID;
	}
	m->id = m->idbuf.data;
	return INBOX_OK;
}

/* A delivery the source refused (inbox_delivery.refused): its reason. */
static void refused(const char *why, char *reason, size_t rlen)
{
	if (!*why || !inbox__utf8_valid(why, strlen(why)))
		why = "the source could not pass it on whole";
	snprintf(reason, rlen, "%s", why);
}

/* What is wrong with the message goes into reason (return 1, a dead
 * letter); running out of memory is not the message's fault (NOMEM). */
int inbox__msg_prepare(inbox_consumer *c, inbox_msg *m, const inbox_delivery *d,
                       char *reason, size_t rlen)
{
	char err[400];
	int rc;
	inbox__msg_reset(m);
	m->d = d;
	/* before any verdict: a dead letter keeps it too */
	m->position = inbox__position_text(d->position, &m->posbuf);
	if (d->position && !m->position)
		return INBOX_ERR_NOMEM;
	if (d->refused) {
		refused(d->refused, reason, rlen);
		return 1;
	}
	if (d->id && d->id[0]) {
		size_t n = strlen(d->id);
		if (!inbox__utf8_valid(d->id, n)) {
			/* A broker header; PostgreSQL would refuse it in a
			 * text column and the whole batch with it. */
			snprintf(reason, rlen, "message id is not valid UTF-8");
			return 1;
		}
		if (inbox__buf_append(&m->idbuf, d->id, n) < 0)
			return INBOX_ERR_NOMEM;
		m->id = m->idbuf.data;
	}
	if (!d->payload || d->payload_len == 0) {
		snprintf(reason, rlen, "empty payload");
		return 1;
	}
	if (d->payload_len > c->max_payload) {
		/* max_payload + 1 bytes is what sources hand over of a larger
		 * payload (and what its dead letter keeps, replayed): its real
		 * size may be anything above, so say no more than that. */
		if (d->payload_len - 1 == c->max_payload)
			snprintf(reason, rlen,
			         "payload of more than %zu bytes exceeds "
			         "max_payload %zu",
			         c->max_payload, c->max_payload);
		else
			snprintf(reason, rlen,
			         "payload of %zu bytes exceeds max_payload %zu",
			         d->payload_len, c->max_payload);
		return 1;
	}
	rc = inbox__json_parse(d->payload, d->payload_len, &m->root, err,
	                       sizeof(err));
	if (rc == INBOX_ERR_NOMEM)
		return rc;
	if (rc != 0) {
		snprintf(reason, rlen, "%s", err);
		return 1;
	}
	if (!m->id) {
		json_t *v = inbox__pointer_get(m->root, c->id_pointer);
		rc = v && (json_is_string(v) || json_is_integer(v))
		         ? set_id(m, v)
		         : INBOX_OK;
		if (rc == INBOX_ERR_NOMEM)
			return rc;
		if (rc < 0) {
			snprintf(reason, rlen,
			         "U+0000 in %s (the message id): cannot be "
			         "stored as text",
			         c->id_pointer);
			return 1;
		}
	}
	if (c->schema && inbox__schema_check(c->schema, m->root, d->payload_len,
	                                     reason, rlen) != 0) {
		/* Before the key: the violation is the better reason (a
		 * missing key field is usually a "required" too). The key,
		 * when it renders, is kept in the dead letter for operators. */
		rc = inbox__keytmpl_render(c->tmpl, m->root, m->id, &m->key,
		                           err, sizeof(err));
		if (rc == INBOX_ERR_NOMEM)
			return rc;
		if (rc != 0)
			inbox__buf_reset(&m->key);
		return 1;
	}
	if (!m->id && inbox__keytmpl_uses_id(c->tmpl)) {
		snprintf(reason, rlen, "missing message id (%s)",
		         c->id_pointer[0] ? c->id_pointer : "delivery");
		return 1;
	}
	rc = inbox__keytmpl_render(c->tmpl, m->root, m->id, &m->key, err,
	                           sizeof(err));
	if (rc == INBOX_ERR_NOMEM)
		return rc;
	if (rc != 0) {
		/* No key: what rendered before the failure ("create-invoice:")
		 * names nothing; the reason says which field was missing. */
		inbox__buf_reset(&m->key);
		snprintf(reason, rlen, "%s", err);
		return 1;
	}
	json_t *part = inbox__pointer_get(m->root, c->fp_pointer);
	if (!part) {
		snprintf(reason, rlen, "fingerprint field %s not found",
		         c->fp_pointer);
		return 1;
	}
	/* One scratch buffer per consumer (handles are single-threaded):
	 * no allocation per message once it has grown. A parsed document
	 * holds only finite numbers: only memory can fail here. */
	inbox__buf_reset(&c->canon);
	if (inbox__canon_append(&c->canon, part) != 0)
		return INBOX_ERR_NOMEM;
	inbox__sha256_hex(c->canon.data, c->canon.len, m->fp);
	if (!m->fp[0]) /* OpenSSL out of memory */
		return INBOX_ERR_NOMEM;
	return 0;
}

/* ---- public accessors ---- */

const char *inbox_msg_key(const inbox_msg *m)
{
	return m && m->key.len ? m->key.data : NULL;
}

struct json_t *inbox_msg_json(const inbox_msg *m)
{
	return m ? m->root : NULL;
}

const char *inbox_msg_id(const inbox_msg *m)
{
	return m ? m->id : NULL;
}

const char *inbox_msg_fingerprint(const inbox_msg *m)
{
	return m ? m->fp : NULL;
}

const char *inbox_msg_payload(const inbox_msg *m, size_t *len)
{
	if (!m || !m->d) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (len)
		*len = m->d->payload_len;
	return m->d->payload;
}

int32_t inbox_msg_attempt(const inbox_msg *m)
{
	return m ? m->attempt : 0;
}

const inbox_delivery *inbox_msg_delivery(const inbox_msg *m)
{
	return m ? m->d : NULL;
}

int inbox_msg_getn(const inbox_msg *cm, const char *pointer, const char **out,
                   size_t *len)
{
	inbox_msg *m = (inbox_msg *)cm; /* the string list is a cache */
	if (!m || !pointer || !out || !len)
		return INBOX_ERR_INVALID;
	*out = NULL;
	*len = 0;
	if (!inbox__pointer_valid(pointer))
		return INBOX_ERR_INVALID;
	if (!m->root)
		return INBOX_ERR_NOTFOUND;
	json_t *v = inbox__pointer_get(m->root, pointer);
	if (!v)
		return INBOX_ERR_NOTFOUND;
	if (json_is_null(v))
		return INBOX_OK;
	if (json_is_string(v)) {
		/* Lives as long as m->root, as the copies below do. */
		*out = json_string_value(v);
		*len = json_string_length(v);
		return INBOX_OK;
	}
	/* The handler may not pass NOMEM on: the consumer then fails the
	 * batch instead of counting an attempt against the message. */
	inbox__buf b = INBOX__BUF_INIT;
	if (inbox__value_text(&b, v) < 0) {
		inbox__buf_free(&b);
		m->nomem = 1;
		return INBOX_ERR_NOMEM;
	}
	inbox__str *s = malloc(sizeof(*s) + b.len + 1);
	if (!s) {
		inbox__buf_free(&b);
		m->nomem = 1;
		return INBOX_ERR_NOMEM;
	}
	memcpy(s->text, b.data ? b.data : "", b.len);
	s->text[b.len] = '\0';
	*len = b.len; /* canonical JSON escapes U+0000: no NUL inside */
	inbox__buf_free(&b);
	s->next = m->strs;
	m->strs = s;
	*out = s->text;
	return INBOX_OK;
}

int inbox_msg_get(const inbox_msg *m, const char *pointer, const char **out)
{
	size_t len;
	if (!out)
		return INBOX_ERR_INVALID;
	int rc = inbox_msg_getn(m, pointer, out, &len);
	if (rc == INBOX_OK && *out && memchr(*out, '\0', len)) {
		*out = NULL;
		return INBOX_ERR_NUL;
	}
	return rc;
}
