/*
 * A consumer of the config file: its source, store, identity, limits and
 * steps (docs/config.md, "A consumer").
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "cli/config/reader.h"

static int name_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	cli_consumer *c = obj;
	if (cfg_str_value(x, v, "name", &c->name))
		return -1;
	for (const char *p = c->name; *p; p++)
		if ((unsigned char)*p < 0x21 || *p == 0x7f)
			return cfg_fail(
			    x, v,
			    "name \"%s\": use printable characters "
			    "without spaces (e.g. billing.order-created.v1)",
			    c->name);
	if (!c->name[0])
		return cfg_fail(x, v, "name: must not be empty");
	if (strlen(c->name) > 200)
		return cfg_fail(x, v, "name: at most 200 characters");
	return 0;
}

static int source_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	cli_consumer *c = obj;
	return cfg_source_url(x, v, &c->source, &c->source_pos);
}

static int store_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	cli_consumer *c = obj;
	return cfg_store_url(x, v, "store", &c->store, &c->store_pos);
}

static int key_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	cli_consumer *c = obj;
	char tmpl_err[256];
	if (cfg_str_value(x, v, "key", &c->key))
		return -1;
	inbox__keytmpl *t = NULL;
	if (inbox__keytmpl_compile(&t, c->key, tmpl_err, sizeof(tmpl_err)) !=
	    0) {
		const char *why = tmpl_err;
		if (!strncmp(why, "key template: ", 14))
			why += 14;
		return cfg_fail(x, v, "key: bad key template \"%s\": %s",
		                c->key, why);
	}
	inbox__keytmpl_free(t);
	return 0;
}

/* max_deliveries: a count at least max_attempts (every retry is a
 * delivery too), or "off" / 0 for no bound (-1). Read after max_attempts. */
static int max_deliveries_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	cli_consumer *c = obj;
	long long i;
	if (v->type == YAML_SCALAR_NODE && !strcmp(cfg_sv(v), "off")) {
		c->max_deliveries = -1;
		return 0;
	}
	if (cfg_int_value(x, v, "max_deliveries", 0, INT32_MAX, &i))
		return -1;
	if (i > 0 && i < c->max_attempts)
		return cfg_fail(
		    x, v,
		    "max_deliveries (%lld) must be at least max_attempts "
		    "(%d): every retry is a delivery too (off: no bound)",
		    i, c->max_attempts);
	c->max_deliveries = i == 0 ? -1 : (int)i;
	return 0;
}

static int replay_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	cli_consumer *c = obj;
	if (cfg_want(x, v, YAML_SCALAR_NODE, "replay"))
		return -1;
	if (!strcmp(cfg_sv(v), "dead_letter"))
		c->replay = INBOX_REPLAY_DEAD_LETTER;
	else if (!strcmp(cfg_sv(v), "drop"))
		c->replay = INBOX_REPLAY_DROP;
	else if (!strcmp(cfg_sv(v), "apply"))
		c->replay = INBOX_REPLAY_APPLY;
	else
		return cfg_fail(x, v,
		                "replay must be dead_letter, drop or apply, "
		                "not \"%s\"",
		                cfg_sv(v));
	return 0;
}

static int setup_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	cli_consumer *c = obj;
	if (cfg_str_value(x, v, "setup", &c->setup))
		return -1;
	c->setup_pos = cfg_pos(v);
	return 0;
}

/* schema: a JSON Schema file (docs/schema.md), relative to the config
 * file, read and compiled now, so an unsupported keyword stops the
 * daemon before anything is read. */
static int schema_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	cli_consumer *c = obj;
	char *path = NULL;
	if (cfg_str_value(x, v, "schema", &path))
		return -1;
	inbox__buf b = INBOX__BUF_INIT;
	int bad = cfg_rebase(x, &b, path, strlen(path)) < 0;
	free(path);
	if (bad) {
		inbox__buf_free(&b);
		return cfg_fail(x, v, "out of memory");
	}
	c->schema_path = b.data;
	c->schema_pos = cfg_pos(v);
	size_t len = 0;
	c->schema_json = cfg_read_file(c->schema_path, &len);
	if (!c->schema_json)
		return cfg_fail(x, v, "schema: cannot read %s: %s",
		                c->schema_path, strerror(errno));
	if (memchr(c->schema_json, '\0', len))
		return cfg_fail(x, v, "schema: %s: a NUL byte in the file",
		                c->schema_path);
	char err[512];
	inbox_schema *s = NULL;
	int rc = inbox_schema_open(&s, c->schema_json, len, err, sizeof(err));
	inbox_schema_close(s);
	if (rc != INBOX_OK)
		return cfg_fail(x, v, "schema: %s: %s", c->schema_path, err);
	return 0;
}

#define C(field) offsetof(cli_consumer, field)
static const cfg_key consumer_keys[] = {
    {"name", CFG_FN, 0, 0, 0, name_fn, NULL, 0,
     "the consumer's name, unique in the file"},
    {"source", CFG_FN, 0, 0, 0, source_fn, NULL, 0,
     "where the messages come from (a source URL)"},
    {"store", CFG_FN, 0, 0, 0, store_fn, NULL, 0,
     "this consumer's store URL (default: the file's)"},
    {"key", CFG_FN, 0, 0, 0, key_fn, NULL, 0,
     "key template: the identity of the effect ({id})"},
    {"id", CFG_POINTER, C(id), 0, 0, NULL, NULL, 0,
     "JSON pointer of the message id (/id)"},
    {"fingerprint", CFG_POINTER, C(fingerprint), 0, 0, NULL, NULL, 0,
     "JSON pointer of the fingerprinted part (whole payload)"},
    {"batch_size", CFG_COUNT, C(batch_size), 1, 10000, NULL, NULL, 0,
     "messages per transaction"},
    {"retention", CFG_SECONDS, C(retention_s), 1000, INT64_MAX / 2, NULL, NULL,
     0, "how long inbox records are kept at least"},
    {"max_attempts", CFG_INT, C(max_attempts), 1, 1000000, NULL, NULL, 0,
     "failures before a message is dead-lettered"},
    {"max_deliveries", CFG_FN, 0, 0, 0, max_deliveries_fn, NULL, 0,
     "deliveries without completing before a dead letter (off)"},
    {"lease", CFG_MS, C(lease_ms), 1, INT64_MAX / 2, NULL, NULL, 0,
     "lease for long handlers"},
    {"max_payload", CFG_SIZE, C(max_payload), 0, 0, NULL, NULL, 0,
     "larger messages are dead-lettered"},
    {"max_result", CFG_SIZE, C(max_result), 0, 0, NULL, NULL, 0,
     "largest stored result (effect result:)"},
    {"retry_delay", CFG_MS_INT, C(retry_delay_ms), 0, 3600000, NULL, NULL, 0,
     "delay before a retried message comes again"},
    {"poll_timeout", CFG_MS_INT, C(poll_timeout_ms), 1, 60000, NULL, NULL, 0,
     "how long one poll of the source waits"},
    {"batch_pause", CFG_MS_INT, C(batch_pause_ms), 0, 60000, NULL, NULL, 0,
     "pause after each batch"},
    {"replay", CFG_FN, 0, 0, 0, replay_fn, NULL, 0,
     "a message older than retention: dead_letter, drop or apply"},
    {"setup", CFG_FN, 0, 0, 0, setup_fn, NULL, CFG_NULL_UNSET,
     "SQL run once at start"},
    {"effect", CFG_LATER, 0, 0, 0, NULL, NULL, 0,
     "the SQL and upsert steps, in the inbox's transaction"},
    {"outbox", CFG_LATER, 0, 0, 0, NULL, NULL, 0,
     "external effects: one outbox row per step"},
    {"dispatch", CFG_LATER, 0, 0, 0, NULL, NULL, 0,
     "this consumer's dispatcher settings"},
    {"schema", CFG_FN, 0, 0, 0, schema_fn, NULL, CFG_NULL_UNSET,
     "a JSON Schema file the messages are validated against"},
    {"batch_timeout", CFG_TIMEOUT, C(batch_timeout_ms), 0, 0, NULL, NULL, 0,
     "time budget of one batch transaction (off)"},
    {"lock_timeout", CFG_TIMEOUT, C(lock_timeout_ms), 0, 0, NULL, NULL, 0,
     "longest wait for a lock (off)"},
    {"statement_timeout", CFG_TIMEOUT, C(statement_timeout_ms), 0, 0, NULL,
     NULL, 0, "longest statement of a batch (off)"},
    {"idle_in_transaction_timeout", CFG_TIMEOUT, C(idle_timeout_ms), 0, 0, NULL,
     NULL, 0, "PostgreSQL ends a session idle in its transaction"},
    {"when", CFG_LATER, 0, 0, 0, NULL, NULL, 0,
     "a filter: no step runs unless it holds (the message is skipped)"},
};
#undef C
const cfg_section cfg_consumer_section =
    CFG_SECTION("consumer", "consumer", consumer_keys);

/* The consumer's declaration (include/inbox/decl.h), which the effect
 * and outbox steps are read into: what inbox_decl_handler runs. */
static int new_decl(cfg_ctx *x, yaml_node_t *m, cli_consumer *c)
{
	inbox_decl_options o = INBOX_DECL_OPTIONS_INIT;
	o.consumer = c->name;
	o.setup_sql = c->setup;
	o.outbox_max_attempts = c->dispatch.max_attempts;
	char why[512] = "";
	int rc = inbox_decl_new(&c->decl, &o, why, sizeof(why));
	if (rc == INBOX_ERR_NOMEM)
		return cfg_fail(x, m, "out of memory");
	return rc < 0 ? cfg_fail(x, m, "%s", why) : 0;
}

int cfg_consumer(cfg_ctx *x, yaml_node_t *m, cli_consumer *c)
{
	if (cfg_want(x, m, YAML_MAPPING_NODE, "a consumer") ||
	    cfg_check_keys(x, m, &cfg_consumer_section, NULL))
		return -1;
	c->pos = cfg_pos(m);
	c->batch_size = 100;
	c->retention_s = 7 * 24 * 3600;
	c->max_attempts = 5;
	c->lease_ms = 30000;
	c->max_payload = 1024 * 1024;
	c->retry_delay_ms = 1000;
	c->poll_timeout_ms = 200;
	c->replay = INBOX_REPLAY_DEAD_LETTER;
	if (!cfg_get(x, m, "name"))
		return cfg_fail(x, m, "consumer: name is required");
	if (cfg_read(x, m, &cfg_consumer_section, NULL, c))
		return -1;
	if (!c->source)
		return cfg_fail(x, m, "consumer \"%s\": source is required",
		                c->name);
	yaml_node_t *v;
	if (cfg_dispatch(x, m, c) || new_decl(x, m, c) ||
	    cfg_when(x, m, c->decl, INBOX_DECL_MESSAGE))
		return -1;
	if ((v = cfg_get(x, m, "outbox")) && !cfg_is_null(v) &&
	    cfg_outbox(x, v, c))
		return -1;
	/* Only external effects (outbox:) is fine too. */
	if (!(v = cfg_get(x, m, "effect")) && inbox_decl_outbox_steps(c->decl))
		return 0;
	if (!v)
		return cfg_fail(x, m,
		                "consumer \"%s\": effect is required (one or "
		                "more \"- sql:\" or \"- upsert:\" steps)",
		                c->name);
	return cfg_effect(x, v, c);
}
