/*
 * libinbox — which version this is.
 *
 * The macros say which headers a program was compiled against; the
 * functions say which library it runs with (the shared library may have
 * been upgraded since), as SQLite's SQLITE_VERSION_NUMBER and
 * sqlite3_libversion_number() do. The ABI rules (what a version number
 * promises, the SONAME) are in docs/abi.md.
 *
 * The build reads the version from INBOX_VERSION below (CMakeLists.txt):
 * it is the only place it is written.
 *
 * Included by <inbox/inbox.h>.
 */
#ifndef INBOX_VERSION_H
#define INBOX_VERSION_H

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INBOX_VERSION_MAJOR 0
#define INBOX_VERSION_MINOR 1
#define INBOX_VERSION_PATCH 0
#define INBOX_VERSION       "0.1.0"
/* MAJOR * 1000000 + MINOR * 1000 + PATCH: 1002003 is 1.2.3. */
#define INBOX_VERSION_NUMBER                                                   \
	(INBOX_VERSION_MAJOR * 1000000 + INBOX_VERSION_MINOR * 1000 +          \
	 INBOX_VERSION_PATCH)

/* The running library's INBOX_VERSION_NUMBER. A program built against
 * headers of another minor version than the library it loads can check
 * it: inbox_version() / 1000 == INBOX_VERSION_NUMBER / 1000. Thread-safe;
 * callable before anything else. */
INBOX_API int inbox_version(void);

/* The running library's INBOX_VERSION ("0.1.0"). Static; never NULL.
 * Thread-safe. */
INBOX_API const char *inbox_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* INBOX_VERSION_H */
