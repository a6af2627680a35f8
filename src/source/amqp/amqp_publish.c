/*
 * RabbitMQ source: copies of a message — to the retry queue (retry=ttl) or
 * to the dead-letter exchange (dlx=) — published on the publish channel in
 * confirm mode. The original is acked only after its copy is confirmed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <amqp.h>

#include "source/amqp/amqp_source.h"

#define MAX_REASON 1024

static int is_key(amqp_bytes_t k, const char *name)
{
	size_t n = strlen(name);
	return k.len == n && memcmp(k.bytes, name, n) == 0;
}

static int ours(amqp_bytes_t k)
{
	return is_key(k, "x-inbox-attempts") || is_key(k, "x-inbox-reason") ||
	       is_key(k, "x-inbox-consumer") ||
	       is_key(k, "x-inbox-dead-letter-id");
}

static amqp_table_entry_t utf8_entry(const char *key, const char *v, size_t n)
{
	amqp_table_entry_t e;
	e.key = amqp_cstring_bytes(key);
	e.value.kind = AMQP_FIELD_KIND_UTF8;
	e.value.value.bytes.bytes = (void *)v;
	e.value.value.bytes.len = n;
	return e;
}

static amqp_table_entry_t long_entry(const char *key, int64_t v)
{
	amqp_table_entry_t e;
	e.key = amqp_cstring_bytes(key);
	e.value.kind = AMQP_FIELD_KIND_I64;
	e.value.value.i64 = v;
	return e;
}

int inbox__amqp_publish_copy(amqp_source *s, amqp_slot *sl,
                             const inbox_result *res)
{
	sl->pub = AMQP_PUB_FAIL;
	if (!s->conn)
		return INBOX_ERR_SOURCE;
	int rc = inbox__amqp_open_pub(s);
	if (rc < 0)
		return rc;
	const amqp_envelope_t *env = &sl->env;
	amqp_basic_properties_t props = env->message.properties;
	int nold = (props._flags & AMQP_BASIC_HEADERS_FLAG)
	               ? props.headers.num_entries
	               : 0;
	amqp_table_entry_t *e = malloc(((size_t)nold + 3) * sizeof(*e));
	if (!e)
		return INBOX_ERR_NOMEM;
	int k = 0;
	for (int i = 0; i < nold; i++) {
		amqp_bytes_t key = props.headers.entries[i].key;
		/* A quorum queue's count belongs to the original: the copy
		 * starts its own (x-inbox-attempts carries the past). */
		if (ours(key) ||
		    (!sl->to_dlx && is_key(key, "x-delivery-count")))
			continue;
		e[k++] = props.headers.entries[i];
	}
	amqp_bytes_t exchange, rkey;
	int mandatory;
	if (sl->to_dlx) {
		const char *why = res && res->reason ? res->reason : "";
		size_t wn = strlen(why);
		if (wn > MAX_REASON) { /* cut at a character boundary */
			wn = MAX_REASON;
			while (wn > 0 &&
			       ((unsigned char)why[wn] & 0xC0) == 0x80)
				wn--;
		}
		const char *who = s->base.opts.consumer;
		e[k++] = utf8_entry("x-inbox-reason", why, wn);
		e[k++] = utf8_entry("x-inbox-consumer", who, strlen(who));
		e[k++] = long_entry("x-inbox-dead-letter-id",
		                    res ? res->dead_letter_id : 0);
		exchange = amqp_cstring_bytes(s->dlx);
		rkey = env->routing_key;
		mandatory = 0; /* an exchange without bindings is the
		                  operator's choice */
	} else {
		e[k++] = long_entry("x-inbox-attempts", sl->count);
		exchange = amqp_cstring_bytes("");
		rkey = amqp_cstring_bytes(s->retry_queue);
		mandatory = 1; /* the retry queue must take it */
	}
	props.headers.num_entries = k;
	props.headers.entries = e;
	props._flags |= AMQP_BASIC_HEADERS_FLAG;
	int st = amqp_basic_publish(s->conn, s->pub_ch, exchange, rkey,
	                            mandatory, 0, &props, env->message.body);
	free(e);
	if (st != AMQP_STATUS_OK) {
		inbox__amqp_lost(s, "amqp: publish to %s failed: %s", s->where,
		                 amqp_error_string2(st));
		return INBOX_ERR_SOURCE;
	}
	sl->pub = AMQP_PUB_WAIT;
	sl->pub_seq = s->pub_next++;
	return INBOX_OK;
}

static int any_waiting(const amqp_source *s)
{
	for (size_t i = 0; i < s->batch.n; i++)
		if (s->batch.v[i]->pub == AMQP_PUB_WAIT)
			return 1;
	return 0;
}

void inbox__amqp_confirm(amqp_source *s, uint64_t tag, int multiple, int ok)
{
	for (size_t i = 0; i < s->batch.n; i++) {
		amqp_slot *sl = s->batch.v[i];
		if (sl->pub != AMQP_PUB_WAIT)
			continue;
		if (multiple ? sl->pub_seq <= tag : sl->pub_seq == tag)
			sl->pub = ok ? AMQP_PUB_OK : AMQP_PUB_FAIL;
	}
}

void inbox__amqp_fail_waiting(amqp_source *s)
{
	for (size_t i = 0; i < s->batch.n; i++)
		if (s->batch.v[i]->pub == AMQP_PUB_WAIT)
			s->batch.v[i]->pub = AMQP_PUB_FAIL;
}

int inbox__amqp_wait_confirms(amqp_source *s)
{
	int64_t deadline = inbox__src_mono_ms() + s->confirm_timeout_ms;
	while (any_waiting(s)) {
		int64_t left = deadline - inbox__src_mono_ms();
		if (!s->conn)
			return INBOX_ERR_SOURCE;
		if (left <= 0) {
			inbox__source_seterr(
			    &s->base,
			    "amqp: no publisher confirm from %s "
			    "within %d ms",
			    s->where, s->confirm_timeout_ms);
			inbox__amqp_fail_waiting(s);
			/* It may still confirm later: close it without
			 * waiting and use a new one. */
			amqp_channel_close_t c = {0};
			c.reply_code = AMQP_REPLY_SUCCESS;
			c.reply_text = amqp_cstring_bytes("confirm timeout");
			amqp_send_method(s->conn, s->pub_ch,
			                 AMQP_CHANNEL_CLOSE_METHOD, &c);
			s->pub_open = 0;
			break;
		}
		int ev = inbox__amqp_pump(s, (int)left);
		if (ev == AMQP_EV_LOST || ev == AMQP_EV_NOMEM)
			return INBOX_ERR_SOURCE;
	}
	if (s->returned) {
		/* basic.return does not say which copy: count every mandatory
		 * one of the window as lost (the originals are requeued; a
		 * copy that did arrive is a duplicate the inbox drops). */
		for (size_t i = 0; i < s->batch.n; i++) {
			amqp_slot *sl = s->batch.v[i];
			if (!sl->to_dlx && sl->pub == AMQP_PUB_OK)
				sl->pub = AMQP_PUB_FAIL;
		}
		inbox__source_seterr(&s->base,
		                     "amqp: retry queue %s did not take a copy "
		                     "(deleted?)",
		                     s->retry_queue);
		s->returned = 0;
	}
	return INBOX_OK;
}
