/* Helpers shared by the message sources (everything under src/source):
 * clocks and sleeping, reconnect backoff, the over-size payload rule, and
 * broker strings (header names and values) as JSON strings. */
#ifndef INBOX_SOURCE_COMMON_H
#define INBOX_SOURCE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

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

/* Append [s, s+n) as a JSON string: escaped as RFC 8785 does when it is
 * valid UTF-8 (and, unless nul_ok, holds no NUL byte), otherwise "hex:"
 * followed by its bytes in lower-case hex. 0, or -1 on NOMEM. */
int inbox__src_json_text(inbox__buf *out, const char *s, size_t n, int nul_ok);

#endif
