/*
 * bench/plain_sources: the plain client loops of bench/sources — one per
 * broker, each as one would write it by hand for the job — and what they
 * share: the libpq writer (the ceiling's rows, one transaction per batch)
 * and the loaders that fill the brokers with the workload.
 */
#ifndef BENCH_PLAIN_SOURCES_H
#define BENCH_PLAIN_SOURCES_H

#include <stddef.h>

#define PS_CONSUMER "billing.order-created.v1"

/* The rows of one batch, written in one statement (one transaction):
 * the inbox rows (ON CONFLICT DO NOTHING) and the invoice of each key that
 * went in — the ceiling's SQL, prepared, arrays as parameters. */
typedef struct ps_pg ps_pg;

/* Connect, make sure libinbox's tables exist (its own migration), and
 * prepare the statement. Exits on failure. */
ps_pg *ps_pg_open(const char *url);
/* Parse one message (jansson; fingerprint = SHA-256 of the compact
 * sorted-keys dump, equal to libinbox's for this data) and add it to the
 * batch. -1 on a message that does not parse. */
int ps_pg_add(ps_pg *pg, const char *json, size_t len);
/* Write the batch (one transaction); returns the invoices it inserted, or
 * exits on a database error. */
long ps_pg_flush(ps_pg *pg);
/* Total messages added and invoices written since open. */
long ps_pg_messages(const ps_pg *pg);
long ps_pg_invoices(const ps_pg *pg);
void ps_pg_close(ps_pg *pg);

/* One loop per broker: consume N messages in batches of BATCH from the
 * broker's NAME (stream, queue, topic) as GROUP, write each batch through
 * pg, then acknowledge it (after the commit). 0 on success. */
int ps_redis_run(const char *url, const char *name, const char *group,
                 ps_pg *pg, long n, int batch);
int ps_amqp_run(const char *url, const char *name, const char *group, ps_pg *pg,
                long n, int batch);
int ps_nats_run(const char *url, const char *name, const char *group, ps_pg *pg,
                long n, int batch);
int ps_kafka_run(const char *url, const char *name, const char *group,
                 ps_pg *pg, long n, int batch);

/* Loaders: messages [0, N) of the workload into NAME. 0 on success. */
int ps_redis_load(const char *url, const char *name, long n);
int ps_amqp_load(const char *url, const char *name, long n);
int ps_nats_load(const char *url, const char *name, long n);
int ps_kafka_load(const char *url, const char *name, long n);

/* "HOST:PORT" (or "scheme://[user[:pass]@]HOST:PORT[/...]") into host
 * and port; user and pass when given (else left as they are). */
int ps_host_port(const char *url, char *host, size_t hostlen, int *port,
                 char *user, char *pass, size_t credlen);

#endif
