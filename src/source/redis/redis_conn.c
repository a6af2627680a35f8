/* Redis source: the connection — connect, set up, run commands, notice a
 * lost connection. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "source/redis/redis.h"

static struct timeval ms_tv(int ms)
{
	struct timeval tv;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	return tv;
}

void inbox__redis_disconnect(redis_source *rs)
{
	if (rs->ctx)
		redisFree(rs->ctx);
	rs->ctx = NULL;
}

int inbox__redis_lost(redis_source *rs, const char *what)
{
	const char *why = "connection lost";
	if (rs->ctx && rs->ctx->err) {
		why = rs->ctx->errstr;
		if (rs->ctx->err == REDIS_ERR_IO &&
		    (strstr(why, "temporarily unavailable") ||
		     strstr(why, "would block")))
			why = "timed out";
	}
	inbox__source_seterr(&rs->base, "redis: %s on %s: %s", what, rs->label,
	                     why);
	inbox__redis_disconnect(rs);
	return INBOX_ERR_CONNECT;
}

int inbox__redis_sock_timeout(redis_source *rs, int ms)
{
	if (!rs->ctx)
		return INBOX_ERR_CONNECT;
	if (rs->sock_timeout_ms == ms)
		return INBOX_OK;
	if (redisSetTimeout(rs->ctx, ms_tv(ms)) != REDIS_OK) {
		inbox__source_seterr(&rs->base,
		                     "redis: cannot set the socket "
		                     "timeout on %s: %s",
		                     rs->label, strerror(errno));
		inbox__redis_disconnect(rs);
		return INBOX_ERR_CONNECT;
	}
	rs->sock_timeout_ms = ms;
	return INBOX_OK;
}

/* Run a command; error replies are returned as replies. */
static int raw_cmd(redis_source *rs, const char *what, int argc,
                   const char **argv, const size_t *argvlen, redisReply **out)
{
	*out = NULL;
	if (!rs->ctx) {
		inbox__source_seterr(&rs->base,
		                     "redis: %s: not connected to %s", what,
		                     rs->label);
		return INBOX_ERR_CONNECT;
	}
	redisReply *r = redisCommandArgv(rs->ctx, argc, argv, argvlen);
	if (!r)
		return inbox__redis_lost(rs, what);
	*out = r;
	return INBOX_OK;
}

static void error_reply(redis_source *rs, const char *what, const redisReply *r)
{
	inbox__source_seterr(&rs->base, "redis: %s on %s: %.*s", what,
	                     rs->label, (int)(r->len > 300 ? 300 : r->len),
	                     r->str ? r->str : "");
}

/* XGROUP CREATE STREAM GROUP START MKSTREAM; BUSYGROUP is success. */
static int create_group(redis_source *rs, const char *start)
{
	const char *argv[] = {"XGROUP",  "CREATE", rs->stream,
	                      rs->group, start,    "MKSTREAM"};
	redisReply *r;
	int rc = raw_cmd(rs, "XGROUP CREATE", 6, argv, NULL, &r);
	if (rc < 0)
		return rc;
	if (r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "BUSYGROUP", 9) != 0) {
		error_reply(rs, "XGROUP CREATE", r);
		rc = INBOX_ERR_SOURCE;
	}
	freeReplyObject(r);
	return rc;
}

int inbox__redis_cmd(redis_source *rs, const char *what, int argc,
                     const char **argv, const size_t *argvlen, redisReply **out)
{
	int rc = raw_cmd(rs, what, argc, argv, argvlen, out);
	if (rc < 0 || (*out)->type != REDIS_REPLY_ERROR)
		return rc;
	redisReply *r = *out;
	*out = NULL;
	int nogroup = r->str && strncmp(r->str, "NOGROUP", 7) == 0;
	char saved[sizeof(rs->base.errmsg)];
	error_reply(rs, what, r);
	freeReplyObject(r);
	if (nogroup) {
		/* The stream or the group was deleted: start over, from the
		 * first entry of what is (or will be) the stream now. */
		memcpy(saved, rs->base.errmsg, sizeof(saved));
		int g = create_group(rs, "0");
		memcpy(rs->base.errmsg, saved, sizeof(saved));
		if (g == INBOX_ERR_CONNECT)
			return g;
	}
	return INBOX_ERR_SOURCE;
}

/* A setup command whose error reply fails the connection. */
static int setup_cmd(redis_source *rs, const char *what, int argc,
                     const char **argv)
{
	redisReply *r;
	int rc = raw_cmd(rs, what, argc, argv, NULL, &r);
	if (rc < 0)
		return rc;
	if (r->type == REDIS_REPLY_ERROR) {
		error_reply(rs, what, r);
		rc = INBOX_ERR_CONNECT;
	}
	freeReplyObject(r);
	return rc;
}

static int setup(redis_source *rs)
{
	int rc = inbox__redis_sock_timeout(rs, rs->timeout_ms);
	if (rc < 0)
		return rc;
	redisEnableKeepAlive(rs->ctx);
	if (rs->password) {
		const char *argv[3];
		int argc = 0;
		argv[argc++] = "AUTH";
		if (rs->user)
			argv[argc++] = rs->user;
		argv[argc++] = rs->password;
		rc = setup_cmd(rs, "AUTH", argc, argv);
		if (rc < 0)
			return rc;
	}
	if (rs->db >= 0) {
		char db[16];
		snprintf(db, sizeof(db), "%d", rs->db);
		const char *argv[] = {"SELECT", db};
		rc = setup_cmd(rs, "SELECT", 2, argv);
		if (rc < 0)
			return rc;
	}
	rc = create_group(rs, rs->start);
	/* LOADING and the like: try the whole setup again later. */
	return rc == INBOX_ERR_SOURCE ? INBOX_ERR_CONNECT : rc;
}

int inbox__redis_connect(redis_source *rs)
{
	inbox__redis_disconnect(rs);
	redisContext *c =
	    redisConnectWithTimeout(rs->host, rs->port, ms_tv(rs->timeout_ms));
	if (!c) {
		inbox__source_seterr(&rs->base,
		                     "redis: out of memory "
		                     "connecting to %s",
		                     rs->label);
		return INBOX_ERR_NOMEM;
	}
	if (c->err) {
		inbox__source_seterr(&rs->base,
		                     "redis: cannot connect to %s: "
		                     "%s",
		                     rs->label, c->errstr);
		redisFree(c);
		return INBOX_ERR_CONNECT;
	}
	rs->ctx = c;
	rs->sock_timeout_ms = -1;
	int rc = setup(rs);
	if (rc < 0)
		inbox__redis_disconnect(rs);
	return rc;
}
