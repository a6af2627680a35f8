/* Structured log lines (one JSON object per line) on stderr. */
#ifndef INBOX_CORE_LOG_H
#define INBOX_CORE_LOG_H

enum {
	INBOX_LOG_DEBUG = 0,
	INBOX_LOG_INFO = 1,
	INBOX_LOG_WARN = 2,
	INBOX_LOG_ERROR = 3
};

/* Minimum level printed: INBOX_LOG_LEVEL=debug|info|warn|error (default
 * info). Set at first use; inbox__log_set_level overrides. */
void inbox__log_set_level(int level);
int inbox__log_enabled(int level);

/* Print {"ts":...,"level":...,"consumer":...,<fields>}. `fields` is a
 * printf format producing the rest of the members (already JSON). */
void inbox__log(int level, const char *consumer, const char *fields, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* JSON-escape s into a rotating static buffer (4 slots) for use inside
 * "..." in a log line. Not thread-safe. */
const char *inbox__log_escape(const char *s);

#endif
