/*
 * The consumer: deduplicate a batch of deliveries in one transaction.
 *
 *   prepare  parse every delivery, derive id, key, fingerprint (no I/O);
 *            what cannot be parsed becomes a dead letter without a record
 *   claim    one statement inserts every new key, in sorted key order
 *   decide   per delivery, in delivery order: duplicate, conflict, in
 *            progress, retry of a failed record, or new -> handler under
 *            a savepoint
 *   commit   once; counters move only after the commit
 *
 * A transient database error anywhere — in the inbox's own statements or
 * in a handler's, whatever the handler returns after it — rolls the whole
 * batch back and the batch is run again (a few times) before
 * INBOX_ERR_TRANSIENT is returned. Nothing of a rolled-back batch counts:
 * attempts are only ever written inside the batch's transaction, so an
 * infrastructure fault never moves a message toward its dead letter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/abi.h"
#include "core/consumer.h"

#define BATCH_TRANSIENT_TRIES 4

/* The largest max_result_bytes accepted (inbox.h). */
#define MAX_RESULT_LIMIT ((size_t)256 * 1024 * 1024)

const double inbox_latency_bounds[INBOX_LATENCY_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,   0.25,   0.5,   1.0,  1e300};

static int valid_name(const char *s)
{
	if (!s || !*s || strlen(s) > 200)
		return 0;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x21 || *p == 0x7f)
			return 0;
	return 1;
}

/* Bound the store's transactions by the batch's time budget: a lock
 * waited for, a statement, a session idle inside the transaction (see
 * batch_timeout_ms in inbox.h). */
static int apply_budget(inbox_store *st, const inbox_consumer_options *o)
{
	int64_t budget = o->version >= 3 ? o->batch_timeout_ms : 0;
	if (budget == 0)
		budget = o->lease_ms / 3 > 1000 ? o->lease_ms / 3 : 1000;
	if (budget < 0 || st->vt->version < 5 || !st->vt->set_limits)
		return INBOX_OK;
	inbox_store_limits l = {budget, budget, budget};
	return st->vt->set_limits(st, &l);
}

/* The bound on deliveries without completion (see max_deliveries in
 * inbox.h): well above max_attempts, since every retry is a delivery
 * too and so are the redeliveries that are no fault of the message. */
static int32_t max_deliveries(const inbox_consumer_options *o)
{
	int md = o->version >= 4 ? o->max_deliveries : 0;
	if (md < 0)
		return 0;
	if (md > 0)
		return md;
	int64_t d = (int64_t)o->max_attempts * 10;
	if (d < 20)
		d = 20;
	return d > INT32_MAX ? INT32_MAX : (int32_t)d;
}

/* Seconds as "7d", "36h", "90m", "2s": the largest unit that divides. */
static const char *window_text(int64_t s, char *buf, size_t len)
{
	if (s > 0 && s % 86400 == 0)
		snprintf(buf, len, "%lldd", (long long)(s / 86400));
	else if (s > 0 && s % 3600 == 0)
		snprintf(buf, len, "%lldh", (long long)(s / 3600));
	else if (s > 0 && s % 60 == 0)
		snprintf(buf, len, "%lldm", (long long)(s / 60));
	else
		snprintf(buf, len, "%llds", (long long)s);
	return buf;
}

int inbox_consumer_open(inbox_consumer **out, inbox_store *st,
                        const inbox_consumer_options *o, char *err,
                        size_t errlen)
{
	char dummy[8];
	if (!err) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	if (errlen)
		err[0] = '\0';
	if (!out) {
		snprintf(err, errlen, "out is required");
		return INBOX_ERR_INVALID;
	}
	*out = NULL;
	if (!st || !o) {
		snprintf(err, errlen, "store and options are required");
		return INBOX_ERR_INVALID;
	}
	if (inbox__vcheck(INBOX__V_CONSUMER_OPTIONS, o->version, err, errlen) <
	    0)
		return INBOX_ERR_INVALID;
	if (!valid_name(o->name)) {
		snprintf(err, errlen,
		         "consumer name must be 1-200 printable characters "
		         "without spaces");
		return INBOX_ERR_INVALID;
	}
	const char *idp = o->id_pointer ? o->id_pointer : "/id";
	const char *fpp = o->fingerprint_pointer ? o->fingerprint_pointer : "";
	if (!inbox__pointer_valid(idp)) {
		snprintf(err, errlen, "id_pointer \"%s\" is not a JSON pointer",
		         idp);
		return INBOX_ERR_INVALID;
	}
	if (!inbox__pointer_valid(fpp)) {
		snprintf(err, errlen,
		         "fingerprint pointer \"%s\" is not a JSON pointer",
		         fpp);
		return INBOX_ERR_INVALID;
	}
	if (o->retention_seconds <= 0 || o->max_attempts <= 0 ||
	    o->lease_ms <= 0 || o->max_payload == 0) {
		snprintf(err, errlen,
		         "retention, max_attempts, lease and max_payload must "
		         "be positive");
		return INBOX_ERR_INVALID;
	}
	int md = o->version >= 4 ? o->max_deliveries : 0;
	if (md > 0 && md < o->max_attempts) {
		snprintf(err, errlen,
		         "max_deliveries (%d) must be at least max_attempts "
		         "(%d): every retry is a delivery too",
		         md, o->max_attempts);
		return INBOX_ERR_INVALID;
	}
	size_t mr = o->version >= 5 ? o->max_result_bytes : 0;
	if (mr > MAX_RESULT_LIMIT) {
		snprintf(err, errlen,
		         "max_result_bytes (%zu) is over the limit of %zu "
		         "bytes (256 MiB)",
		         mr, MAX_RESULT_LIMIT);
		return INBOX_ERR_INVALID;
	}
	/* An unknown value would fall through to APPLY, the risky one. */
	if (o->replay_policy != INBOX_REPLAY_DEAD_LETTER &&
	    o->replay_policy != INBOX_REPLAY_DROP &&
	    o->replay_policy != INBOX_REPLAY_APPLY) {
		snprintf(err, errlen, "replay_policy %d is not a policy",
		         (int)o->replay_policy);
		return INBOX_ERR_INVALID;
	}
	inbox_consumer *c = calloc(1, sizeof(*c));
	if (!c)
		return INBOX_ERR_NOMEM;
	int krc =
	    inbox__keytmpl_compile(&c->tmpl, o->key_template, err, errlen);
	if (krc != 0) {
		free(c);
		return krc;
	}
	c->st = st;
	c->name = strdup(o->name);
	c->id_pointer = strdup(idp);
	c->fp_pointer = strdup(fpp);
	c->retention_s = o->retention_seconds;
	c->max_attempts = o->max_attempts;
	c->max_deliveries = max_deliveries(o);
	c->lease_ms = o->lease_ms;
	c->max_payload = o->max_payload;
	c->max_result = mr ? mr : INBOX_DEFAULT_MAX_RESULT_BYTES;
	c->replay = o->replay_policy;
	c->handler = o->handler;
	c->handler_payload = o->handler_payload;
	/* on_handlers exists from version 6 of the options on. */
	c->on_handlers = o->version >= 6 ? o->on_handlers : NULL;
	if (!c->name || !c->id_pointer || !c->fp_pointer) {
		inbox_consumer_close(c);
		return INBOX_ERR_NOMEM;
	}
	/* json_schema exists from version 2 of the options on. */
	const char *schema = o->version >= 2 ? o->json_schema : NULL;
	if (schema) {
		int src = inbox_schema_open(&c->schema, schema, strlen(schema),
		                            err, errlen);
		if (src != INBOX_OK) {
			inbox_consumer_close(c);
			return src;
		}
	}
	/* Without auto_migrate the schema may be missing or older. */
	int version = 0;
	int rc = st->vt->schema_version(st, &version);
	if (rc == INBOX_OK && version != INBOX__SCHEMA_VERSION) {
		snprintf(err, errlen,
		         "the store's schema is at version %d, this library "
		         "needs %d: run inbox migrate (or open the store with "
		         "auto_migrate)",
		         version, INBOX__SCHEMA_VERSION);
		inbox_consumer_close(c);
		return INBOX_ERR_SCHEMA;
	}
	if (rc == INBOX_OK)
		rc = st->vt->register_consumer(st, c->name, c->retention_s);
	int64_t stored = 0;
	if (rc == INBOX_OK)
		rc = inbox__stored_retention(st, c->name, &stored);
	if (rc == INBOX_OK && stored > 0 && stored != c->retention_s) {
		/* The window is a promise to every process of the consumer
		 * (and to the purge): one starting with another may not
		 * change it. */
		char want[24], have[24];
		snprintf(err, errlen,
		         "retention %s differs from the %s "
		         "stored in the store; a window is changed on purpose "
		         "only (inbox migrate --set-retention, or "
		         "inbox_admin_set_retention())",
		         window_text(c->retention_s, want, sizeof(want)),
		         window_text(stored, have, sizeof(have)));
		inbox_consumer_close(c);
		return INBOX_ERR_INVALID;
	}
	if (rc == INBOX_OK)
		rc = apply_budget(st, o);
	if (rc < 0) {
		snprintf(err, errlen, "cannot register consumer: %s",
		         st->errmsg);
		inbox_consumer_close(c);
		return rc;
	}
	*out = c;
	return INBOX_OK;
}

void inbox_consumer_close(inbox_consumer *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->claims_held; i++)
		inbox__claim_release(&c->claims[i]);
	inbox__claim_release(&c->lease_claim);
	inbox__buf_free(&c->lease_key);
	for (size_t i = 0; i < c->slots_cap; i++) {
		inbox__msg_free(&c->slots[i].msg);
		inbox__buf_free(&c->slots[i].own.data);
		inbox__buf_free(&c->slots[i].own.type);
	}
	free(c->slots);
	free(c->claims);
	free(c->order);
	free(c->run_msgs);
	inbox__buf_free(&c->canon);
	inbox__keytmpl_free(c->tmpl);
	inbox_schema_close(c->schema);
	free(c->name);
	free(c->id_pointer);
	free(c->fp_pointer);
	free(c);
}

const char *inbox_consumer_errmsg(const inbox_consumer *c)
{
	return c ? c->errmsg : "no consumer";
}

const char *inbox_consumer_name(const inbox_consumer *c)
{
	return c ? c->name : NULL;
}

int inbox_consumer_stats(const inbox_consumer *c, inbox_stats *out)
{
	if (!c || !out)
		return INBOX_ERR_INVALID;
	/* the message goes on the handle, as for every call on it */
	inbox_consumer *mc = (inbox_consumer *)c;
	if (inbox__vcheck(INBOX__V_STATS, out->version, mc->errmsg,
	                  sizeof(mc->errmsg)) < 0)
		return INBOX_ERR_INVALID;
	inbox__vfill(INBOX__V_STATS, out, &c->stats);
	return INBOX_OK;
}

void inbox__set_err(inbox_consumer *c, int rc, const char *what)
{
	snprintf(c->errmsg, sizeof(c->errmsg), "%s: %s%s%s", what,
	         inbox_strerror(rc), c->st->errmsg[0] ? ": " : "",
	         c->st->errmsg);
}

void inbox__observe(inbox_consumer *c, inbox_outcome o, double seconds,
                    int takeover)
{
	inbox_stats *s = &c->stats;
	s->messages++;
	switch (o) {
	case INBOX_APPLIED:
		s->applied++;
		break;
	case INBOX_DUPLICATE:
		s->duplicates++;
		break;
	case INBOX_CONFLICT:
		s->conflicts++;
		s->dead_letters++;
		break;
	case INBOX_STALE:
		s->stale++;
		break;
	case INBOX_SKIPPED:
		s->skipped++;
		break;
	case INBOX_RETRY:
		s->retries++;
		break;
	case INBOX_DEAD_LETTERED:
		s->dead_letters++;
		break;
	case INBOX_IN_PROGRESS:
		s->in_progress++;
		break;
	default:
		break;
	}
	if (takeover)
		s->lease_takeovers++;
	if (seconds >= 0) {
		s->processing_seconds_sum += seconds;
		s->processing_count++;
		for (int i = 0; i < INBOX_LATENCY_BUCKETS; i++)
			if (seconds <= inbox_latency_bounds[i])
				s->processing_buckets[i]++;
	}
}

/* What makes a dead letter the same message as an earlier one of the
 * consumer (the store's unique key is (consumer, dedup_key)): its key,
 * when it has one, and its raw bytes. A poison message delivered five
 * times, by one daemon or by four, is one dead letter counting five
 * deliveries; the replay of a dead letter that fails again is counted on
 * it. Keyless ones are told apart by their bytes alone: two messages
 * with the same bytes are the same message. (A key never holds a NUL,
 * so "k" KEY NUL cannot be mistaken for the keyless "-" NUL.) */
static void dedup_key(const inbox_msg *m, char hex[65])
{
	const inbox_delivery *d = m->d;
	int keyed = m->key.len > 0;
	const void *parts[4] = {keyed ? "k" : "-", keyed ? m->key.data : "", "",
	                        d->payload};
	size_t lens[4] = {1, keyed ? m->key.len : 0, 1,
	                  d->payload ? d->payload_len : 0};
	inbox__sha256_parts_hex(parts, lens, 4, hex);
}

int inbox__write_dead_letter(inbox_consumer *c, const inbox_msg *m,
                             const char *reason, int32_t attempts,
                             const char *stored_fp, int64_t *id)
{
	const inbox_delivery *d = m->d;
	char dk[65];
	dedup_key(m, dk);
	inbox_dead_letter dl = {
	    .consumer = c->name,
	    .key = m->key.len ? m->key.data : NULL,
	    .message_id = m->id,
	    .payload = d->payload ? d->payload : "",
	    .payload_len = d->payload ? d->payload_len : 0,
	    .headers = d->headers,
	    .position = m->position,
	    .attempts = attempts,
	    .reason = reason,
	    .fingerprint = m->fp[0] ? m->fp : NULL,
	    .stored_fingerprint = stored_fp,
	    /* "" only if OpenSSL failed: then a row of its own */
	    .dedup_key = dk[0] ? dk : NULL,
	};
	return c->st->vt->dead_letter(c->st, &dl, id);
}

/* inbox_claim as vtable versions 1 to 6 lay it out: the same fields,
 * without the stored result. */
typedef struct claim_v6 {
	const char *key;
	const char *fingerprint;
	const char *message_id;
	int is_new;
	inbox_status status;
	char stored_fingerprint[65];
	int32_t attempts;
	int64_t fence;
	int lease_expired;
} claim_v6;

/* ... and as version 7 lays it out: without the position. */
typedef struct claim_v7 {
	claim_v6 v6;
	void *result;
	size_t result_len;
	char *result_type;
	inbox_outcome first_outcome;
} claim_v7;

int inbox__claim(inbox_consumer *c, inbox_claim *claims, size_t n,
                 inbox_status status, int64_t lease_ms)
{
	inbox_store *st = c->st;
	for (size_t i = 0; i < n; i++) {
		claims[i].result = NULL;
		claims[i].result_len = 0;
		claims[i].result_type = NULL;
		claims[i].first_outcome = INBOX_OUTCOME_NONE;
	}
	if (st->vt->version >= 8)
		return st->vt->claim(st, c->name, claims, n, status, lease_ms);
	/* An older backend steps through the array by its own size. */
	int v7 = st->vt->version == 7;
	size_t size = v7 ? sizeof(claim_v7) : sizeof(claim_v6);
	char *old = n ? calloc(n, size) : NULL;
	if (n && !old)
		return INBOX_ERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		claim_v6 *o = (claim_v6 *)(void *)(old + i * size);
		o->key = claims[i].key;
		o->fingerprint = claims[i].fingerprint;
		o->message_id = claims[i].message_id;
	}
	int rc = st->vt->claim(st, c->name, (inbox_claim *)(void *)old, n,
	                       status, lease_ms);
	for (size_t i = 0; i < n; i++) {
		claim_v6 *o = (claim_v6 *)(void *)(old + i * size);
		claims[i].is_new = o->is_new;
		claims[i].status = o->status;
		memcpy(claims[i].stored_fingerprint, o->stored_fingerprint,
		       sizeof(o->stored_fingerprint));
		claims[i].attempts = o->attempts;
		claims[i].fence = o->fence;
		claims[i].lease_expired = o->lease_expired;
		if (v7) {
			claim_v7 *o7 = (claim_v7 *)(void *)o;
			claims[i].result = o7->result;
			claims[i].result_len = o7->result_len;
			claims[i].result_type = o7->result_type;
			claims[i].first_outcome = o7->first_outcome;
		}
	}
	free(old);
	return rc;
}

void inbox__claim_release(inbox_claim *cl)
{
	free(cl->result);
	free(cl->result_type);
	cl->result = NULL;
	cl->result_type = NULL;
	cl->result_len = 0;
	cl->first_outcome = INBOX_OUTCOME_NONE;
}

int inbox__store_result(inbox_consumer *c, const char *key,
                        inbox_outcome outcome, const inbox__stored *r)
{
	inbox_store *st = c->st;
	int has = r && r->set;
	/* APPLIED is what a completed record without an outcome reads as:
	 * nothing to write for it (the hot path stays one statement). */
	if ((!has && outcome == INBOX_APPLIED) || st->vt->version < 7 ||
	    !st->vt->set_result)
		return INBOX_OK;
	return st->vt->set_result(
	    st, c->name, key, outcome, has && r->has_type ? r->type.data : NULL,
	    has ? r->data.data : NULL, has ? r->data.len : 0);
}

/* Run fn under a savepoint. On return *verdict is OK, RETRY or REJECT and
 * the savepoint is released (rolled back first unless OK). */
int inbox__run_handler(inbox_consumer *c, inbox_msg *m, inbox_handler_fn fn,
                       void *payload, int *verdict, inbox_outcome *ok,
                       char *reason, size_t rlen, inbox__stored *result)
{
	inbox_store *st = c->st;
	*ok = INBOX_APPLIED;
	reason[0] = '\0';
	if (result)
		result->set = 0;
	if (!fn) {
		*verdict = INBOX_HANDLER_OK;
		return INBOX_OK;
	}
	int rc = st->vt->savepoint(st);
	if (rc < 0)
		return rc;
	inbox_txn t;
	inbox__txn_init(&t, c, m);
	t.result = result;
	t.max_result = c->max_result;
	m->nomem = 0;
	int v = fn(&t, m, payload);
	/* A statement failed for the infrastructure's sake (a lost
	 * connection, a lock or statement timeout, a deadlock, a prepared
	 * statement the server lost) or memory ran out: whatever the handler
	 * made of it, the batch is rolled back and run again, and no attempt
	 * is counted. */
	if (t.infra_err)
		return t.infra_err;
	if (t.nomem || m->nomem)
		return INBOX_ERR_NOMEM;
	if (v == INBOX_HANDLER_OK && t.failed) {
		v = INBOX_HANDLER_RETRY;
		if (!t.reason[0])
			snprintf(t.reason, sizeof(t.reason),
			         "a statement failed: %s", st->errmsg);
	}
	if (v != INBOX_HANDLER_OK && v != INBOX_HANDLER_RETRY &&
	    v != INBOX_HANDLER_REJECT) {
		snprintf(t.reason, sizeof(t.reason),
		         "handler returned invalid verdict %d", v);
		v = INBOX_HANDLER_RETRY;
	}
	if (v == INBOX_HANDLER_RETRY && result)
		result->set = 0; /* nothing is final yet */
	if (v != INBOX_HANDLER_OK) {
		rc = st->vt->rollback_to(st);
		if (rc < 0)
			return rc;
		if (!t.reason[0])
			snprintf(t.reason, sizeof(t.reason), "%s",
			         v == INBOX_HANDLER_RETRY
			             ? "handler asked to retry"
			             : "handler rejected the message");
	}
	rc = st->vt->release(st);
	if (rc < 0)
		return rc;
	*verdict = v;
	*ok = t.skipped ? INBOX_SKIPPED : t.stale ? INBOX_STALE : INBOX_APPLIED;
	snprintf(reason, rlen, "%s", t.reason);
	return INBOX_OK;
}

/* Sorting entries: the key beside the slot index, so the comparison needs
 * no shared context (consumers run on several threads at once). */
typedef struct order_entry {
	const char *key;
	size_t idx;
} order_entry;

static int grow(inbox_consumer *c, size_t n)
{
	if (n <= c->slots_cap)
		return 0;
	size_t cap = c->slots_cap ? c->slots_cap : 16;
	while (cap < n)
		cap *= 2;
	inbox__slot *s = realloc(c->slots, cap * sizeof(*s));
	if (!s)
		return -1;
	memset(s + c->slots_cap, 0, (cap - c->slots_cap) * sizeof(*s));
	c->slots = s;
	inbox_claim *cl = realloc(c->claims, cap * sizeof(*cl));
	if (!cl)
		return -1;
	c->claims = cl;
	order_entry *o = realloc(c->order, cap * sizeof(*o));
	if (!o)
		return -1;
	c->order = o;
	const inbox_msg **rm = realloc(c->run_msgs, cap * sizeof(*rm));
	if (!rm)
		return -1;
	c->run_msgs = rm;
	c->slots_cap = c->claims_cap = cap;
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	const order_entry *x = a, *y = b;
	int r = strcmp(x->key, y->key);
	if (r)
		return r;
	/* same key: the earliest delivery first */
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Parse every delivery, find repeated keys, build the sorted claim list
 * (*nclaims claims). INBOX_OK or INBOX_ERR_NOMEM. */
static int prepare_batch(inbox_consumer *c, const inbox_delivery *d, size_t n,
                         size_t *nclaims)
{
	int64_t now = inbox__now_ms();
	size_t np = 0;
	for (size_t i = 0; i < n; i++) {
		inbox__slot *s = &c->slots[i];
		s->reason[0] = '\0';
		s->too_old = 0;
		int rc = inbox__msg_prepare(c, &s->msg, &d[i], s->reason,
		                            sizeof(s->reason));
		if (rc < 0)
			return rc;
		if (rc > 0) {
			s->kind = SLOT_BAD;
			continue;
		}
		s->kind = SLOT_PRIMARY;
		if (d[i].timestamp_ms > 0 &&
		    now - d[i].timestamp_ms > c->retention_s * 1000)
			s->too_old = 1;
		c->order[np].key = s->msg.key.data;
		c->order[np++].idx = i;
	}
	qsort(c->order, np, sizeof(*c->order), cmp_key);
	size_t nc = 0;
	for (size_t k = 0; k < np; k++) {
		size_t i = c->order[k].idx;
		inbox__slot *s = &c->slots[i];
		if (k > 0) {
			size_t p = c->order[k - 1].idx;
			inbox__slot *prev = &c->slots[p];
			if (strcmp(prev->msg.key.data, s->msg.key.data) == 0) {
				s->kind = SLOT_REPEAT;
				s->first =
				    prev->kind == SLOT_REPEAT ? prev->first : p;
				continue;
			}
		}
		s->claim = nc;
		inbox_claim *cl = &c->claims[nc++];
		memset(cl, 0, sizeof(*cl));
		cl->key = s->msg.key.data;
		cl->fingerprint = s->msg.fp;
		cl->message_id = s->msg.id;
		cl->position = s->msg.position;
	}
	*nclaims = nc;
	return INBOX_OK;
}

static void set_result(inbox__slot *s, inbox_outcome o, int32_t attempts)
{
	s->res.outcome = o;
	s->res.attempts = attempts;
	s->res.key = s->msg.key.len ? s->msg.key.data : NULL;
	s->res.reason = s->reason[0] ? s->reason : NULL;
	s->res.dead_letter_id = s->dl_id;
}

/* The stored result a delivery's inbox_result carries (version 2). */
static void attach(inbox__slot *s, const void *data, size_t len,
                   const char *type, inbox_outcome first)
{
	s->res.result = data;
	s->res.result_len = data ? len : 0;
	s->res.result_type = data ? type : NULL;
	s->res.first_outcome = first;
}

/* Attach the result this processing's handler set, if it set one. */
static void attach_own(inbox__slot *s)
{
	if (s->own.set)
		attach(s, s->own.data.data, s->own.data.len,
		       s->own.has_type ? s->own.type.data : NULL,
		       INBOX_OUTCOME_NONE);
}

/* Dead-letter a claimed record: move it to DEAD and keep the message. */
static int bury(inbox_consumer *c, inbox__slot *s, int32_t attempts,
                inbox_status expect)
{
	inbox_store *st = c->st;
	int64_t rows;
	int rc = st->vt->finish(st, c->name, s->msg.key.data, 0, expect,
	                        INBOX_ST_DEAD, attempts, &rows);
	if (rc < 0)
		return rc;
	if (rows == 0) {
		/* Someone else moved the record first: it is theirs now. */
		snprintf(s->reason, sizeof(s->reason),
		         "taken by another worker");
		set_result(s, INBOX_IN_PROGRESS, attempts);
		return INBOX_OK;
	}
	rc = inbox__write_dead_letter(c, &s->msg, s->reason, attempts, NULL,
	                              &s->dl_id);
	if (rc < 0)
		return rc;
	set_result(s, INBOX_DEAD_LETTERED, attempts);
	return INBOX_OK;
}

/* Run the handler for a claimed key and record what came of it. */
static int apply(inbox_consumer *c, inbox__slot *s, int32_t attempt,
                 int stored_attempts)
{
	inbox_store *st = c->st;
	int verdict, rc;
	inbox_outcome ok;
	int64_t rows;
	s->msg.attempt = attempt;
	rc = inbox__run_handler(c, &s->msg, c->handler, c->handler_payload,
	                        &verdict, &ok, s->reason, sizeof(s->reason),
	                        &s->own);
	if (rc < 0)
		return rc;
	if (verdict == INBOX_HANDLER_OK) {
		inbox_outcome o = ok;
		if (attempt != stored_attempts) {
			rc = st->vt->finish(st, c->name, s->msg.key.data, 0,
			                    INBOX_ST_NONE, INBOX_ST_COMPLETED,
			                    attempt, &rows);
			if (rc < 0)
				return rc;
		}
		rc = inbox__store_result(c, s->msg.key.data, o, &s->own);
		if (rc < 0)
			return rc;
		set_result(s, o, attempt);
		attach_own(s);
		return INBOX_OK;
	}
	if (verdict == INBOX_HANDLER_REJECT) {
		rc = bury(c, s, attempt, INBOX_ST_NONE);
		if (rc < 0 || s->res.outcome != INBOX_DEAD_LETTERED ||
		    !s->own.set)
			return rc;
		/* the refusal is the answer its duplicates get */
		rc = inbox__store_result(c, s->msg.key.data,
		                         INBOX_DEAD_LETTERED, &s->own);
		if (rc >= 0)
			attach_own(s);
		return rc;
	}
	if (attempt >= c->max_attempts) {
		char why[512];
		snprintf(why, sizeof(why), "max attempts (%d) reached: %s",
		         c->max_attempts, s->reason);
		snprintf(s->reason, sizeof(s->reason), "%s", why);
		return bury(c, s, attempt, INBOX_ST_NONE);
	}
	rc = st->vt->finish(st, c->name, s->msg.key.data, 0, INBOX_ST_NONE,
	                    INBOX_ST_FAILED, attempt, &rows);
	if (rc < 0)
		return rc;
	set_result(s, INBOX_RETRY, attempt);
	return INBOX_OK;
}

/* A key that never completes, delivered more than max_deliveries times:
 * dead-letter it (with the attempts the inbox recorded) instead of running
 * the handler once more. 1 when buried (or found taken), 0 when not over
 * the bound, < 0 on error. */
static int over_deliveries(inbox_consumer *c, inbox__slot *s, int32_t attempts,
                           inbox_status expect, int *rc)
{
	int32_t n = s->msg.d->delivery_count;
	if (c->max_deliveries <= 0 || n <= c->max_deliveries)
		return 0;
	snprintf(s->reason, sizeof(s->reason),
	         "delivered %d times without completing (max_deliveries %d): "
	         "a crash loop?",
	         n, c->max_deliveries);
	*rc = bury(c, s, attempts, expect);
	return 1;
}

/* The handler is to run for s: apply() will run it (run_batch). */
static int to_apply(inbox__slot *s, int32_t attempt, int stored_attempts)
{
	s->run = 1;
	s->run_attempt = attempt;
	s->run_stored = stored_attempts;
	s->msg.attempt = attempt;
	return INBOX_OK;
}

/* Decide one primary delivery from its claim, up to the handler: every
 * outcome but the handler's is settled here; when the handler is to run,
 * s->run is set and apply() runs it (run_batch). */
static int decide(inbox_consumer *c, inbox__slot *s)
{
	inbox_store *st = c->st;
	inbox_claim *cl = &c->claims[s->claim];
	s->takeover = 0;
	s->dl_id = 0;
	s->run = 0;
	int rc;
	if (cl->is_new) {
		if (s->too_old && c->replay == INBOX_REPLAY_DEAD_LETTER) {
			snprintf(
			    s->reason, sizeof(s->reason),
			    "too old to deduplicate: message time is older "
			    "than the %llds retention window",
			    (long long)c->retention_s);
			return bury(c, s, 1, INBOX_ST_NONE);
		}
		if (s->too_old && c->replay == INBOX_REPLAY_DROP) {
			snprintf(s->reason, sizeof(s->reason),
			         "older than the retention window: dropped");
			set_result(s, INBOX_DUPLICATE, 0);
			return INBOX_OK;
		}
		if (over_deliveries(c, s, 0, INBOX_ST_NONE, &rc))
			return rc;
		return to_apply(s, 1, 1);
	}
	if (cl->status != INBOX_ST_NONE &&
	    strcmp(cl->stored_fingerprint, s->msg.fp) != 0) {
		snprintf(s->reason, sizeof(s->reason),
		         "fingerprint conflict: key \"%s\" was recorded with "
		         "fingerprint %s, this message has %s",
		         s->msg.key.data, cl->stored_fingerprint, s->msg.fp);
		rc = inbox__write_dead_letter(
		    c, &s->msg, s->reason, cl->attempts, cl->stored_fingerprint,
		    &s->dl_id);
		if (rc < 0)
			return rc;
		set_result(s, INBOX_CONFLICT, cl->attempts);
		return INBOX_OK;
	}
	switch (cl->status) {
	case INBOX_ST_COMPLETED:
	case INBOX_ST_DEAD:
		set_result(s, INBOX_DUPLICATE, cl->attempts);
		/* the first processing's answer, read with the claim */
		attach(s, cl->result, cl->result_len, cl->result_type,
		       cl->first_outcome != INBOX_OUTCOME_NONE
		           ? cl->first_outcome
		       : cl->status == INBOX_ST_DEAD ? INBOX_DEAD_LETTERED
		                                     : INBOX_APPLIED);
		return INBOX_OK;
	case INBOX_ST_PROCESSING:
		if (!cl->lease_expired) {
			snprintf(s->reason, sizeof(s->reason),
			         "held under a lease by another worker");
			set_result(s, INBOX_IN_PROGRESS, cl->attempts);
			return INBOX_OK;
		}
		s->takeover = 1;
		/* an expired lease is retried like a failure */
		__attribute__((fallthrough));
	case INBOX_ST_FAILED: {
		int32_t attempt = cl->attempts + 1;
		if (attempt > c->max_attempts) {
			snprintf(s->reason, sizeof(s->reason),
			         "max attempts (%d) reached", c->max_attempts);
			return bury(c, s, cl->attempts, cl->status);
		}
		if (over_deliveries(c, s, cl->attempts, cl->status, &rc)) {
			s->takeover = 0;
			return rc;
		}
		int taken = 0;
		int32_t att = 0;
		int64_t fence = 0;
		rc = st->vt->reclaim(st, c->name, s->msg.key.data,
		                     INBOX_ST_COMPLETED, 0, &taken, &att,
		                     &fence);
		if (rc < 0)
			return rc;
		if (!taken) {
			s->takeover = 0;
			snprintf(s->reason, sizeof(s->reason),
			         "taken by another worker");
			set_result(s, INBOX_IN_PROGRESS, cl->attempts);
			return INBOX_OK;
		}
		if (att > attempt)
			attempt = att;
		return to_apply(s, attempt, att);
	}
	default:
		/* Invisible to us and not new: another transaction holds it. */
		snprintf(s->reason, sizeof(s->reason),
		         "claimed concurrently by another worker");
		set_result(s, INBOX_IN_PROGRESS, 0);
		return INBOX_OK;
	}
}

/* Resolve a repeat of a key inside the batch from its primary. */
static int decide_repeat(inbox_consumer *c, inbox__slot *s)
{
	inbox__slot *p = &c->slots[s->first];
	s->dl_id = 0;
	s->takeover = 0;
	if (strcmp(p->msg.fp, s->msg.fp) != 0) {
		snprintf(s->reason, sizeof(s->reason),
		         "fingerprint conflict: key \"%s\" appears earlier in "
		         "the batch with fingerprint %s, this message has %s",
		         s->msg.key.data, p->msg.fp, s->msg.fp);
		/* Attempts as for a conflict with a stored record: those of
		 * the record the key has, here its primary's (at least the
		 * one this batch makes; before, 0 was written). */
		int32_t att = p->res.attempts > 0 ? p->res.attempts : 1;
		int rc = inbox__write_dead_letter(c, &s->msg, s->reason, att,
		                                  p->msg.fp, &s->dl_id);
		if (rc < 0)
			return rc;
		set_result(s, INBOX_CONFLICT, att);
		return INBOX_OK;
	}
	inbox_outcome po = p->res.outcome;
	/* A primary that will be redelivered keeps its repeats unacked too. */
	if (po == INBOX_RETRY || po == INBOX_IN_PROGRESS) {
		memmove(s->reason, p->reason, strlen(p->reason) + 1);
		set_result(s, po, p->res.attempts);
	} else {
		set_result(s, INBOX_DUPLICATE, p->res.attempts);
		/* the primary's answer, as a later batch would get it */
		if (po == INBOX_DUPLICATE)
			attach(s, p->res.result, p->res.result_len,
			       p->res.result_type, p->res.first_outcome);
		else if (po == INBOX_APPLIED || po == INBOX_STALE ||
		         po == INBOX_DEAD_LETTERED)
			attach(s, p->res.result, p->res.result_len,
			       p->res.result_type, po);
	}
	return INBOX_OK;
}

static int run_batch(inbox_consumer *c, size_t n, size_t nclaims)
{
	inbox_store *st = c->st;
	int rc = st->vt->begin(st);
	if (rc < 0)
		return rc;
	if (nclaims > 0) {
		rc = inbox__claim(c, c->claims, nclaims, INBOX_ST_COMPLETED, 0);
		if (rc < 0)
			goto fail;
	}
	/* Handlers run in delivery order, so order within a partition holds.
	 * Without on_handlers each delivery is decided and its handler run
	 * before the next is decided; with it, every delivery is decided
	 * first, the hook is told which handlers will run, then they run. */
	int hook = c->on_handlers && c->handler;
	size_t nrun = 0;
	for (size_t i = 0; i < n && rc >= 0; i++) {
		inbox__slot *s = &c->slots[i];
		s->run = 0;
		if (s->kind == SLOT_PRIMARY) {
			rc = decide(c, s);
			if (rc >= 0 && s->run && !hook)
				rc = apply(c, s, s->run_attempt, s->run_stored);
			else if (rc >= 0 && s->run)
				c->run_msgs[nrun++] = &s->msg;
		} else if (s->kind == SLOT_BAD) {
			s->dl_id = 0;
			/* one attempt, its own: the broker's count is not */
			rc = inbox__write_dead_letter(c, &s->msg, s->reason, 1,
			                              NULL, &s->dl_id);
			if (rc >= 0)
				set_result(s, INBOX_DEAD_LETTERED, 1);
		}
	}
	if (hook && rc >= 0 && nrun > 0) {
		c->on_handlers(c->run_msgs, nrun, c->handler_payload);
		for (size_t i = 0; i < n && rc >= 0; i++) {
			inbox__slot *s = &c->slots[i];
			if (s->kind == SLOT_PRIMARY && s->run)
				rc = apply(c, s, s->run_attempt, s->run_stored);
		}
	}
	for (size_t i = 0; i < n && rc >= 0; i++)
		if (c->slots[i].kind == SLOT_REPEAT)
			rc = decide_repeat(c, &c->slots[i]);
	if (rc < 0)
		goto fail;
	rc = st->vt->commit(st);
	if (rc < 0)
		goto fail;
	return INBOX_OK;
fail:
	if (st->in_txn)
		st->vt->rollback(st);
	return rc;
}

static void backoff_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* An input array of deliveries carries its version in every element, all
 * the same (docs/abi.md). Today inbox_delivery has one version, so the
 * array is read in place; a version 2 would step by the caller's size. */
static int check_deliveries(inbox_consumer *c, const inbox_delivery *d,
                            size_t n)
{
	unsigned v = d[0].version;
	if (inbox__vcheck(INBOX__V_DELIVERY, v, c->errmsg, sizeof(c->errmsg)) <
	    0)
		return INBOX_ERR_INVALID;
	for (size_t i = 1; i < n; i++)
		if (d[i].version != v) {
			snprintf(c->errmsg, sizeof(c->errmsg),
			         "inbox_delivery.version of element %zu is %u, "
			         "element 0's is %u: every delivery of a batch "
			         "carries the same (INBOX_DELIVERY_INIT)",
			         i, d[i].version, v);
			return INBOX_ERR_INVALID;
		}
	return INBOX_OK;
}

int inbox_consumer_process_batch(inbox_consumer *c, const inbox_delivery *d,
                                 size_t n, inbox_result *res)
{
	if (!c || (n > 0 && (!d || !res)))
		return INBOX_ERR_INVALID;
	if (c->st->in_txn)
		return INBOX_ERR_STATE;
	c->errmsg[0] = '\0';
	if (n == 0)
		return INBOX_OK;
	/* res[0].version is the layout of the whole array */
	unsigned rv = res->version;
	if (inbox__vcheck(INBOX__V_RESULT, rv, c->errmsg, sizeof(c->errmsg)) <
	    0)
		return INBOX_ERR_INVALID;
	size_t stride = inbox__vsize(INBOX__V_RESULT, rv);
	/* the last call's results are no longer promised to anyone */
	for (size_t k = 0; k < c->claims_held; k++)
		inbox__claim_release(&c->claims[k]);
	c->claims_held = 0;
	if (check_deliveries(c, d, n) < 0)
		return INBOX_ERR_INVALID;
	if (grow(c, n) < 0)
		return INBOX_ERR_NOMEM;
	double t0 = inbox__mono_seconds();
	size_t nclaims = 0;
	int rc = prepare_batch(c, d, n, &nclaims), redone = 0;
	if (rc < 0) {
		snprintf(c->errmsg, sizeof(c->errmsg),
		         "batch not processed: %s", inbox_strerror(rc));
		return rc;
	}
	for (int attempt = 0; attempt < BATCH_TRANSIENT_TRIES; attempt++) {
		for (size_t i = 0; i < n; i++) {
			memset(&c->slots[i].res, 0, sizeof(c->slots[i].res));
			c->slots[i].own.set = 0;
		}
		c->claims_held = nclaims;
		for (size_t k = 0; k < nclaims; k++) {
			inbox_claim *cl = &c->claims[k];
			inbox__claim_release(cl);
			cl->is_new = 0;
			cl->status = INBOX_ST_NONE;
			cl->stored_fingerprint[0] = '\0';
		}
		inbox__store_clearerr(c->st);
		rc = run_batch(c, n, nclaims);
		if (rc == INBOX__ERR_REDO) {
			/* The store lost statements it had deferred: run the
			 * batch again at once; it will not defer this time. */
			rc = INBOX_ERR_TRANSIENT;
			if (!redone++) {
				attempt--;
				continue;
			}
		}
		if (rc != INBOX_ERR_TRANSIENT)
			break;
		c->stats.transient_retries++;
		backoff_ms(10 << attempt);
	}
	if (rc < 0) {
		inbox__set_err(c, rc, "batch rolled back");
		return rc;
	}
	double dt = inbox__mono_seconds() - t0;
	c->stats.batches++;
	for (size_t i = 0; i < n; i++) {
		inbox__slot *s = &c->slots[i];
		inbox__observe(c, s->res.outcome, dt, s->takeover);
		inbox_result *r =
		    (inbox_result *)(void *)((char *)res + i * stride);
		r->version = rv;
		inbox__vfill(INBOX__V_RESULT, r, &s->res);
	}
	return INBOX_OK;
}

int inbox_consumer_process(inbox_consumer *c, const inbox_delivery *d,
                           inbox_result *res)
{
	return inbox_consumer_process_batch(c, d, 1, res);
}
