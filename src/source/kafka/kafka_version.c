/* The client library this backend is linked with, as it reports its
 * version at run time (the vtable's client_version: inbox --version). */
#include <stdio.h>

#include "source/kafka/kafka.h"

int inbox__kafka_client_version(char *out, size_t len)
{
	return snprintf(out, len, "librdkafka %s", rd_kafka_version_str());
}
