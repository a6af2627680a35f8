/* The shared command line of migrate, purge and stats (cli/args.h). */
#include "cli/args.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/open.h"

int cli_parse_seconds(const char *s, double *secs)
{
	int64_t ms;
	char *end;
	/* Plain seconds: digits and a fraction (never inf, nan, hex). */
	double v = strtod(s, &end);
	if (isdigit((unsigned char)*s) && !strpbrk(s, "xXeE") && !*end &&
	    v < 1e9) {
		*secs = v;
		return 0;
	}
	if (cli_parse_duration_ms(s, &ms) < 0)
		return -1;
	*secs = (double)ms / 1000.0;
	return 0;
}

/* The option named a, or NULL. */
static const cli_opt *find_opt(const cli_opt *opts, const char *a)
{
	for (; opts && opts->name; opts++)
		if (strcmp(opts->name, a) == 0)
			return opts;
	return NULL;
}

static int set_int(const cli_opt *o, const char *v)
{
	char *end;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (!isdigit((unsigned char)v[0]) || *end || errno || n < o->min ||
	    n > o->max) {
		if (o->max == LLONG_MAX)
			cli_error("%s: \"%s\" is not a number", o->name, v);
		else
			cli_error("%s: \"%s\" is not a number between %lld "
			          "and %lld",
			          o->name, v, o->min, o->max);
		return CLI_EXIT_USAGE;
	}
	*(long long *)o->out = n;
	return 0;
}

int cli_each_consumer(const char *cmd, int argc, char **argv,
                      const cli_opt *opts, const char *usage,
                      cli_consumer_fn fn, void *payload)
{
	const char *path = NULL, *only = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const cli_opt *o = a[0] == '-' ? find_opt(opts, a) : NULL;
		if (!strcmp(a, "--consumer") && i + 1 < argc) {
			only = argv[++i];
		} else if (o && o->kind == CLI_OPT_FLAG) {
			*(int *)o->out = 1;
		} else if (o && o->kind == CLI_OPT_SECONDS && i + 1 < argc) {
			double *out = o->out;
			if (cli_parse_seconds(argv[++i], out) < 0 ||
			    *out <= 0) {
				cli_error("%s: \"%s\" is not a duration (30s, "
				          "5m, 2h, 7d)",
				          o->name, argv[i]);
				return CLI_EXIT_USAGE;
			}
		} else if (o && i + 1 < argc) {
			int rc = set_int(o, argv[++i]);
			if (rc)
				return rc;
		} else if (a[0] == '-' || path) {
			cli_error("%s: unexpected argument \"%s\"", cmd, a);
			fputs(usage, stderr);
			return CLI_EXIT_USAGE;
		} else {
			path = a;
		}
	}
	if (!path) {
		fputs(usage, stderr);
		return CLI_EXIT_USAGE;
	}
	cli_config cfg;
	const cli_consumer *sel;
	int rc = cli_load_selected(&cfg, path, only, &sel);
	if (rc)
		return rc;
	for (int i = 0; i < cfg.nconsumers && rc == 0; i++)
		if (!sel || sel == &cfg.consumers[i])
			rc = fn(&cfg, &cfg.consumers[i], payload);
	cli_config_free(&cfg);
	return rc;
}
