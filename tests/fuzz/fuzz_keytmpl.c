/*
 * Fuzz target: key templates. Input = template, a newline, then a JSON
 * document. A rendered key is never empty, never longer than 512 bytes,
 * never contains NUL and is valid UTF-8.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "fuzz_keytmpl: check failed: %s\n",    \
			        #c);                                           \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nl = memchr(data, '\n', size);
	size_t tlen = nl ? (size_t)(nl - (const char *)data) : size;
	char *tmpl = malloc(tlen + 1);
	if (!tmpl)
		return 0;
	memcpy(tmpl, data, tlen);
	tmpl[tlen] = '\0'; /* an embedded NUL just ends the template early */

	char err[256];
	inbox__keytmpl *t = NULL;
	if (inbox__keytmpl_compile(&t, tmpl, err, sizeof(err)) < 0) {
		CHECK(t == NULL && err[0] != '\0');
		free(tmpl);
		return 0;
	}
	CHECK(t != NULL);

	json_t *root = NULL;
	if (nl) {
		const char *doc = nl + 1;
		size_t dlen = size - tlen - 1;
		if (inbox__json_parse(doc, dlen, &root, err, sizeof(err)) < 0)
			root = NULL;
	}
	static const char *const ids[] = {NULL, "", "id-1", "\xc3\xa9"};
	inbox__buf key = INBOX__BUF_INIT;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		err[0] = '\0';
		if (inbox__keytmpl_render(t, root, ids[i], &key, err,
		                          sizeof(err)) < 0) {
			CHECK(err[0] != '\0');
			continue;
		}
		CHECK(key.len > 0 && key.len <= 512);
		CHECK(strlen(key.data) == key.len);
		CHECK(inbox__utf8_valid(key.data, key.len));
		if (!ids[i])
			CHECK(!inbox__keytmpl_uses_id(t));
	}
	inbox__buf_free(&key);
	json_decref(root);
	inbox__keytmpl_free(t);
	free(tmpl);
	return 0;
}
