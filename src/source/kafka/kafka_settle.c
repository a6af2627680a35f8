/*
 * Kafka source: settling a batch. Per partition, the prefix of ackable
 * messages is stored and committed; from the first other one on the
 * partition is sought back and paused for the retry delay.
 *
 * Settling needs no memory of ours (poll reserved it): whatever happens,
 * the batch is dropped and the next poll works.
 */
#include <stdlib.h>
#include <string.h>

#include "source/kafka/kafka.h"

int inbox__kafka_settle(inbox_source *src, const inbox_result *res, size_t n);
void inbox__kafka_drop_batch(kafka_source *ks);
int inbox__kafka_seek_back(kafka_source *ks, int32_t p, int64_t offset);

typedef kafka_settle_part settle_part;

static settle_part *find_or_add(settle_part *sp, size_t *nsp, int32_t p)
{
	for (size_t i = 0; i < *nsp; i++)
		if (sp[i].partition == p)
			return &sp[i];
	sp[*nsp].partition = p;
	sp[*nsp].stop = INT64_MAX;
	sp[*nsp].next = -1;
	return &sp[(*nsp)++];
}

/* Store and asynchronously commit the advanced partitions. */
static int store_and_commit(kafka_source *ks, settle_part *sp, size_t nsp)
{
	rd_kafka_topic_partition_list_t *l =
	    rd_kafka_topic_partition_list_new((int)nsp);
	if (!l)
		return INBOX_ERR_NOMEM;
	for (size_t i = 0; i < nsp; i++) {
		kafka_part *kp = inbox__kafka_part(ks, sp[i].partition);
		if (kp && sp[i].next > kp->settled_next)
			rd_kafka_topic_partition_list_add(l, ks->topic,
			                                  sp[i].partition)
			    ->offset = sp[i].next;
	}
	int rc = INBOX_OK;
	if (l->cnt > 0) {
		rd_kafka_resp_err_t err = rd_kafka_offsets_store(ks->rk, l);
		for (int i = 0; i < l->cnt; i++) {
			rd_kafka_topic_partition_t *e = &l->elems[i];
			if (e->err) {
				inbox__source_seterr(
				    &ks->base,
				    "kafka: store offset %s [%d]: %s",
				    ks->topic, (int)e->partition,
				    rd_kafka_err2str(e->err));
				rc = INBOX_ERR_SOURCE;
				continue;
			}
			kafka_part *kp = inbox__kafka_part(ks, e->partition);
			kp->settled_next = e->offset;
			inbox__kafka_seen_prune(kp, e->offset);
		}
		if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
			/* Async: see kafka.h. Results come back to commit_cb.
			 */
			err = rd_kafka_commit(ks->rk, l, 1);
			if (err) {
				inbox__source_seterr(&ks->base,
				                     "kafka: commit: %s",
				                     rd_kafka_err2str(err));
				rc = INBOX_ERR_SOURCE;
			}
		}
	}
	rd_kafka_topic_partition_list_destroy(l);
	return rc;
}

/* Seek back and pause the partitions that stopped early; remember the
 * delivery counts of what will come again (room reserved by poll). */
static int redeliver(kafka_source *ks, settle_part *sp, size_t nsp)
{
	int rc = INBOX_OK;
	size_t nstop = 0;
	for (size_t i = 0; i < nsp; i++)
		nstop += sp[i].stop != INT64_MAX;
	if (nstop == 0) /* all acked: the usual case, nothing to build */
		return rc;
	int64_t now = inbox__src_mono_ms();
	for (size_t i = 0; i < ks->nbatch; i++) {
		kafka_slot *s = &ks->slots[i];
		settle_part *e = find_or_add(sp, &nsp, s->partition);
		kafka_part *kp = inbox__kafka_part(ks, s->partition);
		if (kp && s->offset >= e->stop)
			inbox__kafka_seen_put(kp, s->offset, s->count);
	}
	/* Without a list (librdkafka out of memory) nothing is paused: the
	 * messages come again at once. A partition marked paused that is
	 * not would drop them as stale copies. */
	rd_kafka_topic_partition_list_t *pause =
	    rd_kafka_topic_partition_list_new((int)nsp);
	for (size_t i = 0; i < nsp; i++) {
		if (sp[i].stop == INT64_MAX)
			continue;
		int r = inbox__kafka_seek_back(ks, sp[i].partition, sp[i].stop);
		if (r < 0)
			rc = r;
		kafka_part *kp = inbox__kafka_part(ks, sp[i].partition);
		if (kp && pause && ks->retry_delay_ms > 0) {
			kp->paused = 1;
			kp->resume_at = now + ks->retry_delay_ms;
			rd_kafka_topic_partition_list_add(pause, ks->topic,
			                                  sp[i].partition);
		}
	}
	/* After the seek: pausing keeps the rewound fetch position. */
	if (pause && pause->cnt > 0)
		rd_kafka_pause_partitions(ks->rk, pause);
	if (pause)
		rd_kafka_topic_partition_list_destroy(pause);
	return rc;
}

/* The batch is ks->slots[0..nbatch), delivery i from slot i (the
 * framework checked it); res NULL redelivers it all. */
int inbox__kafka_settle(inbox_source *src, const inbox_result *res, size_t n)
{
	kafka_source *ks = (kafka_source *)src;
	(void)n; /* == ks->nbatch */
	for (size_t i = 0; i < ks->nbatch; i++)
		ks->slots[i].ack = res && inbox_outcome_ackable(res[i].outcome);
	settle_part *sp = ks->sparts; /* nslots >= nbatch long */
	size_t nsp = 0;
	/* The first unackable offset of each partition... */
	for (size_t i = 0; i < ks->nbatch; i++) {
		kafka_slot *s = &ks->slots[i];
		settle_part *e = find_or_add(sp, &nsp, s->partition);
		if (!s->ack && s->offset < e->stop)
			e->stop = s->offset;
	}
	/* ...and everything before it is the ackable prefix. */
	for (size_t i = 0; i < ks->nbatch; i++) {
		kafka_slot *s = &ks->slots[i];
		settle_part *e = find_or_add(sp, &nsp, s->partition);
		if (s->offset < e->stop && s->offset + 1 > e->next)
			e->next = s->offset + 1;
	}
	int r1 = store_and_commit(ks, sp, nsp);
	int r2 = redeliver(ks, sp, nsp);
	inbox__kafka_drop_batch(ks);
	return r1 < 0 ? r1 : r2;
}
