/*
 * JSONL source: split the input into lines. Bytes go from a fixed read
 * buffer straight into the arena, at most `limit` of them per line, so an
 * endless line costs no memory. A line cut by the end of the input stays
 * at the arena's tail and is continued by the next read.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "source/jsonl/jsonl.h"

static int has_nonws(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return 1;
	return 0;
}

/* Read more input into rbuf. 1: got bytes; 0: nothing now (s->at_eof says
 * whether it was the end of the input); <0: error. Never blocks. */
static int fill(jl_source *s)
{
	if (!s->regular) {
		struct pollfd pfd = {s->fd, POLLIN, 0};
		int r = poll(&pfd, 1, 0);
		if (r == 0)
			return 0;
		if (r < 0)
			return errno == EINTR ? 0 : -1;
	}
	s->rpos = s->rend = 0;
	ssize_t n;
	do
		n = read(s->fd, s->rbuf, JL_READ_BUF);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	s->at_eof = n == 0;
	s->rend = (size_t)n;
	return n > 0;
}

/* Room in q for one more line, made before a line is read: once its
 * newline is consumed the line must be queued, or it would be lost. */
static int reserve_line(jl_source *s)
{
	if (s->nq < s->qcap)
		return INBOX_OK;
	size_t cap = s->qcap ? s->qcap * 2 : 16;
	jl_line *q = realloc(s->q, cap * sizeof(*q));
	if (!q)
		return INBOX_ERR_NOMEM;
	s->q = q;
	s->qcap = cap;
	return INBOX_OK;
}

static void push_line(jl_source *s, size_t data, size_t len)
{
	uint64_t over = 0;
	if (s->cur_over) /* the length the payload would have had */
		over = s->cur_total - (s->cur_last == '\r' ? 1 : 0);
	s->q[s->nq++] =
	    (jl_line){data, len, over, s->cur_off, s->offset, s->lineno, 1};
}

/* The line at the arena's tail is complete (s->offset is just past it):
 * queue it, or drop it if blank. 1 if queued. The caller made room in q
 * (reserve_line). */
static int end_line(jl_source *s)
{
	char *p = s->arena.data + s->cur_data;
	size_t len = s->cur_kept;
	s->cur_active = 0;
	if (!s->cur_over) {
		if (len > 0 && p[len - 1] == '\r')
			len--;
		/* A byte order mark is an encoding marker, not content. */
		if (s->cur_off == 0 && len >= 3 &&
		    memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
			memmove(p, p + 3, len - 3);
			len -= 3;
			s->cur_nonws = has_nonws(p, len);
		}
	}
	int rc = 0;
	if (s->cur_nonws) {
		push_line(s, s->cur_data, len);
		s->arena.len = s->cur_data + len;
		rc = 1;
	} else {
		s->arena.len = s->cur_data;
	}
	s->lineno++;
	return rc;
}

/* Consume bytes of rbuf into the current line. 1 when it ended. */
static int take(jl_source *s)
{
	const char *p = s->rbuf + s->rpos;
	size_t avail = s->rend - s->rpos;
	const char *nl = memchr(p, '\n', avail);
	size_t chunk = nl ? (size_t)(nl - p) : avail;
	if (!s->cur_active) {
		s->cur_active = 1;
		s->cur_off = s->offset;
		s->cur_data = s->arena.len;
		s->cur_kept = 0;
		s->cur_over = 0;
		s->cur_nonws = 0;
		s->cur_total = 0;
		s->cur_last = 0;
	}
	s->cur_total += chunk;
	if (chunk)
		s->cur_last = p[chunk - 1];
	size_t room = s->limit - s->cur_kept;
	size_t keep = chunk < room ? chunk : room;
	if (keep > 0) {
		if (inbox__buf_append(&s->arena, p, keep) < 0)
			return INBOX_ERR_NOMEM;
		s->cur_kept += keep;
	}
	if (chunk > keep)
		s->cur_over = 1;
	if (!s->cur_nonws)
		s->cur_nonws = has_nonws(p, chunk);
	size_t used = chunk + (nl ? 1 : 0);
	s->rpos += used;
	s->offset += used;
	return nl ? 1 : 0;
}

int inbox__jl_read_lines(jl_source *s, size_t want)
{
	while (s->nq < want) {
		if (reserve_line(s) < 0)
			return INBOX_ERR_NOMEM;
		if (s->rpos == s->rend) {
			int r = fill(s);
			if (r < 0) {
				inbox__source_seterr(&s->base,
				                     "jsonl: read %s: %s",
				                     s->label, strerror(errno));
				return INBOX_ERR_IO;
			}
			if (r == 0) {
				/* An unterminated last line counts once the
				 * input really ended. */
				if (s->at_eof && s->cur_active && !s->follow)
					end_line(s);
				return INBOX_OK;
			}
		}
		int r = take(s);
		if (r < 0)
			return r;
		if (r == 1)
			end_line(s);
	}
	return INBOX_OK;
}

void inbox__jl_compact(jl_source *s)
{
	size_t base = s->nq > 0       ? s->q[0].data
	              : s->cur_active ? s->cur_data
	                              : s->arena.len;
	if (base > 0) {
		size_t live = s->arena.len - base;
		memmove(s->arena.data, s->arena.data + base, live);
		s->arena.len = live;
		for (size_t i = 0; i < s->nq; i++)
			s->q[i].data -= base;
		if (s->cur_active)
			s->cur_data -= base;
	}
	/* Give back memory a batch of huge lines left behind. */
	if (s->arena.cap > 4 * 1024 * 1024 && s->arena.len < s->arena.cap / 4) {
		size_t cap = s->arena.len * 2 + 64 * 1024;
		char *p = realloc(s->arena.data, cap);
		if (p) {
			s->arena.data = p;
			s->arena.cap = cap;
		}
	}
	if (s->arena.data)
		s->arena.data[s->arena.len] = '\0';
}

int inbox__jl_end_partial(jl_source *s)
{
	if (!s->cur_active)
		return 0;
	if (reserve_line(s) < 0)
		return INBOX_ERR_NOMEM;
	return end_line(s);
}

void inbox__jl_rewind(jl_source *s)
{
	if (s->cur_active)
		s->arena.len = s->cur_data;
	s->cur_active = 0;
	s->rpos = s->rend = 0;
	s->offset = 0;
	s->lineno = 1;
	s->at_eof = 0;
}
