/*
 * Kafka source: who this member is in its group — static membership
 * (KIP-345, group.instance.id) and what it takes to leave the group
 * without tripping librdkafka. See kafka.h ("Group membership").
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/json.h"
#include "base/log.h"
#include "source/kafka/kafka.h"

/* Kafka's rule for a group.instance.id (as for a topic name): 1 to 249
 * of [A-Za-z0-9._-]. */
#define ID_MAX 249
/* Derived ids: how many daemons of one consumer one host may run. */
#define MAX_SLOTS 100

static int id_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

int inbox__kafka_valid_instance_id(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!id_char((unsigned char)s[i]))
			return 0;
	return 1;
}

/* Append s with every character Kafka refuses in an id made '_'. */
static int put_clean(inbox__buf *b, const char *s)
{
	for (; *s; s++)
		if (inbox__buf_putc(b, id_char((unsigned char)*s) ? *s : '_') <
		    0)
			return -1;
	return 0;
}

/* "HOST-CONSUMER"; one that would be too long (with room for a slot
 * suffix) keeps its head and ends with a hash of the whole. */
static int derive_base(inbox__buf *b, const char *consumer)
{
	char host[256];
	if (gethostname(host, sizeof(host)) != 0 || !host[0])
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = '\0';
	if (put_clean(b, host) < 0 || inbox__buf_putc(b, '-') < 0 ||
	    put_clean(b, consumer) < 0)
		return -1;
	if (b->len > ID_MAX - 4) {
		char hex[65];
		inbox__sha256_hex(b->data, b->len, hex);
		if (!hex[0]) /* OpenSSL out of memory */
			return -1;
		b->len = ID_MAX - 4 - 17;
		b->data[b->len] = '\0';
		if (inbox__buf_printf(b, "-%.16s", hex) < 0)
			return -1;
	}
	return 0;
}

/* Hold the name of (group, id) on this host: an abstract Unix socket
 * bound to a hash of it. The kernel releases it when the process dies,
 * however it dies, so a restarted daemon finds its id free again, while
 * two live ones never share one. Returns the fd, -1 if the name is held
 * by another process, -2 if names cannot be held here (then ids are not
 * checked for duplicates on this host), -3 when memory ran out (a name
 * hashed from nothing would be every id's). */
static int hold_name(const char *group, const char *id)
{
#ifdef __linux__
	inbox__buf key = INBOX__BUF_INIT;
	char hex[65];
	if (inbox__buf_printf(&key, "%s\n%s", group, id) < 0)
		return -3;
	inbox__sha256_hex(key.data, key.len, hex);
	inbox__buf_free(&key);
	if (!hex[0])
		return -3;
	struct sockaddr_un a;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	/* sun_path[0] = '\0': the abstract namespace, no file anywhere */
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1,
	                 "libinbox/kafka-member/%.64s", hex);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -2;
	socklen_t len =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	if (bind(fd, (struct sockaddr *)&a, len) == 0)
		return fd;
	int e = errno;
	close(fd);
	return e == EADDRINUSE ? -1 : -2;
#else
	(void)group;
	(void)id;
	return -2;
#endif
}

/* The first of HOST-CONSUMER, HOST-CONSUMER-1, ... that no other live
 * process on this host holds for this group. */
static int derive(kafka_source *ks, const char *group, const char *consumer,
                  inbox__buf *id)
{
	inbox__buf base = INBOX__BUF_INIT;
	int rc = INBOX_ERR_NOMEM;
	if (derive_base(&base, consumer) < 0)
		goto out;
	for (int slot = 0; slot < MAX_SLOTS; slot++) {
		inbox__buf_reset(id);
		if (inbox__buf_puts(id, base.data) < 0 ||
		    (slot > 0 && inbox__buf_printf(id, "-%d", slot) < 0))
			goto out;
		int fd = hold_name(group, id->data);
		if (fd == -3)
			goto out; /* NOMEM */
		if (fd == -1)
			continue;
		ks->member_name_fd = fd; /* -2: unchecked, still ours */
		rc = INBOX_OK;
		goto out;
	}
	inbox__source_seterr(&ks->base,
	                     "kafka: %d members of consumer \"%.100s\" already "
	                     "run on this host: set instance_id= in the URL",
	                     MAX_SLOTS, consumer);
	rc = INBOX_ERR_CONFIG;
out:
	inbox__buf_free(&base);
	return rc;
}

int inbox__kafka_member_setup(kafka_source *ks, rd_kafka_conf_t *conf,
                              const char *consumer)
{
	char group[512], given[512];
	size_t n = sizeof(group), m = sizeof(given);
	int rc = INBOX_OK;
	if (rd_kafka_conf_get(conf, "group.id", group, &n) != RD_KAFKA_CONF_OK)
		group[0] = '\0';
	if (rd_kafka_conf_get(conf, "group.instance.id", given, &m) ==
	        RD_KAFKA_CONF_OK &&
	    given[0]) {
		/* rdkafka.group.instance.id=ID: taken as it is */
		free(ks->instance_id);
		if (!(ks->instance_id = strdup(given)))
			return INBOX_ERR_NOMEM;
	} else if (ks->instance_given && !ks->instance_id) {
		return INBOX_OK; /* instance_id= (empty): dynamic membership */
	} else if (!ks->instance_given) {
		inbox__buf id = INBOX__BUF_INIT;
		rc = derive(ks, group, consumer, &id);
		if (rc < 0) {
			inbox__buf_free(&id);
			return rc;
		}
		ks->instance_id = id.data; /* ours now */
	}
	char err[256];
	if (rd_kafka_conf_set(conf, "group.instance.id", ks->instance_id, err,
	                      sizeof(err)) != RD_KAFKA_CONF_OK) {
		inbox__source_seterr(&ks->base, "kafka: group.instance.id: %s",
		                     err);
		return INBOX_ERR_URL;
	}
	inbox__log(INBOX_LOG_INFO, consumer,
	           "\"event\":\"kafka_member\",\"group\":\"%s\","
	           "\"instance_id\":\"%s\"",
	           inbox__log_escape(group),
	           inbox__log_escape(ks->instance_id));
	return rc;
}

void inbox__kafka_member_release(kafka_source *ks)
{
	if (ks->member_name_fd >= 0)
		close(ks->member_name_fd);
	ks->member_name_fd = -1;
	free(ks->instance_id);
	ks->instance_id = NULL;
}

void inbox__kafka_note_fatal(kafka_source *ks)
{
	char why[256];
	rd_kafka_resp_err_t err =
	    rd_kafka_fatal_error(ks->rk, why, sizeof(why));
	ks->fatal = 1;
	if (err == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID)
		inbox__source_seterr(
		    &ks->base,
		    "kafka: fatal: another member joined the group with this "
		    "member's group.instance.id \"%s\" (two consumers with one "
		    "instance_id?): %s",
		    ks->instance_id ? ks->instance_id : "", why);
	else
		inbox__source_seterr(&ks->base, "kafka: fatal: %s",
		                     err ? why : "unknown");
}

/* librdkafka before 2.3.0 aborts in rd_kafka_destroy() when a JoinGroup
 * chose the cooperative-sticky assignor but no SyncGroup ever gave this
 * member an assignment (librdkafka issue 4312: the assignor's state is
 * still NULL and its destroy asserts it is not). The rebalance protocol
 * reads "COOPERATIVE" exactly when an assignor was chosen; every
 * assignment, even an empty one, reaches the rebalance callback, which
 * sets assigned_once. Asked before rd_kafka_consumer_close() (after it
 * the group no longer answers); once closing, librdkafka ignores
 * JoinGroup responses, so no assignor is chosen later. */
int inbox__kafka_destroy_would_abort(const kafka_source *ks)
{
	if (rd_kafka_version() >= 0x020300ff || ks->assigned_once)
		return 0;
	const char *proto = rd_kafka_rebalance_protocol(ks->rk);
	return proto && strcmp(proto, "COOPERATIVE") == 0;
}
