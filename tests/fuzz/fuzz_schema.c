/*
 * Fuzz target: JSON Schema compile + validate (src/schema/). The input is
 * a JSON array [schema, instance, ...]: the schema must compile or be
 * refused with a reason; a compiled schema validates every element
 * (itself included) without crashing; the first-error and every-error
 * modes agree on validity, each violation with a reason; and the result
 * is the same without the validator's memo (unless one of the two had to
 * stop at a limit: without the memo some schemas cost 2^depth).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inbox/inbox.h>

#include "base/json.h"
#include "schema/node.h"

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "fuzz_schema: check failed: %s\n",     \
			        #c);                                           \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_error(const char *path, const char *kw, const char *spath,
                       const char *msg, void *payload)
{
	CHECK(kw[0] && msg[0] && (path[0] == '\0' || path[0] == '/'));
	(*(size_t *)payload)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *root;
	char err[600], reason[600];
	if (inbox__json_parse((const char *)data, size, &root, err,
	                      sizeof(err)) < 0)
		return 0;
	if (!json_is_array(root) || json_array_size(root) == 0) {
		json_decref(root);
		return 0;
	}
	inbox_schema *s = NULL;
	int rc = inbox__schema_compile(&s, json_array_get(root, 0), err,
	                               sizeof(err));
	if (rc != INBOX_OK) {
		CHECK(s == NULL && err[0] != '\0');
		json_decref(root);
		return 0;
	}
	for (size_t i = 0; i < json_array_size(root); i++) {
		json_t *v = json_array_get(root, i);
		reason[0] = '\0';
		int invalid =
		    inbox__schema_check(s, v, size, reason, sizeof(reason));
		int stopped = strncmp(reason, "schema validation ", 18) == 0;
		size_t seen = 0;
		size_t n =
		    inbox__schema_each(s, v, size, 1, count_error, &seen);
		CHECK(n == seen);
		CHECK(stopped || (invalid != 0) == (n > 0));
		CHECK(!invalid || stopped ||
		      strncmp(reason, "schema violation at ", 20) == 0);
		s->memo_off = 1;
		reason[0] = '\0';
		int plain =
		    inbox__schema_check(s, v, size, reason, sizeof(reason));
		s->memo_off = 0;
		if (!stopped && strncmp(reason, "schema validation ", 18) != 0)
			CHECK((plain != 0) == (invalid != 0));
	}
	inbox_schema_close(s);
	json_decref(root);
	return 0;
}
