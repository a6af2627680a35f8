/*
 * kafka-produce: produce the lines of a file (or stdin) to a topic, one
 * message per line, and exit 0 only once every message was delivered
 * (acknowledged by the broker).
 *
 *   kafka-produce [options] BOOTSTRAP TOPIC [FILE]
 *
 *   -K, --key-column     each line starts with "KEY<TAB>": the message key
 *   -i, --id-column      each line (after the key column, if any) starts
 *                        with "ID<TAB>": ID becomes the id header
 *   -n, --id-header NAME header name for -i (default "message-id")
 *   -H, --header N=V     add header N with value V to every message
 *                        (repeatable)
 *   -p, --partition P    produce to partition P (default: by key, or the
 *                        partitioner's choice)
 *   -r, --rate N         at most N messages a second, evenly paced (a
 *                        stream that arrives while consumers run;
 *                        default 0: as fast as possible)
 *   -q, --quiet          no summary on stderr
 *
 * Empty lines are skipped. Exit status: 0 all delivered, 1 a delivery
 * failed or timed out (30 s), 2 bad arguments or unreadable input.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../clock.h"
#include <librdkafka/rdkafka.h>

#define MAX_HEADERS 16

typedef struct opts {
	int key_col, id_col, quiet;
	long rate; /* messages a second, 0: no limit */
	const char *id_header;
	const char *hname[MAX_HEADERS], *hval[MAX_HEADERS];
	int nheaders;
	int32_t partition;
	const char *bootstrap, *topic, *file;
} opts;

static long delivered, failed;

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	if (m->err) {
		failed++;
		fprintf(stderr, "kafka-produce: delivery failed: %s\n",
		        rd_kafka_err2str(m->err));
	} else {
		delivered++;
	}
}

static void usage(void)
{
	fprintf(stderr,
	        "usage: kafka-produce [-K] [-i] [-n NAME] [-H N=V]... [-p P] "
	        "[-r N] [-q] BOOTSTRAP TOPIC [FILE]\n");
}

static int parse_args(int argc, char **argv, opts *o)
{
	int pos = 0;
	memset(o, 0, sizeof(*o));
	o->id_header = "message-id";
	o->partition = RD_KAFKA_PARTITION_UA;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-K") || !strcmp(a, "--key-column")) {
			o->key_col = 1;
		} else if (!strcmp(a, "-i") || !strcmp(a, "--id-column")) {
			o->id_col = 1;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			o->quiet = 1;
		} else if ((!strcmp(a, "-n") || !strcmp(a, "--id-header")) &&
		           i + 1 < argc) {
			o->id_header = argv[++i];
		} else if ((!strcmp(a, "-p") || !strcmp(a, "--partition")) &&
		           i + 1 < argc) {
			o->partition = (int32_t)atoi(argv[++i]);
		} else if ((!strcmp(a, "-r") || !strcmp(a, "--rate")) &&
		           i + 1 < argc) {
			char *end;
			o->rate = strtol(argv[++i], &end, 10);
			if (*end || o->rate < 0)
				return -1;
		} else if ((!strcmp(a, "-H") || !strcmp(a, "--header")) &&
		           i + 1 < argc) {
			char *eq = strchr(argv[++i], '=');
			if (!eq || o->nheaders == MAX_HEADERS)
				return -1;
			*eq = '\0';
			o->hname[o->nheaders] = argv[i];
			o->hval[o->nheaders++] = eq + 1;
		} else if (a[0] == '-' && a[1]) {
			return -1;
		} else if (pos == 0) {
			o->bootstrap = a, pos++;
		} else if (pos == 1) {
			o->topic = a, pos++;
		} else if (pos == 2) {
			o->file = a, pos++;
		} else {
			return -1;
		}
	}
	return pos >= 2 ? 0 : -1;
}

/* Split "COL<TAB>rest": *col = line, returns rest, or NULL if no tab. */
static char *cut_column(char *line, char **col)
{
	char *tab = strchr(line, '\t');
	if (!tab)
		return NULL;
	*tab = '\0';
	*col = line;
	return tab + 1;
}

static int produce_line(rd_kafka_t *rk, const opts *o, char *line)
{
	char *key = NULL, *id = NULL, *payload = line;
	if (o->key_col && !(payload = cut_column(payload, &key)))
		return -1;
	if (o->id_col && !(payload = cut_column(payload, &id)))
		return -1;
	rd_kafka_headers_t *h = rd_kafka_headers_new(o->nheaders + 1);
	for (int i = 0; i < o->nheaders; i++)
		rd_kafka_header_add(h, o->hname[i], -1, o->hval[i], -1);
	if (id)
		rd_kafka_header_add(h, o->id_header, -1, id, -1);
	for (;;) {
		rd_kafka_resp_err_t err = rd_kafka_producev(
		    rk, RD_KAFKA_V_TOPIC(o->topic),
		    RD_KAFKA_V_PARTITION(o->partition),
		    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		    RD_KAFKA_V_VALUE(payload, strlen(payload)),
		    RD_KAFKA_V_KEY(key, key ? strlen(key) : 0),
		    RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
		if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(rk, 100);
			continue;
		}
		if (err) {
			/* headers are still ours on failure */
			rd_kafka_headers_destroy(h);
			fprintf(stderr, "kafka-produce: %s\n",
			        rd_kafka_err2str(err));
			return -2;
		}
		return 0;
	}
}

/* With a rate, wait until message n (from 0) is due, serving delivery
 * reports meanwhile. */
static void pace(rd_kafka_t *rk, const opts *o, int64_t start, long n)
{
	if (o->rate <= 0)
		return;
	int64_t due = start + (int64_t)n * 1000 / o->rate;
	int64_t now;
	while ((now = now_ms()) < due)
		rd_kafka_poll(rk, (int)(due - now));
}

static rd_kafka_t *make_producer(const opts *o)
{
	char err[512];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	if (rd_kafka_conf_set(conf, "bootstrap.servers", o->bootstrap, err,
	                      sizeof(err)) != RD_KAFKA_CONF_OK ||
	    rd_kafka_conf_set(conf, "linger.ms", "5", err, sizeof(err)) !=
	        RD_KAFKA_CONF_OK ||
	    rd_kafka_conf_set(conf, "acks", "all", err, sizeof(err)) !=
	        RD_KAFKA_CONF_OK) {
		fprintf(stderr, "kafka-produce: %s\n", err);
		rd_kafka_conf_destroy(conf);
		return NULL;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
	rd_kafka_t *rk =
	    rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "kafka-produce: %s\n", err);
		rd_kafka_conf_destroy(conf);
	}
	return rk;
}

int main(int argc, char **argv)
{
	opts o;
	if (parse_args(argc, argv, &o) < 0) {
		usage();
		return 2;
	}
	FILE *in = stdin;
	if (o.file && strcmp(o.file, "-") != 0 && !(in = fopen(o.file, "r"))) {
		fprintf(stderr, "kafka-produce: %s: %s\n", o.file,
		        strerror(errno));
		return 2;
	}
	rd_kafka_t *rk = make_producer(&o);
	if (!rk)
		return 2;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long produced = 0, lineno = 0;
	int rc = 0;
	int64_t start = now_ms();
	while (rc == 0 && (len = getline(&line, &cap, in)) >= 0) {
		lineno++;
		while (len > 0 &&
		       (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0)
			continue;
		pace(rk, &o, start, produced);
		int r = produce_line(rk, &o, line);
		if (r == -1) {
			fprintf(stderr,
			        "kafka-produce: line %ld lacks a "
			        "<TAB> column\n",
			        lineno);
			rc = 2;
		} else if (r < 0) {
			rc = 1;
		} else {
			produced++;
		}
		rd_kafka_poll(rk, 0);
	}
	free(line);
	if (in != stdin)
		fclose(in);
	rd_kafka_flush(rk, 30000);
	rd_kafka_poll(rk, 0);
	if (rc == 0 && (failed || delivered != produced))
		rc = 1;
	if (!o.quiet)
		fprintf(stderr,
		        "kafka-produce: %ld produced, %ld delivered, "
		        "%ld failed\n",
		        produced, delivered, failed);
	rd_kafka_destroy(rk);
	return rc;
}
