/*
 * quickstart: the smallest useful libinbox program.
 *
 * A consumer "billing.order-created.v1" creates one invoice per
 * order-created event. The broker delivers the same event twice (a crash
 * before the ack, say): the second delivery is a duplicate and creates
 * nothing. Run it twice: every event is then a duplicate, because the
 * inbox is in the database, not in memory.
 *
 *   cc quickstart.c $(pkg-config --cflags --libs inbox) -o quickstart
 *   ./quickstart [sqlite:quickstart.db]
 */
#include <inbox/inbox.h>

#include <stdio.h>
#include <string.h>

/* The handler runs inside the inbox's transaction: the invoice and the
 * inbox record commit together, or neither does. */
static int create_invoice(inbox_txn *txn, const inbox_msg *msg, void *payload)
{
	const char *order, *total;
	(void)payload;
	if (inbox_msg_get(msg, "/data/orderId", &order) != INBOX_OK ||
	    inbox_msg_get(msg, "/data/totalCents", &total) != INBOX_OK) {
		inbox_txn_set_reason(txn, "orderId and totalCents required");
		return INBOX_HANDLER_REJECT; /* permanent: dead letter */
	}
	const char *params[] = {order, total};
	if (inbox_txn_exec(txn,
	                   "INSERT INTO invoices (order_id, total_cents) "
	                   "VALUES ($1, $2)",
	                   2, params, NULL) != INBOX_OK)
		return INBOX_HANDLER_RETRY; /* transient: roll back, redeliver
		                             */
	return INBOX_HANDLER_OK;
}

/* The library never prints: what it retries or works around (a lost
 * broker, a batch rolled back) comes here, from whichever thread noticed
 * it. fields is a JSON object. */
static void on_log(inbox_log_level level, const char *consumer,
                   const char *event, const char *fields, void *payload)
{
	(void)payload;
	fprintf(stderr, "%s %s %s %s\n", inbox_log_level_name(level),
	        consumer ? consumer : "-", event, fields);
}

int main(int argc, char **argv)
{
	const char *url = argc > 1 ? argv[1] : "sqlite:quickstart.db";
	inbox_log_set(on_log, INBOX_LOG_WARN, NULL);
	inbox_store *st = NULL;
	int rc = inbox_store_open(&st, url, NULL);
	if (rc != INBOX_OK) {
		fprintf(stderr, "open %s: %s: %s\n", url, inbox_strerror(rc),
		        inbox_store_errmsg(st));
		inbox_store_close(st);
		return 1;
	}
	/* The business table is yours; the inbox tables are created by
	 * inbox_store_open (auto_migrate). */
	rc = inbox_store_exec(st,
	                      "CREATE TABLE IF NOT EXISTS invoices "
	                      "(order_id TEXT, total_cents BIGINT)",
	                      0, NULL, NULL);
	if (rc != INBOX_OK) {
		fprintf(stderr, "create table: %s\n", inbox_store_errmsg(st));
		inbox_store_close(st);
		return 1;
	}
	inbox_consumer_options o = INBOX_CONSUMER_OPTIONS_INIT;
	o.name = "billing.order-created.v1";
	o.key_template = "create-invoice:{/data/orderId}";
	o.fingerprint_pointer = "/data";
	o.handler = create_invoice;
	inbox_consumer *c = NULL;
	char err[256];
	rc = inbox_consumer_open(&c, st, &o, err, sizeof(err));
	if (rc != INBOX_OK) {
		fprintf(stderr, "consumer: %s\n", err);
		inbox_store_close(st);
		return 1;
	}

	const char *events[] = {
	    "{\"id\":\"e-1\",\"data\":{\"orderId\":\"o-1\",\"totalCents\":1500}"
	    "}",
	    "{\"id\":\"e-2\",\"data\":{\"orderId\":\"o-2\",\"totalCents\":990}"
	    "}",
	    /* redelivery of e-1 after a crash before the ack */
	    "{\"id\":\"e-1\",\"data\":{\"orderId\":\"o-1\",\"totalCents\":1500}"
	    "}",
	    /* the producer retried with a new id: same order, same effect */
	    "{\"id\":\"e-3\",\"data\":{\"orderId\":\"o-2\",\"totalCents\":990}"
	    "}",
	};
	size_t n = sizeof(events) / sizeof(*events);
	inbox_delivery d[4] = {INBOX_DELIVERY_INIT};
	/* results are versioned (docs/abi.md): the first element says the
	 * array's layout, the library fills in the rest */
	inbox_result r[4] = {INBOX_RESULT_INIT};
	for (size_t i = 0; i < n; i++) {
		d[i] = (inbox_delivery)INBOX_DELIVERY_INIT;
		d[i].payload = events[i];
		d[i].payload_len = strlen(events[i]);
	}
	/* One transaction for the batch; ack only after it returned OK. */
	rc = inbox_consumer_process_batch(c, d, n, r);
	if (rc != INBOX_OK) {
		fprintf(stderr, "batch: %s\n", inbox_consumer_errmsg(c));
	} else {
		for (size_t i = 0; i < n; i++)
			printf("%-32s %-10s ack=%s\n", r[i].key,
			       inbox_outcome_name(r[i].outcome),
			       inbox_outcome_ackable(r[i].outcome) ? "yes"
			                                           : "no");
	}
	inbox_consumer_close(c);
	inbox_store_close(st);
	return rc == INBOX_OK ? 0 : 1;
}
