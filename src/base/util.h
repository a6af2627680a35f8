/* Utilities of the bottom layer (prefix inbox__): error text, hashing,
 * atomic flags, clocks, SQL identifier quoting. Includes nothing of the
 * library above it (tests/layering.sh). */
#ifndef INBOX_BASE_UTIL_H
#define INBOX_BASE_UTIL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* Quote an SQL identifier ("a""b") into out; 0 or -1. */
struct inbox__buf;
int inbox__quote_ident(struct inbox__buf *out, const char *ident);
/* Quote "a.b" as "a"."b" (a schema-qualified name; one dot at most is
 * taken as the separator) or "a" as "a". -1 on NOMEM or an empty part. */
int inbox__quote_dotted(struct inbox__buf *out, const char *name);
/* Format an error message into err (errlen bytes; NULL/0: nothing), never
 * ending it inside a UTF-8 character cut by the buffer. */
void inbox__seterr(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* FNV-1a 64 of n bytes at p, continuing from h (INBOX__FNV_INIT to
 * start): statement-cache keys, advisory-lock keys, filter hashes. */
#define INBOX__FNV_INIT 14695981039346656037ull
uint64_t inbox__fnv1a(uint64_t h, const void *p, size_t n);

/* Flags shared between threads and signal handlers, of the type
 * inbox_run() and inbox_dispatcher_run() take (volatile sig_atomic_t):
 * read and written with atomic operations only — a plain access to a
 * flag another thread writes is a data race, volatile or not. Lock-free
 * on every platform we build for, so safe in a signal handler too. */
static inline int inbox__flag(volatile sig_atomic_t *f)
{
	return __atomic_load_n(f, __ATOMIC_ACQUIRE) != 0;
}

static inline void inbox__flag_set(volatile sig_atomic_t *f, int v)
{
	__atomic_store_n(f, v, __ATOMIC_RELEASE);
}

/* The inverse of inbox_outcome_name() ("applied" -> INBOX_APPLIED);
 * INBOX_OUTCOME_NONE (0) for NULL or any other text. An int: this layer
 * does not include the public header. */
int inbox__outcome_parse(const char *name);

/* Monotonic and wall clocks. */
int64_t inbox__now_ms(void);
double inbox__mono_seconds(void);

#endif
