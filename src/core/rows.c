/* inbox_row_column_name(): the names of the columns of the query whose
 * row callback runs on this thread, set by the backends around their row
 * loops (inbox__row_names_push/_pop, internal.h). */
#include "core/internal.h"

static _Thread_local inbox__row_names *current;

void inbox__row_names_push(inbox__row_names *n)
{
	n->prev = current;
	current = n;
}

void inbox__row_names_pop(inbox__row_names *n)
{
	if (current == n)
		current = n->prev;
}

const char *inbox_row_column_name(int col)
{
	const inbox__row_names *n = current;
	if (!n || col < 0 || col >= n->ncols)
		return NULL;
	return n->name(n->ctx, col);
}
