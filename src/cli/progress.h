/*
 * Progress of long operations (purging millions of rows, replaying many
 * dead letters) and the small text helpers the operator commands share.
 * Progress goes to stderr, only when it is a terminal: one line rewritten
 * in place with \r, at most ten times a second; cli_progress_end() ends it
 * with a newline. Elsewhere (pipes, logs) nothing is printed.
 */
#ifndef INBOX_CLI_PROGRESS_H
#define INBOX_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct cli_progress {
	int tty;             /* stderr is a terminal */
	double shown;        /* cli_now() of the last line, 0 = none */
	int open;            /* a line is on screen without its newline */
	int64_t done, total; /* what the last line showed */
} cli_progress;

void cli_progress_init(cli_progress *p);
/* "LABEL done/total (P%)"; `force` ignores the rate limit, but the same
 * figures are never shown twice in a row. */
void cli_progress_show(cli_progress *p, const char *label, int64_t done,
                       int64_t total, int force);
void cli_progress_end(cli_progress *p);

/* Write s to f with control characters and bytes that are not valid
 * UTF-8 escaped (\n, \t, \xNN), so any stored text prints safely on one
 * line. At most `max` bytes of s (0 = all), "..." after a cut. */
void cli_print_safe(FILE *f, const char *s, size_t len, size_t max);

/* Write s as a JSON string (with the quotes); invalid UTF-8 bytes become
 * U+FFFD. */
void cli_json_string(FILE *f, const char *s, size_t len);

/* Epoch milliseconds as "2024-05-01T12:00:00.123Z" ("-" for 0). */
const char *cli_time_text(int64_t ms, char *buf, size_t len);
/* A duration in ms with two units, as "12s", "3m20s", "5h12m", "2d23h",
 * "7d" (whole seconds; the second unit left out when 0). */
const char *cli_age_text(int64_t ms, char *buf, size_t len);

#endif
