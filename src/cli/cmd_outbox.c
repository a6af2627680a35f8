/*
 * inbox outbox list|show|retry|drop CONFIG ...: the outbox rows (external
 * effects) of the configured consumers. The work is the library's
 * (inbox_admin_outbox_*, <inbox/admin.h>): a retry re-arms a row under
 * its fencing token and keeps its idempotency key; a drop is explicit
 * (ids, or a filter and --yes) and logged.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inbox/admin.h>

#include "base/json.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/open.h"
#include "cli/progress.h"
#include "cli/table.h"

const char cli_outbox_usage[] =
    "usage: inbox outbox list CONFIG [FILTERS] [--limit N] [--after ID] "
    "[--json]\n"
    "       inbox outbox show CONFIG ID [--consumer NAME] [--json]\n"
    "       inbox outbox retry CONFIG ID... | FILTERS [--not-performed] "
    "[--json]\n"
    "       inbox outbox drop CONFIG ID... | FILTERS --yes [--json]\n"
    "\n"
    "FILTERS: [--consumer NAME] [--provider URL] [--state STATE] [--key "
    "KEY]\n"
    "         [--older-than DURATION]\n"
    "\n"
    "list     the outbox rows (id, state, attempts, age, provider, "
    "consumer, key,\n         step, last error); --provider takes a "
    "provider (https://host:port) or\n         any URL of it, --state one "
    "of pending, in_flight, done, failed, unknown,\n         dead; "
    "--older-than 1h: created more than an hour ago; --limit N\n"
    "         (default 1000) and --after ID page.\n"
    "show     one row: state, idempotency key, provider, URL (secrets "
    "hidden),\n         attempts, fencing token, times, last status and "
    "error, the request\n         body and the response kept (headers are "
    "never shown: they may carry\n         credentials).\n"
    "retry    make rows due now, attempts counted from 0, the same "
    "idempotency key:\n         failed, unknown and pending rows keep their "
    "state; a dead row is\n         re-armed as failed (sent again) when "
    "its provider is idempotent or\n         refused it with a 4xx, else as "
    "unknown (reconciled before any\n         re-send; without a reconcile "
    "URL it dies again, never re-sent\n         blindly) - unless "
    "--not-performed: you checked with the provider\n         that it did "
    "not happen. Its dead letter is marked resolved. Rows in\n         "
    "flight or done are left alone. A dispatcher (inbox dispatch, run\n"
    "         --dispatch) performs them.\n"
    "drop     delete rows: their effect is never performed (in-flight and "
    "done rows\n         are refused); by filter only with --yes (without: "
    "what would be\n         dropped). Logged (outbox_dropped); the row's "
    "dead letter is marked\n         resolved.\n"
    "\n"
    "--json: one JSON object per line (a row, or one per row acted on).\n"
    "Exit codes: 0 ok; 1 a row was not found, refused or changed meanwhile; "
    "2 usage;\n3 config error; 4 cannot open the store.\n";

typedef struct ob {
	cli_rows r; /* first: the frame's (cli/args.h) */
	int json, yes, not_performed;
	long long limit, after;
	const char *provider, *state, *key;
	double older_s;
} ob;

static void filter_of(const ob *q, int i, inbox_admin_outbox_filter *f)
{
	inbox_admin_outbox_filter init = INBOX_ADMIN_OUTBOX_FILTER_INIT;
	*f = init;
	f->consumer = q->r.cfg.consumers[i].name;
	f->provider = q->provider;
	f->state = q->state;
	f->key = q->key;
	f->older_than_seconds = (int64_t)q->older_s;
	f->after_id = q->after;
}

/* ---- printing ------------------------------------------------------------ */

static void json_str(const char *name, const char *v, int first)
{
	printf("%s\"%s\":", first ? "" : ",", name);
	cli_json_string(stdout, v, v ? strlen(v) : 0);
}

static void row_json(const inbox_admin_outbox_row *r, int full)
{
	printf("{\"id\":%lld", (long long)r->id);
	json_str("consumer", r->consumer, 0);
	json_str("key", r->key, 0);
	json_str("step", r->step, 0);
	json_str("state", r->state, 0);
	json_str("provider", r->provider, 0);
	json_str("url", r->url, 0);
	json_str("method", r->method, 0);
	json_str("kind", r->kind, 0);
	json_str("idempotency_key", r->idempotency_key, 0);
	printf(",\"idempotent\":%s,\"reconcilable\":%s,\"attempts\":%d,"
	       "\"max_attempts\":%d,\"reconciliations\":%d,\"fence\":%lld,"
	       "\"last_status\":%d",
	       r->idempotent ? "true" : "false",
	       r->reconcilable ? "true" : "false", r->attempts, r->max_attempts,
	       r->reconciliations, (long long)r->fence, r->last_status);
	json_str("last_error", r->last_error, 0);
	printf(",\"created_at_ms\":%lld,\"updated_at_ms\":%lld,"
	       "\"next_attempt_at_ms\":%lld,\"lease_until_ms\":%lld,"
	       "\"done_at_ms\":%lld",
	       (long long)r->created_at_ms, (long long)r->updated_at_ms,
	       (long long)r->next_attempt_at_ms, (long long)r->lease_until_ms,
	       (long long)r->done_at_ms);
	if (full) {
		printf(",\"body_utf8\":%s,\"body\":",
		       inbox__utf8_valid(r->body, r->body_len) ? "true"
		                                               : "false");
		cli_json_string(stdout, r->body, r->body_len);
		printf(",\"response\":");
		cli_json_string(stdout, r->response, r->response_len);
	}
	printf("}\n");
}

#define NCOLS 9

typedef struct table {
	cli_table t; /* the text table (cli/table.h) */
	long rows;
	int json;
} table;

static int list_row(const inbox_admin_outbox_row *r, void *payload)
{
	table *t = payload;
	t->rows++;
	if (t->json) {
		row_json(r, 0);
		return 0;
	}
	char age[24];
	cli_table_add(&t->t, cli_cell_num(r->id));
	cli_table_add(&t->t, strdup(r->state));
	cli_table_add(&t->t, cli_cell_num(r->attempts));
	cli_table_add(&t->t, strdup(cli_age_text(r->now_ms - r->created_at_ms,
	                                         age, sizeof(age))));
	cli_table_add(&t->t, cli_cell_text(r->provider, 60));
	cli_table_add(&t->t, cli_cell_text(r->consumer, 30));
	cli_table_add(&t->t, cli_cell_text(r->key, 48));
	cli_table_add(&t->t, cli_cell_text(r->step, 24));
	cli_table_add(&t->t, cli_cell_text(r->last_error, 120));
	return t->t.nomem ? -1 : 0;
}

static int cmd_list(cli_rows *rows)
{
	ob *q = (ob *)rows;
	table t = {.json = q->json};
	cli_table_init(&t.t, NCOLS);
	static const char *const head[NCOLS] = {
	    "ID",       "STATE", "ATTEMPTS", "AGE",       "PROVIDER",
	    "CONSUMER", "KEY",   "STEP",     "LAST ERROR"};
	if (!q->json)
		for (int i = 0; i < NCOLS; i++)
			cli_table_add(&t.t, strdup(head[i]));
	int rc = 0;
	for (int i = 0; i < q->r.cfg.nconsumers && !rc; i++) {
		if (!cli_rows_selected(&q->r, i))
			continue;
		if ((rc = cli_rows_open(&q->r, i)))
			break;
		inbox_admin_outbox_filter f;
		filter_of(q, i, &f);
		f.limit = (int)(q->limit - t.rows);
		if (f.limit <= 0)
			break;
		int err = inbox_admin_outbox_list(q->r.st[i], &f, list_row, &t);
		if (t.t.nomem) {
			cli_error("out of memory listing the outbox");
			rc = CLI_EXIT_RUNTIME;
		} else if (err == INBOX_ERR_INVALID) {
			cli_error("outbox list: %s",
			          inbox_store_errmsg(q->r.st[i]));
			rc = CLI_EXIT_USAGE;
		} else if (err < 0) {
			rc = cli_rows_store_error(&q->r, i,
			                          "listing the outbox", err);
		}
	}
	if (!q->json && !rc) {
		cli_table_print(&t.t);
		printf("(%ld outbox row%s)\n", t.rows, t.rows == 1 ? "" : "s");
	}
	cli_table_free(&t.t);
	return rc;
}

/* The consumer holding row id: 0 and *ci; CLI_EXIT_RUNTIME when none. */
static int find(ob *q, int64_t id, int *ci, inbox_admin_outbox_row **r)
{
	for (int i = 0; i < q->r.cfg.nconsumers; i++) {
		if (!cli_rows_selected(&q->r, i))
			continue;
		int rc = cli_rows_open(&q->r, i);
		if (rc)
			return rc;
		int err = inbox_admin_outbox_get(q->r.st[i], id,
		                                 q->r.cfg.consumers[i].name, r);
		if (err == INBOX_OK) {
			*ci = i;
			return 0;
		}
		if (err != INBOX_ERR_NOTFOUND)
			return cli_rows_store_error(&q->r, i,
			                            "reading the outbox", err);
	}
	fprintf(stderr, "inbox: no outbox row %lld%s%s%s\n", (long long)id,
	        q->r.sel ? " of consumer \"" : "",
	        q->r.sel ? q->r.sel->name : "", q->r.sel ? "\"" : "");
	return CLI_EXIT_RUNTIME;
}

static void field(const char *name, const char *v)
{
	printf("%-16s ", name);
	cli_print_safe(stdout, v, v ? strlen(v) : 0, 0);
	fputc('\n', stdout);
}

static void show_text(const inbox_admin_outbox_row *r)
{
	char t[40], b[64];
	snprintf(b, sizeof(b), "%lld", (long long)r->id);
	field("outbox row", b);
	field("consumer", r->consumer);
	field("key", r->key);
	field("step", r->step);
	field("state", r->state);
	field("idempotency key", r->idempotency_key);
	field("provider", r->provider);
	snprintf(b, sizeof(b), "%s", r->method ? r->method : "");
	printf("%-16s %s ", "request", b);
	cli_print_safe(stdout, r->url, r->url ? strlen(r->url) : 0, 0);
	fputc('\n', stdout);
	field("idempotent", r->idempotent ? "yes (the provider honours the key)"
	                    : r->reconcilable
	                        ? "no (reconciled by its reference)"
	                        : "no (no reconcile: an unknown outcome "
	                          "is never re-sent)");
	printf("%-16s %d (max %d%s), reconciliations %d\n", "attempts",
	       r->attempts, r->max_attempts,
	       r->max_attempts ? "" : ": the dispatcher's", r->reconciliations);
	printf("%-16s %lld\n", "fence", (long long)r->fence);
	field("created", cli_time_text(r->created_at_ms, t, sizeof(t)));
	field("updated", cli_time_text(r->updated_at_ms, t, sizeof(t)));
	if (r->done_at_ms)
		field("done", cli_time_text(r->done_at_ms, t, sizeof(t)));
	else
		field("next attempt",
		      cli_time_text(r->next_attempt_at_ms, t, sizeof(t)));
	if (r->lease_until_ms)
		field("lease until",
		      cli_time_text(r->lease_until_ms, t, sizeof(t)));
	if (r->last_status)
		printf("%-16s %d\n", "last status", r->last_status);
	field("last error", r->last_error);
	printf("body (%zu bytes):\n", r->body_len);
	cli_print_safe(stdout, r->body, r->body_len, 0);
	fputc('\n', stdout);
	if (r->response) {
		printf("response (%zu bytes kept):\n", r->response_len);
		cli_print_safe(stdout, r->response, r->response_len, 0);
		fputc('\n', stdout);
	}
}

static int cmd_show(cli_rows *rows)
{
	ob *q = (ob *)rows;
	if (q->r.nids != 1) {
		cli_error("outbox show: give exactly one outbox row id");
		return CLI_EXIT_USAGE;
	}
	inbox_admin_outbox_row *r = NULL;
	int ci, rc = find(q, q->r.ids[0], &ci, &r);
	if (rc)
		return rc;
	if (q->json)
		row_json(r, 1);
	else
		show_text(r);
	inbox_admin_outbox_row_free(r);
	return 0;
}

/* ---- retry, drop ------------------------------------------------------- */

typedef struct target {
	int64_t id;
	int ci;
} target;

typedef struct targets {
	target *v;
	int n;
	int ci;
	int nomem;
	const ob *q;
} targets;

static int collect(const inbox_admin_outbox_row *r, void *payload)
{
	targets *t = payload;
	/* By filter, only rows an action applies to. */
	if (!strcmp(r->state, "in_flight") || !strcmp(r->state, "done"))
		return 0;
	target *v = realloc(t->v, (size_t)(t->n + 1) * sizeof(*v));
	if (!v) {
		t->nomem = 1;
		return 1;
	}
	t->v = v;
	t->v[t->n].id = r->id;
	t->v[t->n++].ci = t->ci;
	return 0;
}

/* The rows to act on: the ids given (their consumer found), or the rows
 * the filters select. */
static int targets_of(ob *q, targets *t)
{
	memset(t, 0, sizeof(*t));
	t->q = q;
	for (int k = 0; k < q->r.nids; k++) {
		target *v = realloc(t->v, (size_t)(t->n + 1) * sizeof(*v));
		if (!v)
			return CLI_EXIT_RUNTIME;
		t->v = v;
		t->v[t->n].id = q->r.ids[k];
		t->v[t->n++].ci = -1;
	}
	if (q->r.nids)
		return 0;
	for (int i = 0; i < q->r.cfg.nconsumers; i++) {
		if (!cli_rows_selected(&q->r, i))
			continue;
		int rc = cli_rows_open(&q->r, i);
		if (rc)
			return rc;
		inbox_admin_outbox_filter f;
		filter_of(q, i, &f);
		t->ci = i;
		int err = inbox_admin_outbox_list(q->r.st[i], &f, collect, t);
		if (t->nomem)
			return CLI_EXIT_RUNTIME;
		if (err == INBOX_ERR_INVALID) {
			cli_error("outbox: %s", inbox_store_errmsg(q->r.st[i]));
			return CLI_EXIT_USAGE;
		}
		if (err < 0)
			return cli_rows_store_error(&q->r, i,
			                            "listing the outbox", err);
	}
	return 0;
}

static void act_json(int64_t id, const char *consumer, const char *action,
                     const char *from, const char *to, const char *error)
{
	printf("{\"id\":%lld", (long long)id);
	json_str("consumer", consumer, 0);
	json_str("action", action, 0);
	if (from)
		json_str("from", from, 0);
	if (to)
		json_str("to", to, 0);
	if (error)
		json_str("error", error, 0);
	printf("}\n");
}

static int act(ob *q, int drop)
{
	const char *what = drop ? "drop" : "retry";
	if (!q->r.nids && !q->r.has_filter) {
		cli_error("outbox %s: give row ids or a filter (--consumer, "
		          "--provider, --state, --key, --older-than)",
		          what);
		return CLI_EXIT_USAGE;
	}
	if (q->r.nids &&
	    (q->provider || q->state || q->key || q->older_s > 0)) {
		cli_error("outbox %s: give ids or filters, not both", what);
		return CLI_EXIT_USAGE;
	}
	targets t;
	int rc = targets_of(q, &t), status = 0;
	int dry = drop && !q->r.nids && !q->yes;
	for (int k = 0; k < t.n && !rc; k++) {
		int ci = t.v[k].ci;
		inbox_admin_outbox_row *r = NULL;
		if (ci < 0) {
			rc = find(q, t.v[k].id, &ci, &r);
			inbox_admin_outbox_row_free(r);
			if (rc == CLI_EXIT_RUNTIME) {
				status = rc;
				rc = 0;
				continue;
			}
			if (rc)
				break;
		}
		const char *name = q->r.cfg.consumers[ci].name;
		if (dry) {
			if (q->json)
				act_json(t.v[k].id, name, "would_drop", NULL,
				         NULL, NULL);
			else
				printf("would drop outbox row %lld (%s)\n",
				       (long long)t.v[k].id, name);
			continue;
		}
		inbox_outbox_state from = INBOX_OUTBOX_NONE,
		                   to = INBOX_OUTBOX_NONE;
		int err = drop ? inbox_admin_outbox_drop(q->r.st[ci], t.v[k].id,
		                                         name, &from)
		               : inbox_admin_outbox_retry(
		                     q->r.st[ci], t.v[k].id, name,
		                     q->not_performed
		                         ? INBOX_ADMIN_RETRY_NOT_PERFORMED
		                         : 0,
		                     &from, &to);
		if (err == INBOX_ERR_INVALID || err == INBOX_ERR_BUSY ||
		    err == INBOX_ERR_NOTFOUND) {
			char msg[1024];
			snprintf(msg, sizeof(msg), "%s",
			         inbox_store_errmsg(q->r.st[ci]));
			if (q->json)
				act_json(t.v[k].id, name, what, NULL, NULL,
				         msg);
			else
				cli_error("%s", msg);
			status = CLI_EXIT_RUNTIME;
			continue;
		}
		if (err < 0) {
			rc = cli_rows_store_error(
			    &q->r, ci,
			    drop ? "dropping an outbox row"
			         : "retrying an outbox row",
			    err);
			break;
		}
		if (q->json)
			act_json(t.v[k].id, name, drop ? "dropped" : "retried",
			         inbox_outbox_state_name(from),
			         drop ? NULL : inbox_outbox_state_name(to),
			         NULL);
		else if (drop)
			printf("dropped outbox row %lld (%s, was %s)\n",
			       (long long)t.v[k].id, name,
			       inbox_outbox_state_name(from));
		else
			printf("retrying outbox row %lld (%s): %s -> %s, due "
			       "now\n",
			       (long long)t.v[k].id, name,
			       inbox_outbox_state_name(from),
			       inbox_outbox_state_name(to));
	}
	if (!rc && !q->json) {
		if (dry)
			printf("%d outbox row%s would be dropped (dry run: "
			       "give --yes to drop them)\n",
			       t.n, t.n == 1 ? "" : "s");
		else if (!q->r.nids)
			printf("%d outbox row%s matched\n", t.n,
			       t.n == 1 ? "" : "s");
	}
	free(t.v);
	return rc ? rc : status;
}

static int cmd_retry(cli_rows *rows)
{
	ob *q = (ob *)rows;
	return act(q, 0);
}

static int cmd_drop(cli_rows *rows)
{
	ob *q = (ob *)rows;
	return act(q, 1);
}

/* ---- command line -------------------------------------------------------- */

static const cli_rows_cmd outbox_cmd = {
    "outbox",
    cli_outbox_usage,
    "an outbox row",
    {"list", "show", "retry", "drop"},
    {cmd_list, cmd_show, cmd_retry, cmd_drop},
    NULL};

int cli_cmd_outbox(int argc, char **argv)
{
	ob q;
	memset(&q, 0, sizeof(q));
	q.limit = 1000;
	const cli_opt opts[] = {
	    {"--provider", CLI_OPT_STRING, &q.provider, 0, 0, NULL, 1},
	    {"--state", CLI_OPT_STRING, &q.state, 0, 0, NULL, 1},
	    {"--key", CLI_OPT_STRING, &q.key, 0, 0, NULL, 1},
	    {"--older-than", CLI_OPT_AGE, &q.older_s, 0, 0,
	     "is not a duration (30s, 5m, 2h, 7d)", 1},
	    {"--json", CLI_OPT_FLAG, &q.json, 0, 0, NULL, 0},
	    {"--yes", CLI_OPT_FLAG, &q.yes, 0, 0, NULL, 0},
	    {"--not-performed", CLI_OPT_FLAG, &q.not_performed, 0, 0, NULL, 0},
	    {"--limit", CLI_OPT_INT, &q.limit, 1, LLONG_MAX,
	     "is not a positive number", 0},
	    {"--after", CLI_OPT_INT, &q.after, 0, LLONG_MAX, "is not an id", 0},
	    {NULL, CLI_OPT_FLAG, NULL, 0, 0, NULL, 0},
	};
	return cli_rows_main(&outbox_cmd, opts, argc, argv, &q.r);
}
