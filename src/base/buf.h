/* A growable byte buffer, always NUL-terminated when data != NULL. */
#ifndef INBOX_BASE_BUF_H
#define INBOX_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct inbox__buf {
	char *data;
	size_t len;
	size_t cap;
} inbox__buf;

#define INBOX__BUF_INIT                                                        \
	{                                                                      \
		NULL, 0, 0                                                     \
	}

/* All return 0 or -1 on allocation failure. */
int inbox__buf_reserve(inbox__buf *b, size_t extra);
int inbox__buf_append(inbox__buf *b, const void *p, size_t n);
int inbox__buf_puts(inbox__buf *b, const char *s);
int inbox__buf_putc(inbox__buf *b, char c);
int inbox__buf_printf(inbox__buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void inbox__buf_reset(inbox__buf *b); /* len = 0, keeps memory */
void inbox__buf_free(inbox__buf *b);

#endif
