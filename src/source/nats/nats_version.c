/* The client library this backend is linked with, as it reports its
 * version at run time (the vtable's client_version: inbox --version). */
#include <stdio.h>

#include "source/nats/nats_source.h"

int inbox__nats_client_version(char *out, size_t len)
{
	return snprintf(out, len, "cnats %s", nats_GetVersion());
}
