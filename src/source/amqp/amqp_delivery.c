/*
 * RabbitMQ source: what a delivery tells the consumer — the message id,
 * the headers as JSON, the position and the delivery count.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "source/amqp/amqp_source.h"

#define MAX_DEPTH 16

static int put_bytes(inbox__buf *out, amqp_bytes_t b)
{
	return inbox__src_json_text(out, b.bytes, b.len, 0);
}

static int put_decimal(inbox__buf *out, amqp_decimal_t d)
{
	char digits[16];
	int n = snprintf(digits, sizeof(digits), "%" PRIu32, d.value);
	int dec = d.decimals;
	if (dec == 0)
		return inbox__buf_puts(out, digits);
	if (dec > 9) /* beyond uint32 precision: keep it exact as text */
		return inbox__buf_printf(out, "\"%se-%d\"", digits, dec);
	if (n <= dec) {
		if (inbox__buf_puts(out, "0.") < 0)
			return -1;
		for (int k = 0; k < dec - n; k++)
			if (inbox__buf_putc(out, '0') < 0)
				return -1;
		return inbox__buf_puts(out, digits);
	}
	return inbox__buf_printf(out, "%.*s.%s", n - dec, digits,
	                         digits + (n - dec));
}

static int put_table(inbox__buf *out, const amqp_table_t *t, int depth);

static int put_value(inbox__buf *out, const amqp_field_value_t *v, int depth)
{
	switch (v->kind) {
	case AMQP_FIELD_KIND_BOOLEAN:
		return inbox__buf_puts(out,
		                       v->value.boolean ? "true" : "false");
	case AMQP_FIELD_KIND_I8:
		return inbox__buf_printf(out, "%d", v->value.i8);
	case AMQP_FIELD_KIND_U8:
		return inbox__buf_printf(out, "%u", v->value.u8);
	case AMQP_FIELD_KIND_I16:
		return inbox__buf_printf(out, "%d", v->value.i16);
	case AMQP_FIELD_KIND_U16:
		return inbox__buf_printf(out, "%u", v->value.u16);
	case AMQP_FIELD_KIND_I32:
		return inbox__buf_printf(out, "%" PRId32, v->value.i32);
	case AMQP_FIELD_KIND_U32:
		return inbox__buf_printf(out, "%" PRIu32, v->value.u32);
	case AMQP_FIELD_KIND_I64:
		return inbox__buf_printf(out, "%" PRId64, v->value.i64);
	case AMQP_FIELD_KIND_U64:
	case AMQP_FIELD_KIND_TIMESTAMP:
		return inbox__buf_printf(out, "%" PRIu64, v->value.u64);
	case AMQP_FIELD_KIND_F32:
		if (!isfinite(v->value.f32))
			return inbox__buf_puts(out, "null");
		return inbox__buf_printf(out, "%.9g", (double)v->value.f32);
	case AMQP_FIELD_KIND_F64:
		if (!isfinite(v->value.f64))
			return inbox__buf_puts(out, "null");
		return inbox__buf_printf(out, "%.17g", v->value.f64);
	case AMQP_FIELD_KIND_DECIMAL:
		return put_decimal(out, v->value.decimal);
	case AMQP_FIELD_KIND_UTF8:
	case AMQP_FIELD_KIND_BYTES:
		return put_bytes(out, v->value.bytes);
	case AMQP_FIELD_KIND_ARRAY: {
		const amqp_array_t *a = &v->value.array;
		if (depth >= MAX_DEPTH)
			return inbox__buf_puts(out, "null");
		if (inbox__buf_putc(out, '[') < 0)
			return -1;
		for (int i = 0; i < a->num_entries; i++) {
			if ((i && inbox__buf_putc(out, ',') < 0) ||
			    put_value(out, &a->entries[i], depth + 1) < 0)
				return -1;
		}
		return inbox__buf_putc(out, ']');
	}
	case AMQP_FIELD_KIND_TABLE:
		if (depth >= MAX_DEPTH)
			return inbox__buf_puts(out, "null");
		return put_table(out, &v->value.table, depth + 1);
	default: /* VOID and anything unknown */
		return inbox__buf_puts(out, "null");
	}
}

static int same_key(amqp_bytes_t a, amqp_bytes_t b)
{
	return a.len == b.len &&
	       (a.len == 0 || !memcmp(a.bytes, b.bytes, a.len));
}

static int put_table(inbox__buf *out, const amqp_table_t *t, int depth)
{
	int first = 1;
	if (inbox__buf_putc(out, '{') < 0)
		return -1;
	for (int i = 0; i < t->num_entries; i++) {
		const amqp_table_entry_t *e = &t->entries[i];
		int later = 0;
		/* A name that is not text (a NUL byte, not UTF-8) is kept
		 * too, as "hex:" + its bytes (put_bytes), never dropped. */
		for (int j = i + 1; j < t->num_entries && !later; j++)
			later = same_key(e->key, t->entries[j].key);
		if (later) /* the last value of a repeated name wins */
			continue;
		if ((!first && inbox__buf_putc(out, ',') < 0) ||
		    put_bytes(out, e->key) < 0 ||
		    inbox__buf_putc(out, ':') < 0 ||
		    put_value(out, &e->value, depth) < 0)
			return -1;
		first = 0;
	}
	return inbox__buf_putc(out, '}');
}

int inbox__amqp_table_json(inbox__buf *out, const amqp_table_t *t)
{
	return put_table(out, t, 0);
}

/* ------------------------------------------------------------------ */

static const amqp_field_value_t *lookup(const amqp_table_t *t, const char *key)
{
	const amqp_field_value_t *found = NULL;
	size_t n = strlen(key);
	for (int i = 0; i < t->num_entries; i++) {
		amqp_bytes_t k = t->entries[i].key;
		if (k.len == n && !memcmp(k.bytes, key, n))
			found = &t->entries[i].value; /* last one wins */
	}
	return found;
}

/* An integer field as int64; 0 if not an integer (or negative). */
static int64_t int_value(const amqp_field_value_t *v)
{
	int64_t x = 0;
	if (!v)
		return 0;
	switch (v->kind) {
	case AMQP_FIELD_KIND_I8:
		x = v->value.i8;
		break;
	case AMQP_FIELD_KIND_U8:
		x = v->value.u8;
		break;
	case AMQP_FIELD_KIND_I16:
		x = v->value.i16;
		break;
	case AMQP_FIELD_KIND_U16:
		x = v->value.u16;
		break;
	case AMQP_FIELD_KIND_I32:
		x = v->value.i32;
		break;
	case AMQP_FIELD_KIND_U32:
		x = v->value.u32;
		break;
	case AMQP_FIELD_KIND_I64:
		x = v->value.i64;
		break;
	case AMQP_FIELD_KIND_U64:
		x = v->value.u64 > INT32_MAX ? INT32_MAX
		                             : (int64_t)v->value.u64;
		break;
	default:
		x = 0;
	}
	if (x < 0)
		return 0;
	return x > INT32_MAX ? INT32_MAX : x;
}

/* Rounds through the retry queue recorded by the broker in x-death. */
static int64_t xdeath_rounds(const amqp_source *s, const amqp_table_t *h)
{
	const amqp_field_value_t *v = lookup(h, "x-death");
	int64_t sum = 0;
	size_t qn = strlen(s->retry_queue);
	if (!v || v->kind != AMQP_FIELD_KIND_ARRAY)
		return 0;
	for (int i = 0; i < v->value.array.num_entries; i++) {
		const amqp_field_value_t *e = &v->value.array.entries[i];
		if (e->kind != AMQP_FIELD_KIND_TABLE)
			continue;
		const amqp_field_value_t *q = lookup(&e->value.table, "queue");
		if (!q ||
		    (q->kind != AMQP_FIELD_KIND_UTF8 &&
		     q->kind != AMQP_FIELD_KIND_BYTES) ||
		    q->value.bytes.len != qn ||
		    memcmp(q->value.bytes.bytes, s->retry_queue, qn) != 0)
			continue;
		sum += int_value(lookup(&e->value.table, "count"));
	}
	return sum;
}

static int32_t delivery_count(const amqp_source *s, const amqp_envelope_t *e)
{
	const amqp_basic_properties_t *p = &e->message.properties;
	int64_t prev = 0, own;
	const amqp_field_value_t *v;
	int has_headers = (p->_flags & AMQP_BASIC_HEADERS_FLAG) != 0;
	if (has_headers && (v = lookup(&p->headers, "x-inbox-attempts")))
		prev = int_value(v);
	else if (has_headers)
		prev = xdeath_rounds(s, &p->headers);
	if (has_headers && (v = lookup(&p->headers, "x-delivery-count")))
		own = int_value(v);
	else
		own = e->redelivered ? 1 : 0;
	int64_t c = prev + own + 1;
	return c > INT32_MAX ? INT32_MAX : (int32_t)c;
}

int inbox__amqp_prepare(amqp_source *s, amqp_slot *sl)
{
	const amqp_envelope_t *e = &sl->env;
	const amqp_basic_properties_t *p = &e->message.properties;
	inbox__buf *t = &sl->text;
	t->len = 0;
	sl->id_at = sl->headers_at = sl->pos_at = -1;
	sl->count = delivery_count(s, e);
	long at = inbox__src_refuse_oversize(t, e->message.body.len,
	                                     s->base.opts.max_payload);
	if (at == -2)
		return -1;
	if (at >= 0)
		sl->id_at = at;
	int ok = 0;
	if (at < 0 && (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG))
		ok = inbox__src_check_id(t, "AMQP property message_id",
		                         p->message_id.bytes, p->message_id.len,
		                         &at);
	if (ok < 0 && at < 0)
		return -1;
	if (ok < 0)
		sl->id_at = at; /* refused: a NUL byte, not UTF-8 */
	if (ok > 0) {
		sl->id_at = (long)t->len;
		if (inbox__buf_append(t, p->message_id.bytes,
		                      p->message_id.len) < 0 ||
		    inbox__buf_putc(t, '\0') < 0)
			return -1;
	}
	if ((p->_flags & AMQP_BASIC_HEADERS_FLAG) && p->headers.num_entries) {
		sl->headers_at = (long)t->len;
		if (inbox__amqp_table_json(t, &p->headers) < 0 ||
		    inbox__buf_putc(t, '\0') < 0)
			return -1;
	}
	sl->pos_at = (long)t->len;
	if (inbox__buf_printf(t, "%s/%" PRIu64 "%s", s->queue, e->delivery_tag,
	                      e->redelivered ? " redelivered" : "") < 0)
		return -1;
	return 0;
}

void inbox__amqp_describe(const amqp_source *s, const amqp_slot *sl,
                          inbox_delivery *d)
{
	const amqp_envelope_t *e = &sl->env;
	const amqp_basic_properties_t *p = &e->message.properties;
	size_t len = e->message.body.len;
	*d = (inbox_delivery){0};
	d->payload = len ? (const char *)e->message.body.bytes : "";
	d->payload_len = inbox__src_payload_len(len, s->base.opts.max_payload);
	inbox__src_set_id(d, sl->id_at >= 0 ? sl->text.data + sl->id_at : NULL);
	d->headers =
	    sl->headers_at >= 0 ? sl->text.data + sl->headers_at : NULL;
	d->position = sl->text.data + sl->pos_at;
	if ((p->_flags & AMQP_BASIC_TIMESTAMP_FLAG) &&
	    p->timestamp < (uint64_t)(INT64_MAX / 1000))
		d->timestamp_ms = (int64_t)p->timestamp * 1000;
	d->delivery_count = sl->count;
}
