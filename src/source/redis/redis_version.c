/* The client library this backend is linked with, as it reports its
 * version at run time (the vtable's client_version: inbox --version). */
#include <stdio.h>

#include "source/redis/redis.h"

int inbox__redis_client_version(char *out, size_t len)
{
	/* hiredis has no run-time call: its headers' version */
	return snprintf(out, len, "hiredis %d.%d.%d (headers)", HIREDIS_MAJOR,
	                HIREDIS_MINOR, HIREDIS_PATCH);
}
