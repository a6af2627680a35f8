/* The listing commands' text tables (cli/table.h). */
#include "cli/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/progress.h"

void cli_table_init(cli_table *t, size_t ncols)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols < 1                    ? 1
	           : ncols > CLI_TABLE_MAX_COLS ? CLI_TABLE_MAX_COLS
	                                        : ncols;
}

static size_t display_width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		w += ((unsigned char)*s & 0xC0) != 0x80;
	return w;
}

void cli_table_add(cli_table *t, char *text)
{
	if (!text || t->nomem) {
		free(text);
		t->nomem = 1;
		return;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16 * t->ncols;
		char **c = realloc(t->cells, cap * sizeof(*c));
		if (!c) {
			free(text);
			t->nomem = 1;
			return;
		}
		t->cells = c;
		t->cap = cap;
	}
	t->cells[t->n++] = text;
}

char *cli_cell_text(const char *s, size_t max)
{
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);
	if (!f)
		return NULL;
	if (s)
		cli_print_safe(f, s, strlen(s), max);
	else
		fputs("-", f);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

char *cli_cell_num(long long v)
{
	char b[32];
	snprintf(b, sizeof(b), "%lld", v);
	return strdup(b);
}

void cli_table_print(const cli_table *t)
{
	size_t w[CLI_TABLE_MAX_COLS] = {0};
	for (size_t i = 0; i < t->n; i++) {
		size_t dw = display_width(t->cells[i]);
		if (dw > w[i % t->ncols])
			w[i % t->ncols] = dw;
	}
	for (size_t i = 0; i < t->n; i++) {
		size_t col = i % t->ncols;
		fputs(t->cells[i], stdout);
		if (col == t->ncols - 1) {
			fputc('\n', stdout);
			continue;
		}
		for (size_t k = display_width(t->cells[i]); k < w[col] + 2; k++)
			fputc(' ', stdout);
	}
}

void cli_table_free(cli_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}
