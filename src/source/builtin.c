/* The sources compiled into the library, registered at first use. */
#include <inbox/sys/source.h>

#include "core/internal.h"

extern const inbox_source_vtable inbox__jsonl_source;
extern const inbox_source_vtable inbox__kafka_source;
extern const inbox_source_vtable inbox__nats_source;
extern const inbox_source_vtable inbox__redis_source;
extern const inbox_source_vtable inbox__amqp_source;
extern const inbox_source_vtable inbox__amqps_source;
extern const inbox_source_vtable inbox__rediss_source;
extern const inbox_source_vtable inbox__http_source;
extern const inbox_source_vtable inbox__https_source;

const inbox_source_vtable *const inbox__builtin_sources[] = {
    &inbox__jsonl_source,  &inbox__kafka_source,
    &inbox__nats_source,   &inbox__redis_source,
    &inbox__rediss_source, &inbox__amqp_source,
    &inbox__amqps_source,  &inbox__http_source,
    &inbox__https_source,  NULL,
};
