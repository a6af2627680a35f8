/*
 * The JSONL source: lines, positions and offsets, blank lines, CRLF,
 * batches, checkpoints (content, resume, retry, failed batch), follow
 * mode, over-long and invalid lines, URL errors, stdin; then end to end
 * through inbox_run with the SQLite store.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <inbox/source.h>

#include "../clock.h"
#include "source/jsonl/jsonl.h"
#include "test.h"

static char tmpdir[256];

static void path_of(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", tmpdir, name);
}

static void write_file(const char *name, const char *text, size_t len,
                       const char *mode)
{
	char p[512];
	path_of(p, sizeof(p), name);
	FILE *f = fopen(p, mode);
	if (!f) {
		perror(p);
		abort();
	}
	fwrite(text, 1, len, f);
	fclose(f);
}

static void put(const char *name, const char *text)
{
	write_file(name, text, strlen(text), "wb");
}

static void append(const char *name, const char *text)
{
	write_file(name, text, strlen(text), "ab");
}

/* Contents of a small file ("" if missing) in a static buffer. */
static const char *slurp(const char *name)
{
	static char buf[2048];
	char p[512];
	path_of(p, sizeof(p), name);
	buf[0] = '\0';
	FILE *f = fopen(p, "rb");
	if (!f)
		return buf;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* The newest valid slot of a format-2 checkpoint (two 512-byte slots,
 * "inbox-jsonl-checkpoint 2 SEQ OFFSET LINE DEV INODE HASH"), as
 * "OFFSET LINE DEV INODE\n"; a format-1 file as it is; "" if none. The
 * hash is not checked here: the source's reader is what is tested. */
static const char *ckpt_full(const char *name)
{
	static char out[128];
	const char *b = slurp(name);
	size_t n = strlen(b);
	unsigned long long best = 0, v[5];
	int found = 0;
	out[0] = '\0';
	if (n > 0 && b[0] >= '0' && b[0] <= '9')
		return b;
	for (size_t at = 0; at + 512 <= n && at <= 512; at += 512) {
		if (sscanf(b + at,
		           "inbox-jsonl-checkpoint 2 %llu %llu %llu %llu %llu ",
		           &v[0], &v[1], &v[2], &v[3], &v[4]) != 5)
			continue;
		if (found && v[0] <= best)
			continue;
		best = v[0];
		found = 1;
		snprintf(out, sizeof(out), "%llu %llu %llu %llu\n", v[1], v[2],
		         v[3], v[4]);
	}
	return out;
}

/* The checkpoint's position, "OFFSET LINE\n", without the file identity
 * (device and inode) that follows it. */
static const char *ckpt(const char *name)
{
	static char b[128];
	snprintf(b, sizeof(b), "%s", ckpt_full(name));
	char *sp = strchr(b, ' ');
	if (sp && (sp = strchr(sp + 1, ' ')) != NULL) {
		sp[0] = '\n';
		sp[1] = '\0';
	}
	return b;
}

static int open_src(inbox_source **src, const char *name, const char *query,
                    size_t max_payload, int retry_delay_ms)
{
	char url[600];
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "test.consumer";
	o.max_payload = max_payload ? max_payload : 1024 * 1024;
	o.retry_delay_ms = retry_delay_ms;
	snprintf(url, sizeof(url), "jsonl:%s/%s%s", tmpdir, name,
	         query ? query : "");
	return inbox_source_open(src, url, &o);
}

static int ds_eq(const inbox_delivery *d, const char *text)
{
	return d->payload_len == strlen(text) &&
	       memcmp(d->payload, text, d->payload_len) == 0;
}

static void outcomes(inbox_result *res, size_t n, inbox_outcome o)
{
	for (size_t i = 0; i < n; i++) {
		res[i] = (inbox_result)INBOX_RESULT_INIT;
		res[i].outcome = o;
	}
}

/* ------------------------------------------------------------------ */

TEST(lines_in_order)
{
	put("a.jsonl", "{\"id\":\"1\"}\n\n   \t\n{\"id\":\"2\"}\r\n\r\n"
	               "{\"id\":\"3\"}\n");
	inbox_source *src;
	ASSERT_OK(open_src(&src, "a.jsonl", NULL, 0, 100));
	inbox_delivery d[10] = {INBOX_DELIVERY_INIT};
	size_t n = 0;
	int eof = 0;
	ASSERT_OK(inbox_source_poll(src, d, 10, &n, 0, &eof));
	ASSERT_EQ(n, 3);
	ASSERT_EQ(eof, 0);
	ASSERT_TRUE(ds_eq(&d[0], "{\"id\":\"1\"}"));
	ASSERT_TRUE(ds_eq(&d[1], "{\"id\":\"2\"}")); /* \r stripped */
	ASSERT_TRUE(ds_eq(&d[2], "{\"id\":\"3\"}"));
	char want[600];
	snprintf(want, sizeof(want), "%s/a.jsonl:1", tmpdir);
	ASSERT_STREQ(d[0].position, want);
	snprintf(want, sizeof(want), "%s/a.jsonl:4", tmpdir);
	ASSERT_STREQ(d[1].position, want); /* blank lines still counted */
	snprintf(want, sizeof(want), "%s/a.jsonl:6", tmpdir);
	ASSERT_STREQ(d[2].position, want);
	for (size_t i = 0; i < n; i++) {
		ASSERT_TRUE(d[i].id == NULL);
		ASSERT_TRUE(d[i].headers == NULL);
		ASSERT_EQ(d[i].timestamp_ms, 0);
		ASSERT_EQ(d[i].delivery_count, 1);
	}
	inbox_result res[10] = {INBOX_RESULT_INIT};
	outcomes(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_OK(inbox_source_poll(src, d, 10, &n, 0, &eof));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(eof, 1);
	inbox_source_close(src);
}

TEST(batch_size_and_checkpoint)
{
	put("b.jsonl", "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n"
	               "{\"n\":5}\n");
	inbox_source *src;
	ASSERT_OK(open_src(&src, "b.jsonl", NULL, 0, 100));
	inbox_delivery d[2] = {INBOX_DELIVERY_INIT};
	inbox_result res[2] = {INBOX_RESULT_INIT};
	size_t n;
	int eof;
	ASSERT_OK(inbox_source_poll(src, d, 2, &n, 0, &eof));
	ASSERT_EQ(n, 2);
	ASSERT_TRUE(ds_eq(&d[1], "{\"n\":2}"));
	outcomes(res, n, INBOX_APPLIED);
	res[1].outcome = INBOX_DEAD_LETTERED; /* ackable too */
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("b.jsonl.test.consumer.checkpoint"), "16 2\n");
	ASSERT_OK(inbox_source_poll(src, d, 2, &n, 0, &eof));
	ASSERT_EQ(n, 2);
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":3}"));
	outcomes(res, n, INBOX_DUPLICATE);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("b.jsonl.test.consumer.checkpoint"), "32 4\n");
	inbox_source_close(src);

	/* Reopen: continues after the checkpoint, line numbers too. */
	ASSERT_OK(open_src(&src, "b.jsonl", NULL, 0, 100));
	ASSERT_OK(inbox_source_poll(src, d, 2, &n, 0, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":5}"));
	ASSERT_CONTAINS(d[0].position, "b.jsonl:5");
	outcomes(res, n, INBOX_STALE);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("b.jsonl.test.consumer.checkpoint"), "40 5\n");
	ASSERT_OK(inbox_source_poll(src, d, 2, &n, 0, &eof));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(eof, 1);
	inbox_source_close(src);

	/* from=beginning ignores the checkpoint. */
	ASSERT_OK(open_src(&src, "b.jsonl", "?from=beginning", 0, 100));
	ASSERT_OK(inbox_source_poll(src, d, 2, &n, 0, &eof));
	ASSERT_EQ(n, 2);
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":1}"));
	ASSERT_OK(inbox_source_settle(src, d, NULL, n));
	inbox_source_close(src);
	/* ... and a failed batch did not move it. */
	ASSERT_STREQ(ckpt("b.jsonl.test.consumer.checkpoint"), "40 5\n");
}

TEST(retry_in_the_middle)
{
	put("r.jsonl", "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n");
	inbox_source *src;
	ASSERT_EQ(open_src(&src, "r.jsonl", "?checkpoint=", 0, 100),
	          INBOX_ERR_URL);
	inbox_source_close(src);
	/* A retry delay that a loaded machine's pause between the settle
	 * and the "not yet" polls below does not outlast (at 150 ms it
	 * could: the retry was due again before the second poll). */
	ASSERT_OK(open_src(&src, "r.jsonl", NULL, 0, 1000));
	inbox_delivery d[3] = {INBOX_DELIVERY_INIT};
	inbox_result res[3] = {INBOX_RESULT_INIT};
	size_t n;
	int eof;
	ASSERT_OK(inbox_source_poll(src, d, 3, &n, 0, &eof));
	ASSERT_EQ(n, 3);
	outcomes(res, n, INBOX_APPLIED);
	res[1].outcome = INBOX_RETRY;
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("r.jsonl.test.consumer.checkpoint"), "8 1\n");

	/* Not before retry_delay_ms, and no eof while a retry is pending. */
	ASSERT_OK(inbox_source_poll(src, d, 3, &n, 0, &eof));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(eof, 0);
	ASSERT_OK(inbox_source_poll(src, d, 3, &n, 20, &eof));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(eof, 0);
	sleep_ms(1010);
	ASSERT_OK(inbox_source_poll(src, d, 3, &n, 0, &eof));
	ASSERT_EQ(n, 3);
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":2}"));
	ASSERT_EQ(d[0].delivery_count, 2);
	ASSERT_TRUE(ds_eq(&d[1], "{\"n\":3}"));
	ASSERT_EQ(d[1].delivery_count, 2); /* processed, comes again */
	ASSERT_TRUE(ds_eq(&d[2], "{\"n\":4}"));
	ASSERT_EQ(d[2].delivery_count, 1);

	/* IN_PROGRESS is not ackable either. */
	outcomes(res, n, INBOX_APPLIED);
	res[0].outcome = INBOX_IN_PROGRESS;
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("r.jsonl.test.consumer.checkpoint"), "8 1\n");
	/* A poll with a long timeout waits for the delay, not longer. */
	ASSERT_OK(inbox_source_poll(src, d, 3, &n, 5000, &eof));
	ASSERT_EQ(n, 3);
	ASSERT_EQ(d[0].delivery_count, 3);
	ASSERT_EQ(d[2].delivery_count, 2);
	outcomes(res, n, INBOX_DUPLICATE);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("r.jsonl.test.consumer.checkpoint"), "32 4\n");
	ASSERT_OK(inbox_source_poll(src, d, 3, &n, 0, &eof));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(eof, 1);
	inbox_source_close(src);
}

TEST(failed_batch_redelivered)
{
	put("f.jsonl", "{\"n\":1}\n{\"n\":2}\n");
	inbox_source *src;
	ASSERT_OK(open_src(&src, "f.jsonl", NULL, 0, 0));
	inbox_delivery d[5] = {INBOX_DELIVERY_INIT};
	inbox_result res[5] = {INBOX_RESULT_INIT};
	size_t n;
	int eof;
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 0, &eof));
	ASSERT_EQ(n, 2);
	/* poll before settle is a state error */
	size_t n2;
	ASSERT_EQ(inbox_source_poll(src, d, 5, &n2, 0, &eof), INBOX_ERR_STATE);
	ASSERT_OK(inbox_source_settle(src, d, NULL, n));
	ASSERT_STREQ(ckpt("f.jsonl.test.consumer.checkpoint"), "");
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 0, &eof));
	ASSERT_EQ(n, 2);
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":1}"));
	ASSERT_EQ(d[0].delivery_count, 2);
	ASSERT_EQ(d[1].delivery_count, 2);
	outcomes(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("f.jsonl.test.consumer.checkpoint"), "16 2\n");
	inbox_source_close(src);
}

TEST(settle_mismatch)
{
	put("m.jsonl", "{\"n\":1}\n{\"n\":2}\n");
	inbox_source *src;
	ASSERT_OK(open_src(&src, "m.jsonl", NULL, 0, 0));
	inbox_delivery d[5] = {INBOX_DELIVERY_INIT};
	inbox_result res[5] = {INBOX_RESULT_INIT};
	size_t n;
	int eof;
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 0, &eof));
	ASSERT_EQ(n, 2);
	outcomes(res, n, INBOX_APPLIED);
	/* settling fewer than were polled: nothing is acked */
	ASSERT_EQ(inbox_source_settle(src, d, res, 1), INBOX_ERR_INVALID);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "does not match");
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 0, &eof));
	ASSERT_EQ(n, 2);
	ASSERT_EQ(d[0].delivery_count, 2);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	/* settle without a poll */
	ASSERT_EQ(inbox_source_settle(src, d, res, 1), INBOX_ERR_STATE);
	ASSERT_OK(inbox_source_settle(src, d, res, 0));
	inbox_source_close(src);
}

TEST(follow)
{
	put("w.jsonl", "{\"n\":1}\n");
	inbox_source *src;
	ASSERT_OK(open_src(&src, "w.jsonl", "?follow=1", 0, 0));
	inbox_delivery d[5] = {INBOX_DELIVERY_INIT};
	inbox_result res[5] = {INBOX_RESULT_INIT};
	size_t n;
	int eof;
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 0, &eof));
	ASSERT_EQ(n, 1);
	outcomes(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 50, &eof));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(eof, 0); /* following: never eof */
	append("w.jsonl", "{\"n\":2}\n");
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 50, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":2}"));
	ASSERT_CONTAINS(d[0].position, "w.jsonl:2");
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	/* A line still being written is not delivered half. */
	append("w.jsonl", "{\"n\":");
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 30, &eof));
	ASSERT_EQ(n, 0);
	append("w.jsonl", "3}\n");
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 30, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":3}"));
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("w.jsonl.test.consumer.checkpoint"), "24 3\n");
	inbox_source_close(src);
}

TEST(follow_wakes_up_in_time)
{
	/* A poll with a long timeout returns soon after a line arrives. */
	put("w2.jsonl", "");
	inbox_source *src;
	ASSERT_OK(open_src(&src, "w2.jsonl", "?follow", 0, 0));
	inbox_delivery d[5] = {INBOX_DELIVERY_INIT};
	size_t n;
	int eof;
	pid_t pid = fork();
	if (pid == 0) {
		sleep_ms(100);
		append("w2.jsonl", "{\"late\":true}\n");
		_exit(0);
	}
	time_t t0 = time(NULL);
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 5000, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(time(NULL) - t0 < 3);
	ASSERT_TRUE(ds_eq(&d[0], "{\"late\":true}"));
	ASSERT_OK(inbox_source_settle(src, d, NULL, n));
	inbox_source_close(src);
	int status;
	waitpid(pid, &status, 0);
}

TEST(follow_truncated_and_rotated)
{
	inbox_source *src;
	inbox_delivery d[5] = {INBOX_DELIVERY_INIT};
	inbox_result res[5] = {INBOX_RESULT_INIT};
	size_t n;
	int eof;
	/* truncated in place (copytruncate): back to the first line */
	put("t2.jsonl", "{\"a\":1}\n{\"a\":2}\n");
	ASSERT_OK(open_src(&src, "t2.jsonl", "?follow=1", 0, 0));
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 0, &eof));
	ASSERT_EQ(n, 2);
	outcomes(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	put("t2.jsonl", "{\"c\":1}\n");
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 100, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(ds_eq(&d[0], "{\"c\":1}"));
	ASSERT_CONTAINS(d[0].position, "t2.jsonl:1");
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("t2.jsonl.test.consumer.checkpoint"), "8 1\n");
	inbox_source_close(src);

	/* renamed away and recreated: the old file is finished first */
	put("r1.jsonl", "{\"a\":1}\n");
	ASSERT_OK(open_src(&src, "r1.jsonl", "?follow=1", 0, 0));
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 0, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	char a[512], b[512];
	path_of(a, sizeof(a), "r1.jsonl");
	path_of(b, sizeof(b), "r1.jsonl.1");
	ASSERT_EQ(rename(a, b), 0);
	append("r1.jsonl.1", "{\"a\":2}"); /* late, unterminated */
	put("r1.jsonl", "{\"b\":1}\n");
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 100, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(ds_eq(&d[0], "{\"a\":2}"));
	ASSERT_CONTAINS(d[0].position, "r1.jsonl:2");
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_OK(inbox_source_poll(src, d, 5, &n, 100, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(ds_eq(&d[0], "{\"b\":1}"));
	ASSERT_CONTAINS(d[0].position, "r1.jsonl:1");
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("r1.jsonl.test.consumer.checkpoint"), "8 1\n");
	inbox_source_close(src);
}

TEST(over_long_lines)
{
	/* max_payload 16: a 40-byte line is delivered as 17 bytes. */
	put("l.jsonl", "{\"pad\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n"
	               "{\"ok\":1}\n"
	               "{\"sixteen\":\"12\"}\r\n"  /* exactly 16 + CRLF */
	               "{\"seventeen\":\"1\"}\r\n" /* 17 + CRLF */
	               "{\"last\":1}");            /* no final newline */
	inbox_source *src;
	ASSERT_OK(open_src(&src, "l.jsonl", NULL, 16, 0));
	inbox_delivery d[10] = {INBOX_DELIVERY_INIT};
	size_t n;
	int eof;
	ASSERT_OK(inbox_source_poll(src, d, 10, &n, 0, &eof));
	ASSERT_EQ(n, 5);
	ASSERT_EQ(d[0].payload_len, 17);
	ASSERT_TRUE(memcmp(d[0].payload, "{\"pad\":\"xxxxxxxxx", 17) == 0);
	/* refused with the line's real length (the '\n' not counted) */
	ASSERT_STREQ(d[0].refused,
	             "payload of 39 bytes exceeds max_payload 16");
	ASSERT_TRUE(ds_eq(&d[1], "{\"ok\":1}"));
	ASSERT_TRUE(d[1].id == NULL);
	ASSERT_TRUE(ds_eq(&d[2], "{\"sixteen\":\"12\"}"));
	ASSERT_TRUE(d[2].id == NULL);
	ASSERT_EQ(d[3].payload_len, 17);
	/* nor the '\r' of a CRLF, as for the lines kept whole */
	ASSERT_STREQ(d[3].refused,
	             "payload of 17 bytes exceeds max_payload 16");
	ASSERT_TRUE(ds_eq(&d[4], "{\"last\":1}"));
	ASSERT_TRUE(d[4].id == NULL);
	inbox_result res[10] = {INBOX_RESULT_INIT};
	outcomes(res, n, INBOX_DEAD_LETTERED);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	char want[32];
	snprintf(want, sizeof(want), "%d 5\n", 40 + 9 + 18 + 19 + 10);
	ASSERT_STREQ(ckpt("l.jsonl.test.consumer.checkpoint"), want);
	inbox_source_close(src);
}

TEST(huge_line_not_held)
{
	/* A 20 MB line with max_payload 1 KiB: memory stays small. */
	char p[512];
	path_of(p, sizeof(p), "h.jsonl");
	FILE *f = fopen(p, "wb");
	ASSERT_TRUE(f != NULL);
	static char chunk[65536];
	memset(chunk, 'x', sizeof(chunk));
	fputs("{\"big\":\"", f);
	for (int i = 0; i < 320; i++)
		fwrite(chunk, 1, sizeof(chunk), f);
	fputs("\"}\n{\"after\":1}\n", f);
	fclose(f);
	inbox_source *src;
	ASSERT_OK(open_src(&src, "h.jsonl", NULL, 1024, 0));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	size_t n;
	int eof;
	ASSERT_OK(inbox_source_poll(src, d, 4, &n, 0, &eof));
	ASSERT_EQ(n, 2);
	ASSERT_EQ(d[0].payload_len, 1025);
	/* its real length, counted as it was skipped */
	ASSERT_STREQ(d[0].refused,
	             "payload of 20971530 bytes exceeds max_payload "
	             "1024");
	ASSERT_TRUE(ds_eq(&d[1], "{\"after\":1}"));
	ASSERT_CONTAINS(d[1].position, "h.jsonl:2");
	jl_source *s = (jl_source *)src;
	ASSERT_TRUE(s->arena.cap < 8192);
	ASSERT_OK(inbox_source_settle(src, d, NULL, n));
	inbox_source_close(src);
}

TEST(invalid_bytes_delivered_as_is)
{
	const char text[] = "\xff\xfe{\"bad\":\"\xc3\x28\"}\n{not json\n"
	                    "\x00\x01{}\n";
	write_file("u.jsonl", text, sizeof(text) - 1, "wb");
	inbox_source *src;
	ASSERT_OK(open_src(&src, "u.jsonl", NULL, 0, 0));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	size_t n;
	int eof;
	ASSERT_OK(inbox_source_poll(src, d, 4, &n, 0, &eof));
	ASSERT_EQ(n, 3);
	ASSERT_EQ(d[0].payload_len, 14);
	ASSERT_TRUE(memcmp(d[0].payload, text, 14) == 0);
	ASSERT_TRUE(ds_eq(&d[1], "{not json"));
	ASSERT_EQ(d[2].payload_len, 4); /* NUL bytes kept */
	ASSERT_TRUE(memcmp(d[2].payload, "\x00\x01{}", 4) == 0);
	ASSERT_OK(inbox_source_settle(src, d, NULL, n));
	inbox_source_close(src);
}

TEST(bom_dropped)
{
	put("bom.jsonl", "\xEF\xBB\xBF{\"n\":1}\n");
	inbox_source *src;
	ASSERT_OK(open_src(&src, "bom.jsonl", NULL, 0, 0));
	inbox_delivery d[2] = {INBOX_DELIVERY_INIT};
	size_t n;
	int eof;
	ASSERT_OK(inbox_source_poll(src, d, 2, &n, 0, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":1}"));
	ASSERT_OK(inbox_source_settle(src, d, NULL, n));
	inbox_source_close(src);
}

TEST(url_errors)
{
	inbox_source *src;
	put("x.jsonl", "{}\n");
	ASSERT_EQ(open_src(&src, "x.jsonl", "?follow=1&x=2", 0, 0),
	          INBOX_ERR_URL);
	ASSERT_STREQ(inbox_source_errmsg(src), "jsonl: unknown parameter 'x'");
	inbox_source_close(src);
	ASSERT_EQ(open_src(&src, "x.jsonl", "?follow=maybe", 0, 0),
	          INBOX_ERR_URL);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "follow");
	inbox_source_close(src);
	ASSERT_EQ(open_src(&src, "x.jsonl", "?from=end", 0, 0), INBOX_ERR_URL);
	inbox_source_close(src);

	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "c";
	ASSERT_EQ(inbox_source_open(&src, "jsonl:", &o), INBOX_ERR_URL);
	inbox_source_close(src);
	ASSERT_EQ(inbox_source_open(&src, "jsonl:-?checkpoint=/tmp/x", &o),
	          INBOX_ERR_URL);
	inbox_source_close(src);

	/* the checkpoint must not be the input */
	char q[600];
	snprintf(q, sizeof(q), "?checkpoint=%s/x.jsonl", tmpdir);
	ASSERT_EQ(open_src(&src, "x.jsonl", q, 0, 0), INBOX_ERR_URL);
	inbox_source_close(src);
}

TEST(io_errors)
{
	inbox_source *src;
	ASSERT_EQ(open_src(&src, "missing.jsonl", NULL, 0, 0), INBOX_ERR_IO);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "missing.jsonl");
	ASSERT_CONTAINS(inbox_source_errmsg(src), strerror(ENOENT));
	inbox_source_close(src);

	put("bad.jsonl", "{}\n");
	put("bad.jsonl.test.consumer.checkpoint", "12 garbage\n");
	ASSERT_EQ(open_src(&src, "bad.jsonl", NULL, 0, 0), INBOX_ERR_IO);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "malformed");
	inbox_source_close(src);
	/* from=beginning gets past it (and replaces it at the next settle) */
	ASSERT_OK(open_src(&src, "bad.jsonl", "?from=beginning", 0, 0));
	inbox_delivery d[2] = {INBOX_DELIVERY_INIT};
	inbox_result res[2] = {INBOX_RESULT_INIT};
	size_t n;
	ASSERT_OK(inbox_source_poll(src, d, 2, &n, 0, NULL));
	ASSERT_EQ(n, 1);
	outcomes(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("bad.jsonl.test.consumer.checkpoint"), "3 1\n");
	inbox_source_close(src);

	char q[600];
	snprintf(q, sizeof(q), "?checkpoint=%s/nodir/ck", tmpdir);
	ASSERT_EQ(open_src(&src, "bad.jsonl", q, 0, 0), INBOX_ERR_IO);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "nodir");
	inbox_source_close(src);
}

TEST(checkpoint_write_failure)
{
	/* FILE.tmp is a directory: the checkpoint cannot be written. The
	 * batch committed anyway, so it is not redelivered; the next settle
	 * that can write records the newest position. */
	put("cw.jsonl", "{\"n\":1}\n{\"n\":2}\n");
	char tmp[512];
	path_of(tmp, sizeof(tmp), "cw.jsonl.test.consumer.checkpoint.tmp");
	ASSERT_EQ(mkdir(tmp, 0700), 0);
	inbox_source *src;
	ASSERT_OK(open_src(&src, "cw.jsonl", NULL, 0, 0));
	inbox_delivery d[1] = {INBOX_DELIVERY_INIT};
	inbox_result res[1] = {INBOX_RESULT_INIT};
	size_t n;
	ASSERT_OK(inbox_source_poll(src, d, 1, &n, 0, NULL));
	outcomes(res, n, INBOX_APPLIED);
	ASSERT_EQ(inbox_source_settle(src, d, res, n), INBOX_ERR_IO);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "checkpoint");
	ASSERT_EQ(rmdir(tmp), 0);
	ASSERT_OK(inbox_source_poll(src, d, 1, &n, 0, NULL));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":2}"));
	ASSERT_EQ(d[0].delivery_count, 1);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("cw.jsonl.test.consumer.checkpoint"), "16 2\n");
	inbox_source_close(src);
}

/* Settle n lines of src as applied, expecting n. */
static void settle_n(inbox_source *src, size_t want)
{
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	inbox_result res[8];
	size_t n = 0;
	ASSERT_OK(inbox_source_poll(src, d, want, &n, 0, NULL));
	ASSERT_EQ(n, want);
	outcomes(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
}

/* Overwrite len bytes of a file at off with x's. */
static void scribble(const char *name, off_t off, size_t len)
{
	char p[512], junk[64];
	path_of(p, sizeof(p), name);
	memset(junk, 'x', sizeof(junk));
	int fd = open(p, O_WRONLY);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(pwrite(fd, junk, len, off), (ssize_t)len);
	close(fd);
}

TEST(checkpoint_slots_survive_a_torn_write)
{
	/* Two slots written in turn, in place: a write torn by a crash
	 * spoils one, and the reader resumes from the other (the lines after
	 * it come again, and the inbox drops them as duplicates). */
	put("s.jsonl", "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n"
	               "{\"n\":5}\n{\"n\":6}\n");
	const char *ck = "s.jsonl.test.consumer.checkpoint";
	inbox_source *src = NULL;
	ASSERT_OK(open_src(&src, "s.jsonl", "?checkpoint_sync=0", 0, 0));
	settle_n(src, 1);
	ASSERT_EQ((long)strlen(slurp(ck)), 512L); /* made with slot 0 */
	settle_n(src, 1);
	ASSERT_EQ((long)strlen(slurp(ck)), 1024L); /* slot 1 */
	ASSERT_STREQ(ckpt(ck), "16 2\n");
	settle_n(src, 1); /* slot 0 again: seq 3 */
	ASSERT_STREQ(ckpt(ck), "24 3\n");
	ASSERT_TRUE(
	    strncmp(slurp(ck), "inbox-jsonl-checkpoint 2 3 24 3 ", 32) == 0);
	inbox_source_close(src);

	/* slot 0 (the newest, line 3) torn in its middle: resume at line 2 */
	scribble(ck, 40, 8);
	ASSERT_OK(open_src(&src, "s.jsonl", NULL, 0, 0));
	inbox_delivery d[8] = {INBOX_DELIVERY_INIT};
	size_t n = 0;
	ASSERT_OK(inbox_source_poll(src, d, 1, &n, 0, NULL));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":3}"));
	inbox_result res[8];
	outcomes(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(src, d, res, n)); /* made anew: seq 3 */
	settle_n(src, 1);                               /* slot 1: seq 4 */
	ASSERT_STREQ(ckpt(ck), "32 4\n");
	inbox_source_close(src);

	/* a digit changed keeps the form but not the hash: slot 1's "32"
	 * (line 4's end) made "08" (line 1's end) is not taken; slot 0 is */
	const char *b = slurp(ck);
	ASSERT_EQ((long)strlen(b), 1024L);
	ASSERT_TRUE(strncmp(b + 512, "inbox-jsonl-checkpoint 2 4 32 4 ", 32) ==
	            0);
	char p[512];
	path_of(p, sizeof(p), ck);
	int fd = open(p, O_WRONLY);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(pwrite(fd, "08", 2, 512 + 27), 2);
	close(fd);
	ASSERT_OK(open_src(&src, "s.jsonl", NULL, 0, 0));
	ASSERT_OK(inbox_source_poll(src, d, 8, &n, 0, NULL));
	ASSERT_EQ(n, 3); /* from slot 0 (line 3), not from line 1 */
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":4}"));
	inbox_source_settle(src, d, NULL, n);
	inbox_source_close(src);

	/* both spoiled: refused, naming the way out */
	scribble(ck, 40, 8);
	scribble(ck, 512 + 40, 8);
	ASSERT_EQ(open_src(&src, "s.jsonl", NULL, 0, 0), INBOX_ERR_IO);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "malformed");
	ASSERT_CONTAINS(inbox_source_errmsg(src), "from=beginning");
	inbox_source_close(src);
}

TEST(checkpoint_written_before_the_sync)
{
	/* With a long checkpoint_sync the position is written at every
	 * settle all the same (only its fdatasync waits): a process killed
	 * without closing (here _exit) leaves its last position. A format-1
	 * checkpoint is read and replaced by a format-2 one. */
	put("w2.jsonl", "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n");
	const char *ck = "w2.jsonl.test.consumer.checkpoint";
	put(ck, "8 1\n");
	pid_t pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		inbox_source *src = NULL;
		if (open_src(&src, "w2.jsonl", "?checkpoint_sync=1h", 0, 0) < 0)
			_exit(2);
		inbox_delivery d[1] = {INBOX_DELIVERY_INIT};
		inbox_result res[1];
		for (int i = 0; i < 2; i++) {
			size_t n = 0;
			if (inbox_source_poll(src, d, 1, &n, 0, NULL) < 0 ||
			    n != 1)
				_exit(3);
			res[0] = (inbox_result){.version = INBOX_RESULT_VERSION,
			                        .outcome = INBOX_APPLIED};
			if (inbox_source_settle(src, d, res, 1) < 0)
				_exit(4);
		}
		_exit(0); /* no close: no final sync */
	}
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
	ASSERT_STREQ(ckpt(ck), "24 3\n");
	ASSERT_TRUE(strncmp(slurp(ck), "inbox-jsonl-checkpoint 2 ", 25) == 0);

	/* the parameter's values */
	inbox_source *src = NULL;
	ASSERT_EQ(open_src(&src, "w2.jsonl", "?checkpoint_sync=soon", 0, 0),
	          INBOX_ERR_URL);
	ASSERT_CONTAINS(inbox_source_errmsg(src), "checkpoint_sync");
	inbox_source_close(src);
	ASSERT_OK(open_src(&src, "w2.jsonl", "?checkpoint_sync=250ms", 0, 0));
	inbox_source_close(src);
}

TEST(checkpoint_names_the_file)
{
	/* The checkpoint carries the input's device and inode: a file
	 * replaced while the consumer was stopped is read from its start,
	 * even where the old offset happens to fall on a line boundary. */
	put("id.jsonl", "{\"a\":1}\n{\"a\":2}\n");
	inbox_source *src = NULL;
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	size_t n = 0;
	int eof = 0;
	ASSERT_OK(open_src(&src, "id.jsonl", "", 0, 100));
	ASSERT_OK(inbox_source_poll(src, d, 1, &n, 0, &eof));
	ASSERT_EQ(n, 1);
	inbox_result res[1] = {INBOX_RESULT_INIT};
	outcomes(res, 1, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(src, d, res, 1));
	inbox_source_close(src);
	struct stat st;
	char p[512];
	path_of(p, sizeof(p), "id.jsonl");
	ASSERT_EQ(stat(p, &st), 0);
	char want[96];
	snprintf(want, sizeof(want), "8 1 %llu %llu\n",
	         (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	ASSERT_STREQ(ckpt_full("id.jsonl.test.consumer.checkpoint"), want);
	/* replaced by rename: same layout, other content, other inode */
	put("id2.jsonl", "{\"b\":1}\n{\"b\":2}\n");
	char p2[512];
	path_of(p2, sizeof(p2), "id2.jsonl");
	ASSERT_EQ(rename(p2, p), 0);
	ASSERT_OK(open_src(&src, "id.jsonl", "", 0, 100));
	ASSERT_OK(inbox_source_poll(src, d, 4, &n, 0, &eof));
	ASSERT_EQ(n, 2);
	ASSERT_TRUE(ds_eq(&d[0], "{\"b\":1}"));
	outcomes(res, 1, INBOX_APPLIED);
	inbox_source_settle(src, d, NULL, n);
	inbox_source_close(src);
}

TEST(checkpoint_options)
{
	put("k.jsonl", "{\"n\":1}\n{\"n\":2}\n");
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "billing/x y";
	char url[600];
	snprintf(url, sizeof(url), "jsonl:%s/k.jsonl", tmpdir);
	inbox_source *src;
	ASSERT_OK(inbox_source_open(&src, url, &o));
	inbox_delivery d[1] = {INBOX_DELIVERY_INIT};
	inbox_result res[1] = {INBOX_RESULT_INIT};
	size_t n;
	ASSERT_OK(inbox_source_poll(src, d, 1, &n, 0, NULL));
	ASSERT_EQ(n, 1);
	outcomes(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	inbox_source_close(src);
	ASSERT_STREQ(ckpt("k.jsonl.billing_x_y.checkpoint"), "8 1\n");

	/* explicit checkpoint=FILE: its own progress */
	snprintf(url, sizeof(url), "jsonl:%s/k.jsonl?checkpoint=%s/my.ck",
	         tmpdir, tmpdir);
	ASSERT_OK(inbox_source_open(&src, url, &o));
	ASSERT_OK(inbox_source_poll(src, d, 1, &n, 0, NULL));
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_STREQ(ckpt("my.ck"), "8 1\n");
	inbox_source_close(src);
}

TEST(truncated_file_restarts)
{
	put("t.jsonl", "{\"n\":1}\n{\"n\":2}\n");
	put("t.jsonl.test.consumer.checkpoint", "16 2\n");
	inbox_source *src;
	ASSERT_OK(open_src(&src, "t.jsonl", NULL, 0, 0));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	size_t n;
	int eof;
	ASSERT_OK(inbox_source_poll(src, d, 4, &n, 0, &eof));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(eof, 1);
	inbox_source_close(src);
	/* rotated: shorter than the checkpoint */
	put("t.jsonl", "{\"m\":1}\n");
	ASSERT_OK(open_src(&src, "t.jsonl", NULL, 0, 0));
	ASSERT_OK(inbox_source_poll(src, d, 4, &n, 0, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(ds_eq(&d[0], "{\"m\":1}"));
	ASSERT_CONTAINS(d[0].position, "t.jsonl:1");
	ASSERT_OK(inbox_source_settle(src, d, NULL, n));
	inbox_source_close(src);
	/* replaced: the checkpoint falls inside a line */
	put("t.jsonl", "{\"longer\":1}\n{\"n\":2}\n");
	put("t.jsonl.test.consumer.checkpoint", "8 1\n");
	ASSERT_OK(open_src(&src, "t.jsonl", NULL, 0, 0));
	ASSERT_OK(inbox_source_poll(src, d, 4, &n, 0, &eof));
	ASSERT_EQ(n, 2);
	ASSERT_TRUE(ds_eq(&d[0], "{\"longer\":1}"));
	ASSERT_OK(inbox_source_settle(src, d, NULL, n));
	inbox_source_close(src);
}

TEST(stdin_source)
{
	int fds[2];
	ASSERT_EQ(pipe(fds), 0);
	int saved = dup(0);
	ASSERT_TRUE(saved >= 0);
	ASSERT_EQ(dup2(fds[0], 0), 0);
	close(fds[0]);
	const char *text = "{\"n\":1}\n\n{\"n\":2}";
	ASSERT_EQ(write(fds[1], text, strlen(text)), (ssize_t)strlen(text));

	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "c";
	o.retry_delay_ms = 0;
	inbox_source *src;
	ASSERT_OK(inbox_source_open(&src, "jsonl:-", &o));
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	inbox_result res[4] = {INBOX_RESULT_INIT};
	size_t n;
	int eof;
	ASSERT_OK(inbox_source_poll(src, d, 4, &n, 20, &eof));
	ASSERT_EQ(n, 1); /* the second line is not finished yet */
	ASSERT_STREQ(d[0].position, "stdin:1");
	ASSERT_OK(inbox_source_settle(src, d, NULL, n)); /* failed batch */
	ASSERT_OK(inbox_source_poll(src, d, 4, &n, 20, &eof));
	ASSERT_EQ(n, 1); /* redelivered from memory: a pipe cannot seek */
	ASSERT_EQ(d[0].delivery_count, 2);
	outcomes(res, n, INBOX_APPLIED);
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_OK(inbox_source_poll(src, d, 4, &n, 20, &eof));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(eof, 0); /* the pipe is still open */
	close(fds[1]);
	ASSERT_OK(inbox_source_poll(src, d, 4, &n, 20, &eof));
	ASSERT_EQ(n, 1);
	ASSERT_TRUE(ds_eq(&d[0], "{\"n\":2}"));
	ASSERT_STREQ(d[0].position, "stdin:3");
	ASSERT_OK(inbox_source_settle(src, d, res, n));
	ASSERT_OK(inbox_source_poll(src, d, 4, &n, 20, &eof));
	ASSERT_EQ(n, 0);
	ASSERT_EQ(eof, 1);
	inbox_source_close(src);
	dup2(saved, 0);
	close(saved);
}

/* ------------------------------------------------------------------ */
/* End to end: jsonl -> inbox_run -> SQLite                            */
/* ------------------------------------------------------------------ */

typedef struct e2e_state {
	int calls;
	int retry_once_done;
	const char *retry_id; /* answer RETRY the first time for this id */
} e2e_state;

static int e2e_handler(inbox_txn *t, const inbox_msg *m, void *payload)
{
	e2e_state *st = payload;
	st->calls++;
	const char *id = inbox_msg_id(m);
	if (st->retry_id && strcmp(id, st->retry_id) == 0 &&
	    !st->retry_once_done) {
		st->retry_once_done = 1;
		inbox_txn_set_reason(t, "try again later");
		return INBOX_HANDLER_RETRY;
	}
	const char *params[1] = {id};
	if (inbox_txn_exec(t, "INSERT INTO effects (id) VALUES ($1)", 1, params,
	                   NULL) != INBOX_OK)
		return INBOX_HANDLER_RETRY;
	return INBOX_HANDLER_OK;
}

/* 250 lines: ids 0..199, 49 repeats of earlier lines, one malformed. */
static void write_e2e_file(const char *name)
{
	char p[512];
	path_of(p, sizeof(p), name);
	FILE *f = fopen(p, "wb");
	if (!f)
		abort();
	int repeats = 0;
	for (int i = 0; i < 200; i++) {
		fprintf(f, "{\"id\":\"m-%d\",\"amount\":%d}\n", i, i * 10);
		if (i % 4 == 3 && repeats < 49) {
			int j = i - 2;
			fprintf(f, "{\"id\":\"m-%d\",\"amount\":%d}\n", j,
			        j * 10);
			repeats++;
		}
		if (i == 120)
			fputs("{\"id\":\"broken\", \n", f);
	}
	while (repeats < 49) { /* not reached with 200 ids */
		fputs("{\"id\":\"m-0\",\"amount\":0}\n", f);
		repeats++;
	}
	fclose(f);
}

static int count_rows(const char *db, const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	int v = -1;
	if (sqlite3_open(db, &h) != SQLITE_OK)
		return -1;
	if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(h);
	return v;
}

static int make_effects_table(const char *db)
{
	sqlite3 *h;
	if (sqlite3_open(db, &h) != SQLITE_OK)
		return -1;
	int rc = sqlite3_exec(h,
	                      "CREATE TABLE IF NOT EXISTS effects "
	                      "(id TEXT PRIMARY KEY)",
	                      NULL, NULL, NULL);
	sqlite3_close(h);
	return rc == SQLITE_OK ? 0 : -1;
}

/* One run of the consumer over the file; stats of that run. */
static int e2e_run(const char *db, const char *file, e2e_state *state,
                   inbox_stats *stats)
{
	char url[600], err[256];
	inbox_store *st = NULL;
	inbox_consumer *c = NULL;
	inbox_source *src = NULL;
	snprintf(url, sizeof(url), "sqlite:%s", db);
	int rc = inbox_store_open(&st, url, NULL);
	if (rc < 0) {
		fprintf(stderr, "  store: %s\n",
		        st ? inbox_store_errmsg(st) : "?");
		goto out;
	}
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = "e2e.orders";
	co.handler = e2e_handler;
	co.handler_payload = state;
	rc = inbox_consumer_open(&c, st, &co, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "  consumer: %s\n", err);
		goto out;
	}
	inbox_source_options so = INBOX_SOURCE_OPTIONS_INIT;
	so.consumer = "e2e.orders";
	so.retry_delay_ms = 20;
	snprintf(url, sizeof(url), "jsonl:%s", file);
	rc = inbox_source_open(&src, url, &so);
	if (rc < 0) {
		fprintf(stderr, "  source: %s\n", inbox_source_errmsg(src));
		goto out;
	}
	inbox_runner_options ro = INBOX_RUNNER_OPTIONS_INIT;
	ro.batch_size = 64;
	ro.poll_timeout_ms = 50;
	rc = inbox_run(c, src, &ro, NULL);
	if (rc < 0)
		fprintf(stderr, "  run: %s / %s\n", inbox_consumer_errmsg(c),
		        inbox_source_errmsg(src));
	inbox_consumer_stats(c, stats);
out:
	inbox_source_close(src);
	inbox_consumer_close(c);
	inbox_store_close(st);
	return rc;
}

TEST(end_to_end_runner)
{
	char db[512], file[512];
	path_of(db, sizeof(db), "e2e.db");
	path_of(file, sizeof(file), "e2e.jsonl");
	write_e2e_file("e2e.jsonl");
	ASSERT_OK(make_effects_table(db));

	e2e_state state = {0, 0, "m-70"};
	inbox_stats s = INBOX_STATS_INIT;
	ASSERT_OK(e2e_run(db, file, &state, &s));
	ASSERT_EQ(s.applied, 200);
	ASSERT_EQ(s.dead_letters, 1);
	ASSERT_EQ(s.retries, 1);
	ASSERT_EQ(s.conflicts, 0);
	/* the 49 repeats, plus the lines after m-70 in its batch that were
	 * committed and came again after the retry */
	ASSERT_TRUE(s.duplicates >= 49);
	ASSERT_EQ(s.messages,
	          s.applied + s.duplicates + s.dead_letters + s.retries);
	ASSERT_EQ(state.calls, 201);
	ASSERT_EQ(count_rows(db, "SELECT count(*) FROM effects"), 200);

	char ck[600];
	snprintf(ck, sizeof(ck), "e2e.jsonl.e2e.orders.checkpoint");
	const char *text = ckpt(ck);
	struct stat stt;
	ASSERT_EQ(stat(file, &stt), 0);
	char want[64];
	snprintf(want, sizeof(want), "%lld 250\n", (long long)stt.st_size);
	ASSERT_STREQ(text, want);

	/* Second run: the checkpoint is at the end, nothing to do. */
	e2e_state again = {0, 0, NULL};
	ASSERT_OK(e2e_run(db, file, &again, &s));
	ASSERT_EQ(s.messages, 0);
	ASSERT_EQ(again.calls, 0);

	/* Lost checkpoint: everything comes again, all duplicates. */
	path_of(ck, sizeof(ck), "e2e.jsonl.e2e.orders.checkpoint");
	ASSERT_EQ(unlink(ck), 0);
	ASSERT_OK(e2e_run(db, file, &again, &s));
	ASSERT_EQ(s.messages, 250);
	ASSERT_EQ(s.applied, 0);
	ASSERT_EQ(again.calls, 0);
	ASSERT_EQ(s.duplicates + s.dead_letters, 250);
	ASSERT_EQ(count_rows(db, "SELECT count(*) FROM effects"), 200);
}

/* ------------------------------------------------------------------ */

static void remove_tmpdir(void)
{
	DIR *dir = opendir(tmpdir);
	if (!dir)
		return;
	struct dirent *e;
	char p[1024];
	while ((e = readdir(dir)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", tmpdir, e->d_name);
		unlink(p);
	}
	closedir(dir);
	rmdir(tmpdir);
}

int main(void)
{
	const char *base = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/inbox-jsonl-XXXXXX",
	         base && *base ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(lines_in_order);
	RUN(batch_size_and_checkpoint);
	RUN(retry_in_the_middle);
	RUN(failed_batch_redelivered);
	RUN(settle_mismatch);
	RUN(follow);
	RUN(follow_wakes_up_in_time);
	RUN(follow_truncated_and_rotated);
	RUN(over_long_lines);
	RUN(huge_line_not_held);
	RUN(invalid_bytes_delivered_as_is);
	RUN(bom_dropped);
	RUN(url_errors);
	RUN(io_errors);
	RUN(checkpoint_write_failure);
	RUN(checkpoint_slots_survive_a_torn_write);
	RUN(checkpoint_written_before_the_sync);
	RUN(checkpoint_names_the_file);
	RUN(checkpoint_options);
	RUN(truncated_file_restarts);
	RUN(stdin_source);
	RUN(end_to_end_runner);
	remove_tmpdir();
	return test_summary();
}
