/* Helpers shared by the message sources (everything under src/source):
 * clocks and sleeping, reconnect backoff, the over-size payload rule, and
 * broker strings (header names and values) as JSON strings. */
#ifndef INBOX_SOURCE_COMMON_H
#define INBOX_SOURCE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Milliseconds on the monotonic clock (for deadlines and backoff only). */
int64_t inbox__src_mono_ms(void);

/* Sleep ms milliseconds (nothing when ms <= 0), resuming after signals. */
void inbox__src_sleep_ms(int64_t ms);

/* Pacing of reconnect attempts: the first retry 100 ms after a failure,
 * the delay doubling with each failure up to a maximum. */
typedef struct inbox__src_backoff {
	int64_t at;   /* monotonic ms of the next attempt; 0: at once */
	int delay_ms; /* the last delay; 0 after a success */
} inbox__src_backoff;

/* Sleep until the next attempt is due, but not past deadline (monotonic
 * ms). 1 if an attempt may be made now, else 0. */
int inbox__src_backoff_wait(const inbox__src_backoff *b, int64_t deadline);
/* An attempt failed: the next one is due after the next delay. */
void inbox__src_backoff_failed(inbox__src_backoff *b, int max_ms);
/* An attempt succeeded: the next failure waits the first delay again. */
void inbox__src_backoff_ok(inbox__src_backoff *b);

/* The payload length handed out for a message of len bytes: all of it,
 * or max_payload + 1 when it is larger (0 = no limit), so the consumer
 * sees it is over-size without the source copying anything. */
size_t inbox__src_payload_len(size_t len, size_t max_payload);

/* Refused deliveries (inbox_delivery.refused). A source keeps a refusal
 * in its text buffer where it keeps a message id: the mark
 * INBOX__SRC_REFUSED, the reason and a NUL. inbox__src_refuse appends
 * one to out and returns its offset (-1 on NOMEM); inbox__src_set_id
 * then hands the text over: as the delivery's `refused` reason (the mark
 * left out, `id` NULL) when it holds a refusal, as its `id` otherwise.
 * The byte 0xFF never begins UTF-8 text, so no real id is taken for the
 * mark; the mark never leaves the sources. */
#define INBOX__SRC_REFUSED '\xff'
struct inbox_delivery;
void inbox__src_set_id(struct inbox_delivery *d, const char *id_or_refusal);

long inbox__src_refuse(inbox__buf *out, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A payload of len bytes over max_payload (0 = no limit): append its
 * refusal, which names the real size, and return its offset; -1 when it
 * is not over-size, -2 on NOMEM. */
long inbox__src_refuse_oversize(inbox__buf *out, size_t len,
                                size_t max_payload);

/* The message id a broker gave in `what` (`Kafka header "message-id"`),
 * [v, v+n): 1 when it is usable as text (UTF-8 without a NUL byte), 0
 * when it is empty (no id), -1 when it is not: then its refusal is
 * appended to out and *at is its offset (-2 on NOMEM). */
int inbox__src_check_id(inbox__buf *out, const char *what, const void *v,
                        size_t n, long *at);

/* Append [s, s+n) as a JSON string: escaped as RFC 8785 does when it is
 * valid UTF-8 (and, unless nul_ok, holds no NUL byte), otherwise "hex:"
 * followed by its bytes in lower-case hex. 0, or -1 on NOMEM. */
int inbox__src_json_text(inbox__buf *out, const char *s, size_t n, int nul_ok);

/* Append v (u) in decimal, as "%lld" ("%llu") prints it, without printf:
 * formatting a delivery's position with inbox__buf_printf cost ~2,000
 * instructions per message, half of a source's poll. 0, or -1 on NOMEM. */
int inbox__src_put_dec(inbox__buf *out, long long v);
int inbox__src_put_udec(inbox__buf *out, unsigned long long u);

#endif
