/*
 * JSONL source: the checkpoint file, "OFFSET LINE DEV INODE\n" (the input
 * file's identity, so a file replaced while we were stopped is read from
 * its start instead of from an offset that means nothing in it; the older
 * "OFFSET LINE\n" form is still read), replaced atomically
 * (write FILE.tmp, fsync, rename, fsync the directory) so a crash leaves
 * either the old or the new checkpoint, never a torn one.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "source/jsonl/jsonl.h"

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

int inbox__jl_ckpt_read(jl_source *s, uint64_t *off, uint64_t *line, int *found,
                        int *same_file)
{
	char text[64];
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
	ssize_t n;
	do
		n = read(fd, text, sizeof(text) - 1);
	while (n < 0 && errno == EINTR);
	int err = errno;
	close(fd);
	if (n < 0) {
		inbox__source_seterr(&s->base,
		                     "jsonl: cannot read checkpoint "
		                     "%s: %s",
		                     s->ckpt, strerror(err));
		return INBOX_ERR_IO;
	}
	text[n] = '\0';
	const char *p = text;
	uint64_t dev = 0, ino = 0;
	int ok =
	    parse_u64(&p, off) == 0 && *p++ == ' ' && parse_u64(&p, line) == 0;
	if (ok && *p == ' ') {
		p++;
		ok = parse_u64(&p, &dev) == 0 && *p++ == ' ' &&
		     parse_u64(&p, &ino) == 0;
		struct stat st;
		if (ok && fstat(s->fd, &st) == 0 &&
		    ((uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino))
			*same_file = 0;
	}
	if (!ok || strcmp(p, "\n") != 0) {
		inbox__source_seterr(&s->base,
		                     "jsonl: checkpoint %s is "
		                     "malformed (expected \"OFFSET "
		                     "LINE\"); remove it or use "
		                     "from=beginning",
		                     s->ckpt);
		return INBOX_ERR_IO;
	}
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

int inbox__jl_ckpt_write(jl_source *s)
{
	char text[96];
	struct stat st;
	uint64_t dev = 0, ino = 0;
	if (fstat(s->fd, &st) == 0) {
		dev = (uint64_t)st.st_dev;
		ino = (uint64_t)st.st_ino;
	}
	int len = snprintf(text, sizeof(text),
	                   "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
	                   s->ck_off, s->ck_line, dev, ino);
	const char *what = "open";
	int fd =
	    open(s->ckpt_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail;
	what = "write";
	if (write_all(fd, text, (size_t)len) != 0)
		goto fail_fd;
	what = "fsync";
	if (fsync(fd) != 0)
		goto fail_fd;
	what = "close";
	if (close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
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
	return INBOX_OK;
fail_fd:;
	int err = errno;
	close(fd);
	errno = err;
fail:
	inbox__source_seterr(&s->base, "jsonl: checkpoint %s: %s %s: %s",
	                     s->ckpt, what, s->ckpt_tmp, strerror(errno));
	return INBOX_ERR_IO;
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
