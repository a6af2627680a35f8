/* Redis source: poll — our own pending entries, then XAUTOCLAIM, then new
 * entries (see redis.h for the rules). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "source/redis/redis.h"

static int64_t autoclaim_interval(const redis_source *rs)
{
	int64_t iv = rs->claim_idle_ms / 2;
	return iv < 50 ? 50 : iv > 5000 ? 5000 : iv;
}

static void start_history(redis_source *rs)
{
	rs->history = 1;
	snprintf(rs->history_from, sizeof(rs->history_from), "0");
}

/* Connected, or INBOX_ERR_CONNECT after waiting for the backoff (bounded
 * by timeout_ms). */
static int ensure_connected(redis_source *rs, int timeout_ms)
{
	if (rs->ctx)
		return INBOX_OK;
	int64_t deadline =
	    inbox__src_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	if (!inbox__src_backoff_wait(&rs->reconnect, deadline))
		return INBOX_ERR_CONNECT; /* errmsg: the last failure */
	int rc = inbox__redis_connect(rs);
	if (rc < 0) {
		inbox__src_backoff_failed(&rs->reconnect, 2000);
		return rc;
	}
	inbox__src_backoff_ok(&rs->reconnect);
	/* Whatever was in flight is still pending under our name. */
	start_history(rs);
	rs->autoclaim_at = 0;
	snprintf(rs->autoclaim_cursor, sizeof(rs->autoclaim_cursor), "0-0");
	return INBOX_OK;
}

static int ensure_slots(redis_source *rs, size_t max)
{
	if (rs->capslots >= max)
		return INBOX_OK;
	rs_slot *s = realloc(rs->slots, max * sizeof(*s));
	if (!s)
		return INBOX_ERR_NOMEM;
	memset(s + rs->capslots, 0, (max - rs->capslots) * sizeof(*s));
	rs->slots = s;
	rs->capslots = max;
	return INBOX_OK;
}

/* The batch's entries point into r until the next poll. */
static void keep_reply(redis_source *rs, redisReply *r)
{
	if (rs->reply)
		freeReplyObject(rs->reply);
	rs->reply = r;
}

/* The entries array of an XREADGROUP reply for our one stream, or NULL. */
static const redisReply *stream_entries(const redisReply *r)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1)
		return NULL;
	const redisReply *st = r->element[0];
	if (!st || st->type != REDIS_REPLY_ARRAY || st->elements != 2)
		return NULL;
	const redisReply *e = st->element[1];
	return e && e->type == REDIS_REPLY_ARRAY && e->elements > 0 ? e : NULL;
}

/* Append the entries (at most the room left) to the batch. */
static int take_entries(redis_source *rs, const redisReply *entries, size_t max,
                        int need_count)
{
	for (size_t i = 0; i < entries->elements && rs->nbatch < max; i++) {
		rs_slot *slot = &rs->slots[rs->nbatch];
		int rc =
		    inbox__redis_slot_from_entry(rs, slot, entries->element[i]);
		if (rc < 0)
			return rc;
		slot->from_pel = 1;
		slot->need_count = need_count;
		rs->nbatch++;
	}
	return INBOX_OK;
}

/* Redis's delivery counter of each slot that needs it: one pipelined
 * XPENDING STREAM GROUP ID ID 1 per entry. 0 when no longer pending. */
static int fetch_counts(redis_source *rs)
{
	size_t sent = 0;
	for (size_t i = 0; i < rs->nbatch; i++) {
		rs_slot *s = &rs->slots[i];
		if (!s->need_count)
			continue;
		const char *argv[] = {"XPENDING",  rs->stream,  rs->group,
		                      s->entry_id, s->entry_id, "1"};
		if (redisAppendCommandArgv(rs->ctx, 6, argv, NULL) != REDIS_OK)
			return inbox__redis_lost(rs, "XPENDING");
		sent++;
	}
	for (size_t i = 0; i < rs->nbatch && sent > 0; i++) {
		rs_slot *s = &rs->slots[i];
		if (!s->need_count)
			continue;
		void *rv = NULL;
		if (redisGetReply(rs->ctx, &rv) != REDIS_OK || !rv)
			return inbox__redis_lost(rs, "XPENDING");
		redisReply *r = rv, *e;
		s->count = 0;
		if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
		    (e = r->element[0])->type == REDIS_REPLY_ARRAY &&
		    e->elements == 4 &&
		    e->element[3]->type == REDIS_REPLY_INTEGER &&
		    e->element[3]->integer > 0)
			s->count = e->element[3]->integer > INT32_MAX
			               ? INT32_MAX
			               : (int32_t)e->element[3]->integer;
		s->need_count = 0;
		freeReplyObject(r);
		sent--;
	}
	return INBOX_OK;
}

/* Step 1: a page of our own pending list. */
static int read_history(redis_source *rs, size_t max)
{
	char count[24];
	snprintf(count, sizeof(count), "%zu", max);
	const char *argv[] = {"XREADGROUP", "GROUP",    rs->group,
	                      rs->consumer, "COUNT",    count,
	                      "STREAMS",    rs->stream, rs->history_from};
	redisReply *r;
	int rc =
	    inbox__redis_cmd(rs, "XREADGROUP (pending)", 9, argv, NULL, &r);
	if (rc < 0)
		return rc;
	const redisReply *entries = stream_entries(r);
	if (!entries) {
		rs->history = 0; /* the pass is complete */
		freeReplyObject(r);
		return INBOX_OK;
	}
	keep_reply(rs, r);
	rc = take_entries(rs, entries, max, 1);
	if (rc < 0)
		return rc;
	/* The cursor: the id of the last entry of the page. */
	if (rs->nbatch > 0)
		memcpy(rs->history_from, rs->slots[rs->nbatch - 1].entry_id,
		       RS_ID_MAX);
	return fetch_counts(rs);
}

static int push_tomb(redis_source *rs, const char *id, size_t len, int due)
{
	if (len >= RS_ID_MAX)
		return INBOX_OK; /* not an id Redis makes */
	if (rs->ntombs == rs->captombs) {
		size_t cap = rs->captombs ? rs->captombs * 2 : 16;
		rs_tomb *t = realloc(rs->tombs, cap * sizeof(*t));
		if (!t)
			return INBOX_ERR_NOMEM;
		rs->tombs = t;
		rs->captombs = cap;
	}
	rs_tomb *t = &rs->tombs[rs->ntombs++];
	memcpy(t->entry_id, id, len);
	t->entry_id[len] = '\0';
	t->due = due;
	return INBOX_OK;
}

int inbox__redis_push_tomb(redis_source *rs, const char *id, int due)
{
	return push_tomb(rs, id, strlen(id), due);
}

/* Move the due tombstones (as many as fit) into the batch. */
static int take_tombs(redis_source *rs, size_t max)
{
	size_t j = 0;
	for (size_t i = 0; i < rs->ntombs; i++) {
		rs_tomb *t = &rs->tombs[i];
		if (t->due && rs->nbatch < max) {
			rs_slot *slot = &rs->slots[rs->nbatch];
			int rc = inbox__redis_slot_tombstone(
			    rs, slot, t->entry_id, strlen(t->entry_id));
			if (rc < 0)
				return rc;
			rs->nbatch++;
			continue;
		}
		rs->tombs[j++] = *t;
	}
	rs->ntombs = j;
	return INBOX_OK;
}

/* Step 2: XAUTOCLAIM entries idle longer than claim_idle. */
static int autoclaim(redis_source *rs, size_t max, int64_t now)
{
	char count[24], idle[24];
	snprintf(count, sizeof(count), "%zu", max);
	snprintf(idle, sizeof(idle), "%lld", (long long)rs->claim_idle_ms);
	const char *argv[] = {"XAUTOCLAIM", rs->stream, rs->group,
	                      rs->consumer, idle,       rs->autoclaim_cursor,
	                      "COUNT",      count};
	redisReply *r;
	/* On any failure, read new entries at the next poll all the same. */
	rs->autoclaim_at = now + autoclaim_interval(rs);
	int rc = inbox__redis_cmd(rs, "XAUTOCLAIM", 8, argv, NULL, &r);
	if (rc < 0)
		return rc;
	if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
	    (r->element[0]->type != REDIS_REPLY_STRING &&
	     r->element[0]->type != REDIS_REPLY_STATUS) ||
	    r->element[0]->len >= RS_ID_MAX ||
	    r->element[1]->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		inbox__source_seterr(&rs->base,
		                     "redis: unexpected XAUTOCLAIM "
		                     "reply on %s",
		                     rs->label);
		return INBOX_ERR_SOURCE;
	}
	const redisReply *cur = r->element[0];
	memcpy(rs->autoclaim_cursor, cur->str, cur->len);
	rs->autoclaim_cursor[cur->len] = '\0';
	if (strcmp(rs->autoclaim_cursor, "0-0") != 0)
		rs->autoclaim_at = now; /* scan on at the next poll */
	/* Redis 7: ids pending but deleted, already gone from the list. */
	if (r->elements >= 3 && r->element[2]->type == REDIS_REPLY_ARRAY) {
		const redisReply *del = r->element[2];
		for (size_t i = 0; i < del->elements; i++) {
			const redisReply *d = del->element[i];
			if (d->type != REDIS_REPLY_STRING &&
			    d->type != REDIS_REPLY_STATUS)
				continue;
			rc = push_tomb(rs, d->str, d->len, 1);
			if (rc < 0) {
				freeReplyObject(r);
				return rc;
			}
		}
	}
	if (r->element[1]->elements > 0) {
		keep_reply(rs, r);
		rc = take_entries(rs, r->element[1], max, 1);
		if (rc == INBOX_OK)
			rc = fetch_counts(rs);
	} else {
		freeReplyObject(r);
	}
	if (rc == INBOX_OK)
		rc = take_tombs(rs, max);
	return rc;
}

/* drain=1: has the group nothing pending at all? */
static int group_drained(redis_source *rs, int *drained)
{
	const char *argv[] = {"XPENDING", rs->stream, rs->group};
	redisReply *r;
	*drained = 0;
	int rc = inbox__redis_cmd(rs, "XPENDING", 3, argv, NULL, &r);
	if (rc < 0)
		return rc;
	if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
	    r->element[0]->type == REDIS_REPLY_INTEGER)
		*drained = r->element[0]->integer == 0;
	freeReplyObject(r);
	return INBOX_OK;
}

/* How long step 3 may block: up to timeout_ms, but not past a due retry
 * pass or XAUTOCLAIM. 0 = do not block. */
static int block_ms(const redis_source *rs, int timeout_ms, int64_t now)
{
	int64_t b = timeout_ms > 0 ? timeout_ms : 0;
	if (rs->retry_pending && rs->retry_at - now < b)
		b = rs->retry_at - now;
	if (rs->autoclaim_at - now < b)
		b = rs->autoclaim_at - now;
	return b > 0 ? (int)b : 0;
}

/* Step 3: new entries. */
static int read_new(redis_source *rs, size_t max, int block, int *eof)
{
	char count[24], bl[24];
	snprintf(count, sizeof(count), "%zu", max);
	snprintf(bl, sizeof(bl), "%d", block);
	const char *argv[12];
	int argc = 0;
	argv[argc++] = "XREADGROUP";
	argv[argc++] = "GROUP";
	argv[argc++] = rs->group;
	argv[argc++] = rs->consumer;
	argv[argc++] = "COUNT";
	argv[argc++] = count;
	if (block > 0) {
		argv[argc++] = "BLOCK";
		argv[argc++] = bl;
	}
	argv[argc++] = "STREAMS";
	argv[argc++] = rs->stream;
	argv[argc++] = ">";
	int rc = inbox__redis_sock_timeout(rs, block + rs->timeout_ms);
	redisReply *r;
	if (rc == INBOX_OK)
		rc = inbox__redis_cmd(rs, "XREADGROUP", argc, argv, NULL, &r);
	if (rc < 0)
		return rc;
	const redisReply *entries = stream_entries(r);
	if (entries) {
		keep_reply(rs, r);
		return take_entries(rs, entries, max, 0);
	}
	freeReplyObject(r);
	if (rs->drain && !rs->history && !rs->retry_pending && !rs->ntombs) {
		int drained;
		rc = group_drained(rs, &drained);
		if (rc == INBOX_OK && drained)
			*eof = 1;
	}
	return rc;
}

static void release_batch(redis_source *rs)
{
	if (rs->reply)
		freeReplyObject(rs->reply);
	rs->reply = NULL;
	rs->nbatch = 0;
}

static int fill_batch(redis_source *rs, size_t max, int timeout_ms, int *eof)
{
	int64_t now = inbox__src_mono_ms();
	if (rs->retry_pending && now >= rs->retry_at) {
		rs->retry_pending = 0;
		start_history(rs);
		for (size_t i = 0; i < rs->ntombs; i++)
			rs->tombs[i].due = 1;
	}
	int rc = take_tombs(rs, max);
	if (rc == INBOX_OK && rs->nbatch == 0 && rs->history)
		rc = read_history(rs, max);
	if (rc == INBOX_OK && rs->nbatch == 0 && now >= rs->autoclaim_at)
		rc = autoclaim(rs, max, now);
	if (rc == INBOX_OK && rs->nbatch == 0)
		rc = read_new(rs, max, block_ms(rs, timeout_ms, now), eof);
	return rc;
}

int inbox__redis_poll(inbox_source *src, inbox_delivery *out, size_t max,
                      size_t *n, int timeout_ms, int *eof)
{
	redis_source *rs = (redis_source *)src;
	release_batch(rs);
	int rc = ensure_slots(rs, max);
	if (rc == INBOX_OK)
		rc = ensure_connected(rs, timeout_ms);
	if (rc == INBOX_OK)
		rc = fill_batch(rs, max, timeout_ms, eof);
	if (rc < 0) {
		/* Entries read are pending in Redis and come back; tombstones
		 * taken out of the queue go back into it. */
		for (size_t i = 0; i < rs->nbatch; i++)
			if (rs->slots[i].deleted && !rs->slots[i].from_pel)
				push_tomb(rs, rs->slots[i].entry_id,
				          strlen(rs->slots[i].entry_id), 1);
		release_batch(rs);
		return rc;
	}
	for (size_t i = 0; i < rs->nbatch; i++)
		inbox__redis_slot_deliver(&rs->slots[i], &out[i]);
	*n = rs->nbatch;
	return INBOX_OK;
}

/* The group's field `name` in one XINFO GROUPS entry (a flat array of
 * names and values under RESP2), or NULL. */
static const redisReply *group_field(const redisReply *g, const char *name)
{
	if (g->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t i = 0; i + 1 < g->elements; i += 2)
		if (g->element[i]->type == REDIS_REPLY_STRING &&
		    strcmp(g->element[i]->str, name) == 0)
			return g->element[i + 1];
	return NULL;
}

/* XINFO GROUPS: the group's lag (entries not yet delivered to it, Redis
 * >= 7.0) plus its pending entries (delivered, not acked). The server
 * has no lag when it cannot tell (an older server; or it is nil after
 * some XDEL/XTRIM): then entries-added - entries-read when both are
 * there, else pending alone. */
int inbox__redis_lag(inbox_source *src, int64_t *messages, int64_t *bytes)
{
	redis_source *rs = (redis_source *)src;
	(void)bytes;
	const char *argv[] = {"XINFO", "GROUPS", rs->stream};
	const char *xargv[] = {"XINFO", "STREAM", rs->stream};
	redisReply *r = NULL, *x = NULL;
	int rc = inbox__redis_sock_timeout(rs, rs->timeout_ms);
	if (rc == INBOX_OK)
		rc = inbox__redis_cmd(rs, "XINFO GROUPS", 3, argv, NULL, &r);
	if (rc < 0)
		return rc;
	const redisReply *g = NULL;
	for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements;
	     i++) {
		const redisReply *n = group_field(r->element[i], "name");
		if (n && n->type == REDIS_REPLY_STRING &&
		    strcmp(n->str, rs->group) == 0)
			g = r->element[i];
	}
	const redisReply *pend = g ? group_field(g, "pending") : NULL;
	const redisReply *lag = g ? group_field(g, "lag") : NULL;
	const redisReply *read = g ? group_field(g, "entries-read") : NULL;
	if (!pend || pend->type != REDIS_REPLY_INTEGER) {
		freeReplyObject(r);
		return INBOX_ERR_SOURCE;
	}
	int64_t behind = -1;
	if (lag && lag->type == REDIS_REPLY_INTEGER) {
		behind = lag->integer;
	} else if (read && read->type == REDIS_REPLY_INTEGER &&
	           inbox__redis_cmd(rs, "XINFO STREAM", 3, xargv, NULL, &x) ==
	               INBOX_OK) {
		const redisReply *added = group_field(x, "entries-added");
		if (added && added->type == REDIS_REPLY_INTEGER &&
		    added->integer >= read->integer)
			behind = added->integer - read->integer;
	}
	*messages = pend->integer + (behind > 0 ? behind : 0);
	freeReplyObject(r);
	if (x)
		freeReplyObject(x);
	return INBOX_OK;
}
