/* Redis source: a stream entry ([id, [field, value, ...]]) as a delivery —
 * payload, id, headers and position by the rules in redis.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "source/redis/redis.h"

static void slot_reset(rs_slot *slot)
{
	inbox__buf_reset(&slot->text);
	slot->entry_id[0] = '\0';
	slot->deleted = 0;
	slot->from_pel = 0;
	slot->need_count = 0;
	slot->count = 1;
	slot->payload = NULL;
	slot->payload_len = 0;
	slot->id_at = slot->headers_at = slot->position_at = slot->payload_at =
	    -1;
}

static int is_str(const redisReply *r)
{
	return r &&
	       (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

static int name_is(const redisReply *r, const char *name)
{
	size_t n = strlen(name);
	return r->len == n && memcmp(r->str, name, n) == 0;
}

static int same_name(const redisReply *a, const redisReply *b)
{
	return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

/* Append {"name":"value",...} of the field pairs f[0..2*np), leaving out
 * the pairs named like `skip` (may be NULL); of a repeated name the last
 * value is kept. Then a NUL. Returns the start offset or -1 (NOMEM). */
static long put_object(inbox__buf *b, redisReply *const *f, size_t np,
                       const redisReply *skip)
{
	long at = (long)b->len;
	int rc = inbox__buf_putc(b, '{');
	int first = 1;
	for (size_t i = 0; i < np && rc == 0; i++) {
		const redisReply *name = f[2 * i], *val = f[2 * i + 1];
		if (skip && same_name(name, skip))
			continue;
		int later = 0;
		for (size_t j = i + 1; j < np && !later; j++)
			later = same_name(name, f[2 * j]);
		if (later)
			continue;
		if (!first)
			rc |= inbox__buf_putc(b, ',');
		first = 0;
		rc |= inbox__src_json_text(b, name->str, name->len, 0);
		rc |= inbox__buf_putc(b, ':');
		rc |= inbox__src_json_text(b, val->str, val->len, 1);
	}
	rc |= inbox__buf_putc(b, '}');
	rc |= inbox__buf_putc(b, '\0');
	return rc ? -1 : at;
}

/* Append a NUL-terminated copy; returns its offset or -1. */
static long put_cstr(inbox__buf *b, const char *s, size_t n)
{
	long at = (long)b->len;
	if (inbox__buf_append(b, s, n) < 0 || inbox__buf_putc(b, '\0') < 0)
		return -1;
	return at;
}

static int put_position(redis_source *rs, rs_slot *slot)
{
	inbox__buf *b = &slot->text;
	slot->position_at = (long)b->len;
	if (inbox__buf_puts(b, rs->stream) < 0 || inbox__buf_putc(b, '/') < 0 ||
	    inbox__buf_puts(b, slot->entry_id) < 0 ||
	    inbox__buf_putc(b, '\0') < 0)
		return INBOX_ERR_NOMEM;
	return INBOX_OK;
}

int inbox__redis_slot_tombstone(redis_source *rs, rs_slot *slot,
                                const char *entry_id, size_t idlen)
{
	slot_reset(slot);
	if (idlen >= RS_ID_MAX) {
		inbox__source_seterr(
		    &rs->base, "redis: entry id too long on %s", rs->label);
		return INBOX_ERR_SOURCE;
	}
	memcpy(slot->entry_id, entry_id, idlen);
	slot->entry_id[idlen] = '\0';
	slot->deleted = 1;
	slot->count = 0;
	int rc = put_position(rs, slot);
	/* Refused with its own reason (and so its own dead letter: without
	 * it every tombstone would be the same empty message). */
	if (rc == INBOX_OK &&
	    (slot->id_at = inbox__src_refuse(
	         &slot->text,
	         "entry %s/%s was deleted from the stream while pending: "
	         "there is nothing left to process",
	         rs->stream, slot->entry_id)) < 0)
		rc = INBOX_ERR_NOMEM;
	return rc;
}

/* The delivery id: field "id", else "message-id" (last occurrence);
 * *name says which. */
static const redisReply *id_field(redisReply *const *f, size_t np,
                                  const char **name)
{
	static const char *const names[] = {"id", "message-id"};
	for (size_t k = 0; k < 2; k++) {
		const redisReply *v = NULL;
		for (size_t i = 0; i < np; i++)
			if (name_is(f[2 * i], names[k]))
				v = f[2 * i + 1];
		if (v) {
			*name = names[k];
			return v;
		}
	}
	return NULL;
}

/* The id (or its refusal: a NUL byte, not UTF-8) into the slot's text. */
static int put_id(rs_slot *slot, redisReply *const *f, size_t np)
{
	const char *name = NULL;
	const redisReply *v = id_field(f, np, &name);
	if (!v)
		return INBOX_OK;
	char what[48];
	long at = -1;
	snprintf(what, sizeof(what), "Redis field \"%s\"", name);
	int ok = inbox__src_check_id(&slot->text, what, v->str, v->len, &at);
	if (ok > 0)
		at = put_cstr(&slot->text, v->str, v->len);
	if (ok != 0 && at < 0)
		return INBOX_ERR_NOMEM;
	if (ok != 0)
		slot->id_at = at;
	return INBOX_OK;
}

/* The payload field: the last "payload", else the last "data". */
static long payload_field(redisReply *const *f, size_t np)
{
	static const char *const names[] = {"payload", "data"};
	for (size_t k = 0; k < 2; k++) {
		long at = -1;
		for (size_t i = 0; i < np; i++)
			if (name_is(f[2 * i], names[k]))
				at = (long)i;
		if (at >= 0)
			return at;
	}
	return -1;
}

static int bad_shape(redis_source *rs)
{
	inbox__source_seterr(&rs->base,
	                     "redis: unexpected reply shape for a "
	                     "stream entry on %s",
	                     rs->label);
	return INBOX_ERR_SOURCE;
}

static int fill_fields(redis_source *rs, rs_slot *slot, const redisReply *fl)
{
	redisReply *const *f = fl->element;
	size_t np = fl->elements / 2;
	inbox__buf *b = &slot->text;
	long pf = payload_field(f, np);
	size_t len;
	if (pf >= 0) {
		const redisReply *pv = f[2 * pf + 1];
		slot->payload = pv->str ? pv->str : "";
		len = pv->len;
		if (np > 1) {
			slot->headers_at = put_object(b, f, np, f[2 * pf]);
			if (slot->headers_at < 0)
				return INBOX_ERR_NOMEM;
			if (b->data[slot->headers_at + 1] == '}')
				slot->headers_at = -1; /* only repeats of it */
		}
	} else {
		slot->payload_at = put_object(b, f, np, NULL);
		if (slot->payload_at < 0)
			return INBOX_ERR_NOMEM;
		len = strlen(b->data + slot->payload_at);
	}
	slot->payload_len = inbox__src_payload_len(len, rs->max_payload);
	long at = inbox__src_refuse_oversize(b, len, rs->max_payload);
	if (at == -2)
		return INBOX_ERR_NOMEM;
	if (at >= 0) {
		slot->id_at = at;
		return INBOX_OK;
	}
	return put_id(slot, f, np);
}

int inbox__redis_slot_from_entry(redis_source *rs, rs_slot *slot,
                                 const redisReply *entry)
{
	slot_reset(slot);
	if (!entry || entry->type != REDIS_REPLY_ARRAY ||
	    entry->elements != 2 || !is_str(entry->element[0]))
		return bad_shape(rs);
	const redisReply *idr = entry->element[0];
	const redisReply *fl = entry->element[1];
	if (!fl || fl->type == REDIS_REPLY_NIL ||
	    (fl->type == REDIS_REPLY_ARRAY && fl->elements == 0))
		/* Pending but deleted from the stream (XADD needs a field). */
		return inbox__redis_slot_tombstone(rs, slot, idr->str,
		                                   idr->len);
	if (fl->type != REDIS_REPLY_ARRAY || fl->elements % 2 != 0)
		return bad_shape(rs);
	for (size_t i = 0; i < fl->elements; i++)
		if (!is_str(fl->element[i]))
			return bad_shape(rs);
	if (idr->len >= RS_ID_MAX)
		return bad_shape(rs);
	memcpy(slot->entry_id, idr->str, idr->len);
	slot->entry_id[idr->len] = '\0';
	int rc = put_position(rs, slot);
	if (rc == INBOX_OK)
		rc = fill_fields(rs, slot, fl);
	return rc;
}

void inbox__redis_slot_deliver(const rs_slot *slot, inbox_delivery *d)
{
	const char *t = slot->text.data;
	*d = (inbox_delivery){0};
	d->position = t + slot->position_at;
	d->delivery_count = slot->count;
	if (slot->deleted) {
		inbox__src_set_id(d, t + slot->id_at);
		d->payload = "";
		d->payload_len = 0;
		d->headers = RS_TOMBSTONE_HEADERS;
		return;
	}
	d->timestamp_ms = inbox__redis_id_ms(slot->entry_id);
	inbox__src_set_id(d, slot->id_at >= 0 ? t + slot->id_at : NULL);
	d->headers = slot->headers_at >= 0 ? t + slot->headers_at : NULL;
	d->payload =
	    slot->payload_at >= 0 ? t + slot->payload_at : slot->payload;
	d->payload_len = slot->payload_len;
}

int64_t inbox__redis_id_ms(const char *entry_id)
{
	/* 2000-01-01T00:00:00Z: ids below are explicit, not times. */
	const int64_t plausible = 946684800000LL;
	int64_t ms = 0;
	for (const char *p = entry_id; *p >= '0' && *p <= '9'; p++) {
		if (ms > (INT64_MAX - 9) / 10)
			return 0;
		ms = ms * 10 + (*p - '0');
	}
	return ms >= plausible ? ms : 0;
}
