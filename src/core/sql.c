/* Table names: the store's schema and prefix, quoted; and the one read
 * of a store table the core makes itself (the consumer's stored window). */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "core/internal.h"

int inbox__table_name(inbox__buf *out, const inbox_store *st, const char *name)
{
	if (st->schema[0]) {
		if (inbox__quote_ident(out, st->schema) < 0 ||
		    inbox__buf_putc(out, '.') < 0)
			return -1;
	}
	char full[128];
	size_t pl = strlen(st->prefix), nl = strlen(name);
	if (pl + nl + 1 > sizeof(full))
		return -1;
	memcpy(full, st->prefix, pl);
	memcpy(full + pl, name, nl + 1);
	return inbox__quote_ident(out, full);
}

static int first_int(int ncols, const char *const *vals, void *payload)
{
	if (ncols > 0 && vals[0])
		*(int64_t *)payload = strtoll(vals[0], NULL, 10);
	return 0;
}

int inbox__stored_retention(inbox_store *st, const char *consumer,
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
	int rc = ok ? st->vt->query(st, b.data, consumer ? 1 : 0, p, first_int,
	                            seconds)
	            : INBOX_ERR_NOMEM;
	inbox__buf_free(&b);
	return rc;
}
