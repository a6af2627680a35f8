/*
 * The http:// source: routes sharing one listener (docs/http.md, "Several
 * routes on one port"). Two sources on 127.0.0.1:0 get one real port;
 * requests are dispatched by path and method (404, 405 with Allow); a
 * closed route answers 503 with Retry-After while the other one goes on,
 * and is served again once reopened; the last close stops the listener
 * (the port refuses connections). No consumer polls here: only answers
 * given before anything is recorded are asked for.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <inbox/inbox.h>
#include <inbox/source.h>

#include "test.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char addr_a[64], addr_b[64];

static void on_log(inbox_log_level level, const char *consumer,
                   const char *event, const char *fields, void *payload)
{
	(void)level;
	(void)payload;
	const char *a = strstr(fields, "\"address\":\"");
	if (strcmp(event, "http_listening") != 0 || !a || !consumer)
		return;
	pthread_mutex_lock(&mu);
	sscanf(a + 11, "%63[^\"]", consumer[0] == 'a' ? addr_a : addr_b);
	pthread_mutex_unlock(&mu);
}

typedef struct answer {
	long status;
	char allow[64];
	char retry_after[16];
} answer;

static size_t on_header(char *p, size_t size, size_t n, void *payload)
{
	answer *a = payload;
	size_t k = size * n;
	if (k > 7 && strncasecmp(p, "Allow: ", 7) == 0)
		sscanf(p + 7, "%63[^\r\n]", a->allow);
	if (k > 13 && strncasecmp(p, "Retry-After: ", 13) == 0)
		sscanf(p + 13, "%15[^\r\n]", a->retry_after);
	return k;
}

static size_t on_body(char *p, size_t size, size_t n, void *payload)
{
	(void)p;
	(void)payload;
	return size * n;
}

/* METHOD http://ADDR/PATH with a small JSON body; status 0: no answer. */
static void call(const char *method, const char *addr, const char *path,
                 answer *a)
{
	char url[160];
	memset(a, 0, sizeof(*a));
	snprintf(url, sizeof(url), "http://%s%s", addr, path);
	CURL *h = curl_easy_init();
	struct curl_slist *hd = curl_slist_append(NULL, "Idempotency-Key: k-1");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{}");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
	curl_slist_free_all(hd);
	curl_easy_cleanup(h);
}

static int open_route(inbox_source **s, const char *name, const char *url)
{
	inbox_source_options so = INBOX_SOURCE_OPTIONS_INIT;
	so.consumer = name;
	int rc = inbox_source_open(s, url, &so);
	if (rc < 0)
		fprintf(stderr, "  %s: %s\n", name, inbox_source_errmsg(*s));
	return rc;
}

TEST(routes_share_a_listener_until_the_last_closes)
{
	inbox_source *a = NULL, *b = NULL, *c = NULL;
	answer r;
	char addr[64];
	ASSERT_EQ(open_route(&a, "a.api", "http://127.0.0.1:0/a?mode=api"),
	          INBOX_OK);
	ASSERT_EQ(open_route(&b, "b.api",
	                     "http://127.0.0.1:0/b?mode=api&retry_after=7s"),
	          INBOX_OK);
	pthread_mutex_lock(&mu);
	snprintf(addr, sizeof(addr), "%s", addr_a);
	int same = addr_a[0] && strcmp(addr_a, addr_b) == 0;
	pthread_mutex_unlock(&mu);
	ASSERT_TRUE(same);
	/* one METHOD PATH is one consumer's */
	ASSERT_TRUE(open_route(&c, "c.api", "http://127.0.0.1:0/a?mode=api") <
	            0);
	ASSERT_CONTAINS(inbox_source_errmsg(c), "consumer a.api's already");
	inbox_source_close(c);
	/* listener options must agree */
	c = NULL;
	ASSERT_TRUE(open_route(&c, "c.api",
	                       "http://127.0.0.1:0/c?mode=api&timeout=3s") < 0);
	ASSERT_CONTAINS(inbox_source_errmsg(c),
	                "consumers a.api and c.api share 127.0.0.1:0");
	inbox_source_close(c);
	call("POST", addr, "/nowhere", &r);
	ASSERT_EQ(r.status, 404);
	call("PUT", addr, "/a", &r);
	ASSERT_EQ(r.status, 405);
	ASSERT_STREQ(r.allow, "POST");
	call("PUT", addr, "/b", &r);
	ASSERT_EQ(r.status, 405);
	/* /b closes: 503 with its Retry-After; /a goes on */
	inbox_source_close(b);
	call("POST", addr, "/b", &r);
	ASSERT_EQ(r.status, 503);
	ASSERT_STREQ(r.retry_after, "7");
	call("PUT", addr, "/a", &r);
	ASSERT_EQ(r.status, 405);
	/* reopened: /b is served again, on the same port */
	ASSERT_EQ(open_route(&b, "b.api", "http://127.0.0.1:0/b?mode=api"),
	          INBOX_OK);
	call("PUT", addr, "/b", &r);
	ASSERT_EQ(r.status, 405);
	inbox_source_close(a);
	call("PUT", addr, "/b", &r);
	ASSERT_EQ(r.status, 405);
	/* the last close stops the listener */
	inbox_source_close(b);
	call("PUT", addr, "/b", &r);
	ASSERT_EQ(r.status, 0);
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_ALL);
	inbox_log_set(on_log, INBOX_LOG_INFO, NULL);
	RUN(routes_share_a_listener_until_the_last_closes);
	curl_global_cleanup();
	return test_summary();
}
