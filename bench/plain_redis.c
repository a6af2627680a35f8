/*
 * The plain Redis Streams loop (hiredis): XREADGROUP COUNT BATCH BLOCK, the
 * batch through libpq, one XACK with every id of the batch.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plain_sources.h"
#include "workload.h"

static redisContext *connect_url(const char *url)
{
	char host[256];
	int port;
	if (ps_host_port(url, host, sizeof(host), &port, NULL, NULL, 0) < 0) {
		fprintf(stderr, "plain_sources: bad Redis URL %s\n", url);
		return NULL;
	}
	redisContext *c = redisConnect(host, port);
	if (!c || c->err) {
		fprintf(stderr, "plain_sources: redis connect: %s\n",
		        c ? c->errstr : "no memory");
		return NULL;
	}
	return c;
}

int ps_redis_load(const char *url, const char *name, long n)
{
	redisContext *c = connect_url(url);
	if (!c)
		return -1;
	wl_msg m;
	long sent = 0, got = 0;
	int rc = 0;
	while (got < n && rc == 0) {
		/* 1000 XADDs in flight at most */
		for (; sent < n && sent - got < 1000; sent++) {
			wl_message(sent, &m);
			const char *argv[] = {"XADD", name, "*", "payload",
			                      m.json};
			size_t len[] = {4, strlen(name), 1, 7, (size_t)m.len};
			redisAppendCommandArgv(c, 5, argv, len);
		}
		void *r;
		if (redisGetReply(c, &r) != REDIS_OK ||
		    ((redisReply *)r)->type == REDIS_REPLY_ERROR) {
			fprintf(stderr, "plain_sources: XADD failed\n");
			rc = -1;
		}
		if (r)
			freeReplyObject(r);
		got++;
	}
	redisFree(c);
	return rc;
}

int ps_redis_run(const char *url, const char *name, const char *group,
                 ps_pg *pg, long n, int batch)
{
	redisContext *c = connect_url(url);
	if (!c)
		return -1;
	redisReply *r =
	    redisCommand(c, "XGROUP CREATE %s %s 0 MKSTREAM", name, group);
	if (!r || (r->type == REDIS_REPLY_ERROR &&
	           strncmp(r->str, "BUSYGROUP", 9) != 0)) {
		fprintf(stderr, "plain_sources: XGROUP CREATE: %s\n",
		        r ? r->str : c->errstr);
		return -1;
	}
	freeReplyObject(r);
	char count[24];
	snprintf(count, sizeof(count), "%d", batch);
	const char **ack = malloc(sizeof(*ack) * (size_t)(batch + 3));
	size_t *acklen = malloc(sizeof(*acklen) * (size_t)(batch + 3));
	if (!ack || !acklen)
		return -1;
	int rc = 0;
	while (ps_pg_messages(pg) < n && rc == 0) {
		const char *argv[] = {"XREADGROUP", "GROUP", group,   "plain",
		                      "COUNT",      count,   "BLOCK", "100",
		                      "STREAMS",    name,    ">"};
		r = redisCommandArgv(c, 11, argv, NULL);
		if (!r || r->type == REDIS_REPLY_ERROR) {
			fprintf(stderr, "plain_sources: XREADGROUP: %s\n",
			        r ? r->str : c->errstr);
			return -1;
		}
		if (r->type != REDIS_REPLY_ARRAY || r->elements < 1) {
			freeReplyObject(r); /* nothing new within the block */
			continue;
		}
		redisReply *entries = r->element[0]->element[1];
		int k = 3;
		ack[0] = "XACK";
		ack[1] = name;
		ack[2] = group;
		acklen[0] = 4;
		acklen[1] = strlen(name);
		acklen[2] = strlen(group);
		for (size_t i = 0; i < entries->elements; i++) {
			redisReply *e = entries->element[i];
			redisReply *f = e->element[1];
			for (size_t j = 0; j + 1 < f->elements; j += 2)
				if (strcmp(f->element[j]->str, "payload") ==
				        0 &&
				    ps_pg_add(pg, f->element[j + 1]->str,
				              f->element[j + 1]->len) < 0)
					rc = -1;
			ack[k] = e->element[0]->str;
			acklen[k++] = e->element[0]->len;
		}
		ps_pg_flush(pg);
		/* after the commit */
		redisReply *a = redisCommandArgv(c, k, ack, acklen);
		if (!a || a->type != REDIS_REPLY_INTEGER ||
		    a->integer != k - 3) {
			fprintf(stderr, "plain_sources: XACK failed\n");
			rc = -1;
		}
		if (a)
			freeReplyObject(a);
		freeReplyObject(r);
	}
	free(ack);
	free(acklen);
	redisFree(c);
	return rc;
}
