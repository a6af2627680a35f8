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

#include "core/json.h"
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
	natsSubscription_Destroy(ns->sub);
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
	nats_slot *p = realloc(ns->slots, want * sizeof(*p));
	if (!p)
		return INBOX_ERR_NOMEM;
	memset(p + ns->nslots, 0, (want - ns->nslots) * sizeof(*p));
	ns->slots = p;
	ns->nslots = want;
	return INBOX_OK;
}

static int ns_open(inbox_source **out, const char *url,
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
	int rc = inbox__nats_parse_url(ns, url, opts);
	if (rc < 0)
		return rc;
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
		if (inbox__buf_printf(&sl->text, "%s/%" PRIu64, ns->stream,
		                      md->Sequence.Stream) < 0) {
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
	d->source_token = i;
	return INBOX_OK;
}

static int ns_poll(inbox_source *src, inbox_delivery *out, size_t max,
                   size_t *n, int timeout_ms, int *eof)
{
	nats_source *ns = (nats_source *)src;
	(void)eof; /* a stream never ends */
	if (ns->polled) {
		inbox__source_seterr(src, "nats: poll before the previous "
		                          "batch was settled");
		return INBOX_ERR_STATE;
	}
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
			out[i].id = sl->text.data + sl->refused_at;
		if (sl->headers_at >= 0)
			out[i].headers = sl->text.data + sl->headers_at;
		if (sl->position_at >= 0)
			out[i].position = sl->text.data + sl->position_at;
	}
	if (k > 0) {
		ns->polled = 1;
		inbox__nats_ka_begin(ns);
	}
	*n = k;
	return INBOX_OK;
}

static int batch_matches(const nats_source *ns, const inbox_delivery *d,
                         size_t n)
{
	if (n != ns->nbatch)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (d[i].source_token != i)
			return 0;
	return 1;
}

/* Settle one message; the natsStatus of the broker call. */
static natsStatus settle_one(nats_source *ns, natsMsg *m, const inbox_result *r,
                             int confirm, const char **what)
{
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = ns->ack_timeout_ms;
	if (!r || !inbox_outcome_ackable(r->outcome)) {
		*what = "nak";
		if (ns->retry_delay_ms > 0)
			return natsMsg_NakWithDelay(m, ns->retry_delay_ms,
			                            NULL);
		return natsMsg_Nak(m, NULL);
	}
	if (r->outcome == INBOX_DEAD_LETTERED || r->outcome == INBOX_CONFLICT) {
		/* Dead-lettered in the store already: never redeliver. */
		*what = "term";
		return natsMsg_Term(m, confirm ? &jo : NULL);
	}
	*what = "ack";
	if (!confirm)
		return natsMsg_Ack(m, NULL);
	jsErrCode jerr = 0;
	return natsMsg_AckSync(m, &jo, &jerr);
}

static int ns_settle(inbox_source *src, const inbox_delivery *d,
                     const inbox_result *res, size_t n)
{
	nats_source *ns = (nats_source *)src;
	int rc = INBOX_OK;
	if (!ns->polled) {
		if (n == 0)
			return INBOX_OK;
		inbox__source_seterr(src, "nats: settle without a polled "
		                          "batch");
		return INBOX_ERR_STATE;
	}
	inbox__nats_ka_end(ns);
	if (!batch_matches(ns, d, n)) {
		inbox__source_seterr(src,
		                     "nats: settle does not match the "
		                     "last poll (%zu deliveries, %zu "
		                     "polled): all redelivered",
		                     n, ns->nbatch);
		rc = INBOX_ERR_INVALID;
		res = NULL;
	}
	size_t failed = 0;
	int confirm = 1;
	char first[400] = "";
	for (size_t i = 0; i < ns->nbatch; i++) {
		nats_slot *sl = &ns->slots[i];
		const char *what = "ack";
		natsStatus s = settle_one(ns, sl->msg, res ? &res[i] : NULL,
		                          confirm, &what);
		if (s != NATS_OK) {
			failed++;
			if (!first[0]) {
				char t[300];
				inbox__nats_errtext(ns, s, t, sizeof(t));
				snprintf(first, sizeof(first), "%s %s: %s",
				         what,
				         sl->position_at >= 0
				             ? sl->text.data + sl->position_at
				             : "?",
				         t);
			}
			/* Do not wait ack_timeout for each of the others. */
			if (s == NATS_TIMEOUT || !connected(ns))
				confirm = 0;
		}
		natsMsg_Destroy(sl->msg);
		sl->msg = NULL;
	}
	if (failed && rc == INBOX_OK) {
		inbox__source_seterr(src,
		                     "nats: %zu of %zu settlements failed "
		                     "(redelivered after ack_wait, then "
		                     "dropped as duplicates); first: %s",
		                     failed, ns->nbatch, first);
		rc = INBOX_ERR_SOURCE;
	}
	ns->nbatch = 0;
	ns->polled = 0;
	return rc;
}

const inbox_source_vtable inbox__nats_source = {
    INBOX_SOURCE_VTABLE_VERSION, "nats", ns_open, ns_close, ns_poll, ns_settle,
};
