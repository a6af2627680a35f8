/*
 * The plain NATS JetStream loop (cnats): a durable pull consumer (explicit
 * acks, as the source creates it), natsSubscription_Fetch of BATCH, the
 * batch through libpq, then natsMsg_Ack for each message.
 */
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plain_sources.h"
#include "workload.h"

static int nbad(natsStatus s, const char *what)
{
	if (s == NATS_OK)
		return 0;
	fprintf(stderr, "plain_sources: nats %s: %s (%s)\n", what,
	        natsStatus_GetText(s), nats_GetLastError(NULL));
	return 1;
}

static int connect_js(const char *url, natsConnection **nc, jsCtx **js)
{
	if (nbad(natsConnection_ConnectTo(nc, url), "connect"))
		return -1;
	if (nbad(natsConnection_JetStream(js, *nc, NULL), "JetStream"))
		return -1;
	return 0;
}

int ps_nats_load(const char *url, const char *name, long n)
{
	natsConnection *nc;
	jsCtx *js;
	if (connect_js(url, &nc, &js) < 0)
		return -1;
	char subj[300];
	snprintf(subj, sizeof(subj), "%s.>", name);
	const char *subjects[1] = {subj};
	jsStreamConfig sc;
	jsStreamConfig_Init(&sc);
	sc.Name = name;
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.Storage = js_FileStorage;
	jsErrCode jerr = 0;
	natsStatus s = js_AddStream(NULL, js, &sc, NULL, &jerr);
	if (s != NATS_OK && jerr != JSStreamNameExistErr &&
	    nbad(s, "add stream"))
		return -1;
	snprintf(subj, sizeof(subj), "%s.orders", name);
	wl_msg m;
	for (long i = 0; i < n; i++) {
		wl_message(i, &m);
		/* No Nats-Msg-Id: the server would drop the workload's
		 * redeliveries as duplicates of theirs. */
		if (nbad(js_PublishAsync(js, subj, m.json, m.len, NULL),
		         "publish"))
			return -1;
	}
	jsPubOptions po;
	jsPubOptions_Init(&po);
	po.MaxWait = 60000;
	if (nbad(js_PublishAsyncComplete(js, &po), "publish complete"))
		return -1;
	natsMsgList pending = {0};
	if (js_PublishAsyncGetPendingList(&pending, js) == NATS_OK) {
		fprintf(stderr, "plain_sources: %d publishes failed\n",
		        pending.Count);
		natsMsgList_Destroy(&pending);
		return -1;
	}
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return 0;
}

int ps_nats_run(const char *url, const char *name, const char *group, ps_pg *pg,
                long n, int batch)
{
	natsConnection *nc;
	jsCtx *js;
	if (connect_js(url, &nc, &js) < 0)
		return -1;
	jsConsumerConfig cc;
	jsConsumerConfig_Init(&cc);
	cc.Durable = group;
	cc.DeliverPolicy = js_DeliverAll;
	cc.AckPolicy = js_AckExplicit;
	cc.AckWait = (int64_t)30000 * 1000000;
	cc.MaxAckPending = 1000;
	jsErrCode jerr = 0;
	if (nbad(js_AddConsumer(NULL, js, name, &cc, NULL, &jerr),
	         "add consumer"))
		return -1;
	jsSubOptions so;
	jsSubOptions_Init(&so);
	so.Stream = name;
	so.Consumer = group;
	natsSubscription *sub = NULL;
	if (nbad(js_PullSubscribe(&sub, js, NULL, group, NULL, &so, &jerr),
	         "pull subscribe"))
		return -1;
	int rc = 0;
	while (ps_pg_messages(pg) < n && rc == 0) {
		natsMsgList list = {0};
		natsStatus s =
		    natsSubscription_Fetch(&list, sub, batch, 100, &jerr);
		if (s == NATS_TIMEOUT)
			continue;
		if (nbad(s, "fetch"))
			return -1;
		for (int i = 0; i < list.Count; i++)
			if (ps_pg_add(pg, natsMsg_GetData(list.Msgs[i]),
			              (size_t)natsMsg_GetDataLength(
			                  list.Msgs[i])) < 0)
				rc = -1;
		ps_pg_flush(pg);
		/* after the commit */
		for (int i = 0; i < list.Count; i++)
			if (nbad(natsMsg_Ack(list.Msgs[i], NULL), "ack"))
				rc = -1;
		natsMsgList_Destroy(&list);
	}
	natsConnection_FlushTimeout(nc, 5000);
	natsSubscription_Destroy(sub);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return rc;
}
