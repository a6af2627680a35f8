/*
 * Kafka source: per-partition state (settled offsets, redelivery counts,
 * pauses) and the group rebalance callback that keeps it in step with the
 * assignment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "source/kafka/kafka.h"

static void part_init(kafka_part *kp)
{
	memset(kp, 0, sizeof(*kp));
	kp->settled_next = -1;
	kp->committed_next = -1;
	kp->rewind_to = -1;
	kp->carry_next = -1;
}

kafka_part *inbox__kafka_part(kafka_source *ks, int32_t p)
{
	if (p < 0)
		return NULL;
	if ((size_t)p >= ks->nparts) {
		size_t n = ks->nparts ? ks->nparts : 8;
		while (n <= (size_t)p)
			n *= 2;
		kafka_part *np = realloc(ks->parts, n * sizeof(*np));
		if (!np)
			return NULL;
		for (size_t i = ks->nparts; i < n; i++)
			part_init(&np[i]);
		ks->parts = np;
		ks->nparts = n;
	}
	return &ks->parts[p];
}

void inbox__kafka_part_forget(kafka_source *ks, int32_t p)
{
	if (p < 0 || (size_t)p >= ks->nparts)
		return;
	kafka_part *kp = &ks->parts[p];
	int64_t carry = kp->carry_next;
	if (kp->settled_next > kp->committed_next && kp->settled_next > carry)
		carry = kp->settled_next;
	free(kp->seen);
	part_init(kp);
	kp->carry_next = carry;
}

int32_t inbox__kafka_seen_get(const kafka_part *kp, int64_t offset)
{
	for (size_t i = 0; i < kp->nseen; i++)
		if (kp->seen[i].offset == offset)
			return kp->seen[i].count;
	return 0;
}

int inbox__kafka_seen_reserve(kafka_part *kp, size_t extra)
{
	if (kp->nseen + extra <= kp->capseen)
		return 0;
	size_t n = kp->capseen ? kp->capseen * 2 : 16;
	while (n < kp->nseen + extra)
		n *= 2;
	kafka_seen *ns = realloc(kp->seen, n * sizeof(*ns));
	if (!ns)
		return -1;
	kp->seen = ns;
	kp->capseen = n;
	return 0;
}

int inbox__kafka_seen_put(kafka_part *kp, int64_t offset, int32_t count)
{
	for (size_t i = 0; i < kp->nseen; i++)
		if (kp->seen[i].offset == offset) {
			kp->seen[i].count = count;
			return 0;
		}
	if (inbox__kafka_seen_reserve(kp, 1) < 0)
		return -1;
	kp->seen[kp->nseen].offset = offset;
	kp->seen[kp->nseen].count = count;
	kp->nseen++;
	return 0;
}

void inbox__kafka_seen_prune(kafka_part *kp, int64_t next)
{
	size_t j = 0;
	for (size_t i = 0; i < kp->nseen; i++)
		if (kp->seen[i].offset >= next)
			kp->seen[j++] = kp->seen[i];
	kp->nseen = j;
}

static int wanted(const rd_kafka_topic_partition_list_t *only,
                  const char *topic, int32_t p)
{
	if (!only)
		return 1;
	for (int i = 0; i < only->cnt; i++)
		if (only->elems[i].partition == p &&
		    strcmp(only->elems[i].topic, topic) == 0)
			return 1;
	return 0;
}

int inbox__kafka_commit_settled(kafka_source *ks,
                                const rd_kafka_topic_partition_list_t *only)
{
	rd_kafka_topic_partition_list_t *l =
	    rd_kafka_topic_partition_list_new(4);
	if (!l)
		return INBOX_ERR_NOMEM;
	for (size_t p = 0; p < ks->nparts; p++) {
		kafka_part *kp = &ks->parts[p];
		if (kp->settled_next < 0 ||
		    kp->settled_next == kp->committed_next ||
		    !wanted(only, ks->topic, (int32_t)p))
			continue;
		rd_kafka_topic_partition_list_add(l, ks->topic, (int32_t)p)
		    ->offset = kp->settled_next;
	}
	int rc = INBOX_OK;
	if (l->cnt > 0) {
		rd_kafka_resp_err_t err = rd_kafka_commit(ks->rk, l, 0);
		inbox__kafka_commit_result(ks, err, l);
		if (err) {
			inbox__source_seterr(&ks->base,
			                     "kafka: offset commit failed: %s",
			                     rd_kafka_err2str(err));
			rc = INBOX_ERR_SOURCE;
		}
	}
	rd_kafka_topic_partition_list_destroy(l);
	return rc;
}

void inbox__kafka_recommit(kafka_source *ks)
{
	rd_kafka_topic_partition_list_t *l =
	    rd_kafka_topic_partition_list_new(4);
	ks->commit_failed = 0;
	if (!l)
		return;
	for (size_t p = 0; p < ks->nparts; p++) {
		kafka_part *kp = &ks->parts[p];
		if (kp->assigned && kp->settled_next > kp->committed_next)
			rd_kafka_topic_partition_list_add(l, ks->topic,
			                                  (int32_t)p)
			    ->offset = kp->settled_next;
	}
	if (l->cnt > 0)
		rd_kafka_commit(ks->rk, l, 1);
	rd_kafka_topic_partition_list_destroy(l);
}

void inbox__kafka_commit_result(kafka_source *ks, rd_kafka_resp_err_t err,
                                const rd_kafka_topic_partition_list_t *l)
{
	if (err == RD_KAFKA_RESP_ERR__NO_OFFSET)
		return;
	if (err)
		ks->commit_failed = 1;
	for (int i = 0; l && i < l->cnt; i++) {
		const rd_kafka_topic_partition_t *e = &l->elems[i];
		kafka_part *kp;
		if (strcmp(e->topic, ks->topic) != 0 || e->offset < 0 ||
		    !(kp = inbox__kafka_part(ks, e->partition)))
			continue;
		if (err || e->err) {
			ks->commit_failed = 1;
			continue;
		}
		if (e->offset > kp->committed_next)
			kp->committed_next = e->offset;
		if (e->offset >= kp->carry_next)
			kp->carry_next = -1;
	}
}

/* Drop the unsettled messages of the batch being polled whose partition
 * is revoked: the new owner will deliver them. */
static void drop_batch_of(kafka_source *ks, int32_t p)
{
	for (size_t i = 0; i < ks->nbatch; i++) {
		kafka_slot *s = &ks->slots[i];
		if (s->msg && s->partition == p) {
			rd_kafka_message_destroy(s->msg);
			s->msg = NULL;
		}
	}
}

/* Partitions coming back with settled offsets that may never have been
 * committed start after them, unless the group committed further. */
static void apply_carry(kafka_source *ks, rd_kafka_t *rk,
                        rd_kafka_topic_partition_list_t *parts)
{
	rd_kafka_topic_partition_list_t *q =
	    rd_kafka_topic_partition_list_new(parts->cnt ? parts->cnt : 1);
	if (!q)
		return;
	for (int i = 0; i < parts->cnt; i++) {
		kafka_part *kp =
		    inbox__kafka_part(ks, parts->elems[i].partition);
		if (kp && kp->carry_next >= 0)
			rd_kafka_topic_partition_list_add(
			    q, ks->topic, parts->elems[i].partition);
	}
	/* If the committed offsets cannot be read, starting at our own
	 * settled offset is still safe: everything below it is in the inbox.
	 */
	if (q->cnt > 0 && rd_kafka_committed(rk, q, 5000) != 0)
		for (int i = 0; i < q->cnt; i++)
			q->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
	for (int i = 0; i < q->cnt; i++) {
		kafka_part *kp = inbox__kafka_part(ks, q->elems[i].partition);
		int64_t committed = q->elems[i].err ? RD_KAFKA_OFFSET_INVALID
		                                    : q->elems[i].offset;
		if (committed < kp->carry_next) {
			rd_kafka_topic_partition_t *e =
			    rd_kafka_topic_partition_list_find(
			        parts, ks->topic, q->elems[i].partition);
			if (e)
				e->offset = kp->carry_next;
			kp->settled_next = kp->carry_next;
		}
		kp->carry_next = -1;
	}
	rd_kafka_topic_partition_list_destroy(q);
}

/* One info line per rebalance step, so an operator (or a test) sees which
 * member owns what: {"event":"kafka_assigned","partitions":[0,2]}. */
static void log_rebalance(const kafka_source *ks, const char *event,
                          const rd_kafka_topic_partition_list_t *parts)
{
	if (!inbox__log_enabled(INBOX_LOG_INFO))
		return;
	char list[512];
	size_t n = 0;
	int i = 0;
	for (; i < parts->cnt && n + 16 < sizeof(list); i++)
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%d",
		                      i ? "," : "",
		                      (int)parts->elems[i].partition);
	list[n] = '\0';
	inbox__log(INBOX_LOG_INFO, ks->base.opts.consumer,
	           "\"event\":\"%s\",\"topic\":\"%s\",\"partitions\":[%s]%s",
	           event, inbox__log_escape(ks->topic), list,
	           i < parts->cnt ? ",\"truncated\":true" : "");
}

static void on_assign(kafka_source *ks, rd_kafka_t *rk,
                      rd_kafka_topic_partition_list_t *parts, int coop)
{
	for (int i = 0; i < parts->cnt; i++) {
		inbox__kafka_part_forget(ks, parts->elems[i].partition);
		kafka_part *kp =
		    inbox__kafka_part(ks, parts->elems[i].partition);
		if (kp)
			kp->assigned = 1;
	}
	apply_carry(ks, rk, parts);
	rd_kafka_error_t *error = NULL;
	rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
	if (coop)
		error = rd_kafka_incremental_assign(rk, parts);
	else
		err = rd_kafka_assign(rk, parts);
	if (error) {
		inbox__source_seterr(&ks->base, "kafka: assign failed: %s",
		                     rd_kafka_error_string(error));
		rd_kafka_error_destroy(error);
		ks->error_seen = 1;
	} else if (err) {
		inbox__source_seterr(&ks->base, "kafka: assign failed: %s",
		                     rd_kafka_err2str(err));
		ks->error_seen = 1;
	}
}

static void on_revoke(kafka_source *ks, rd_kafka_t *rk,
                      rd_kafka_topic_partition_list_t *parts, int coop)
{
	rd_kafka_topic_partition_list_t *paused =
	    rd_kafka_topic_partition_list_new(parts->cnt ? parts->cnt : 1);
	for (int i = 0; i < parts->cnt; i++) {
		int32_t p = parts->elems[i].partition;
		drop_batch_of(ks, p);
		if (paused && p >= 0 && (size_t)p < ks->nparts &&
		    ks->parts[p].paused)
			rd_kafka_topic_partition_list_add(paused, ks->topic, p);
	}
	/* Commit what was settled before giving the partitions away, unless
	 * they are already lost (someone else may own them). */
	if (!rd_kafka_assignment_lost(rk) &&
	    inbox__kafka_commit_settled(ks, parts) < 0)
		ks->error_seen = 1;
	/* Our pause must not outlive our ownership. */
	if (paused && paused->cnt > 0)
		rd_kafka_resume_partitions(rk, paused);
	if (paused)
		rd_kafka_topic_partition_list_destroy(paused);
	for (int i = 0; i < parts->cnt; i++)
		inbox__kafka_part_forget(ks, parts->elems[i].partition);
	if (coop) {
		rd_kafka_error_t *error =
		    rd_kafka_incremental_unassign(rk, parts);
		if (error) {
			inbox__source_seterr(&ks->base,
			                     "kafka: unassign failed: %s",
			                     rd_kafka_error_string(error));
			rd_kafka_error_destroy(error);
			ks->error_seen = 1;
		}
	} else {
		rd_kafka_assign(rk, NULL);
	}
}

void inbox__kafka_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                               rd_kafka_topic_partition_list_t *parts,
                               void *opaque)
{
	kafka_source *ks = opaque;
	/* NULL once the group no longer answers: the revocation that
	 * rd_kafka_consumer_close() serves can come after that (a SIGSEGV
	 * in strcmp at a daemon's drain, kafka_daemon_churn): then the one
	 * last known (none: eager, and assign(NULL) gives up everything). */
	const char *proto = rd_kafka_rebalance_protocol(rk);
	if (proto)
		ks->coop = strcmp(proto, "COOPERATIVE") == 0;
	int coop = ks->coop;
	switch (err) {
	case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
		ks->assigned_once = 1;
		log_rebalance(ks, "kafka_assigned", parts);
		on_assign(ks, rk, parts, coop);
		break;
	case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
		log_rebalance(ks, "kafka_revoked", parts);
		on_revoke(ks, rk, parts, coop);
		break;
	default:
		inbox__source_seterr(&ks->base, "kafka: rebalance failed: %s",
		                     rd_kafka_err2str(err));
		ks->error_seen = 1;
		/* Drop everything: the assignment is unknown now. */
		for (size_t p = 0; p < ks->nparts; p++) {
			drop_batch_of(ks, (int32_t)p);
			inbox__kafka_part_forget(ks, (int32_t)p);
		}
		rd_kafka_assign(rk, NULL);
		break;
	}
}

/* Where auto.offset.reset sends a group without a committed offset:
 * the low or the high watermark. */
static int reset_to_end(kafka_source *ks)
{
	char reset[32] = "earliest";
	size_t n = sizeof(reset);
	const rd_kafka_conf_t *c = rd_kafka_conf(ks->rk);
	if (!c || rd_kafka_conf_get(c, "auto.offset.reset", reset, &n) !=
	              RD_KAFKA_CONF_OK)
		return 0;
	return strcmp(reset, "latest") == 0 || strcmp(reset, "largest") == 0 ||
	       strcmp(reset, "end") == 0;
}

/* The lag slot: high watermark minus position, summed over the assigned
 * partitions. The position is where this member is done, not where its
 * fetcher is (librdkafka fetches ahead): the next offset after the
 * settled prefix, else the last one committed, else where the partition
 * starts: the group's committed offset (one request for all such
 * partitions, bounded), else where auto.offset.reset sends it. The
 * watermarks are the ones the fetcher last saw
 * (rd_kafka_get_watermark_offsets: no request); a partition not fetched
 * from yet asks the broker, with a short timeout. No assigned partition:
 * 0 once the group assigned us, else unknown. */
int inbox__kafka_lag(inbox_source *src, int64_t *messages, int64_t *bytes)
{
	kafka_source *ks = (kafka_source *)src;
	(void)bytes;
	int64_t sum = 0;
	int known = 0, end = -1;
	rd_kafka_topic_partition_list_t *ask = NULL;
	/* the watermarks of the partitions asked about, by partition */
	int64_t *wm = NULL;
	for (size_t p = 0; p < ks->nparts; p++) {
		kafka_part *kp = &ks->parts[p];
		if (!kp->assigned)
			continue;
		int64_t lo = RD_KAFKA_OFFSET_INVALID,
		        hi = RD_KAFKA_OFFSET_INVALID;
		if ((rd_kafka_get_watermark_offsets(ks->rk, ks->topic,
		                                    (int32_t)p, &lo, &hi) !=
		         RD_KAFKA_RESP_ERR_NO_ERROR ||
		     hi < 0 || lo < 0) &&
		    rd_kafka_query_watermark_offsets(
		        ks->rk, ks->topic, (int32_t)p, &lo, &hi, 500) !=
		        RD_KAFKA_RESP_ERR_NO_ERROR)
			continue;
		int64_t pos = kp->settled_next;
		if (pos < 0)
			pos = kp->committed_next;
		if (pos >= 0) {
			sum += hi > pos ? hi - pos : 0;
			known = 1;
			continue;
		}
		/* nothing settled nor committed by us: asked below */
		if (!wm && !(wm = calloc(2 * ks->nparts, sizeof(*wm))))
			continue;
		if (!ask && !(ask = rd_kafka_topic_partition_list_new(8)))
			continue;
		rd_kafka_topic_partition_list_add(ask, ks->topic, (int32_t)p);
		wm[2 * p] = lo;
		wm[2 * p + 1] = hi;
	}
	if (ask && rd_kafka_committed(ks->rk, ask, 500) ==
	               RD_KAFKA_RESP_ERR_NO_ERROR) {
		for (int i = 0; i < ask->cnt; i++) {
			const rd_kafka_topic_partition_t *e = &ask->elems[i];
			if (e->partition < 0 ||
			    (size_t)e->partition >= ks->nparts)
				continue;
			int64_t lo = wm[2 * e->partition];
			int64_t hi = wm[2 * e->partition + 1];
			int64_t pos = e->err == RD_KAFKA_RESP_ERR_NO_ERROR
			                  ? e->offset
			                  : -1;
			if (pos < 0) {
				if (end < 0)
					end = reset_to_end(ks);
				pos = end ? hi : lo;
			}
			sum += hi > pos ? hi - pos : 0;
			known = 1;
		}
	}
	if (ask)
		rd_kafka_topic_partition_list_destroy(ask);
	free(wm);
	if (known || ks->assigned_once)
		*messages = sum;
	return 0;
}
