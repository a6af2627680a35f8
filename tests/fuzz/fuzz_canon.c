/*
 * Fuzz target: parse + RFC 8785 canonicalization. Whatever parses must
 * canonicalize, the canonical text must parse again, and canonicalizing it
 * again must give the same bytes (the canonical form is a fixed point).
 * Pointers and value text are exercised on the way.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inbox/inbox.h>

#include "base/json.h"

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "fuzz_canon: check failed: %s\n", #c); \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *root;
	char err[256];
	if (inbox__json_parse((const char *)data, size, &root, err,
	                      sizeof(err)) < 0) {
		CHECK(err[0] != '\0');
		return 0;
	}
	inbox__buf c1 = INBOX__BUF_INIT, c2 = INBOX__BUF_INIT;
	CHECK(inbox__canon_append(&c1, root) == 0);
	CHECK(c1.len > 0 && inbox__utf8_valid(c1.data, c1.len));

	json_t *again;
	if (inbox__json_parse(c1.data, c1.len, &again, err, sizeof(err)) < 0) {
		fprintf(stderr, "canonical text does not parse: %s\n%s\n", err,
		        c1.data);
		abort();
	}
	CHECK(inbox__canon_append(&c2, again) == 0);
	if (c1.len != c2.len || memcmp(c1.data, c2.data, c1.len) != 0) {
		fprintf(stderr, "not a fixed point:\n%s\n%s\n", c1.data,
		        c2.data);
		abort();
	}

	/* The public entry point agrees with the internal one. */
	char *pub = NULL;
	size_t publen = 0;
	CHECK(inbox_json_canonicalize((const char *)data, size, &pub, &publen,
	                              NULL, 0) == INBOX_OK);
	CHECK(publen == c1.len && memcmp(pub, c1.data, publen) == 0);
	free(pub);

	/* Walk a few pointers; value text must not fail on any value. */
	static const char *const ptrs[] = {"",     "/0",  "/a",  "/", "/0/0",
	                                   "/a/b", "/~0", "/~1", "/-"};
	for (size_t i = 0; i < sizeof(ptrs) / sizeof(ptrs[0]); i++) {
		json_t *v = inbox__pointer_get(root, ptrs[i]);
		if (!v)
			continue;
		inbox__buf t = INBOX__BUF_INIT;
		int rc = inbox__value_text(&t, v);
		CHECK(rc == 0 || (rc == 1 && json_is_null(v)));
		inbox__buf_free(&t);
	}

	char hex[65];
	inbox__sha256_hex(c1.data, c1.len, hex);
	CHECK(strlen(hex) == 64);

	inbox__buf_free(&c1);
	inbox__buf_free(&c2);
	json_decref(again);
	json_decref(root);
	return 0;
}
