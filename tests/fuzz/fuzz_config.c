/*
 * Fuzz target: the daemon's YAML config reader (src/cli/config/). The
 * input is the text of a config file. It loads, or is refused with a
 * message that names the file ("fuzz.yaml:LINE:COL: ..." or "fuzz.yaml:
 * ...") and is valid UTF-8; a loaded config has at least one consumer,
 * each with a name, a source and a store; nothing leaks either way
 * (LeakSanitizer). Paths in the input (schema:) are read relative to the
 * working directory: run it where nothing blocks on open (not in /dev).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "cli/config.h"

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "fuzz_config: check failed: %s\n",     \
			        #c);                                           \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cli_config cfg;
	char err[1024];
	err[0] = '\0';
	int rc = cli_config_parse(&cfg, "fuzz.yaml", (const char *)data, size,
	                          err, sizeof(err));
	CHECK(rc == 0 || rc == -1);
	if (rc < 0) {
		CHECK(strncmp(err, "fuzz.yaml:", 10) == 0);
		CHECK(inbox__utf8_valid(err, strlen(err)));
	} else {
		CHECK(cfg.nconsumers > 0);
		for (int i = 0; i < cfg.nconsumers; i++) {
			const cli_consumer *c = &cfg.consumers[i];
			CHECK(c->name && c->name[0] && c->source);
			CHECK(cli_consumer_store(&cfg, c) != NULL);
		}
	}
	cli_config_free(&cfg);
	return 0;
}
