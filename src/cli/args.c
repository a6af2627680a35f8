/* The shared command line of migrate, purge and stats, and the frame of
 * dlq and outbox (cli/args.h). */
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

/* One parse: what it fills, and whose messages it prints. */
typedef struct parse {
	const char *cmd, *usage;
	const char *id_name; /* NULL: no ids (a second CONFIG is unexpected) */
	const char *path, *only;
	cli_rows *r; /* ids and has_filter, or NULL */
} parse;

/* The usage error "CMD: MESSAGE" and the usage. dlq's and outbox's
 * messages were cut at 255 bytes; kept so. */
static int usage_error(const parse *x, const char *fmt, const char *arg)
{
	char msg[256];
	snprintf(msg, sizeof(msg), fmt, arg);
	cli_error("%s: %s", x->cmd, msg);
	fputs(x->usage, stderr);
	return CLI_EXIT_USAGE;
}

/* A refused value of o: its usage error (o->bad), or the plain one. */
static int bad_value(const parse *x, const cli_opt *o, const char *v,
                     const char *plain)
{
	if (o->bad) {
		char fmt[128];
		snprintf(fmt, sizeof(fmt), "%s: \"%%s\" %s", o->name, o->bad);
		return usage_error(x, fmt, v);
	}
	cli_error("%s: \"%s\" %s", o->name, v, plain);
	return CLI_EXIT_USAGE;
}

static int set_int(const parse *x, const cli_opt *o, const char *v)
{
	char *end;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (!isdigit((unsigned char)v[0]) || *end || errno || n < o->min ||
	    n > o->max) {
		char plain[96];
		if (o->max == LLONG_MAX)
			snprintf(plain, sizeof(plain), "is not a number");
		else
			snprintf(plain, sizeof(plain),
			         "is not a number between %lld and %lld",
			         o->min, o->max);
		return bad_value(x, o, v, plain);
	}
	*(long long *)o->out = n;
	return 0;
}

static int set_value(const parse *x, const cli_opt *o, const char *v)
{
	double *secs = o->out;
	switch (o->kind) {
	case CLI_OPT_STRING:
		*(const char **)o->out = v;
		return 0;
	case CLI_OPT_SECONDS:
	case CLI_OPT_AGE:
		if (cli_parse_seconds(v, secs) < 0 ||
		    (o->kind == CLI_OPT_SECONDS && *secs <= 0))
			return bad_value(x, o, v,
			                 "is not a duration (30s, 5m, 2h, 7d)");
		return 0;
	default:
		return set_int(x, o, v);
	}
}

static int add_id(const parse *x, const char *a)
{
	char *end;
	errno = 0;
	long long v = strtoll(a, &end, 10);
	if (!isdigit((unsigned char)*a) || *end || errno || v <= 0) {
		char fmt[96];
		snprintf(fmt, sizeof(fmt), "\"%%s\" is not %s id", x->id_name);
		return usage_error(x, fmt, a);
	}
	cli_rows *r = x->r;
	int64_t *p = realloc(r->ids, (size_t)(r->nids + 1) * sizeof(*p));
	if (!p)
		return CLI_EXIT_RUNTIME;
	r->ids = p;
	r->ids[r->nids++] = v;
	return 0;
}

/* argv[first..]: CONFIG into x->path, --consumer into x->only, the
 * options into their outs, further words as ids (x->id_name) or refused.
 * 0 or the exit code (printed). */
static int parse_args(parse *x, int first, int argc, char **argv,
                      const cli_opt *opts)
{
	for (int i = first; i < argc; i++) {
		const char *a = argv[i];
		const cli_opt *o = a[0] == '-' ? find_opt(opts, a) : NULL;
		int rc = 0;
		if (!strcmp(a, "--consumer") && i + 1 < argc) {
			x->only = argv[++i];
		} else if (o && o->kind == CLI_OPT_FLAG) {
			*(int *)o->out = 1;
		} else if (o && i + 1 < argc) {
			rc = set_value(x, o, argv[++i]);
		} else if (a[0] == '-' || (x->path && !x->id_name)) {
			if (x->id_name)
				return usage_error(
				    x, "unexpected argument \"%s\"", a);
			cli_error("%s: unexpected argument \"%s\"", x->cmd, a);
			fputs(x->usage, stderr);
			return CLI_EXIT_USAGE;
		} else if (!x->path) {
			x->path = a;
		} else {
			rc = add_id(x, a);
		}
		if (rc)
			return rc;
		if (x->r && (o ? o->filter : !strcmp(a, "--consumer")))
			x->r->has_filter = 1;
	}
	if (!x->path) {
		fputs(x->usage, stderr);
		return CLI_EXIT_USAGE;
	}
	return 0;
}

int cli_each_consumer(const char *cmd, int argc, char **argv,
                      const cli_opt *opts, const char *usage,
                      cli_consumer_fn fn, void *payload)
{
	parse x = {cmd, usage, NULL, NULL, NULL, NULL};
	int rc = parse_args(&x, 1, argc, argv, opts);
	if (rc)
		return rc;
	cli_config cfg;
	const cli_consumer *sel;
	rc = cli_load_selected(&cfg, x.path, x.only, &sel);
	if (rc)
		return rc;
	for (int i = 0; i < cfg.nconsumers && rc == 0; i++)
		if (!sel || sel == &cfg.consumers[i])
			rc = fn(&cfg, &cfg.consumers[i], payload);
	cli_config_free(&cfg);
	return rc;
}

/* ---- subcommands over rows -------------------------------------------- */

int cli_rows_selected(const cli_rows *r, int i)
{
	return !r->sel || r->sel == &r->cfg.consumers[i];
}

int cli_rows_open(cli_rows *r, int i)
{
	if (r->st[i])
		return 0;
	return cli_open_store(&r->cfg, &r->cfg.consumers[i], 0, &r->st[i]);
}

int cli_rows_store_error(cli_rows *r, int i, const char *what, int err)
{
	const cli_consumer *c = &r->cfg.consumers[i];
	char red[512], msg[1024];
	snprintf(msg, sizeof(msg), "%s", inbox_store_errmsg(r->st[i]));
	cli_scrub(msg, sizeof(msg), cli_consumer_store(&r->cfg, c));
	cli_error("consumer \"%s\": %s on %s failed: %s", c->name, what,
	          cli_redact(cli_consumer_store(&r->cfg, c), red, sizeof(red)),
	          msg);
	return err == INBOX_ERR_TRANSIENT || err == INBOX_ERR_CONNECT
	           ? CLI_EXIT_CONNECT
	           : CLI_EXIT_RUNTIME;
}

int cli_rows_main(const cli_rows_cmd *cmd, const cli_opt *opts, int argc,
                  char **argv, cli_rows *r)
{
	int sub = -1;
	for (int i = 0; argc > 1 && i < 4; i++)
		if (!strcmp(argv[1], cmd->subs[i]))
			sub = i;
	if (sub < 0) {
		if (argc > 1)
			cli_error("%s: unknown subcommand \"%s\"", cmd->name,
			          argv[1]);
		fputs(cmd->usage, stderr);
		return CLI_EXIT_USAGE;
	}
	parse x = {cmd->name, cmd->usage, cmd->id_name, NULL, NULL, r};
	int rc = parse_args(&x, 2, argc, argv, opts);
	if (rc == 0 &&
	    (rc = cli_load_selected(&r->cfg, x.path, x.only, &r->sel)) == 0) {
		r->st = calloc((size_t)r->cfg.nconsumers, sizeof(*r->st));
		rc = r->st ? cmd->fns[sub](r) : CLI_EXIT_RUNTIME;
		if (cmd->close)
			cmd->close(r);
		for (int i = 0; r->st && i < r->cfg.nconsumers; i++)
			inbox_store_close(r->st[i]);
		free(r->st);
		r->st = NULL;
		cli_config_free(&r->cfg);
	}
	free(r->ids);
	r->ids = NULL;
	return rc;
}
