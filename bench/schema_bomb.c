/*
 * bench/schema-bomb: the worst messages up to max_payload against the
 * "schema bomb" family (tests/schema_bombs.h) — schemas whose naive
 * validation is exponential in the message's size, catastrophic regexes,
 * uniqueItems on big arrays, nesting to the parser's limit. For each bomb
 * and size: the validation time alone (the payload parsed beforehand),
 * the steps charged against the budget (wall and CPU time, the best of
 * --repeat runs), and the outcome: valid, a
 * violation, or stopped at a limit (a dead letter with that reason).
 *
 *   schema_bomb [--max BYTES] [--no-memo] [--repeat N]
 *
 * --no-memo validates without the memo of results per ($ref target,
 * value): the exponential cases then run into the step budget, which
 * bounds them anyway. Prints figures; never fails on a timing (exit 1
 * only when a schema does not compile or a message does not parse).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "schema/node.h"
#include "schema_bombs.h"

static double clock_of(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static const char *outcome(int rc, const char *reason)
{
	if (rc == 0)
		return "valid";
	if (strncmp(reason, "schema validation exceeded", 26) == 0)
		return "stopped: step budget";
	if (strncmp(reason, "schema validation stopped", 25) == 0)
		return strstr(reason, "nested") ? "stopped: depth"
		                                : "stopped: regex limit";
	return "violation";
}

int main(int argc, char **argv)
{
	size_t max = 1024 * 1024;
	int memo = 1, repeat = 3;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--max") == 0 && i + 1 < argc)
			max = (size_t)strtoull(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--no-memo") == 0)
			memo = 0;
		else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: schema_bomb [--max BYTES] "
			                "[--no-memo] [--repeat N]\n");
			return 2;
		}
	}
	if (repeat < 1)
		repeat = 1;
	bomb fam[32];
	size_t nfam = bomb_family(fam, 32);
	inbox__buf msg = INBOX__BUF_INIT;
	int failed = 0;
	double worst = 0;
	const char *worst_name = "";
	size_t worst_size = 0;
	printf("schema bombs up to %zu bytes (budget %llu steps at that "
	       "size), memo %s, best of %d\n",
	       max, (unsigned long long)inbox__schema_budget(max),
	       memo ? "on" : "off", repeat);
	printf("%-40s %9s %11s %10s %9s  %s\n", "bomb", "bytes", "steps", "ms",
	       "cpu ms", "outcome");
	for (size_t b = 0; b < nfam; b++) {
		inbox_schema *s = NULL;
		char err[512];
		if (inbox_schema_open(&s, fam[b].schema, strlen(fam[b].schema),
		                      err, sizeof(err)) != INBOX_OK) {
			fprintf(stderr, "%s: schema refused: %s\n", fam[b].name,
			        err);
			failed = 1;
			continue;
		}
		s->memo_off = !memo;
		for (size_t size = 1024; size <= max; size *= 8) {
			if (size * 8 > max && size != max)
				size = max; /* the last row: max itself */
			if (fam[b].gen(&msg, size) < 0) {
				fprintf(stderr, "out of memory\n");
				return 1;
			}
			json_t *root = NULL;
			if (inbox__json_parse(msg.data, msg.len, &root, err,
			                      sizeof(err)) != 0) {
				fprintf(stderr, "%s: %s\n", fam[b].name, err);
				failed = 1;
				break;
			}
			char reason[700] = "";
			int rc = 0;
			double best = 1e9, cpu = 1e9;
			for (int r = 0; r < repeat; r++) {
				double t0 = clock_of(CLOCK_MONOTONIC);
				double c0 = clock_of(CLOCK_PROCESS_CPUTIME_ID);
				rc = inbox__schema_check(
				    s, root, msg.len, reason, sizeof(reason));
				double c = clock_of(CLOCK_PROCESS_CPUTIME_ID);
				double t = clock_of(CLOCK_MONOTONIC) - t0;
				if (t < best)
					best = t;
				if (c - c0 < cpu)
					cpu = c - c0;
			}
			json_decref(root);
			printf("%-40s %9zu %11llu %10.3f %9.3f  %s\n",
			       fam[b].name, msg.len,
			       (unsigned long long)inbox__schema_last_steps(s),
			       best * 1e3, cpu * 1e3, outcome(rc, reason));
			if (best > worst) {
				worst = best;
				worst_name = fam[b].name;
				worst_size = msg.len;
			}
			if (size == max)
				break;
		}
		inbox_schema_close(s);
	}
	printf("worst: %.3f ms (%s, %zu bytes)\n", worst * 1e3, worst_name,
	       worst_size);
	inbox__buf_free(&msg);
	return failed;
}
