/*
 * The inbox command asks the registries which schemes exist: a store or a
 * source registered by a third party (before the config is read) is
 * accepted in a config file, an unknown scheme is refused with the
 * registered ones listed, and relative paths are rebased for any URL
 * without an authority, whatever its scheme (src/cli/config/).
 */
#include <stdio.h>
#include <string.h>

#include <inbox/sys/source.h>
#include <inbox/sys/store.h>

#include "cli/config.h"
#include "core/internal.h"
#include "test.h"

/* A config naming the store and the source (cfg is to be freed with
 * cli_config_free() whatever the result, as after cli_config_load()). */
static int parse(cli_config *cfg, const char *store, const char *source,
                 char *err, size_t len)
{
	char text[1024];
	snprintf(text, sizeof(text),
	         "store: \"%s\"\n"
	         "consumers:\n"
	         "  - name: c\n"
	         "    source: \"%s\"\n"
	         "    effect: {sql: \"SELECT 1\"}\n",
	         store, source);
	err[0] = '\0';
	return cli_config_parse(cfg, "/etc/acme/inbox.yaml", text, strlen(text),
	                        err, len);
}

/* Refused (-1), the message in err, nothing kept. */
static int refused(const char *store, const char *source, char *err, size_t len)
{
	cli_config cfg;
	int rc = parse(&cfg, store, source, err, len);
	cli_config_free(&cfg);
	return rc == -1;
}

static const inbox_store_vtable *builtin_store(void)
{
	return inbox__builtin_stores[0];
}

TEST(unregistered_schemes_are_refused_with_the_registered_ones)
{
	char err[1024];
	ASSERT_TRUE(refused("acme://db/x", "jsonl:in.jsonl", err, sizeof(err)));
	ASSERT_CONTAINS(err, "unsupported store URL");
	/* the list comes from the registry: every scheme it has */
	for (size_t i = 0; inbox_store_scheme(i); i++)
		ASSERT_CONTAINS(err, inbox_store_scheme(i));
	ASSERT_TRUE(
	    refused("sqlite:t.db", "acmeq://broker/x", err, sizeof(err)));
	ASSERT_CONTAINS(err, "unsupported source URL");
	for (size_t i = 0; inbox_source_scheme(i); i++)
		ASSERT_CONTAINS(err, inbox_source_scheme(i));
	/* a scheme and nothing else is not a URL */
	ASSERT_TRUE(refused("sqlite:", "jsonl:in.jsonl", err, sizeof(err)));
	ASSERT_TRUE(
	    refused("sqlite:t.db", "jsonl:?follow=1", err, sizeof(err)));
}

TEST(third_party_schemes_are_accepted_once_registered)
{
	static inbox_store_vtable acme;
	static inbox_source_vtable acmeq;
	acme = *builtin_store();
	acme.scheme = "acme";
	acme.kind = "acme";
	acme.alias = NULL;
	ASSERT_OK(inbox_store_register(&acme));
	/* any registered source will do as the model of a third party's */
	extern const inbox_source_vtable inbox__jsonl_source;
	acmeq = inbox__jsonl_source;
	acmeq.scheme = "acmeq";
	ASSERT_OK(inbox_source_register(&acmeq));
	cli_config cfg;
	char err[1024];
	ASSERT_OK(
	    parse(&cfg, "acme://db/x", "acmeq://broker/x", err, sizeof(err)));
	ASSERT_STREQ(cli_consumer_store(&cfg, &cfg.consumers[0]),
	             "acme://db/x");
	ASSERT_STREQ(cfg.consumers[0].source, "acmeq://broker/x");
	cli_config_free(&cfg);
	/* listed in the error of a still unknown one */
	ASSERT_TRUE(refused("nothing://x", "jsonl:a", err, sizeof(err)));

	ASSERT_CONTAINS(err, "acme");
	/* SCHEME:PATH of any scheme: relative to the config file */
	ASSERT_OK(parse(&cfg, "acme:data/x.db", "acmeq:in.q?checkpoint=c.pos",
	                err, sizeof(err)));
	ASSERT_STREQ(cli_consumer_store(&cfg, &cfg.consumers[0]),
	             "acme:/etc/acme/data/x.db");
	ASSERT_STREQ(cfg.consumers[0].source,
	             "acmeq:/etc/acme/in.q?checkpoint=/etc/acme/c.pos");
	cli_config_free(&cfg);
	/* and the built-in ones as before: absolute, stdin, special names */
	ASSERT_OK(parse(&cfg, "sqlite::memory:", "jsonl:-", err, sizeof(err)));
	ASSERT_STREQ(cli_consumer_store(&cfg, &cfg.consumers[0]),
	             "sqlite::memory:");
	ASSERT_STREQ(cfg.consumers[0].source, "jsonl:-");
	cli_config_free(&cfg);
	ASSERT_OK(parse(&cfg, "sqlite:/var/x.db", "jsonl:in.jsonl", err,
	                sizeof(err)));
	ASSERT_STREQ(cli_consumer_store(&cfg, &cfg.consumers[0]),
	             "sqlite:/var/x.db");
	ASSERT_STREQ(cfg.consumers[0].source, "jsonl:/etc/acme/in.jsonl");
	cli_config_free(&cfg);
}

int main(void)
{
	RUN(unregistered_schemes_are_refused_with_the_registered_ones);
	RUN(third_party_schemes_are_accepted_once_registered);
	return test_summary();
}
