/*
 * Every time-valued source URL parameter takes the config's duration
 * syntax ("500ms", "30s", "5m"), a bare number keeping its old unit:
 * Redis claim_idle and timeout_ms (ms), RabbitMQ heartbeat (seconds),
 * connect_timeout_ms and confirm_timeout_ms (ms), Kafka open_timeout_ms
 * (ms), JSONL checkpoint_sync (ms); NATS ack_wait is a duration already.
 * Before, `claim_idle=30s` (as docs/config.md showed it) was refused.
 * Parse only: nothing is opened.
 */
#include <stdlib.h>
#include <string.h>

#include "source/amqp/amqp_source.h"
#include "source/jsonl/jsonl.h"
#include "source/kafka/kafka.h"
#include "source/redis/redis.h"
#include "test.h"

static inbox_source_options options(void)
{
	inbox_source_options o = INBOX_SOURCE_OPTIONS_INIT;
	o.consumer = "dur.test";
	return o;
}

/* Redis: rc, and claim_idle_ms / timeout_ms when it parsed. */
static int redis(const char *q, int64_t *claim, int *timeout, char *msg,
                 size_t len)
{
	char url[256];
	snprintf(url, sizeof(url), "redis://127.0.0.1:1/s?%s", q);
	redis_source *rs = calloc(1, sizeof(*rs));
	rs->db = -1;
	int rc = inbox__redis_parse_url(rs, url, "dur.test");
	*claim = rs->claim_idle_ms;
	*timeout = rs->timeout_ms;
	snprintf(msg, len, "%s", rs->base.errmsg);
	inbox__redis_url_clear(rs);
	free(rs);
	return rc;
}

TEST(redis_claim_idle_and_timeout)
{
	int64_t c;
	int t;
	char m[512];
	ASSERT_OK(redis("claim_idle=30s&timeout_ms=2s", &c, &t, m, sizeof(m)));
	ASSERT_EQ(c, 30000);
	ASSERT_EQ(t, 2000);
	ASSERT_OK(
	    redis("claim_idle=1500&timeout_ms=250", &c, &t, m, sizeof(m)));
	ASSERT_EQ(c, 1500); /* bare: milliseconds, as before */
	ASSERT_EQ(t, 250);
	ASSERT_OK(redis("claim_idle=5m", &c, &t, m, sizeof(m)));
	ASSERT_EQ(c, 300000);
	ASSERT_EQ(redis("claim_idle=0", &c, &t, m, sizeof(m)), INBOX_ERR_URL);
	ASSERT_EQ(redis("claim_idle=soon", &c, &t, m, sizeof(m)),
	          INBOX_ERR_URL);
	ASSERT_CONTAINS(m, "claim_idle");
	ASSERT_CONTAINS(m, "30s");
	ASSERT_EQ(redis("timeout_ms=2h", &c, &t, m, sizeof(m)), INBOX_ERR_URL);
}

static int amqp(const char *q, amqp_source *out, char *msg, size_t len)
{
	char url[256];
	snprintf(url, sizeof(url), "amqp://127.0.0.1:1/%%2f/q?%s", q);
	inbox_source_options o = options();
	amqp_source *s = calloc(1, sizeof(*s));
	int rc = inbox__amqp_parse_url(s, url, &o);
	out->heartbeat = s->heartbeat;
	out->connect_timeout_ms = s->connect_timeout_ms;
	out->confirm_timeout_ms = s->confirm_timeout_ms;
	snprintf(msg, len, "%s", s->base.errmsg);
	inbox__amqp_url_clear(s);
	free(s);
	return rc;
}

TEST(amqp_heartbeat_and_timeouts)
{
	amqp_source s;
	char m[512];
	ASSERT_OK(amqp("heartbeat=10&connect_timeout_ms=2s&confirm_timeout_ms="
	               "1500",
	               &s, m, sizeof(m)));
	ASSERT_EQ(s.heartbeat, 10); /* bare: seconds, as before */
	ASSERT_EQ(s.connect_timeout_ms, 2000);
	ASSERT_EQ(s.confirm_timeout_ms, 1500);
	ASSERT_OK(amqp("heartbeat=1m", &s, m, sizeof(m)));
	ASSERT_EQ(s.heartbeat, 60);
	ASSERT_OK(amqp("heartbeat=0", &s, m, sizeof(m)));
	ASSERT_EQ(s.heartbeat, 0); /* off */
	ASSERT_EQ(amqp("heartbeat=2d", &s, m, sizeof(m)), INBOX_ERR_URL);
	ASSERT_CONTAINS(m, "seconds");
}

TEST(kafka_open_timeout)
{
	char url[256];
	snprintf(url, sizeof(url),
	         "kafka://127.0.0.1:1/t?group=g&open_timeout_ms=3s");
	inbox_source_options o = options();
	kafka_source *ks = calloc(1, sizeof(*ks));
	rd_kafka_conf_t *conf = NULL;
	int timeout = -1;
	ASSERT_OK(inbox__kafka_parse_url(ks, url, &o, &conf, &timeout));
	ASSERT_EQ(timeout, 3000);
	rd_kafka_conf_destroy(conf);
	inbox__kafka_url_clear(ks);
	free(ks);
}

TEST(jsonl_checkpoint_sync)
{
	jl_source *s = calloc(1, sizeof(*s));
	ASSERT_OK(inbox__jl_parse_url(
	    s, "jsonl:/tmp/x.jsonl?checkpoint_sync=2s", "dur.test"));
	ASSERT_EQ(s->ck_sync_ms, 2000);
	inbox__jl_url_clear(s);
	free(s);
}

int main(void)
{
	RUN(redis_claim_idle_and_timeout);
	RUN(amqp_heartbeat_and_timeouts);
	RUN(kafka_open_timeout);
	RUN(jsonl_checkpoint_sync);
	return test_summary();
}
