/*
 * The JSONL source: one JSON message per line of a file or of stdin.
 *
 * URL
 *   jsonl:PATH[?follow=1&checkpoint=FILE&from=beginning]
 *   jsonl:-                      standard input (no checkpoint)
 *
 *   follow=1        at the end of the file keep waiting for appended lines
 *                   (poll returns *n = 0 until timeout_ms, never eof).
 *   checkpoint=F    where the progress is kept. Default PATH + "." +
 *                   consumer + ".checkpoint", the consumer name with every
 *                   character other than [A-Za-z0-9._-] replaced by '_'.
 *   from=beginning  ignore (but keep updating) the checkpoint: start at
 *                   the first line. from=checkpoint is the default.
 *   Values are taken literally (no percent-decoding); the path ends at the
 *   first '?'.
 *
 * Deliveries
 *   One message per line ('\n'; a trailing '\r' is stripped). Lines that
 *   are empty or hold only JSON whitespace are skipped but still counted.
 *   A UTF-8 byte order mark at the very start of the file is dropped.
 *   Nothing is parsed or validated here: invalid JSON or UTF-8 is delivered
 *   as it is and the consumer dead-letters it. A line longer than
 *   max_payload is delivered as its first max_payload + 1 bytes and
 *   refused (inbox_delivery.refused) with its real length ("payload of
 *   10485760 bytes exceeds max_payload 1048576"), so the consumer
 *   dead-letters it as over-size; the rest of it is counted and skipped
 *   without being held in memory. A last line without '\n' is delivered at
 *   the end of a non-following file; a following source waits for its
 *   newline.
 *     id = NULL (the consumer takes it from the payload; the refusal of
 *     an over-size line), headers = NULL,
 *     position = "PATH:LINE" ("stdin:LINE"), LINE 1-based,
 *     timestamp_ms = 0,
 *     delivery_count = 1, +1 each time the line is delivered again in this
 *     process (after RETRY, IN_PROGRESS or a failed batch).
 *
 * Progress
 *   settle() moves the checkpoint past the longest prefix of the batch
 *   whose outcomes are ackable, and writes it durably ("OFFSET LINE\n" to
 *   FILE.tmp, fsync, rename over FILE, fsync of the directory). OFFSET is
 *   the byte offset just past the last settled line, LINE that line's
 *   number. Lines from the first non-ackable one on are delivered again,
 *   in order, once retry_delay_ms has passed (poll returns *n = 0 until
 *   then, never eof); the ones among them that committed come back as
 *   duplicates, which the inbox drops. Settle is only called after the
 *   commit, so a crash between commit and checkpoint means redelivery,
 *   never loss. On open the source seeks to the checkpoint; if the file is
 *   now shorter than it, or the checkpoint does not fall on a line
 *   boundary (the file was truncated or replaced), it starts again at the
 *   first line — the inbox drops what was already applied.
 *
 *   Following, a truncation (the file shrank below the read position) or
 *   a rotation (another file at PATH; the old one is read to its end
 *   first) restarts at the first line of the new content, and the
 *   checkpoint is reset to "0 0" at once. Pipes and other non-regular
 *   inputs (stdin) have no checkpoint; their unsettled lines are
 *   redelivered from memory.
 *
 *   Two processes reading the same file must use different checkpoint
 *   files (checkpoint=...): they would otherwise overwrite each other's
 *   progress (safe — the inbox arbitrates — but wasteful). Nothing locks
 *   the checkpoint.
 *
 * Memory
 *   A fixed read buffer plus an arena for the lines not yet settled (at
 *   most max_batch lines of at most max_payload + 1 bytes each); it is
 *   reused from poll to poll and shrunk when it grew large.
 */
#ifndef INBOX_SOURCE_JSONL_H
#define INBOX_SOURCE_JSONL_H

#include <stddef.h>
#include <stdint.h>

#include <inbox/sys/source.h>

#include "base/buf.h"
#include "source/common.h"

#define JL_READ_BUF (64 * 1024)

/* A line read and not yet settled. */
typedef struct jl_line {
	size_t data;     /* offset of the payload in the arena */
	size_t len;      /* payload length */
	uint64_t over;   /* over-size: the line's real length; else 0 */
	uint64_t off;    /* byte offset of the line start */
	uint64_t end;    /* byte offset just past its '\n' */
	uint64_t lineno; /* 1-based */
	int32_t count;   /* deliveries so far, counting the coming one */
} jl_line;

typedef struct jl_source {
	struct inbox_source base; /* must be first */

	/* From the URL. */
	char *path;     /* as given; "-" for stdin */
	char *label;    /* path in positions: the path, or "stdin" */
	char *ckpt;     /* checkpoint file, NULL for stdin */
	char *ckpt_tmp; /* ckpt + ".tmp" */
	char *consumer; /* for log lines */
	int follow;
	int from_beginning;
	int is_stdin;

	int fd;       /* the file (or 0) */
	int regular;  /* fd is a regular file: never blocks, EOF re-read */
	int dirfd;    /* directory of the checkpoint, for fsync; -1 */
	size_t limit; /* max_payload + 1: bytes kept of a long line */

	/* Read buffer: bytes rbuf[rpos..rend) not consumed yet. */
	char *rbuf;
	size_t rpos, rend;
	uint64_t offset; /* file offset of rbuf[rpos] */
	uint64_t lineno; /* number of the line being (or next to be) read */
	int at_eof;      /* the last read returned 0 */

	/* The line being assembled at the tail of the arena. */
	int cur_active;
	uint64_t cur_off;
	size_t cur_data;
	size_t cur_kept;
	int cur_over;       /* bytes past `limit` were dropped */
	int cur_nonws;      /* holds a byte other than JSON whitespace */
	uint64_t cur_total; /* bytes of the line so far, dropped ones too */
	char cur_last;      /* its last byte (a '\r' before the '\n') */

	/* Lines read, not settled, in file order; their bytes in `arena`. */
	jl_line *q;
	size_t nq, qcap;
	inbox__buf arena;
	inbox__buf pos;     /* position strings of the batch in flight */
	inbox__buf refused; /* refusals (over-size lines) of that batch */

	size_t inflight;  /* lines of q delivered by the last poll */
	int64_t retry_at; /* monotonic ms before which q is not redelivered */

	/* Durable progress (jsonl_checkpoint.c). */
	uint64_t ck_off, ck_line;
	uint64_t ck_seq;      /* of the newest slot written or read */
	int ck_slot;          /* the slot (0, 1) it is in */
	int ckfd;             /* the checkpoint open for writes; -1 */
	int ck_dirty;         /* written since the last fdatasync */
	int64_t ck_synced_ms; /* monotonic ms of the last fdatasync */
	int64_t ck_sync_ms;   /* checkpoint_sync: longest time unsynced */
} jl_source;

/* jsonl_url.c: parse the URL into s (path, label, ckpt, flags; parse
 * only: no file is opened). INBOX_ERR_URL (errmsg) / NOMEM. */
int inbox__jl_parse_url(jl_source *s, const char *url, const char *consumer);
/* Free what the parse filled in. */
void inbox__jl_url_clear(jl_source *s);

/* jsonl_checkpoint.c */
/* Read the checkpoint; INBOX_OK with *found = 0 when there is none. */
/* *same_file is 0 when the checkpoint names another file (dev/inode). */
int inbox__jl_ckpt_read(jl_source *s, uint64_t *off, uint64_t *line, int *found,
                        int *same_file);
/* Write s->ck_off/s->ck_line (synced at most ck_sync_ms later). */
int inbox__jl_ckpt_write(jl_source *s);
/* Sync a written position once ck_sync_ms has passed (from poll). */
int inbox__jl_ckpt_tick(jl_source *s);
/* Sync what is unsynced and close the file. */
void inbox__jl_ckpt_close(jl_source *s);
/* Open the checkpoint's directory (for fsync) and check it is writable. */
int inbox__jl_ckpt_prepare(jl_source *s);
/* Warn (structured log line) that reading starts again at line 1. */
void inbox__jl_log_restart(const jl_source *s, const char *why);

/* jsonl_reader.c */
/* Read lines into q until it holds `want` lines or no more input is
 * available right now. INBOX_OK or INBOX_ERR_IO / NOMEM. */
int inbox__jl_read_lines(jl_source *s, size_t want);
/* Drop the arena bytes of lines already settled. */
void inbox__jl_compact(jl_source *s);
/* Queue the unterminated line being read, if any: 1 if queued, 0 if not,
 * INBOX_ERR_NOMEM. */
int inbox__jl_end_partial(jl_source *s);
/* Forget the read position and any partial line: read from offset 0 of
 * s->fd (the caller seeks or reopens). */
void inbox__jl_rewind(jl_source *s);

/* jsonl_follow.c */
/* Wait up to ms for more input (a pipe becoming readable, or a short
 * sleep for a regular file). */
void inbox__jl_wait_input(jl_source *s, int ms);
/* Following a regular file at its end with nothing queued: notice a
 * truncation (copytruncate) or a rename-rotation (a new file at PATH) and
 * start again at the first line of what is there now. 1 if it did (or
 * queued the old file's unterminated last line), 0 if nothing changed. */
int inbox__jl_follow_check(jl_source *s, size_t max);

#endif
