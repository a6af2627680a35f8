/*
 * Redis Streams source: the vtable (open, close, poll, settle). The
 * behaviour is described in redis.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source/redis/redis.h"

/* A generated member with nothing pending leaves the group on close. */
static void leave_group(redis_source *rs)
{
	const char *argv[] = {"XPENDING", rs->stream, rs->group,   "-",
	                      "+",        "1",        rs->consumer};
	redisReply *r;
	if (inbox__redis_cmd(rs, "XPENDING", 7, argv, NULL, &r) < 0)
		return;
	int empty = r->type == REDIS_REPLY_ARRAY && r->elements == 0;
	freeReplyObject(r);
	if (!empty)
		return; /* others take them over after claim_idle */
	const char *del[] = {"XGROUP", "DELCONSUMER", rs->stream, rs->group,
	                     rs->consumer};
	if (inbox__redis_cmd(rs, "XGROUP DELCONSUMER", 5, del, NULL, &r) == 0)
		freeReplyObject(r);
}

static void rs_close(inbox_source *src)
{
	redis_source *rs = (redis_source *)src;
	if (!rs)
		return;
	if (rs->ctx && rs->consumer_generated && rs->stream && rs->group)
		leave_group(rs);
	inbox__redis_disconnect(rs);
	if (rs->reply)
		freeReplyObject(rs->reply);
	for (size_t i = 0; i < rs->capslots; i++)
		inbox__buf_free(&rs->slots[i].text);
	free(rs->slots);
	free(rs->tombs);
	inbox__buf_free(&rs->argbuf);
	inbox__redis_url_clear(rs);
	free(rs);
}

/* The check slot, and open's first half: the handle, its URL parsed. */
static int rs_check(inbox_source **out, const char *url,
                    const inbox_source_options *opts)
{
	redis_source *rs = calloc(1, sizeof(*rs));
	if (!rs)
		return INBOX_ERR_NOMEM;
	*out = &rs->base;
	rs->db = -1;
	rs->claim_idle_ms = 30000;
	rs->timeout_ms = 5000;
	rs->max_payload = opts->max_payload;
	rs->retry_delay_ms =
	    opts->retry_delay_ms > 0 ? opts->retry_delay_ms : 0;
	snprintf(rs->autoclaim_cursor, sizeof(rs->autoclaim_cursor), "0-0");
	return inbox__redis_parse_url(rs, url, opts->consumer);
}

static int rs_open(inbox_source **out, const char *url,
                   const inbox_source_options *opts)
{
	int rc = rs_check(out, url, opts);
	if (rc < 0)
		return rc;
	redis_source *rs = (redis_source *)*out;
	rc = inbox__redis_connect(rs);
	if (rc < 0)
		return rc;
	/* A fixed consumer name may have entries from an earlier run. */
	rs->history = 1;
	snprintf(rs->history_from, sizeof(rs->history_from), "0");
	return INBOX_OK;
}

/* One XACK STREAM GROUP ID... for the ackable slots still pending. */
static int ack(redis_source *rs, const inbox_result *res)
{
	size_t k = 0;
	inbox__buf *b = &rs->argbuf;
	inbox__buf_reset(b);
	if (inbox__buf_reserve(b, (rs->nbatch + 3) * sizeof(char *)) < 0)
		return INBOX_ERR_NOMEM;
	const char **argv = (const char **)(void *)b->data;
	argv[k++] = "XACK";
	argv[k++] = rs->stream;
	argv[k++] = rs->group;
	for (size_t i = 0; i < rs->nbatch; i++) {
		const rs_slot *s = &rs->slots[i];
		if (res && inbox_outcome_ackable(res[i].outcome) && s->from_pel)
			argv[k++] = s->entry_id;
	}
	if (k == 3)
		return INBOX_OK;
	redisReply *r;
	int rc = inbox__redis_cmd(rs, "XACK", (int)k, argv, NULL, &r);
	if (rc == INBOX_OK)
		freeReplyObject(r);
	return rc;
}

/* The batch is rs->slots[0..nbatch) (the framework checked it). */
static int rs_settle(inbox_source *src, const inbox_result *res, size_t n)
{
	redis_source *rs = (redis_source *)src;
	int rc = INBOX_OK;
	(void)n; /* == rs->nbatch */
	for (size_t i = 0; i < rs->nbatch; i++) {
		const rs_slot *s = &rs->slots[i];
		if (res && inbox_outcome_ackable(res[i].outcome))
			continue;
		/* Redelivered by the next retry pass. */
		if (!rs->retry_pending) {
			rs->retry_pending = 1;
			rs->retry_at =
			    inbox__src_mono_ms() + rs->retry_delay_ms;
		}
		if (s->deleted && !s->from_pel &&
		    inbox__redis_push_tomb(rs, s->entry_id, 0) < 0 &&
		    rc == INBOX_OK) {
			inbox__source_seterr(src, "redis: out of memory "
			                          "keeping a tombstone");
			rc = INBOX_ERR_NOMEM;
		}
	}
	int a = ack(rs, res);
	return rc == INBOX_OK ? a : rc;
}

const inbox_source_vtable inbox__redis_source = {
    INBOX_SOURCE_VTABLE_VERSION,
    "redis",
    rs_open,
    rs_close,
    inbox__redis_poll,
    rs_settle,
    inbox__redis_lag,
    .client_version = inbox__redis_client_version,
    .alias = "rediss",
    .check = rs_check,
};
