/*
 * HTTP source: the replay cache — the answers of committed, applied
 * requests of one route, kept in memory so that the same request again
 * (api mode) is answered on the HTTP thread: no suspend, no batch, no
 * transaction. See http.h and docs/http.md ("The replay cache").
 *
 * What makes a hit the answer the store would give:
 *   - only an answer made after its commit, of a record whose outcome is
 *     applied (first processing applied or stale, or a replay of one): a
 *     completed record never changes (its status, result and
 *     fingerprint are final), only deleted;
 *   - only a request whose envelope (method, route, body as sent) and
 *     kept headers are the same bytes as the cached one's: whatever the
 *     consumer's fingerprint is computed from, it is the same. Anything
 *     else (another body: 422, a key in flight: 409) misses and takes
 *     the batch path;
 *   - an entry is kept at most ttl: a record deleted meanwhile (purge
 *     past retention, the store dropped) is still replayed for up to that
 *     long. Retention is a lower bound ("kept at least"), so that answer
 *     is one the store may give too.
 * FIFO eviction past max entries or CACHE_MAX_BYTES. Under hs->mu.
 *
 * The keys are the clients' own: the hash is seeded per cache (drawn at
 * init), and a bucket never holds more than CACHE_MAX_CHAIN entries (a
 * key past it is not kept: it takes the batch path, which answers the
 * same), so a lookup under the route's lock costs a bounded walk
 * whatever keys a client chose.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "source/common.h"
#include "source/http/http.h"

/* Entries over this (envelope + answer) are not kept. */
#define CACHE_MAX_ENTRY (64 * 1024)
/* What one route keeps at most (entries, their keys and answers): with
 * large answers, fewer than max entries (oldest out first). */
#define CACHE_MAX_BYTES ((size_t)32 * 1024 * 1024)
/* Entries one bucket holds at most. */
#define CACHE_MAX_CHAIN 8

struct http_cached {
	uint64_t hash;
	int64_t at_ms; /* monotonic, when it was put */
	char *key;
	char *env; /* the envelope, then the headers, then the answer */
	size_t env_len, hdr_len, resp_len, xhdr_len;
	size_t bytes; /* what it counts in the cache's bytes */
	unsigned status;
	char *type;
	struct http_cached *hnext; /* bucket */
	struct http_cached *fnext; /* insertion order (oldest first) */
};

uint64_t inbox__http_cache_hash(const http_cache *c, const char *k)
{
	uint64_t h = 1469598103934665603ULL ^ c->seed; /* FNV-1a */
	for (; *k; k++)
		h = (h ^ (unsigned char)*k) * 1099511628211ULL;
	/* the low bits pick the bucket: fold the high ones in */
	return h ^ (h >> 29);
}

static void entry_free(http_cached *e)
{
	if (!e)
		return;
	free(e->key);
	free(e->env);
	free(e->type);
	free(e);
}

/* Unlink e from its bucket (e is in the cache). */
static void unbucket(http_cache *c, http_cached *e)
{
	for (http_cached **p = &c->buckets[e->hash & (c->nbuckets - 1)]; *p;
	     p = &(*p)->hnext)
		if (*p == e) {
			*p = e->hnext;
			return;
		}
}

/* Drop the oldest entry. */
static void drop_oldest(http_cache *c)
{
	http_cached *e = c->fhead;
	if (!e)
		return;
	c->fhead = e->fnext;
	if (!c->fhead)
		c->ftail = NULL;
	unbucket(c, e);
	c->n--;
	c->bytes -= e->bytes;
	entry_free(e);
}

void inbox__http_cache_init(http_cache *c, size_t max, int64_t ttl_ms)
{
	memset(c, 0, sizeof(*c));
	c->max = max;
	c->ttl_ms = ttl_ms;
	if (getentropy(&c->seed, sizeof(c->seed)) != 0) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		c->seed = (uint64_t)(uintptr_t)c ^ (uint64_t)ts.tv_nsec ^
		          ((uint64_t)ts.tv_sec << 32);
	}
}

void inbox__http_cache_free(http_cache *c)
{
	while (c->fhead)
		drop_oldest(c);
	free(c->buckets);
	c->buckets = NULL;
	c->nbuckets = 0;
}

static int enabled(const http_cache *c)
{
	return c->max > 0 && c->ttl_ms > 0;
}

/* What has aged past ttl goes (oldest first: insertion order is age). */
static void expire(http_cache *c, int64_t now)
{
	while (c->fhead && now - c->fhead->at_ms > c->ttl_ms)
		drop_oldest(c);
}

/* The entry of key (hash h), or NULL; *chain (may be NULL): how many
 * entries its bucket holds. */
static http_cached *find(http_cache *c, const char *key, uint64_t h,
                         size_t *chain)
{
	size_t n = 0;
	http_cached *hit = NULL;
	if (c->nbuckets)
		for (http_cached *e = c->buckets[h & (c->nbuckets - 1)]; e;
		     e = e->hnext, n++)
			if (!hit && e->hash == h && strcmp(e->key, key) == 0) {
				hit = e;
				if (!chain)
					break;
			}
	if (chain)
		*chain = n;
	return hit;
}

static size_t hdr_len(const http_req *req)
{
	return req->headers ? strlen(req->headers) : 0;
}

int inbox__http_cache_get(http_cache *c, http_req *req)
{
	if (!enabled(c) || !req->key)
		return 0;
	expire(c, inbox__src_mono_ms());
	http_cached *e =
	    find(c, req->key, inbox__http_cache_hash(c, req->key), NULL);
	size_t hl = hdr_len(req);
	if (!e || e->env_len != req->env.len || e->hdr_len != hl ||
	    memcmp(e->env, req->env.data, e->env_len) != 0 ||
	    (hl && memcmp(e->env + e->env_len, req->headers, hl) != 0))
		return 0;
	const char *ans = e->env + e->env_len + e->hdr_len;
	char *type = e->type ? strdup(e->type) : NULL;
	inbox__buf_reset(&req->resp);
	inbox__buf_reset(&req->xhdr);
	if ((e->type && !type) ||
	    inbox__buf_append(&req->resp, ans, e->resp_len) < 0 ||
	    inbox__buf_append(&req->xhdr, ans + e->resp_len, e->xhdr_len) < 0) {
		free(type);
		inbox__buf_reset(&req->resp);
		inbox__buf_reset(&req->xhdr);
		return 0; /* out of memory: the batch path answers */
	}
	free(req->type_own);
	req->type_own = type;
	req->resp_type = type;
	req->status = e->status;
	req->replay = 1;
	req->outcome = "duplicate";
	c->hits++;
	return 1;
}

static int grow(http_cache *c)
{
	size_t nb = c->nbuckets ? c->nbuckets * 2 : 256;
	http_cached **b = calloc(nb, sizeof(*b));
	if (!b)
		return -1;
	for (http_cached *e = c->fhead; e; e = e->fnext) {
		e->hnext = b[e->hash & (nb - 1)];
		b[e->hash & (nb - 1)] = e;
	}
	free(c->buckets);
	c->buckets = b;
	c->nbuckets = nb;
	return 0;
}

void inbox__http_cache_put(http_cache *c, const http_req *req)
{
	if (!enabled(c) || !req->key || !req->cacheable)
		return;
	size_t hl = hdr_len(req);
	size_t total = req->env.len + hl + req->resp.len + req->xhdr.len;
	if (total > CACHE_MAX_ENTRY)
		return;
	int64_t now = inbox__src_mono_ms();
	expire(c, now);
	uint64_t h = inbox__http_cache_hash(c, req->key);
	size_t chain;
	http_cached *old = find(c, req->key, h, &chain);
	if (old) /* the same key again (another body missed it): keep it */
		return;
	if (chain >= CACHE_MAX_CHAIN)
		return;
	size_t klen = strlen(req->key) + 1;
	size_t tlen = req->resp_type ? strlen(req->resp_type) + 1 : 0;
	size_t bytes = sizeof(http_cached) + klen + tlen + total;
	if (c->n >= c->max)
		drop_oldest(c);
	while (c->fhead && c->bytes + bytes > CACHE_MAX_BYTES)
		drop_oldest(c);
	if (c->n + 1 > c->nbuckets && grow(c) < 0)
		return;
	http_cached *e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->key = strdup(req->key);
	e->env = malloc(total ? total : 1);
	e->type = req->resp_type ? strdup(req->resp_type) : NULL;
	if (!e->key || !e->env || (req->resp_type && !e->type)) {
		entry_free(e);
		return;
	}
	char *p = e->env;
	memcpy(p, req->env.data, req->env.len);
	p += req->env.len;
	if (hl)
		memcpy(p, req->headers, hl);
	p += hl;
	if (req->resp.len)
		memcpy(p, req->resp.data, req->resp.len);
	p += req->resp.len;
	if (req->xhdr.len)
		memcpy(p, req->xhdr.data, req->xhdr.len);
	e->env_len = req->env.len;
	e->hdr_len = hl;
	e->resp_len = req->resp.len;
	e->xhdr_len = req->xhdr.len;
	e->status = req->status;
	e->hash = h;
	e->at_ms = now;
	e->bytes = bytes;
	c->bytes += bytes;
	e->hnext = c->buckets[h & (c->nbuckets - 1)];
	c->buckets[h & (c->nbuckets - 1)] = e;
	if (c->ftail)
		c->ftail->fnext = e;
	else
		c->fhead = e;
	c->ftail = e;
	c->n++;
}
