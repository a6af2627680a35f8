/*
 * inbox inspect CONFIG CONSUMER KEY: one inbox record as the store holds
 * it — status, attempts, fingerprint, fencing token, lease, times — the
 * dead letters written for that key and its outbox rows; or the same for
 * every key of a message found by its id or source position. Read-only.
 */
#include <stdio.h>
#include <string.h>

#include <inbox/admin.h>

#include "base/json.h" /* inbox__utf8_valid */
#include "cli/cli.h"
#include "cli/open.h"
#include "cli/progress.h"
#include "core/internal.h" /* inbox__position_text */

const char cli_inspect_usage[] =
    "usage: inbox inspect CONFIG CONSUMER KEY [--json]\n"
    "       inbox inspect CONFIG CONSUMER -- KEY   (a key starting with -)\n"
    "       inbox inspect CONFIG CONSUMER --message-id ID [--json]\n"
    "       inbox inspect CONFIG CONSUMER --position POSITION [--json]\n"
    "\n"
    "Show the inbox record of KEY for CONSUMER: status (completed, "
    "processing,\nfailed, dead), attempts, fingerprint, fencing token, "
    "lease (and whether it\nexpired), message id, source position, "
    "created/processed/updated "
    "times, the stored result of its first processing (its outcome, "
    "content type\nand bytes), the dead letters written for that key and "
    "its outbox rows (id,\nstep, state, attempts). A key with dead letters "
    "but no record (dead-lettered\nbefore one was written: a schema "
    "violation...) shows its dead letters.\n"
    "--message-id ID: the keys of the records and dead letters of that "
    "message id\n(a scan of the consumer's records: ids are not indexed), "
    "each shown as above.\n--position POSITION: as the source spells it "
    "(orders.jsonl:42, topic/0@17,\noutbox:ID): the record inserted from "
    "that position and the dead letters at it\n(a scan of the consumer's "
    "records and dead letters), or that outbox row's key;\na duplicate "
    "delivered from another position writes nothing, so its key is\n"
    "found by the first position or by --message-id. A byte that is not "
    "UTF-8 is\nkept in a position as the text \\xHH, as shown here: "
    "give either.\n"
    "--json prints one JSON object per key (the result as text when it is "
    "UTF-8,\nand as hex).\n"
    "Exit codes: 0 found, 1 no record nor dead letter, 2 usage, 3 config "
    "error, 4 "
    "cannot\nopen the store.\n";

typedef struct dl_ids {
	int json;
	int n;
} dl_ids;

static int print_dl(const inbox_admin_dead_letter *dl, void *payload)
{
	dl_ids *x = payload;
	if (x->json)
		printf("%s{\"id\":%lld,\"replayed\":%s,\"reason\":",
		       x->n ? "," : "", (long long)dl->id,
		       dl->replayed_at_ms ? "true" : "false");
	else
		printf("%s%lld%s", x->n ? ", " : "", (long long)dl->id,
		       dl->replayed_at_ms ? " (replayed)" : "");
	if (x->json) {
		cli_json_string(stdout, dl->reason, strlen(dl->reason));
		fputc('}', stdout);
	}
	x->n++;
	return 0;
}

static int count_dl(const inbox_admin_dead_letter *dl, void *payload)
{
	(void)dl;
	++*(int *)payload;
	return 0;
}

static int count_ob(const inbox_admin_outbox_row *r, void *payload)
{
	(void)r;
	++*(int *)payload;
	return 0;
}

static void print_json(const inbox_admin_record *r)
{
	printf("{\"consumer\":");
	cli_json_string(stdout, r->consumer, strlen(r->consumer));
	printf(",\"key\":");
	cli_json_string(stdout, r->key, strlen(r->key));
	printf(",\"status\":\"%s\",\"attempts\":%d,\"fingerprint\":\"%s\","
	       "\"fence\":%lld,\"lease_until_ms\":%lld,\"lease_expired\":%s,"
	       "\"message_id\":",
	       r->status, r->attempts, r->fingerprint, (long long)r->fence,
	       (long long)r->lease_until_ms,
	       r->lease_expired ? "true" : "false");
	cli_json_string(stdout, r->message_id,
	                r->message_id ? strlen(r->message_id) : 0);
	printf(",\"position\":");
	cli_json_string(stdout, r->position,
	                r->position ? strlen(r->position) : 0);
	printf(",\"created_at_ms\":%lld,\"processed_at_ms\":%lld,"
	       "\"updated_at_ms\":%lld,\"outcome\":",
	       (long long)r->created_at_ms, (long long)r->processed_at_ms,
	       (long long)r->updated_at_ms);
	cli_json_string(stdout, r->outcome,
	                r->outcome ? strlen(r->outcome) : 0);
	printf(",\"result_type\":");
	cli_json_string(stdout, r->result_type,
	                r->result_type ? strlen(r->result_type) : 0);
	/* the bytes exactly (hex), and as text when they are UTF-8 */
	printf(",\"result_bytes\":%lld,\"result\":",
	       r->result ? (long long)r->result_len : -1LL);
	if (r->result && inbox__utf8_valid(r->result, r->result_len))
		cli_json_string(stdout, r->result, r->result_len);
	else
		fputs("null", stdout);
	printf(",\"result_hex\":");
	if (r->result) {
		fputc('"', stdout);
		for (size_t i = 0; i < r->result_len; i++)
			printf("%02x", (unsigned char)r->result[i]);
		fputc('"', stdout);
	} else {
		fputs("null", stdout);
	}
	printf(",\"dead_letters\":[");
}

static void print_text(const inbox_admin_record *r)
{
	char t[40], a[24];
	fputs("consumer ........ ", stdout);
	cli_print_safe(stdout, r->consumer, strlen(r->consumer), 0);
	fputs("\nkey ............. ", stdout);
	cli_print_safe(stdout, r->key, strlen(r->key), 0);
	printf("\nstatus .......... %s\nattempts ........ %d\n"
	       "fingerprint ..... %s\nfence ........... %lld\n",
	       r->status, r->attempts, r->fingerprint, (long long)r->fence);
	if (r->lease_until_ms > 0)
		printf("lease until ..... %s (%s %s)\n",
		       cli_time_text(r->lease_until_ms, t, sizeof(t)),
		       r->lease_expired ? "expired" : "valid for",
		       cli_age_text(r->lease_expired
		                        ? r->now_ms - r->lease_until_ms
		                        : r->lease_until_ms - r->now_ms,
		                    a, sizeof(a)));
	else
		printf("lease until ..... none\n");
	fputs("message id ...... ", stdout);
	cli_print_safe(stdout, r->message_id,
	               r->message_id ? strlen(r->message_id) : 0, 0);
	fputs("\nposition ........ ", stdout);
	cli_print_safe(stdout, r->position,
	               r->position ? strlen(r->position) : 0, 0);
	printf("\ncreated ......... %s\n",
	       cli_time_text(r->created_at_ms, t, sizeof(t)));
	printf("processed ....... %s\n",
	       cli_time_text(r->processed_at_ms, t, sizeof(t)));
	printf("updated ......... %s\n",
	       cli_time_text(r->updated_at_ms, t, sizeof(t)));
	/* a completed record without a stored outcome was applied */
	printf("outcome ......... %s\n",
	       r->outcome                        ? r->outcome
	       : !strcmp(r->status, "completed") ? "applied"
	       : !strcmp(r->status, "dead")      ? "dead_lettered"
	                                         : "none yet");
	if (r->result) {
		printf("result .......... %zu bytes, ", r->result_len);
		if (r->result_type)
			cli_print_safe(stdout, r->result_type,
			               strlen(r->result_type), 0);
		else
			fputs("no content type", stdout);
		fputs(": ", stdout);
		/* at most 1 KiB on a terminal; --json has all of it */
		cli_print_safe(stdout, r->result, r->result_len, 1024);
		fputc('\n', stdout);
	} else {
		printf("result .......... none stored\n");
	}
	printf("dead letters .... ");
}

typedef struct ob_out {
	int json;
	int n;
} ob_out;

static int print_ob(const inbox_admin_outbox_row *r, void *payload)
{
	ob_out *x = payload;
	if (x->json) {
		printf("%s{\"id\":%lld,\"step\":", x->n ? "," : "",
		       (long long)r->id);
		cli_json_string(stdout, r->step, strlen(r->step));
		printf(",\"state\":\"%s\",\"attempts\":%d,\"provider\":",
		       r->state, r->attempts);
		cli_json_string(stdout, r->provider,
		                r->provider ? strlen(r->provider) : 0);
		printf(",\"idempotency_key\":\"%s\",\"last_error\":",
		       r->idempotency_key);
		cli_json_string(stdout, r->last_error,
		                r->last_error ? strlen(r->last_error) : 0);
		fputc('}', stdout);
	} else {
		printf("%s%lld ", x->n ? ", " : "", (long long)r->id);
		cli_print_safe(stdout, r->step, strlen(r->step), 40);
		printf(" %s (%d attempt%s)", r->state, r->attempts,
		       r->attempts == 1 ? "" : "s");
	}
	x->n++;
	return 0;
}

/* A dead letter without a key, found by message id or position. */
typedef struct keyless {
	const char *message_id, *position;
	dl_ids out;
} keyless;

static int print_keyless(const inbox_admin_dead_letter *dl, void *payload)
{
	keyless *k = payload;
	if (dl->key)
		return 0;
	if ((k->message_id &&
	     (!dl->message_id || strcmp(dl->message_id, k->message_id))) ||
	    (k->position &&
	     (!dl->position || strcmp(dl->position, k->position))))
		return 0;
	return print_dl(dl, &k->out);
}

/* The record of `key` (NULL: dead letters without a key, matched by
 * message_id or position), its dead letters and outbox rows. 0, 1 when
 * there is nothing for it, or a negative inbox_err. */
static int show_key(inbox_store *st, const cli_consumer *c, const char *key,
                    const char *message_id, const char *position, int json)
{
	inbox_admin_record *r = NULL;
	int err = key ? inbox_admin_inspect(st, c->name, key, &r)
	              : INBOX_ERR_NOTFOUND;
	int norecord = err == INBOX_ERR_NOTFOUND;
	dl_ids x = {json, 0};
	inbox_admin_dlq_filter f = INBOX_ADMIN_DLQ_FILTER_INIT;
	f.consumer = c->name;
	f.key = key;
	f.limit = 20;
	if (norecord && key) {
		/* A message dead-lettered before any record was written (a
		 * schema violation, a bad key field...) has dead letters but
		 * no record: show them. Nothing at all is "not found". */
		int found = 0;
		err = inbox_admin_dlq_list(st, &f, count_dl, &found);
		if (err == INBOX_OK && !found) {
			inbox_admin_outbox_filter of =
			    INBOX_ADMIN_OUTBOX_FILTER_INIT;
			of.consumer = c->name;
			of.key = key;
			of.limit = 1;
			err =
			    inbox_admin_outbox_list(st, &of, count_ob, &found);
		}
		if (err == INBOX_OK && !found)
			return 1;
	} else if (norecord) {
		err = INBOX_OK;
	}
	if (err != INBOX_OK) {
		inbox_admin_record_free(r);
		return err;
	}
	if (norecord && json) {
		printf("{\"consumer\":");
		cli_json_string(stdout, c->name, strlen(c->name));
		printf(",\"key\":");
		cli_json_string(stdout, key, key ? strlen(key) : 0);
		printf(",\"status\":null,\"dead_letters\":[");
	} else if (norecord) {
		fputs("consumer ........ ", stdout);
		cli_print_safe(stdout, c->name, strlen(c->name), 0);
		fputs("\nkey ............. ", stdout);
		if (key)
			cli_print_safe(stdout, key, strlen(key), 0);
		else
			fputs("none (no key could be derived)", stdout);
		fputc('\n', stdout);
		printf("status .......... no inbox record (%s)\n",
		       key ? "dead-lettered before one was written"
		           : "dead-lettered without a key");
		printf("dead letters .... ");
	} else if (json) {
		print_json(r);
	} else {
		print_text(r);
	}
	if (key) {
		err = inbox_admin_dlq_list(st, &f, print_dl, &x);
	} else {
		keyless k = {message_id, message_id ? NULL : position, x};
		inbox_admin_dlq_filter all = INBOX_ADMIN_DLQ_FILTER_INIT;
		all.consumer = c->name;
		err = inbox_admin_dlq_list(st, &all, print_keyless, &k);
		x = k.out;
	}
	ob_out o = {json, 0};
	if (json)
		printf("],\"outbox\":[");
	else
		printf("%s\noutbox .......... ", x.n ? "" : "none");
	if (err == INBOX_OK && key) {
		inbox_admin_outbox_filter of = INBOX_ADMIN_OUTBOX_FILTER_INIT;
		of.consumer = c->name;
		of.key = key;
		err = inbox_admin_outbox_list(st, &of, print_ob, &o);
		/* A store without the outbox table shows none. */
		if (err == INBOX_ERR_STORE && !o.n)
			err = INBOX_OK;
	}
	if (json)
		printf("]}\n");
	else
		printf("%s\n", o.n ? "" : "none");
	inbox_admin_record_free(r);
	return err;
}

typedef struct by_ctx {
	inbox_store *st;
	const cli_consumer *c;
	const char *message_id, *position;
	int json, err, shown;
} by_ctx;

static int show_found(const char *key, void *payload)
{
	by_ctx *b = payload;
	if (b->shown++ && !b->json)
		fputc('\n', stdout);
	int rc =
	    show_key(b->st, b->c, key, b->message_id, b->position, b->json);
	if (rc < 0) {
		b->err = rc;
		return 1;
	}
	return 0;
}

static int inspect(const cli_config *cfg, const cli_consumer *c,
                   const char *key, const char *message_id,
                   const char *position, int json)
{
	inbox_store *st = NULL;
	int rc = cli_open_store(cfg, c, 0, &st);
	if (rc)
		return rc;
	int err, nothing = 0;
	if (key) {
		err = show_key(st, c, key, NULL, NULL, json);
		nothing = err == 1;
		if (err == 1)
			err = INBOX_OK;
	} else {
		by_ctx b = {st, c, message_id, position, json, 0, 0};
		int found = 0;
		err = inbox_admin_find_keys(st, c->name, message_id, position,
		                            show_found, &b, &found);
		if (err == INBOX_OK)
			err = b.err;
		nothing = err == INBOX_OK && !found;
	}
	if (nothing) {
		const char *what = key          ? key
		                   : message_id ? message_id
		                                : position;
		fprintf(stderr,
		        "inbox: no inbox record, dead letter nor outbox "
		        "row for %s \"",
		        key          ? "key"
		        : message_id ? "message id"
		                     : "position");
		cli_print_safe(stderr, what, strlen(what), 0);
		fprintf(stderr, "\" of consumer \"%s\"\n", c->name);
		inbox_store_close(st);
		return CLI_EXIT_RUNTIME;
	}
	if (err < 0) {
		char red[512], msg[1024];
		snprintf(msg, sizeof(msg), "%s", inbox_store_errmsg(st));
		cli_scrub(msg, sizeof(msg), cli_consumer_store(cfg, c));
		cli_error(
		    "consumer \"%s\": reading %s failed: %s", c->name,
		    cli_redact(cli_consumer_store(cfg, c), red, sizeof(red)),
		    msg);
		rc = CLI_EXIT_CONNECT;
	}
	inbox_store_close(st);
	return rc;
}

int cli_cmd_inspect(int argc, char **argv)
{
	const char *args[3] = {NULL, NULL, NULL};
	const char *message_id = NULL, *position = NULL;
	int nargs = 0, json = 0, opts = 1;
	for (int i = 1; i < argc; i++) {
		if (opts && !strcmp(argv[i], "--")) {
			opts = 0; /* a key may start with '-' */
		} else if (opts && !strcmp(argv[i], "--json")) {
			json = 1;
		} else if (opts && !strcmp(argv[i], "--message-id") &&
		           i + 1 < argc) {
			message_id = argv[++i];
		} else if (opts && !strcmp(argv[i], "--position") &&
		           i + 1 < argc) {
			position = argv[++i];
		} else if ((opts && argv[i][0] == '-' && argv[i][1]) ||
		           nargs == 3) {
			cli_error("inspect: unexpected argument \"%s\"",
			          argv[i]);
			fputs(cli_inspect_usage, stderr);
			return CLI_EXIT_USAGE;
		} else {
			args[nargs++] = argv[i];
		}
	}
	int by = (message_id != NULL) + (position != NULL);
	if (by > 1 || nargs != (by ? 2 : 3)) {
		if (by > 1 || (by && nargs == 3))
			cli_error("inspect: give one of KEY, --message-id or "
			          "--position");
		fputs(cli_inspect_usage, stderr);
		return CLI_EXIT_USAGE;
	}
	cli_config cfg;
	const cli_consumer *c;
	int rc = cli_load_selected(&cfg, args[0], args[1], &c);
	if (rc)
		return rc;
	/* as the records keep it (docs/cli.md): the keyless dead letters
	 * are matched with it here */
	inbox__buf pb = INBOX__BUF_INIT;
	const char *pos = inbox__position_text(position, &pb);
	if (position && !pos) {
		cli_error("inspect: out of memory");
		rc = CLI_EXIT_RUNTIME;
	} else {
		rc = inspect(&cfg, c, args[2], message_id, pos, json);
	}
	inbox__buf_free(&pb);
	cli_config_free(&cfg);
	return rc;
}
