/*
 * Secrets out of the config file (src/cli/config/expand.c): ${NAME} from
 * the environment, ${file:PATH} from a file (relative to the config,
 * trailing newlines trimmed), $${ for a literal ${; an unset variable, a
 * missing or empty file is an error at FILE:LINE:COL naming it, and no
 * message ever shows what they brought in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <inbox/decl.h>

#include "cli/config.h"
#include "test.h"

static char dir[256];

static void write_file(const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* Parse a config whose store and setup are given, as if read from
 * DIR/inbox.yaml. */
static int parse(cli_config *cfg, const char *store, const char *setup,
                 char *err, size_t len)
{
	char text[2048], path[512];
	snprintf(text, sizeof(text),
	         "store: \"%s\"\n"
	         "consumers:\n"
	         "  - name: c\n"
	         "    source: jsonl:x.jsonl\n"
	         "    setup: \"%s\"\n"
	         "    effect: {sql: \"SELECT 1\"}\n",
	         store, setup);
	snprintf(path, sizeof(path), "%s/inbox.yaml", dir);
	err[0] = '\0';
	return cli_config_parse(cfg, path, text, strlen(text), err, len);
}

TEST(a_variable_is_expanded)
{
	cli_config cfg;
	char err[1024];
	setenv("INBOX_T_PW", "pw-from-env", 1);
	ASSERT_EQ(parse(&cfg, "postgresql://u:${INBOX_T_PW}@h/db", "SELECT 1",
	                err, sizeof(err)),
	          0);
	ASSERT_STREQ(cfg.store, "postgresql://u:pw-from-env@h/db");
	cli_config_free(&cfg);
}

TEST(dollar_dollar_brace_is_a_literal)
{
	cli_config cfg;
	char err[1024];
	ASSERT_EQ(parse(&cfg, "sqlite::memory:",
	                "SELECT '$${HOME}', '$$', '$1', '${INBOX_T_PW}'", err,
	                sizeof(err)),
	          0);
	ASSERT_STREQ(cfg.consumers[0].setup,
	             "SELECT '${HOME}', '$$', '$1', 'pw-from-env'");
	cli_config_free(&cfg);
}

TEST(an_unset_variable_is_an_error_naming_it)
{
	cli_config cfg;
	char err[1024], want[1024];
	unsetenv("INBOX_T_UNSET");
	ASSERT_EQ(parse(&cfg, "postgresql://u:${INBOX_T_UNSET}@h/db",
	                "SELECT 1", err, sizeof(err)),
	          -1);
	cli_config_free(&cfg);
	snprintf(want, sizeof(want),
	         "%s/inbox.yaml:1:8: ${INBOX_T_UNSET}: the environment "
	         "variable is not set (write $${ for a literal ${)",
	         dir);
	ASSERT_STREQ(err, want);
}

TEST(bad_references_are_errors)
{
	cli_config cfg;
	char err[1024];
	ASSERT_EQ(
	    parse(&cfg, "sqlite:${NOT CLOSED", "SELECT 1", err, sizeof(err)),
	    -1);
	cli_config_free(&cfg);
	ASSERT_CONTAINS(err, "inbox.yaml:1:8: \"${\" without its \"}\"");
	ASSERT_EQ(parse(&cfg, "sqlite:${a-b}", "SELECT 1", err, sizeof(err)),
	          -1);
	cli_config_free(&cfg);
	ASSERT_CONTAINS(err, "\"${a-b}\": not a variable name");
}

TEST(a_file_is_read_and_its_newline_trimmed)
{
	cli_config cfg;
	char err[1024];
	write_file("pgpass", "pw-from-file\n");
	ASSERT_EQ(parse(&cfg, "postgresql://u:${file:pgpass}@h/db", "SELECT 1",
	                err, sizeof(err)),
	          0);
	ASSERT_STREQ(cfg.store, "postgresql://u:pw-from-file@h/db");
	cli_config_free(&cfg);
	write_file("url", "sqlite:in-file.db\r\n\n");
	ASSERT_EQ(parse(&cfg, "${file:url}", "SELECT 1", err, sizeof(err)), 0);
	/* the relative path of the URL is rebased like a written one */
	char want[512];
	snprintf(want, sizeof(want), "sqlite:%s/in-file.db", dir);
	ASSERT_STREQ(cfg.store, want);
	cli_config_free(&cfg);
}

TEST(file_errors_name_the_file_never_the_contents)
{
	cli_config cfg;
	char err[1024];
	ASSERT_EQ(parse(&cfg, "postgresql://u:${file:nosuch}@h/db", "SELECT 1",
	                err, sizeof(err)),
	          -1);
	cli_config_free(&cfg);
	ASSERT_CONTAINS(err, "inbox.yaml:1:8: ${file:nosuch}: cannot read ");
	ASSERT_CONTAINS(err, "/nosuch: No such file or directory");
	write_file("empty", "\n");
	ASSERT_EQ(parse(&cfg, "postgresql://u:${file:empty}@h/db", "SELECT 1",
	                err, sizeof(err)),
	          -1);
	cli_config_free(&cfg);
	ASSERT_CONTAINS(err, "${file:empty}: the file is empty");
}

/* A value from a file or a variable that a later check quotes is shown
 * as ***: here a store URL of an unknown scheme, and a setup that is
 * not a string... of the wrong type, a batch_size. */
TEST(messages_never_show_what_was_expanded)
{
	cli_config cfg;
	char err[1024];
	write_file("secret", "hunter2-secret\n");
	ASSERT_EQ(parse(&cfg, "nosuchscheme:${file:secret}", "SELECT 1", err,
	                sizeof(err)),
	          -1);
	cli_config_free(&cfg);
	ASSERT_CONTAINS(err, "unsupported store URL");
	ASSERT_TRUE(strstr(err, "hunter2") == NULL);
	char text[512], path[512];
	setenv("INBOX_T_SECRET", "tok-9f8e7d6c", 1);
	snprintf(text, sizeof(text),
	         "store: sqlite:x.db\n"
	         "consumers:\n"
	         "  - name: c\n"
	         "    source: jsonl:x.jsonl\n"
	         "    batch_size: \"${INBOX_T_SECRET}\"\n"
	         "    effect: {sql: \"SELECT 1\"}\n");
	snprintf(path, sizeof(path), "%s/inbox.yaml", dir);
	ASSERT_EQ(
	    cli_config_parse(&cfg, path, text, strlen(text), err, sizeof(err)),
	    -1);
	cli_config_free(&cfg);
	ASSERT_CONTAINS(err, "batch_size must be an integer, not \"***\"");
	ASSERT_TRUE(strstr(err, "tok-9f8e") == NULL);
}

/* Keys are names: never expanded (an unknown key stays unknown). */
TEST(keys_are_not_expanded)
{
	cli_config cfg;
	char err[1024], text[512];
	setenv("INBOX_T_KEY", "batch_size", 1);
	snprintf(text, sizeof(text),
	         "store: sqlite:x.db\n"
	         "consumers:\n"
	         "  - name: c\n"
	         "    source: jsonl:x.jsonl\n"
	         "    ${INBOX_T_KEY}: 5\n"
	         "    effect: {sql: \"SELECT 1\"}\n");
	ASSERT_EQ(cli_config_parse(&cfg, "k.yaml", text, strlen(text), err,
	                           sizeof(err)),
	          -1);
	cli_config_free(&cfg);
	ASSERT_CONTAINS(err, "k.yaml:5:5: unknown key \"${INBOX_T_KEY}\"");
}

static int first_col(int ncols, const char *const *values, void *payload)
{
	if (ncols > 0 && values[0])
		snprintf(payload, 512, "%s", values[0]);
	return 0;
}

/* An outbox step's header from a file: the row the message writes
 * carries it (SQLite, through the declaration the config built). */
TEST(an_outbox_header_from_a_file)
{
	cli_config cfg;
	char err[1024], text[1024], path[512], db[600];
	write_file("token", "tok-from-file-77\n");
	snprintf(db, sizeof(db), "sqlite:%s/h.db", dir);
	snprintf(text, sizeof(text),
	         "store: \"%s\"\n"
	         "consumers:\n"
	         "  - name: c\n"
	         "    source: jsonl:x.jsonl\n"
	         "    outbox:\n"
	         "      - step: charge\n"
	         "        url: http://127.0.0.1:9/charges\n"
	         "        idempotent: true\n"
	         "        headers: {Authorization: \"Bearer ${file:token}\"}\n",
	         db);
	snprintf(path, sizeof(path), "%s/inbox.yaml", dir);
	ASSERT_EQ(
	    cli_config_parse(&cfg, path, text, strlen(text), err, sizeof(err)),
	    0);
	inbox_store *st = NULL;
	ASSERT_EQ(inbox_store_open(&st, cfg.store, NULL), INBOX_OK);
	cli_consumer *c = &cfg.consumers[0];
	ASSERT_EQ(inbox_decl_prepare(c->decl, st, NULL, err, sizeof(err)),
	          INBOX_OK);
	inbox_consumer_options co = INBOX_CONSUMER_OPTIONS_INIT;
	co.name = c->name;
	co.handler = inbox_decl_handler;
	co.handler_payload = c->decl;
	inbox_consumer *cons = NULL;
	ASSERT_EQ(inbox_consumer_open(&cons, st, &co, err, sizeof(err)),
	          INBOX_OK);
	inbox_delivery d;
	d = (inbox_delivery)INBOX_DELIVERY_INIT;
	d.id = "h1";
	d.payload = "{}";
	d.payload_len = 2;
	d.delivery_count = 1;
	inbox_result r = INBOX_RESULT_INIT;
	ASSERT_EQ(inbox_consumer_process(cons, &d, &r), INBOX_OK);
	ASSERT_EQ(r.outcome, INBOX_APPLIED);
	char headers[512] = "(none)";
	ASSERT_EQ(inbox_store_query(st, "SELECT headers FROM outbox", 0, NULL,
	                            first_col, headers),
	          INBOX_OK);
	ASSERT_STREQ(headers,
	             "{\"Authorization\":\"Bearer tok-from-file-77\"}");
	inbox_consumer_close(cons);
	inbox_store_close(st);
	cli_config_free(&cfg);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/inbox-expand-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(a_variable_is_expanded);
	RUN(dollar_dollar_brace_is_a_literal);
	RUN(an_unset_variable_is_an_error_naming_it);
	RUN(bad_references_are_errors);
	RUN(a_file_is_read_and_its_newline_trimmed);
	RUN(file_errors_name_the_file_never_the_contents);
	RUN(messages_never_show_what_was_expanded);
	RUN(keys_are_not_expanded);
	RUN(an_outbox_header_from_a_file);
	const char *names[] = {"pgpass", "url",  "empty",    "secret",
	                       "token",  "h.db", "h.db-wal", "h.db-shm"};
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		char p[512];
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
	return test_summary();
}
