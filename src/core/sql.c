/* Table names: the store's schema and prefix, quoted (for the backends
 * and the admin API's templates); and the consumer's stored window, asked
 * of the store. */
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

/* The consumer's stored window comes from its store (vtable version 7);
 * a backend of an older version keeps none the core can read. */
int inbox__stored_retention(inbox_store *st, const char *consumer,
                            int64_t *seconds)
{
	*seconds = 0;
	if (st->vt->version < 7)
		return INBOX_OK;
	return st->vt->stored_retention(st, consumer, seconds);
}
