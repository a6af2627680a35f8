/*
 * The plain RabbitMQ loop (rabbitmq-c): basic.qos prefetch (twice the
 * batch, PS_AMQP_PREFETCH to change it), basic.consume with manual acks;
 * a batch is the first message (waited for up to 100 ms) and what has
 * arrived behind it, up to BATCH; through libpq, then one basic.ack
 * multiple=true for the batch.
 */
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "plain_sources.h"
#include "workload.h"

static int bad(amqp_rpc_reply_t r, const char *what)
{
	if (r.reply_type == AMQP_RESPONSE_NORMAL)
		return 0;
	fprintf(stderr, "plain_sources: amqp %s failed (%d, %s)\n", what,
	        (int)r.reply_type,
	        r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
	            ? amqp_error_string2(r.library_error)
	            : "server exception");
	return 1;
}

static amqp_connection_state_t connect_url(const char *url)
{
	char host[256], user[128] = "guest", pass[128] = "guest";
	int port;
	if (ps_host_port(url, host, sizeof(host), &port, user, pass,
	                 sizeof(user)) < 0) {
		fprintf(stderr, "plain_sources: bad AMQP URL\n");
		return NULL;
	}
	amqp_connection_state_t c = amqp_new_connection();
	amqp_socket_t *s = amqp_tcp_socket_new(c);
	if (!s || amqp_socket_open(s, host, port) != AMQP_STATUS_OK) {
		fprintf(stderr, "plain_sources: amqp connect %s:%d failed\n",
		        host, port);
		return NULL;
	}
	if (bad(amqp_login(c, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, user,
	                   pass),
	        "login"))
		return NULL;
	amqp_channel_open(c, 1);
	if (bad(amqp_get_rpc_reply(c), "channel.open"))
		return NULL;
	return c;
}

static void disconnect(amqp_connection_state_t c)
{
	amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
	amqp_connection_close(c, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(c);
}

int ps_amqp_load(const char *url, const char *name, long n)
{
	amqp_connection_state_t c = connect_url(url);
	if (!c)
		return -1;
	amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 1, 0, 0,
	                   amqp_empty_table);
	if (bad(amqp_get_rpc_reply(c), "queue.declare"))
		return -1;
	amqp_confirm_select(c, 1);
	if (bad(amqp_get_rpc_reply(c), "confirm.select"))
		return -1;
	amqp_basic_properties_t p;
	memset(&p, 0, sizeof(p));
	p._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG;
	p.delivery_mode = 2;
	p.content_type = amqp_cstring_bytes("application/json");
	wl_msg m;
	uint64_t confirmed = 0;
	for (long i = 0; i < n || (long)confirmed < n;) {
		/* at most 1000 unconfirmed */
		for (; i < n && i - (long)confirmed < 1000; i++) {
			wl_message(i, &m);
			amqp_bytes_t body = {(size_t)m.len, m.json};
			if (amqp_basic_publish(c, 1, amqp_empty_bytes,
			                       amqp_cstring_bytes(name), 0, 0,
			                       &p, body) != AMQP_STATUS_OK) {
				fprintf(stderr, "plain_sources: publish\n");
				return -1;
			}
		}
		amqp_frame_t f;
		if (amqp_simple_wait_frame(c, &f) != AMQP_STATUS_OK)
			return -1;
		if (f.frame_type != AMQP_FRAME_METHOD)
			continue;
		if (f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
			amqp_basic_ack_t *a = f.payload.method.decoded;
			confirmed = a->delivery_tag; /* in order */
		} else {
			fprintf(stderr,
			        "plain_sources: publish not confirmed "
			        "(method %08x)\n",
			        (unsigned)f.payload.method.id);
			return -1;
		}
		amqp_maybe_release_buffers(c);
	}
	disconnect(c);
	return 0;
}

int ps_amqp_run(const char *url, const char *name, const char *group, ps_pg *pg,
                long n, int batch)
{
	(void)group;
	amqp_connection_state_t c = connect_url(url);
	if (!c)
		return -1;
	const char *pe = getenv("PS_AMQP_PREFETCH");
	int prefetch = pe ? atoi(pe) : 2 * batch;
	if (prefetch > 65535)
		prefetch = 65535;
	amqp_basic_qos(c, 1, 0, (uint16_t)prefetch, 0);
	if (bad(amqp_get_rpc_reply(c), "basic.qos"))
		return -1;
	amqp_basic_consume(c, 1, amqp_cstring_bytes(name), amqp_empty_bytes, 0,
	                   0, 0, amqp_empty_table);
	if (bad(amqp_get_rpc_reply(c), "basic.consume"))
		return -1;
	while (ps_pg_messages(pg) < n) {
		uint64_t last = 0;
		int k = 0;
		struct timeval first = {0, 100000}, none = {0, 0};
		while (k < batch) {
			amqp_envelope_t env;
			amqp_maybe_release_buffers(c);
			amqp_rpc_reply_t r = amqp_consume_message(
			    c, &env, k ? &none : &first, 0);
			if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
			    r.library_error == AMQP_STATUS_TIMEOUT)
				break;
			if (bad(r, "consume"))
				return -1;
			if (ps_pg_add(pg, env.message.body.bytes,
			              env.message.body.len) < 0)
				return -1;
			last = env.delivery_tag;
			amqp_destroy_envelope(&env);
			k++;
		}
		if (k == 0)
			continue;
		ps_pg_flush(pg);
		/* after the commit: the whole batch at once */
		if (amqp_basic_ack(c, 1, last, 1) != AMQP_STATUS_OK) {
			fprintf(stderr, "plain_sources: ack failed\n");
			return -1;
		}
	}
	disconnect(c);
	return 0;
}
