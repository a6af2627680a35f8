/*
 * The running library's version (include/inbox/version.h): compiled in
 * from the same header the program was built with, or another one when
 * the shared library was replaced since.
 */
#include <inbox/inbox.h>

int inbox_version(void)
{
	return INBOX_VERSION_NUMBER;
}

const char *inbox_version_string(void)
{
	return INBOX_VERSION;
}
