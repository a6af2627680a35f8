/*
 * JSONL source: the vtable (open, close, poll, settle). The behaviour is
 * described in jsonl.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "source/jsonl/jsonl.h"

static void jl_close(inbox_source *src)
{
	jl_source *s = (jl_source *)src;
	if (!s)
		return;
	if (s->fd > 0 || (s->fd == 0 && !s->is_stdin))
		close(s->fd);
	inbox__jl_ckpt_close(s);
	if (s->dirfd >= 0)
		close(s->dirfd);
	inbox__jl_url_clear(s);
	free(s->consumer);
	free(s->rbuf);
	free(s->q);
	inbox__buf_free(&s->arena);
	inbox__buf_free(&s->pos);
	inbox__buf_free(&s->refused);
	free(s);
}

/* Is the checkpoint offset still a line boundary of this file? */
static int ckpt_fits(jl_source *s, uint64_t off, off_t size)
{
	if (off > (uint64_t)size)
		return 0; /* truncated */
	if (off == 0 || off == (uint64_t)size)
		return 1; /* the end may follow an unterminated last line */
	char c;
	if (pread(s->fd, &c, 1, (off_t)(off - 1)) != 1)
		return 0;
	return c == '\n';
}

/* Position the reader at the checkpoint, or at the start. */
static int resume(jl_source *s, off_t size)
{
	uint64_t off = 0, line = 0;
	int found = 0;
	if (s->from_beginning)
		return INBOX_OK; /* the next settle replaces the checkpoint */
	int same_file = 1;
	int rc = inbox__jl_ckpt_read(s, &off, &line, &found, &same_file);
	if (rc < 0 || !found)
		return rc;
	if (!same_file) {
		inbox__jl_log_restart(s, "the checkpoint names another file "
		                         "(replaced while stopped)");
		return INBOX_OK;
	}
	if (!ckpt_fits(s, off, size)) {
		/* Replaced or truncated: from the start; the inbox drops what
		 * was already applied. */
		inbox__jl_log_restart(s, "checkpoint beyond the end of the "
		                         "file or not at a line start");
		return INBOX_OK;
	}
	if (lseek(s->fd, (off_t)off, SEEK_SET) < 0) {
		inbox__source_seterr(&s->base, "jsonl: seek %s: %s", s->path,
		                     strerror(errno));
		return INBOX_ERR_IO;
	}
	s->offset = s->ck_off = off;
	s->ck_line = line;
	s->lineno = line + 1;
	return INBOX_OK;
}

static int open_input(jl_source *s)
{
	struct stat st;
	if (s->is_stdin) {
		s->fd = 0;
	} else {
		s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
		if (s->fd < 0) {
			inbox__source_seterr(&s->base,
			                     "jsonl: cannot open %s: "
			                     "%s",
			                     s->path, strerror(errno));
			return INBOX_ERR_IO;
		}
	}
	if (fstat(s->fd, &st) != 0) {
		inbox__source_seterr(&s->base, "jsonl: stat %s: %s", s->label,
		                     strerror(errno));
		return INBOX_ERR_IO;
	}
	if (S_ISDIR(st.st_mode)) {
		inbox__source_seterr(&s->base, "jsonl: %s is a directory",
		                     s->path);
		return INBOX_ERR_IO;
	}
	s->regular = S_ISREG(st.st_mode);
	if (!s->regular) {
		/* A pipe cannot be re-read from an offset. */
		free(s->ckpt);
		free(s->ckpt_tmp);
		s->ckpt = s->ckpt_tmp = NULL;
		return INBOX_OK;
	}
	if (!s->ckpt)
		return INBOX_OK;
	int rc = inbox__jl_ckpt_prepare(s);
	if (rc < 0)
		return rc;
	return resume(s, st.st_size);
}

/* The check slot, and open's first half: the handle, its URL parsed. */
static int jl_check(inbox_source **out, const char *url,
                    const inbox_source_options *opts)
{
	jl_source *s = calloc(1, sizeof(*s));
	if (!s)
		return INBOX_ERR_NOMEM;
	*out = &s->base;
	s->fd = -1;
	s->dirfd = -1;
	s->ckfd = -1;
	s->ck_sync_ms = 1000;
	s->lineno = 1;
	size_t mp = opts->max_payload ? opts->max_payload : 1024 * 1024;
	if (mp > SIZE_MAX / 4)
		mp = SIZE_MAX / 4;
	s->limit = mp + 1;
	s->consumer = strdup(opts->consumer);
	if (!s->consumer)
		return INBOX_ERR_NOMEM;
	return inbox__jl_parse_url(s, url, opts->consumer);
}

static int jl_open(inbox_source **out, const char *url,
                   const inbox_source_options *opts)
{
	int rc = jl_check(out, url, opts);
	if (rc < 0)
		return rc;
	jl_source *s = (jl_source *)*out;
	s->rbuf = malloc(JL_READ_BUF);
	if (!s->rbuf)
		return INBOX_ERR_NOMEM;
	return open_input(s);
}

/* Hand out the first k queued lines. */
static int deliver(jl_source *s, inbox_delivery *out, size_t k)
{
	size_t each = strlen(s->label) + 24; /* ":" + 20 digits + NUL */
	s->pos.len = 0;
	if (inbox__buf_reserve(&s->pos, k * each) < 0)
		return INBOX_ERR_NOMEM;
	inbox__buf_reset(&s->refused);
	for (size_t i = 0; i < k; i++)
		if (s->q[i].over &&
		    inbox__src_refuse(&s->refused,
		                      "payload of %" PRIu64 " bytes exceeds "
		                      "max_payload %zu",
		                      s->q[i].over, s->limit - 1) < 0)
			return INBOX_ERR_NOMEM;
	const char *why = s->refused.data;
	char *pp = s->pos.data;
	for (size_t i = 0; i < k; i++) {
		const jl_line *l = &s->q[i];
		int w = snprintf(pp, each, "%s:%" PRIu64, s->label, l->lineno);
		out[i] = (inbox_delivery){0};
		out[i].payload = s->arena.data + l->data;
		out[i].payload_len = l->len;
		out[i].position = pp;
		out[i].delivery_count = l->count;
		pp += w + 1;
		if (l->over) { /* the refusals, in the lines' order */
			inbox__src_set_id(&out[i], why);
			why += strlen(why) + 1;
		}
	}
	s->inflight = k;
	return INBOX_OK;
}

static int jl_poll(inbox_source *src, inbox_delivery *out, size_t max,
                   size_t *n, int timeout_ms, int *eof)
{
	jl_source *s = (jl_source *)src;
	inbox__jl_compact(s);
	int rc0 = inbox__jl_ckpt_tick(s);
	if (rc0 < 0)
		return rc0;
	int64_t now = inbox__src_mono_ms();
	int64_t deadline = now + (timeout_ms > 0 ? timeout_ms : 0);
	if (s->nq > 0 && now < s->retry_at) {
		/* Redelivery waits for retry_delay_ms, in poll, not settle. */
		inbox__src_sleep_ms(
		    (s->retry_at < deadline ? s->retry_at : deadline) - now);
		if (inbox__src_mono_ms() < s->retry_at)
			return INBOX_OK;
	}
	for (;;) {
		int rc = inbox__jl_read_lines(s, max);
		if (rc < 0)
			return rc;
		if (s->nq > 0)
			break;
		if (!s->follow && s->at_eof) {
			*eof = 1;
			return INBOX_OK;
		}
		if (s->at_eof) {
			rc = inbox__jl_follow_check(s, max);
			if (rc < 0)
				return rc;
			if (rc > 0)
				continue;
		}
		now = inbox__src_mono_ms();
		if (now >= deadline)
			return INBOX_OK;
		inbox__jl_wait_input(s, (int)(deadline - now));
	}
	size_t k = s->nq < max ? s->nq : max;
	int rc = deliver(s, out, k);
	if (rc == INBOX_OK)
		*n = k;
	return rc;
}

/* The batch is the first n queued lines (the framework checked it). */
static int jl_settle(inbox_source *src, const inbox_result *res, size_t n)
{
	jl_source *s = (jl_source *)src;
	int rc = INBOX_OK;
	size_t k = n < s->inflight ? n : s->inflight;
	size_t acked = 0;
	while (res && acked < k && inbox_outcome_ackable(res[acked].outcome))
		acked++;
	if (acked < k) {
		for (size_t i = acked; i < k; i++)
			if (s->q[i].count < INT32_MAX)
				s->q[i].count++;
		int delay = src->opts.retry_delay_ms;
		s->retry_at = inbox__src_mono_ms() + (delay > 0 ? delay : 0);
	}
	s->inflight = 0;
	if (acked == 0)
		return rc;
	s->ck_off = s->q[acked - 1].end;
	s->ck_line = s->q[acked - 1].lineno;
	/* Their bytes leave the arena at the next poll's compaction. */
	memmove(s->q, s->q + acked, (s->nq - acked) * sizeof(*s->q));
	s->nq -= acked;
	if (s->ckpt) {
		int w = inbox__jl_ckpt_write(s);
		if (w < 0 && rc == INBOX_OK)
			rc = w;
	}
	return rc;
}

/* Bytes of the file past the position: from the first line not acked
 * (queued, or being read) to the file's size now. A pipe has no size:
 * unknown. Messages are not counted (that would mean reading ahead). */
static int jl_lag(inbox_source *src, int64_t *messages, int64_t *bytes)
{
	jl_source *s = (jl_source *)src;
	struct stat sb;
	(void)messages;
	if (!s->regular || fstat(s->fd, &sb) < 0)
		return 0;
	uint64_t pos = s->nq > 0       ? s->q[0].off
	               : s->cur_active ? s->cur_off
	                               : s->offset;
	uint64_t size = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
	*bytes = size > pos ? (int64_t)(size - pos) : 0;
	return 0;
}

const inbox_source_vtable inbox__jsonl_source = {
    .version = INBOX_SOURCE_VTABLE_VERSION,
    .scheme = "jsonl",
    .open = jl_open,
    .close = jl_close,
    .poll = jl_poll,
    .settle = jl_settle,
    .lag = jl_lag,
    .check = jl_check,
};
