/*
 * kafka-mock: a throwaway Kafka cluster for tests, served by librdkafka's
 * mock cluster (the real protocol on loopback; no broker package exists).
 *
 *   kafka-mock [--brokers N] [--stdin-lifetime] TOPIC:PARTITIONS ...
 *
 * Starts N brokers (default 3), creates the topics, prints one line
 *   bootstrap=HOST:PORT,HOST:PORT,...
 * on stdout, flushes, and runs until SIGTERM or SIGINT (or, with
 * --stdin-lifetime, until its standard input closes — so it dies with the
 * test that holds the pipe). Exit status 0 on a clean stop, 2 on bad
 * arguments, 1 if the cluster could not be started.
 *
 * With --stdin-lifetime, lines written to standard input are commands:
 *   down   every broker closes its connections and refuses new ones (an
 *          outage of the whole cluster; the topics and the committed
 *          offsets are kept, as by brokers that fsync their logs)
 *   up     the brokers accept connections again
 * Each command is answered by the same word on stdout (flushed) once it
 * took effect; an unknown line is answered "error LINE".
 *
 * Mock cluster quirks worth knowing: the admin API (CreateTopics) is not
 * supported (topics come from the command line, or are auto-created with
 * the broker default partition count); the first consumer group join
 * waits ~3 s (group.initial.rebalance.delay.ms); later rebalances wait up
 * to session.timeout.ms - 1 s for members to rejoin, so tests should set a
 * short rdkafka.session.timeout.ms. Every JoinGroup starts a rebalance
 * again, even one from a member already in the group. Static membership
 * (KIP-345) is not implemented: librdkafka 2.0.2's mock reads a
 * JoinGroup's group.instance.id and drops it (rdkafka_mock_cgrp.c finds
 * members by member id only), so a restarted static member joins as a new
 * member and its old self stays until its session times out, as a dynamic
 * one would. (Later mocks use the id only to elect the leader, and
 * implement static membership only for the KIP-848 protocol.)
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: kafka-mock [--brokers N] [--stdin-lifetime] "
	                "TOPIC:PARTITIONS ...\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

/* One command line from stdin (see the top of the file). */
static void command(rd_kafka_mock_cluster_t *mc, const char *line)
{
	rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
	if (strcmp(line, "down") == 0)
		err = rd_kafka_mock_broker_set_down(mc, -1);
	else if (strcmp(line, "up") == 0)
		err = rd_kafka_mock_broker_set_up(mc, -1);
	else if (*line)
		err = RD_KAFKA_RESP_ERR__INVALID_ARG;
	else
		return;
	if (err)
		printf("error %s\n", line);
	else
		printf("%s\n", line);
	fflush(stdout);
}

/* Wait for a signal, or for EOF on stdin when watch_stdin (running the
 * commands read meanwhile). */
static void wait_for_stop(rd_kafka_mock_cluster_t *mc, int watch_stdin)
{
	char line[64];
	size_t len = 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	while (!stop_flag) {
		struct pollfd pfd = {STDIN_FILENO, POLLIN, 0};
		int r = poll(&pfd, watch_stdin ? 1 : 0, 200);
		if (r > 0 && watch_stdin) {
			char buf[256];
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
			if (n == 0 ||
			    (n < 0 && errno != EINTR && errno != EAGAIN))
				break;
			for (ssize_t k = 0; k < n; k++) {
				if (buf[k] == '\n') {
					line[len] = '\0';
					command(mc, line);
					len = 0;
				} else if (len + 1 < sizeof(line)) {
					line[len++] = buf[k];
				}
			}
		}
	}
}

static int create_topics(rd_kafka_mock_cluster_t *mc, int argc, char **argv,
                         int first, int brokers)
{
	for (int i = first; i < argc; i++) {
		char *colon = strrchr(argv[i], ':');
		int parts;
		if (!colon || colon == argv[i] ||
		    parse_int(colon + 1, 1, 10000, &parts) < 0) {
			fprintf(stderr,
			        "kafka-mock: bad topic spec \"%s\" "
			        "(want TOPIC:PARTITIONS)\n",
			        argv[i]);
			return 2;
		}
		*colon = '\0';
		rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(
		    mc, argv[i], parts, brokers < 3 ? brokers : 3);
		if (err) {
			fprintf(stderr, "kafka-mock: create topic %s: %s\n",
			        argv[i], rd_kafka_err2str(err));
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	int brokers = 3, watch_stdin = 0, i = 1;
	char err[512];
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--brokers") == 0 && i + 1 < argc) {
			if (parse_int(argv[++i], 1, 64, &brokers) < 0) {
				usage();
				return 2;
			}
		} else if (strcmp(argv[i], "--stdin-lifetime") == 0) {
			watch_stdin = 1;
		} else {
			usage();
			return 2;
		}
	}
	/* The mock cluster needs a handle for its book-keeping; it serves
	 * any client on its loopback listeners. */
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	rd_kafka_conf_set(conf, "log_level", "3", NULL, 0);
	rd_kafka_t *rk =
	    rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!rk) {
		fprintf(stderr, "kafka-mock: %s\n", err);
		rd_kafka_conf_destroy(conf);
		return 1;
	}
	rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, brokers);
	if (!mc) {
		fprintf(stderr, "kafka-mock: cannot start the mock cluster\n");
		rd_kafka_destroy(rk);
		return 1;
	}
	int rc = create_topics(mc, argc, argv, i, brokers);
	if (rc == 0) {
		printf("bootstrap=%s\n", rd_kafka_mock_cluster_bootstraps(mc));
		fflush(stdout);
		wait_for_stop(mc, watch_stdin);
	}
	rd_kafka_mock_cluster_destroy(mc);
	rd_kafka_destroy(rk);
	return rc;
}
