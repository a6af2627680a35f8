/* The sources compiled into the library, registered at first use: a new
 * backend adds its folder under src/source/ and one line here (its
 * INBOX_WITH_* option, when it has one, is defined by the build). */
#include <inbox/sys/source.h>

#include "core/internal.h"

extern const inbox_source_vtable inbox__jsonl_source;
extern const inbox_source_vtable inbox__http_source;
extern const inbox_source_vtable inbox__kafka_source;
extern const inbox_source_vtable inbox__nats_source;
extern const inbox_source_vtable inbox__redis_source;
extern const inbox_source_vtable inbox__amqp_source;

const inbox_source_vtable *const inbox__builtin_sources[] = {
    &inbox__jsonl_source,
    &inbox__http_source,
#ifdef INBOX_WITH_KAFKA
    &inbox__kafka_source,
#endif
#ifdef INBOX_WITH_NATS
    &inbox__nats_source,
#endif
#ifdef INBOX_WITH_REDIS
    &inbox__redis_source,
#endif
#ifdef INBOX_WITH_AMQP
    &inbox__amqp_source,
#endif
    NULL,
};
