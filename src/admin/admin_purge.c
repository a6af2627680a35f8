/*
 * Purge with progress, built on inbox_store_purge() alone (the store
 * vtable is not involved). The expired records are taken oldest first in
 * up to a hundred steps: the time between the oldest expired record and
 * the edge of the window is cut into equal slices, and step k purges with
 * a window reaching back to the end of slice k — never shorter than the
 * consumer's window, the last step using the window itself. Progress is
 * reported in records after each step. The store keeps its guarantees:
 * statements of at most batch_limit rows, each its own transaction, its
 * purge lock, nothing inside the window.
 *
 * Slices of time rather than of rows: finding the N-th oldest record
 * takes an OFFSET scan per step, which a planner with stale statistics
 * (right after a bulk load) turns into a full scan and sort per step;
 * one min() at the start is all this needs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/admin_sql.h"

static int first_int(int ncols, const char *const *v, void *payload)
{
	int64_t *out = payload;
	for (int i = 0; i < ncols && i < 2; i++)
		out[i] = v[i] ? strtoll(v[i], NULL, 10) : -1;
	return 1;
}

/* Age (ms) of the oldest record expired under window w, or -1 when there
 * is none. */
static int oldest_expired_age(inbox_store *st, const char *consumer, int64_t w,
                              int64_t *age_ms)
{
	char win[24];
	snprintf(win, sizeof(win), "%lld", (long long)w);
	const char *p[2] = {consumer, win};
	int64_t got[2] = {-1, -1};
	inbox__buf b = INBOX__BUF_INIT;
	int rc = inbox__admin_sql(
	    &b, st,
	    "SELECT {ms:min(processed_at)}, {now} FROM {inbox}"
	    " WHERE consumer = $1 AND status IN ('completed', 'dead')"
	    " AND processed_at < {cutoff:2}");
	if (rc == INBOX_OK)
		rc = inbox_store_query(st, b.data, 2, p, first_int, got);
	inbox__buf_free(&b);
	*age_ms = got[0] >= 0 && got[1] >= 0 ? got[1] - got[0] : -1;
	return rc;
}

int inbox_admin_purge(inbox_store *st, const char *consumer,
                      int64_t retention_seconds, int batch_limit, int dry_run,
                      inbox_admin_progress_fn fn, void *payload,
                      int64_t *deleted)
{
	if (!st || !deleted)
		return INBOX_ERR_INVALID;
	*deleted = 0;
	if (!consumer)
		return inbox__admin_invalid(st,
		                            "purge: a consumer is required");
	if (batch_limit <= 0)
		batch_limit = 1000;
	int64_t reg, w;
	int rc = inbox__stored_retention(st, consumer, &reg); /* the store's */
	if (rc != INBOX_OK)
		return rc;
	w = retention_seconds > 0 ? retention_seconds : reg;
	if (w <= 0) {
		inbox__store_seterr(st, "",
		                    "purge: consumer \"%s\" has no registered "
		                    "retention window (it never ran on this "
		                    "store)",
		                    consumer);
		return INBOX_ERR_INVALID;
	}
	if (reg > 0 && w < reg) {
		inbox__store_seterr(st, "",
		                    "purge: a window of %llds is shorter than "
		                    "the %llds consumer \"%s\" registered",
		                    (long long)w, (long long)reg, consumer);
		return INBOX_ERR_INVALID;
	}
	if (w > INBOX__ADMIN_MAX_WINDOW_S)
		w = INBOX__ADMIN_MAX_WINDOW_S;
	int64_t total = 0;
	rc = inbox_store_purge(st, consumer, w, batch_limit, 1, &total);
	if (rc != INBOX_OK || dry_run) {
		if (rc == INBOX_OK) {
			*deleted = total;
			if (fn)
				fn(total, total, payload);
		}
		return rc;
	}
	if (fn)
		fn(0, total, payload);
	int64_t age;
	rc = oldest_expired_age(st, consumer, w, &age);
	if (rc != INBOX_OK)
		return rc;
	/* Seconds between the oldest expired record and the window's edge;
	 * whole seconds, as inbox_store_purge takes them. */
	int64_t span = age > 0 ? age / 1000 - w : 0;
	int64_t steps = span > 100 ? 100 : span > 0 ? span : 1;
	for (int64_t k = 1; k <= steps; k++) {
		int64_t n = 0, r = w + span * (steps - k) / steps;
		rc = inbox_store_purge(st, consumer, r, batch_limit, 0, &n);
		*deleted += n;
		if (fn)
			fn(*deleted, *deleted > total ? *deleted : total,
			   payload);
		if (rc != INBOX_OK)
			break;
	}
	return rc;
}
