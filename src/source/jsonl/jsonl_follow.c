/*
 * JSONL source, follow mode: waiting for input, and noticing that the
 * followed file was truncated or replaced by a rotation.
 *
 * Only what can be detected is handled: a file shorter than the read
 * position (truncated) and a different file at PATH (renamed away and
 * recreated; the old one is read to its end first). A copytruncate whose
 * new content already outgrew the read position before we looked is
 * indistinguishable from appends — the same limit as tail -F.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "source/jsonl/jsonl.h"

void inbox__jl_wait_input(jl_source *s, int ms)
{
	if (ms <= 0)
		return;
	if (!s->regular && !s->at_eof) {
		struct pollfd pfd = {s->fd, POLLIN, 0};
		poll(&pfd, 1, ms);
		return;
	}
	/* A regular file (or a closed pipe) cannot be waited on with poll:
	 * look again shortly. */
	inbox__src_sleep_ms(ms < 20 ? ms : 20);
}

/* Start at the first line of s->fd, and say so durably: a crash must not
 * resume the new content at the old file's offset. */
static int restart(jl_source *s, const char *why)
{
	inbox__jl_log_restart(s, why);
	inbox__jl_rewind(s);
	s->ck_off = s->ck_line = 0;
	return s->ckpt ? inbox__jl_ckpt_write(s) : INBOX_OK;
}

int inbox__jl_follow_check(jl_source *s, size_t max)
{
	struct stat cur, now;
	if (!s->follow || !s->regular || s->is_stdin || s->nq > 0)
		return 0;
	if (fstat(s->fd, &cur) != 0)
		return 0;
	if ((uint64_t)cur.st_size < s->offset) {
		if (lseek(s->fd, 0, SEEK_SET) < 0) {
			inbox__source_seterr(&s->base, "jsonl: seek %s: %s",
			                     s->path, strerror(errno));
			return INBOX_ERR_IO;
		}
		int rc = restart(s, "file truncated while following");
		return rc < 0 ? rc : 1;
	}
	/* No file at PATH yet (mid-rotation), or still the same one. */
	if (stat(s->path, &now) != 0 ||
	    (now.st_dev == cur.st_dev && now.st_ino == cur.st_ino))
		return 0;
	/* Rotated: what was written to the old file before the rename is
	 * read first, including an unterminated last line. */
	int rc = inbox__jl_read_lines(s, max);
	if (rc < 0)
		return rc;
	if (s->nq > 0)
		return 1;
	rc = inbox__jl_end_partial(s);
	if (rc != 0)
		return rc;
	int fd = open(s->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* gone again: look later */
	close(s->fd);
	s->fd = fd;
	rc = restart(s, "file rotated while following");
	return rc < 0 ? rc : 1;
}
