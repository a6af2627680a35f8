/*
 * The runner: poll a batch, process it in one transaction, settle it with
 * the source. Acks only ever follow a commit; a batch that fails is retried
 * with backoff, and on stop the batch in hand is finished first.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <inbox/sys/source.h>

#include "base/log.h"
#include "core/abi.h"
#include "core/internal.h"

static void sleep_ms(int ms, volatile sig_atomic_t *stop)
{
	/* sleep in slices so a stop request is seen quickly */
	while (ms > 0 && !inbox__flag(stop)) {
		int slice = ms > 50 ? 50 : ms;
		struct timespec ts = {0, (long)slice * 1000000L};
		nanosleep(&ts, NULL);
		ms -= slice;
	}
}

/* Errors no retry will cure. Running out of memory is not one of them:
 * the call that failed left nothing half-done, and the same batch is
 * tried again after the backoff. */
static int fatal(int rc)
{
	return rc == INBOX_ERR_SCHEMA || rc == INBOX_ERR_INVALID ||
	       rc == INBOX_ERR_CONFIG || rc == INBOX_ERR_URL;
}

int inbox_run(inbox_consumer *c, inbox_source *src,
              const inbox_runner_options *opts, volatile sig_atomic_t *stop)
{
	inbox_runner_options def = INBOX_RUNNER_OPTIONS_INIT;
	volatile sig_atomic_t never = 0;
	if (!c || !src)
		return INBOX_ERR_INVALID;
	if (!opts)
		opts = &def;
	if (inbox__vcheck(INBOX__V_RUNNER_OPTIONS, opts->version, NULL, 0) < 0)
		return INBOX_ERR_INVALID;
	if (!stop)
		stop = &never;
	size_t bs = opts->batch_size ? opts->batch_size : 100;
	inbox_delivery *d = calloc(bs, sizeof(*d));
	inbox_result *res = calloc(bs, sizeof(*res));
	if (!d || !res) {
		free(d);
		free(res);
		return INBOX_ERR_NOMEM;
	}
	for (size_t i = 0; i < bs; i++) {
		d[i].version = INBOX_DELIVERY_VERSION;
		res[i].version = INBOX_RESULT_VERSION;
	}
	const char *name = inbox_consumer_name(c);
	const int initial =
	    opts->backoff_initial_ms > 0 ? opts->backoff_initial_ms : 100;
	int backoff = initial;
	int max_backoff =
	    opts->backoff_max_ms > 0 ? opts->backoff_max_ms : 5000;
	int rc = INBOX_OK;
	while (!inbox__flag(stop)) {
		size_t n = 0;
		int eof = 0;
		rc = inbox_source_poll(src, d, bs, &n, opts->poll_timeout_ms,
		                       &eof);
		if (rc < 0) {
			inbox__log(INBOX_LOG_WARN, name,
			           "\"event\":\"poll_failed\",\"error\":\"%s\"",
			           inbox__log_escape(inbox_source_errmsg(src)));
			if (fatal(rc))
				break;
			sleep_ms(backoff, stop);
			backoff = backoff * 2 > max_backoff ? max_backoff
			                                    : backoff * 2;
			rc = INBOX_OK;
			continue;
		}
		/* A poll that worked ends any poll backoff. */
		backoff = initial;
		/* Sources report what went wrong beside a successful poll (an
		 * offset commit the broker refused, a reconnect): log it. */
		if (inbox_source_errmsg(src)[0])
			inbox__log(
			    INBOX_LOG_WARN, name,
			    "\"event\":\"source_warning\",\"error\":\"%s\"",
			    inbox__log_escape(inbox_source_errmsg(src)));
		if (n == 0) {
			if (eof && opts->exit_at_eof)
				break;
			continue;
		}
		/* The batch in hand is finished even if a stop arrives. */
		int delay = backoff;
		for (;;) {
			rc = inbox_consumer_process_batch(c, d, n, res);
			if (rc == INBOX_OK || fatal(rc))
				break;
			inbox__log(
			    INBOX_LOG_WARN, name,
			    "\"event\":\"batch_failed\",\"error\":\"%s\","
			    "\"retry_in_ms\":%d",
			    inbox__log_escape(inbox_consumer_errmsg(c)), delay);
			if (inbox__flag(stop))
				break;
			sleep_ms(delay, stop);
			delay =
			    delay * 2 > max_backoff ? max_backoff : delay * 2;
		}
		if (rc != INBOX_OK) {
			/* Nothing committed: let the source redeliver. */
			inbox_source_settle(src, d, NULL, n);
			if (fatal(rc) || inbox__flag(stop))
				break;
			continue;
		}
		int src_rc = inbox_source_settle(src, d, res, n);
		if (src_rc < 0)
			/* Committed but not acked: the broker redelivers and
			 * the inbox drops the copies. Log and go on. */
			inbox__log(INBOX_LOG_WARN, name,
			           "\"event\":\"ack_failed\",\"error\":\"%s\"",
			           inbox__log_escape(inbox_source_errmsg(src)));
		if (opts->on_batch)
			opts->on_batch(d, res, n, opts->payload);
	}
	free(d);
	free(res);
	return rc;
}
