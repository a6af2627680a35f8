/* The stores compiled into the library, registered at first use: a new
 * backend adds its folder under src/store/ and one line here. */
#include <inbox/sys/store.h>

#include "core/internal.h"

extern const inbox_store_vtable inbox__pg_vtable;
extern const inbox_store_vtable inbox__sqlite_vtable;

const inbox_store_vtable *const inbox__builtin_stores[] = {
    &inbox__pg_vtable,
    &inbox__sqlite_vtable,
    NULL,
};
