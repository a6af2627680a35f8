/*
 * The command's log: the library's events (and the command's own, raised
 * the same way) as JSON lines on stderr, one write per line:
 *   {"ts":"2024-05-01T12:00:00.123Z","level":"info","consumer":"billing",
 *    "event":"batch",<the event's fields>}
 * "consumer" is left out for process-level events.
 */
#include <inbox/inbox.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "cli/cli.h"

/* Everything before the fields: {"ts":...,"level":...,["consumer":...,]
 * "event":"..." */
static int head(char *buf, size_t len, inbox_log_level level,
                const char *consumer, const char *event)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	return snprintf(buf, len,
	                "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\","
	                "\"level\":\"%s\"%s%s%s,\"event\":\"%s\"",
	                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	                tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
	                inbox_log_level_name(level),
	                consumer ? ",\"consumer\":\"" : "",
	                consumer ? inbox__log_escape(consumer) : "",
	                consumer ? "\"" : "", inbox__log_escape(event));
}

void (*cli_log_tap)(inbox_log_level level, const char *consumer,
                    const char *event, const char *fields);

static void write_line(inbox_log_level level, const char *consumer,
                       const char *event, const char *fields, void *payload)
{
	(void)payload;
	if (cli_log_tap)
		cli_log_tap(level, consumer, event, fields);
	char line[2048], *out = line, *heap = NULL;
	int h = head(line, sizeof(line), level, consumer, event);
	if (h < 0 || (size_t)h + 3 > sizeof(line))
		return;
	/* fields is "{...}": its members follow the event's name. */
	size_t flen = strlen(fields);
	size_t inner = flen >= 2 ? flen - 2 : 0;
	size_t n = (size_t)h;
	if (n + inner + 3 > sizeof(line)) {
		heap = malloc(n + inner + 3);
		if (heap) {
			memcpy(heap, line, n);
			out = heap;
		} else {
			inner = 0; /* the line without its fields */
		}
	}
	if (inner) {
		out[n++] = ',';
		memcpy(out + n, fields + 1, inner);
		n += inner;
	}
	out[n++] = '}';
	out[n++] = '\n';
	fwrite(out, 1, n, stderr);
	free(heap);
}

int cli_log_setup(void)
{
	const char *e = getenv("INBOX_LOG_LEVEL");
	inbox_log_level level = INBOX_LOG_INFO;
	if (e && *e && inbox_log_level_parse(e, &level) < 0) {
		cli_error("INBOX_LOG_LEVEL=\"%s\" is not a log level (valid: "
		          "debug, info, warn, error)",
		          e);
		return -1;
	}
	return inbox_log_set(write_line, level, NULL) < 0 ? -1 : 0;
}
