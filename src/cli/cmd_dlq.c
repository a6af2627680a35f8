/*
 * inbox dlq list|show|replay|drop CONFIG ...: the dead letters of the
 * configured consumers.
 *
 * A replay goes through the consumer exactly as a delivery would (same
 * effect, same dedup): the key's `dead` record is released first, so a
 * message that was dead-lettered is processed again; a key that completed
 * meanwhile answers duplicate (or conflict) and nothing is applied twice.
 * Dead letters are kept after a replay, with replayed_at set. A dead
 * letter stands for every delivery of its message (DELIVERIES): one that
 * fails again, delivered or replayed, is counted on it and is pending
 * again.
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

const char cli_dlq_usage[] =
    "usage: inbox dlq list CONFIG [FILTERS] [--limit N] [--after ID] "
    "[--json]\n"
    "       inbox dlq show CONFIG ID [--consumer NAME] [--json | --raw]\n"
    "       inbox dlq replay CONFIG ID... [--consumer NAME] [--json]\n"
    "       inbox dlq replay CONFIG --all [--consumer NAME] [--json]\n"
    "       inbox dlq drop CONFIG ID... [--consumer NAME] [--json]\n"
    "       inbox dlq drop CONFIG FILTERS --yes [--json]\n"
    "\n"
    "FILTERS: [--consumer NAME] [--key KEY] [--pending | --resolved]\n"
    "         [--outbox | --messages] [--older-than DURATION]\n"
    "\n"
    "list     the dead letters (id, first seen, deliveries, attempts, key, "
    "reason),\n         one per message however often it was delivered, "
    "those the FILTERS\n         select (--pending leaves out the replayed "
    "ones); --limit N (default\n         1000) and --after ID page.\n"
    "show     one dead letter: reason, key, message id, attempts, "
    "deliveries, first\n         and last seen, source position, headers, "
    "fingerprints and the payload\n         as it arrived (bytes that are "
    "not UTF-8 shown as \\xNN); --raw writes the\n         exact payload "
    "bytes only.\n"
    "replay   process the stored message again through the consumer's "
    "effect and\n         dedup: prints applied, duplicate, conflict, "
    "dead_lettered (again, with\n         the id: its own when the same "
    "message fails again, counted and\n         pending again) or retry for "
    "each. The key's dead inbox record is\n         released first; a "
    "completed one makes the replay a duplicate, never a\n         second "
    "effect. --all replays every pending dead letter. The dead\n         "
    "letter is kept, marked replayed.\n"
    "drop     delete dead letters (the inbox record stays as it is): the "
    "ids given,\n         or every one the filters select (--resolved: "
    "replayed or handled;\n         --outbox: of failed outbox effects; "
    "--messages: of messages;\n         --older-than 7d: last seen more "
    "than 7 days ago) - only with --yes,\n         else what would be "
    "dropped. Logged (dead_letters_dropped).\n"
    "\n"
    "--json: one JSON object per line (a dead letter, or one per dead "
    "letter\nreplayed or dropped, or per consumer for a drop by filter).\n"
    "\n"
    "Exit codes: 0 ok; 1 a dead letter was not found, or a replay did not "
    "end\napplied, duplicate or stale; 2 usage; 3 config error (also an "
    "effect that\nno longer matches the database); 4 cannot open the "
    "store.\n";

typedef struct dlq {
	cli_rows r;         /* first: the frame's (cli/args.h) */
	inbox_consumer **c; /* per consumer of cfg, opened lazily */
	int json, raw, pending, all;
	int resolved, outbox, messages, yes;
	const char *key;
	double older_s;
	long long limit, after;
} dlq;

static int open_consumer(dlq *q, int i)
{
	int rc = cli_rows_open(&q->r, i);
	if (!rc && !q->c &&
	    !(q->c = calloc((size_t)q->r.cfg.nconsumers, sizeof(*q->c))))
		rc = CLI_EXIT_RUNTIME;
	if (rc || q->c[i])
		return rc;
	const cli_consumer *c = &q->r.cfg.consumers[i];
	if ((rc = cli_prepare_effects(&q->r.cfg, c, q->r.st[i])) ||
	    (rc = cli_open_consumer(&q->r.cfg, c, q->r.st[i], &q->c[i])))
		return rc;
	return 0;
}

/* The consumer index holding dead letter `id`: 0 and *ci, CLI_EXIT_RUNTIME
 * when no selected consumer has it, or another exit code. */
static int find(dlq *q, int64_t id, int *ci, inbox_admin_dead_letter **dl)
{
	for (int i = 0; i < q->r.cfg.nconsumers; i++) {
		if (!cli_rows_selected(&q->r, i))
			continue;
		int rc = cli_rows_open(&q->r, i);
		if (rc)
			return rc;
		int err = inbox_admin_dlq_get(q->r.st[i], id,
		                              q->r.cfg.consumers[i].name, dl);
		if (err == INBOX_OK) {
			*ci = i;
			return 0;
		}
		if (err != INBOX_ERR_NOTFOUND)
			return cli_rows_store_error(
			    &q->r, i, "reading dead letters", err);
	}
	fprintf(stderr, "inbox: no dead letter %lld%s%s%s\n", (long long)id,
	        q->r.sel ? " of consumer \"" : "",
	        q->r.sel ? q->r.sel->name : "", q->r.sel ? "\"" : "");
	return CLI_EXIT_RUNTIME;
}

/* ---- list -----------------------------------------------------------------
 */

#define LIST_COLS 8

typedef struct list_out {
	int json;
	long count;
	cli_table t; /* the text table (cli/table.h) */
} list_out;

static int list_row(const inbox_admin_dead_letter *dl, void *payload)
{
	list_out *x = payload;
	char t[40];
	x->count++;
	if (x->json) {
		printf("{\"id\":%lld,\"consumer\":", (long long)dl->id);
		cli_json_string(stdout, dl->consumer, strlen(dl->consumer));
		printf(",\"key\":");
		cli_json_string(stdout, dl->key, dl->key ? strlen(dl->key) : 0);
		printf(",\"created_at_ms\":%lld,\"last_seen_at_ms\":%lld,"
		       "\"replayed_at_ms\":%lld,\"deliveries\":%lld,"
		       "\"attempts\":%d,\"payload_bytes\":%zu,\"conflict\":%s,"
		       "\"reason\":",
		       (long long)dl->created_at_ms,
		       (long long)dl->last_seen_at_ms,
		       (long long)dl->replayed_at_ms, (long long)dl->deliveries,
		       dl->attempts, dl->payload_len,
		       dl->stored_fingerprint ? "true" : "false");
		cli_json_string(stdout, dl->reason, strlen(dl->reason));
		printf("}\n");
		return 0;
	}
	cli_table_add(&x->t, cli_cell_num((long long)dl->id));
	cli_table_add(&x->t,
	              strdup(cli_time_text(dl->created_at_ms, t, sizeof(t))));
	cli_table_add(&x->t, cli_cell_num((long long)dl->deliveries));
	cli_table_add(&x->t, cli_cell_num((long long)dl->attempts));
	cli_table_add(&x->t, strdup(dl->replayed_at_ms ? "yes" : "no"));
	cli_table_add(&x->t, cli_cell_text(dl->consumer, 30));
	/* no key: the message had none ("-") */
	cli_table_add(&x->t, cli_cell_text(dl->key, 48));
	cli_table_add(&x->t, cli_cell_text(dl->reason, 160));
	return x->t.nomem ? -1 : 0;
}

static int cmd_list(cli_rows *rows)
{
	dlq *q = (dlq *)rows;
	list_out x = {.json = q->json};
	cli_table_init(&x.t, LIST_COLS);
	static const char *const head[LIST_COLS] = {
	    "ID",       "FIRST SEEN", "DELIVERIES", "ATTEMPTS",
	    "REPLAYED", "CONSUMER",   "KEY",        "REASON"};
	if (!q->json)
		for (int i = 0; i < LIST_COLS; i++)
			cli_table_add(&x.t, strdup(head[i]));
	int rc = 0;
	for (int i = 0; i < q->r.cfg.nconsumers && !rc; i++) {
		if (!cli_rows_selected(&q->r, i))
			continue;
		rc = cli_rows_open(&q->r, i);
		if (rc)
			break;
		inbox_admin_dlq_filter f = INBOX_ADMIN_DLQ_FILTER_INIT;
		f.consumer = q->r.cfg.consumers[i].name;
		f.pending_only = q->pending;
		f.resolved_only = q->resolved;
		f.outbox_only = q->outbox;
		f.messages_only = q->messages;
		f.key = q->key;
		f.older_than_seconds = (int64_t)q->older_s;
		f.after_id = q->after;
		f.limit = (int)(q->limit - x.count);
		if (f.limit <= 0)
			break;
		int err = inbox_admin_dlq_list(q->r.st[i], &f, list_row, &x);
		if (x.t.nomem) {
			cli_error("out of memory listing dead letters");
			rc = CLI_EXIT_RUNTIME;
		} else if (err < 0) {
			rc = cli_rows_store_error(&q->r, i,
			                          "listing dead letters", err);
		}
	}
	if (!q->json && !rc) {
		cli_table_print(&x.t);
		printf("(%ld dead letter%s)\n", x.count,
		       x.count == 1 ? "" : "s");
	}
	cli_table_free(&x.t);
	return rc;
}

/* ---- show -----------------------------------------------------------------
 */

static void field(const char *name, const char *v)
{
	printf("%-18s ", name);
	cli_print_safe(stdout, v, v ? strlen(v) : 0, 0);
	fputc('\n', stdout);
}

static void show_json(const inbox_admin_dead_letter *dl)
{
	printf("{\"id\":%lld,\"consumer\":", (long long)dl->id);
	cli_json_string(stdout, dl->consumer, strlen(dl->consumer));
	const struct {
		const char *name, *v;
	} s[] = {{"key", dl->key},
	         {"message_id", dl->message_id},
	         {"reason", dl->reason},
	         {"position", dl->position},
	         {"headers", dl->headers},
	         {"fingerprint", dl->fingerprint},
	         {"stored_fingerprint", dl->stored_fingerprint}};
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		printf(",\"%s\":", s[i].name);
		cli_json_string(stdout, s[i].v, s[i].v ? strlen(s[i].v) : 0);
	}
	printf(",\"attempts\":%d,\"deliveries\":%lld,\"created_at_ms\":%lld,"
	       "\"last_seen_at_ms\":%lld,\"replayed_at_ms\":%lld,"
	       "\"payload_bytes\":%zu,\"payload_utf8\":%s,\"payload\":",
	       dl->attempts, (long long)dl->deliveries,
	       (long long)dl->created_at_ms, (long long)dl->last_seen_at_ms,
	       (long long)dl->replayed_at_ms, dl->payload_len,
	       inbox__utf8_valid(dl->payload, dl->payload_len) ? "true"
	                                                       : "false");
	cli_json_string(stdout, dl->payload, dl->payload_len);
	printf("}\n");
}

static void show_text(const inbox_admin_dead_letter *dl)
{
	char t[40], id[24];
	snprintf(id, sizeof(id), "%lld", (long long)dl->id);
	field("dead letter", id);
	field("consumer", dl->consumer);
	field("key", dl->key);
	field("message id", dl->message_id);
	field("reason", dl->reason);
	printf("%-18s %d\n", "attempts", dl->attempts);
	printf("%-18s %lld\n", "deliveries", (long long)dl->deliveries);
	field("position", dl->position);
	field("first seen", cli_time_text(dl->created_at_ms, t, sizeof(t)));
	field("last seen", cli_time_text(dl->last_seen_at_ms, t, sizeof(t)));
	field("replayed", dl->replayed_at_ms
	                      ? cli_time_text(dl->replayed_at_ms, t, sizeof(t))
	                      : "never");
	field("fingerprint", dl->fingerprint);
	if (dl->stored_fingerprint)
		field("stored fingerprint", dl->stored_fingerprint);
	field("headers", dl->headers);
	int utf8 = inbox__utf8_valid(dl->payload, dl->payload_len);
	printf("payload (%zu bytes%s):\n", dl->payload_len,
	       utf8 ? "" : "; not valid UTF-8, bad bytes shown as \\xNN");
	cli_print_safe(stdout, dl->payload, dl->payload_len, 0);
	fputc('\n', stdout);
}

static int cmd_show(cli_rows *rows)
{
	dlq *q = (dlq *)rows;
	if (q->r.nids != 1) {
		cli_error("dlq show: give exactly one dead letter id");
		return CLI_EXIT_USAGE;
	}
	inbox_admin_dead_letter *dl = NULL;
	int ci, rc = find(q, q->r.ids[0], &ci, &dl);
	if (rc)
		return rc;
	if (q->raw)
		fwrite(dl->payload, 1, dl->payload_len, stdout);
	else if (q->json)
		show_json(dl);
	else
		show_text(dl);
	inbox_admin_dead_letter_free(dl);
	return 0;
}

/* ---- drop -----------------------------------------------------------------
 */

/* By filter: per selected consumer, what the filters select (v3). */
static int drop_matching(dlq *q)
{
	int rc = 0;
	int64_t total = 0;
	for (int i = 0; i < q->r.cfg.nconsumers && !rc; i++) {
		if (!cli_rows_selected(&q->r, i))
			continue;
		if ((rc = cli_rows_open(&q->r, i)))
			break;
		const char *name = q->r.cfg.consumers[i].name;
		inbox_admin_dlq_filter f = INBOX_ADMIN_DLQ_FILTER_INIT;
		f.consumer = name;
		f.key = q->key;
		f.pending_only = q->pending;
		f.resolved_only = q->resolved;
		f.outbox_only = q->outbox;
		f.messages_only = q->messages;
		f.older_than_seconds = (int64_t)q->older_s;
		int64_t n = 0;
		int err =
		    inbox_admin_dlq_drop_matching(q->r.st[i], &f, !q->yes, &n);
		total += n;
		if (err < 0) {
			rc = cli_rows_store_error(&q->r, i,
			                          "dropping dead letters", err);
			break;
		}
		if (q->json) {
			printf("{\"consumer\":");
			cli_json_string(stdout, name, strlen(name));
			printf(",\"%s\":%lld}\n",
			       q->yes ? "dropped" : "would_drop", (long long)n);
		} else {
			printf("%s: %s %lld dead letter%s\n", name,
			       q->yes ? "dropped" : "would drop", (long long)n,
			       n == 1 ? "" : "s");
		}
	}
	if (!rc && !q->yes && !q->json)
		printf(
		    "dry run: %lld dead letter%s would be dropped; give --yes "
		    "to drop them\n",
		    (long long)total, total == 1 ? "" : "s");
	return rc;
}

static int cmd_drop(cli_rows *rows)
{
	dlq *q = (dlq *)rows;
	if (!q->r.nids && !q->r.has_filter) {
		cli_error(
		    "dlq drop: give dead letter ids or filters (--consumer, "
		    "--key, --pending, --resolved, --outbox, --messages, "
		    "--older-than)");
		return CLI_EXIT_USAGE;
	}
	if (q->r.nids && (q->key || q->pending || q->resolved || q->outbox ||
	                  q->messages || q->older_s > 0)) {
		cli_error("dlq drop: give ids or filters, not both");
		return CLI_EXIT_USAGE;
	}
	if (!q->r.nids)
		return drop_matching(q);
	int status = 0;
	for (int k = 0; k < q->r.nids; k++) {
		inbox_admin_dead_letter *dl = NULL;
		int ci, rc = find(q, q->r.ids[k], &ci, &dl);
		inbox_admin_dead_letter_free(dl);
		if (rc == CLI_EXIT_RUNTIME) {
			status = rc;
			continue;
		}
		if (rc)
			return rc;
		int err = inbox_admin_dlq_drop(q->r.st[ci], q->r.ids[k]);
		if (err < 0 && err != INBOX_ERR_NOTFOUND)
			return cli_rows_store_error(
			    &q->r, ci, "dropping a dead letter", err);
		if (err == INBOX_ERR_NOTFOUND) {
			fprintf(stderr,
			        "inbox: dead letter %lld is already "
			        "gone\n",
			        (long long)q->r.ids[k]);
			status = CLI_EXIT_RUNTIME;
			continue;
		}
		if (q->json) {
			printf("{\"id\":%lld,\"consumer\":",
			       (long long)q->r.ids[k]);
			cli_json_string(stdout, q->r.cfg.consumers[ci].name,
			                strlen(q->r.cfg.consumers[ci].name));
			printf(",\"dropped\":true}\n");
		} else {
			printf("dropped dead letter %lld (%s)\n",
			       (long long)q->r.ids[k],
			       q->r.cfg.consumers[ci].name);
		}
	}
	return status;
}

/* ---- replay ---------------------------------------------------------------
 */

typedef struct tally {
	long n[INBOX_ACQUIRED + 1];
	long failed;  /* not found */
	long refused; /* not replayable (an outbox effect's, another's) */
} tally;

static int collect_row(const inbox_admin_dead_letter *dl, void *payload)
{
	dlq *q = payload;
	int64_t *p = realloc(q->r.ids, (size_t)(q->r.nids + 1) * sizeof(*p));
	if (!p)
		return 1;
	q->r.ids = p;
	q->r.ids[q->r.nids++] = dl->id;
	return 0;
}

static int count_outbox_row(const inbox_admin_dead_letter *dl, void *payload)
{
	long *n = payload;
	*n += dl->position && strncmp(dl->position, "outbox:", 7) == 0;
	return 0;
}

/* --all: every pending dead letter of the selected consumers that holds
 * a message; *outbox counts the pending ones of failed outbox effects
 * (not replayable through the consumer). */
static int collect_all(dlq *q, long *outbox)
{
	for (int i = 0; i < q->r.cfg.nconsumers; i++) {
		if (!cli_rows_selected(&q->r, i))
			continue;
		int rc = cli_rows_open(&q->r, i);
		if (rc)
			return rc;
		inbox_admin_dlq_filter f = INBOX_ADMIN_DLQ_FILTER_INIT;
		f.consumer = q->r.cfg.consumers[i].name;
		f.pending_only = 1;
		f.messages_only = 1;
		int err = inbox_admin_dlq_list(q->r.st[i], &f, collect_row, q);
		if (err < 0)
			return cli_rows_store_error(
			    &q->r, i, "listing dead letters", err);
		f.messages_only = 0;
		err = inbox_admin_dlq_list(q->r.st[i], &f, count_outbox_row,
		                           outbox);
		if (err < 0)
			return cli_rows_store_error(
			    &q->r, i, "listing dead letters", err);
	}
	return 0;
}

static void print_result_json(int64_t id, const char *consumer,
                              const inbox_result *r)
{
	printf("{\"id\":%lld,\"consumer\":", (long long)id);
	cli_json_string(stdout, consumer, strlen(consumer));
	printf(",\"key\":");
	cli_json_string(stdout, r->key, r->key ? strlen(r->key) : 0);
	printf(",\"outcome\":\"%s\",\"dead_letter_id\":%lld,\"reason\":",
	       inbox_outcome_name(r->outcome), (long long)r->dead_letter_id);
	cli_json_string(stdout, r->reason, r->reason ? strlen(r->reason) : 0);
	printf("}\n");
}

static void print_result(int64_t id, const char *consumer,
                         const inbox_result *r)
{
	printf("dead letter %lld (%s", (long long)id, consumer);
	if (r->key) {
		fputs(", key ", stdout);
		cli_print_safe(stdout, r->key, strlen(r->key), 80);
	}
	printf("): %s", inbox_outcome_name(r->outcome));
	if (r->dead_letter_id)
		printf(" again as dead letter %lld%s",
		       (long long)r->dead_letter_id,
		       r->dead_letter_id == id ? " (the same: counted, pending "
		                                 "again)"
		                               : "");
	if (r->reason && r->outcome != INBOX_APPLIED &&
	    r->outcome != INBOX_DUPLICATE) {
		fputs(": ", stdout);
		cli_print_safe(stdout, r->reason, strlen(r->reason), 300);
	}
	fputc('\n', stdout);
}

static int replay_one(dlq *q, int64_t id, tally *t, cli_progress *prog,
                      int quiet)
{
	inbox_admin_dead_letter *dl = NULL;
	int ci, rc = find(q, id, &ci, &dl);
	inbox_admin_dead_letter_free(dl);
	if (rc == CLI_EXIT_RUNTIME) {
		t->failed++;
		return 0;
	}
	if (rc || (rc = open_consumer(q, ci)))
		return rc;
	inbox_result res = INBOX_RESULT_INIT;
	int err = inbox_admin_dlq_replay(q->r.st[ci], q->c[ci], id, &res);
	if (err == INBOX_ERR_INVALID) {
		/* refused (an outbox effect's dead letter): said, counted, and
		 * the others still replayed */
		if (prog->open) {
			fputs("\r\033[K", stderr);
			prog->open = 0;
		}
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s",
		         inbox_store_errmsg(q->r.st[ci]));
		cli_scrub(
		    msg, sizeof(msg),
		    cli_consumer_store(&q->r.cfg, &q->r.cfg.consumers[ci]));
		if (q->json) {
			printf("{\"id\":%lld,\"consumer\":", (long long)id);
			cli_json_string(stdout, q->r.cfg.consumers[ci].name,
			                strlen(q->r.cfg.consumers[ci].name));
			printf(",\"outcome\":\"refused\",\"reason\":");
			cli_json_string(stdout, msg, strlen(msg));
			printf("}\n");
		} else {
			cli_error("%s", msg);
		}
		t->refused++;
		return 0;
	}
	if (err < 0) {
		t->failed++;
		return cli_rows_store_error(&q->r, ci,
		                            "replaying a dead letter", err);
	}
	if ((unsigned)res.outcome <= INBOX_ACQUIRED)
		t->n[res.outcome]++;
	int good = res.outcome == INBOX_APPLIED ||
	           res.outcome == INBOX_DUPLICATE || res.outcome == INBOX_STALE;
	if (q->json) {
		print_result_json(id, q->r.cfg.consumers[ci].name, &res);
		fflush(stdout);
	} else if (!quiet || !good) {
		if (prog->open) {
			fputs("\r\033[K", stderr);
			prog->open = 0;
		}
		print_result(id, q->r.cfg.consumers[ci].name, &res);
		fflush(stdout);
	}
	return 0;
}

static int cmd_replay(cli_rows *rows)
{
	dlq *q = (dlq *)rows;
	int rc = 0;
	if (q->all && q->r.nids) {
		cli_error("dlq replay: give ids or --all, not both");
		return CLI_EXIT_USAGE;
	}
	if (!q->all && !q->r.nids) {
		cli_error("dlq replay: give dead letter ids or --all");
		return CLI_EXIT_USAGE;
	}
	long outbox = 0;
	if (q->all && (rc = collect_all(q, &outbox)))
		return rc;
	if (!q->r.nids && q->json) {
		return 0;
	} else if (!q->r.nids) {
		if (outbox)
			printf(
			    "no pending dead letters of messages; %ld pending "
			    "dead letter%s of failed outbox effects (not "
			    "replayable through the consumer: `inbox dlq "
			    "show ID`)\n",
			    outbox, outbox == 1 ? "" : "s");
		else
			printf("no pending dead letters\n");
		return 0;
	}
	tally t;
	memset(&t, 0, sizeof(t));
	cli_progress prog;
	cli_progress_init(&prog);
	/* On a terminal with many, one progress line and only the problems;
	 * otherwise a line per dead letter. */
	int quiet = prog.tty && q->r.nids > 1;
	if (q->json)
		prog.tty = 0;
	for (int k = 0; k < q->r.nids && rc == 0; k++) {
		rc = replay_one(q, q->r.ids[k], &t, &prog, quiet);
		cli_progress_show(&prog, "replayed", k + 1, q->r.nids,
		                  k + 1 == q->r.nids);
	}
	cli_progress_end(&prog);
	if (!q->json)
		printf("replayed %d dead letter%s: %ld applied, %ld duplicate, "
		       "%ld "
		       "conflict, %ld stale, %ld dead_lettered, %ld retry, %ld "
		       "in_progress, %ld not found, %ld refused\n",
		       q->r.nids, q->r.nids == 1 ? "" : "s", t.n[INBOX_APPLIED],
		       t.n[INBOX_DUPLICATE], t.n[INBOX_CONFLICT],
		       t.n[INBOX_STALE], t.n[INBOX_DEAD_LETTERED],
		       t.n[INBOX_RETRY], t.n[INBOX_IN_PROGRESS], t.failed,
		       t.refused);
	if (rc)
		return rc;
	long bad = t.failed + t.refused + t.n[INBOX_CONFLICT] +
	           t.n[INBOX_DEAD_LETTERED] + t.n[INBOX_RETRY] +
	           t.n[INBOX_IN_PROGRESS];
	return bad ? CLI_EXIT_RUNTIME : 0;
}

/* ---- command line ---------------------------------------------------------
 */

/* The consumers before their stores. */
static void close_consumers(cli_rows *rows)
{
	dlq *q = (dlq *)rows;
	for (int i = 0; q->c && i < rows->cfg.nconsumers; i++)
		inbox_consumer_close(q->c[i]);
	free(q->c);
	q->c = NULL;
}

static const cli_rows_cmd dlq_cmd = {"dlq",
                                     cli_dlq_usage,
                                     "a dead letter",
                                     {"list", "show", "replay", "drop"},
                                     {cmd_list, cmd_show, cmd_replay, cmd_drop},
                                     close_consumers};

int cli_cmd_dlq(int argc, char **argv)
{
	dlq q;
	memset(&q, 0, sizeof(q));
	q.limit = 1000;
	const cli_opt opts[] = {
	    {"--json", CLI_OPT_FLAG, &q.json, 0, 0, NULL, 0},
	    {"--raw", CLI_OPT_FLAG, &q.raw, 0, 0, NULL, 0},
	    {"--pending", CLI_OPT_FLAG, &q.pending, 0, 0, NULL, 1},
	    {"--resolved", CLI_OPT_FLAG, &q.resolved, 0, 0, NULL, 1},
	    {"--outbox", CLI_OPT_FLAG, &q.outbox, 0, 0, NULL, 1},
	    {"--messages", CLI_OPT_FLAG, &q.messages, 0, 0, NULL, 1},
	    {"--yes", CLI_OPT_FLAG, &q.yes, 0, 0, NULL, 0},
	    {"--key", CLI_OPT_STRING, &q.key, 0, 0, NULL, 1},
	    {"--older-than", CLI_OPT_AGE, &q.older_s, 0, 0, "is not a duration",
	     1},
	    {"--all", CLI_OPT_FLAG, &q.all, 0, 0, NULL, 0},
	    {"--limit", CLI_OPT_INT, &q.limit, 1, LLONG_MAX,
	     "is not a positive number", 0},
	    {"--after", CLI_OPT_INT, &q.after, 0, LLONG_MAX, "is not an id", 0},
	    {NULL, CLI_OPT_FLAG, NULL, 0, 0, NULL, 0},
	};
	return cli_rows_main(&dlq_cmd, opts, argc, argv, &q.r);
}
