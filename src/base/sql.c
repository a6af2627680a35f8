/* Identifier quoting, hashing and clocks: the bottom layer. */
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/util.h"

int inbox__quote_ident(inbox__buf *out, const char *ident)
{
	if (inbox__buf_putc(out, '"') < 0)
		return -1;
	for (const char *p = ident; *p; p++) {
		if (*p == '"' && inbox__buf_putc(out, '"') < 0)
			return -1;
		if (inbox__buf_putc(out, *p) < 0)
			return -1;
	}
	return inbox__buf_putc(out, '"');
}

int inbox__quote_dotted(inbox__buf *out, const char *name)
{
	const char *dot = strchr(name, '.');
	if (!dot)
		return inbox__quote_ident(out, name);
	if (dot == name || !dot[1])
		return -1;
	if (inbox__buf_putc(out, '"') < 0)
		return -1;
	for (const char *p = name; p < dot; p++)
		if ((*p == '"' && inbox__buf_putc(out, '"') < 0) ||
		    inbox__buf_putc(out, *p) < 0)
			return -1;
	if (inbox__buf_puts(out, "\".") < 0)
		return -1;
	return inbox__quote_ident(out, dot + 1);
}

int64_t inbox__now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t inbox__fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

double inbox__mono_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
