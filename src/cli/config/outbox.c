/*
 * outbox: external effects (docs/outbox.md), and dispatch:, the
 * consumer's dispatcher settings.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "cli/config/reader.h"

/* A body template leaf: "/json/pointer" (the value, with its JSON type),
 * "{idempotency_key}", "{key}" (the inbox key), or "=text" (a literal
 * string). */
static int body_leaf(cfg_ctx *x, yaml_node_t *n)
{
	const char *s = cfg_sv(n);
	if (cfg_is_null(n))
		return cfg_fail(x, n,
		                "outbox body: a value is required (a JSON "
		                "pointer, {idempotency_key}, {key} or =text)");
	if (s[0] == '=' || !strcmp(s, "{idempotency_key}") ||
	    !strcmp(s, "{key}") || (s[0] == '/' && inbox__pointer_valid(s)))
		return 0;
	return cfg_fail(x, n,
	                "outbox body: \"%s\" is neither a JSON pointer "
	                "(/data/orderId), {idempotency_key}, {key} nor a "
	                "literal (=text)",
	                s);
}

/* Values in one body template: YAML aliases can repeat a node, and
 * nested aliases 10 x 10 x ... would expand to billions. */
#define BODY_MAX_VALUES 10000

/* A leaf of the body template as its text (resolved per message by
 * src/effect/decl_outbox.c). */
static json_t *body_value(cfg_ctx *x, yaml_node_t *n, int depth, void *arg)
{
	(void)depth;
	(void)arg;
	return body_leaf(x, n) ? NULL : json_string(cfg_sv(n));
}

/* What one outbox step is read into: the effect borrows the document's
 * text; headers and the body template are built here. */
typedef struct outbox_in {
	inbox_outbox_effect e;
	char *headers;
	json_t *tmpl;
} outbox_in;

static int headers_fn(cfg_ctx *x, yaml_node_t *n, void *obj)
{
	outbox_in *in = obj;
	if (cfg_want(x, n, YAML_MAPPING_NODE, "outbox headers"))
		return -1;
	json_t *o = json_object();
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     o && p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = cfg_node(x, p->key),
		            *v = cfg_node(x, p->value);
		if (!k || k->type != YAML_SCALAR_NODE ||
		    v->type != YAML_SCALAR_NODE) {
			cfg_fail(x, k,
			         "outbox headers: name: value pairs of text");
			json_decref(o);
			return -1;
		}
		json_object_set_new(o, cfg_sv(k), json_string(cfg_sv(v)));
	}
	in->headers = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return in->headers ? 0 : cfg_fail(x, n, "out of memory");
}

static int body_fn(cfg_ctx *x, yaml_node_t *n, void *obj)
{
	outbox_in *in = obj;
	in->tmpl = cfg_json_tmpl(x, n, "outbox body", BODY_MAX_VALUES,
	                         body_value, NULL);
	return in->tmpl ? 0 : -1;
}

static const cfg_key reconcile_keys[] = {
    {"url", CFG_REF, offsetof(outbox_in, e.reconcile_url), 0, 0, NULL,
     "reconcile url", 0,
     "GET URL answering whether the call with {key} happened"},
};
const cfg_section cfg_reconcile_section =
    CFG_SECTION("reconcile", "reconcile", reconcile_keys);

static int reconcile_fn(cfg_ctx *x, yaml_node_t *v, void *obj)
{
	outbox_in *in = obj;
	if (in->e.idempotent)
		return cfg_fail(x, v,
		                "outbox step %s: reconcile is for providers "
		                "without idempotency (idempotent: false)",
		                in->e.step ? in->e.step : "?");
	if (cfg_want(x, v, YAML_MAPPING_NODE, "reconcile") ||
	    cfg_read(x, v, &cfg_reconcile_section, NULL, obj))
		return -1;
	if (!cfg_get(x, v, "url"))
		return cfg_fail(x, v, "reconcile: url is required");
	return 0;
}

static const cfg_key outbox_keys[] = {
    {"step", CFG_REF, offsetof(outbox_in, e.step), 0, 0, NULL, "outbox step", 0,
     "the step's name, unique in the consumer (charge)"},
    {"method", CFG_REF, offsetof(outbox_in, e.method), 0, 0, NULL,
     "outbox method", 0, "HTTP method (POST)"},
    {"url", CFG_REF, offsetof(outbox_in, e.url), 0, 0, NULL, "outbox url", 0,
     "http:// or https:// URL of the provider"},
    {"headers", CFG_FN, 0, 0, 0, headers_fn, NULL, CFG_NULL_UNSET,
     "extra request headers, name: value"},
    {"body", CFG_FN, 0, 0, 0, body_fn, NULL, 0,
     "the JSON body template (pointers, {idempotency_key}, {key}, =text)"},
    {"idempotent", CFG_BOOL, offsetof(outbox_in, e.idempotent), 0, 0, NULL,
     NULL, 0, "true if the provider honours Idempotency-Key"},
    {"reconcile", CFG_FN, 0, 0, 0, reconcile_fn, NULL, 0,
     "{url}: how to ask a non-idempotent provider what happened"},
    {"key_header", CFG_REF, offsetof(outbox_in, e.key_header), 0, 0, NULL, NULL,
     0, "header carrying the idempotency key (Idempotency-Key)"},
    {"max_attempts", CFG_INT, offsetof(outbox_in, e.max_attempts), 1, 1000000,
     NULL, NULL, 0, "attempts before the row is dead-lettered"},
    {"when", CFG_LATER, 0, 0, 0, NULL, NULL, 0,
     "a filter: the row is written only for the messages it holds for"},
};
const cfg_section cfg_outbox_section =
    CFG_SECTION("outbox", "outbox step", outbox_keys);

/* One outbox step, into the declaration: it checks the effect (URL,
 * headers, reconcile URL...) and that the step's name is unique. */
static int outbox_step(cfg_ctx *x, yaml_node_t *m, cli_consumer *c)
{
	outbox_in in;
	memset(&in, 0, sizeof(in));
	inbox_outbox_effect init = INBOX_OUTBOX_EFFECT_INIT;
	in.e = init;
	char *body = NULL;
	int rc = -1;
	if (cfg_want(x, m, YAML_MAPPING_NODE, "an outbox step"))
		return -1;
	if (cfg_read(x, m, &cfg_outbox_section, NULL, &in))
		goto out;
	if (!in.e.step) {
		cfg_fail(x, m, "outbox: step: is required (a name: charge)");
		goto out;
	}
	if (!in.e.url) {
		cfg_fail(x, m, "outbox step %s: url is required", in.e.step);
		goto out;
	}
	if (!cfg_get(x, m, "idempotent")) {
		cfg_fail(x, m,
		         "outbox step %s: idempotent: is required — true "
		         "if the provider honours Idempotency-Key, false to "
		         "record the intent and reconcile",
		         in.e.step);
		goto out;
	}
	in.e.headers = in.headers;
	/* The template travels as JSON text (any value: a bare leaf too). */
	if (in.tmpl &&
	    !(body = json_dumps(in.tmpl, JSON_COMPACT | JSON_ENCODE_ANY))) {
		cfg_fail(x, m, "out of memory");
		goto out;
	}
	char why[512];
	int drc = inbox_decl_add_outbox(c->decl, &in.e, body, why, sizeof(why));
	if (drc == INBOX_ERR_NOMEM)
		cfg_fail(x, m, "out of memory");
	else if (drc < 0)
		cfg_fail(x, m, "outbox: %s", why);
	else
		rc = cfg_when(x, m, c->decl, INBOX_DECL_LAST_STEP);
out:
	free(in.headers);
	free(body);
	json_decref(in.tmpl);
	return rc;
}

int cfg_outbox(cfg_ctx *x, yaml_node_t *n, cli_consumer *c)
{
	if (cfg_want(x, n, YAML_SEQUENCE_NODE, "outbox"))
		return -1;
	for (yaml_node_item_t *i = n->data.sequence.items.start;
	     i < n->data.sequence.items.top; i++)
		if (outbox_step(x, cfg_node(x, *i), c))
			return -1;
	return 0;
}

/* ---- dispatch: ------------------------------------------------------ */

#define D(field) offsetof(cli_dispatch, field)
static const cfg_key dispatch_keys[] = {
    {"max_attempts", CFG_INT, D(max_attempts), 1, 1000000, NULL, NULL, 0,
     "attempts of a row before it is dead-lettered"},
    {"timeout", CFG_MS, D(timeout_ms), 1, 3600000, NULL, NULL, 0,
     "the whole HTTP call"},
    {"connect_timeout", CFG_MS, D(connect_timeout_ms), 1, 3600000, NULL, NULL,
     0, "the TCP/TLS connect"},
    {"backoff", CFG_MS, D(backoff_ms), 0, 86400000, NULL, NULL, 0,
     "first retry delay (doubled per attempt)"},
    {"max_backoff", CFG_MS, D(max_backoff_ms), 0, 86400000, NULL, NULL, 0,
     "longest retry delay"},
    {"lease", CFG_MS, D(lease_ms), 1, 86400000, NULL, NULL, 0,
     "a claimed row's lease (at least 2 x timeout + 1.5s)"},
    {"batch", CFG_INT, D(batch), 1, 1000, NULL, NULL, 0,
     "rows claimed at a time"},
    {"poll", CFG_MS, D(poll_ms), 1, 60000, NULL, NULL, 0,
     "wait between polls when idle"},
    {"concurrency", CFG_INT, D(concurrency), 1, 10000, NULL, NULL, 0,
     "calls in flight per provider"},
};
#undef D
const cfg_section cfg_dispatch_section =
    CFG_SECTION("dispatch", "dispatch", dispatch_keys);

/* dispatch: and its defaults, read before the outbox steps: the steps'
 * max_attempts default to dispatch.max_attempts. */
int cfg_dispatch(cfg_ctx *x, yaml_node_t *m, cli_consumer *c)
{
	inbox_dispatcher_options def = INBOX_DISPATCHER_OPTIONS_INIT;
	cli_dispatch *d = &c->dispatch;
	d->max_attempts = def.max_attempts;
	d->timeout_ms = def.timeout_ms;
	d->connect_timeout_ms = def.connect_timeout_ms;
	d->backoff_ms = def.backoff_ms;
	d->max_backoff_ms = def.max_backoff_ms;
	d->lease_ms = def.lease_ms;
	d->batch = def.batch;
	d->poll_ms = def.poll_ms;
	d->concurrency = def.concurrency;
	yaml_node_t *n = cfg_get(x, m, "dispatch");
	if (!n || cfg_is_null(n))
		return 0;
	if (cfg_want(x, n, YAML_MAPPING_NODE, "dispatch") ||
	    cfg_read(x, n, &cfg_dispatch_section, NULL, d))
		return -1;
	if (d->max_backoff_ms < d->backoff_ms)
		return cfg_fail(x, n, "dispatch: max_backoff is below backoff");
	if (d->lease_ms && d->lease_ms < 2 * d->timeout_ms + 1500)
		return cfg_fail(
		    x, n,
		    "dispatch: lease must cover a reconcile and a call: "
		    "at least 2 x timeout + 1.5s");
	return 0;
}
