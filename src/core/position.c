/*
 * Source positions as the stores keep them. A position is the source's
 * spelling ("orders/0@17", "/srv/orders.jsonl:42"), and a file name in
 * it may be any bytes: PostgreSQL's text refuses what is not UTF-8 and
 * SQLite would keep it raw, so the core gives both the same text — the
 * one `inbox inspect` prints, and the one an operator types to find it.
 */
#include <string.h>

#include "base/json.h"
#include "core/internal.h"

const char *inbox__position_text(const char *pos, inbox__buf *buf)
{
	static const char hex[] = "0123456789abcdef";
	if (!pos)
		return NULL;
	/* the common case, ASCII, in one pass; then UTF-8: no copy */
	const unsigned char *p = (const unsigned char *)pos;
	while (*p && *p < 0x80)
		p++;
	if (!*p)
		return pos;
	size_t n = strlen((const char *)p);
	if (inbox__utf8_valid((const char *)p, n))
		return pos;
	inbox__buf_reset(buf);
	const unsigned char *end = p + n;
	p = (const unsigned char *)pos;
	while (p < end) {
		size_t k = inbox__utf8_seq_len(p, (size_t)(end - p));
		const char esc[4] = {'\\', 'x', hex[*p >> 4], hex[*p & 15]};
		int rc = k ? inbox__buf_append(buf, p, k)
		           : inbox__buf_append(buf, esc, sizeof(esc));
		if (rc < 0)
			return NULL;
		p += k ? k : 1;
	}
	return buf->data;
}
