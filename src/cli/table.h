/*
 * The text tables of the listing commands (dlq list, outbox list): rows
 * are kept until the end, so every column is as wide as its widest cell
 * (display width: UTF-8 characters, the cells being printable text).
 */
#ifndef INBOX_CLI_TABLE_H
#define INBOX_CLI_TABLE_H

#include <stddef.h>

#define CLI_TABLE_MAX_COLS 16

typedef struct cli_table {
	size_t ncols;
	char **cells; /* ncols per row, the header first */
	size_t n, cap;
	int nomem; /* a cell was not kept: the table is incomplete */
} cli_table;

/* An empty table of ncols columns (at most CLI_TABLE_MAX_COLS). */
void cli_table_init(cli_table *t, size_t ncols);
/* Keep text (malloc'ed; NULL: out of memory, nomem set) as the next cell. */
void cli_table_add(cli_table *t, char *text);
/* A cell of message-borne text, made printable and cut at max (0: never);
 * "-" for NULL. NULL when out of memory. */
char *cli_cell_text(const char *s, size_t max);
/* A cell of a number. */
char *cli_cell_num(long long v);
/* Print the table on stdout, two spaces between columns. */
void cli_table_print(const cli_table *t);
void cli_table_free(cli_table *t);

#endif
