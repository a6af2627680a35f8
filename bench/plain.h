/*
 * What the plain reference loops of bench/ (plain_sqlite, plain_pg) share:
 * the row each message becomes, the parse a hand-written consumer does to
 * get it, and CPU accounting.
 *
 * The parse is what the work needs and no more: jansson reads the
 * message, the three fields are taken, and the fingerprint is the SHA-256
 * of its compact sorted-keys dump — the seed's normalize+hash, equal to
 * libinbox's RFC 8785 fingerprint for this data (each loop checks it).
 */
#ifndef BENCH_PLAIN_H
#define BENCH_PLAIN_H

#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct plain_row {
	char id[37];
	char order[16];
	char fp[65];
	long total;
} plain_row;

static inline int plain_parse(const char *json, size_t len, const EVP_MD *md,
                              plain_row *r)
{
	static const char hex[] = "0123456789abcdef";
	json_t *root = json_loadb(json, len, 0, NULL);
	json_t *data = json_object_get(root, "data");
	const char *id = json_string_value(json_object_get(root, "id"));
	const char *order = json_string_value(json_object_get(data, "orderId"));
	json_t *total = json_object_get(data, "totalCents");
	char *canon = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	int ok = id && order && json_is_integer(total) && canon &&
	         strlen(id) < sizeof(r->id) && strlen(order) < sizeof(r->order);
	if (ok) {
		unsigned char h[EVP_MAX_MD_SIZE];
		unsigned int hl = 0;
		memcpy(r->id, id, strlen(id) + 1);
		memcpy(r->order, order, strlen(order) + 1);
		r->total = (long)json_integer_value(total);
		ok = EVP_Digest(canon, strlen(canon), h, &hl, md, NULL) &&
		     hl == 32;
		for (unsigned i = 0; ok && i < hl; i++) {
			r->fp[2 * i] = hex[h[i] >> 4];
			r->fp[2 * i + 1] = hex[h[i] & 15];
		}
		r->fp[64] = '\0';
	}
	free(canon);
	json_decref(root);
	return ok ? 0 : -1;
}

/* This process's CPU time so far (user + system), in seconds. */
static inline double plain_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* CPU time (user + system) of process `pid` so far, in seconds, from
 * /proc/PID/stat (a PostgreSQL backend on this machine); -1 if it cannot
 * be read (another machine, another PID namespace). */
static inline double plain_proc_cpu_s(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* fields after the command name (which may hold spaces): state is
	 * field 3, utime 14, stime 15 */
	char *p = strrchr(buf, ')');
	unsigned long long ut, st;
	if (!p || sscanf(p + 2,
	                 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
	                 "%llu",
	                 &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

#endif
