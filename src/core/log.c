#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int min_level = -1;

void inbox__log_set_level(int level)
{
	min_level = level;
}

int inbox__log_enabled(int level)
{
	if (min_level < 0) {
		const char *e = getenv("INBOX_LOG_LEVEL");
		min_level = INBOX_LOG_INFO;
		if (e && strcmp(e, "debug") == 0)
			min_level = INBOX_LOG_DEBUG;
		else if (e && strcmp(e, "warn") == 0)
			min_level = INBOX_LOG_WARN;
		else if (e && strcmp(e, "error") == 0)
			min_level = INBOX_LOG_ERROR;
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
	                 tm.tm_hour, tm.tm_min, tm.tm_sec,
	                 ts.tv_nsec / 1000000, level_name(level),
	                 consumer ? inbox__log_escape(consumer) : "");
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	if (fields && *fields) {
		line[n++] = ',';
		va_list ap;
		va_start(ap, fields);
		int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 2,
		                  fields, ap);
		va_end(ap);
		if (m < 0)
			return;
		n += m;
		if ((size_t)n > sizeof(line) - 3)
			n = (int)sizeof(line) - 3;
	}
	line[n++] = '}';
	line[n++] = '\n';
	fwrite(line, 1, (size_t)n, stderr);
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
