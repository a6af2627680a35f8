/* What the database says about one consumer (inbox stats, the demo). */
#ifndef INBOX_CLI_STATS_H
#define INBOX_CLI_STATS_H

#include <stdint.h>

#include <inbox/inbox.h>

typedef struct cli_stats {
	int64_t records; /* inbox rows of the consumer */
	int64_t completed, dead, failed, processing;
	int64_t dead_letters;          /* rows in dead_letters */
	int64_t conflicts;             /* ... that are fingerprint conflicts */
	int64_t dead_letter_positions; /* distinct source positions */
	int64_t conflict_positions;    /* ... of the conflicts */
	int64_t replayed;
	int64_t oldest_age_s; /* -1 when there is no record */
} cli_stats;

/* Read the numbers outside any transaction. INBOX_OK or an error (the
 * detail on the store). */
int cli_stats_read(inbox_store *st, const char *consumer, cli_stats *s);

#endif
