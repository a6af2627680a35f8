/* Array parameters in PostgreSQL's binary form (what array_send writes
 * and array_recv reads), sent with format 1: no literal to escape on our
 * side, none to parse on the server's. One dimension, lower bound 1:
 *
 *   int32 ndim = 1, int32 has-nulls, int32 element type OID,
 *   int32 length, int32 lower bound = 1,
 *   per element: int32 byte length (-1: NULL), then the bytes
 *
 * all integers big-endian. A text element is its bytes as they are (the
 * server checks their encoding as it does for a literal). */
#include <stdint.h>
#include <string.h>

#include "store/postgres/pg_store.h"

static int put32(inbox__buf *b, uint32_t v)
{
	unsigned char p[4] = {(unsigned char)(v >> 24),
	                      (unsigned char)(v >> 16), (unsigned char)(v >> 8),
	                      (unsigned char)v};
	return inbox__buf_append(b, p, 4);
}

static void set32(inbox__buf *b, size_t at, uint32_t v)
{
	unsigned char *p = (unsigned char *)b->data + at;
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

int inbox__pg_barr_start(inbox__buf *b, unsigned elem_oid)
{
	inbox__buf_reset(b);
	return put32(b, 1) | put32(b, 0) | put32(b, elem_oid) | put32(b, 0) |
	       put32(b, 1);
}

int inbox__pg_barr_text(inbox__buf *b, const char *v)
{
	if (!v) {
		set32(b, 4, 1);
		set32(b, 12, inbox__pg_barr_count(b) + 1);
		return put32(b, UINT32_MAX);
	}
	size_t n = strlen(v);
	if (n > INT32_MAX || inbox__buf_reserve(b, 4 + n) < 0)
		return -1;
	set32(b, 12, inbox__pg_barr_count(b) + 1);
	put32(b, (uint32_t)n);
	return inbox__buf_append(b, v, n);
}

int inbox__pg_barr_bool(inbox__buf *b, int v)
{
	char c = v ? 1 : 0;
	set32(b, 12, inbox__pg_barr_count(b) + 1);
	return put32(b, 1) | inbox__buf_append(b, &c, 1);
}

uint32_t inbox__pg_barr_count(const inbox__buf *b)
{
	const unsigned char *p = (const unsigned char *)b->data + 12;
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}
