/*
 * amqp-publish: a small RabbitMQ client for the tests.
 *
 *   amqp-publish URL publish QUEUE [--message-id-prefix P]
 *       Declare QUEUE (durable) and publish every line of stdin to it as
 *       one persistent message, in confirm mode: exit 0 only when the
 *       broker confirmed them all. With --message-id-prefix, message i
 *       (from 1) gets the message-id property P + i.
 *   amqp-publish URL count QUEUE
 *       Print "READY CONSUMERS" of QUEUE (exit 1 if it does not exist).
 *   amqp-publish URL delete QUEUE...
 *       Delete the queues.
 *   amqp-publish URL take QUEUE N
 *       Get N messages without acking them and disconnect: the broker
 *       requeues them marked redelivered.
 *
 * URL: amqp://USER:PASS@HOST:PORT/VHOST (VHOST percent-encoded, %2f).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

static amqp_connection_state_t conn;

static int die(const char *what, amqp_rpc_reply_t r)
{
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
	    r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
		amqp_channel_close_t *m = r.reply.decoded;
		fprintf(stderr, "amqp-publish: %s: %u %.*s\n", what,
		        m->reply_code, (int)m->reply_text.len,
		        (char *)m->reply_text.bytes);
	} else if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
		fprintf(stderr, "amqp-publish: %s: %s\n", what,
		        amqp_error_string2(r.library_error));
	} else {
		fprintf(stderr, "amqp-publish: %s failed (%d)\n", what,
		        (int)r.reply_type);
	}
	return 1;
}

static int connect_url(const char *url)
{
	char *copy = strdup(url);
	struct amqp_connection_info ci;
	if (!copy || amqp_parse_url(copy, &ci) != AMQP_STATUS_OK) {
		fprintf(stderr, "amqp-publish: bad URL\n");
		return -1;
	}
	conn = amqp_new_connection();
	amqp_socket_t *sock = amqp_tcp_socket_new(conn);
	struct timeval tv = {10, 0};
	int st = sock ? amqp_socket_open_noblock(sock, ci.host, ci.port, &tv)
	              : AMQP_STATUS_NO_MEMORY;
	if (st != AMQP_STATUS_OK) {
		fprintf(stderr, "amqp-publish: connect %s:%d: %s\n", ci.host,
		        ci.port, amqp_error_string2(st));
		free(copy);
		return -1;
	}
	amqp_rpc_reply_t r =
	    amqp_login(conn, ci.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN,
	               ci.user, ci.password);
	free(copy);
	if (r.reply_type != AMQP_RESPONSE_NORMAL)
		return -die("login", r);
	amqp_channel_open(conn, 1);
	r = amqp_get_rpc_reply(conn);
	if (r.reply_type != AMQP_RESPONSE_NORMAL)
		return -die("channel.open", r);
	return 0;
}

/* Confirms seen: acked[i] for sequence number i; *confirmed = the highest
 * n such that 1..n are all acked. */
static unsigned char *acked;
static size_t nacked;

static int mark(uint64_t from, uint64_t to)
{
	if (to >= nacked) {
		size_t n = (size_t)to * 2 + 1024;
		unsigned char *p = realloc(acked, n);
		if (!p)
			return -1;
		memset(p + nacked, 0, n - nacked);
		acked = p;
		nacked = n;
	}
	for (uint64_t i = from; i <= to; i++)
		acked[i] = 1;
	return 0;
}

/* Wait until sequence numbers 1..last are all confirmed. */
static int wait_confirms(uint64_t last, uint64_t *confirmed)
{
	while (*confirmed < last) {
		amqp_frame_t f;
		struct timeval tv = {30, 0};
		int st = amqp_simple_wait_frame_noblock(conn, &f, &tv);
		if (st != AMQP_STATUS_OK) {
			fprintf(stderr,
			        "amqp-publish: waiting for confirms: %s\n",
			        amqp_error_string2(st));
			return -1;
		}
		if (f.frame_type != AMQP_FRAME_METHOD)
			continue;
		if (f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
			amqp_basic_ack_t *a = f.payload.method.decoded;
			uint64_t from =
			    a->multiple ? *confirmed + 1 : a->delivery_tag;
			if (a->delivery_tag >= from &&
			    mark(from, a->delivery_tag) < 0)
				return -1;
			while (*confirmed + 1 < nacked && acked[*confirmed + 1])
				(*confirmed)++;
		} else if (f.payload.method.id == AMQP_BASIC_NACK_METHOD) {
			fprintf(stderr,
			        "amqp-publish: broker nacked a message\n");
			return -1;
		} else if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
		           f.payload.method.id ==
		               AMQP_CONNECTION_CLOSE_METHOD) {
			fprintf(stderr, "amqp-publish: closed by the broker\n");
			return -1;
		}
	}
	return 0;
}

static int publish(const char *queue, const char *id_prefix)
{
	amqp_queue_declare(conn, 1, amqp_cstring_bytes(queue), 0, 1, 0, 0,
	                   amqp_empty_table);
	amqp_rpc_reply_t r = amqp_get_rpc_reply(conn);
	if (r.reply_type != AMQP_RESPONSE_NORMAL)
		return die("queue.declare", r);
	amqp_confirm_select(conn, 1);
	r = amqp_get_rpc_reply(conn);
	if (r.reply_type != AMQP_RESPONSE_NORMAL)
		return die("confirm.select", r);
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	uint64_t seq = 0, confirmed = 0;
	while ((len = getline(&line, &cap, stdin)) >= 0) {
		while (len > 0 &&
		       (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		if (len == 0)
			continue;
		char id[256];
		amqp_basic_properties_t p;
		memset(&p, 0, sizeof(p));
		p._flags = AMQP_BASIC_DELIVERY_MODE_FLAG |
		           AMQP_BASIC_CONTENT_TYPE_FLAG;
		p.delivery_mode = 2;
		p.content_type = amqp_cstring_bytes("application/json");
		if (id_prefix) {
			snprintf(id, sizeof(id), "%s%llu", id_prefix,
			         (unsigned long long)seq + 1);
			p._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
			p.message_id = amqp_cstring_bytes(id);
		}
		amqp_bytes_t body = {(size_t)len, line};
		int st = amqp_basic_publish(conn, 1, amqp_cstring_bytes(""),
		                            amqp_cstring_bytes(queue), 0, 0, &p,
		                            body);
		if (st != AMQP_STATUS_OK) {
			fprintf(stderr, "amqp-publish: publish: %s\n",
			        amqp_error_string2(st));
			free(line);
			return 1;
		}
		seq++;
		/* Keep at most 500 unconfirmed. */
		if (seq - confirmed > 500 &&
		    wait_confirms(seq - 250, &confirmed))
			return 1;
	}
	free(line);
	if (wait_confirms(seq, &confirmed) < 0)
		return 1;
	printf("%llu\n", (unsigned long long)seq);
	return 0;
}

static int count(const char *queue)
{
	amqp_queue_declare_ok_t *ok = amqp_queue_declare(
	    conn, 1, amqp_cstring_bytes(queue), 1, 0, 0, 0, amqp_empty_table);
	if (!ok)
		return die("queue check", amqp_get_rpc_reply(conn));
	printf("%u %u\n", ok->message_count, ok->consumer_count);
	return 0;
}

static int delete_queues(int n, char **queues)
{
	for (int i = 0; i < n; i++) {
		amqp_queue_delete(conn, 1, amqp_cstring_bytes(queues[i]), 0, 0);
		if (amqp_get_rpc_reply(conn).reply_type != AMQP_RESPONSE_NORMAL)
			return 1;
	}
	return 0;
}

static int take(const char *queue, int n)
{
	for (int i = 0; i < n; i++) {
		amqp_rpc_reply_t r =
		    amqp_basic_get(conn, 1, amqp_cstring_bytes(queue), 0);
		if (r.reply_type != AMQP_RESPONSE_NORMAL)
			return die("basic.get", r);
		if (r.reply.id != AMQP_BASIC_GET_OK_METHOD)
			break; /* empty */
		amqp_message_t m;
		r = amqp_read_message(conn, 1, &m, 0);
		if (r.reply_type != AMQP_RESPONSE_NORMAL)
			return die("read", r);
		amqp_destroy_message(&m);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr,
		        "usage: amqp-publish URL publish QUEUE "
		        "[--message-id-prefix P] | count QUEUE | take QUEUE "
		        "N | delete QUEUE...\n");
		return 2;
	}
	if (connect_url(argv[1]) < 0)
		return 1;
	int rc;
	if (strcmp(argv[2], "publish") == 0)
		rc = publish(argv[3],
		             argc > 5 && !strcmp(argv[4], "--message-id-prefix")
		                 ? argv[5]
		                 : NULL);
	else if (strcmp(argv[2], "count") == 0)
		rc = count(argv[3]);
	else if (strcmp(argv[2], "take") == 0 && argc > 4)
		rc = take(argv[3], atoi(argv[4]));
	else if (strcmp(argv[2], "delete") == 0)
		rc = delete_queues(argc - 3, argv + 3);
	else {
		fprintf(stderr, "amqp-publish: unknown command %s\n", argv[2]);
		rc = 2;
	}
	amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(conn);
	free(acked);
	return rc;
}
