/*
 * The versioned structs of the public API (docs/abi.md, "Structs"): every
 * struct a caller allocates and hands to the library — options it fills,
 * outputs the library fills, arrays of either — starts with
 * `unsigned version`, which the caller sets (its *_INIT initializer, or
 * the *_VERSION macro) to the version of the headers it was built with.
 * The library refuses 0 and any version newer than it knows
 * (INBOX_ERR_INVALID, with the reason), reads only the fields that
 * version has, and writes only those. An array's layout is its first
 * element's version: the element size is that version's size, never the
 * library's sizeof.
 *
 * Today every output struct has one version, so a function that writes
 * one in place (after inbox__vbegin) writes all of it; when a version 2
 * adds fields, such a function fills a struct of its own and copies it
 * out with inbox__vfill, which writes the caller's version's bytes only.
 */
#ifndef INBOX_CORE_ABI_H
#define INBOX_CORE_ABI_H

#include <stddef.h>

#include <inbox/inbox.h>

typedef enum inbox__vstruct {
	INBOX__V_RESULT,
	INBOX__V_STATS,
	INBOX__V_ADMIN_STATS,
	INBOX__V_ADMIN_GENERATIONS,
	INBOX__V_OUTBOX_STATS,
	INBOX__V_OUTBOX_COUNTS,
	INBOX__V_METRICS_CONSUMER,
	INBOX__V_PROVIDER_INFO,
	INBOX__V_STORE_OPTIONS,
	INBOX__V_CONSUMER_OPTIONS,
	INBOX__V_SOURCE_OPTIONS,
	INBOX__V_RUNNER_OPTIONS,
	INBOX__V_OUTBOX_EFFECT,
	INBOX__V_PROVIDER_OPTIONS,
	INBOX__V_DISPATCHER_OPTIONS,
	INBOX__V_DLQ_FILTER,
	INBOX__V_OUTBOX_FILTER,
	INBOX__V_DELIVERY,
	INBOX__V_COUNT
} inbox__vstruct;

/* The size in bytes of version v of the struct (its fields up to those
 * of v); 0 when v is 0 or newer than this library knows. */
size_t inbox__vsize(inbox__vstruct k, unsigned v);

/* The struct's name ("inbox_stats") and newest version. */
const char *inbox__vname(inbox__vstruct k);
unsigned inbox__vmax(inbox__vstruct k);

/* INBOX_OK when v is a version of the struct this library knows, else
 * INBOX_ERR_INVALID with the reason in err (errlen bytes; NULL/0: none),
 * e.g. "inbox_stats.version is 3, newer than this library knows (1):
 * built against newer headers than libinbox 0.1.0", or "... is 0: set it
 * with INBOX_STATS_INIT". The reason is also raised as the log event
 * "bad_version" (a call without a handle has nowhere else to say it). */
int inbox__vcheck(inbox__vstruct k, unsigned v, char *err, size_t errlen);
/* inbox__vcheck() with the reason on the store handle. */
int inbox__vcheck_store(inbox_store *st, inbox__vstruct k, unsigned v);

/* The version of a versioned struct (its first member). */
#define INBOX__VERSION_OF(p) (*(const unsigned *)(const void *)(p))

/* An output struct about to be written in place: check its version
 * (inbox__vcheck), then zero the bytes of that version, keeping it. */
int inbox__vbegin(inbox__vstruct k, void *out, char *err, size_t errlen);
int inbox__vbegin_store(inbox_store *st, inbox__vstruct k, void *out);

/* Copy the library's struct `full` (its newest version) to the caller's
 * `out`: the bytes of out's version only, out's version kept. out's
 * version must have been checked. */
void inbox__vfill(inbox__vstruct k, void *out, const void *full);

#endif
