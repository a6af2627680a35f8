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
 *                       (inbox_delivery.refused), the consumer
 *                       dead-letters it with the reason. "id_header="
 *                       (empty) never reads a header.
 *   offset_reset=earliest|latest
 *                       where a group without a committed offset starts
 *                       (default earliest: nothing produced before the
 *                       first start is skipped).
 *   open_timeout_ms=N   open() waits up to N ms for a broker to answer
 *                       and fails with INBOX_ERR_CONNECT otherwise
 *                       (default 10000; 0 = do not wait).
 *   instance_id=ID      this member's group.instance.id (static
 *                       membership, below): 1 to 249 of [A-Za-z0-9._-].
 *                       "instance_id=" (empty): dynamic membership, no
 *                       instance id. Default: derived (below).
 *   rdkafka.PROP=VALUE  any librdkafka property (CONFIGURATION.md), e.g.
 *                       rdkafka.security.protocol=SASL_SSL. Applied after
 *                       the source's own settings. Refused because the
 *                       source owns them: bootstrap.servers,
 *                       metadata.broker.list, group.id,
 *                       enable.auto.commit, enable.auto.offset.store,
 *                       log.queue.
 *   Values are percent-decoded. Unknown parameters, an invalid property or
 *   value, a missing topic or broker list give INBOX_ERR_URL with the
 *   reason in errmsg; values of secret properties (password, secret, key,
 *   token, ...) are never echoed.
 *
 * Settings the source imposes: enable.auto.commit=false,
 * enable.auto.offset.store=false, partition.assignment.strategy=
 * cooperative-sticky (overridable; the rebalance callback handles both
 * protocols). The prefetch is librdkafka's own (queued.min.messages
 * 100000, queued.max.messages.kbytes 65536, one bound for the whole
 * consumer queue, all partitions): rdkafka.queued.max.messages.kbytes=
 * lowers the memory it may take on a backlog. A small queued.min.messages
 * starves the consumer: a partition whose queue holds that many is
 * fetched again only after a backoff (up to a second), and the consumer
 * drains it sooner. Cooperative: a member joining or leaving only moves
 * the partitions that change owner; the others keep consuming and keep
 * their pending retry state, instead of every member stopping, committing
 * and restarting all its partitions on each rebalance.
 *
 * Group membership
 *   Static (KIP-345) by default: the member joins with a
 *   group.instance.id, so that a daemon restarted (crashed, killed,
 *   redeployed) within session.timeout.ms comes back as the same member
 *   and the broker hands it its partitions again without a rebalance;
 *   the rest of the group never stops. A dynamic member that dies holds
 *   the whole group in a rebalance until its session times out, and its
 *   restart triggers another one.
 *   The id, unless instance_id= or rdkafka.group.instance.id= gives it,
 *   is derived from the host name and the consumer name:
 *   "HOST-CONSUMER" (characters Kafka refuses become '_'; past 245
 *   characters the tail is a hash), or "HOST-CONSUMER-N" (N = 1..99) when
 *   another live process on this host (or another source of this
 *   process) already has "HOST-CONSUMER" in this group: each id is held
 *   by an abstract Unix socket named after a hash of group and id (Linux;
 *   no file is created), which the kernel releases when the process
 *   exits however it exits, so a restarted daemon gets its id back and
 *   two running ones never share one. Stable across restarts as long as
 *   the host name is (a StatefulSet pod, a VM; a container with a
 *   random host name should set instance_id=).
 *   The cost, by design of KIP-345: a static member does not leave the
 *   group when it stops (close() sends no LeaveGroup), so a daemon
 *   stopped for good keeps its partitions idle until its session times
 *   out (session.timeout.ms, librdkafka's default 45 s; set it with
 *   rdkafka.session.timeout.ms=). Two members with one id fence each
 *   other: the older one gets a fatal error, reported by poll() as
 *   INBOX_ERR_CONFIG with the id in errmsg (the runner stops; nothing is
 *   lost, what it had settled was committed). The effective id is logged
 *   once at open ({"event":"kafka_member","instance_id":...}).
 *   Brokers older than 2.3 have no static membership: set instance_id=
 *   (empty) there.
 *   librdkafka's mock cluster (the tests' broker) accepts the id but
 *   ignores it: a restart there is a rebalance either way.
 *
 * Deliveries
 *   payload = the message value (truncated to max_payload + 1 bytes when
 *   larger, and refused with its real size, so the consumer dead-letters
 *   it as over-size; max_payload 0 = no limit), id = see id_header,
 *   headers = a JSON object text of all headers (the last value of a
 *   repeated name; valid UTF-8 values as strings, null values as null,
 *   other values as "hex:" + lower-case hex, and so are names that are
 *   not valid UTF-8; NULL when the message has none), position =
 *   "TOPIC/PARTITION/OFFSET", timestamp_ms = the message timestamp (0 if
 *   unavailable), delivery_count = 1, plus one for each earlier delivery
 *   of that offset by this process (after a RETRY, IN_PROGRESS or failed
 *   batch).
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
 *   A partition handed to another member (a rebalance) or to the next
 *   run of this one (a restart) therefore starts after what was
 *   committed: what it sees again is only what was settled but whose
 *   commit had not reached the broker (an asynchronous commit in flight
 *   when the process died, or one the broker refused during a rebalance
 *   and that poll() had not committed again yet); the inbox drops it.
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
 *   A fatal error (a static member fenced by another with its id) makes
 *   every later poll() return INBOX_ERR_CONFIG.
 *   librdkafka's own log lines (which it would print on stderr) become
 *   "kafka_log" events of the log callback (<inbox/log.h>), fields
 *   {"syslog_level","facility","client","message"}, served on the polling
 *   thread by poll() and close(): syslog levels 0-2 as error, 3-4 (the
 *   broker faults it retries by itself) as warn, 5-6 as info, 7 (with
 *   rdkafka.debug=...) as debug. rdkafka.log_level= filters them first.
 *
 * Closing
 *   close() commits what was settled, then leaves (dynamic) or stops
 *   (static) the member. With librdkafka < 2.3.0 and a cooperative
 *   assignor, a member closed while its first rebalance was under way
 *   (chosen an assignor, never assigned) cannot be destroyed: librdkafka
 *   would abort the process (librdkafka issue 4312). close() then stops
 *   it and leaves its handle to the process (its threads idle until exit)
 *   rather than crash it.
 */
#ifndef INBOX_SOURCE_KAFKA_H
#define INBOX_SOURCE_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include <inbox/sys/source.h>

#include "base/buf.h"
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

/* settle(), per partition of the batch: the first offset not to ack, and
 * the next offset after the ackable prefix. */
typedef struct kafka_settle_part {
	int32_t partition;
	int64_t stop; /* INT64_MAX: all ackable */
	int64_t next; /* -1: nothing to ack */
} kafka_settle_part;

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
	/* settle()'s scratch, nslots long: settling allocates nothing (a
	 * batch that cannot be settled could never be polled past). */
	kafka_settle_part *sparts;
	size_t nbatch; /* slots of the batch in hand */

	kafka_part *parts; /* indexed by partition id */
	size_t nparts;

	int error_seen;    /* an error was reported during this poll */
	int commit_failed; /* an async commit failed: commit again */
	int fatal;         /* librdkafka reported a fatal error */
	int closing;

	/* Group membership (kafka_member.c) */
	char *instance_id;  /* group.instance.id in use; NULL: dynamic */
	int instance_given; /* the URL had instance_id= */
	int member_name_fd; /* holds a derived id on this host; -1: none */
	int assigned_once;  /* the group assigned us (maybe nothing) */
	int coop;           /* the rebalance protocol last known: COOPERATIVE */

	/* The URL's secrets, for librdkafka's log lines (served by poll:
	 * log.queue): built before rd_kafka_new, read-only until close;
	 * and the consumer's name for them. */
	struct inbox__secrets *log_secrets;
	const char *log_consumer;
} kafka_source;

/* kafka_url.c: parse the URL and build the librdkafka configuration
 * (parse only: no connection; *conf is set only on success, and is the
 * caller's; errmsg on failure). INBOX_ERR_URL / NOMEM. */
int inbox__kafka_parse_url(kafka_source *ks, const char *url,
                           const inbox_source_options *opts,
                           rd_kafka_conf_t **conf, int *open_timeout_ms);
/* Free what the parse filled in (topic, id_header). */
void inbox__kafka_url_clear(kafka_source *ks);

/* kafka_member.c: group membership. */
/* Kafka's rule for a group.instance.id; 1 if id keeps it. */
int inbox__kafka_valid_instance_id(const char *id);
/* Set group.instance.id in conf (given, derived, or none: see kafka.h),
 * after the URL was parsed into it. INBOX_OK, NOMEM, CONFIG or URL with
 * errmsg. */
int inbox__kafka_member_setup(kafka_source *ks, rd_kafka_conf_t *conf,
                              const char *consumer);
/* librdkafka raised a fatal error (a fenced static member): the handle
 * is dead; every later poll fails with INBOX_ERR_CONFIG. */
void inbox__kafka_note_fatal(kafka_source *ks);
/* Give up the derived id (close). */
void inbox__kafka_member_release(kafka_source *ks);
/* Before rd_kafka_consumer_close(): would rd_kafka_destroy() abort? */
int inbox__kafka_destroy_would_abort(const kafka_source *ks);

/* kafka_parts.c: partition state. */
/* The state of partition p, grown on demand; NULL on NOMEM or p < 0. */
kafka_part *inbox__kafka_part(kafka_source *ks, int32_t p);
/* Forget everything about partition p (revoked) but what it settled and
 * may not have committed (carry_next). */
void inbox__kafka_part_forget(kafka_source *ks, int32_t p);
/* Earlier delivery count of offset, 0 if none. */
int32_t inbox__kafka_seen_get(const kafka_part *kp, int64_t offset);
/* Room for `extra` more offsets (poll reserves it for its batch, so that
 * settle never needs memory). 0 or -1 (NOMEM). */
int inbox__kafka_seen_reserve(kafka_part *kp, size_t extra);
/* Remember that offset was delivered `count` times. 0 or -1 (NOMEM: not
 * reserved). */
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
/* The lag slot (kafka_parts.c): high watermark minus position, summed
 * over the assigned partitions. */
int inbox__kafka_lag(inbox_source *src, int64_t *messages, int64_t *bytes);
int inbox__kafka_header_id(inbox__buf *out, rd_kafka_headers_t *hdrs,
                           const char *name);
/* Append the headers as a JSON object text (NUL-terminated). 0 or -1. */
int inbox__kafka_headers_json(inbox__buf *out, rd_kafka_headers_t *hdrs);

/* The vtable's client_version (<name> <version>). */
int inbox__kafka_client_version(char *out, size_t len);

#endif
