/*
 * NATS source: the vtable (open, close, poll, settle), the connection and
 * the durable pull subscription. The behaviour is described in
 * nats_source.h.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "base/log.h"
#include "source/nats/nats_source.h"

#define MSG_ID_HEADER "Nats-Msg-Id"

static void seterr_nats(nats_source *ns, natsStatus s, const char *what,
                        jsErrCode jerr)
{
	char t[300];
	inbox__nats_errtext(ns, s, t, sizeof(t));
	if (jerr)
		inbox__source_seterr(&ns->base,
		                     "nats: %s: %s (JetStream error "
		                     "%d)",
		                     what, t, (int)jerr);
	else
		inbox__source_seterr(&ns->base, "nats: %s: %s", what, t);
}

static int connected(nats_source *ns)
{
	return ns->nc &&
	       natsConnection_Status(ns->nc) == NATS_CONN_STATUS_CONNECTED;
}

static int connect_server(nats_source *ns, const char *consumer)
{
	natsStatus s = natsOptions_Create(&ns->nopts);
	char name[300];
	snprintf(name, sizeof(name), "inbox %s", consumer);
	if (s == NATS_OK)
		s = natsOptions_SetServers(
		    ns->nopts, (const char **)ns->servers, ns->nservers);
	if (s == NATS_OK && ns->user)
		s = natsOptions_SetUserInfo(ns->nopts, ns->user, ns->password);
	if (s == NATS_OK && ns->token)
		s = natsOptions_SetToken(ns->nopts, ns->token);
	if (s == NATS_OK)
		s = natsOptions_SetName(ns->nopts, name);
	if (s == NATS_OK && ns->tls)
		s = inbox__nats_tls_options(ns);
	/* Reconnect forever, quickly; a lost connection is never fatal. */
	if (s == NATS_OK)
		s = natsOptions_SetMaxReconnect(ns->nopts, -1);
	if (s == NATS_OK)
		s = natsOptions_SetReconnectWait(ns->nopts, 250);
	if (s == NATS_OK)
		s = natsOptions_SetTimeout(ns->nopts, 2000);
	/* Notice a silently dead server within ~30 s. */
	if (s == NATS_OK)
		s = natsOptions_SetPingInterval(ns->nopts, 10000);
	if (s == NATS_OK)
		s = natsOptions_SetMaxPingsOut(ns->nopts, 3);
	if (s != NATS_OK) {
		seterr_nats(ns, s, "options", 0);
		return INBOX_ERR_SOURCE;
	}
	s = natsConnection_Connect(&ns->nc, ns->nopts);
	if (s != NATS_OK) {
		char t[300];
		inbox__nats_errtext(ns, s, t, sizeof(t));
		inbox__source_seterr(
		    &ns->base, "nats: cannot connect to %s: %s", ns->hosts, t);
		return INBOX_ERR_CONNECT;
	}
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = ns->ack_timeout_ms;
	s = natsConnection_JetStream(&ns->js, ns->nc, &jo);
	if (s != NATS_OK) {
		seterr_nats(ns, s, "JetStream context", 0);
		return INBOX_ERR_SOURCE;
	}
	/* The answers to the confirmed acks (cnats subscribes it again
	 * after every reconnect). */
	natsInbox *inbox = NULL;
	s = natsInbox_Create(&inbox);
	if (s == NATS_OK) {
		char subj[sizeof(ns->ack_prefix) + 1];
		snprintf(ns->ack_prefix, sizeof(ns->ack_prefix), "%s.",
		         (const char *)inbox);
		snprintf(subj, sizeof(subj), "%s*", ns->ack_prefix);
		s = natsConnection_SubscribeSync(&ns->ack_sub, ns->nc, subj);
	}
	natsInbox_Destroy(inbox);
	if (s != NATS_OK) {
		seterr_nats(ns, s, "ack subscription", 0);
		return INBOX_ERR_SOURCE;
	}
	return INBOX_OK;
}

/* create=1: add the stream (subjects STREAM.>) unless it exists. */
static int ensure_stream(nats_source *ns)
{
	jsErrCode jerr = 0;
	jsStreamInfo *si = NULL;
	natsStatus s = js_GetStreamInfo(&si, ns->js, ns->stream, NULL, &jerr);
	jsStreamInfo_Destroy(si);
	if (s == NATS_OK)
		return INBOX_OK;
	if (s != NATS_NOT_FOUND && jerr != JSStreamNotFoundErr) {
		seterr_nats(ns, s, "stream info", jerr);
		return INBOX_ERR_SOURCE;
	}
	char subj[300];
	snprintf(subj, sizeof(subj), "%s.>", ns->stream);
	const char *subjects[1] = {subj};
	jsStreamConfig sc;
	jsStreamConfig_Init(&sc);
	sc.Name = ns->stream;
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.Storage = js_FileStorage;
	si = NULL;
	jerr = 0;
	s = js_AddStream(&si, ns->js, &sc, NULL, &jerr);
	jsStreamInfo_Destroy(si);
	if (s != NATS_OK) {
		seterr_nats(ns, s, "create stream", jerr);
		return INBOX_ERR_SOURCE;
	}
	return INBOX_OK;
}

/* Create or update the durable, then bind a pull subscription to it. */
static int setup(nats_source *ns)
{
	natsSubscription_Destroy(ns->sub);
	ns->sub = NULL;
	if (ns->create) {
		int rc = ensure_stream(ns);
		if (rc < 0)
			return rc;
	}
	jsConsumerConfig cc;
	jsConsumerConfig_Init(&cc);
	cc.Durable = ns->durable;
	cc.DeliverPolicy = js_DeliverAll;
	cc.AckPolicy = js_AckExplicit;
	cc.AckWait = ns->ack_wait_ms * 1000000; /* nanoseconds */
	cc.MaxDeliver = ns->max_deliver;
	cc.MaxAckPending = ns->max_ack_pending;
	cc.FilterSubject = ns->subject;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	/* The server creates the durable, or updates it to this config
	 * (refusing what cannot change, with its reason). */
	natsStatus s =
	    js_AddConsumer(&ci, ns->js, ns->stream, &cc, NULL, &jerr);
	jsConsumerInfo_Destroy(ci);
	if (s != NATS_OK) {
		char what[600];
		snprintf(what, sizeof(what), "durable %s on stream %s at %s%s",
		         ns->durable, ns->stream, ns->hosts,
		         jerr == JSStreamNotFoundErr
		             ? " (no such stream; create=1 creates it)"
		             : "");
		seterr_nats(ns, s, what, jerr);
		return INBOX_ERR_SOURCE;
	}
	jsSubOptions so;
	jsSubOptions_Init(&so);
	so.Stream = ns->stream;
	so.Consumer = ns->durable;
	jerr = 0;
	s = js_PullSubscribe(&ns->sub, ns->js, NULL, ns->durable, NULL, &so,
	                     &jerr);
	if (s != NATS_OK) {
		ns->sub = NULL;
		seterr_nats(ns, s, "pull subscribe", jerr);
		return INBOX_ERR_SOURCE;
	}
	ns->need_setup = 0;
	return INBOX_OK;
}

static void ns_close(inbox_source *src)
{
	nats_source *ns = (nats_source *)src;
	if (!ns)
		return;
	inbox__nats_ka_stop(ns);
	for (size_t i = 0; i < ns->nslots; i++) {
		/* Unsettled: the server redelivers them after ack_wait. */
		natsMsg_Destroy(ns->slots[i].msg);
		inbox__buf_free(&ns->slots[i].text);
	}
	free(ns->slots);
	free(ns->ack_slot);
	natsSubscription_Destroy(ns->sub);
	natsSubscription_Destroy(ns->ack_sub);
	jsCtx_Destroy(ns->js);
	if (connected(ns))
		natsConnection_FlushTimeout(ns->nc, 1000); /* naks, terms */
	natsConnection_Destroy(ns->nc);
	natsOptions_Destroy(ns->nopts);
	inbox__nats_url_clear(ns);
	free(ns);
}

static int grow_slots(nats_source *ns, size_t want)
{
	if (want <= ns->nslots)
		return INBOX_OK;
	size_t *a = realloc(ns->ack_slot, want * sizeof(*a));
	if (!a)
		return INBOX_ERR_NOMEM;
	ns->ack_slot = a;
	nats_slot *p = realloc(ns->slots, want * sizeof(*p));
	if (!p)
		return INBOX_ERR_NOMEM;
	memset(p + ns->nslots, 0, (want - ns->nslots) * sizeof(*p));
	ns->slots = p;
	ns->nslots = want;
	return INBOX_OK;
}

/* The check slot, and open's first half: the handle, its URL parsed. */
static int ns_check(inbox_source **out, const char *url,
                    const inbox_source_options *opts)
{
	nats_source *ns = calloc(1, sizeof(*ns));
	if (!ns)
		return INBOX_ERR_NOMEM;
	*out = &ns->base;
	ns->ack_wait_ms = 30000;
	ns->ack_timeout_ms = 5000;
	ns->max_deliver = -1;
	ns->max_payload = opts->max_payload;
	ns->retry_delay_ms = opts->retry_delay_ms;
	return inbox__nats_parse_url(ns, url, opts);
}

static int ns_open(inbox_source **out, const char *url,
                   const inbox_source_options *opts)
{
	int rc = ns_check(out, url, opts);
	if (rc < 0)
		return rc;
	nats_source *ns = (nats_source *)*out;
	size_t want = opts->max_batch < INT_MAX ? opts->max_batch : INT_MAX;
	rc = grow_slots(ns, want);
	if (rc < 0)
		return rc;
	rc = connect_server(ns, opts->consumer);
	if (rc < 0)
		return rc;
	rc = setup(ns);
	if (rc < 0)
		return rc;
	return inbox__nats_ka_start(ns);
}

/* Wait until the connection is back or the deadline passed. */
static int wait_connected(nats_source *ns, int64_t deadline)
{
	while (!connected(ns)) {
		if (inbox__src_mono_ms() >= deadline)
			return 0;
		inbox__src_sleep_ms(20);
	}
	return 1;
}

/* Describe message m in slot i and delivery d. */
static int fill(nats_source *ns, size_t i, natsMsg *m, inbox_delivery *d)
{
	nats_slot *sl = &ns->slots[i];
	sl->msg = m;
	sl->id = NULL;
	sl->refused_at = sl->headers_at = sl->position_at = -1;
	inbox__buf_reset(&sl->text);
	*d = (inbox_delivery){0};
	const char *data = natsMsg_GetData(m);
	int len = natsMsg_GetDataLength(m);
	size_t plen =
	    inbox__src_payload_len(len > 0 ? (size_t)len : 0, ns->max_payload);
	d->payload = data ? data : "";
	d->payload_len = data ? plen : 0;
	const char *id = NULL;
	long why = inbox__src_refuse_oversize(
	    &sl->text, len > 0 ? (size_t)len : 0, ns->max_payload);
	if (why == -2)
		return INBOX_ERR_NOMEM;
	int ok = 0;
	if (why < 0 && natsMsgHeader_Get(m, MSG_ID_HEADER, &id) == NATS_OK &&
	    id)
		ok = inbox__src_check_id(&sl->text,
		                         "NATS header \"" MSG_ID_HEADER "\"",
		                         id, strlen(id), &why);
	if (ok < 0 && why < 0)
		return INBOX_ERR_NOMEM;
	if (ok > 0)
		sl->id = id;
	sl->refused_at = why;
	int has = 0;
	size_t at = sl->text.len;
	if (inbox__nats_headers_json(m, &sl->text, &has) < 0)
		return INBOX_ERR_NOMEM;
	if (has)
		sl->headers_at = (long)at;
	jsMsgMetaData *md = NULL;
	if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
		at = sl->text.len;
		if (inbox__buf_puts(&sl->text, ns->stream) < 0 ||
		    inbox__buf_putc(&sl->text, '/') < 0 ||
		    inbox__src_put_udec(&sl->text, md->Sequence.Stream) < 0) {
			jsMsgMetaData_Destroy(md);
			return INBOX_ERR_NOMEM;
		}
		sl->position_at = (long)at;
		d->delivery_count = md->NumDelivered > INT32_MAX
		                        ? INT32_MAX
		                        : (int32_t)md->NumDelivered;
		d->timestamp_ms = md->Timestamp / 1000000;
		jsMsgMetaData_Destroy(md);
	}
	d->id = sl->id;
	return INBOX_OK;
}

static int settle_collect(nats_source *ns, int wait);

static int ns_poll(inbox_source *src, inbox_delivery *out, size_t max,
                   size_t *n, int timeout_ms, int *eof)
{
	nats_source *ns = (nats_source *)src;
	(void)eof; /* a stream never ends */
	if (max > INT_MAX)
		max = INT_MAX;
	if (grow_slots(ns, max) < 0)
		return INBOX_ERR_NOMEM;
	int64_t deadline =
	    inbox__src_mono_ms() + (timeout_ms > 0 ? timeout_ms : 1);
	if (!wait_connected(ns, deadline)) {
		inbox__source_seterr(src,
		                     "nats: not connected to %s "
		                     "(reconnecting)",
		                     ns->hosts);
		return INBOX_ERR_SOURCE;
	}
	if (ns->need_setup || !ns->sub) {
		int rc = setup(ns);
		if (rc < 0)
			return rc;
	}
	int64_t left = deadline - inbox__src_mono_ms();
	natsMsgList list = {0};
	jsErrCode jerr = 0;
	natsStatus s = natsSubscription_Fetch(&list, ns->sub, (int)max,
	                                      left > 0 ? left : 1, &jerr);
	/* The answers to the last batch's acks came while the fetch was out
	 * (collected before the slots are filled again). Its settle has
	 * returned: what failed is logged here, as the runner logs a failed
	 * settle; it loses nothing (redelivered, dropped as duplicates). */
	if (ns->ack_nslots > 0 &&
	    settle_collect(ns, s == NATS_OK || s == NATS_TIMEOUT))
		inbox__log(INBOX_LOG_WARN, ns->base.opts.consumer,
		           "\"event\":\"ack_failed\",\"error\":\"%s\"",
		           inbox__log_escape(inbox_source_errmsg(src)));
	if (s == NATS_TIMEOUT)
		return INBOX_OK;
	if (s != NATS_OK) {
		seterr_nats(ns, s, "fetch", jerr);
		/* The consumer or the subscription may be gone (server
		 * restarted without its store, consumer deleted): check
		 * them again next time. */
		ns->need_setup = 1;
		return INBOX_ERR_SOURCE;
	}
	size_t k = 0;
	int rc = INBOX_OK;
	for (int i = 0; i < list.Count; i++) {
		natsMsg *m = list.Msgs[i];
		list.Msgs[i] = NULL;
		if (k == max || rc < 0) {
			natsMsg_Destroy(m); /* redelivered after ack_wait */
			continue;
		}
		rc = fill(ns, k, m, &out[k]);
		k++;
	}
	natsMsgList_Destroy(&list);
	ns->nbatch = k;
	if (rc < 0) {
		/* Leave them unacked: they come back after ack_wait. */
		for (size_t i = 0; i < k; i++) {
			natsMsg_Destroy(ns->slots[i].msg);
			ns->slots[i].msg = NULL;
		}
		ns->nbatch = 0;
		return rc;
	}
	/* Pointers into the slots' text, now that it stopped growing. */
	for (size_t i = 0; i < k; i++) {
		nats_slot *sl = &ns->slots[i];
		if (sl->refused_at >= 0)
			inbox__src_set_id(&out[i],
			                  sl->text.data + sl->refused_at);
		if (sl->headers_at >= 0)
			out[i].headers = sl->text.data + sl->headers_at;
		if (sl->position_at >= 0)
			out[i].position = sl->text.data + sl->position_at;
	}
	if (k > 0)
		inbox__nats_ka_begin(ns);
	*n = k;
	return INBOX_OK;
}

/* Send what settles slot i: a nak (no answer expected), or an ack or
 * term. With confirm, the batch's last ack or term (ask) is a request
 * answered on ack_prefix + its sequence number, and the others wait for
 * that answer (NATS_TIMEOUT until it comes): the server handles a
 * consumer's acks in the order they came on the connection, so its
 * answer to the last one says it has recorded those before it too — the
 * double ack of every message for one answer. Without confirm (not
 * connected) they are sent unconfirmed. */
static void settle_send(nats_source *ns, size_t i, const inbox_result *r,
                        int confirm, int ask)
{
	nats_slot *sl = &ns->slots[i];
	natsMsg *m = sl->msg;
	sl->ack_seq = 0;
	sl->ack_st = NATS_OK;
	if (!r || !inbox_outcome_ackable(r->outcome)) {
		sl->ack_what = "nak";
		sl->ack_st =
		    ns->retry_delay_ms > 0
		        ? natsMsg_NakWithDelay(m, ns->retry_delay_ms, NULL)
		        : natsMsg_Nak(m, NULL);
		return;
	}
	/* Dead-lettered in the store already: never redeliver. */
	int term =
	    r->outcome == INBOX_DEAD_LETTERED || r->outcome == INBOX_CONFLICT;
	sl->ack_what = term ? "term" : "ack";
	if (!confirm || !ask) {
		natsStatus s =
		    term ? natsMsg_Term(m, NULL) : natsMsg_Ack(m, NULL);
		sl->ack_st = s != NATS_OK ? s
		             : confirm    ? NATS_TIMEOUT /* the last one's */
		                          : NATS_NOT_YET_CONNECTED;
		return;
	}
	char reply[sizeof(ns->ack_prefix) + 24];
	uint64_t seq = ns->ack_seq + 1;
	snprintf(reply, sizeof(reply), "%s%" PRIu64, ns->ack_prefix, seq);
	sl->ack_st = natsConnection_PublishRequestString(
	    ns->nc, natsMsg_GetReply(m), reply, term ? "+TERM" : "+ACK");
	if (sl->ack_st == NATS_OK) {
		ns->ack_seq = seq;
		sl->ack_seq = seq;
		sl->ack_st = NATS_TIMEOUT; /* until its answer comes */
		ns->ack_slot[seq - ns->ack_first] = i;
		ns->ack_waiting++;
	}
}

/* Collect the answers to the requests of the last settled batch
 * (slots[0..ack_nslots), sequence numbers ack_first..ack_seq): those
 * already here, then, with wait, up to ack_timeout after they were sent.
 * Answers to older requests are dropped. Then put in errmsg what failed
 * (1) or return 0; either way nothing is outstanding afterwards. Must run
 * before the slots are filled again. */
static int settle_collect(nats_source *ns, int wait)
{
	size_t plen = strlen(ns->ack_prefix);
	while (ns->ack_waiting > 0) {
		int64_t left = wait ? ns->ack_sent_at + ns->ack_timeout_ms -
		                          inbox__src_mono_ms()
		                    : 0;
		natsMsg *a = NULL;
		natsStatus st = natsSubscription_NextMsg(&a, ns->ack_sub,
		                                         left > 0 ? left : 0);
		if (st == NATS_NO_RESPONDERS) {
			/* an answer from no consumer (cnats dropped it): the
			 * request stays unconfirmed */
			ns->ack_waiting--;
			continue;
		}
		if (st != NATS_OK)
			break;
		const char *subj = natsMsg_GetSubject(a);
		char *end = NULL;
		uint64_t seq = strncmp(subj, ns->ack_prefix, plen) == 0
		                   ? strtoull(subj + plen, &end, 10)
		                   : 0;
		if (end && !*end && seq >= ns->ack_first &&
		    seq <= ns->ack_seq) {
			nats_slot *sl =
			    &ns->slots[ns->ack_slot[seq - ns->ack_first]];
			if (sl->ack_seq == seq && sl->ack_st == NATS_TIMEOUT) {
				sl->ack_st = NATS_OK;
				ns->ack_waiting--;
				/* and those it vouches for */
				for (size_t j = 0; j < ns->ack_nslots; j++)
					if (ns->slots[j].ack_seq == 0 &&
					    ns->slots[j].ack_st == NATS_TIMEOUT)
						ns->slots[j].ack_st = NATS_OK;
			}
		}
		natsMsg_Destroy(a);
	}
	size_t failed = 0, n = ns->ack_nslots;
	char first[400] = "";
	for (size_t i = 0; i < n; i++) {
		nats_slot *sl = &ns->slots[i];
		if (sl->ack_st == NATS_OK || failed++ > 0)
			continue;
		char t[300];
		if (sl->ack_st == NATS_TIMEOUT)
			snprintf(t, sizeof(t),
			         "not confirmed within ack_timeout");
		else if (sl->ack_st == NATS_NOT_YET_CONNECTED)
			snprintf(t, sizeof(t),
			         "sent unconfirmed: not connected");
		else
			inbox__nats_errtext(ns, sl->ack_st, t, sizeof(t));
		snprintf(first, sizeof(first), "%s %s: %s", sl->ack_what,
		         sl->position_at >= 0 ? sl->text.data + sl->position_at
		                              : "?",
		         t);
	}
	ns->ack_nslots = 0;
	ns->ack_waiting = 0;
	ns->ack_first = ns->ack_seq + 1;
	if (!failed)
		return 0;
	inbox__source_seterr(&ns->base,
	                     "nats: %zu of %zu settlements failed "
	                     "(redelivered after ack_wait, then "
	                     "dropped as duplicates); first: %s",
	                     failed, n, first);
	return 1;
}

/* The batch is ns->slots[0..nbatch) (the framework checked it); res NULL
 * naks it all. */
static int ns_settle(inbox_source *src, const inbox_result *res, size_t n)
{
	nats_source *ns = (nats_source *)src;
	int rc = INBOX_OK;
	(void)n; /* == ns->nbatch */
	inbox__nats_ka_end(ns);
	/* What is still unanswered of the batch before (a poll that
	 * failed) is given up: one batch outstanding at a time. */
	if (ns->ack_nslots > 0 && settle_collect(ns, 0) && rc == INBOX_OK)
		rc = INBOX_ERR_SOURCE;
	int confirm = connected(ns);
	ns->ack_first = ns->ack_seq + 1;
	ns->ack_sent_at = inbox__src_mono_ms();
	size_t last = 0; /* the last ack or term, + 1 (0: none) */
	for (size_t i = 0; res && i < ns->nbatch; i++)
		if (inbox_outcome_ackable(res[i].outcome))
			last = i + 1;
	for (size_t i = 0; i < ns->nbatch; i++) {
		settle_send(ns, i, res ? &res[i] : NULL, confirm,
		            i + 1 == last);
		natsMsg_Destroy(ns->slots[i].msg);
		ns->slots[i].msg = NULL;
	}
	/* The answers are collected by the next poll, once its fetch is
	 * back: they arrive meanwhile. Only what could not be sent at all is
	 * reported now. */
	ns->ack_nslots = ns->nbatch;
	size_t unsent = 0;
	for (size_t i = 0; i < ns->nbatch; i++)
		unsent += ns->slots[i].ack_st != NATS_OK &&
		          ns->slots[i].ack_st != NATS_TIMEOUT &&
		          ns->slots[i].ack_st != NATS_NOT_YET_CONNECTED;
	if (unsent && rc == INBOX_OK) {
		/* the whole report (and nothing outstanding) now */
		settle_collect(ns, 0);
		rc = INBOX_ERR_SOURCE;
	}
	ns->nbatch = 0;
	return rc;
}

/* The lag slot: the durable consumer's num_pending (stream messages it
 * has not delivered yet) plus num_ack_pending (delivered, not acked),
 * from a consumer info request (one round trip, bounded by the
 * ack_timeout). Unknown while not set up (disconnected). */
static int ns_lag(inbox_source *src, int64_t *messages, int64_t *bytes)
{
	nats_source *ns = (nats_source *)src;
	(void)bytes;
	if (!ns->js || ns->need_setup)
		return INBOX_ERR_SOURCE;
	jsOptions o;
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	if (jsOptions_Init(&o) != NATS_OK)
		return INBOX_ERR_SOURCE;
	o.Wait = ns->ack_timeout_ms > 0 && ns->ack_timeout_ms < 2000
	             ? ns->ack_timeout_ms
	             : 2000;
	natsStatus st =
	    js_GetConsumerInfo(&ci, ns->js, ns->stream, ns->durable, &o, &jerr);
	if (st != NATS_OK || !ci) {
		jsConsumerInfo_Destroy(ci);
		return INBOX_ERR_SOURCE;
	}
	*messages = (int64_t)ci->NumPending +
	            (ci->NumAckPending > 0 ? ci->NumAckPending : 0);
	jsConsumerInfo_Destroy(ci);
	return INBOX_OK;
}

const inbox_source_vtable inbox__nats_source = {
    INBOX_SOURCE_VTABLE_VERSION,
    "nats",
    ns_open,
    ns_close,
    ns_poll,
    ns_settle,
    ns_lag,
    .client_version = inbox__nats_client_version,
    .check = ns_check,
};
