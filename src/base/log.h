/*
 * Log events for the callback of <inbox/log.h>. Library code calls
 * inbox__log(); nothing here writes anywhere: with no callback installed
 * an event is dropped before it is formatted.
 */
#ifndef INBOX_BASE_LOG_H
#define INBOX_BASE_LOG_H

#include <inbox/log.h>
#include <stddef.h>

/* Whether an event at `level` would reach a callback (one is installed
 * and level >= its minimum). For work done only to build a line. */
int inbox__log_enabled(int level);

/* Raise an event. `fields` is a printf format producing the event's
 * members as JSON, the first one its name:
 *   inbox__log(INBOX_LOG_WARN, name, "\"event\":\"poll_failed\","
 *              "\"error\":\"%s\"", inbox__log_escape(msg));
 * The callback receives event = "poll_failed" and fields =
 * {"error":"..."}. consumer is NULL (or "") for a process-level event.
 * Thread-safe. */
void inbox__log(int level, const char *consumer, const char *fields, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* JSON-escape s for use inside "..." in a log line, into one of four
 * buffers of the calling thread (_Thread_local, so thread-safe) used in
 * turn: at most four results may be alive at once, so use it for at most
 * four arguments of one inbox__log() call. Longer texts are cut at about
 * 500 bytes (on a UTF-8 character boundary). */
const char *inbox__log_escape(const char *s);

/* The same escape into buf (len bytes, NUL included), for texts longer
 * than inbox__log_escape keeps; returns buf. Cut on a character
 * boundary when buf is full. A byte that begins no well-formed UTF-8
 * sequence becomes the text \\xHH (as the stores keep a source
 * position's: inbox__position_text), so the line stays valid JSON. */
const char *inbox__log_escape_into(char *buf, size_t len, const char *s);

#endif
