/*
 * Providers: what the dispatchers know about the places they call, one
 * entry per scheme://host:port, under one mutex per registry (a registry
 * may be shared by the dispatcher threads of a process).
 *
 *   calls in flight   counted over every dispatcher of the registry, so a
 *                     provider's `concurrency` caps them all together;
 *   rate limit        a token bucket: `rate` tokens a second, at most
 *                     `burst` saved up; a call takes one;
 *   Retry-After       a 429/503 asking for a pause holds every call to
 *                     the provider until then;
 *   circuit breaker   closed: calls go, consecutive failures counted;
 *                     `breaker_failures` of them in a row open it: no
 *                     call for the open time; then half-open: one trial
 *                     call; an answer closes it, a failure opens it again
 *                     for twice as long (at most breaker_max_open_ms).
 *                     Only the results of calls started in the current
 *                     state count (a generation number): a late answer to
 *                     a call made before the breaker opened decides
 *                     nothing.
 */
#include <inbox/outbox.h>

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "outbox/engine.h"

/* Longest name kept ("https://" + a 253-character host + ":65535"). */
#define NAME_MAX_LEN 300

/* ms as a whole number, rounded up (no libm). */
static int64_t ceil_ms(double ms)
{
	int64_t i = (int64_t)ms;
	return (double)i < ms ? i + 1 : i;
}

struct inbox__prov {
	struct inbox__prov *next;
	inbox_providers *r;
	char name[NAME_MAX_LEN];
	inbox_provider_options o;
	/* Under r->mu. */
	int in_flight;
	inbox_breaker_state breaker;
	int failures;       /* consecutive, while closed */
	double open_until;  /* ms, while open */
	int64_t open_ms;    /* the current open time */
	int trial;          /* the half-open trial is in flight */
	uint64_t gen;       /* bumped at every breaker change */
	double hold_until;  /* ms: Retry-After */
	double tokens;      /* rate limit bucket */
	double refilled_at; /* ms */
	uint64_t calls, fails, opens, trials, rejected, rate_limited,
	    retry_after;
	uint64_t call_buckets[INBOX_CALL_BUCKETS], call_count;
	double call_seconds_sum;
};

const double inbox_call_bounds[INBOX_CALL_BUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 1e300};

/* A provider's settings given before its first call. */
typedef struct rule {
	struct rule *next;
	char name[NAME_MAX_LEN];
	inbox_provider_options o;
} rule;

struct inbox_providers {
	pthread_mutex_t mu;
	inbox_provider_options def;
	inbox__prov *list, *tail;
	rule *rules;
	inbox_provider_event_fn on_event; /* set before use */
	void *event_payload;
};

void inbox__provider_observe(inbox__prov *p, double seconds)
{
	if (!p || !(seconds >= 0))
		return;
	pthread_mutex_lock(&p->r->mu);
	p->call_seconds_sum += seconds;
	p->call_count++;
	for (int i = 0; i < INBOX_CALL_BUCKETS; i++)
		if (seconds <= inbox_call_bounds[i])
			p->call_buckets[i]++;
	pthread_mutex_unlock(&p->r->mu);
}

/* What changed under the lock, told after it (the callback may log). */
typedef struct change {
	inbox_provider_event ev;
	int64_t ms;
} change;

static void tell(const inbox__prov *p, const change *c)
{
	if (c->ev && p->r->on_event)
		p->r->on_event(p->name, c->ev, c->ms, p->r->event_payload);
}

int inbox_providers_on_event(inbox_providers *r, inbox_provider_event_fn fn,
                             void *payload)
{
	if (!r)
		return INBOX_ERR_INVALID;
	pthread_mutex_lock(&r->mu);
	r->on_event = fn;
	r->event_payload = payload;
	pthread_mutex_unlock(&r->mu);
	return INBOX_OK;
}

static int check(const inbox_provider_options *o)
{
	return o &&
	       inbox__vcheck(INBOX__V_PROVIDER_OPTIONS, o->version, NULL, 0) ==
	           INBOX_OK &&
	       o->concurrency >= 0 && o->concurrency <= 1000000 &&
	       o->rate >= 0 && o->rate <= 1e9 && o->rate == o->rate &&
	       o->burst >= 0 && o->breaker_failures >= 0 &&
	       o->breaker_open_ms >= 1 &&
	       o->breaker_max_open_ms >= o->breaker_open_ms &&
	       o->breaker_max_open_ms <= INT64_MAX / 4;
}

int inbox_providers_open(inbox_providers **out,
                         const inbox_provider_options *defaults)
{
	inbox_provider_options def = INBOX_PROVIDER_OPTIONS_INIT;
	if (!out)
		return INBOX_ERR_INVALID;
	*out = NULL;
	if (defaults && !check(defaults))
		return INBOX_ERR_INVALID;
	inbox_providers *r = calloc(1, sizeof(*r));
	if (!r)
		return INBOX_ERR_NOMEM;
	if (pthread_mutex_init(&r->mu, NULL) != 0) {
		free(r);
		return INBOX_ERR_NOMEM;
	}
	/* the fields of the caller's version, the defaults for the rest */
	r->def = def;
	if (defaults)
		memcpy(
		    &r->def, defaults,
		    inbox__vsize(INBOX__V_PROVIDER_OPTIONS, defaults->version));
	r->def.version = INBOX_PROVIDER_OPTIONS_VERSION;
	*out = r;
	return INBOX_OK;
}

void inbox_providers_close(inbox_providers *r)
{
	if (!r)
		return;
	for (inbox__prov *p = r->list, *n; p; p = n) {
		n = p->next;
		free(p);
	}
	for (rule *u = r->rules, *n; u; u = n) {
		n = u->next;
		free(u);
	}
	pthread_mutex_destroy(&r->mu);
	free(r);
}

int inbox__provider_name(const char *url, char *out, size_t len)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL;
	int rc = -1;
	if (!u || !url)
		goto done;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) !=
	        CURLUE_OK)
		goto done;
	if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
		goto done;
	for (char *h = host; *h; h++)
		if (*h >= 'A' && *h <= 'Z')
			*h = (char)(*h - 'A' + 'a');
	int n = snprintf(out, len, "%s://%s:%s", scheme, host, port);
	rc = n > 0 && (size_t)n < len ? 0 : -1;
done:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return rc;
}

int inbox_provider_name(const char *url, char *out, size_t len)
{
	if (!out || !len)
		return INBOX_ERR_INVALID;
	if (inbox__provider_name(url, out, len) < 0) {
		out[0] = '\0';
		return INBOX_ERR_INVALID;
	}
	return INBOX_OK;
}

static void apply(inbox__prov *p, const inbox_provider_options *o)
{
	p->o = *o;
	if (p->o.burst < 1)
		p->o.burst = 1;
	if (p->tokens > p->o.burst)
		p->tokens = p->o.burst;
}

int inbox_providers_set(inbox_providers *r, const char *url,
                        const inbox_provider_options *o)
{
	char name[NAME_MAX_LEN];
	if (!r || !check(o) || inbox__provider_name(url, name, sizeof(name)))
		return INBOX_ERR_INVALID;
	/* the fields of the caller's version, the defaults for the rest */
	inbox_provider_options full = INBOX_PROVIDER_OPTIONS_INIT;
	memcpy(&full, o, inbox__vsize(INBOX__V_PROVIDER_OPTIONS, o->version));
	full.version = INBOX_PROVIDER_OPTIONS_VERSION;
	o = &full;
	pthread_mutex_lock(&r->mu);
	rule *u = r->rules;
	while (u && strcmp(u->name, name) != 0)
		u = u->next;
	if (!u && (u = calloc(1, sizeof(*u)))) {
		memcpy(u->name, name, sizeof(name));
		u->next = r->rules;
		r->rules = u;
	}
	if (u)
		u->o = *o;
	for (inbox__prov *p = r->list; u && p; p = p->next)
		if (strcmp(p->name, name) == 0)
			apply(p, o);
	pthread_mutex_unlock(&r->mu);
	return u ? INBOX_OK : INBOX_ERR_NOMEM;
}

inbox__prov *inbox__provider_get(inbox_providers *r, const char *url)
{
	char name[NAME_MAX_LEN];
	if (!r || inbox__provider_name(url, name, sizeof(name)))
		return NULL;
	pthread_mutex_lock(&r->mu);
	inbox__prov *p = r->list;
	while (p && strcmp(p->name, name) != 0)
		p = p->next;
	if (!p && (p = calloc(1, sizeof(*p)))) {
		memcpy(p->name, name, sizeof(name));
		p->r = r;
		const rule *u = r->rules;
		while (u && strcmp(u->name, name) != 0)
			u = u->next;
		apply(p, u ? &u->o : &r->def);
		p->tokens = p->o.burst;
		p->refilled_at = inbox__mono_seconds() * 1000.0;
		p->open_ms = p->o.breaker_open_ms;
		if (r->tail)
			r->tail->next = p;
		else
			r->list = p;
		r->tail = p;
	}
	pthread_mutex_unlock(&r->mu);
	return p;
}

/* Under mu: the breaker moves to `to`; *c says so. */
static void breaker_to(inbox__prov *p, inbox_breaker_state to, double now,
                       change *c)
{
	p->breaker = to;
	p->gen++;
	p->trial = 0;
	c->ms = 0;
	if (to == INBOX_BREAKER_OPEN) {
		p->open_until = now + (double)p->open_ms;
		p->opens++;
		c->ev = INBOX_PROVIDER_OPENED;
		c->ms = p->open_ms;
	} else if (to == INBOX_BREAKER_CLOSED) {
		p->failures = 0;
		p->open_ms = p->o.breaker_open_ms;
		c->ev = INBOX_PROVIDER_CLOSED;
	} else {
		c->ev = INBOX_PROVIDER_HALF_OPEN;
	}
}

inbox__admit inbox__provider_acquire(inbox__prov *p, double now, int mine,
                                     int my_limit, inbox__ticket *t,
                                     int64_t *wait_ms, const char **why)
{
	inbox__admit a = INBOX__ADMIT;
	change c = {0};
	*wait_ms = 0;
	*why = "";
	pthread_mutex_lock(&p->r->mu);
	if (p->breaker == INBOX_BREAKER_OPEN && now >= p->open_until)
		breaker_to(p, INBOX_BREAKER_HALF_OPEN, now, &c);
	if (p->hold_until > now) {
		a = INBOX__REJECT;
		*wait_ms = ceil_ms(p->hold_until - now);
		*why = "the provider asked to wait (Retry-After)";
	} else if (p->breaker == INBOX_BREAKER_OPEN) {
		a = INBOX__REJECT;
		*wait_ms = ceil_ms(p->open_until - now);
		*why = "the provider's circuit breaker is open";
	} else if (p->breaker == INBOX_BREAKER_HALF_OPEN && p->trial) {
		/* The trial decides; ask again soon. */
		a = INBOX__WAIT;
		*wait_ms = 20;
	} else if (mine >= my_limit) {
		a = INBOX__WAIT; /* one of ours ends first */
	} else if (p->o.concurrency > 0 && p->in_flight >= p->o.concurrency) {
		a = INBOX__WAIT;
		/* Calls of other dispatchers may be the ones in flight. */
		*wait_ms = mine > 0 ? 0 : 10;
	} else if (p->o.rate > 0) {
		double add = (now - p->refilled_at) * p->o.rate / 1000.0;
		p->tokens += add > 0 ? add : 0;
		if (p->tokens > p->o.burst)
			p->tokens = p->o.burst;
		p->refilled_at = now;
		if (p->tokens < 1.0) {
			a = INBOX__WAIT;
			if (!t->rate_waited)
				p->rate_limited++;
			t->rate_waited = 1;
			*wait_ms =
			    ceil_ms((1.0 - p->tokens) * 1000.0 / p->o.rate);
			if (*wait_ms < 1)
				*wait_ms = 1;
		}
	}
	if (a == INBOX__ADMIT) {
		if (p->o.rate > 0)
			p->tokens -= 1.0;
		p->in_flight++;
		p->calls++;
		t->gen = p->gen;
		t->trial = p->breaker == INBOX_BREAKER_HALF_OPEN;
		if (t->trial) {
			p->trial = 1;
			p->trials++;
		}
	} else if (a == INBOX__REJECT) {
		p->rejected++;
	}
	pthread_mutex_unlock(&p->r->mu);
	tell(p, &c);
	return a;
}

void inbox__provider_release(inbox__prov *p, const inbox__ticket *t, double now,
                             inbox__verdict v, int64_t retry_after_ms)
{
	change c = {0}, held = {0};
	pthread_mutex_lock(&p->r->mu);
	p->in_flight--;
	if (v == INBOX__CALL_FAILED)
		p->fails++;
	if (retry_after_ms > 0) {
		int64_t cap = p->o.breaker_max_open_ms;
		int64_t ms = retry_after_ms < cap ? retry_after_ms : cap;
		double until = now + (double)ms;
		/* A new pause is told; one made longer is not. */
		if (p->hold_until <= now)
			held = (change){INBOX_PROVIDER_HELD, ms};
		if (until > p->hold_until)
			p->hold_until = until;
		p->retry_after++;
	}
	if (t->gen == p->gen) {
		if (t->trial)
			p->trial = 0;
		if (p->breaker == INBOX_BREAKER_HALF_OPEN && t->trial) {
			if (v == INBOX__CALL_OK) {
				breaker_to(p, INBOX_BREAKER_CLOSED, now, &c);
			} else {
				p->open_ms =
				    p->open_ms * 2 < p->o.breaker_max_open_ms
				        ? p->open_ms * 2
				        : p->o.breaker_max_open_ms;
				breaker_to(p, INBOX_BREAKER_OPEN, now, &c);
			}
		} else if (p->breaker == INBOX_BREAKER_CLOSED) {
			if (v == INBOX__CALL_OK)
				p->failures = 0;
			else if (++p->failures >= p->o.breaker_failures &&
			         p->o.breaker_failures > 0)
				breaker_to(p, INBOX_BREAKER_OPEN, now, &c);
		}
	}
	pthread_mutex_unlock(&p->r->mu);
	tell(p, &held);
	tell(p, &c);
}

void inbox__provider_cancel(inbox__prov *p, const inbox__ticket *t)
{
	pthread_mutex_lock(&p->r->mu);
	p->in_flight--;
	p->calls--;
	if (t->trial && t->gen == p->gen) {
		p->trial = 0;
		p->trials--;
	}
	pthread_mutex_unlock(&p->r->mu);
}

inbox__verdict inbox__provider_verdict(long status)
{
	if (status == 0 || status >= 500 || status == 408 || status == 429)
		return INBOX__CALL_FAILED;
	return INBOX__CALL_OK;
}

int inbox_providers_info(inbox_providers *r, unsigned version,
                         inbox_provider_info **out, size_t *n)
{
	if (!r || !out || !n)
		return INBOX_ERR_INVALID;
	*out = NULL;
	*n = 0;
	/* elements of the caller's version, each of that version's size */
	if (inbox__vcheck(INBOX__V_PROVIDER_INFO, version, NULL, 0) < 0)
		return INBOX_ERR_INVALID;
	size_t stride = inbox__vsize(INBOX__V_PROVIDER_INFO, version);
	pthread_mutex_lock(&r->mu);
	size_t count = 0, names = 0;
	for (const inbox__prov *p = r->list; p; p = p->next) {
		count++;
		names += strlen(p->name) + 1;
	}
	char *a = malloc(count * stride + names + 1);
	if (!a) {
		pthread_mutex_unlock(&r->mu);
		return INBOX_ERR_NOMEM;
	}
	char *s = a + count * stride;
	size_t i = 0;
	double now = inbox__mono_seconds() * 1000.0;
	for (const inbox__prov *p = r->list; p; p = p->next, i++) {
		size_t len = strlen(p->name) + 1;
		memcpy(s, p->name, len);
		inbox_provider_info f = {.version = version, .name = s};
		s += len;
		/* An open breaker whose time is over is half-open: the next
		 * call is the trial. */
		f.breaker =
		    p->breaker == INBOX_BREAKER_OPEN && now >= p->open_until
		        ? INBOX_BREAKER_HALF_OPEN
		        : p->breaker;
		f.in_flight = p->in_flight;
		f.calls = p->calls;
		f.failures = p->fails;
		f.opens = p->opens;
		f.trials = p->trials;
		f.rejected = p->rejected;
		f.rate_limited = p->rate_limited;
		f.retry_after = p->retry_after;
		memcpy(f.call_buckets, p->call_buckets, sizeof(f.call_buckets));
		f.call_seconds_sum = p->call_seconds_sum;
		f.call_count = p->call_count;
		void *e = a + i * stride;
		*(unsigned *)e = version;
		inbox__vfill(INBOX__V_PROVIDER_INFO, e, &f);
	}
	pthread_mutex_unlock(&r->mu);
	*out = (inbox_provider_info *)(void *)a;
	*n = count;
	return INBOX_OK;
}
