/*
 * The http:// source's replay cache (http_cache.c, docs/http.md "The
 * replay cache"): a hit is only the same key with the same envelope and
 * kept headers, and gives the stored status, type and bytes; only a
 * committed applied answer is kept; what it keeps is bounded by entries
 * and by bytes (oldest out first), and by its ttl.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "source/http/http.h"
#include "test.h"

/* A request with key k, envelope env and an answer of n bytes of fill. */
static void req_make(http_req *r, const char *k, const char *env, size_t n,
                     char fill)
{
	memset(r, 0, sizeof(*r));
	r->key = strdup(k);
	inbox__buf_append(&r->env, env, strlen(env));
	char *a = malloc(n ? n : 1);
	memset(a, fill, n);
	inbox__buf_append(&r->resp, a, n);
	free(a);
	r->resp_type = "application/json";
	r->status = 201;
	r->cacheable = 1;
}

static void req_free(http_req *r)
{
	free(r->key);
	free(r->type_own);
	inbox__buf_free(&r->env);
	inbox__buf_free(&r->resp);
	inbox__buf_free(&r->xhdr);
}

/* Whether a request for key k with envelope env is a hit (1, with the
 * stored status, type and the replay mark; -1 a hit without them; 0 a
 * miss); *len its answer's length. */
static int hit(http_cache *c, const char *k, const char *env, size_t *len)
{
	http_req q;
	req_make(&q, k, env, 0, 0);
	q.status = 0;
	q.resp_type = NULL;
	int h = inbox__http_cache_get(c, &q);
	if (h) {
		*len = q.resp.len;
		if (q.status != 201 || !q.resp_type ||
		    strcmp(q.resp_type, "application/json") != 0 || !q.replay)
			h = -1;
	}
	req_free(&q);
	return h;
}

TEST(hit_only_for_the_same_envelope)
{
	http_cache c;
	inbox__http_cache_init(&c, 100, 60000);
	http_req r;
	req_make(&r, "k1", "{\"body\":1}", 10, 'a');
	inbox__http_cache_put(&c, &r);
	req_free(&r);
	req_make(&r, "k2", "{\"body\":2}", 10, 'b');
	r.cacheable = 0; /* not committed applied: never kept */
	inbox__http_cache_put(&c, &r);
	req_free(&r);
	size_t len = 0;
	ASSERT_EQ(1, hit(&c, "k1", "{\"body\":1}", &len));
	ASSERT_EQ(len, 10);
	ASSERT_EQ(0, hit(&c, "k1", "{\"body\":9}", &len));
	ASSERT_EQ(0, hit(&c, "k2", "{\"body\":2}", &len));
	ASSERT_EQ(c.hits, 1);
	inbox__http_cache_free(&c);
}

TEST(bounded_by_entries)
{
	http_cache c;
	inbox__http_cache_init(&c, 3, 60000);
	char k[16];
	for (int i = 0; i < 5; i++) {
		http_req r;
		snprintf(k, sizeof(k), "k%d", i);
		req_make(&r, k, "{}", 4, 'x');
		inbox__http_cache_put(&c, &r);
		req_free(&r);
	}
	size_t len;
	ASSERT_EQ(c.n, 3);
	ASSERT_EQ(0, hit(&c, "k0", "{}", &len));
	ASSERT_EQ(0, hit(&c, "k1", "{}", &len));
	ASSERT_EQ(1, hit(&c, "k2", "{}", &len));
	ASSERT_EQ(1, hit(&c, "k4", "{}", &len));
	inbox__http_cache_free(&c);
}

/* 1,000 answers of 60 KiB (60 MB) with room for 10,000 entries: what is
 * kept stays within 32 MiB, the newest are kept, the oldest went. */
TEST(bounded_by_bytes)
{
	http_cache c;
	inbox__http_cache_init(&c, 10000, 60000);
	char k[16];
	for (int i = 0; i < 1000; i++) {
		http_req r;
		snprintf(k, sizeof(k), "k%d", i);
		req_make(&r, k, "{}", 60 * 1024, 'y');
		inbox__http_cache_put(&c, &r);
		req_free(&r);
		ASSERT_TRUE(c.bytes <= (size_t)32 * 1024 * 1024);
	}
	ASSERT_TRUE(c.n > 400 && c.n < 1000);
	size_t len = 0;
	ASSERT_EQ(1, hit(&c, "k999", "{}", &len));
	ASSERT_EQ(len, 60 * 1024);
	ASSERT_EQ(0, hit(&c, "k0", "{}", &len));
	/* an answer over the per-entry bound is not kept at all */
	http_req r;
	req_make(&r, "big", "{}", 65 * 1024, 'z');
	inbox__http_cache_put(&c, &r);
	req_free(&r);
	ASSERT_EQ(0, hit(&c, "big", "{}", &len));
	inbox__http_cache_free(&c);
	ASSERT_EQ(c.nbuckets, 0);
}

TEST(bounded_by_ttl)
{
	http_cache c;
	inbox__http_cache_init(&c, 100, 50);
	http_req r;
	req_make(&r, "k", "{}", 4, 'x');
	inbox__http_cache_put(&c, &r);
	req_free(&r);
	size_t len;
	ASSERT_EQ(1, hit(&c, "k", "{}", &len));
	struct timespec ts = {0, 120 * 1000000L};
	nanosleep(&ts, NULL);
	ASSERT_EQ(0, hit(&c, "k", "{}", &len));
	ASSERT_EQ(c.n, 0);
	ASSERT_EQ(c.bytes, 0);
	inbox__http_cache_free(&c);
}

/* Keys a client chose to share one bucket: at most 8 of them are kept
 * (the others take the batch path), so a lookup's walk stays bounded;
 * a key of another bucket is still kept. Two caches draw two seeds. */
TEST(a_bucket_is_bounded)
{
	http_cache c, d;
	inbox__http_cache_init(&c, 1000, 60000);
	inbox__http_cache_init(&d, 1000, 60000);
	/* two caches, two seeds: a key's bucket in one says nothing of
	 * the other's */
	ASSERT_TRUE(inbox__http_cache_hash(&c, "key-0") !=
	            inbox__http_cache_hash(&d, "key-0"));
	inbox__http_cache_free(&d);
	char k[32], keys[12][32], other[32] = "";
	int n = 0;
	for (int i = 0; n < 12 || !other[0]; i++) {
		snprintf(k, sizeof(k), "key-%d", i);
		uint64_t b = inbox__http_cache_hash(&c, k) &
		             255; /* 256 buckets at first */
		if (b == 7 && n < 12)
			memcpy(keys[n++], k, sizeof(k));
		else if (b != 7 && !other[0])
			memcpy(other, k, sizeof(k));
	}
	for (int i = 0; i < 12; i++) {
		http_req r;
		req_make(&r, keys[i], "{}", 4, 'x');
		inbox__http_cache_put(&c, &r);
		req_free(&r);
	}
	ASSERT_EQ(c.nbuckets, 256);
	ASSERT_EQ(c.n, 8);
	size_t len;
	for (int i = 0; i < 12; i++)
		ASSERT_EQ(i < 8 ? 1 : 0, hit(&c, keys[i], "{}", &len));
	http_req r;
	req_make(&r, other, "{}", 4, 'x');
	inbox__http_cache_put(&c, &r);
	req_free(&r);
	ASSERT_EQ(1, hit(&c, other, "{}", &len));
	inbox__http_cache_free(&c);
}

int main(void)
{
	RUN(hit_only_for_the_same_envelope);
	RUN(bounded_by_entries);
	RUN(bounded_by_bytes);
	RUN(bounded_by_ttl);
	RUN(a_bucket_is_bounded);
	return test_summary();
}
