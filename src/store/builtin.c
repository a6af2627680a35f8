/* The stores compiled into the library, registered at first use: a new
 * backend adds its folder under src/store/ and one line here. */
#include <inbox/sys/store.h>

#include "core/internal.h"

/* One line per store: its vtable. */
#define INBOX__STORES(X)                                                       \
	X(inbox__pg_vtable)                                                    \
	X(inbox__sqlite_vtable)

#define INBOX__DECLARE(vt) extern const inbox_store_vtable vt;
#define INBOX__ENTRY(vt)   &vt,
INBOX__STORES(INBOX__DECLARE)

const inbox_store_vtable *const inbox__builtin_stores[] = {
    INBOX__STORES(INBOX__ENTRY) NULL};
