/*
 * declared: the quickstart's consumer with its effect declared rather
 * than written (include/inbox/decl.h) — what the `inbox` daemon's config
 * file says with setup:, effect: and outbox:, from C. The setup SQL
 * creates the tables, one SQL step writes the invoice, a versioned upsert
 * keeps the order's latest status, an outbox step asks a mailer to send
 * the invoice (performed later by a dispatcher, with an idempotency key).
 *
 *   cc declared.c $(pkg-config --cflags --libs inbox) -o declared
 *   ./declared [sqlite:declared.db]
 */
#include <inbox/decl.h>
#include <inbox/inbox.h>

#include <stdio.h>
#include <string.h>

#define CONSUMER "billing.order-created.v1"

/* The declaration: built once, then only read by the handler. */
static inbox_decl *billing(char *why, size_t len)
{
	inbox_decl_options o = INBOX_DECL_OPTIONS_INIT;
	o.consumer = CONSUMER; /* the outbox keys derive from it */
	o.setup_sql = "CREATE TABLE IF NOT EXISTS invoices "
	              "(order_id TEXT, total_cents BIGINT);"
	              "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, "
	              "version BIGINT NOT NULL, status TEXT)";
	inbox_decl *d = NULL;
	if (inbox_decl_new(&d, &o, why, len) != INBOX_OK)
		return NULL;
	const char *params[] = {"/data/orderId", "/data/totalCents"};
	const char *cols[] = {"status"}, *ptrs[] = {"/data/status"};
	inbox_decl_upsert u = INBOX_DECL_UPSERT_INIT;
	u.table = "orders";
	u.key_column = "id";
	u.key_pointer = "/data/orderId";
	u.version_column = "version";
	u.version_pointer = "/data/version";
	u.nset = 1;
	u.set_columns = cols;
	u.set_pointers = ptrs;
	inbox_outbox_effect mail = INBOX_OUTBOX_EFFECT_INIT;
	mail.step = "mail-invoice";
	mail.url = "https://mailer.example/send";
	mail.idempotent = 1;
	if (inbox_decl_add_sql(d,
	                       "INSERT INTO invoices (order_id, total_cents) "
	                       "VALUES ($1, $2)",
	                       2, params, why, len) != INBOX_OK ||
	    inbox_decl_add_upsert(d, &u, why, len) != INBOX_OK ||
	    inbox_decl_add_outbox(d, &mail,
	                          "{\"order\": \"/data/orderId\", "
	                          "\"template\": \"=invoice\", "
	                          "\"reference\": \"{idempotency_key}\"}",
	                          why, len) != INBOX_OK) {
		inbox_decl_free(d);
		return NULL;
	}
	return d;
}

int main(int argc, char **argv)
{
	const char *url = argc > 1 ? argv[1] : "sqlite:declared.db";
	char why[512];
	inbox_decl *d = billing(why, sizeof(why));
	if (!d) {
		fprintf(stderr, "declaration: %s\n", why);
		return 1;
	}
	inbox_store *st = NULL;
	int rc = inbox_store_open(&st, url, NULL);
	if (rc != INBOX_OK) {
		fprintf(stderr, "open %s: %s: %s\n", url, inbox_strerror(rc),
		        inbox_store_errmsg(st));
		goto done;
	}
	/* Setup SQL, then every step prepared against the database: a
	 * missing table or column stops here, before any message. */
	int step = 0;
	if ((rc = inbox_decl_prepare(d, st, &step, why, sizeof(why)))) {
		fprintf(stderr, "%s %d: %s\n", step ? "step" : "setup", step,
		        why);
		goto done;
	}
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = CONSUMER;
	o.key_template = "create-invoice:{/data/orderId}";
	o.handler = inbox_decl_handler;
	o.handler_payload = d;
	inbox_consumer *c = NULL;
	if ((rc = inbox_consumer_open(&c, st, &o, why, sizeof(why)))) {
		fprintf(stderr, "consumer: %s\n", why);
		goto done;
	}
	const char *events[] = {
	    "{\"id\":\"e-1\",\"data\":{\"orderId\":\"o-1\",\"totalCents\":1500,"
	    "\"version\":1,\"status\":\"created\"}}",
	    /* redelivery of e-1: a duplicate, nothing runs twice */
	    "{\"id\":\"e-1\",\"data\":{\"orderId\":\"o-1\",\"totalCents\":1500,"
	    "\"version\":1,\"status\":\"created\"}}",
	    /* no totalCents: a dead letter naming the pointer */
	    "{\"id\":\"e-2\",\"data\":{\"orderId\":\"o-2\",\"version\":1}}",
	};
	for (size_t i = 0; i < sizeof(events) / sizeof(*events); i++) {
		inbox_delivery dl = INBOX_DELIVERY_INIT;
		inbox_result r = INBOX_RESULT_INIT;
		dl.payload = events[i];
		dl.payload_len = strlen(events[i]);
		if ((rc = inbox_consumer_process(c, &dl, &r))) {
			fprintf(stderr, "process: %s\n",
			        inbox_consumer_errmsg(c));
			break;
		}
		printf("%-24s %-14s %s\n", r.key ? r.key : "-",
		       inbox_outcome_name(r.outcome), r.reason ? r.reason : "");
	}
	inbox_consumer_close(c);
done:
	inbox_store_close(st);
	inbox_decl_free(d);
	return rc == INBOX_OK ? 0 : 1;
}
