/*
 * RabbitMQ source: the vtable (open, close, poll, settle) and the slots
 * that carry a message from its delivery to its ack. The behaviour is
 * described in amqp_source.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "source/amqp/amqp_source.h"

#define BACKOFF_MAX_MS 5000

/* ------------------------------------------------------------------ */
/* Slots                                                                */
/* ------------------------------------------------------------------ */

amqp_slot *inbox__amqp_slot_new(amqp_source *s)
{
	amqp_slot *sl = s->free_slots;
	if (sl) {
		s->free_slots = sl->next_free;
		s->nfree--;
	} else {
		sl = calloc(1, sizeof(*sl));
		if (!sl)
			return NULL;
	}
	inbox__buf text = sl->text;
	memset(sl, 0, sizeof(*sl));
	text.len = 0;
	sl->text = text;
	sl->id_at = sl->headers_at = sl->pos_at = -1;
	return sl;
}

void inbox__amqp_slot_free(amqp_source *s, amqp_slot *sl)
{
	if (!sl)
		return;
	amqp_destroy_envelope(&sl->env);
	memset(&sl->env, 0, sizeof(sl->env));
	/* Keep a few for reuse: a steady stream allocates nothing here. */
	if (s->nfree < (size_t)s->prefetch + 16 && sl->text.cap <= 64 * 1024) {
		sl->next_free = s->free_slots;
		s->free_slots = sl;
		s->nfree++;
		return;
	}
	inbox__buf_free(&sl->text);
	free(sl);
}

int inbox__amqp_slots_push(amqp_slots *l, amqp_slot *sl)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		amqp_slot **v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = sl;
	return 0;
}

void inbox__amqp_slots_clear(amqp_source *s, amqp_slots *l)
{
	for (size_t i = 0; i < l->n; i++)
		inbox__amqp_slot_free(s, l->v[i]);
	l->n = 0;
}

/* ------------------------------------------------------------------ */
/* open / close                                                          */
/* ------------------------------------------------------------------ */

static void am_close(inbox_source *src)
{
	amqp_source *s = (amqp_source *)src;
	if (!s)
		return;
	inbox__amqp_disconnect(s);
	inbox__amqp_slots_clear(s, &s->batch);
	inbox__amqp_slots_clear(s, &s->pend);
	inbox__amqp_slots_clear(s, &s->held);
	free(s->batch.v);
	free(s->pend.v);
	free(s->held.v);
	while (s->free_slots) {
		amqp_slot *sl = s->free_slots;
		s->free_slots = sl->next_free;
		inbox__buf_free(&sl->text);
		free(sl);
	}
	inbox__amqp_url_clear(s);
	free(s);
}

/* The check slot, and open's first half: the handle, its URL parsed. */
static int am_check(inbox_source **out, const char *url,
                    const inbox_source_options *opts)
{
	amqp_source *s = calloc(1, sizeof(*s));
	if (!s)
		return INBOX_ERR_NOMEM;
	*out = &s->base;
	s->base.opts = *opts; /* connect() needs them before open returns */
	return inbox__amqp_parse_url(s, url, opts);
}

static int am_open(inbox_source **out, const char *url,
                   const inbox_source_options *opts)
{
	int rc = am_check(out, url, opts);
	return rc < 0 ? rc : inbox__amqp_connect((amqp_source *)*out);
}

/* ------------------------------------------------------------------ */
/* poll                                                                  */
/* ------------------------------------------------------------------ */

/* INBOX_OK when connected, 1 while waiting for the next attempt, or the
 * error of a failed attempt. */
static int ensure_connected(amqp_source *s, int64_t deadline)
{
	if (s->conn)
		return INBOX_OK;
	if (!inbox__src_backoff_wait(&s->reconnect, deadline))
		return 1;
	int rc = inbox__amqp_connect(s);
	if (rc == INBOX_OK) {
		inbox__src_backoff_ok(&s->reconnect);
		return INBOX_OK;
	}
	inbox__src_backoff_failed(&s->reconnect, BACKOFF_MAX_MS);
	return rc;
}

/* requeue mode: nack the held messages whose delay has passed. */
static int release_due(amqp_source *s)
{
	int64_t now = inbox__src_mono_ms();
	int st = AMQP_STATUS_OK;
	size_t keep = 0;
	if (!s->conn)
		return INBOX_OK;
	for (size_t i = 0; i < s->held.n; i++) {
		amqp_slot *sl = s->held.v[i];
		if (st == AMQP_STATUS_OK && sl->due <= now) {
			st = amqp_basic_nack(s->conn, AMQP_CH_CONSUME,
			                     sl->env.delivery_tag, 0, 1);
			if (st == AMQP_STATUS_OK) {
				inbox__amqp_slot_free(s, sl);
				continue;
			}
		}
		s->held.v[keep++] = sl;
	}
	s->held.n = keep;
	if (st != AMQP_STATUS_OK) {
		inbox__amqp_lost(s, "amqp: nack to %s failed: %s", s->where,
		                 amqp_error_string2(st));
		return INBOX_ERR_SOURCE;
	}
	return INBOX_OK;
}

static int am_poll(inbox_source *src, inbox_delivery *out, size_t max,
                   size_t *n, int timeout_ms, int *eof)
{
	amqp_source *s = (amqp_source *)src;
	(void)eof; /* a queue never ends */
	int64_t deadline =
	    inbox__src_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int rc = ensure_connected(s, deadline);
	if (rc != INBOX_OK)
		return rc > 0 ? INBOX_OK : rc;
	rc = release_due(s);
	while (rc == INBOX_OK && s->pend.n < max) {
		int64_t now = inbox__src_mono_ms();
		int64_t wait = 0;
		if (s->pend.n == 0) {
			int64_t until = deadline;
			if (s->held.n && s->held.v[0]->due < until)
				until = s->held.v[0]->due;
			wait = until > now ? until - now : 0;
		}
		int ev = inbox__amqp_pump(s, (int)wait);
		if (ev == AMQP_EV_LOST)
			return INBOX_ERR_SOURCE;
		if (ev == AMQP_EV_NOMEM)
			return INBOX_ERR_NOMEM;
		if (ev != AMQP_EV_TIMEOUT)
			continue;
		if (s->pend.n > 0)
			break;
		rc = release_due(s);
		if (inbox__src_mono_ms() >= deadline)
			break;
	}
	if (rc < 0)
		return rc;
	size_t k = s->pend.n < max ? s->pend.n : max;
	if (s->batch.cap < k) {
		amqp_slot **v = realloc(s->batch.v, k * sizeof(*v));
		if (!v)
			return INBOX_ERR_NOMEM;
		s->batch.v = v;
		s->batch.cap = k;
	}
	for (size_t i = 0; i < k; i++) {
		s->batch.v[i] = s->pend.v[i];
		inbox__amqp_describe(s, s->batch.v[i], &out[i]);
	}
	s->batch.n = k;
	if (k > 0 && s->pend.n > k)
		memmove(s->pend.v, s->pend.v + k,
		        (s->pend.n - k) * sizeof(*s->pend.v));
	s->pend.n -= k;
	*n = k;
	return INBOX_OK;
}

/* ------------------------------------------------------------------ */
/* settle                                                                */
/* ------------------------------------------------------------------ */

enum { ACT_NACK = AMQP_ACT_HOLD + 1 }; /* requeue at once (res NULL) */

static void classify(amqp_source *s, const inbox_result *res)
{
	for (size_t i = 0; i < s->batch.n; i++) {
		amqp_slot *sl = s->batch.v[i];
		sl->pub = AMQP_PUB_NONE;
		sl->to_dlx = 0;
		if (!s->conn || sl->gen != s->gen)
			sl->action = AMQP_ACT_SKIP;
		else if (!res)
			sl->action = ACT_NACK;
		else if (inbox_outcome_ackable(res[i].outcome)) {
			inbox_outcome o = res[i].outcome;
			sl->to_dlx = s->dlx && (o == INBOX_DEAD_LETTERED ||
			                        o == INBOX_CONFLICT);
			sl->action =
			    sl->to_dlx ? AMQP_ACT_COPY_ACK : AMQP_ACT_ACK;
		} else if (s->retry_mode == AMQP_RETRY_TTL)
			sl->action = AMQP_ACT_COPY_ACK;
		else
			sl->action = AMQP_ACT_HOLD;
	}
}

/* Publish the copies and wait for their confirms; a copy that failed
 * turns its message into HOLD (retry) or a plain ACK (dlx: the store has
 * the dead letter; *dlx_failed counts them). */
static int publish_copies(amqp_source *s, const inbox_result *res,
                          size_t *dlx_failed)
{
	int any = 0, rc = INBOX_OK;
	for (size_t i = 0; i < s->batch.n && s->conn; i++) {
		amqp_slot *sl = s->batch.v[i];
		if (sl->action != AMQP_ACT_COPY_ACK)
			continue;
		int prc = inbox__amqp_publish_copy(s, sl, res ? &res[i] : NULL);
		if (prc < 0) {
			/* No publish channel (or no memory): the rest of
			 * the copies fail too, without an attempt each. */
			if (prc == INBOX_ERR_NOMEM)
				rc = prc;
			break;
		}
		any = 1;
	}
	if (any && s->conn)
		inbox__amqp_wait_confirms(s);
	for (size_t i = 0; i < s->batch.n; i++) {
		amqp_slot *sl = s->batch.v[i];
		if (sl->action != AMQP_ACT_COPY_ACK || sl->pub == AMQP_PUB_OK)
			continue;
		if (sl->to_dlx) {
			sl->action = AMQP_ACT_ACK;
			(*dlx_failed)++;
		} else {
			sl->action = AMQP_ACT_HOLD;
		}
	}
	return rc;
}

/* Send the acks and nacks; HOLD slots stay in the batch. */
static int send_acks(amqp_source *s)
{
	uint64_t min_held = UINT64_MAX;
	for (size_t i = 0; i < s->held.n; i++)
		if (s->held.v[i]->env.delivery_tag < min_held)
			min_held = s->held.v[i]->env.delivery_tag;
	/* The leading run of acks in one multiple ack: tags on a channel
	 * grow, everything before the batch is settled, except held
	 * messages (hence below min_held). */
	size_t run = 0;
	while (run < s->batch.n) {
		amqp_slot *sl = s->batch.v[run];
		int is_ack = sl->action == AMQP_ACT_ACK ||
		             sl->action == AMQP_ACT_COPY_ACK;
		if (!is_ack || sl->env.delivery_tag >= min_held)
			break;
		run++;
	}
	int st = AMQP_STATUS_OK;
	if (run > 0)
		st = amqp_basic_ack(s->conn, AMQP_CH_CONSUME,
		                    s->batch.v[run - 1]->env.delivery_tag,
		                    run > 1);
	for (size_t i = run; i < s->batch.n && st == AMQP_STATUS_OK; i++) {
		amqp_slot *sl = s->batch.v[i];
		uint64_t tag = sl->env.delivery_tag;
		if (sl->action == AMQP_ACT_ACK ||
		    sl->action == AMQP_ACT_COPY_ACK)
			st = amqp_basic_ack(s->conn, AMQP_CH_CONSUME, tag, 0);
		else if (sl->action == ACT_NACK)
			st = amqp_basic_nack(s->conn, AMQP_CH_CONSUME, tag, 0,
			                     1);
	}
	if (st != AMQP_STATUS_OK) {
		inbox__amqp_lost(s, "amqp: ack to %s failed: %s", s->where,
		                 amqp_error_string2(st));
		return INBOX_ERR_SOURCE;
	}
	return INBOX_OK;
}

/* Free the batch's slots; HOLD ones move to the held list. */
static int finish_batch(amqp_source *s)
{
	int64_t due =
	    inbox__src_mono_ms() +
	    (s->base.opts.retry_delay_ms > 0 ? s->base.opts.retry_delay_ms : 0);
	int rc = INBOX_OK;
	for (size_t i = 0; i < s->batch.n; i++) {
		amqp_slot *sl = s->batch.v[i];
		if (sl->action == AMQP_ACT_HOLD && s->conn &&
		    sl->gen == s->gen) {
			sl->due = due;
			if (inbox__amqp_slots_push(&s->held, sl) == 0)
				continue;
			/* Cannot hold it: requeue it now. */
			if (amqp_basic_nack(s->conn, AMQP_CH_CONSUME,
			                    sl->env.delivery_tag, 0, 1) != 0)
				rc = INBOX_ERR_SOURCE;
		}
		inbox__amqp_slot_free(s, sl);
	}
	s->batch.n = 0;
	if (rc < 0 && s->conn)
		inbox__amqp_lost(s, "amqp: nack to %s failed", s->where);
	return rc;
}

/* The batch is s->batch (the framework checked it); res NULL requeues
 * it. */
static int am_settle(inbox_source *src, const inbox_result *res, size_t n)
{
	amqp_source *s = (amqp_source *)src;
	int rc = INBOX_OK;
	size_t dlx_failed = 0;
	(void)n; /* == s->batch.n */
	classify(s, res);
	int prc = publish_copies(s, res, &dlx_failed);
	int lost = !s->conn;
	if (s->conn && s->batch.n && s->batch.v[0]->gen == s->gen)
		lost = send_acks(s) < 0;
	if (finish_batch(s) < 0 && rc == INBOX_OK)
		rc = INBOX_ERR_SOURCE;
	if (rc != INBOX_OK)
		return rc;
	if (prc < 0)
		return prc;
	if (lost) /* errmsg says why; the broker redelivers them */
		return INBOX_ERR_SOURCE;
	if (dlx_failed) {
		char why[256];
		memcpy(why, src->errmsg, sizeof(why) - 1);
		why[sizeof(why) - 1] = '\0';
		inbox__source_seterr(src,
		                     "amqp: %zu dead letter(s) acked but not "
		                     "published to exchange %s: %s",
		                     dlx_failed, s->dlx, why);
		return INBOX_ERR_SOURCE;
	}
	return INBOX_OK;
}

/* The lag slot: the queue's ready messages (queue.declare-ok's
 * message_count of a passive declare), asked on the publish channel,
 * never the consuming one: the deliveries that arrive meanwhile on the
 * consuming channel are kept by rabbitmq-c for the next poll. A refusal
 * (the queue is gone) closes that channel only; it is opened anew when
 * next needed. Bounded by the connection's RPC timeout. */
static int am_lag(inbox_source *src, int64_t *messages, int64_t *bytes)
{
	amqp_source *s = (amqp_source *)src;
	(void)bytes;
	if (!s->conn || inbox__amqp_open_pub(s) < 0)
		return INBOX_ERR_SOURCE;
	amqp_queue_declare_ok_t *ok =
	    amqp_queue_declare(s->conn, s->pub_ch, amqp_cstring_bytes(s->queue),
	                       1, 0, 0, 0, amqp_empty_table);
	amqp_rpc_reply_t r = amqp_get_rpc_reply(s->conn);
	if (r.reply_type == AMQP_RESPONSE_NORMAL && ok) {
		*messages = (int64_t)ok->message_count;
		return INBOX_OK;
	}
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
	    r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
		amqp_channel_close_ok_t cok = {0};
		amqp_send_method(s->conn, s->pub_ch,
		                 AMQP_CHANNEL_CLOSE_OK_METHOD, &cok);
		s->pub_open = 0;
	} else {
		char why[300];
		inbox__amqp_reply_text(r, why, sizeof(why));
		inbox__amqp_lost(s, "amqp: queue depth at %s: %s", s->where,
		                 why);
	}
	return INBOX_ERR_SOURCE;
}

const inbox_source_vtable inbox__amqp_source = {
    INBOX_SOURCE_VTABLE_VERSION,
    "amqp",
    am_open,
    am_close,
    am_poll,
    am_settle,
    am_lag,
    .client_version = inbox__amqp_client_version,
    .alias = "amqps",
    .check = am_check,
};
