/* Small helpers shared by the subcommands. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/secret.h"
#include "cli/cli.h"

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

void cli_scrub(char *msg, size_t cap, const char *url)
{
	inbox__secrets *sec = NULL;
	if (!msg || !url)
		return;
	if (inbox__secrets_add_url(&sec, url) < 0)
		snprintf(msg, cap, "(message hidden: out of memory)");
	inbox__secrets_scrub(sec, msg, cap, 0);
	inbox__secrets_free(sec);
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
