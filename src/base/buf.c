#include "base/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int inbox__buf_reserve(inbox__buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p)
		return -1;
	b->data = p;
	b->cap = cap;
	return 0;
}

int inbox__buf_append(inbox__buf *b, const void *p, size_t n)
{
	if (inbox__buf_reserve(b, n) < 0)
		return -1;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int inbox__buf_puts(inbox__buf *b, const char *s)
{
	return inbox__buf_append(b, s, strlen(s));
}

int inbox__buf_putc(inbox__buf *b, char c)
{
	return inbox__buf_append(b, &c, 1);
}

int inbox__buf_printf(inbox__buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || inbox__buf_reserve(b, (size_t)n) < 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void inbox__buf_reset(inbox__buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void inbox__buf_free(inbox__buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
