/*
 * inbox inspect CONFIG CONSUMER KEY: one inbox record as the store holds
 * it — status, attempts, fingerprint, fencing token, lease, times — and
 * the dead letters written for that key. Read-only.
 */
#include <stdio.h>
#include <string.h>

#include <inbox/admin.h>

#include "cli/cli.h"
#include "cli/open.h"
#include "cli/progress.h"

const char cli_inspect_usage[] =
    "usage: inbox inspect CONFIG CONSUMER KEY [--json]\n"
    "       inbox inspect CONFIG CONSUMER -- KEY   (a key starting with -)\n"
    "\n"
    "Show the inbox record of KEY for CONSUMER: status (completed, "
    "processing,\nfailed, dead), attempts, fingerprint, fencing token, "
    "lease (and whether it\nexpired), message id, created/processed/updated "
    "times, and the dead letters\nwritten for that key. --json prints one "
    "JSON object. A key with dead letters but no record (dead-lettered "
    "before one\nwas written: a schema violation...) shows its dead "
    "letters.\n"
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
	printf(",\"created_at_ms\":%lld,\"processed_at_ms\":%lld,"
	       "\"updated_at_ms\":%lld,\"dead_letters\":[",
	       (long long)r->created_at_ms, (long long)r->processed_at_ms,
	       (long long)r->updated_at_ms);
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
	printf("\ncreated ......... %s\n",
	       cli_time_text(r->created_at_ms, t, sizeof(t)));
	printf("processed ....... %s\n",
	       cli_time_text(r->processed_at_ms, t, sizeof(t)));
	printf("updated ......... %s\n",
	       cli_time_text(r->updated_at_ms, t, sizeof(t)));
	printf("dead letters .... ");
}

static int inspect(const cli_config *cfg, const cli_consumer *c,
                   const char *key, int json)
{
	inbox_store *st = NULL;
	int rc = cli_open_store(cfg, c, 0, &st);
	if (rc)
		return rc;
	inbox_admin_record *r = NULL;
	int err = inbox_admin_inspect(st, c->name, key, &r);
	int norecord = err == INBOX_ERR_NOTFOUND;
	dl_ids x = {json, 0};
	inbox_admin_dlq_filter f = INBOX_ADMIN_DLQ_FILTER_INIT;
	f.consumer = c->name;
	f.key = key;
	f.limit = 20;
	if (norecord) {
		/* A message dead-lettered before any record was written (a
		 * schema violation, a bad key field...) has dead letters but
		 * no record: show them. Nothing at all is "not found". */
		int found = 0;
		err = inbox_admin_dlq_list(st, &f, count_dl, &found);
		if (err == INBOX_OK && !found) {
			fprintf(stderr, "inbox: no inbox record and no dead "
			                "letter for key \"");
			cli_print_safe(stderr, key, strlen(key), 0);
			fprintf(stderr, "\" of consumer \"%s\"\n", c->name);
			inbox_store_close(st);
			return CLI_EXIT_RUNTIME;
		}
	}
	if (err == INBOX_OK) {
		if (norecord && json) {
			printf("{\"consumer\":");
			cli_json_string(stdout, c->name, strlen(c->name));
			printf(",\"key\":");
			cli_json_string(stdout, key, strlen(key));
			printf(",\"status\":null,\"dead_letters\":[");
		} else if (norecord) {
			fputs("consumer ........ ", stdout);
			cli_print_safe(stdout, c->name, strlen(c->name), 0);
			fputs("\nkey ............. ", stdout);
			cli_print_safe(stdout, key, strlen(key), 0);
			fputc('\n', stdout);
			printf(
			    "status .......... no inbox record (dead-lettered "
			    "before one was written)\n");
			printf("dead letters .... ");
		} else if (json) {
			print_json(r);
		} else {
			print_text(r);
		}
		err = inbox_admin_dlq_list(st, &f, print_dl, &x);
		if (json)
			printf("]}\n");
		else
			printf("%s\n", x.n ? "" : "none");
	}
	inbox_admin_record_free(r);
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
	int nargs = 0, json = 0, opts = 1;
	for (int i = 1; i < argc; i++) {
		if (opts && !strcmp(argv[i], "--")) {
			opts = 0; /* a key may start with '-' */
		} else if (opts && !strcmp(argv[i], "--json")) {
			json = 1;
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
	if (nargs != 3) {
		fputs(cli_inspect_usage, stderr);
		return CLI_EXIT_USAGE;
	}
	cli_config cfg;
	const cli_consumer *c;
	int rc = cli_load_selected(&cfg, args[0], args[1], &c);
	if (rc)
		return rc;
	rc = inspect(&cfg, c, args[2], json);
	cli_config_free(&cfg);
	return rc;
}
