/* Allocation fault injection (see fault.h). Linked only into the test
 * executables built with -Wl,--wrap=malloc,calloc,realloc,strdup,strndup
 * (tests/alloc/CMakeLists.txt). */
#include "fault.h"

#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <sqlite3.h>

#include "base/json.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static _Thread_local long armed_at; /* 0: off */
static _Thread_local long counted;
static _Thread_local int fired;
static _Thread_local int tracing; /* inside backtrace(): never fail */
static int trace = -1;

static void print_trace(const char *what, size_t n)
{
	if (trace < 0) {
		const char *e = getenv("INBOX_FAULT_TRACE");
		trace = e && *e && strcmp(e, "0") != 0;
	}
	if (!trace)
		return;
	void *frames[32];
	tracing = 1;
	int nf = backtrace(frames, 32);
	fprintf(stderr, "fault: %s(%zu) #%ld fails\n", what, n, counted);
	backtrace_symbols_fd(frames, nf, 2);
	tracing = 0;
}

/* 1 when this allocation is the one to fail. */
static int fail_now(const char *what, size_t n)
{
	if (!armed_at || tracing)
		return 0;
	if (++counted != armed_at)
		return 0;
	fired = 1;
	print_trace(what, n);
	return 1;
}

void fault_arm(long n)
{
	armed_at = n > 0 ? n : 0;
	counted = 0;
	fired = 0;
}

int fault_disarm(void)
{
	armed_at = 0;
	return fired;
}

long fault_count(void)
{
	return counted;
}

void *__wrap_malloc(size_t n)
{
	return fail_now("malloc", n) ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return fail_now("calloc", n * size) ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	return fail_now("realloc", n) ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
	return fail_now("strdup", strlen(s) + 1) ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
	return fail_now("strndup", n) ? NULL : __real_strndup(s, n);
}

/* ---- the libraries' own allocators ---- */

static void *json_alloc(size_t n)
{
	return fail_now("jansson", n) ? NULL : __real_malloc(n);
}

static void json_release(void *p)
{
	free(p);
}

static sqlite3_mem_methods sq_orig;

static void *sq_malloc(int n)
{
	return fail_now("sqlite3", (size_t)n) ? NULL : sq_orig.xMalloc(n);
}

static void *sq_realloc(void *p, int n)
{
	return fail_now("sqlite3", (size_t)n) ? NULL : sq_orig.xRealloc(p, n);
}

static void *ssl_malloc(size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	return fail_now("openssl", n) ? NULL : __real_malloc(n);
}

static void *ssl_realloc(void *p, size_t n, const char *file, int line)
{
	(void)file;
	(void)line;
	return fail_now("openssl", n) ? NULL : __real_realloc(p, n);
}

static void ssl_free(void *p, const char *file, int line)
{
	(void)file;
	(void)line;
	free(p);
}

int fault_install(void)
{
	int rc = 0;
	json_set_alloc_funcs(json_alloc, json_release);
	sqlite3_mem_methods m;
	if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &sq_orig) != SQLITE_OK)
		rc = -1;
	m = sq_orig;
	m.xMalloc = sq_malloc;
	m.xRealloc = sq_realloc;
	if (rc == 0 && sqlite3_config(SQLITE_CONFIG_MALLOC, &m) != SQLITE_OK)
		rc = -1;
	if (!CRYPTO_set_mem_functions(ssl_malloc, ssl_realloc, ssl_free))
		rc = -1;
	/* OpenSSL's one-time initialization (its default library context,
	 * the SHA-256 fetch libinbox makes once) is not robust to a failed
	 * allocation: it can leave a NULL lock that a later call crashes on.
	 * That is OpenSSL's own start-up, not a path of ours: done here,
	 * before any failure is armed. Its per-call allocations (a digest's
	 * context) are still failed in turn. */
	char hex[65];
	inbox__sha256_hex("", 0, hex);
	if (rc < 0)
		fprintf(stderr, "fault: cannot install the allocators\n");
	return rc;
}
