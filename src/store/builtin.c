/* The stores compiled into the library, registered at first use: a new
 * backend adds its folder under src/store/ and one line here (its
 * INBOX_WITH_* option, when it has one, is defined by the build). */
#include <inbox/sys/store.h>

#include "core/internal.h"

extern const inbox_store_vtable inbox__pg_vtable;
extern const inbox_store_vtable inbox__sqlite_vtable;

const inbox_store_vtable *const inbox__builtin_stores[] = {
#ifdef INBOX_WITH_POSTGRES
    &inbox__pg_vtable,
#endif
    &inbox__sqlite_vtable,
    NULL,
};
