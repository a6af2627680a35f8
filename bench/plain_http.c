/*
 * plain_http — the reference for the outbox dispatcher: the calls the
 * dispatcher makes, made by a plain libcurl multi loop with no database.
 *
 *   plain_http URL N CONCURRENCY [--fresh]
 *
 * N POST requests to URL, CONCURRENCY in flight at once (a new one starts
 * as soon as one ends), each with what the dispatcher sends for an outbox
 * row: Content-Type: application/json, an Idempotency-Key (64 hex
 * characters, one per request), no "Expect: 100-continue", a JSON body
 * like the row's ({"amount":..,"currency":"EUR","orderId":"ord-.."}), the
 * same timeouts, no redirects. Idle connections are reused, as the
 * dispatcher does for idempotent providers; --fresh opens a new
 * connection per request and closes it after (what it does for providers
 * without idempotency).
 *
 * Prints "RESULT requests=N ok=M seconds=S rate=R" (R: requests per
 * second, 2xx answers only counted in M). Exit 1 if a request failed.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct call {
	CURL *easy;
	struct curl_slist *hdrs;
	char body[160];
} call;

static size_t drop(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Set c up for request i. */
static int setup(call *c, const char *url, long i, int fresh)
{
	char key[128];
	curl_easy_reset(c->easy);
	curl_slist_free_all(c->hdrs);
	c->hdrs = NULL;
	/* 64 hex characters, like an idempotency key. */
	snprintf(key, sizeof(key), "Idempotency-Key: %016lx%016lx%016lx%016lx",
	         i, 0xbe7cUL + i, 0xfeedUL * (unsigned long)i, 0x5eedUL);
	struct curl_slist *h = curl_slist_append(NULL, key);
	h = h ? curl_slist_append(h, "Content-Type: application/json") : NULL;
	h = h ? curl_slist_append(h, "Expect:") : NULL;
	if (!h)
		return -1;
	c->hdrs = h;
	snprintf(
	    c->body, sizeof(c->body),
	    "{\"amount\":%ld,\"currency\":\"EUR\",\"orderId\":\"ord-%ld\"}",
	    100 + (i * 7919) % 90000, i);
	CURL *e = c->easy;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "plain_http");
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, drop);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
	                 (curl_off_t)strlen(c->body));
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
	curl_easy_setopt(e, CURLOPT_PRIVATE, c);
	if (fresh) {
		curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
		curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr,
		        "usage: plain_http URL N CONCURRENCY [--fresh]\n");
		return 2;
	}
	const char *url = argv[1];
	long n = atol(argv[2]);
	int conc = atoi(argv[3]);
	int fresh = argc > 4 && strcmp(argv[4], "--fresh") == 0;
	if (n < 1 || conc < 1 || curl_global_init(CURL_GLOBAL_DEFAULT)) {
		fprintf(stderr, "plain_http: bad arguments\n");
		return 2;
	}
	CURLM *m = curl_multi_init();
	curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, conc < 64 ? 64L : 4L * conc);
	call *calls = calloc((size_t)conc, sizeof(*calls));
	call **idle = calloc((size_t)conc, sizeof(*idle));
	if (!m || !calls || !idle)
		return 2;
	int nidle = 0;
	for (int i = 0; i < conc; i++) {
		calls[i].easy = curl_easy_init();
		if (!calls[i].easy)
			return 2;
		idle[nidle++] = &calls[i];
	}
	long started = 0, ended = 0, ok = 0;
	double t0 = now_s();
	while (ended < n) {
		while (nidle > 0 && started < n) {
			call *c = idle[--nidle];
			if (setup(c, url, started, fresh) < 0 ||
			    curl_multi_add_handle(m, c->easy) != CURLM_OK)
				return 2;
			started++;
		}
		int running = 0, left = 0;
		curl_multi_perform(m, &running);
		CURLMsg *msg;
		while ((msg = curl_multi_info_read(m, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			call *c = NULL;
			long status = 0;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
			                  (char **)&c);
			curl_easy_getinfo(msg->easy_handle,
			                  CURLINFO_RESPONSE_CODE, &status);
			if (msg->data.result == CURLE_OK && status >= 200 &&
			    status < 300)
				ok++;
			curl_multi_remove_handle(m, msg->easy_handle);
			idle[nidle++] = c;
			ended++;
		}
		if (ended < n && (nidle == 0 || started == n))
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	double secs = now_s() - t0;
	printf("RESULT requests=%ld ok=%ld seconds=%.3f rate=%.0f\n", n, ok,
	       secs, (double)n / secs);
	for (int i = 0; i < conc; i++) {
		curl_slist_free_all(calls[i].hdrs);
		curl_easy_cleanup(calls[i].easy);
	}
	curl_multi_cleanup(m);
	free(calls);
	free(idle);
	curl_global_cleanup();
	return ok == n ? 0 : 1;
}
