/*
 * The Redis Streams source: a member of a consumer group reading one
 * stream through hiredis (0.14 API; Redis 6.2 or newer, 7.x advised).
 *
 * URL
 *   redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]/STREAM[?PARAMS]
 *
 *   No TLS: hiredis 0.14 has none, so rediss:// is refused with that
 *   reason (use a private network or a local TLS tunnel: docs/config.md).
 *   HOST       a name, an IPv4 address or [IPv6]; PORT default 6379.
 *   USER, PASSWORD  sent with AUTH after each connect (AUTH PASSWORD when
 *              USER is empty: "redis://:secret@host/..."). Both parts
 *              are percent-decoded; a raw '@', '/', '?', '#', '[' or ']'
 *              in them (and any other raw '@' in the URL) is refused: the
 *              client libraries disagree on where such a user info ends
 *              (write %40 %2F %3F %23 %5B %5D). A bare "redis://PASSWORD@"
 *              is refused. The password never appears in errmsg, nor in
 *              inbox_redact_url's text.
 *   DB         optional database number (SELECT). The first path segment
 *              is taken as DB when it is all digits and another segment
 *              follows; the rest of the path is the stream.
 *   STREAM     the stream key, percent-decoded; may contain '/'. Required.
 *   Parameters (names and values percent-decoded; NAME alone is NAME=;
 *   unknown names are an error):
 *     group=G          consumer group (default: the consumer name).
 *     consumer=C       this member's name inside the group (default
 *                      HOSTNAME-PID, so a restarted process is a new
 *                      member and takes the old one's entries over with
 *                      XAUTOCLAIM once they are idle for claim_idle).
 *     claim_idle=MS    entries pending longer than MS without a new
 *                      delivery are taken from any member (default
 *                      30000). Must exceed the longest batch and the
 *                      retry delay, or live members steal each other's
 *                      entries (harmless — the inbox arbitrates — but
 *                      wasteful).
 *     start=ID         where XGROUP CREATE starts a new group: 0 (default,
 *                      the whole stream) or $ (only new entries) or an id.
 *     timeout_ms=MS    connect and command timeout (default 5000).
 *     drain=1          report the end of input (poll's eof) once the group
 *                      is drained: a read of new entries returned nothing,
 *                      the group has no pending entry at all (XPENDING),
 *                      and nothing waits for a retry here. For batch runs
 *                      (`inbox run --once`) and tests; default 0: a stream
 *                      never ends.
 *
 * On every (re)connect: AUTH, SELECT, then XGROUP CREATE STREAM G START
 * MKSTREAM (an existing group — BUSYGROUP — is fine).
 *
 * Poll, in this order
 *   1. Entries of our own pending list (XREADGROUP ... STREAMS S 0, paged
 *      with the last id as cursor): after open, after every reconnect and
 *      when a retry is due (below). Redis counts each of these as one more
 *      delivery.
 *   2. XAUTOCLAIM S G C claim_idle CURSOR COUNT max: entries idle longer
 *      than claim_idle (members that died) become ours; their delivery
 *      counter grows by one. Run every claim_idle/2 (50 ms .. 5 s), and
 *      again at once while the scan cursor is not back at 0-0.
 *   3. XREADGROUP GROUP G C COUNT max BLOCK timeout STREAMS S > : new
 *      entries (timeout_ms <= 0: no BLOCK).
 *   The first step that yields something makes the batch.
 *
 * Deliveries
 *   payload   the value of the field "payload"; else of the field "data";
 *             else (neither exists) a JSON object of all the entry's
 *             fields, {"field":"value",...}, values as JSON strings. In
 *             that object, as in headers, names and values that are not
 *             valid UTF-8 (or names holding NUL) are written as "hex:" +
 *             lower-case hex; a repeated field name keeps its last value.
 *             A payload longer than max_payload is cut to max_payload + 1
 *             bytes and refused (inbox_delivery.refused) with its real
 *             size: the consumer dead-letters it as over-size.
 *   id        the value of the field "id", else "message-id"; NULL when
 *             there is none or it is empty (the consumer takes it from
 *             the payload). A value holding a NUL byte or not valid UTF-8
 *             is never cut nor replaced: the delivery is refused with the
 *             reason.
 *   headers   a JSON object of every field except the one used as payload
 *             (NULL when there is none; always NULL for a payload built
 *             from all fields).
 *   position  "STREAM/ENTRY-ID", e.g. "orders/1718000000000-0".
 *   timestamp_ms  the ms part of the entry id when it is a plausible time
 *             (year 2000 or later; auto-generated ids are), else 0.
 *   delivery_count  1 for new entries; for our own pending and claimed
 *             entries Redis's delivery counter (XPENDING), which feeds the
 *             consumer's max_deliveries (never its attempts).
 *
 * Entries deleted from the stream while pending (XDEL, XTRIM) cannot be
 * processed but are never dropped silently: each becomes a tombstone
 * delivery — empty payload, refused ("entry STREAM/ENTRY-ID was deleted
 * from the stream while pending: ..."), position "STREAM/ENTRY-ID",
 * headers {"redis.deleted":"entry deleted from the stream while pending"}
 * — which the consumer dead-letters with that reason, position and
 * headers; then it is acked. They show up as a nil entry in step 1
 * (still pending: a crash before the dead letter commits brings them back)
 * or in the deleted-ids list of XAUTOCLAIM (Redis 7 drops them from the
 * pending list itself; kept in memory until the dead letter commits, so a
 * crash in that window loses only the tombstone). A tombstone may also be
 * reported for an entry another member is processing at that moment.
 *
 * Settle
 *   Ackable outcomes are acked with one XACK carrying all their ids. The
 *   others (RETRY, IN_PROGRESS, or all when res is NULL) stay pending in
 *   Redis; once retry_delay_ms has passed since the first of them was
 *   settled, step 1 delivers our whole pending list again (so entries
 *   settled later in that window come back a little early). Tombstones
 *   from XAUTOCLAIM that were not acked are kept here and delivered again
 *   at the same time. A failed XACK leaves the entries pending: they come
 *   back through step 1 after the reconnect and the inbox drops them as
 *   duplicates.
 *
 * Errors and reconnection
 *   A lost connection (I/O error, EOF, timeout) closes the context; the
 *   next poll reconnects (at most every 100 ms .. 2 s, backing off) and
 *   returns INBOX_ERR_CONNECT while it cannot. Nothing in flight is ever
 *   acked without its commit: it stays pending and is delivered again.
 *   Redis error replies give INBOX_ERR_SOURCE with the text in errmsg; a
 *   NOGROUP reply (stream or group deleted) recreates the group from 0
 *   (everything the stream holds from then on is new to the group).
 *
 * Clean close: a member whose name was generated and that has nothing
 * pending deletes itself from the group (XGROUP DELCONSUMER), so restarts
 * do not pile up members; a killed process leaves its name behind (delete
 * such members with XGROUP DELCONSUMER once XPENDING shows them empty).
 */
#ifndef INBOX_SOURCE_REDIS_H
#define INBOX_SOURCE_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include <inbox/sys/source.h>

#include "base/buf.h"
#include "source/common.h"

/* "18446744073709551615-18446744073709551615" + NUL fits. */
#define RS_ID_MAX 48

#define RS_TOMBSTONE_HEADERS                                                   \
	"{\"redis.deleted\":\"entry deleted from the stream while pending\"}"

/* One delivery of the batch in hand. */
typedef struct rs_slot {
	char entry_id[RS_ID_MAX];
	int deleted;    /* tombstone */
	int from_pel;   /* still in the pending list (XACK needed) */
	int need_count; /* delivery count to be read with XPENDING */
	int32_t count;
	const char *payload; /* into the reply, or NULL: payload_at */
	size_t payload_len;
	/* NUL-terminated strings in text; -1 = none */
	inbox__buf text;
	long id_at, headers_at, position_at, payload_at;
} rs_slot;

/* A tombstone no longer in Redis's pending list, not yet dead-lettered. */
typedef struct rs_tomb {
	char entry_id[RS_ID_MAX];
	int due; /* deliver at the next poll; else at the next retry pass */
} rs_tomb;

typedef struct redis_source {
	struct inbox_source base; /* must be first */

	/* From the URL. */
	char *host;
	int port;
	char *user;     /* NULL: AUTH with the password alone */
	char *password; /* NULL: no AUTH */
	int db;         /* -1: no SELECT */
	char *stream;
	char *group;
	char *consumer;
	int consumer_generated;
	int64_t claim_idle_ms;
	char *start;
	int timeout_ms;
	int drain;
	char *label; /* "redis://HOST:PORT/STREAM" for messages */

	size_t max_payload; /* 0: no limit */
	int retry_delay_ms;

	redisContext *ctx;            /* NULL while disconnected */
	int sock_timeout_ms;          /* read/write timeout set on ctx */
	inbox__src_backoff reconnect; /* up to 2 s between attempts */

	/* Step 1: a pass over our own pending list. */
	int history;
	char history_from[RS_ID_MAX];
	int retry_pending; /* a retry pass is scheduled at retry_at */
	int64_t retry_at;  /* monotonic ms */

	/* Step 2. */
	int64_t autoclaim_at;
	char autoclaim_cursor[RS_ID_MAX];

	/* Tombstones out of the pending list waiting to be dead-lettered. */
	rs_tomb *tombs;
	size_t ntombs, captombs;

	/* The batch in hand. */
	redisReply *reply; /* entries point into it */
	rs_slot *slots;
	size_t capslots;
	size_t nbatch;

	inbox__buf argbuf; /* scratch for command arguments */
} redis_source;

/* redis_url.c: fill host, port, user, password, db, stream and the
 * parameters from the URL (parse only: no connection; errmsg on
 * failure). INBOX_ERR_URL / NOMEM. */
int inbox__redis_parse_url(redis_source *rs, const char *url,
                           const char *consumer);
/* Free what the parse filled in. */
void inbox__redis_url_clear(redis_source *rs);

/* redis_conn.c */
/* Connect, AUTH, SELECT, create the group. INBOX_OK or CONNECT/SOURCE
 * with errmsg; ctx stays NULL on failure. */
int inbox__redis_connect(redis_source *rs);
void inbox__redis_disconnect(redis_source *rs);
/* Run one command. On INBOX_OK *out is the reply (not an error reply;
 * free it). A lost connection disconnects and gives INBOX_ERR_CONNECT, an
 * error reply INBOX_ERR_SOURCE (NOGROUP: the group is recreated first),
 * both with errmsg naming `what`. */
int inbox__redis_cmd(redis_source *rs, const char *what, int argc,
                     const char **argv, const size_t *argvlen,
                     redisReply **out);
/* Set the socket read/write timeout if it differs from the current one. */
int inbox__redis_sock_timeout(redis_source *rs, int ms);
/* Record a lost-connection error from ctx->errstr and disconnect. */
int inbox__redis_lost(redis_source *rs, const char *what);

/* redis_entry.c */
/* Fill slot from an entry reply [id, [field, value, ...] | nil]. A nil
 * field list makes a tombstone. INBOX_OK, NOMEM, or SOURCE for a reply of
 * the wrong shape. */
int inbox__redis_slot_from_entry(redis_source *rs, rs_slot *slot,
                                 const redisReply *entry);
/* Fill slot as a tombstone for entry_id. */
int inbox__redis_slot_tombstone(redis_source *rs, rs_slot *slot,
                                const char *entry_id, size_t idlen);
/* Point d at slot's data. */
void inbox__redis_slot_deliver(const rs_slot *slot, inbox_delivery *d);
/* ms part of an entry id, 0 if implausible as a time. */
int64_t inbox__redis_id_ms(const char *entry_id);

/* redis_poll.c */
/* Queue a tombstone (due: at the next poll, else at the retry pass). */
int inbox__redis_push_tomb(redis_source *rs, const char *entry_id, int due);
int inbox__redis_poll(inbox_source *src, inbox_delivery *out, size_t max,
                      size_t *n, int timeout_ms, int *eof);
/* The lag slot (redis_poll.c): the group's lag plus its pending. */
int inbox__redis_lag(inbox_source *src, int64_t *messages, int64_t *bytes);

/* The vtable's client_version (<name> <version>). */
int inbox__redis_client_version(char *out, size_t len);

#endif
