/* Kafka source: polling a batch of messages into deliveries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source/kafka/kafka.h"

/* Once a batch has a message, how long to wait for one more before
 * returning what there is. */
#define LINGER_MS       5
#define SEEK_TIMEOUT_MS 5000

int inbox__kafka_poll(inbox_source *src, inbox_delivery *out, size_t max,
                      size_t *n, int timeout_ms, int *eof);
void inbox__kafka_drop_batch(kafka_source *ks);
int inbox__kafka_seek_back(kafka_source *ks, int32_t p, int64_t offset);

void inbox__kafka_drop_batch(kafka_source *ks)
{
	for (size_t i = 0; i < ks->nbatch; i++)
		if (ks->slots[i].msg) {
			rd_kafka_message_destroy(ks->slots[i].msg);
			ks->slots[i].msg = NULL;
		}
	ks->nbatch = 0;
}

static int partition_list1(rd_kafka_topic_partition_list_t **l,
                           const char *topic, int32_t p, int64_t offset)
{
	*l = rd_kafka_topic_partition_list_new(1);
	if (!*l)
		return -1;
	rd_kafka_topic_partition_list_add(*l, topic, p)->offset = offset;
	return 0;
}

/* Seek partition p back to offset so that it is fetched again from there.
 * On failure the partition is marked need_seek: its messages are dropped
 * until a later seek succeeds, so nothing after `offset` is acked before
 * `offset` itself. */
int inbox__kafka_seek_back(kafka_source *ks, int32_t p, int64_t offset)
{
	/* Without memory for the partition's state the seek is still made
	 * (only a failed one cannot be retried later). */
	kafka_part *kp = inbox__kafka_part(ks, p);
	rd_kafka_topic_partition_list_t *l;
	if (kp) {
		kp->rewind_to = offset;
		kp->need_seek = 1;
	}
	if (partition_list1(&l, ks->topic, p, offset) < 0)
		return INBOX_ERR_NOMEM;
	/* With a timeout the call returns once the fetcher moved: no message
	 * fetched before the seek is handed out after it. Before librdkafka
	 * 2.1.0 (Debian 12 has 2.0.2) the call waited a thousandth of the
	 * timeout it was given (librdkafka #4230: milliseconds taken for
	 * microseconds): 5 ms, which a loaded machine misses, and the seek
	 * then failed as "timed out". */
	int timeout_ms = rd_kafka_version() >= 0x020100ff
	                     ? SEEK_TIMEOUT_MS
	                     : SEEK_TIMEOUT_MS * 1000;
	rd_kafka_error_t *error =
	    rd_kafka_seek_partitions(ks->rk, l, timeout_ms);
	int rc = INBOX_OK;
	if (error) {
		inbox__source_seterr(
		    &ks->base, "kafka: seek %s [%d] to %lld: %s", ks->topic,
		    (int)p, (long long)offset, rd_kafka_error_string(error));
		rd_kafka_error_destroy(error);
		rc = INBOX_ERR_SOURCE;
	} else if (l->elems[0].err) {
		inbox__source_seterr(&ks->base,
		                     "kafka: seek %s [%d] to %lld: %s",
		                     ks->topic, (int)p, (long long)offset,
		                     rd_kafka_err2str(l->elems[0].err));
		rc = INBOX_ERR_SOURCE;
	} else if (kp) {
		kp->need_seek = 0;
	}
	rd_kafka_topic_partition_list_destroy(l);
	return rc;
}

static void set_paused(kafka_source *ks, int32_t p, int pause)
{
	rd_kafka_topic_partition_list_t *l;
	if (partition_list1(&l, ks->topic, p, RD_KAFKA_OFFSET_INVALID) < 0)
		return;
	if (pause)
		rd_kafka_pause_partitions(ks->rk, l);
	else
		rd_kafka_resume_partitions(ks->rk, l);
	rd_kafka_topic_partition_list_destroy(l);
}

/* Resume partitions whose retry delay has passed, retry failed seeks.
 * Returns the ms until the next pending resume (INT_MAX-ish if none). */
static int64_t serve_parts(kafka_source *ks, int64_t now)
{
	int64_t next = INT64_MAX;
	for (size_t p = 0; p < ks->nparts; p++) {
		kafka_part *kp = &ks->parts[p];
		if (!kp->assigned)
			continue;
		if (kp->need_seek)
			inbox__kafka_seek_back(ks, (int32_t)p, kp->rewind_to);
		if (!kp->paused)
			continue;
		if (now >= kp->resume_at) {
			set_paused(ks, (int32_t)p, 0);
			kp->paused = 0;
		} else if (kp->resume_at - now < next) {
			next = kp->resume_at - now;
		}
	}
	return next;
}

/* Put the strings of the delivery into the slot's text buffer. */
static int fill_text(kafka_source *ks, kafka_slot *s)
{
	rd_kafka_headers_t *hdrs = NULL;
	inbox__buf *t = &s->text;
	inbox__buf_reset(t);
	s->id_at = s->headers_at = -1;
	long at = inbox__src_refuse_oversize(t, s->msg->len, ks->max_payload);
	if (at == -2)
		return -1;
	if (at >= 0)
		s->id_at = at;
	if (rd_kafka_message_headers(s->msg, &hdrs) !=
	    RD_KAFKA_RESP_ERR_NO_ERROR)
		hdrs = NULL;
	if (hdrs && ks->id_header && s->id_at < 0) {
		size_t at = t->len;
		int r = inbox__kafka_header_id(t, hdrs, ks->id_header);
		if (r < 0)
			return -1;
		if (r > 0)
			s->id_at = (long)at;
	}
	if (hdrs && rd_kafka_header_cnt(hdrs) > 0) {
		s->headers_at = (long)t->len;
		if (inbox__kafka_headers_json(t, hdrs) < 0)
			return -1;
	}
	s->position_at = (long)t->len;
	if (inbox__buf_puts(t, ks->topic) < 0 || inbox__buf_putc(t, '/') < 0 ||
	    inbox__src_put_dec(t, s->partition) < 0 ||
	    inbox__buf_putc(t, '/') < 0 || inbox__src_put_dec(t, s->offset) < 0)
		return -1;
	return 0;
}

/* Take one consumed message; returns 1 if it joined the batch. */
static int take(kafka_source *ks, rd_kafka_message_t *m)
{
	if (m->err) {
		/* a consumer's fatal errors come here, not to error_cb */
		if (m->err == RD_KAFKA_RESP_ERR__FATAL) {
			inbox__kafka_note_fatal(ks);
			ks->error_seen = 1;
		} else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
			inbox__source_seterr(
			    &ks->base, "kafka: %s [%d]: %s",
			    m->rkt ? rd_kafka_topic_name(m->rkt) : ks->topic,
			    (int)m->partition, rd_kafka_message_errstr(m));
			ks->error_seen = 1;
		}
		rd_kafka_message_destroy(m);
		return 0;
	}
	kafka_part *kp = inbox__kafka_part(ks, m->partition);
	if (!kp) {
		/* No memory for its state: fetch it again, later. */
		inbox__kafka_seek_back(ks, m->partition, m->offset);
		rd_kafka_message_destroy(m);
		return -1;
	}
	/* Paused or awaiting a seek back: this copy is stale, the partition
	 * will deliver it again from the rewind point. */
	if (kp->paused || kp->need_seek ||
	    (kp->settled_next >= 0 && m->offset < kp->settled_next)) {
		rd_kafka_message_destroy(m);
		return 0;
	}
	kafka_slot *s = &ks->slots[ks->nbatch];
	s->msg = m;
	s->partition = m->partition;
	s->offset = m->offset;
	s->count = inbox__kafka_seen_get(kp, m->offset) + 1;
	s->ack = 0;
	ks->nbatch++; /* even on failure: poll then seeks back to it */
	return fill_text(ks, s) < 0 ? -1 : 1;
}

/* After a failed poll: seek each partition of the batch back to its first
 * message there, so that a later ack cannot skip the ones dropped. */
static void rewind_batch(kafka_source *ks)
{
	for (size_t i = 0; i < ks->nbatch; i++) {
		const kafka_slot *s = &ks->slots[i];
		int64_t low = s->offset;
		int seen = 0;
		for (size_t j = 0; j < ks->nbatch && !seen; j++) {
			const kafka_slot *o = &ks->slots[j];
			if (o->partition != s->partition)
				continue;
			seen = j < i; /* handled at its first slot */
			if (o->offset < low)
				low = o->offset;
		}
		if (!seen)
			inbox__kafka_seek_back(ks, s->partition, low);
	}
}

/* Remove the slots whose partition was revoked while polling. */
static void compact(kafka_source *ks)
{
	size_t j = 0;
	for (size_t i = 0; i < ks->nbatch; i++) {
		if (!ks->slots[i].msg)
			continue;
		if (i != j) {
			kafka_slot tmp = ks->slots[j];
			ks->slots[j] = ks->slots[i];
			ks->slots[i] =
			    tmp; /* keeps its text buffer for reuse */
		}
		j++;
	}
	ks->nbatch = j;
}

static void to_delivery(kafka_source *ks, size_t i, inbox_delivery *d)
{
	kafka_slot *s = &ks->slots[i];
	rd_kafka_message_t *m = s->msg;
	rd_kafka_timestamp_type_t tstype;
	memset(d, 0, sizeof(*d));
	d->payload = m->payload ? (const char *)m->payload : "";
	d->payload_len = inbox__src_payload_len(m->len, ks->max_payload);
	inbox__src_set_id(d, s->id_at >= 0 ? s->text.data + s->id_at : NULL);
	d->headers = s->headers_at >= 0 ? s->text.data + s->headers_at : NULL;
	d->position = s->text.data + s->position_at;
	int64_t ts = rd_kafka_message_timestamp(m, &tstype);
	d->timestamp_ms =
	    tstype != RD_KAFKA_TIMESTAMP_NOT_AVAILABLE && ts > 0 ? ts : 0;
	d->delivery_count = s->count;
}

static int grow_slots(kafka_source *ks, size_t want)
{
	if (want <= ks->nslots)
		return 0;
	kafka_settle_part *sp = realloc(ks->sparts, want * sizeof(*sp));
	if (!sp)
		return -1;
	ks->sparts = sp;
	kafka_slot *ns = realloc(ks->slots, want * sizeof(*ns));
	if (!ns)
		return -1;
	memset(ns + ks->nslots, 0, (want - ks->nslots) * sizeof(*ns));
	ks->slots = ns;
	ks->nslots = want;
	return 0;
}

/* Room in each partition's redelivery counts for every message of the
 * batch, so that settle() needs no memory. */
static int reserve_seen(kafka_source *ks)
{
	for (size_t i = 0; i < ks->nbatch; i++) {
		kafka_part *kp = inbox__kafka_part(ks, ks->slots[i].partition);
		if (!kp || inbox__kafka_seen_reserve(kp, ks->nbatch) < 0)
			return -1;
	}
	return 0;
}

int inbox__kafka_poll(inbox_source *src, inbox_delivery *out, size_t max,
                      size_t *n, int timeout_ms, int *eof)
{
	kafka_source *ks = (kafka_source *)src;
	(void)eof;       /* a topic never ends */
	if (ks->fatal) { /* the handle is dead: nothing will come */
		inbox__kafka_note_fatal(ks); /* its reason, not a later one */
		return INBOX_ERR_CONFIG;
	}
	if (grow_slots(ks, max) < 0)
		return INBOX_ERR_NOMEM;
	ks->retry_delay_ms = src->opts.retry_delay_ms;
	ks->max_payload = src->opts.max_payload;
	ks->error_seen = 0;
	if (ks->commit_failed)
		inbox__kafka_recommit(ks);
	int64_t start = inbox__src_mono_ms();
	int64_t deadline = start + (timeout_ms > 0 ? timeout_ms : 0);
	int rc = INBOX_OK;
	while (ks->nbatch < max) {
		int64_t now = inbox__src_mono_ms();
		/* resume timing needs no precision while a batch fills */
		int64_t until_resume =
		    ks->nbatch == 0 ? serve_parts(ks, now) : INT64_MAX;
		int64_t wait = deadline - now;
		if (ks->nbatch > 0)
			wait = LINGER_MS;
		else if (until_resume < wait)
			wait = until_resume;
		if (wait < 0)
			wait = 0;
		rd_kafka_message_t *m =
		    rd_kafka_consumer_poll(ks->rk, (int)wait);
		if (!m) {
			compact(ks); /* a revocation may have emptied it */
			if (ks->nbatch > 0 || inbox__src_mono_ms() >= deadline)
				break;
			continue;
		}
		if (take(ks, m) < 0) {
			rc = INBOX_ERR_NOMEM;
			break;
		}
	}
	compact(ks);
	if (rc == INBOX_OK && reserve_seen(ks) < 0)
		rc = INBOX_ERR_NOMEM;
	if (rc < 0) {
		rewind_batch(ks);
		inbox__kafka_drop_batch(ks);
		return rc;
	}
	for (size_t i = 0; i < ks->nbatch; i++)
		to_delivery(ks, i, &out[i]);
	*n = ks->nbatch;
	if (*n == 0 && ks->fatal) {
		inbox__kafka_note_fatal(ks);
		return INBOX_ERR_CONFIG;
	}
	if (*n == 0 && ks->error_seen)
		return INBOX_ERR_SOURCE;
	return INBOX_OK;
}
