/*
 * The benchmark's workload, shared by every program of bench/: N
 * order-created events {id, data: {orderId, totalCents}} of which exactly
 * one in ten (one per block of ten messages, at a position drawn from a
 * fixed seed) is a redelivery of an earlier event, so N = 100,000 gives
 * 90,000 distinct events. Message i is computed from i alone: nothing is
 * kept in memory, so a million messages cost no more than a hundred.
 *
 * Event ids are UUIDs, time-ordered by default (UUIDv7: a millisecond
 * timestamp first, one millisecond per event from a fixed epoch, then
 * random bits), as modern producers mint them. WL_IDS=random in the
 * environment makes them UUIDv4 (random over the whole key space), to
 * measure what random keys cost a big inbox. WL_SALT=N draws another,
 * disjoint set of ids. The "older rows" of bench/run are spread evenly
 * over the key space.
 */
#ifndef BENCH_WORKLOAD_H
#define BENCH_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WL_SEED 0x1b0c5eedULL

static inline uint64_t wl_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Position of the redelivery inside block b (never the very first
 * message, which has nothing earlier to repeat). */
static inline long wl_dup_pos(long b)
{
	uint64_t h = wl_mix(WL_SEED ^ ((uint64_t)b << 1));
	return b == 0 ? 1 + (long)(h % 9) : (long)(h % 10);
}

/* Distinct events among messages [0, i). */
static inline long wl_distinct_before(long i)
{
	long b = i / 10, pos = i % 10;
	return i - b - (pos > wl_dup_pos(b) ? 1 : 0);
}

/* Distinct events among the first n messages. */
static inline long wl_distinct(long n)
{
	return wl_distinct_before(n);
}

/* Event number (0-based, in order of first appearance) of message i, and
 * whether it repeats an earlier one. */
static inline long wl_event(long i, int *is_dup)
{
	long d = wl_distinct_before(i);
	if (i % 10 == wl_dup_pos(i / 10)) {
		*is_dup = 1;
		return (long)(wl_mix(WL_SEED ^ ((uint64_t)i << 1 | 1)) %
		              (uint64_t)d);
	}
	*is_dup = 0;
	return d;
}

/* 2026-01-01T00:00:00Z in ms: event e was minted e ms later. */
#define WL_EPOCH_MS 1767225600000ULL

static inline int wl_random_ids(void)
{
	static int v = -1;
	if (v < 0) {
		const char *e = getenv("WL_IDS");
		v = e && strcmp(e, "random") == 0;
	}
	return v;
}

static inline uint64_t wl_salt(void)
{
	static int done;
	static uint64_t v;
	if (!done) {
		const char *e = getenv("WL_SALT");
		v = e ? strtoull(e, NULL, 10) : 0;
		done = 1;
	}
	return v;
}

/* The id of event e: 36 characters, UUIDv7 (or v4) layout. */
static inline void wl_uuid(long e, char out[37])
{
	uint64_t salt = wl_salt();
	uint64_t a =
	    wl_mix(WL_SEED + salt * 0x10000000000ULL + 2 * (uint64_t)e);
	uint64_t b =
	    wl_mix(WL_SEED + salt * 0x10000000000ULL + 2 * (uint64_t)e + 1);
	if (!wl_random_ids()) {
		/* v7: 48-bit ms timestamp, version, 12 random bits */
		uint64_t ms = WL_EPOCH_MS + salt * 1000000000ULL + (uint64_t)e;
		a = (ms << 16) | (a & 0xffffu);
	}
	snprintf(out, 37, "%08x-%04x-%c%03x-%04x-%012llx", (unsigned)(a >> 32),
	         (unsigned)(a >> 16) & 0xffffu, wl_random_ids() ? '4' : '7',
	         (unsigned)a & 0xfffu,
	         0x8000u | ((unsigned)(b >> 48) & 0x3fffu),
	         (unsigned long long)(b & 0xffffffffffffULL));
}

static inline long wl_total_cents(long e)
{
	return 100 + (long)(wl_mix(WL_SEED ^ 0x7f7fULL ^ (uint64_t)e) % 99900);
}

typedef struct wl_msg {
	long event;
	int dup;
	char id[37];
	char order[16];
	long total;
	char json[160];
	int len;
} wl_msg;

/* Message i of the workload: fields and the JSON text (no newline). */
static inline void wl_message(long i, wl_msg *m)
{
	m->event = wl_event(i, &m->dup);
	wl_uuid(m->event, m->id);
	snprintf(m->order, sizeof(m->order), "ord-%08ld", m->event);
	m->total = wl_total_cents(m->event);
	m->len = snprintf(m->json, sizeof(m->json),
	                  "{\"id\":\"%s\",\"data\":{\"orderId\":\"%s\","
	                  "\"totalCents\":%ld}}",
	                  m->id, m->order, m->total);
}

#endif
