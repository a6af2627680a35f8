/*
 * The RabbitMQ source: one queue consumed through rabbitmq-c (AMQP 0-9-1)
 * with manual acknowledgements.
 *
 * URL
 *   amqp://[USER[:PASSWORD]@]HOST[:PORT]/[VHOST/]QUEUE[?PARAMS]
 *
 *   USER, PASSWORD  default guest / guest. PORT default 5672. HOST may be
 *                   an [IPv6] literal.
 *   VHOST           the virtual host, percent-encoded as one path segment:
 *                   "%2f" is the default vhost "/". Absent (only one path
 *                   segment) or empty also means "/".
 *   QUEUE           the queue, percent-encoded (a '/' in the name is
 *                   "%2F"). Required.
 *   Every part is percent-decoded; %00 is refused, and so is a '#'
 *   (fragment) anywhere after the host: write it as %23. A raw '@', '/',
 *   '?', '#', '[' or ']' in the user info (and any other raw '@' in the
 *   URL) is refused: libpq and rabbitmq-c end the user info at the first
 *   '@', cnats at the last (write %40 %2F %3F %23 %5B %5D). The password
 *   is what inbox_redact_url hides.
 *
 * TLS
 *   amqps://... is the same URL over TLS (rabbitmq-c with OpenSSL), PORT
 *   default 5671. The broker's certificate is verified, and its name
 *   against HOST, unless tls_verify=0. Parameters
 *   (amqps:// only; a tls_* parameter on amqp:// is refused):
 *   tls_ca=PATH           the CA certificates (PEM) the broker's
 *                         certificate must chain to (default: the
 *                         system's bundle, /etc/ssl/certs/ca-certificates.crt).
 *   tls_cert=PATH, tls_key=PATH  a client certificate and its key (PEM),
 *                         both or neither (the login stays USER and
 *                         PASSWORD: SASL EXTERNAL is not used).
 *   tls_key_password=P    the key's passphrase (secret: never shown).
 *   tls_verify=0|1        1 (default); 0 accepts any certificate (tests
 *                         only: it gives up what TLS is for).
 *   A file that cannot be read is refused when the URL is parsed, naming
 *   it; a certificate that does not verify fails the connection (retried
 *   as any other: INBOX_ERR_CONNECT) with rabbitmq-c's reason ("SSL peer
 *   cert verification failed", "SSL hostname verification failed").
 *
 *   prefetch=N          basic.qos prefetch count, 1..65535 (default
 *                       2 x max_batch, capped at 65535: the broker sends
 *                       the next batch while this one is processed; at
 *                       max_batch it waited for each batch's ack).
 *   retry=ttl|requeue   how a RETRY / IN_PROGRESS message comes back after
 *                       retry_delay_ms (default ttl):
 *                       ttl: a copy is published (publisher confirms) to the
 *                         retry queue, declared durable with
 *                         x-message-ttl = retry_delay_ms,
 *                         x-dead-letter-exchange = "" and
 *                         x-dead-letter-routing-key = QUEUE, so the broker
 *                         moves it back to QUEUE when the TTL expires; the
 *                         original is acked only after the copy's confirm.
 *                         The copy keeps the body, properties and headers,
 *                         plus x-inbox-attempts (the delivery count it
 *                         had), minus x-delivery-count. A copy that is not
 *                         confirmed (nack, timeout, returned unroutable,
 *                         channel error) falls back to requeue.
 *                       requeue: the message stays unacked (it counts
 *                         against the prefetch) and is basic.nack'ed with
 *                         requeue=true once retry_delay_ms has passed, by a
 *                         later poll().
 *   retry_queue=NAME    the retry queue (default QUEUE + ".retry"). If it
 *                       exists with other arguments (another TTL) the broker
 *                       refuses the declaration: open fails with its reason.
 *   dlx=EXCHANGE        also publish each dead-lettered message (outcome
 *                       DEAD_LETTERED or CONFLICT; the dead letter is in the
 *                       store already) to EXCHANGE with its original routing
 *                       key and the headers x-inbox-reason, x-inbox-consumer
 *                       and x-inbox-dead-letter-id, confirmed before the ack.
 *                       The exchange must exist (checked at connect). A copy
 *                       that is not confirmed is reported by settle() (the
 *                       message is acked all the same: the store has it).
 *   declare=1           declare QUEUE (durable, no arguments) if absent.
 *                       An existing queue declared with arguments (a
 *                       quorum queue, a TTL, ...) is then refused by the
 *                       broker (406, in errmsg): keep declare=0 for those.
 *                       Default 0: the queue must exist (checked
 *                       passively; any type: classic, quorum).
 *   heartbeat=S         AMQP heartbeat in seconds (default 30, 0 = off).
 *                       The broker closes a connection silent for 2 x S, so
 *                       a batch must not take longer than that to process.
 *   connect_timeout_ms=N  TCP connect and login timeout (default 5000).
 *   confirm_timeout_ms=N  wait for publisher confirms (default 10000).
 *   Unknown parameters and bad values give INBOX_ERR_URL; messages name the
 *   broker as HOST:PORT/VHOST, never with the password.
 *
 * Deliveries
 *   payload = the body (truncated to max_payload + 1 bytes when larger,
 *   and refused (inbox_delivery.refused) with its real size, so the
 *   consumer dead-letters it as over-size; max_payload 0 = no limit;
 *   retry and dead-letter copies always carry the whole body),
 *   id = the message-id property (NULL when absent or empty: the consumer
 *   takes it from the payload; one that is not UTF-8 or holds a NUL byte
 *   is refused with the reason, never cut nor replaced),
 *   headers = the headers table as a JSON object text (NULL when none):
 *   strings (S, x) as JSON strings when valid UTF-8 without NUL, else
 *   "hex:" + lower-case hex; integers and timestamps as numbers, floats as
 *   numbers (null if not finite), decimals as numbers, booleans, void as
 *   null, arrays and nested tables (x-death) as arrays and objects; of a
 *   repeated name the last value; names that are not UTF-8 or hold a NUL
 *   byte as "hex:" + lower-case hex,
 *   position = "QUEUE/DELIVERY_TAG", plus " redelivered" when the broker
 *   set the redelivered flag (delivery tags are per channel: they start
 *   again after a reconnect),
 *   timestamp_ms = the timestamp property x 1000 (0 when absent),
 *   delivery_count = 1 + earlier rounds through the retry queue
 *   (x-inbox-attempts, else the x-death counts of the retry queue) +
 *   earlier deliveries of this copy (the quorum queues' x-delivery-count,
 *   else 1 if redelivered).
 *
 * Settle
 *   After the batch committed: ackable outcomes are acked (one
 *   multiple=true ack for the leading run, single acks after a gap),
 *   RETRY / IN_PROGRESS per retry=, res == NULL: every delivery of the
 *   batch is nack'ed with requeue=true at once. Copies (retry queue, dlx)
 *   are published on a second channel in confirm mode and the original is
 *   acked only after the broker confirmed the copy, so a crash in between
 *   can only duplicate (the inbox drops the duplicate), never lose.
 *
 * Connection loss
 *   A socket error, heartbeat timeout, connection.close, channel.close of
 *   the consuming channel or a consumer cancelled by the broker (queue
 *   deleted) drops the connection. The broker requeues every unacked
 *   message; the source forgets them (received, held and in-flight ones:
 *   their tags are meaningless on the next channel) and settle() does not
 *   ack them. poll() reconnects, declares and consumes again, with a
 *   backoff from 100 ms doubling to 5 s between failed attempts (poll
 *   returns INBOX_OK with no message while it waits), and returns the
 *   error of a failed attempt (INBOX_ERR_CONNECT, INBOX_ERR_SOURCE) or
 *   INBOX_ERR_SOURCE when it just lost the connection, errmsg saying why.
 *   settle() returns INBOX_ERR_SOURCE when the loss happened while it
 *   acked. The requeued messages come back marked redelivered and the
 *   inbox deduplicates those already applied.
 *   open() connects once and fails with INBOX_ERR_CONNECT (socket, login)
 *   or INBOX_ERR_SOURCE (missing queue, refused declaration).
 */
#ifndef INBOX_SOURCE_AMQP_H
#define INBOX_SOURCE_AMQP_H

#include <stddef.h>
#include <stdint.h>

#include <amqp.h>

#include <inbox/sys/source.h>

#include "base/buf.h"
#include "source/common.h"

#define AMQP_CH_CONSUME 1 /* the consuming channel */
#define AMQP_CH_PUB_MIN 2 /* publish channels: 2, 3, ... reopened anew */
#define AMQP_CH_PUB_MAX 1000

enum { AMQP_RETRY_TTL = 0, AMQP_RETRY_REQUEUE = 1 };

/* What settle() does with one delivery. */
enum {
	AMQP_ACT_SKIP = 0, /* from a dead connection: the broker requeued it */
	AMQP_ACT_ACK,      /* ack */
	AMQP_ACT_COPY_ACK, /* publish a copy (retry queue or dlx), then ack */
	AMQP_ACT_HOLD      /* requeue after retry_delay_ms */
};

/* A copy's publisher confirm. */
enum { AMQP_PUB_NONE = 0, AMQP_PUB_WAIT, AMQP_PUB_OK, AMQP_PUB_FAIL };

/* One received message, from the broker until its ack / nack. */
typedef struct amqp_slot {
	amqp_envelope_t env; /* as rabbitmq-c returned it (whole body) */
	uint64_t gen;        /* connection generation it came on */
	int32_t count;       /* its delivery_count */
	int64_t due;         /* requeue: monotonic ms when it is nack'ed */
	/* settle */
	int action;
	int to_dlx;       /* the copy goes to the dlx, not the retry queue */
	int pub;          /* AMQP_PUB_* */
	uint64_t pub_seq; /* publish sequence number of the copy */
	/* id, headers, position as NUL-terminated strings; -1 = none */
	inbox__buf text;
	long id_at, headers_at, pos_at;
	struct amqp_slot *next_free;
} amqp_slot;

/* A FIFO / list of slots. */
typedef struct amqp_slots {
	amqp_slot **v;
	size_t n, cap;
} amqp_slots;

typedef struct amqp_source {
	struct inbox_source base; /* must be first */

	/* From the URL. */
	char *host;
	int port;
	char *user;
	char *pass;
	char *vhost;
	char *queue;
	char *retry_queue;
	char *dlx; /* NULL: none */
	int retry_mode;
	int declare;
	int prefetch;
	int heartbeat;
	int connect_timeout_ms;
	int confirm_timeout_ms;
	char *where;    /* "HOST:PORT/VHOST" for messages */
	int tls;        /* amqps:// */
	int tls_verify; /* peer and host name (default 1) */
	char *tls_ca, *tls_cert, *tls_key, *tls_key_pass; /* NULL: none */

	/* The connection; NULL when down. */
	amqp_connection_state_t conn;
	uint64_t gen;          /* bumped at every loss */
	amqp_channel_t pub_ch; /* current publish channel */
	int pub_open;          /* pub_ch is open and in confirm mode */
	uint64_t pub_next;     /* next publish sequence number on pub_ch */
	int returned; /* a basic.return arrived (mandatory copy lost) */
	inbox__src_backoff reconnect; /* up to 5 s between attempts */

	amqp_slots pend;  /* received, not handed out, in delivery order */
	amqp_slots batch; /* handed out by the last poll */
	amqp_slots held;  /* requeue mode: waiting for their nack */
	amqp_slot *free_slots;
	size_t nfree;
} amqp_source;

/* amqp_url.c: parse the URL into s (parse only: no connection).
 * INBOX_ERR_URL (errmsg) / NOMEM. */
int inbox__amqp_parse_url(amqp_source *s, const char *url,
                          const inbox_source_options *opts);
/* Free what the parse filled in (the password is wiped first). */
void inbox__amqp_url_clear(amqp_source *s);

/* amqp_conn.c */
/* Connect, open the channels, declare, consume. INBOX_OK, or
 * INBOX_ERR_CONNECT / INBOX_ERR_SOURCE with errmsg (s->conn stays NULL). */
int inbox__amqp_connect(amqp_source *s);
/* Tear the connection down after a loss: errmsg = the reason, the slots
 * of the dead connection are dropped, the generation moves on. */
void inbox__amqp_lost(amqp_source *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Close cleanly (connection.close) and free the connection. */
void inbox__amqp_disconnect(amqp_source *s);

/* What one pump step saw. */
enum {
	AMQP_EV_TIMEOUT = 0, /* nothing within the wait */
	AMQP_EV_DELIVERY,    /* a message was appended to s->pend */
	AMQP_EV_OTHER,       /* another frame was handled (a confirm, ...) */
	AMQP_EV_LOST,        /* the connection is gone (errmsg says why) */
	AMQP_EV_NOMEM
};
/* Wait up to wait_ms (0 = do not block) for one frame and handle it. */
int inbox__amqp_pump(amqp_source *s, int wait_ms);
/* (Re)open the publish channel in confirm mode. INBOX_OK or an error
 * (errmsg); a connection-level failure tears the connection down. */
int inbox__amqp_open_pub(amqp_source *s);

/* amqp_delivery.c */
/* Fill the slot's strings and delivery count from its envelope. 0 / -1
 * (NOMEM). */
int inbox__amqp_prepare(amqp_source *s, amqp_slot *sl);
/* Describe the delivery for the consumer. */
void inbox__amqp_describe(const amqp_source *s, const amqp_slot *sl,
                          inbox_delivery *d);
/* Append the table as a JSON object text. 0 / -1 (NOMEM). */
int inbox__amqp_table_json(inbox__buf *out, const amqp_table_t *t);

/* amqp_publish.c */
/* Publish the copy of the slot (retry queue, or dlx with the result's
 * reason). INBOX_OK, or an error with errmsg (connection lost). */
int inbox__amqp_publish_copy(amqp_source *s, amqp_slot *sl,
                             const inbox_result *res);
/* Wait until every copy of the batch is confirmed or failed (timeout,
 * nack, return, channel closed). INBOX_OK, or INBOX_ERR_SOURCE when the
 * connection was lost meanwhile. */
int inbox__amqp_wait_confirms(amqp_source *s);
/* A basic.ack / basic.nack from the broker on the publish channel. */
void inbox__amqp_confirm(amqp_source *s, uint64_t tag, int multiple, int ok);
/* Every copy still waiting fails (channel closed, timeout, return). */
void inbox__amqp_fail_waiting(amqp_source *s);

/* amqp_source.c: slot management shared with the other files. */
amqp_slot *inbox__amqp_slot_new(amqp_source *s);
void inbox__amqp_slot_free(amqp_source *s, amqp_slot *sl);
int inbox__amqp_slots_push(amqp_slots *l, amqp_slot *sl);
/* Free every slot of l (their envelopes too) and empty it. */
void inbox__amqp_slots_clear(amqp_source *s, amqp_slots *l);

/* "NOT_FOUND - no queue 'x' in vhost '/'" or the library's error text. */
const char *inbox__amqp_reply_text(amqp_rpc_reply_t r, char *buf, size_t len);

/* The vtable's client_version (<name> <version>). */
int inbox__amqp_client_version(char *out, size_t len);

#endif
