/* The client library this backend is linked with, as it reports its
 * version at run time (the vtable's client_version: inbox --version). */
#include <stdio.h>

#include "store/sqlite/sqlite_store.h"

int inbox__sq_client_version(char *out, size_t len)
{
	return snprintf(out, len, "sqlite %s", sqlite3_libversion());
}
