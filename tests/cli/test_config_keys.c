/*
 * docs/config.md and the config reader's key tables (src/cli/config/)
 * agree: every key the reader accepts is documented in the table of its
 * section, and no table of docs/config.md names a key the reader lacks.
 * The tables are marked "<!-- keys: ID [ID...] -->" (a cfg_section's id);
 * their rows start "| `key` |".
 *   test_config_keys DOCS/config.md
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/config/reader.h"
#include "test.h"

static const char *docs_path;

#define MAX_TABLES 32
#define MAX_ROWS   64

typedef struct doc_table {
	char ids[128];
	int line;
	int nrows;
	char rows[MAX_ROWS][64];
} doc_table;

static doc_table tables[MAX_TABLES];
static int ntables;

static int read_docs(void)
{
	FILE *f = fopen(docs_path, "r");
	if (!f)
		return -1;
	char line[4096];
	doc_table *t = NULL;
	int in_rows = 0, n = 0;
	while (fgets(line, sizeof(line), f)) {
		n++;
		const char *m = strstr(line, "<!-- keys:");
		if (m && ntables < MAX_TABLES) {
			t = &tables[ntables++];
			memset(t, 0, sizeof(*t));
			t->line = n;
			m += strlen("<!-- keys:");
			size_t len = strcspn(m, "-");
			snprintf(t->ids, sizeof(t->ids), " %.*s ", (int)len, m);
			in_rows = 0;
			continue;
		}
		if (!t)
			continue;
		if (line[0] != '|') {
			if (in_rows)
				t = NULL; /* the table ended */
			continue;
		}
		in_rows = 1;
		if (strncmp(line, "| `", 3) != 0)
			continue; /* header, separator */
		const char *k = line + 3;
		size_t len = strcspn(k, "`");
		if (t->nrows < MAX_ROWS && len < sizeof(t->rows[0]))
			snprintf(t->rows[t->nrows++], sizeof(t->rows[0]),
			         "%.*s", (int)len, k);
	}
	fclose(f);
	return 0;
}

static int marked(const doc_table *t, const char *id)
{
	char word[64];
	snprintf(word, sizeof(word), " %s ", id);
	return strstr(t->ids, word) != NULL;
}

static int has_key(const cfg_section *s, const char *name)
{
	for (size_t i = 0; i < s->nkeys; i++)
		if (!strcmp(s->keys[i].name, name))
			return 1;
	return 0;
}

TEST(docs_are_read)
{
	ASSERT_EQ(read_docs(), 0);
	ASSERT_TRUE(ntables > 0);
}

/* Every section has a table, and every key of it a row there. */
TEST(every_key_is_documented)
{
	for (const cfg_section *const *s = cfg_sections(); *s; s++) {
		const doc_table *t = NULL;
		for (int i = 0; i < ntables && !t; i++)
			if (marked(&tables[i], (*s)->id))
				t = &tables[i];
		if (!t) {
			TEST_FAIL_("section %s (%s): no \"<!-- keys: %s -->\" "
			           "table in %s",
			           (*s)->id, (*s)->name, (*s)->id, docs_path);
			continue;
		}
		for (size_t k = 0; k < (*s)->nkeys; k++) {
			int found = 0;
			for (int r = 0; r < t->nrows; r++)
				found |=
				    !strcmp(t->rows[r], (*s)->keys[k].name);
			if (!found)
				TEST_FAIL_(
				    "key \"%s\" of %s is not in the table "
				    "at %s:%d",
				    (*s)->keys[k].name, (*s)->id, docs_path,
				    t->line);
			if (!(*s)->keys[k].doc || !(*s)->keys[k].doc[0])
				TEST_FAIL_("key \"%s\" of %s has no doc line",
				           (*s)->keys[k].name, (*s)->id);
		}
	}
}

/* No row names a key its sections lack. */
TEST(no_documented_key_is_unknown)
{
	for (int i = 0; i < ntables; i++) {
		const doc_table *t = &tables[i];
		int sections = 0;
		for (const cfg_section *const *s = cfg_sections(); *s; s++)
			sections += marked(t, (*s)->id);
		if (!sections)
			TEST_FAIL_("%s:%d: keys table of an unknown section "
			           "(%s)",
			           docs_path, t->line, t->ids);
		for (int r = 0; r < t->nrows; r++) {
			int found = 0;
			for (const cfg_section *const *s = cfg_sections(); *s;
			     s++)
				if (marked(t, (*s)->id))
					found |= has_key(*s, t->rows[r]);
			if (!found)
				TEST_FAIL_(
				    "%s:%d: \"%s\" is documented but the "
				    "reader has no such key in%s",
				    docs_path, t->line, t->rows[r], t->ids);
		}
	}
}

/* The tables are what the parser checks: a key in no table is refused
 * with a suggestion from the same table. */
TEST(the_tables_are_the_parser)
{
	const char *text = "store: \"sqlite::memory:\"\n"
	                   "consumers:\n"
	                   "  - name: c\n"
	                   "    source: jsonl:x.jsonl\n"
	                   "    batch_sise: 3\n"
	                   "    effect: {sql: \"SELECT 1\"}\n";
	cli_config cfg;
	char err[1024] = "";
	ASSERT_EQ(cli_config_parse(&cfg, "t.yaml", text, strlen(text), err,
	                           sizeof(err)),
	          -1);
	cli_config_free(&cfg);
	ASSERT_STREQ(err, "t.yaml:5:5: unknown key \"batch_sise\" in consumer "
	                  "(did you mean \"batch_size\"?)");
}

int main(int argc, char **argv)
{
	docs_path = argc > 1 ? argv[1] : "docs/config.md";
	RUN(docs_are_read);
	RUN(every_key_is_documented);
	RUN(no_documented_key_is_unknown);
	RUN(the_tables_are_the_parser);
	return test_summary();
}
