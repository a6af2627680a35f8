/*
 * NATS source: the InProgress keeper. While a polled batch is in flight
 * (between poll and settle) a helper thread sends natsMsg_InProgress for
 * each of its messages every in_progress_interval, so the server's
 * ack_wait never expires under a long handler or a slow commit. The
 * messages are only touched under ka_mu while ka_active is set; settle
 * clears it (inbox__nats_ka_end) before acking and freeing them.
 */
#include <errno.h>
#include <time.h>

#include "source/nats/nats_source.h"

static void deadline_ts(int64_t at_ms, struct timespec *ts)
{
	ts->tv_sec = (time_t)(at_ms / 1000);
	ts->tv_nsec = (long)(at_ms % 1000) * 1000000L;
}

static void *keeper(void *arg)
{
	nats_source *ns = arg;
	pthread_mutex_lock(&ns->ka_mu);
	while (!ns->ka_stop) {
		if (!ns->ka_active) {
			pthread_cond_wait(&ns->ka_cv, &ns->ka_mu);
			continue;
		}
		int64_t due = ns->ka_last + ns->in_progress_ms;
		if (inbox__src_mono_ms() < due) {
			struct timespec ts;
			deadline_ts(due, &ts);
			pthread_cond_timedwait(&ns->ka_cv, &ns->ka_mu, &ts);
			continue;
		}
		/* Publishes without waiting for an answer: quick, and a
		 * lost one only means a redelivery the inbox drops. */
		for (size_t i = 0; i < ns->nbatch; i++)
			if (natsMsg_InProgress(ns->slots[i].msg, NULL) ==
			    NATS_OK)
				ns->ka_sent++;
		ns->ka_last = inbox__src_mono_ms();
	}
	pthread_mutex_unlock(&ns->ka_mu);
	return NULL;
}

int inbox__nats_ka_start(nats_source *ns)
{
	pthread_condattr_t ca;
	if (pthread_condattr_init(&ca) != 0)
		return INBOX_ERR_NOMEM;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	int rc = pthread_cond_init(&ns->ka_cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0)
		return INBOX_ERR_NOMEM;
	if (pthread_mutex_init(&ns->ka_mu, NULL) != 0) {
		pthread_cond_destroy(&ns->ka_cv);
		return INBOX_ERR_NOMEM;
	}
	ns->ka_sync_ok = 1;
	if (ns->in_progress_ms <= 0)
		return INBOX_OK; /* disabled: no thread */
	if (pthread_create(&ns->ka_thread, NULL, keeper, ns) != 0) {
		inbox__source_seterr(&ns->base, "nats: cannot start the "
		                                "in-progress thread");
		return INBOX_ERR_NOMEM;
	}
	ns->ka_started = 1;
	return INBOX_OK;
}

void inbox__nats_ka_stop(nats_source *ns)
{
	if (!ns->ka_sync_ok)
		return;
	if (ns->ka_started) {
		pthread_mutex_lock(&ns->ka_mu);
		ns->ka_stop = 1;
		pthread_cond_signal(&ns->ka_cv);
		pthread_mutex_unlock(&ns->ka_mu);
		pthread_join(ns->ka_thread, NULL);
		ns->ka_started = 0;
	}
	pthread_cond_destroy(&ns->ka_cv);
	pthread_mutex_destroy(&ns->ka_mu);
	ns->ka_sync_ok = 0;
}

void inbox__nats_ka_begin(nats_source *ns)
{
	if (!ns->ka_sync_ok)
		return;
	pthread_mutex_lock(&ns->ka_mu);
	ns->ka_active = 1;
	ns->ka_last = inbox__src_mono_ms();
	pthread_cond_signal(&ns->ka_cv);
	pthread_mutex_unlock(&ns->ka_mu);
}

void inbox__nats_ka_end(nats_source *ns)
{
	if (!ns->ka_sync_ok)
		return;
	pthread_mutex_lock(&ns->ka_mu);
	ns->ka_active = 0;
	pthread_mutex_unlock(&ns->ka_mu);
}
