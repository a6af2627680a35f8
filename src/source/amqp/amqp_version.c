/* The client library this backend is linked with, as it reports its
 * version at run time (the vtable's client_version: inbox --version). */
#include <stdio.h>

#include "source/amqp/amqp_source.h"

int inbox__amqp_client_version(char *out, size_t len)
{
	return snprintf(out, len, "librabbitmq %s", amqp_version());
}
