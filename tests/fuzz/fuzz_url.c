/*
 * Fuzz target: URL redaction. The password of a scheme://user:pass@host
 * URL never appears in the redacted text (checked when it is unambiguous:
 * it occurs once in the input and contains no '*'). The full definition
 * of what is secret, and that no output depends on it, is checked by
 * fuzz_source_url.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inbox/inbox.h>

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "fuzz_url: check failed: %s\n", #c);   \
			abort();                                               \
		}                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The password as the documented rule finds it: after the first ':' of
 * the user info, which ends at the last '@' before the first '/' after
 * "://". NULL when there is none. Independent of the library's code. */
static char *password_of(const char *url)
{
	const char *auth = strstr(url, "://");
	/* jsonl:PATH and sqlite:PATH have no user info (but sqlite://...
	 * is read as one, to be hidden if it has one) */
	if (!auth || strncmp(url, "jsonl:", 6) == 0 ||
	    (strncmp(url, "sqlite:", 7) == 0 && auth != url + 6))
		return NULL;
	auth += 3;
	const char *slash = strchr(auth, '/');
	const char *end = slash ? slash : auth + strlen(auth);
	const char *at = NULL;
	for (const char *p = auth; p < end; p++)
		if (*p == '@')
			at = p;
	if (!at)
		return NULL;
	const char *colon = NULL;
	for (const char *p = auth; p < at; p++)
		if (*p == ':') {
			colon = p;
			break;
		}
	if (!colon || colon + 1 >= at)
		return NULL;
	size_t n = (size_t)(at - colon - 1);
	char *pw = malloc(n + 1);
	if (!pw)
		return NULL;
	memcpy(pw, colon + 1, n);
	pw[n] = '\0';
	return pw;
}

static size_t occurrences(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *url = malloc(size + 1);
	if (!url)
		return 0;
	memcpy(url, data, size);
	url[size] = '\0';

	char *red = inbox_redact_url(url);
	CHECK(red != NULL);
	char *pw = password_of(url);
	if (pw && !strchr(pw, '*') && occurrences(url, pw) == 1) {
		if (strstr(red, pw)) {
			fprintf(stderr, "password \"%s\" leaked: %s -> %s\n",
			        pw, url, red);
			abort();
		}
		/* The user name goes too when the user info is ambiguous
		 * ("a://u:p@q@h"), and the '@' when a secret parameter's
		 * value runs over it ("a://u:x?token=y@h"). */
		CHECK(strstr(red, "***") != NULL);
	}
	/* Nothing to hide: the text comes back unchanged. */
	if (!strchr(url, '@') && !strchr(url, '='))
		CHECK(strcmp(red, url) == 0);
	free(pw);
	free(red);
	free(url);
	return 0;
}
