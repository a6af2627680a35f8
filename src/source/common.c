/* Helpers shared by the message sources; see common.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <inbox/inbox.h>

#include "base/json.h"
#include "source/common.h"

static const char hexdig[] = "0123456789abcdef";

int64_t inbox__src_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void inbox__src_sleep_ms(int64_t ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = {(time_t)(ms / 1000),
	                      (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

#define BACKOFF_FIRST_MS 100

int inbox__src_backoff_wait(const inbox__src_backoff *b, int64_t deadline)
{
	int64_t now = inbox__src_mono_ms();
	if (now >= b->at)
		return 1;
	inbox__src_sleep_ms((b->at < deadline ? b->at : deadline) - now);
	return inbox__src_mono_ms() >= b->at;
}

void inbox__src_backoff_failed(inbox__src_backoff *b, int max_ms)
{
	int d = b->delay_ms;
	d = d <= 0 ? BACKOFF_FIRST_MS : d > max_ms / 2 ? max_ms : d * 2;
	b->delay_ms = d;
	b->at = inbox__src_mono_ms() + d;
}

void inbox__src_backoff_ok(inbox__src_backoff *b)
{
	b->delay_ms = 0;
}

size_t inbox__src_payload_len(size_t len, size_t max_payload)
{
	/* len > max_payload means max_payload + 1 cannot overflow. */
	return max_payload && len > max_payload ? max_payload + 1 : len;
}

int inbox__src_put_udec(inbox__buf *out, unsigned long long u)
{
	char d[24];
	size_t i = sizeof(d);
	do {
		d[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	return inbox__buf_append(out, d + i, sizeof(d) - i);
}

int inbox__src_put_dec(inbox__buf *out, long long v)
{
	if (v < 0 && inbox__buf_putc(out, '-') < 0)
		return -1;
	return inbox__src_put_udec(out, v < 0 ? 0ULL - (unsigned long long)v
	                                      : (unsigned long long)v);
}

static int put_hex(inbox__buf *out, const unsigned char *p, size_t n)
{
	if (inbox__buf_reserve(out, 2 * n + 6) < 0 ||
	    inbox__buf_puts(out, "\"hex:") < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		out->data[out->len++] = hexdig[p[i] >> 4];
		out->data[out->len++] = hexdig[p[i] & 15];
	}
	out->data[out->len] = '\0';
	return inbox__buf_putc(out, '"');
}

int inbox__src_json_text(inbox__buf *out, const char *s, size_t n, int nul_ok)
{
	if (!inbox__utf8_valid(s, n) || (!nul_ok && n && memchr(s, '\0', n)))
		return put_hex(out, (const unsigned char *)s, n);
	return inbox__json_string_append(out, s, n);
}

long inbox__src_refuse(inbox__buf *out, const char *fmt, ...)
{
	long at = (long)out->len;
	char why[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (inbox__buf_putc(out, INBOX__SRC_REFUSED) < 0 ||
	    inbox__buf_append(out, why, strlen(why) + 1) < 0)
		return -1;
	return at;
}

void inbox__src_set_id(inbox_delivery *d, const char *id_or_refusal)
{
	if (id_or_refusal && id_or_refusal[0] == INBOX__SRC_REFUSED) {
		d->id = NULL;
		d->refused = id_or_refusal + 1;
	} else {
		d->id = id_or_refusal;
	}
}

long inbox__src_refuse_oversize(inbox__buf *out, size_t len, size_t max_payload)
{
	if (!max_payload || len <= max_payload)
		return -1;
	long at = inbox__src_refuse(out,
	                            "payload of %zu bytes exceeds max_payload "
	                            "%zu",
	                            len, max_payload);
	return at < 0 ? -2 : at;
}

/* Up to 32 bytes of v as hex (".." when there are more), so that the
 * refusals of two different ids differ and an operator sees the id. */
static void hex_prefix(char *buf, size_t len, const unsigned char *v, size_t n)
{
	size_t k = n < 32 ? n : 32, j = 0;
	for (size_t i = 0; i < k && j + 3 < len; i++) {
		buf[j++] = hexdig[v[i] >> 4];
		buf[j++] = hexdig[v[i] & 15];
	}
	if (n > k && j + 3 < len)
		buf[j++] = '.', buf[j++] = '.';
	buf[j] = '\0';
}

int inbox__src_check_id(inbox__buf *out, const char *what, const void *v,
                        size_t n, long *at)
{
	if (!v || n == 0)
		return 0;
	const char *nul = memchr(v, '\0', n);
	if (!nul && inbox__utf8_valid(v, n))
		return 1;
	char hex[72];
	hex_prefix(hex, sizeof(hex), v, n);
	if (nul)
		*at = inbox__src_refuse(
		    out,
		    "message id in %s holds a NUL byte at "
		    "byte %zu (hex:%s): cannot be stored as "
		    "text",
		    what, (size_t)(nul - (const char *)v), hex);
	else
		*at = inbox__src_refuse(out,
		                        "message id in %s is not valid UTF-8 "
		                        "(hex:%s): cannot be stored as text",
		                        what, hex);
	if (*at < 0)
		*at = -2;
	return -1;
}
