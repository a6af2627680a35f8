/*
 * The fixture of the stored-result cases (issue 14), shared by results.c
 * (the batch path) and lease_results.c (the lease path): a handler that
 * inserts the invoice and stores a result, the consumer on it, a case's
 * frame (rcase) and the check of an inbox_result's outcome and exact
 * result (answered).
 *
 * Included by both (conformance.c includes them into one translation
 * unit, and its helpers — env, open_store, process1 — are static there).
 */
#ifndef CONFORMANCE_RESULT_FIXTURE_H
#define CONFORMANCE_RESULT_FIXTURE_H

/* What result_handler stores, and how it answers. */
typedef struct rctx {
	const env *e;
	const char *type; /* content type given */
	const void *data; /* NULL: the order id, as "inv-<orderId>" */
	size_t len;
	int verdict;     /* what it returns after storing */
	int no_result;   /* store nothing */
	int then_larger; /* then try one byte over the limit */
	int set_rc;      /* what the (last) inbox_txn_set_result returned */
	int calls;
} rctx;

/* Inserts the invoice, then stores a result (see rctx). */
static int result_handler(inbox_txn *t, const inbox_msg *m, void *p)
{
	rctx *x = p;
	x->calls++;
	const char *order = NULL;
	if (inbox_msg_get(m, "/data/orderId", &order) != 0)
		return INBOX_HANDLER_REJECT;
	char q[256];
	snprintf(q, sizeof(q),
	         "INSERT INTO %s (order_id, total) VALUES ($1, 1)",
	         x->e->invoices);
	const char *params[] = {order};
	if (inbox_txn_exec(t, q, 1, params, NULL) != 0)
		return INBOX_HANDLER_RETRY;
	if (!x->no_result) {
		char inv[64];
		snprintf(inv, sizeof(inv), "inv-%s", order);
		x->set_rc =
		    x->data
		        ? inbox_txn_set_result(t, x->type, x->data, x->len)
		        : inbox_txn_set_result(t, x->type, inv, strlen(inv));
	}
	if (x->then_larger) {
		static char big[4096];
		x->set_rc = inbox_txn_set_result(t, "text/plain", big,
		                                 (size_t)x->then_larger);
	}
	if (x->verdict == INBOX_HANDLER_REJECT)
		inbox_txn_set_reason(t, "refused by the business rule");
	return x->verdict;
}

static inbox_consumer *open_results(inbox_store *st, rctx *x, size_t max_res)
{
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.results.v1";
	o.handler = result_handler;
	o.handler_payload = x;
	o.max_attempts = 3;
	o.retention_seconds = 3600;
	o.max_result_bytes = max_res;
	return open_with(st, &o);
}

/* r carries exactly the bytes and type given (type NULL: none). */
static int has_result(const inbox_result *r, const void *data, size_t len,
                      const char *type)
{
	if (!r->result || r->result_len != len ||
	    memcmp(r->result, data, len) != 0 ||
	    ((const char *)r->result)[len] != '\0')
		return 0;
	if (!type)
		return r->result_type == NULL;
	return r->result_type && strcmp(r->result_type, type) == 0;
}

static int no_result(const inbox_result *r)
{
	return r->result == NULL && r->result_len == 0 &&
	       r->result_type == NULL;
}

/* The frame of a case: its env, the handler's context (x.e set) and the
 * consumer on them, max_result_bytes max_res (0: the default). */
typedef struct rcase {
	env e;
	rctx x;
	inbox_consumer *c;
	size_t max_res;
} rcase;

static int rcase_open(rcase *k, rctx x, size_t max_res)
{
	if (env_setup(&k->e) != 0)
		return -1;
	k->x = x;
	k->x.e = &k->e;
	k->max_res = max_res;
	k->c = open_results(k->e.st, &k->x, max_res);
	return k->c ? 0 : -1;
}

/* Another process, another connection (a restart): the consumer (if
 * still open) and the store closed, then both opened again on the same
 * tables, with k->x: only the database knows what was done. */
static int rcase_reopen(rcase *k)
{
	inbox_consumer_close(k->c);
	k->c = NULL;
	inbox_store_close(k->e.st);
	k->e.st = open_store(&k->e);
	if (!k->e.st)
		return -1;
	k->c = open_results(k->e.st, &k->x, k->max_res);
	return k->c ? 0 : -1;
}

static void rcase_close(rcase *k)
{
	inbox_consumer_close(k->c);
	env_teardown(&k->e);
}

/* 0 when r's outcome is `want` and its result exactly data/len/type
 * (data NULL: none at all), else -1, said with the json it came of. */
static int answered(const char *json, const inbox_result *r, inbox_outcome want,
                    const void *data, size_t len, const char *type)
{
	if (r->outcome == want &&
	    (data ? has_result(r, data, len, type) : no_result(r)))
		return 0;
	fprintf(
	    stderr,
	    "  %s: %s with %zu result bytes (%s), wanted %s with %zu (%s)\n",
	    json, inbox_outcome_name(r->outcome), r->result_len,
	    r->result_type ? r->result_type : "no type",
	    inbox_outcome_name(want), data ? len : 0, type ? type : "no type");
	return -1;
}

/* json through c once into r: answered(json, r, want, data, len, type). */
static int gives(inbox_consumer *c, const char *json, inbox_outcome want,
                 const void *data, size_t len, const char *type,
                 inbox_result *r)
{
	if (process1(c, json, r) != 0)
		return -1;
	return answered(json, r, want, data, len, type);
}

#endif
