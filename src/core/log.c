#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Read by every thread that logs; set once from the environment. */
static _Atomic int min_level = -1;

void inbox__log_set_level(int level)
{
	min_level = level;
}

int inbox__log_enabled(int level)
{
	if (min_level < 0) {
		const char *e = getenv("INBOX_LOG_LEVEL");
		int l = INBOX_LOG_INFO;
		if (e && strcmp(e, "debug") == 0)
			l = INBOX_LOG_DEBUG;
		else if (e && strcmp(e, "warn") == 0)
			l = INBOX_LOG_WARN;
		else if (e && strcmp(e, "error") == 0)
			l = INBOX_LOG_ERROR;
		min_level = l;
	}
	return level >= min_level;
}

static const char *level_name(int level)
{
	static const char *const names[] = {"debug", "info", "warn", "error"};
	return level >= 0 && level <= 3 ? names[level] : "info";
}

void inbox__log(int level, const char *consumer, const char *fields, ...)
{
	if (!inbox__log_enabled(level))
		return;
	char line[2048];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line),
	                 "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\","
	                 "\"level\":\"%s\",\"consumer\":\"%s\"",
	                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	                 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
	                 level_name(level),
	                 consumer ? inbox__log_escape(consumer) : "");
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	/* A line too long for the stack buffer is formatted again on the
	 * heap: cutting it would leave half a JSON object. */
	char *out = line, *heap = NULL;
	if (fields && *fields) {
		line[n++] = ',';
		size_t room = sizeof(line) - (size_t)n - 2;
		va_list ap;
		va_start(ap, fields);
		int m = vsnprintf(line + n, room, fields, ap);
		va_end(ap);
		if (m < 0)
			return;
		if ((size_t)m >= room) {
			heap = malloc((size_t)n + (size_t)m + 3);
			if (heap) {
				memcpy(heap, line, (size_t)n);
				va_start(ap, fields);
				vsnprintf(heap + n, (size_t)m + 1, fields, ap);
				va_end(ap);
				out = heap;
			} else {
				m = snprintf(line + n, room,
				             "\"event\":\"log_line_dropped\"");
			}
		}
		n += m;
	}
	out[n++] = '}';
	out[n++] = '\n';
	fwrite(out, 1, (size_t)n, stderr);
	free(heap);
}

const char *inbox__log_escape(const char *s)
{
	static _Thread_local char bufs[4][512];
	static _Thread_local int next;
	char *out = bufs[next];
	next = (next + 1) % 4;
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)(s ? s : "");
	     *p && o < sizeof(bufs[0]) - 8; p++) {
		if (*p == '"' || *p == '\\') {
			out[o++] = '\\';
			out[o++] = (char)*p;
		} else if (*p < 0x20) {
			o += (size_t)snprintf(out + o, 8, "\\u%04x", *p);
		} else {
			out[o++] = (char)*p;
		}
	}
	out[o] = '\0';
	return out;
}
