/*
 * The NATS JetStream source: a durable pull consumer read through cnats.
 *
 * URL
 *   nats://[USER:PASS@|TOKEN@]HOST:PORT[,HOST:PORT...]/STREAM?durable=D&...
 *
 *   durable=D        durable consumer name (default: the consumer name with
 *                    every character other than [A-Za-z0-9_-] replaced by
 *                    '_'). Created if absent; an existing one is updated to
 *                    the settings below (the server refuses changes it
 *                    cannot make, e.g. another filter subject or ack
 *                    policy, and open fails with its reason).
 *   subject=S        filter subject (default: none, every subject of the
 *                    stream).
 *   create=1         create the stream if absent, file storage, subjects
 *                    "STREAM.>" (for tests and demos; default 0: a missing
 *                    stream is an error).
 *   ack_wait=D       how long the server waits for an ack before it
 *                    redelivers (default 30s).
 *   max_deliver=N    deliveries after which the server gives a message up
 *                    (default -1, unlimited). Leave it unlimited: the
 *                    consumer's max_attempts dead-letters a message that
 *                    keeps failing and its max_deliveries, fed by the
 *                    delivery count, one that keeps crashing the process,
 *                    both with its payload and context. A server-side
 *                    limit at or below max_deliveries makes the server
 *                    drop the message silently before the inbox could
 *                    dead-letter it.
 *   max_ack_pending=N  unacknowledged messages the server lets out at once
 *                    across every client of the durable (default 1000, at
 *                    least 2 * max_batch).
 *   in_progress_interval=D
 *                    while a polled batch is being processed (between
 *                    poll and settle), a helper thread tells the server
 *                    "in progress" for each of its messages this often, so
 *                    a long handler never lets ack_wait expire (default
 *                    ack_wait / 3; 0 = never).
 *   ack_timeout=D    how long a confirmed ack (and a confirmed term) waits
 *                    for the server's answer (default 5s).
 *   tls=1            TLS to every server of the list (cnats with OpenSSL):
 *                    the server's certificate is verified, and its name
 *                    against the host of the URL (or tls_hostname). Any
 *                    other tls_* parameter implies tls=1.
 *   tls_ca=PATH      the CA certificates (PEM) to trust (default: the
 *                    system's verify paths).
 *   tls_cert=PATH, tls_key=PATH  a client certificate and its key (PEM,
 *                    both or neither; the key unencrypted: cnats takes no
 *                    passphrase).
 *   tls_hostname=H   the name the certificate must carry, when it is not
 *                    the host of the URL (an IP address in the list).
 *   tls_verify=0     accept any certificate (tests only).
 *   A file that cannot be read is refused naming it; a certificate that
 *   does not verify fails the connection (INBOX_ERR_CONNECT, retried)
 *   with cnats' reason.
 *   Durations: an integer with a unit, ms, s, m or h ("500ms", "30s"); "0"
 *   needs none. Values are percent-decoded, user and password too. The
 *   credentials are handed to cnats apart from the host list and never
 *   appear in an error message, nor does the token. TOKEN@ (no ':') is a
 *   token. A raw '@', '/', '?', '#', '[' or ']' in the user info (and any
 *   other raw '@' in the URL) is refused: the client libraries disagree
 *   on where such a user info ends (write %40 %2F %3F %23 %5B %5D). A '#'
 *   fragment is ignored.
 *
 * Deliveries
 *   payload = the message data (truncated to max_payload + 1 bytes and
 *   refused (inbox_delivery.refused) with its real size, so the consumer
 *   dead-letters it as over-size; max_payload 0 = no limit),
 *   id = the Nats-Msg-Id header if present and non-empty, else NULL (the
 *   consumer takes the id from the payload); a value that is not valid
 *   UTF-8 is refused, never replaced (cnats hands header values over as
 *   C strings: a NUL byte inside one is invisible here, the value ends
 *   at it), headers = a
 *   JSON object text of the headers (a name with one value maps to a
 *   string, with several to an array of strings; values that are not
 *   valid UTF-8 become "hex:" + lower-case hex; NULL when none), position
 *   = "STREAM/SEQ" (the stream sequence), timestamp_ms = the time the
 *   stream stored the message, delivery_count = the server's NumDelivered
 *   (so the consumer's max_deliveries sees deliveries across restarts
 *   and every client of the durable).
 *
 * Settle
 *   APPLIED, DUPLICATE, STALE: the double ack (what AckSync does): the
 *   server confirms it recorded the ack. DEAD_LETTERED and CONFLICT:
 *   Term, confirmed the same way (the store holds the dead letter
 *   already; Term tells the server never to redeliver it, whatever
 *   max_deliver). The whole batch is settled at once and confirmed by one
 *   answer: every ack and term is published, the last one as a request
 *   answered on this source's own inbox subscription; the server handles
 *   a consumer's acks in the order they came on the connection, so its
 *   answer to the last says it recorded all of them. One round trip per
 *   batch, not one per message, and it overlaps the next fetch: settle
 *   sends, the next poll collects the answer once its fetch is back
 *   (waiting, if need be, until ack_timeout after it was sent). RETRY,
 *   IN_PROGRESS, or res NULL (the transaction failed):
 *   NakWithDelay(retry_delay_ms), so the server redelivers after that
 *   delay with NumDelivered + 1. An ack that cannot be sent is reported
 *   by settle (INBOX_ERR_SOURCE, errmsg); a batch whose answer fails or
 *   does not come within ack_timeout is logged by the next poll (WARN,
 *   event ack_failed, the same text). Neither loses anything: the
 *   message comes back after ack_wait and the inbox drops it as a
 *   duplicate. While disconnected, acks are sent without confirmation
 *   (cnats buffers them until the reconnect) and reported as
 *   unconfirmed.
 *
 * Connection
 *   cnats reconnects by itself, forever (MaxReconnect -1, ReconnectWait
 *   250 ms). While it is disconnected poll() waits up to its timeout for
 *   the connection to come back and returns INBOX_ERR_SOURCE if it does
 *   not. The durable consumer lives in the server's JetStream store, so
 *   it survives a server restart; if a fetch fails with anything but a
 *   timeout, the next poll checks the stream and the consumer again and
 *   subscribes anew. open() fails with INBOX_ERR_CONNECT when no server
 *   answers.
 */
#ifndef INBOX_SOURCE_NATS_H
#define INBOX_SOURCE_NATS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

#include <inbox/sys/source.h>

#include "base/buf.h"
#include "source/common.h"

/* A polled message waiting for settle. */
typedef struct nats_slot {
	natsMsg *msg;
	/* id (borrowed from msg or NULL); its refusal, headers and position
	 * in text */
	const char *id;
	inbox__buf text;
	long refused_at, headers_at, position_at; /* offsets; -1 = none */
	/* settle: its confirmed ack or term in flight (0: none) and how it
	 * ended */
	uint64_t ack_seq;
	natsStatus ack_st;
	const char *ack_what;
} nats_slot;

typedef struct nats_source {
	struct inbox_source base; /* must be first */

	/* From the URL. */
	char **servers; /* "nats://host:port", without credentials */
	int nservers;
	char *hosts; /* "host:port,..." for messages */
	char *user, *password, *token;
	char *stream, *durable, *subject;
	int tls, tls_verify; /* tls_verify: 1 unless tls_verify=0 */
	char *tls_ca, *tls_cert, *tls_key, *tls_hostname; /* NULL: none */
	int create;
	int64_t ack_wait_ms, in_progress_ms, ack_timeout_ms;
	int64_t max_deliver, max_ack_pending;
	size_t max_payload; /* 0 = no limit */
	int retry_delay_ms;

	natsOptions *nopts;
	natsConnection *nc;
	jsCtx *js;
	natsSubscription *sub;
	int need_setup; /* check stream/consumer and subscribe again */

	/* Confirmed acks and terms (settle): a batch's last ack or term is a
	 * request to its message's reply subject, answered on ack_prefix + a
	 * sequence number; the answer confirms the batch's others too. */
	natsSubscription *ack_sub; /* ack_prefix + "*" */
	char ack_prefix[128];
	uint64_t ack_seq;    /* last sequence number used */
	uint64_t ack_first;  /* first of the last settled batch */
	int64_t ack_sent_at; /* monotonic ms */
	size_t ack_nslots;   /* slots of that batch (0: nothing to collect) */
	size_t ack_waiting;  /* its requests not answered yet */

	nats_slot *slots;
	size_t *ack_slot; /* ack_slot[seq - first of the batch] = slot */
	size_t nslots;    /* allocated (slots and ack_slot) */
	size_t nbatch;    /* slots of the batch in hand */

	/* InProgress keeper (nats_keepalive.c). */
	pthread_t ka_thread;
	int ka_started;
	pthread_mutex_t ka_mu;
	pthread_cond_t ka_cv;
	int ka_sync_ok;   /* mu and cv initialized */
	int ka_stop;      /* under ka_mu */
	int ka_active;    /* under ka_mu: slots[0..nbatch) are in flight */
	int64_t ka_last;  /* under ka_mu: monotonic ms of the last touch */
	uint64_t ka_sent; /* under ka_mu: InProgress sent (for tests) */
} nats_source;

/* nats_url.c: the TLS options of the URL (tls=1) set on ns->nopts: secure, the
 * CA, the client certificate, the expected host name, verification. */
natsStatus inbox__nats_tls_options(nats_source *ns);

/* nats_url.c: parse the URL into ns (servers, credentials, stream,
 * parameters; parse only: no connection). INBOX_ERR_URL / NOMEM with
 * errmsg. */
int inbox__nats_parse_url(nats_source *ns, const char *url,
                          const inbox_source_options *opts);
/* Free what the parse filled in. */
void inbox__nats_url_clear(nats_source *ns);

/* nats_text.c: headers as a JSON object text appended to out (with its
 * NUL); *has = 0 when the message has none. 0 or -1 (NOMEM). */
int inbox__nats_headers_json(natsMsg *m, inbox__buf *out, int *has);
/* Copy into buf the last cnats error text (or the status text) with any
 * occurrence of the password or token replaced by "***". */
void inbox__nats_errtext(const nats_source *ns, natsStatus s, char *buf,
                         size_t len);

/* nats_keepalive.c */
int inbox__nats_ka_start(nats_source *ns);
void inbox__nats_ka_stop(nats_source *ns);
/* The batch in slots[0..nbatch) is in flight from now on. */
void inbox__nats_ka_begin(nats_source *ns);
/* It is not any more: after this returns, the keeper no longer touches
 * the messages. */
void inbox__nats_ka_end(nats_source *ns);

/* The vtable's client_version (<name> <version>). */
int inbox__nats_client_version(char *out, size_t len);

#endif
