/*
 * Log events: formatted only when a callback wants them, handed to it
 * under a read lock so that inbox_log_set() (the write lock) returns only
 * once no thread is inside the callback it replaced. The library itself
 * writes nowhere.
 */
#define _GNU_SOURCE /* a writer-preferring rwlock, below */
#include "base/log.h"
#include "base/json.h"

#include <inbox/inbox.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEVEL_NONE (INBOX_LOG_ERROR + 1) /* no callback: nothing passes */

/* Writers first (glibc): threads that log all the time must not keep
 * inbox_log_set() waiting. Safe because no thread ever takes the read
 * lock twice (in_callback). */
#ifdef PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP
static pthread_rwlock_t lock =
    PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
#else
static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
#endif
static inbox_log_fn log_fn; /* under lock */
static void *log_payload;   /* under lock */
/* Read without the lock, only to skip formatting; checked again under
 * it. */
static atomic_int min_level = LEVEL_NONE;
/* Set while this thread runs the callback: what it logs meanwhile is
 * dropped, and it may not replace the callback (it holds the read lock). */
static _Thread_local int in_callback;

int inbox_log_set(inbox_log_fn fn, inbox_log_level level, void *payload)
{
	if ((unsigned)level > INBOX_LOG_ERROR)
		return INBOX_ERR_INVALID;
	if (in_callback)
		return INBOX_ERR_STATE;
	pthread_rwlock_wrlock(&lock);
	log_fn = fn;
	log_payload = payload;
	atomic_store(&min_level, fn ? (int)level : LEVEL_NONE);
	pthread_rwlock_unlock(&lock);
	return INBOX_OK;
}

static const char *const level_names[] = {"debug", "info", "warn", "error"};

const char *inbox_log_level_name(int level)
{
	return level >= INBOX_LOG_DEBUG && level <= INBOX_LOG_ERROR
	           ? level_names[level]
	           : NULL;
}

int inbox_log_level_parse(const char *name, inbox_log_level *out)
{
	for (int l = INBOX_LOG_DEBUG; name && l <= INBOX_LOG_ERROR; l++)
		if (strcmp(name, level_names[l]) == 0) {
			if (out)
				*out = (inbox_log_level)l;
			return INBOX_OK;
		}
	return INBOX_ERR_INVALID;
}

int inbox__log_enabled(int level)
{
	return level >=
	           atomic_load_explicit(&min_level, memory_order_relaxed) &&
	       !in_callback;
}

/* obj is "{"event":"NAME",rest}" as inbox__log's callers write it: cut
 * it in place into NAME and "{rest}". Anything else is passed whole. */
static void split(char *obj, const char **event, const char **fields)
{
	static const char key[] = "\"event\":\"";
	char *name = obj + 1 + sizeof(key) - 1;
	char *end;
	if (strncmp(obj + 1, key, sizeof(key) - 1) == 0 &&
	    (end = strchr(name, '"')) != NULL &&
	    (end[1] == ',' || end[1] == '}')) {
		if (end[1] == ',') {
			end[1] = '{';
			*fields = end + 1;
		} else {
			*fields = "{}";
		}
		*end = '\0';
		*event = name;
		return;
	}
	*event = "log";
	*fields = obj;
}

static void deliver(int level, const char *consumer, const char *event,
                    const char *fields)
{
	pthread_rwlock_rdlock(&lock);
	if (log_fn && level >= atomic_load(&min_level)) {
		in_callback = 1;
		log_fn((inbox_log_level)level,
		       consumer && *consumer ? consumer : NULL, event, fields,
		       log_payload);
		in_callback = 0;
	}
	pthread_rwlock_unlock(&lock);
}

void inbox__log(int level, const char *consumer, const char *fields, ...)
{
	if (!inbox__log_enabled(level))
		return;
	/* "{" + the members + "}" + NUL. A text too long for the stack
	 * buffer is formatted again on the heap: cutting it would leave half
	 * a JSON object. */
	char line[2048], *obj = line, *heap = NULL;
	size_t m = 0;
	if (fields && *fields) {
		va_list ap;
		va_start(ap, fields);
		int w = vsnprintf(line + 1, sizeof(line) - 2, fields, ap);
		va_end(ap);
		if (w < 0)
			return;
		m = (size_t)w;
		if (m >= sizeof(line) - 2) {
			if (!(heap = malloc(m + 3))) {
				deliver(level, consumer, "log_line_dropped",
				        "{}");
				return;
			}
			va_start(ap, fields);
			vsnprintf(heap + 1, m + 1, fields, ap);
			va_end(ap);
			obj = heap;
		}
	}
	obj[0] = '{';
	obj[m + 1] = '}';
	obj[m + 2] = '\0';
	const char *event, *members;
	split(obj, &event, &members);
	deliver(level, consumer, event, members);
	free(heap);
}

const char *inbox__log_escape_into(char *buf, size_t len, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	if (len == 0)
		return "";
	while (*p) {
		/* 0 for a byte that begins no well-formed sequence; the NUL
		 * ends any sequence cut short, so 4 bytes of room is safe */
		size_t n = inbox__utf8_seq_len(p, 4);
		if (o + (n ? n : 1) + 6 >= len)
			break;
		if (n == 0) {
			/* "\\xHH": the text the stores keep for such a byte
			 * (inbox__position_text), and valid JSON */
			const char e[5] = {'\\', '\\', 'x', hex[*p >> 4],
			                   hex[*p & 15]};
			memcpy(buf + o, e, sizeof(e));
			o += sizeof(e);
			n = 1;
		} else if (*p == '"' || *p == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)*p;
		} else if (*p < 0x20) {
			o += (size_t)snprintf(buf + o, len - o, "\\u%04x", *p);
		} else {
			memcpy(buf + o, p, n);
			o += n;
		}
		p += n;
	}
	buf[o] = '\0';
	return buf;
}

const char *inbox__log_escape(const char *s)
{
	static _Thread_local char bufs[4][512];
	static _Thread_local int next;
	char *out = bufs[next];
	next = (next + 1) % 4;
	return inbox__log_escape_into(out, sizeof(bufs[0]), s);
}
