/*
 * The Kafka source: a consumer-group member reading one topic through
 * librdkafka.
 *
 * URL
 *   kafka://HOST:PORT[,HOST:PORT...]/TOPIC?group=G&...
 *
 *   group=G             consumer group (default: the consumer name).
 *   id_header=NAME      header holding the producer's message id (default
 *                       "message-id"). Its last value, if present and
 *                       non-empty, is the delivery id; absent or empty,
 *                       the id is NULL and the consumer takes it from
 *                       the payload. A value holding a NUL byte or not
 *                       valid UTF-8 is never cut nor replaced by the
 *                       payload's id: the delivery is refused
 *                       (INBOX_DELIVERY_REFUSED), the consumer
 *                       dead-letters it with the reason. "id_header="
 *                       (empty) never reads a header.
 *   offset_reset=earliest|latest
 *                       where a group without a committed offset starts
 *                       (default earliest: nothing produced before the
 *                       first start is skipped).
 *   open_timeout_ms=N   open() waits up to N ms for a broker to answer
 *                       and fails with INBOX_ERR_CONNECT otherwise
 *                       (default 10000; 0 = do not wait).
 *   rdkafka.PROP=VALUE  any librdkafka property (CONFIGURATION.md), e.g.
 *                       rdkafka.security.protocol=SASL_SSL. Applied after
 *                       the source's own settings. Refused because the
 *                       source owns them: bootstrap.servers,
 *                       metadata.broker.list, group.id,
 *                       enable.auto.commit, enable.auto.offset.store.
 *   Values are percent-decoded. Unknown parameters, an invalid property or
 *   value, a missing topic or broker list give INBOX_ERR_URL with the
 *   reason in errmsg; values of secret properties (password, secret, key,
 *   token, ...) are never echoed.
 *
 * Settings the source imposes: enable.auto.commit=false,
 * enable.auto.offset.store=false, partition.assignment.strategy=
 * cooperative-sticky (overridable; the rebalance callback handles both
 * protocols). Cooperative: a member joining or leaving only moves the
 * partitions that change owner; the others keep consuming and keep their
 * pending retry state, instead of every member stopping, committing and
 * restarting all its partitions on each rebalance.
 *
 * Deliveries
 *   payload = the message value (truncated to max_payload + 1 bytes when
 *   larger, and refused with its real size, so the consumer dead-letters
 *   it as over-size; max_payload 0 = no limit), id = see id_header, headers = a
 * JSON object text of all headers (the last value of a repeated name; valid
 * UTF-8 values as strings, null values as null, other values as "hex:" +
 * lower-case hex; headers whose name is not valid UTF-8 are left out; NULL when
 * the message has none), position = "TOPIC/PARTITION/OFFSET", timestamp_ms =
 *   the message timestamp (0 if unavailable), delivery_count = 1, plus one
 *   for each earlier delivery of that offset by this process (after a
 *   RETRY, IN_PROGRESS or failed batch), source_token = slot index.
 *
 * Progress
 *   settle(): per partition, in offset order, the prefix of the batch whose
 *   outcomes are ackable is stored (offset + 1) and committed
 *   asynchronously. Async because a lost commit only means a redelivery
 *   the inbox drops, while a synchronous one would add a broker round trip
 *   to every batch; a failed commit is reported in errmsg by the next
 *   poll and committed again. On a revocation and on close the settled
 *   offsets are committed synchronously, so the next owner starts exactly
 *   after them. If that commit is refused (the assignment was lost, or
 *   the group is already rebalancing) and the partition comes back to
 *   this member, it resumes after what it settled if that is beyond the
 *   committed offset — safe, as everything settled is in the inbox.
 *   From the first non-ackable message of a partition on (all of the
 *   partition's messages when res is NULL) the rest of the batch is
 *   dropped, the partition is sought back to that message and paused for
 *   retry_delay_ms: it is delivered again, in order, the others first
 *   seen again as duplicates. Other partitions are unaffected.
 *
 * Errors
 *   Broker errors (transport, all brokers down, unknown topic, failed
 *   commits) are put in errmsg; librdkafka reconnects by itself. poll()
 *   still returns INBOX_OK when it has messages; with none, it returns
 *   INBOX_ERR_SOURCE after waiting its timeout. Partition EOF is ignored.
 */
#ifndef INBOX_SOURCE_KAFKA_H
#define INBOX_SOURCE_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include <inbox/sys/source.h>

#include "core/buf.h"
#include "source/common.h"

/* Offsets of one partition delivered but not settled as ackable: the
 * delivery count they had. */
typedef struct kafka_seen {
	int64_t offset;
	int32_t count;
} kafka_seen;

typedef struct kafka_part {
	int assigned;
	int paused;             /* paused by us until resume_at */
	int need_seek;          /* a seek back failed: retry before consuming */
	int64_t resume_at;      /* monotonic ms */
	int64_t rewind_to;      /* offset to seek back to (need_seek) */
	int64_t settled_next;   /* next offset after the settled prefix, -1 */
	int64_t committed_next; /* last known committed, -1 */
	/* Settled but maybe never committed when the partition was revoked
	 * or lost (a commit refused during the rebalance): if the partition
	 * comes back, consumption resumes here rather than at an older
	 * committed offset. Survives forgetting. -1: none. */
	int64_t carry_next;
	kafka_seen *seen;
	size_t nseen, capseen;
} kafka_part;

/* A polled message waiting for settle. */
typedef struct kafka_slot {
	rd_kafka_message_t *msg; /* NULL: dropped (partition revoked) */
	int32_t partition;
	int64_t offset;
	int32_t count;
	int ack; /* settle: ackable */
	/* id, headers and position as NUL-terminated strings; -1 = none */
	inbox__buf text;
	long id_at, headers_at, position_at;
} kafka_slot;

typedef struct kafka_source {
	struct inbox_source base; /* must be first */

	rd_kafka_t *rk;
	char *topic;
	char *id_header; /* NULL: none */
	int retry_delay_ms;
	size_t max_payload;

	kafka_slot *slots;
	size_t nslots; /* allocated */
	size_t nbatch; /* slots of the batch in hand */
	int polled;    /* a batch awaits settle */

	kafka_part *parts; /* indexed by partition id */
	size_t nparts;

	int error_seen;    /* an error was reported during this poll */
	int commit_failed; /* an async commit failed: commit again */
	int closing;
} kafka_source;

/* kafka_url.c: parse the URL and build the librdkafka configuration
 * (parse only: no connection; *conf is set only on success, and is the
 * caller's; errmsg on failure). INBOX_ERR_URL / NOMEM. */
int inbox__kafka_parse_url(kafka_source *ks, const char *url,
                           const inbox_source_options *opts,
                           rd_kafka_conf_t **conf, int *open_timeout_ms);
/* Free what the parse filled in (topic, id_header). */
void inbox__kafka_url_clear(kafka_source *ks);

/* kafka_parts.c: partition state. */
/* The state of partition p, grown on demand; NULL on NOMEM or p < 0. */
kafka_part *inbox__kafka_part(kafka_source *ks, int32_t p);
/* Forget everything about partition p (revoked) but what it settled and
 * may not have committed (carry_next). */
void inbox__kafka_part_forget(kafka_source *ks, int32_t p);
/* Earlier delivery count of offset, 0 if none. */
int32_t inbox__kafka_seen_get(const kafka_part *kp, int64_t offset);
/* Remember that offset was delivered `count` times. 0 or -1 (NOMEM). */
int inbox__kafka_seen_put(kafka_part *kp, int64_t offset, int32_t count);
/* Forget offsets below `next`. */
void inbox__kafka_seen_prune(kafka_part *kp, int64_t next);
/* Synchronously commit the settled offsets of the partitions in `only`
 * (NULL: all known partitions) not yet committed. INBOX_OK or
 * INBOX_ERR_SOURCE with errmsg. */
int inbox__kafka_commit_settled(kafka_source *ks,
                                const rd_kafka_topic_partition_list_t *only);
/* Commit again, asynchronously, what a failed commit left uncommitted. */
void inbox__kafka_recommit(kafka_source *ks);
/* Result of a commit (served by poll): note what the broker took. */
void inbox__kafka_commit_result(kafka_source *ks, rd_kafka_resp_err_t err,
                                const rd_kafka_topic_partition_list_t *l);
/* The rebalance callback (opaque = the kafka_source). */
void inbox__kafka_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                               rd_kafka_topic_partition_list_t *parts,
                               void *opaque);

/* kafka_headers.c: append the delivery id (NUL-terminated) taken from
 * header `name` to out, or its refusal when the value holds a NUL byte
 * or is not UTF-8; returns 1 if appended, 0 if absent or empty, -1 on
 * NOMEM. */
int inbox__kafka_header_id(inbox__buf *out, rd_kafka_headers_t *hdrs,
                           const char *name);
/* Append the headers as a JSON object text (NUL-terminated). 0 or -1. */
int inbox__kafka_headers_json(inbox__buf *out, rd_kafka_headers_t *hdrs);

#endif
