/* The versioned structs of the public API: their versions and sizes
 * (abi.h, docs/abi.md). */
#include "core/abi.h"

#include <stdio.h>
#include <string.h>

#include <inbox/admin.h>
#include <inbox/metrics.h>
#include <inbox/outbox.h>
#include <inbox/source.h>
#include <inbox/sys/store.h>

#include "base/log.h"
#include "core/internal.h"

/* The end of a field: the size of a version whose last field it is. */
#define END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

#define MAXV 6

static const struct {
	const char *name, *init;
	unsigned max;
	size_t size[MAXV + 1]; /* size[v]: version v's size; [0] unused */
} vs[INBOX__V_COUNT] = {
    [INBOX__V_RESULT] = {"inbox_result",
                         "INBOX_RESULT_INIT",
                         INBOX_RESULT_VERSION,
                         {0, END(inbox_result, dead_letter_id),
                          sizeof(inbox_result)}},
    [INBOX__V_STATS] = {"inbox_stats",
                        "INBOX_STATS_INIT",
                        INBOX_STATS_VERSION,
                        {0, END(inbox_stats, processing_buckets),
                         sizeof(inbox_stats)}},
    [INBOX__V_ADMIN_STATS] = {"inbox_admin_stats",
                              "INBOX_ADMIN_STATS_INIT",
                              INBOX_ADMIN_STATS_VERSION,
                              {0, sizeof(inbox_admin_stats)}},
    [INBOX__V_ADMIN_GENERATIONS] = {"inbox_admin_generations",
                                    "INBOX_ADMIN_GENERATIONS_INIT",
                                    INBOX_ADMIN_GENERATIONS_VERSION,
                                    {0, sizeof(inbox_admin_generations)}},
    [INBOX__V_OUTBOX_STATS] = {"inbox_outbox_stats",
                               "INBOX_OUTBOX_STATS_INIT",
                               INBOX_OUTBOX_STATS_VERSION,
                               {0, sizeof(inbox_outbox_stats)}},
    [INBOX__V_OUTBOX_COUNTS] = {"inbox_outbox_counts",
                                "INBOX_OUTBOX_COUNTS_INIT",
                                INBOX_OUTBOX_COUNTS_VERSION,
                                {0, sizeof(inbox_outbox_counts)}},
    [INBOX__V_METRICS_CONSUMER] = {"inbox_metrics_consumer",
                                   "INBOX_METRICS_CONSUMER_INIT",
                                   INBOX_METRICS_CONSUMER_VERSION,
                                   {0, END(inbox_metrics_consumer, generations),
                                    sizeof(inbox_metrics_consumer)}},
    [INBOX__V_PROVIDER_INFO] = {"inbox_provider_info",
                                "INBOX_PROVIDER_INFO_VERSION",
                                INBOX_PROVIDER_INFO_VERSION,
                                {0, END(inbox_provider_info, retry_after),
                                 sizeof(inbox_provider_info)}},
    [INBOX__V_STORE_OPTIONS] = {"inbox_store_options",
                                "INBOX_STORE_OPTIONS_INIT",
                                INBOX_STORE_OPTIONS_VERSION,
                                {0, END(inbox_store_options, busy_timeout_ms),
                                 sizeof(inbox_store_options)}},
    [INBOX__V_CONSUMER_OPTIONS] =
        {"inbox_consumer_options",
         "INBOX_CONSUMER_OPTIONS_INIT",
         INBOX_CONSUMER_OPTIONS_VERSION,
         {0, END(inbox_consumer_options, handler_payload),
          END(inbox_consumer_options, json_schema),
          END(inbox_consumer_options, batch_timeout_ms),
          END(inbox_consumer_options, max_deliveries),
          END(inbox_consumer_options, max_result_bytes),
          sizeof(inbox_consumer_options)}},
    [INBOX__V_SOURCE_OPTIONS] = {"inbox_source_options",
                                 "INBOX_SOURCE_OPTIONS_INIT",
                                 INBOX_SOURCE_OPTIONS_VERSION,
                                 {0, sizeof(inbox_source_options)}},
    [INBOX__V_RUNNER_OPTIONS] = {"inbox_runner_options",
                                 "INBOX_RUNNER_OPTIONS_INIT",
                                 INBOX_RUNNER_OPTIONS_VERSION,
                                 {0, sizeof(inbox_runner_options)}},
    [INBOX__V_OUTBOX_EFFECT] = {"inbox_outbox_effect",
                                "INBOX_OUTBOX_EFFECT_INIT",
                                INBOX_OUTBOX_EFFECT_VERSION,
                                {0, sizeof(inbox_outbox_effect)}},
    [INBOX__V_PROVIDER_OPTIONS] = {"inbox_provider_options",
                                   "INBOX_PROVIDER_OPTIONS_INIT",
                                   INBOX_PROVIDER_OPTIONS_VERSION,
                                   {0, sizeof(inbox_provider_options)}},
    [INBOX__V_DISPATCHER_OPTIONS] = {"inbox_dispatcher_options",
                                     "INBOX_DISPATCHER_OPTIONS_INIT",
                                     INBOX_DISPATCHER_OPTIONS_VERSION,
                                     {0,
                                      END(inbox_dispatcher_options,
                                          event_payload),
                                      sizeof(inbox_dispatcher_options)}},
    [INBOX__V_DLQ_FILTER] = {"inbox_admin_dlq_filter",
                             "INBOX_ADMIN_DLQ_FILTER_INIT",
                             INBOX_ADMIN_DLQ_FILTER_VERSION,
                             {0, END(inbox_admin_dlq_filter, pending_only),
                              END(inbox_admin_dlq_filter, messages_only),
                              sizeof(inbox_admin_dlq_filter)}},
    [INBOX__V_OUTBOX_FILTER] = {"inbox_admin_outbox_filter",
                                "INBOX_ADMIN_OUTBOX_FILTER_INIT",
                                INBOX_ADMIN_OUTBOX_FILTER_VERSION,
                                {0, sizeof(inbox_admin_outbox_filter)}},
    [INBOX__V_DELIVERY] = {"inbox_delivery",
                           "INBOX_DELIVERY_INIT",
                           INBOX_DELIVERY_VERSION,
                           {0, sizeof(inbox_delivery)}},
};

/* A new version of a struct needs its size above. */
_Static_assert(INBOX_CONSUMER_OPTIONS_VERSION <= MAXV &&
                   INBOX_RESULT_VERSION <= MAXV &&
                   INBOX_STORE_OPTIONS_VERSION <= MAXV &&
                   INBOX_DISPATCHER_OPTIONS_VERSION <= MAXV &&
                   INBOX_ADMIN_DLQ_FILTER_VERSION <= MAXV &&
                   INBOX_METRICS_CONSUMER_VERSION <= MAXV &&
                   INBOX_PROVIDER_INFO_VERSION <= MAXV,
               "a struct version without its size in core/abi.c");

size_t inbox__vsize(inbox__vstruct k, unsigned v)
{
	if ((unsigned)k >= INBOX__V_COUNT || v == 0 || v > vs[k].max)
		return 0;
	return vs[k].size[v];
}

const char *inbox__vname(inbox__vstruct k)
{
	return (unsigned)k < INBOX__V_COUNT ? vs[k].name : "struct";
}

unsigned inbox__vmax(inbox__vstruct k)
{
	return (unsigned)k < INBOX__V_COUNT ? vs[k].max : 0;
}

int inbox__vcheck(inbox__vstruct k, unsigned v, char *err, size_t errlen)
{
	if (inbox__vsize(k, v))
		return INBOX_OK;
	char why[300];
	if (v == 0)
		snprintf(why, sizeof(why), "%s.version is 0: set it with %s",
		         inbox__vname(k), vs[k].init);
	else
		snprintf(why, sizeof(why),
		         "%s.version is %u, newer than this library knows "
		         "(%u): built against newer headers than libinbox %s",
		         inbox__vname(k), v, inbox__vmax(k),
		         inbox_version_string());
	if (err && errlen)
		snprintf(err, errlen, "%s", why);
	inbox__log(INBOX_LOG_ERROR, NULL,
	           "\"event\":\"bad_version\",\"struct\":\"%s\","
	           "\"version\":%u,\"max\":%u,\"error\":\"%s\"",
	           inbox__vname(k), v, inbox__vmax(k), inbox__log_escape(why));
	return INBOX_ERR_INVALID;
}

int inbox__vcheck_store(inbox_store *st, inbox__vstruct k, unsigned v)
{
	char why[300];
	int rc = inbox__vcheck(k, v, why, sizeof(why));
	if (rc < 0 && st)
		inbox_store_seterr(st, "", "%s", why);
	return rc;
}

int inbox__vbegin(inbox__vstruct k, void *out, char *err, size_t errlen)
{
	unsigned v = INBOX__VERSION_OF(out);
	int rc = inbox__vcheck(k, v, err, errlen);
	if (rc < 0)
		return rc;
	memset(out, 0, inbox__vsize(k, v));
	*(unsigned *)out = v;
	return INBOX_OK;
}

int inbox__vbegin_store(inbox_store *st, inbox__vstruct k, void *out)
{
	char why[300];
	int rc = inbox__vbegin(k, out, why, sizeof(why));
	if (rc < 0 && st)
		inbox_store_seterr(st, "", "%s", why);
	return rc;
}

void inbox__vfill(inbox__vstruct k, void *out, const void *full)
{
	unsigned v = INBOX__VERSION_OF(out);
	size_t n = inbox__vsize(k, v);
	if (n > sizeof(unsigned))
		memcpy((char *)out + sizeof(unsigned),
		       (const char *)full + sizeof(unsigned),
		       n - sizeof(unsigned));
}
