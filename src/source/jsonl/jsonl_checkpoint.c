/*
 * JSONL source: the checkpoint file.
 *
 * Format 2: two slots of SLOT bytes, at 0 and at SLOT, each one line
 *   "inbox-jsonl-checkpoint 2 SEQ OFFSET LINE DEV INODE HASH" padded with
 * spaces to SLOT - 1 bytes and a newline (DEV INODE: the input file's
 * identity, so a file replaced while we were stopped is read from its
 * start instead of from an offset that means nothing in it; HASH: FNV-1a
 * of what precedes it, in hex). A write goes in place (pwrite) to the slot
 * the previous one did not use, so a write torn by a crash leaves the
 * other slot whole; the reader takes the valid slot of the highest SEQ.
 * The file is never truncated nor renamed once made.
 *
 * Durability: its data is synced (fdatasync) at most every
 * checkpoint_sync (default 1 s; 0: after every batch, as before) and when
 * the source closes, not at each batch: the guarantee is the inbox's, the
 * checkpoint only bounds what is read again. A killed process loses
 * nothing (the kernel holds its writes); after an OS crash or a power
 * loss the checkpoint may be about checkpoint_sync behind, and those lines
 * are read again and dropped as duplicates (their records committed with
 * their effects). Two fsyncs per batch cost a quarter of the daemon's
 * rate (bench/README.md).
 *
 * The file is made (or a format-1 file, "OFFSET LINE DEV INODE\n" or
 * "OFFSET LINE\n", still read, replaced) once per open, atomically:
 * write FILE.tmp, fsync, rename, fsync the directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "core/internal.h"
#include "source/jsonl/jsonl.h"

#define SLOT  512
#define MAGIC "inbox-jsonl-checkpoint 2 "

static int parse_u64(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	if (*s < '0' || *s > '9')
		return -1;
	while (*s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
		s++;
	}
	*p = s;
	*out = v;
	return 0;
}

/* Slot text (SLOT bytes) -> seq, off, line, dev, ino; 0 or -1. */
static int parse_slot(const char *t, uint64_t v[5])
{
	if (strncmp(t, MAGIC, sizeof(MAGIC) - 1) != 0 || t[SLOT - 1] != '\n')
		return -1;
	const char *p = t + sizeof(MAGIC) - 1;
	for (int i = 0; i < 5; i++)
		if (parse_u64(&p, &v[i]) != 0 || *p++ != ' ')
			return -1;
	size_t body = (size_t)(p - 1 - t);
	char want[17];
	snprintf(want, sizeof(want), "%016" PRIx64,
	         inbox__fnv1a(INBOX__FNV_INIT, t, body));
	if (strncmp(p, want, 16) != 0)
		return -1;
	for (p += 16; p < t + SLOT - 1; p++)
		if (*p != ' ')
			return -1;
	return 0;
}

/* Format 1: "OFFSET LINE[ DEV INODE]\n". */
static int parse_v1(const char *p, uint64_t v[5], int *has_id)
{
	*has_id = 0;
	if (parse_u64(&p, &v[1]) != 0 || *p++ != ' ' ||
	    parse_u64(&p, &v[2]) != 0)
		return -1;
	if (*p == ' ') {
		p++;
		if (parse_u64(&p, &v[3]) != 0 || *p++ != ' ' ||
		    parse_u64(&p, &v[4]) != 0)
			return -1;
		*has_id = 1;
	}
	return strcmp(p, "\n") == 0 ? 0 : -1;
}

int inbox__jl_ckpt_read(jl_source *s, uint64_t *off, uint64_t *line, int *found,
                        int *same_file)
{
	char text[2 * SLOT + 1];
	*found = 0;
	*same_file = 1;
	int fd = open(s->ckpt, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return INBOX_OK;
		inbox__source_seterr(&s->base,
		                     "jsonl: cannot open checkpoint "
		                     "%s: %s",
		                     s->ckpt, strerror(errno));
		return INBOX_ERR_IO;
	}
	size_t n = 0;
	while (n < sizeof(text) - 1) {
		ssize_t r = read(fd, text + n, sizeof(text) - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;
			close(fd);
			inbox__source_seterr(&s->base,
			                     "jsonl: cannot read checkpoint "
			                     "%s: %s",
			                     s->ckpt, strerror(err));
			return INBOX_ERR_IO;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	text[n] = '\0';
	uint64_t v[5] = {0}, best[5] = {0};
	int ok = 0, has_id = 1;
	if (n > 0 && text[0] >= '0' && text[0] <= '9') {
		ok = parse_v1(text, best, &has_id) == 0;
	} else {
		for (int i = 0; i < 2; i++) {
			if (n < (size_t)(i + 1) * SLOT ||
			    parse_slot(text + i * SLOT, v) != 0)
				continue;
			if (!ok || v[0] > best[0]) {
				memcpy(best, v, sizeof(best));
				s->ck_slot = i;
			}
			ok = 1;
		}
	}
	if (!ok) {
		inbox__source_seterr(&s->base,
		                     "jsonl: checkpoint %s is "
		                     "malformed (no valid position in "
		                     "it); remove it or use "
		                     "from=beginning",
		                     s->ckpt);
		return INBOX_ERR_IO;
	}
	s->ck_seq = best[0];
	*off = best[1];
	*line = best[2];
	struct stat st;
	if (has_id && fstat(s->fd, &st) == 0 &&
	    ((uint64_t)st.st_dev != best[3] || (uint64_t)st.st_ino != best[4]))
		*same_file = 0;
	*found = 1;
	return INBOX_OK;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The slot text of the position to write, SLOT bytes. */
static void format_slot(jl_source *s, char *text)
{
	struct stat st;
	uint64_t dev = 0, ino = 0;
	if (fstat(s->fd, &st) == 0) {
		dev = (uint64_t)st.st_dev;
		ino = (uint64_t)st.st_ino;
	}
	int len = snprintf(text, SLOT,
	                   MAGIC "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
	                         " %" PRIu64 " ",
	                   s->ck_seq, s->ck_off, s->ck_line, dev, ino);
	uint64_t h = inbox__fnv1a(INBOX__FNV_INIT, text, (size_t)len - 1);
	len += snprintf(text + len, SLOT - (size_t)len, "%016" PRIx64, h);
	memset(text + len, ' ', SLOT - 1 - (size_t)len);
	text[SLOT - 1] = '\n';
}

/* Make the file afresh with the position in slot 0: FILE.tmp, fsync,
 * rename, fsync the directory; then keep it open for the writes. */
static int ckpt_create(jl_source *s, const char *text)
{
	const char *what = "open";
	int fd =
	    open(s->ckpt_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail;
	what = "write";
	if (write_all(fd, text, SLOT) != 0)
		goto fail_fd;
	what = "fsync";
	if (fsync(fd) != 0)
		goto fail_fd;
	what = "close";
	if (close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	what = "rename";
	if (rename(s->ckpt_tmp, s->ckpt) != 0)
		goto fail;
	/* The rename is durable only once the directory is. */
	if (s->dirfd >= 0 && fsync(s->dirfd) != 0 && errno != EINVAL) {
		inbox__source_seterr(&s->base,
		                     "jsonl: fsync of the directory "
		                     "of %s: %s",
		                     s->ckpt, strerror(errno));
		return INBOX_ERR_IO;
	}
	s->ckfd = open(s->ckpt, O_WRONLY | O_CLOEXEC);
	if (s->ckfd < 0) {
		what = "reopen";
		goto fail_path;
	}
	s->ck_slot = 0;
	s->ck_dirty = 0;
	s->ck_synced_ms = inbox__src_mono_ms();
	return INBOX_OK;
fail_fd:;
	int err = errno;
	close(fd);
	errno = err;
fail:
	inbox__source_seterr(&s->base, "jsonl: checkpoint %s: %s %s: %s",
	                     s->ckpt, what, s->ckpt_tmp, strerror(errno));
	return INBOX_ERR_IO;
fail_path:
	inbox__source_seterr(&s->base, "jsonl: checkpoint %s: %s: %s", s->ckpt,
	                     what, strerror(errno));
	return INBOX_ERR_IO;
}

/* Sync the written slots: 0, or INBOX_ERR_IO with the reason. */
static int ckpt_sync(jl_source *s)
{
	if (fdatasync(s->ckfd) != 0) {
		inbox__source_seterr(&s->base,
		                     "jsonl: checkpoint %s: fdatasync: %s",
		                     s->ckpt, strerror(errno));
		return INBOX_ERR_IO;
	}
	s->ck_dirty = 0;
	s->ck_synced_ms = inbox__src_mono_ms();
	return INBOX_OK;
}

int inbox__jl_ckpt_write(jl_source *s)
{
	char text[SLOT];
	s->ck_seq++;
	format_slot(s, text);
	if (s->ckfd < 0)
		return ckpt_create(s, text);
	int slot = 1 - s->ck_slot;
	off_t at = (off_t)slot * SLOT;
	for (size_t done = 0; done < SLOT;) {
		ssize_t w =
		    pwrite(s->ckfd, text + done, SLOT - done, at + (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			inbox__source_seterr(&s->base,
			                     "jsonl: checkpoint %s: write: %s",
			                     s->ckpt, strerror(errno));
			return INBOX_ERR_IO;
		}
		done += (size_t)w;
	}
	s->ck_slot = slot;
	s->ck_dirty = 1;
	if (s->ck_sync_ms == 0 ||
	    inbox__src_mono_ms() - s->ck_synced_ms >= s->ck_sync_ms)
		return ckpt_sync(s);
	return INBOX_OK;
}

int inbox__jl_ckpt_tick(jl_source *s)
{
	if (s->ckfd < 0 || !s->ck_dirty ||
	    inbox__src_mono_ms() - s->ck_synced_ms < s->ck_sync_ms)
		return INBOX_OK;
	return ckpt_sync(s);
}

void inbox__jl_ckpt_close(jl_source *s)
{
	if (s->ckfd < 0)
		return;
	if (s->ck_dirty && ckpt_sync(s) < 0)
		inbox__log(INBOX_LOG_WARN, s->consumer,
		           "\"event\":\"jsonl_checkpoint_sync_failed\","
		           "\"path\":\"%s\"",
		           inbox__log_escape(s->ckpt));
	close(s->ckfd);
	s->ckfd = -1;
}

int inbox__jl_ckpt_prepare(jl_source *s)
{
	const char *slash = strrchr(s->ckpt, '/');
	char *dir;
	if (!slash)
		dir = strdup(".");
	else if (slash == s->ckpt)
		dir = strdup("/");
	else
		dir = strndup(s->ckpt, (size_t)(slash - s->ckpt));
	if (!dir)
		return INBOX_ERR_NOMEM;
	int rc = INBOX_OK;
	s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dirfd < 0 || access(dir, W_OK) != 0) {
		inbox__source_seterr(&s->base,
		                     "jsonl: checkpoint directory "
		                     "%s: %s",
		                     dir, strerror(errno));
		rc = INBOX_ERR_IO;
	}
	free(dir);
	if (rc < 0)
		return rc;
	/* checkpoint=PATH would replace the data with a checkpoint */
	struct stat a, b;
	if (stat(s->ckpt, &a) == 0 && fstat(s->fd, &b) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
		inbox__source_seterr(&s->base,
		                     "jsonl: the checkpoint %s is "
		                     "the input file itself",
		                     s->ckpt);
		return INBOX_ERR_URL;
	}
	return INBOX_OK;
}

void inbox__jl_log_restart(const jl_source *s, const char *why)
{
	inbox__log(INBOX_LOG_WARN, s->consumer,
	           "\"event\":\"jsonl_restart\",\"path\":\"%s\","
	           "\"reason\":\"%s\"",
	           inbox__log_escape(s->path), why);
}
