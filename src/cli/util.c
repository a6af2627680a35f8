/* Small helpers shared by the subcommands. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/url.h"

const char *cli_argv0 = "inbox";

void cli_error(const char *fmt, ...)
{
	va_list ap;
	fputs("inbox: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_is_help(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

const char *cli_redact(const char *url, char *buf, size_t len)
{
	char *r = inbox_redact_url(url);
	snprintf(buf, len, "%s", r ? r : "(URL hidden)");
	free(r);
	return buf;
}

/* Replace every occurrence of secret (len n) in msg with "***". */
static void scrub_one(char *msg, const char *secret, size_t n)
{
	if (n < 3)
		return; /* too short to search for without mangling text */
	char *p;
	while ((p = strstr(msg, secret)) != NULL) {
		memcpy(p, "***", 3);
		memmove(p + 3, p + n, strlen(p + n) + 1);
	}
}

void cli_scrub(char *msg, const char *url)
{
	if (!msg || !url)
		return;
	const char *s = strstr(url, "://");
	if (s) {
		s += 3;
		/* The same rule as the sources and inbox_redact_url: the user
		 * info ends at the last '@' before the first '/'. */
		const char *at = inbox__url_userinfo_end(s);
		const char *colon =
		    at ? memchr(s, ':', (size_t)(at - s)) : NULL;
		if (at && colon) {
			char raw[256];
			size_t n = (size_t)(at - colon - 1);
			if (n >= sizeof(raw))
				n = sizeof(raw) - 1;
			memcpy(raw, colon + 1, n);
			raw[n] = '\0';
			scrub_one(msg, raw, n);
			char *dec = NULL;
			if (inbox__url_decode(&dec, raw, n) == INBOX_OK) {
				scrub_one(msg, dec, strlen(dec));
				free(dec);
			}
		}
	}
	const char *q = strstr(url, "password=");
	if (q) {
		q += 9;
		size_t n = strcspn(q, "&# ");
		char raw[256];
		if (n >= sizeof(raw))
			n = sizeof(raw) - 1;
		memcpy(raw, q, n);
		raw[n] = '\0';
		scrub_one(msg, raw, n);
	}
}

int cli_open_exit_code(int rc)
{
	switch (rc) {
	case INBOX_ERR_URL:
	case INBOX_ERR_INVALID:
	case INBOX_ERR_CONFIG:
		return CLI_EXIT_CONFIG;
	case INBOX_ERR_NOMEM:
		return CLI_EXIT_RUNTIME;
	default:
		return CLI_EXIT_CONNECT;
	}
}
