/* HTTP source: the registry of open sources and their counters' text. */
#include <inbox/http.h>

#include <string.h>

#include "source/http/http.h"

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static http_source *reg_head;

void inbox__http_registry_add(http_source *hs)
{
	pthread_mutex_lock(&reg_mu);
	hs->next_open = reg_head;
	reg_head = hs;
	pthread_mutex_unlock(&reg_mu);
}

void inbox__http_registry_remove(http_source *hs)
{
	pthread_mutex_lock(&reg_mu);
	for (http_source **p = &reg_head; *p; p = &(*p)->next_open)
		if (*p == hs) {
			*p = hs->next_open;
			break;
		}
	pthread_mutex_unlock(&reg_mu);
}

/* A label value, escaped as the text format wants (\\, \", \n). */
static int label(inbox__buf *b, const char *s)
{
	int rc = 0;
	for (; *s && rc == 0; s++) {
		if (*s == '\\' || *s == '"')
			rc = inbox__buf_putc(b, '\\');
		if (rc == 0)
			rc = *s == '\n' ? inbox__buf_puts(b, "\\n")
			                : inbox__buf_putc(b, *s);
	}
	return rc;
}

static int labels(inbox__buf *b, const http_source *hs)
{
	int rc = inbox__buf_puts(b, "{consumer=\"");
	rc |= label(b, hs->base.opts.consumer);
	rc |= inbox__buf_puts(b, "\",route=\"");
	rc |= label(b, hs->conf.path);
	rc |= inbox__buf_puts(b, "\"");
	return rc;
}

static int render_one(inbox__buf *b, http_source *hs, int family)
{
	http_counters c;
	pthread_mutex_lock(&hs->mu);
	c = hs->ctr;
	uint64_t hits = hs->cache.hits;
	pthread_mutex_unlock(&hs->mu);
	int rc = 0;
	if (family == 0) {
		for (int k = 0; k < 5; k++) {
			rc |= inbox__buf_puts(b, "inbox_http_requests_total");
			rc |= labels(b, hs);
			rc |= inbox__buf_printf(
			    b, ",class=\"%dxx\"} %llu\n", k + 1,
			    (unsigned long long)c.by_class[k]);
		}
		return rc;
	}
	static const char *const name[] = {
	    NULL, "inbox_http_bad_signatures_total", "inbox_http_replays_total",
	    "inbox_http_replay_cache_hits_total"};
	rc |= inbox__buf_puts(b, name[family]);
	rc |= labels(b, hs);
	rc |= inbox__buf_printf(b, "} %llu\n",
	                        (unsigned long long)(family == 1
	                                                 ? c.bad_signatures
	                                             : family == 2 ? c.replays
	                                                           : hits));
	return rc;
}

int inbox_http_metrics_render(char **out, size_t *len)
{
	static const char *const help[] = {
	    "# HELP inbox_http_requests_total HTTP requests answered, by "
	    "status class.\n# TYPE inbox_http_requests_total counter\n",
	    "# HELP inbox_http_bad_signatures_total Webhook requests refused "
	    "for their signature.\n"
	    "# TYPE inbox_http_bad_signatures_total counter\n",
	    "# HELP inbox_http_replays_total Stored answers replayed.\n"
	    "# TYPE inbox_http_replays_total counter\n",
	    "# HELP inbox_http_replay_cache_hits_total Replays answered from "
	    "the replay cache, without the store.\n"
	    "# TYPE inbox_http_replay_cache_hits_total counter\n"};
	if (!out || !len)
		return INBOX_ERR_INVALID;
	*out = NULL;
	*len = 0;
	inbox__buf b = {0};
	int rc = 0;
	pthread_mutex_lock(&reg_mu);
	for (int f = 0; f < 4 && reg_head; f++) {
		rc |= inbox__buf_puts(&b, help[f]);
		for (http_source *hs = reg_head; hs; hs = hs->next_open)
			rc |= render_one(&b, hs, f);
	}
	pthread_mutex_unlock(&reg_mu);
	rc |= inbox__buf_putc(&b, '\0');
	if (rc < 0) {
		inbox__buf_free(&b);
		return INBOX_ERR_NOMEM;
	}
	*out = b.data;
	*len = b.len - 1;
	return INBOX_OK;
}
