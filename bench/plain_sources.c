/*
 * plain_sources: the plain client loops bench/sources sets beside `inbox
 * run`, one per broker, and the loaders that pre-load the brokers.
 *
 *   plain_sources setup PG_URL
 *       create libinbox's tables (its migration, prefix bench_) and
 *       bench_src_invoices.
 *   plain_sources distinct N
 *       print the distinct events among the first N messages.
 *   plain_sources load BROKER URL NAME N
 *       put messages [0, N) of bench/workload.h into NAME: a Redis stream
 *       (field "payload"), a RabbitMQ queue (declared durable; persistent
 *       messages, publisher confirms), a JetStream stream (subjects
 *       NAME.>, file storage; published to NAME.orders), a Kafka topic
 *       (round-robin over its partitions).
 *   plain_sources run BROKER URL NAME GROUP PG_URL N BATCH
 *       consume N messages from NAME as GROUP (a Redis consumer group, a
 *       RabbitMQ consumer, a JetStream durable pull consumer, a Kafka
 *       consumer group), BATCH at a time: per batch parse every message,
 *       write the batch in one transaction through libpq (the ceiling's
 *       rows: libinbox's inbox table, ON CONFLICT DO NOTHING, and one
 *       invoice per key that went in), then acknowledge it. Prints
 *         RESULT broker=B messages=N invoices=I counts=ok|WRONG
 *                seconds=S user_s=U sys_s=Y backend_s=B
 *       (seconds from the first message in hand to the last ack;
 *       backend_s: the CPU of its connection's server process meanwhile,
 *       from /proc, 0 when the server is elsewhere).
 *
 * BROKER: redis | amqp | nats | kafka. URL: redis://HOST:PORT,
 * amqp://USER:PASS@HOST:PORT/%2f, nats://HOST:PORT, or Kafka's bootstrap
 * list HOST:PORT,... . The invoices go to bench_src_invoices (order_id,
 * total_cents, at = clock_timestamp(), daemon: which of several daemons
 * wrote it — the connection's application_name, by default, so that the
 * daemon's INSERT is the plain loop's, without a literal that would keep
 * it from being merged — else NULL), created here; bench/sources times
 * every contender from its first invoice to its last.
 */
#include <inbox/inbox.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "plain_sources.h"
#include "workload.h"

/* ---- the libpq writer ------------------------------------------------ */

typedef struct sbuf {
	char *p;
	size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 2 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (b->len + n + 2 > cap)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p) {
			fprintf(stderr, "plain_sources: out of memory\n");
			exit(1);
		}
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* The next element of a text array literal: "{a,b" ... then "}". */
static void sb_elem(sbuf *b, const char *s, size_t n)
{
	sb_add(b, b->len ? "," : "{", 1);
	sb_add(b, s, n);
}

struct ps_pg {
	PGconn *c;
	int backend; /* its server process, for its CPU */
	EVP_MD *md;
	sbuf keys, fps, orders, totals;
	long nbatch, messages, invoices;
};

#define PS_STMT                                                                \
	"WITH ins AS (INSERT INTO bench_inbox AS x (gen, consumer, key, "      \
	"fingerprint, status, attempts, fence, message_id, processed_at) "     \
	"SELECT (SELECT max(gen) FROM bench_inbox_generations), "              \
	"'" PS_CONSUMER "', t.k, t.f, 'completed', 1, 1, t.k, now() "          \
	"FROM unnest($1::text[], $2::text[]) AS t(k, f) "                      \
	"ON CONFLICT DO NOTHING RETURNING x.key) "                             \
	"INSERT INTO bench_src_invoices (order_id, total_cents) "              \
	"SELECT DISTINCT ON (t.k) t.o, t.c "                                   \
	"FROM unnest($1::text[], $3::text[], $4::bigint[]) AS t(k, o, c) "     \
	"WHERE t.k IN (SELECT key FROM ins)"

static void pg_die(PGconn *c, const char *what)
{
	fprintf(stderr, "plain_sources: %s: %s", what, PQerrorMessage(c));
	exit(1);
}

ps_pg *ps_pg_open(const char *url)
{
	/* libinbox's tables, by its own migration (prefix bench_). */
	inbox_store_options so = INBOX_STORE_OPTIONS_INIT;
	so.table_prefix = "bench_";
	inbox_store *st = NULL;
	if (inbox_store_open(&st, url, &so) != INBOX_OK) {
		fprintf(stderr, "plain_sources: store: %s\n",
		        inbox_store_errmsg(st));
		exit(1);
	}
	inbox_store_close(st);
	ps_pg *pg = calloc(1, sizeof(*pg));
	if (!pg)
		exit(1);
	pg->c = PQconnectdb(url);
	if (PQstatus(pg->c) != CONNECTION_OK)
		pg_die(pg->c, "connect");
	PGresult *r = PQexec(
	    pg->c, "SET client_min_messages = warning; "
	           "CREATE TABLE IF NOT EXISTS bench_src_invoices (order_id "
	           "text NOT NULL, total_cents bigint NOT NULL, at timestamptz "
	           "NOT NULL DEFAULT clock_timestamp(), daemon text DEFAULT "
	           "nullif(current_setting('application_name'), ''))");
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		pg_die(pg->c, "create bench_src_invoices");
	PQclear(r);
	pg->backend = PQbackendPID(pg->c);
	r = PQprepare(pg->c, "batch", PS_STMT, 4, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		pg_die(pg->c, "prepare");
	PQclear(r);
	pg->md = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (!pg->md)
		exit(1);
	return pg;
}

int ps_pg_add(ps_pg *pg, const char *json, size_t len)
{
	json_t *root = json_loadb(json, len, 0, NULL);
	json_t *data = json_object_get(root, "data");
	const char *id = json_string_value(json_object_get(root, "id"));
	const char *order = json_string_value(json_object_get(data, "orderId"));
	json_t *total = json_object_get(data, "totalCents");
	char *canon = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	int ok = id && order && json_is_integer(total) && canon;
	if (ok) {
		unsigned char h[EVP_MAX_MD_SIZE];
		unsigned int hl = 0;
		char fp[2 * EVP_MAX_MD_SIZE + 1], num[24];
		ok = EVP_Digest(canon, strlen(canon), h, &hl, pg->md, NULL);
		for (unsigned i = 0; ok && i < hl; i++)
			snprintf(fp + 2 * i, 3, "%02x", h[i]);
		int nl = snprintf(num, sizeof(num), "%lld",
		                  (long long)json_integer_value(total));
		/* ids and order ids of this workload need no quoting */
		sb_elem(&pg->keys, id, strlen(id));
		sb_elem(&pg->fps, fp, 2 * (size_t)hl);
		sb_elem(&pg->orders, order, strlen(order));
		sb_elem(&pg->totals, num, (size_t)nl);
		pg->nbatch++;
		pg->messages++;
	}
	free(canon);
	json_decref(root);
	return ok ? 0 : -1;
}

long ps_pg_flush(ps_pg *pg)
{
	if (pg->nbatch == 0)
		return 0;
	sb_add(&pg->keys, "}", 1);
	sb_add(&pg->fps, "}", 1);
	sb_add(&pg->orders, "}", 1);
	sb_add(&pg->totals, "}", 1);
	const char *v[4] = {pg->keys.p, pg->fps.p, pg->orders.p, pg->totals.p};
	PGresult *r = PQexecPrepared(pg->c, "batch", 4, v, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		pg_die(pg->c, "batch");
	long k = atol(PQcmdTuples(r));
	PQclear(r);
	pg->keys.len = pg->fps.len = pg->orders.len = pg->totals.len = 0;
	pg->nbatch = 0;
	pg->invoices += k;
	return k;
}

/* CPU seconds (user + sys) of the connection's server process so far,
 * from /proc (0 when the server is not on this machine). */
static double ps_pg_backend_cpu(const ps_pg *pg)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pg->backend);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	/* after "pid (comm) ": state, then fields 4..13, utime, stime */
	if (!p || sscanf(p + 2,
	                 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
	                 "%llu",
	                 &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

long ps_pg_messages(const ps_pg *pg)
{
	return pg->messages;
}

long ps_pg_invoices(const ps_pg *pg)
{
	return pg->invoices;
}

void ps_pg_close(ps_pg *pg)
{
	PQfinish(pg->c);
	EVP_MD_free(pg->md);
	free(pg->keys.p);
	free(pg->fps.p);
	free(pg->orders.p);
	free(pg->totals.p);
	free(pg);
}

/* ---- no broker: the messages from memory ------------------------------ */

/* The PostgreSQL path alone: the same writer fed from memory (the
 * messages made before the clock starts, as inbox_bench does). */
static int mem_run(const char *url, const char *name, const char *group,
                   ps_pg *pg, long n, int batch)
{
	(void)url;
	(void)name;
	(void)group;
	wl_msg m;
	for (long i = 0; i < n; i++) {
		wl_message(i, &m);
		if (ps_pg_add(pg, m.json, (size_t)m.len) < 0)
			return -1;
		if ((i + 1) % batch == 0 || i + 1 == n)
			ps_pg_flush(pg);
	}
	return 0;
}

/* ---- helpers --------------------------------------------------------- */

int ps_host_port(const char *url, char *host, size_t hostlen, int *port,
                 char *user, char *pass, size_t credlen)
{
	const char *p = strstr(url, "://");
	p = p ? p + 3 : url;
	const char *end = p + strcspn(p, "/,");
	const char *at = memchr(p, '@', (size_t)(end - p));
	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		size_t ul = (size_t)((colon ? colon : at) - p);
		if (user && ul < credlen) {
			memcpy(user, p, ul);
			user[ul] = '\0';
		}
		if (pass && colon && (size_t)(at - colon - 1) < credlen) {
			memcpy(pass, colon + 1, (size_t)(at - colon - 1));
			pass[at - colon - 1] = '\0';
		}
		p = at + 1;
	}
	const char *colon = memchr(p, ':', (size_t)(end - p));
	if (!colon || (size_t)(colon - p) >= hostlen)
		return -1;
	memcpy(host, p, (size_t)(colon - p));
	host[colon - p] = '\0';
	*port = atoi(colon + 1);
	return *port > 0 ? 0 : -1;
}

static double cpu_s(int sys)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	struct timeval t = sys ? ru.ru_stime : ru.ru_utime;
	return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

static int usage(void)
{
	fprintf(stderr,
	        "usage: plain_sources setup PG_URL | distinct N\n"
	        "       plain_sources load redis|amqp|nats|kafka URL NAME N\n"
	        "       plain_sources run redis|amqp|nats|kafka URL NAME GROUP "
	        "PG_URL N BATCH\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "distinct") == 0) {
		printf("%ld\n", wl_distinct(atol(argv[2])));
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "setup") == 0) {
		ps_pg_close(ps_pg_open(argv[2]));
		return 0;
	}
	if (argc == 6 && strcmp(argv[1], "load") == 0) {
		const char *b = argv[2], *url = argv[3], *name = argv[4];
		long n = atol(argv[5]);
		if (strcmp(b, "redis") == 0)
			return ps_redis_load(url, name, n) ? 1 : 0;
		if (strcmp(b, "amqp") == 0)
			return ps_amqp_load(url, name, n) ? 1 : 0;
		if (strcmp(b, "nats") == 0)
			return ps_nats_load(url, name, n) ? 1 : 0;
		if (strcmp(b, "kafka") == 0)
			return ps_kafka_load(url, name, n) ? 1 : 0;
		return usage();
	}
	if (argc != 9 || strcmp(argv[1], "run") != 0)
		return usage();
	const char *b = argv[2], *url = argv[3], *name = argv[4],
	           *group = argv[5];
	long n = atol(argv[7]);
	int batch = atoi(argv[8]);
	if (n <= 0 || batch <= 0)
		return usage();
	int (*run)(const char *, const char *, const char *, ps_pg *, long,
	           int) = strcmp(b, "redis") == 0   ? ps_redis_run
	                  : strcmp(b, "amqp") == 0  ? ps_amqp_run
	                  : strcmp(b, "nats") == 0  ? ps_nats_run
	                  : strcmp(b, "kafka") == 0 ? ps_kafka_run
	                  : strcmp(b, "mem") == 0   ? mem_run
	                                            : NULL;
	if (!run)
		return usage();
	ps_pg *pg = ps_pg_open(argv[6]);
	struct timespec t0, t1;
	double u0 = cpu_s(0), s0 = cpu_s(1), b0 = ps_pg_backend_cpu(pg);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = run(url, name, group, pg, n, batch);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long distinct = wl_distinct(n);
	int ok = rc == 0 && ps_pg_messages(pg) == n &&
	         ps_pg_invoices(pg) == distinct;
	printf("RESULT broker=%s messages=%ld invoices=%ld counts=%s "
	       "seconds=%.3f user_s=%.3f sys_s=%.3f backend_s=%.3f\n",
	       b, ps_pg_messages(pg), ps_pg_invoices(pg), ok ? "ok" : "WRONG",
	       (double)(t1.tv_sec - t0.tv_sec) +
	           (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       cpu_s(0) - u0, cpu_s(1) - s0, ps_pg_backend_cpu(pg) - b0);
	ps_pg_close(pg);
	return ok ? 0 : 1;
}
