/* The consumer's stored retention window (vtable version 7): the one read
 * of the consumers table the core needs, kept here with the table. */
#include <stdlib.h>

#include "core/internal.h"
#include "store/sqlite/sqlite_store.h"

static int first_int(int ncols, const char *const *vals, void *payload)
{
	if (ncols > 0 && vals[0])
		*(int64_t *)payload = strtoll(vals[0], NULL, 10);
	return 0;
}

int inbox__sq_stored_retention(inbox_store *st, const char *consumer,
                               int64_t *seconds)
{
	inbox__buf b = INBOX__BUF_INIT;
	*seconds = 0;
	int ok = inbox__buf_puts(&b, consumer ? "SELECT retention_seconds FROM "
	                                      : "SELECT max(retention_seconds) "
	                                        "FROM ") == 0 &&
	         inbox__table_name(&b, st, "consumers") == 0 &&
	         (!consumer || inbox__buf_puts(&b, " WHERE name = $1") == 0);
	const char *p[1] = {consumer};
	int rc = ok ? inbox__sq_query(st, b.data, consumer ? 1 : 0, p,
	                              first_int, seconds)
	            : INBOX_ERR_NOMEM;
	inbox__buf_free(&b);
	return rc;
}
