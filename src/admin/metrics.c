/*
 * Prometheus text exposition (format 0.0.4) of consumers' counters, their
 * outbox dispatchers' counters and store numbers. One family per table
 * entry: its HELP and TYPE lines once, then one sample per consumer that
 * has a value; a family without any sample is left out entirely. Label
 * values are escaped as the format requires (backslash, double quote, line
 * feed) and must be UTF-8, so invalid bytes become U+FFFD.
 */
#include <inbox/metrics.h>

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "core/abi.h"

typedef enum kind {
	K_COUNTER,     /* uint64_t in inbox_stats */
	K_OUTBOX,      /* uint64_t in inbox_outbox_stats */
	K_COUNT,       /* int64_t in inbox_admin_stats, absent when < 0 */
	K_AGE,         /* int64_t milliseconds, shown in seconds; absent < 0 */
	K_RETENTION,   /* retention_seconds, absent when 0 */
	K_HEADROOM,    /* inbox_admin_headroom_ms, absent when unknown */
	K_GEN,         /* int64_t in inbox_admin_generations */
	K_STORE_UP,    /* 1 when the store numbers are there */
	K_CONSUMER_UP, /* the caller's running flag */
	K_ESTIMATED,   /* 1 when records/completed/dead are estimates */
	K_LAG,         /* the source's lag in messages, absent < 0 */
	K_LAG_BYTES    /* the source's lag in bytes, absent < 0 */
} kind;

typedef struct family {
	const char *name;
	const char *type;
	const char *help;
	kind k;
	size_t off;
} family;

#define CNT(f)    K_COUNTER, offsetof(inbox_stats, f)
#define OBX(f)    K_OUTBOX, offsetof(inbox_outbox_stats, f)
#define ADM(k, f) k, offsetof(inbox_admin_stats, f)
#define GEN(f)    K_GEN, offsetof(inbox_admin_generations, f)

static const family families[] = {
    {"inbox_messages_total", "counter", "Deliveries seen by the consumer.",
     CNT(messages)},
    {"inbox_applied_total", "counter",
     "Messages whose effect committed with their inbox record.", CNT(applied)},
    {"inbox_duplicates_total", "counter",
     "Duplicates detected and dropped (key already recorded, same "
     "fingerprint).",
     CNT(duplicates)},
    {"inbox_fingerprint_conflicts_total", "counter",
     "Same key with a different payload fingerprint (dead-lettered).",
     CNT(conflicts)},
    {"inbox_stale_total", "counter",
     "Messages older than the state they would update (version check).",
     CNT(stale)},
    {"inbox_skipped_total", "counter",
     "Messages no step wanted (filters): recorded and acked, no effect.",
     CNT(skipped)},
    {"inbox_retries_total", "counter",
     "Messages rolled back for a transient reason, to be redelivered.",
     CNT(retries)},
    {"inbox_dead_lettered_total", "counter",
     "Messages written to the dead letters (conflicts included).",
     CNT(dead_letters)},
    {"inbox_lease_takeovers_total", "counter",
     "Expired processing leases taken over.", CNT(lease_takeovers)},
    {"inbox_in_progress_total", "counter",
     "Deliveries answered in_progress (another worker holds the lease).",
     CNT(in_progress)},
    {"inbox_fenced_total", "counter",
     "Late completions refused because a newer holder owns the record.",
     CNT(fenced)},
    {"inbox_batches_total", "counter", "Batches committed.", CNT(batches)},
    {"inbox_batch_retries_total", "counter",
     "Batches run again after a transient database error.",
     CNT(transient_retries)},
    {"inbox_outbox_attempts_total", "counter",
     "Calls made to providers by the outbox dispatcher.", OBX(attempts)},
    {"inbox_outbox_done_total", "counter",
     "Outbox rows completed (performed, or reconciled as performed).",
     OBX(done)},
    {"inbox_outbox_retries_total", "counter",
     "Outbox attempts that failed or had an unknown outcome and will be "
     "tried again.",
     OBX(retries)},
    {"inbox_outbox_unknown_outcomes_total", "counter",
     "Outbox attempts whose outcome could not be known (timeout, dropped "
     "connection, lease expired mid-call).",
     OBX(unknown_outcomes)},
    {"inbox_outbox_reconciliations_total", "counter",
     "Reconcile queries made for unknown outcomes of non-idempotent "
     "providers.",
     OBX(reconciliations)},
    {"inbox_outbox_reconciled_found_total", "counter",
     "Reconcile queries that found the effect performed.",
     OBX(reconciled_found)},
    {"inbox_outbox_reconciled_not_found_total", "counter",
     "Reconcile queries that found the effect not performed (sent "
     "again).",
     OBX(reconciled_not_found)},
    {"inbox_outbox_dead_letters_total", "counter",
     "Outbox rows given up (dead-lettered).", OBX(dead_letters)},
    {"inbox_outbox_lease_takeovers_total", "counter",
     "Outbox rows taken over after their claim's lease expired.",
     OBX(lease_expired)},
    {"inbox_outbox_fenced_total", "counter",
     "Late outbox outcomes refused because the row was claimed again.",
     OBX(fenced)},
    {"inbox_records", "gauge",
     "Inbox records of the consumer in the store (inbox size): exact when "
     "inbox_records_estimated is 0, else the store planner's estimate.",
     ADM(K_COUNT, records)},
    {"inbox_records_estimated", "gauge",
     "1 when inbox_records and inbox_records_dead are the store planner's "
     "estimates (an inbox past 100000 records, PostgreSQL), 0 when they "
     "are exact counts.",
     K_ESTIMATED, 0},
    {"inbox_records_processing", "gauge",
     "Inbox records in processing (held under a lease); always exact.",
     ADM(K_COUNT, processing)},
    {"inbox_records_failed", "gauge",
     "Inbox records that failed transiently, waiting for a redelivery; "
     "always exact.",
     ADM(K_COUNT, failed)},
    {"inbox_records_dead", "gauge",
     "Inbox records of dead-lettered keys: exact when "
     "inbox_records_estimated is 0, else the store planner's estimate.",
     ADM(K_COUNT, dead)},
    {"inbox_records_expired", "gauge",
     "Inbox records older than the retention window (a purge would "
     "delete them): exact up to 100000, the store planner's estimate "
     "beyond.",
     ADM(K_COUNT, expired)},
    {"inbox_oldest_record_age_seconds", "gauge",
     "Age of the oldest processed inbox record.", ADM(K_AGE, oldest_age_ms)},
    {"inbox_retention_seconds", "gauge",
     "Retention window the consumer registered in the store.",
     ADM(K_RETENTION, retention_seconds)},
    {"inbox_retention_headroom_seconds", "gauge",
     "Retention window minus the age of the oldest record (negative: "
     "records past the window await a purge).",
     ADM(K_HEADROOM, retention_seconds)},
    {"inbox_dead_letters", "gauge", "Dead letters stored for the consumer.",
     ADM(K_COUNT, dead_letters)},
    {"inbox_dead_letters_pending", "gauge", "Dead letters not replayed yet.",
     ADM(K_COUNT, dead_letters_pending)},
    {"inbox_outbox_pending", "gauge", "Outbox intents not executed yet.",
     ADM(K_COUNT, outbox_pending)},
    {"inbox_outbox_oldest_age_seconds", "gauge",
     "Age of the oldest pending outbox intent.",
     ADM(K_AGE, outbox_oldest_age_ms)},
    {"inbox_generations", "gauge",
     "Generations of the store's inbox, the newest included (shared by "
     "the store's consumers).",
     GEN(count)},
    {"inbox_generations_sealed", "gauge",
     "Sealed generations of the store's inbox.", GEN(sealed)},
    {"inbox_generations_unfiltered", "gauge",
     "Sealed generations without a filter yet (every new key is looked "
     "up in them).",
     GEN(unfiltered)},
    {"inbox_generations_sealed_keys", "gauge",
     "Keys held by the sealed generations' filters.", GEN(sealed_keys)},
    {"inbox_generations_filter_bytes", "gauge",
     "Memory the filters take in every consumer process.", GEN(filter_bytes)},
    {"inbox_generations_newest_records", "gauge",
     "Records in the newest generation (sealed past --seal-rows): exact "
     "up to 100000, the store planner's estimate beyond.",
     GEN(newest_records)},
    {"inbox_store_up", "gauge",
     "1 if the last read of the consumer's store succeeded.", K_STORE_UP, 0},
    {"inbox_consumer_up", "gauge", "1 while the consumer is running.",
     K_CONSUMER_UP, 0},
    {"inbox_source_lag", "gauge",
     "Messages the source holds that the consumer has not taken yet, as "
     "the broker tells it (Kafka: high watermark minus position, summed "
     "over the assigned partitions; Redis: the group's lag; NATS: the "
     "consumer's pending; RabbitMQ: the queue's ready messages), read at "
     "most every few seconds.",
     K_LAG, 0},
    {"inbox_source_lag_bytes", "gauge",
     "Bytes of the source file past the consumer's position (JSONL).",
     K_LAG_BYTES, 0},
};

#define NFAMILIES (sizeof(families) / sizeof(families[0]))

static int label_value(inbox__buf *b, const char *v)
{
	const unsigned char *p = (const unsigned char *)v;
	size_t n = strlen(v);
	int bad = 0;
	while (n > 0 && !bad) {
		size_t l = inbox__utf8_seq_len(p, n);
		if (l == 0) {
			bad |= inbox__buf_puts(b, "\xef\xbf\xbd");
			l = 1;
		} else if (*p == '\\') {
			bad |= inbox__buf_puts(b, "\\\\");
		} else if (*p == '"') {
			bad |= inbox__buf_puts(b, "\\\"");
		} else if (*p == '\n') {
			bad |= inbox__buf_puts(b, "\\n");
		} else {
			bad |= inbox__buf_append(b, p, l);
		}
		p += l;
		n -= l;
	}
	return bad ? -1 : 0;
}

/* The value of family f for consumer c as text; 0 if there is none. */
static int value(const family *f, const inbox_metrics_consumer *c, char *buf,
                 size_t len)
{
	const char *base;
	int64_t v;
	switch (f->k) {
	case K_COUNTER:
		if (!c->counters)
			return 0;
		base = (const char *)c->counters;
		snprintf(
		    buf, len, "%llu",
		    (unsigned long long)*(const uint64_t *)(base + f->off));
		return 1;
	case K_OUTBOX:
		if (!c->outbox)
			return 0;
		base = (const char *)c->outbox;
		snprintf(
		    buf, len, "%llu",
		    (unsigned long long)*(const uint64_t *)(base + f->off));
		return 1;
	case K_GEN:
		if (!c->generations || c->generations->count <= 0)
			return 0;
		base = (const char *)c->generations;
		snprintf(buf, len, "%lld",
		         (long long)*(const int64_t *)(base + f->off));
		return 1;
	case K_STORE_UP:
		snprintf(buf, len, "%d", c->store ? 1 : 0);
		return 1;
	case K_CONSUMER_UP:
		if (c->running < 0)
			return 0;
		snprintf(buf, len, "%d", c->running ? 1 : 0);
		return 1;
	case K_ESTIMATED:
		if (!c->store)
			return 0;
		snprintf(buf, len, "%d",
		         c->estimated & INBOX_ADMIN_EST_RECORDS ? 1 : 0);
		return 1;
	case K_LAG:
	case K_LAG_BYTES:
		v = f->k == K_LAG ? c->lag : c->lag_bytes;
		if (v < 0)
			return 0;
		snprintf(buf, len, "%lld", (long long)v);
		return 1;
	default:
		break;
	}
	if (!c->store)
		return 0;
	base = (const char *)c->store;
	v = *(const int64_t *)(base + f->off);
	switch (f->k) {
	case K_COUNT:
		if (v < 0)
			return 0;
		snprintf(buf, len, "%lld", (long long)v);
		return 1;
	case K_AGE:
		if (v < 0)
			return 0;
		snprintf(buf, len, "%.3f", (double)v / 1000.0);
		return 1;
	case K_RETENTION:
		if (v <= 0)
			return 0;
		snprintf(buf, len, "%lld", (long long)v);
		return 1;
	case K_HEADROOM:
		v = inbox_admin_headroom_ms(c->store);
		if (v == INT64_MAX)
			return 0;
		snprintf(buf, len, "%.3f", (double)v / 1000.0);
		return 1;
	default:
		return 0;
	}
}

static int sample(inbox__buf *b, const char *name, const char *consumer,
                  const char *le, const char *v)
{
	int bad = inbox__buf_printf(b, "%s{consumer=\"", name);
	bad |= label_value(b, consumer);
	if (le)
		bad |= inbox__buf_printf(b, "\",le=\"%s", le);
	bad |= inbox__buf_printf(b, "\"} %s\n", v);
	return bad ? -1 : 0;
}

static int render_family(inbox__buf *b, const family *f,
                         const inbox_metrics_consumer *cs, size_t n)
{
	char v[64];
	int any = 0, bad = 0;
	for (size_t i = 0; i < n && !any; i++)
		any = value(f, &cs[i], v, sizeof(v));
	if (!any)
		return 0;
	bad |= inbox__buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", f->name,
	                         f->help, f->name, f->type);
	for (size_t i = 0; i < n; i++)
		if (value(f, &cs[i], v, sizeof(v)))
			bad |= sample(b, f->name, cs[i].name, NULL, v);
	return bad ? -1 : 0;
}

static int render_histogram(inbox__buf *b, const inbox_metrics_consumer *cs,
                            size_t n)
{
	static const char name[] = "inbox_processing_duration_seconds";
	int any = 0, bad = 0;
	for (size_t i = 0; i < n; i++)
		any |= cs[i].counters != NULL;
	if (!any)
		return 0;
	bad |= inbox__buf_printf(
	    b,
	    "# HELP %s Processing time per message, from the claim to the "
	    "commit of its batch.\n# TYPE %s histogram\n",
	    name, name);
	for (size_t i = 0; i < n; i++) {
		const inbox_stats *s = cs[i].counters;
		char v[64], le[32];
		if (!s)
			continue;
		for (int j = 0; j < INBOX_LATENCY_BUCKETS; j++) {
			/* The last bound is +Inf whatever its value, so the
			 * buckets always end with it. */
			if (j == INBOX_LATENCY_BUCKETS - 1)
				snprintf(le, sizeof(le), "+Inf");
			else
				snprintf(le, sizeof(le), "%g",
				         inbox_latency_bounds[j]);
			snprintf(
			    v, sizeof(v), "%llu",
			    (unsigned long long)(j == INBOX_LATENCY_BUCKETS - 1
			                             ? s->processing_count
			                             : s->processing_buckets
			                                   [j]));
			bad |= sample(
			    b, "inbox_processing_duration_seconds_bucket",
			    cs[i].name, le, v);
		}
		snprintf(v, sizeof(v), "%.9g", s->processing_seconds_sum);
		bad |= sample(b, "inbox_processing_duration_seconds_sum",
		              cs[i].name, NULL, v);
		snprintf(v, sizeof(v), "%llu",
		         (unsigned long long)s->processing_count);
		bad |= sample(b, "inbox_processing_duration_seconds_count",
		              cs[i].name, NULL, v);
	}
	return bad ? -1 : 0;
}

/* A versioned struct of the caller's (src, NULL or of a version this
 * library knows) into dst, which holds the defaults: the fields of src's
 * version. 0, or -1 for an unknown version. */
static int copy_in(inbox__vstruct k, void *dst, const void **src)
{
	if (!*src)
		return 0;
	unsigned v = INBOX__VERSION_OF(*src);
	if (inbox__vcheck(k, v, NULL, 0) < 0)
		return -1;
	memcpy(dst, *src, inbox__vsize(k, v));
	*src = dst;
	return 0;
}

/* What the caller's array holds, in this library's layout: the array read
 * by its first element's version (every element of that one), each
 * struct it points to by its own. */
typedef struct metrics_in {
	inbox_stats counters;
	inbox_admin_stats store;
	inbox_outbox_stats outbox;
	inbox_admin_generations generations;
} metrics_in;

static int metrics_normalize(const inbox_metrics_consumer *cs, size_t n,
                             inbox_metrics_consumer **flat, metrics_in **in)
{
	*flat = NULL;
	*in = NULL;
	unsigned v = cs->version;
	if (inbox__vcheck(INBOX__V_METRICS_CONSUMER, v, NULL, 0) < 0)
		return INBOX_ERR_INVALID;
	size_t stride = inbox__vsize(INBOX__V_METRICS_CONSUMER, v);
	inbox_metrics_consumer *f = calloc(n, sizeof(*f));
	metrics_in *m = calloc(n, sizeof(*m));
	if (!f || !m) {
		free(f);
		free(m);
		return INBOX_ERR_NOMEM;
	}
	int rc = INBOX_OK;
	for (size_t i = 0; i < n && rc == INBOX_OK; i++) {
		const inbox_metrics_consumer *c =
		    (const void *)((const char *)cs + i * stride);
		inbox_metrics_consumer def = INBOX_METRICS_CONSUMER_INIT;
		f[i] = def;
		if (c->version != v) {
			if (inbox__vcheck(INBOX__V_METRICS_CONSUMER, c->version,
			                  NULL, 0) == INBOX_OK)
				inbox__log(
				    INBOX_LOG_ERROR, NULL,
				    "\"event\":\"bad_version\","
				    "\"struct\":\"inbox_metrics_consumer\","
				    "\"version\":%u,\"error\":\"element %zu "
				    "is of version %u, the array's first of "
				    "%u\"",
				    c->version, i, c->version, v);
			rc = INBOX_ERR_INVALID;
			break;
		}
		memcpy(&f[i], c, stride);
		if (!f[i].name ||
		    copy_in(INBOX__V_STATS, &m[i].counters,
		            (const void **)&f[i].counters) < 0 ||
		    copy_in(INBOX__V_ADMIN_STATS, &m[i].store,
		            (const void **)&f[i].store) < 0 ||
		    copy_in(INBOX__V_OUTBOX_STATS, &m[i].outbox,
		            (const void **)&f[i].outbox) < 0 ||
		    copy_in(INBOX__V_ADMIN_GENERATIONS, &m[i].generations,
		            (const void **)&f[i].generations) < 0)
			rc = INBOX_ERR_INVALID;
	}
	if (rc < 0) {
		free(f);
		free(m);
		return rc;
	}
	*flat = f;
	*in = m;
	return INBOX_OK;
}

int inbox_metrics_render(char **out, size_t *len,
                         const inbox_metrics_consumer *ucs, size_t n)
{
	if (!out || !len || (n && !ucs))
		return INBOX_ERR_INVALID;
	*out = NULL;
	*len = 0;
	inbox_metrics_consumer *cs = NULL;
	metrics_in *in = NULL;
	if (n) {
		int rc = metrics_normalize(ucs, n, &cs, &in);
		if (rc < 0)
			return rc;
	}
	inbox__buf b = INBOX__BUF_INIT;
	int bad =
	    inbox__buf_printf(&b,
	                      "# HELP inbox_build_info libinbox version.\n"
	                      "# TYPE inbox_build_info gauge\n"
	                      "inbox_build_info{version=\"%s\"} 1\n",
	                      INBOX_VERSION);
	for (size_t f = 0; f < NFAMILIES && !bad; f++) {
		bad |= render_family(&b, &families[f], cs, n);
		/* The histogram right after the counters it belongs with. */
		if (!strcmp(families[f].name, "inbox_batch_retries_total"))
			bad |= render_histogram(&b, cs, n);
	}
	free(cs);
	free(in);
	if (bad) {
		inbox__buf_free(&b);
		return INBOX_ERR_NOMEM;
	}
	*out = b.data;
	*len = b.len;
	return INBOX_OK;
}

/* ---- the process --------------------------------------------------------- */

/* /proc/self/stat's fields after the command (which may hold spaces and
 * parentheses: it ends at the last ')'): *utime, *stime, *start (clock
 * ticks), *vsize (bytes), *rss (pages). 0, or -1. */
static int proc_stat(unsigned long long *utime, unsigned long long *stime,
                     unsigned long long *start, unsigned long long *vsize,
                     long long *rss)
{
	char buf[2048];
	FILE *f = fopen("/proc/self/stat", "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* fields 3.. : state ppid pgrp session tty tpgid flags minflt
	 * cminflt majflt cmajflt utime stime cutime cstime priority nice
	 * threads itrealvalue starttime vsize rss */
	return sscanf(p + 1,
	              " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu"
	              " %*d %*d %*d %*d %*d %*d %llu %llu %lld",
	              utime, stime, start, vsize, rss) == 5
	           ? 0
	           : -1;
}

/* The boot time (Unix seconds) from /proc/stat's btime; -1. */
static long long boot_time(void)
{
	char line[256];
	long long bt = -1;
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %lld", &bt) == 1)
			break;
	fclose(f);
	return bt;
}

static long long open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	long long n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n > 0 ? n - 1 : 0; /* not the directory's own descriptor */
}

static int pgauge(inbox__buf *b, const char *name, const char *type,
                  const char *help, const char *value)
{
	return inbox__buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", name,
	                         help, name, type, name, value);
}

int inbox_metrics_render_process(char **out, size_t *len)
{
	if (!out || !len)
		return INBOX_ERR_INVALID;
	*out = NULL;
	*len = 0;
	inbox__buf b = INBOX__BUF_INIT;
	int bad = inbox__buf_append(&b, "", 0);
	char v[64];
	unsigned long long ut, st, start, vsize;
	long long rss, bt = boot_time(), fds = open_fds();
	long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	if (proc_stat(&ut, &st, &start, &vsize, &rss) == 0 && hz > 0) {
		snprintf(v, sizeof(v), "%.2f", (double)(ut + st) / (double)hz);
		bad |= pgauge(
		    &b, "process_cpu_seconds_total", "counter",
		    "Total user and system CPU time spent in seconds.", v);
		if (bt >= 0) {
			snprintf(v, sizeof(v), "%.2f",
			         (double)bt + (double)start / (double)hz);
			bad |= pgauge(&b, "process_start_time_seconds", "gauge",
			              "Start time of the process since unix "
			              "epoch in seconds.",
			              v);
		}
		snprintf(v, sizeof(v), "%llu", vsize);
		bad |= pgauge(&b, "process_virtual_memory_bytes", "gauge",
		              "Virtual memory size in bytes.", v);
		if (page > 0 && rss >= 0) {
			snprintf(v, sizeof(v), "%lld", rss * (long long)page);
			bad |=
			    pgauge(&b, "process_resident_memory_bytes", "gauge",
			           "Resident memory size in bytes.", v);
		}
	}
	if (fds >= 0) {
		snprintf(v, sizeof(v), "%lld", fds);
		bad |= pgauge(&b, "process_open_fds", "gauge",
		              "Number of open file descriptors.", v);
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)rl.rlim_cur);
		bad |= pgauge(&b, "process_max_fds", "gauge",
		              "Maximum number of open file descriptors.", v);
	}
	if (bad) {
		inbox__buf_free(&b);
		return INBOX_ERR_NOMEM;
	}
	*out = b.data;
	*len = b.len;
	return INBOX_OK;
}

/* ---- providers ---------------------------------------------------------- */

typedef struct pfamily {
	const char *name;
	const char *type;
	const char *help;
	size_t off; /* uint64_t in inbox_provider_info; SIZE_MAX: special */
} pfamily;

#define PRV(f) offsetof(inbox_provider_info, f)
enum { P_IN_FLIGHT = -1, P_BREAKER = -2 };

static const pfamily pfamilies[] = {
    {"inbox_provider_calls_in_flight", "gauge",
     "Calls to the provider in flight now.", (size_t)P_IN_FLIGHT},
    {"inbox_provider_breaker_state", "gauge",
     "The provider's circuit breaker: 0 closed, 1 open, 2 half-open.",
     (size_t)P_BREAKER},
    {"inbox_provider_calls_total", "counter",
     "Calls started to the provider (requests and reconcile queries).",
     PRV(calls)},
    {"inbox_provider_failures_total", "counter",
     "Calls that failed: no answer, HTTP 5xx, 408 or 429.", PRV(failures)},
    {"inbox_provider_breaker_opens_total", "counter",
     "Times the provider's circuit breaker opened.", PRV(opens)},
    {"inbox_provider_breaker_trials_total", "counter",
     "Trial calls made while the breaker was half-open.", PRV(trials)},
    {"inbox_provider_rejected_total", "counter",
     "Rows put back unperformed: breaker open, or Retry-After pending.",
     PRV(rejected)},
    {"inbox_provider_rate_limited_total", "counter",
     "Calls that waited for the provider's rate limit.", PRV(rate_limited)},
    {"inbox_provider_retry_after_total", "counter",
     "Answers whose Retry-After held every call to the provider.",
     PRV(retry_after)},
};

int inbox_metrics_render_providers(char **out, size_t *len,
                                   const inbox_provider_info *ups, size_t n)
{
	if (!out || !len || (n && !ups))
		return INBOX_ERR_INVALID;
	/* read by the first element's version, into this library's layout */
	inbox_provider_info *ps = NULL;
	if (n) {
		unsigned v = ups->version;
		if (inbox__vcheck(INBOX__V_PROVIDER_INFO, v, NULL, 0) < 0)
			return INBOX_ERR_INVALID;
		size_t stride = inbox__vsize(INBOX__V_PROVIDER_INFO, v);
		ps = calloc(n, sizeof(*ps));
		if (!ps)
			return INBOX_ERR_NOMEM;
		for (size_t i = 0; i < n; i++)
			memcpy(&ps[i], (const char *)ups + i * stride, stride);
	}
	inbox__buf b = INBOX__BUF_INIT;
	int bad = inbox__buf_append(&b, "", 0);
	for (size_t f = 0; n && f < sizeof(pfamilies) / sizeof(*pfamilies);
	     f++) {
		const pfamily *pf = &pfamilies[f];
		bad |=
		    inbox__buf_printf(&b, "# HELP %s %s\n# TYPE %s %s\n",
		                      pf->name, pf->help, pf->name, pf->type);
		for (size_t i = 0; i < n; i++) {
			unsigned long long v;
			if (pf->off == (size_t)P_IN_FLIGHT)
				v = ps[i].in_flight > 0
				        ? (unsigned long long)ps[i].in_flight
				        : 0;
			else if (pf->off == (size_t)P_BREAKER)
				v = (unsigned long long)ps[i].breaker;
			else
				v = (unsigned long long)*(
				    const uint64_t *)((const char *)&ps[i] +
				                      pf->off);
			bad |=
			    inbox__buf_printf(&b, "%s{provider=\"", pf->name);
			bad |= label_value(&b, ps[i].name ? ps[i].name : "");
			bad |= inbox__buf_printf(&b, "\"} %llu\n", v);
		}
	}
	/* the call duration histogram (version 2 of the snapshot) */
	if (n && ups->version >= 2) {
		static const char h[] = "inbox_outbox_call_duration_seconds";
		bad |= inbox__buf_printf(
		    &b,
		    "# HELP %s Duration of the outbox dispatchers' HTTP calls "
		    "to the provider (request to answer or failure; reconcile "
		    "queries not counted).\n# TYPE %s histogram\n",
		    h, h);
		for (size_t i = 0; i < n; i++) {
			const char *name = ps[i].name ? ps[i].name : "";
			for (int j = 0; j < INBOX_CALL_BUCKETS; j++) {
				char le[32];
				if (j == INBOX_CALL_BUCKETS - 1)
					snprintf(le, sizeof(le), "+Inf");
				else
					snprintf(le, sizeof(le), "%g",
					         inbox_call_bounds[j]);
				bad |= inbox__buf_printf(
				    &b, "%s_bucket{provider=\"", h);
				bad |= label_value(&b, name);
				bad |= inbox__buf_printf(
				    &b, "\",le=\"%s\"} %llu\n", le,
				    (unsigned long long)(j == INBOX_CALL_BUCKETS -
				                                     1
				                             ? ps[i].call_count
				                             : ps[i]
				                                   .call_buckets
				                                       [j]));
			}
			bad |= inbox__buf_printf(&b, "%s_sum{provider=\"", h);
			bad |= label_value(&b, name);
			bad |= inbox__buf_printf(&b, "\"} %.9g\n",
			                         ps[i].call_seconds_sum);
			bad |= inbox__buf_printf(&b, "%s_count{provider=\"", h);
			bad |= label_value(&b, name);
			bad |= inbox__buf_printf(
			    &b, "\"} %llu\n",
			    (unsigned long long)ps[i].call_count);
		}
	}
	free(ps);
	if (bad) {
		inbox__buf_free(&b);
		return INBOX_ERR_NOMEM;
	}
	*out = b.data;
	*len = b.len;
	return INBOX_OK;
}
