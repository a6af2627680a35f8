/*
 * A small JetStream tool for the NATS daemon tests.
 *
 *   nats_publish pub URL STREAM FILE ID_PREFIX
 *       Create STREAM (subjects "STREAM.>", file storage) if absent, then
 *       publish each line of FILE to STREAM.orders with the header
 *       Nats-Msg-Id = ID_PREFIX-LINENO (unique per publish, so the
 *       server's own de-duplication never hides the test's duplicates:
 *       they are detected by the inbox from the payload's business key).
 *       Prints "LINENO SEQ" per message (the stream sequence). A publish
 *       that fails (server restarting) is retried for up to 60 s.
 *   nats_publish info URL STREAM DURABLE
 *       Print the durable's state: "pending=N ack_pending=N
 *       redelivered=N delivered=N ack_floor=N".
 * With NATS_TLS_CA set (and NATS_TLS_CERT and NATS_TLS_KEY, a client
 * certificate, when the server wants one), it connects over TLS with that
 * CA (the TLS tests).
 * Exit 0 on success, 1 on failure (with a message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../clock.h"
#include <nats/nats.h>

static natsConnection *nc;
static jsCtx *js;

static void die(const char *what, natsStatus s)
{
	fprintf(stderr, "nats_publish: %s: %s (%s)\n", what,
	        natsStatus_GetText(s), nats_GetLastError(NULL));
	exit(1);
}

static void connect_to(const char *url)
{
	natsOptions *o = NULL;
	natsStatus s = natsOptions_Create(&o);
	if (s == NATS_OK)
		s = natsOptions_SetURL(o, url);
	if (s == NATS_OK)
		s = natsOptions_SetMaxReconnect(o, -1);
	if (s == NATS_OK)
		s = natsOptions_SetReconnectWait(o, 100);
	const char *ca = getenv("NATS_TLS_CA"), *cert = getenv("NATS_TLS_CERT"),
	           *key = getenv("NATS_TLS_KEY");
	if (s == NATS_OK && ca)
		s = natsOptions_SetSecure(o, true);
	if (s == NATS_OK && ca)
		s = natsOptions_LoadCATrustedCertificates(o, ca);
	if (s == NATS_OK && ca && cert && key)
		s = natsOptions_LoadCertificatesChain(o, cert, key);
	if (s == NATS_OK)
		s = natsConnection_Connect(&nc, o);
	natsOptions_Destroy(o);
	if (s != NATS_OK)
		die("connect", s);
	s = natsConnection_JetStream(&js, nc, NULL);
	if (s != NATS_OK)
		die("jetstream", s);
}

static void ensure_stream(const char *stream)
{
	jsStreamInfo *si = NULL;
	jsErrCode jerr = 0;
	if (js_GetStreamInfo(&si, js, stream, NULL, &jerr) == NATS_OK) {
		jsStreamInfo_Destroy(si);
		return;
	}
	char subj[256];
	snprintf(subj, sizeof(subj), "%s.>", stream);
	const char *subjects[1] = {subj};
	jsStreamConfig sc;
	jsStreamConfig_Init(&sc);
	sc.Name = stream;
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.Storage = js_FileStorage;
	natsStatus s = js_AddStream(NULL, js, &sc, NULL, &jerr);
	if (s != NATS_OK)
		die("add stream", s);
}

static int publish_file(const char *stream, const char *path,
                        const char *prefix)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		return 1;
	}
	char subj[256];
	snprintf(subj, sizeof(subj), "%s.orders", stream);
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long lineno = 0;
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		while (len > 0 &&
		       (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		char id[128];
		snprintf(id, sizeof(id), "%s-%ld", prefix, lineno);
		jsPubAck *pa = NULL;
		natsStatus s = NATS_OK;
		for (int tries = 0; tries < 600; tries++) {
			natsMsg *m = NULL;
			s = natsMsg_Create(&m, subj, NULL, line, (int)len);
			if (s == NATS_OK)
				s = natsMsgHeader_Set(m, "Nats-Msg-Id", id);
			if (s == NATS_OK)
				s = js_PublishMsg(&pa, js, m, NULL, NULL);
			natsMsg_Destroy(m);
			if (s == NATS_OK)
				break;
			sleep_ms(100);
		}
		if (s != NATS_OK)
			die("publish", s);
		printf("%ld %llu\n", lineno, (unsigned long long)pa->Sequence);
		jsPubAck_Destroy(pa);
	}
	free(line);
	fclose(f);
	return 0;
}

static int info(const char *stream, const char *durable)
{
	jsConsumerInfo *ci = NULL;
	jsErrCode jerr = 0;
	natsStatus s =
	    js_GetConsumerInfo(&ci, js, stream, durable, NULL, &jerr);
	if (s != NATS_OK)
		die("consumer info", s);
	printf("pending=%llu ack_pending=%lld redelivered=%lld delivered=%llu "
	       "ack_floor=%llu\n",
	       (unsigned long long)ci->NumPending, (long long)ci->NumAckPending,
	       (long long)ci->NumRedelivered,
	       (unsigned long long)ci->Delivered.Stream,
	       (unsigned long long)ci->AckFloor.Stream);
	jsConsumerInfo_Destroy(ci);
	return 0;
}

int main(int argc, char **argv)
{
	int rc;
	if (argc == 6 && strcmp(argv[1], "pub") == 0) {
		connect_to(argv[2]);
		ensure_stream(argv[3]);
		rc = publish_file(argv[3], argv[4], argv[5]);
	} else if (argc == 5 && strcmp(argv[1], "info") == 0) {
		connect_to(argv[2]);
		rc = info(argv[3], argv[4]);
	} else {
		fprintf(stderr, "usage: nats_publish pub URL STREAM FILE "
		                "ID_PREFIX | info URL STREAM DURABLE\n");
		return 2;
	}
	fflush(stdout);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	nats_Close();
	return rc;
}
