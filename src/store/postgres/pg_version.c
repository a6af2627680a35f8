/* The client library this backend is linked with, as it reports its
 * version at run time (the vtable's client_version: inbox --version). */
#include <stdio.h>

#include "store/postgres/pg_store.h"

int inbox__pg_client_version(char *out, size_t len)
{
	/* PQlibVersion(): major * 10000 + minor from PostgreSQL 10 on */
	int v = PQlibVersion();
	return snprintf(out, len, "libpq %d.%d", v / 10000, v % 10000);
}
