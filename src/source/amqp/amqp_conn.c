/*
 * RabbitMQ source: the connection — connect and set up the channels,
 * read and dispatch frames, and tear everything down after a loss.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>

#include "source/amqp/amqp_source.h"

/* RPCs (declare, qos, consume, close) that take longer than this mean a
 * dead broker: rabbitmq-c then closes the socket and we reconnect. */
#define RPC_TIMEOUT_MS 30000

static struct timeval ms_tv(int ms)
{
	struct timeval tv;
	if (ms < 0)
		ms = 0;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	return tv;
}

const char *inbox__amqp_reply_text(amqp_rpc_reply_t r, char *buf, size_t len)
{
	switch (r.reply_type) {
	case AMQP_RESPONSE_NORMAL:
		snprintf(buf, len, "ok");
		break;
	case AMQP_RESPONSE_NONE:
		snprintf(buf, len, "no reply (connection closed)");
		break;
	case AMQP_RESPONSE_LIBRARY_EXCEPTION:
		snprintf(buf, len, "%s", amqp_error_string2(r.library_error));
		break;
	case AMQP_RESPONSE_SERVER_EXCEPTION:
		if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD &&
		    r.reply.decoded) {
			amqp_connection_close_t *m = r.reply.decoded;
			snprintf(buf, len, "%u %.*s", m->reply_code,
			         (int)m->reply_text.len,
			         (const char *)m->reply_text.bytes);
		} else if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD &&
		           r.reply.decoded) {
			amqp_channel_close_t *m = r.reply.decoded;
			snprintf(buf, len, "%u %.*s", m->reply_code,
			         (int)m->reply_text.len,
			         (const char *)m->reply_text.bytes);
		} else {
			snprintf(buf, len, "unexpected method 0x%08x",
			         (unsigned)r.reply.id);
		}
		break;
	default:
		snprintf(buf, len, "unknown reply type %d", (int)r.reply_type);
	}
	return buf;
}

/* Answer a close from the broker, so the channel id can be reused. */
static void close_ok(amqp_source *s, amqp_channel_t ch, amqp_method_number_t id)
{
	if (id == AMQP_CHANNEL_CLOSE_METHOD) {
		amqp_channel_close_ok_t ok = {0};
		amqp_send_method(s->conn, ch, AMQP_CHANNEL_CLOSE_OK_METHOD,
		                 &ok);
	} else if (id == AMQP_CONNECTION_CLOSE_METHOD) {
		amqp_connection_close_ok_t ok = {0};
		amqp_send_method(s->conn, 0, AMQP_CONNECTION_CLOSE_OK_METHOD,
		                 &ok);
	}
}

/* Check the last RPC on ch; on failure set errmsg ("amqp: WHAT: reason")
 * and answer a close so the connection stays consistent. */
static int rpc_check(amqp_source *s, amqp_channel_t ch, const char *what)
{
	amqp_rpc_reply_t r = amqp_get_rpc_reply(s->conn);
	char why[300];
	if (r.reply_type == AMQP_RESPONSE_NORMAL)
		return INBOX_OK;
	inbox__amqp_reply_text(r, why, sizeof(why));
	inbox__source_seterr(&s->base, "amqp: %s at %s: %s", what, s->where,
	                     why);
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION)
		close_ok(s, ch, r.reply.id);
	/* A channel error leaves the connection usable; anything else
	 * (connection.close, socket error, timeout) does not. */
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
	    r.reply.id == AMQP_CHANNEL_CLOSE_METHOD)
		return INBOX_ERR_SOURCE;
	return INBOX_ERR_CONNECT;
}

static void free_conn(amqp_source *s)
{
	if (s->conn)
		amqp_destroy_connection(s->conn);
	s->conn = NULL;
	s->pub_open = 0;
}

int inbox__amqp_open_pub(amqp_source *s)
{
	if (s->pub_open)
		return INBOX_OK;
	/* A fresh channel id: late frames of the closed one cannot be
	 * mistaken for ours. */
	if (s->pub_ch < AMQP_CH_PUB_MIN || s->pub_ch >= AMQP_CH_PUB_MAX)
		s->pub_ch = AMQP_CH_PUB_MIN;
	else
		s->pub_ch++;
	amqp_channel_open(s->conn, s->pub_ch);
	int rc = rpc_check(s, s->pub_ch, "channel.open");
	if (rc == INBOX_OK) {
		amqp_confirm_select(s->conn, s->pub_ch);
		rc = rpc_check(s, s->pub_ch, "confirm.select");
	}
	if (rc == INBOX_OK && s->dlx) {
		amqp_exchange_declare(
		    s->conn, s->pub_ch, amqp_cstring_bytes(s->dlx),
		    amqp_cstring_bytes(""), 1, 0, 0, 0, amqp_empty_table);
		rc = rpc_check(s, s->pub_ch, "dead-letter exchange check");
	}
	if (rc == INBOX_ERR_CONNECT) {
		inbox__amqp_lost(s, "%s", s->base.errmsg);
		return INBOX_ERR_SOURCE;
	}
	if (rc == INBOX_OK) {
		s->pub_open = 1;
		s->pub_next = 1;
		s->returned = 0;
	}
	return rc;
}

static int declare_queues(amqp_source *s)
{
	amqp_channel_t ch = AMQP_CH_CONSUME;
	amqp_queue_declare(s->conn, ch, amqp_cstring_bytes(s->queue),
	                   !s->declare, 1, 0, 0, amqp_empty_table);
	int rc = rpc_check(
	    s, ch, s->declare ? "queue.declare" : "queue check (declare=0)");
	if (rc < 0 || s->retry_mode != AMQP_RETRY_TTL)
		return rc;
	amqp_table_entry_t e[3];
	e[0].key = amqp_cstring_bytes("x-message-ttl");
	e[0].value.kind = AMQP_FIELD_KIND_I32;
	e[0].value.value.i32 =
	    s->base.opts.retry_delay_ms > 0 ? s->base.opts.retry_delay_ms : 0;
	e[1].key = amqp_cstring_bytes("x-dead-letter-exchange");
	e[1].value.kind = AMQP_FIELD_KIND_UTF8;
	e[1].value.value.bytes = amqp_cstring_bytes("");
	e[2].key = amqp_cstring_bytes("x-dead-letter-routing-key");
	e[2].value.kind = AMQP_FIELD_KIND_UTF8;
	e[2].value.value.bytes = amqp_cstring_bytes(s->queue);
	amqp_table_t args = {3, e};
	amqp_queue_declare(s->conn, ch, amqp_cstring_bytes(s->retry_queue), 0,
	                   1, 0, 0, args);
	return rpc_check(s, ch, "retry queue declare");
}

static int login(amqp_source *s)
{
	char name[300];
	snprintf(name, sizeof(name), "libinbox %s", s->base.opts.consumer);
	/* Ask to be told when the broker cancels our consumer (queue
	 * deleted), instead of waiting forever. */
	amqp_table_entry_t caps[1];
	caps[0].key = amqp_cstring_bytes("consumer_cancel_notify");
	caps[0].value.kind = AMQP_FIELD_KIND_BOOLEAN;
	caps[0].value.value.boolean = 1;
	amqp_table_entry_t props[2];
	props[0].key = amqp_cstring_bytes("connection_name");
	props[0].value.kind = AMQP_FIELD_KIND_UTF8;
	props[0].value.value.bytes = amqp_cstring_bytes(name);
	props[1].key = amqp_cstring_bytes("capabilities");
	props[1].value.kind = AMQP_FIELD_KIND_TABLE;
	props[1].value.value.table = (amqp_table_t){1, caps};
	amqp_table_t table = {2, props};
	amqp_rpc_reply_t r = amqp_login_with_properties(
	    s->conn, s->vhost, 0, AMQP_DEFAULT_FRAME_SIZE, s->heartbeat, &table,
	    AMQP_SASL_METHOD_PLAIN, s->user, s->pass);
	if (r.reply_type == AMQP_RESPONSE_NORMAL)
		return INBOX_OK;
	char why[300];
	inbox__amqp_reply_text(r, why, sizeof(why));
	/* TLS 1.3: a broker that wants a client certificate says so only
	 * after the handshake, by closing the connection. */
	int no_cert = s->tls && !s->tls_cert &&
	              r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
	              r.library_error == AMQP_STATUS_SSL_ERROR;
	inbox__source_seterr(&s->base, "amqp: login to %s as %s: %s%s",
	                     s->where, s->user, why,
	                     no_cert ? " (does the broker want a client "
	                               "certificate? tls_cert, tls_key)"
	                             : "");
	return INBOX_ERR_CONNECT;
}

/* A TCP socket, or for amqps:// a TLS one with the URL's CA, client
 * certificate and verification. Not opened yet. */
static int open_socket(amqp_source *s, amqp_socket_t **out)
{
	if (!s->tls) {
		*out = amqp_tcp_socket_new(s->conn);
		return *out ? INBOX_OK : INBOX_ERR_NOMEM;
	}
	amqp_socket_t *sock = amqp_ssl_socket_new(s->conn);
	const char *what = NULL;
	if (!sock)
		return INBOX_ERR_NOMEM;
	amqp_ssl_socket_set_verify_peer(sock, s->tls_verify);
	amqp_ssl_socket_set_verify_hostname(sock, s->tls_verify);
	if (s->tls_ca &&
	    amqp_ssl_socket_set_cacert(sock, s->tls_ca) != AMQP_STATUS_OK)
		what = s->tls_ca;
	if (!what && s->tls_cert) {
		/* Before the key is read: OpenSSL asks for it then. */
		if (s->tls_key_pass)
			amqp_ssl_socket_set_key_passwd(sock, s->tls_key_pass);
		if (amqp_ssl_socket_set_key(sock, s->tls_cert, s->tls_key) !=
		    AMQP_STATUS_OK)
			what = s->tls_key;
	}
	if (what) {
		inbox__source_seterr(&s->base,
		                     "amqp: TLS setup for %s: cannot load "
		                     "\"%.200s\"%s",
		                     s->where, what,
		                     what == s->tls_key
		                         ? " with its certificate (wrong "
		                           "passphrase, or a key of another "
		                           "certificate?)"
		                         : " (not PEM certificates?)");
		return INBOX_ERR_CONNECT;
	}
	*out = sock;
	return INBOX_OK;
}

static int setup(amqp_source *s)
{
	struct timeval tv = ms_tv(s->connect_timeout_ms);
	struct timeval rpc = ms_tv(RPC_TIMEOUT_MS);
	amqp_socket_t *sock = NULL;
	int rc = open_socket(s, &sock);
	if (rc < 0)
		return rc;
	int st = amqp_socket_open_noblock(sock, s->host, s->port, &tv);
	if (st != AMQP_STATUS_OK) {
		inbox__source_seterr(&s->base, "amqp: cannot connect to %s: %s",
		                     s->where, amqp_error_string2(st));
		return INBOX_ERR_CONNECT;
	}
	amqp_set_handshake_timeout(s->conn, &tv);
	amqp_set_rpc_timeout(s->conn, &rpc);
	rc = login(s);
	if (rc < 0)
		return rc;
	amqp_channel_open(s->conn, AMQP_CH_CONSUME);
	rc = rpc_check(s, AMQP_CH_CONSUME, "channel.open");
	if (rc == INBOX_OK)
		rc = declare_queues(s);
	if (rc == INBOX_OK) {
		amqp_basic_qos(s->conn, AMQP_CH_CONSUME, 0,
		               (uint16_t)s->prefetch, 0);
		rc = rpc_check(s, AMQP_CH_CONSUME, "basic.qos");
	}
	if (rc == INBOX_OK)
		rc = inbox__amqp_open_pub(s);
	if (rc == INBOX_OK && s->conn) {
		amqp_basic_consume(s->conn, AMQP_CH_CONSUME,
		                   amqp_cstring_bytes(s->queue),
		                   amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
		rc = rpc_check(s, AMQP_CH_CONSUME, "basic.consume");
	}
	if (rc == INBOX_OK && !s->conn)
		rc = INBOX_ERR_CONNECT;
	return rc;
}

int inbox__amqp_connect(amqp_source *s)
{
	free_conn(s);
	s->conn = amqp_new_connection();
	if (!s->conn)
		return INBOX_ERR_NOMEM;
	s->pub_open = 0;
	s->pub_ch = 0;
	int rc = setup(s);
	if (rc < 0) {
		free_conn(s);
		return rc;
	}
	return INBOX_OK;
}

void inbox__amqp_disconnect(amqp_source *s)
{
	if (!s->conn)
		return;
	struct timeval tv = ms_tv(2000);
	amqp_set_rpc_timeout(s->conn, &tv);
	/* The broker requeues whatever is unacked. */
	amqp_connection_close(s->conn, AMQP_REPLY_SUCCESS);
	free_conn(s);
	s->gen++;
	inbox__amqp_slots_clear(s, &s->pend);
	inbox__amqp_slots_clear(s, &s->held);
}

void inbox__amqp_lost(amqp_source *s, const char *fmt, ...)
{
	char msg[sizeof(s->base.errmsg)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	inbox__source_seterr(&s->base, "%s", msg);
	free_conn(s);
	s->gen++;
	inbox__amqp_fail_waiting(s);
	/* The broker requeues them; their tags mean nothing any more. */
	inbox__amqp_slots_clear(s, &s->pend);
	inbox__amqp_slots_clear(s, &s->held);
	s->reconnect.at = 0; /* the first attempt at once */
}

static int take_delivery(amqp_source *s, amqp_envelope_t *env)
{
	amqp_slot *sl = inbox__amqp_slot_new(s);
	if (!sl) {
		amqp_destroy_envelope(env);
		return AMQP_EV_NOMEM;
	}
	sl->env = *env;
	sl->gen = s->gen;
	if (env->channel != AMQP_CH_CONSUME || inbox__amqp_prepare(s, sl) < 0 ||
	    inbox__amqp_slots_push(&s->pend, sl) < 0) {
		int ours = env->channel == AMQP_CH_CONSUME;
		inbox__amqp_slot_free(s, sl);
		if (!ours)
			return AMQP_EV_OTHER;
		/* Cannot keep it: let the broker have it back. */
		inbox__amqp_lost(s, "amqp: out of memory holding a delivery");
		return AMQP_EV_NOMEM;
	}
	return AMQP_EV_DELIVERY;
}

static int on_method(amqp_source *s, amqp_frame_t *f)
{
	amqp_method_t *m = &f->payload.method;
	char why[300];
	switch (m->id) {
	case AMQP_BASIC_ACK_METHOD: {
		amqp_basic_ack_t *a = m->decoded;
		if (f->channel == s->pub_ch)
			inbox__amqp_confirm(s, a->delivery_tag, a->multiple, 1);
		return AMQP_EV_OTHER;
	}
	case AMQP_BASIC_NACK_METHOD: {
		amqp_basic_nack_t *a = m->decoded;
		if (f->channel == s->pub_ch)
			inbox__amqp_confirm(s, a->delivery_tag, a->multiple, 0);
		return AMQP_EV_OTHER;
	}
	case AMQP_BASIC_RETURN_METHOD: {
		/* A mandatory copy was unroutable; its content follows. */
		amqp_message_t msg;
		amqp_rpc_reply_t r =
		    amqp_read_message(s->conn, f->channel, &msg, 0);
		if (r.reply_type != AMQP_RESPONSE_NORMAL) {
			inbox__amqp_lost(
			    s, "amqp: connection to %s lost: %s", s->where,
			    inbox__amqp_reply_text(r, why, sizeof(why)));
			return AMQP_EV_LOST;
		}
		amqp_destroy_message(&msg);
		if (f->channel == s->pub_ch)
			s->returned = 1;
		return AMQP_EV_OTHER;
	}
	case AMQP_CHANNEL_CLOSE_METHOD: {
		amqp_channel_close_t *c = m->decoded;
		snprintf(why, sizeof(why), "%u %.*s", c->reply_code,
		         (int)c->reply_text.len,
		         (const char *)c->reply_text.bytes);
		close_ok(s, f->channel, m->id);
		if (f->channel != AMQP_CH_CONSUME) {
			inbox__source_seterr(
			    &s->base,
			    "amqp: publish channel closed by %s: "
			    "%s",
			    s->where, why);
			if (f->channel == s->pub_ch) {
				s->pub_open = 0;
				inbox__amqp_fail_waiting(s);
			}
			return AMQP_EV_OTHER;
		}
		inbox__amqp_lost(s, "amqp: channel closed by %s: %s", s->where,
		                 why);
		return AMQP_EV_LOST;
	}
	case AMQP_CONNECTION_CLOSE_METHOD: {
		amqp_connection_close_t *c = m->decoded;
		snprintf(why, sizeof(why), "%u %.*s", c->reply_code,
		         (int)c->reply_text.len,
		         (const char *)c->reply_text.bytes);
		close_ok(s, 0, m->id);
		inbox__amqp_lost(s, "amqp: connection closed by %s: %s",
		                 s->where, why);
		return AMQP_EV_LOST;
	}
	case AMQP_BASIC_CANCEL_METHOD:
		if (f->channel != AMQP_CH_CONSUME)
			return AMQP_EV_OTHER;
		inbox__amqp_lost(s,
		                 "amqp: %s cancelled our consumer of queue %s "
		                 "(deleted?)",
		                 s->where, s->queue);
		return AMQP_EV_LOST;
	default:
		return AMQP_EV_OTHER; /* connection.blocked and the like */
	}
}

/* The frame amqp_consume_message() put back: not a delivery. */
static int other_frame(amqp_source *s)
{
	amqp_frame_t f;
	struct timeval zero = {0, 0};
	int st = amqp_simple_wait_frame_noblock(s->conn, &f, &zero);
	if (st == AMQP_STATUS_TIMEOUT)
		return AMQP_EV_OTHER;
	if (st != AMQP_STATUS_OK) {
		inbox__amqp_lost(s, "amqp: connection to %s lost: %s", s->where,
		                 amqp_error_string2(st));
		return AMQP_EV_LOST;
	}
	if (f.frame_type != AMQP_FRAME_METHOD)
		return AMQP_EV_OTHER; /* stray content of a dropped message */
	return on_method(s, &f);
}

int inbox__amqp_pump(amqp_source *s, int wait_ms)
{
	amqp_envelope_t env;
	char why[300];
	if (!s->conn)
		return AMQP_EV_LOST;
	struct timeval tv = ms_tv(wait_ms);
	amqp_maybe_release_buffers(s->conn);
	amqp_rpc_reply_t r = amqp_consume_message(s->conn, &env, &tv, 0);
	if (r.reply_type == AMQP_RESPONSE_NORMAL)
		return take_delivery(s, &env);
	if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
		if (r.library_error == AMQP_STATUS_TIMEOUT)
			return AMQP_EV_TIMEOUT;
		if (r.library_error == AMQP_STATUS_UNEXPECTED_STATE)
			return other_frame(s);
	}
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION)
		close_ok(s,
		         r.reply.id == AMQP_CHANNEL_CLOSE_METHOD
		             ? AMQP_CH_CONSUME
		             : 0,
		         r.reply.id);
	inbox__amqp_lost(s, "amqp: connection to %s lost: %s", s->where,
	                 inbox__amqp_reply_text(r, why, sizeof(why)));
	return AMQP_EV_LOST;
}
