/* Table names: the store's schema and prefix, quoted. */
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
