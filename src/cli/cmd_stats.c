/*
 * inbox stats CONFIG: what the database says about each consumer — inbox
 * records by status, dead letters (and how many are conflicts), the age of
 * the oldest record. Read-only; the numbers survive restarts, unlike the
 * daemon's in-memory counters.
 */
#include <stdio.h>
#include <string.h>

#include <inbox/admin.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/open.h"
#include "cli/progress.h"

const char cli_stats_usage[] =
    "usage: inbox stats CONFIG [--consumer NAME] [--json]\n"
    "\n"
    "Per consumer, from its store: inbox records by status (completed, "
    "dead,\nfailed, processing), dead letters (pending, fingerprint "
    "conflicts, replayed),\nthe age of the oldest processed record against "
    "the retention window the\nconsumer registered (headroom; negative when "
    "a purge is due), the records a\npurge would delete, and the outbox "
    "intents not yet performed. --json prints\none JSON object per line "
    "(ages in seconds, null when there is none).\n"
    "Exit codes: 0 ok, 2 usage, 3 config error, 4 cannot open the store "
    "(or\nits tables do not exist yet: run inbox migrate).\n";

static void age_text(int64_t s, char *buf, size_t len)
{
	if (s < 0)
		snprintf(buf, len, "none");
	else if (s < 120)
		snprintf(buf, len, "%llds ago", (long long)s);
	else if (s < 7200)
		snprintf(buf, len, "%lldm ago", (long long)(s / 60));
	else if (s < 172800)
		snprintf(buf, len, "%lldh ago", (long long)(s / 3600));
	else
		snprintf(buf, len, "%lldd ago", (long long)(s / 86400));
}

/* "-1" as JSON null. */
static const char *num_or_null(int64_t v, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "null");
	else
		snprintf(buf, len, "%lld", (long long)v);
	return buf;
}

/* The generations as a JSON value (null when the store keeps none). */
static void gens_json(const inbox_admin_generations *g)
{
	if (g->count <= 0) {
		printf("null");
		return;
	}
	printf("{\"count\":%lld,\"sealed\":%lld,\"unfiltered\":%lld,"
	       "\"sealed_keys\":%lld,\"filter_bytes\":%lld,\"newest\":%lld,"
	       "\"newest_records\":%lld,\"newest_age_s\":%lld}",
	       (long long)g->count, (long long)g->sealed,
	       (long long)g->unfiltered, (long long)g->sealed_keys,
	       (long long)g->filter_bytes, (long long)g->newest,
	       (long long)g->newest_records,
	       (long long)(g->newest_age_ms / 1000));
}

static void stats_json(const cli_consumer *c, const inbox_admin_stats *s,
                       const inbox_admin_generations *g)
{
	char h[24], ob[24], oa[24], oc[24], oo[24];
	int64_t head = inbox_admin_headroom_ms(s);
	if (head == INT64_MAX)
		snprintf(h, sizeof(h), "null");
	else
		snprintf(h, sizeof(h), "%lld", (long long)(head / 1000));
	printf("{\"consumer\":");
	cli_json_string(stdout, c->name, strlen(c->name));
	printf(",\"records\":%lld,\"completed\":%lld,\"dead\":%lld,"
	       "\"failed\":%lld,\"processing\":%lld,\"expired\":%lld,"
	       "\"dead_letters\":%lld,\"pending\":%lld,\"conflicts\":%lld,"
	       "\"replayed\":%lld,\"oldest_age_s\":%s,"
	       "\"oldest_created_age_s\":%s,\"retention_s\":%lld,"
	       "\"headroom_s\":%s,\"outbox_pending\":%s,"
	       "\"outbox_oldest_age_s\":%s,\"generations\":",
	       (long long)s->records, (long long)s->completed,
	       (long long)s->dead, (long long)s->failed,
	       (long long)s->processing, (long long)s->expired,
	       (long long)s->dead_letters, (long long)s->dead_letters_pending,
	       (long long)s->conflicts, (long long)s->replayed,
	       num_or_null(s->oldest_age_ms < 0 ? -1 : s->oldest_age_ms / 1000,
	                   oa, sizeof(oa)),
	       num_or_null(s->oldest_created_age_ms < 0
	                       ? -1
	                       : s->oldest_created_age_ms / 1000,
	                   oc, sizeof(oc)),
	       (long long)s->retention_seconds, h,
	       num_or_null(s->outbox_pending, ob, sizeof(ob)),
	       num_or_null(s->outbox_oldest_age_ms < 0
	                       ? -1
	                       : s->outbox_oldest_age_ms / 1000,
	                   oo, sizeof(oo)));
	gens_json(g);
	printf("}\n");
}

static void stats_text(const cli_consumer *c, const char *store,
                       const inbox_admin_stats *s,
                       const inbox_admin_generations *g)
{
	char age[32], win[24], head[24], oage[32];
	int64_t h = inbox_admin_headroom_ms(s);
	age_text(s->oldest_age_ms < 0 ? -1 : s->oldest_age_ms / 1000, age,
	         sizeof(age));
	printf("%s  (store %s)\n"
	       "  inbox records ...... %lld  (completed %lld, dead %lld, "
	       "failed %lld, processing %lld)\n"
	       "  dead letters ....... %lld  (pending %lld, fingerprint "
	       "conflicts %lld, replayed %lld)\n",
	       c->name, store, (long long)s->records, (long long)s->completed,
	       (long long)s->dead, (long long)s->failed,
	       (long long)s->processing, (long long)s->dead_letters,
	       (long long)s->dead_letters_pending, (long long)s->conflicts,
	       (long long)s->replayed);
	if (s->retention_seconds > 0) {
		cli_age_text(s->retention_seconds * 1000, win, sizeof(win));
		if (h == INT64_MAX)
			printf("  oldest record ...... %s  (retention window "
			       "%s)\n",
			       age, win);
		else
			printf(
			    "  oldest record ...... %s  (retention window %s, "
			    "headroom %s%s)\n",
			    age, win, cli_age_text(h, head, sizeof(head)),
			    h < 0 ? ": past the window, purge due" : "");
		printf("  expired records .... %lld  (older than the window; "
		       "inbox purge deletes them)\n",
		       (long long)s->expired);
	} else {
		printf("  oldest record ...... %s  (no retention window "
		       "registered: the consumer never ran here)\n",
		       age);
	}
	if (s->outbox_pending < 0)
		printf(
		    "  outbox pending ..... n/a (no outbox in this store)\n");
	else if (s->outbox_pending == 0)
		printf("  outbox pending ..... 0\n");
	else
		printf(
		    "  outbox pending ..... %lld  (oldest %s ago)\n",
		    (long long)s->outbox_pending,
		    cli_age_text(s->outbox_oldest_age_ms, oage, sizeof(oage)));
	if (g->count > 0) {
		char gage[32];
		printf("  generations ........ %lld  (sealed %lld: %lld keys, "
		       "filters %.1f MiB in each consumer%s; newest %lld: "
		       "%lld records, opened %s ago)\n",
		       (long long)g->count, (long long)g->sealed,
		       (long long)g->sealed_keys,
		       (double)g->filter_bytes / (1024.0 * 1024.0),
		       g->unfiltered > 0 ? "; some without a filter yet: "
		                           "the next purge builds them"
		                         : "",
		       (long long)g->newest, (long long)g->newest_records,
		       cli_age_text(g->newest_age_ms, gage, sizeof(gage)));
	}
}

static int stats_one(const cli_config *cfg, const cli_consumer *c, int json)
{
	inbox_store *st = NULL;
	int rc = cli_open_store(cfg, c, 0, &st);
	if (rc)
		return rc;
	inbox_admin_stats s = INBOX_ADMIN_STATS_INIT;
	int err = inbox_admin_stats_read(st, c->name, &s);
	char red[512];
	cli_redact(cli_consumer_store(cfg, c), red, sizeof(red));
	if (err < 0) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", inbox_store_errmsg(st));
		cli_scrub(msg, sizeof(msg), cli_consumer_store(cfg, c));
		cli_error("consumer \"%s\": reading %s failed: %s", c->name,
		          red, msg);
		inbox_store_close(st);
		return CLI_EXIT_CONNECT;
	}
	inbox_admin_generations g = INBOX_ADMIN_GENERATIONS_INIT;
	if (inbox_admin_generations_read(st, &g) != INBOX_OK)
		g.count = -1;
	if (json)
		stats_json(c, &s, &g);
	else
		stats_text(c, red, &s, &g);
	inbox_store_close(st);
	return 0;
}

static int stats_each(const cli_config *cfg, const cli_consumer *c,
                      void *payload)
{
	return stats_one(cfg, c, *(const int *)payload);
}

int cli_cmd_stats(int argc, char **argv)
{
	int json = 0;
	const cli_opt opts[] = {
	    {"--json", CLI_OPT_FLAG, &json, 0, 0, NULL, 0},
	    {NULL, CLI_OPT_FLAG, NULL, 0, 0, NULL, 0},
	};
	return cli_each_consumer("stats", argc, argv, opts, cli_stats_usage,
	                         stats_each, &json);
}
