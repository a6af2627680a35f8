/*
 * Store and source URLs in the config: a scheme the registries know, and
 * relative paths made relative to the config file's directory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inbox/sys/source.h>
#include <inbox/sys/store.h>

#include "cli/cli.h"
#include "cli/config/reader.h"

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

int cfg_rebase(cfg_ctx *x, inbox__buf *b, const char *path, size_t len)
{
	if (x->dir[0] && len > 0 && path[0] != '/')
		if (inbox__buf_printf(b, "%s/", x->dir) < 0)
			return -1;
	return inbox__buf_append(b, path, len);
}

/* The schemes the registry knows (`schemes` calls fn(i) for i = 0, 1, ...
 * until NULL), "a, b or c", into buf. */
static const char *scheme_list(const char *(*schemes)(size_t), char *buf,
                               size_t len)
{
	size_t n = 0, at = 0;
	while (schemes(n))
		n++;
	buf[0] = '\0';
	for (size_t i = 0; i < n && at < len; i++) {
		int w = snprintf(buf + at, len - at, "%s%s",
		                 i == 0       ? ""
		                 : i + 1 == n ? " or "
		                              : ", ",
		                 schemes(i));
		if (w < 0)
			break;
		at += (size_t)w;
	}
	return buf;
}

/* SCHEME:PATH[?k=v&...] (no "//" authority: sqlite:PATH, jsonl:PATH):
 * a relative PATH, and the file a checkpoint= parameter names, are
 * relative to the config file. "-" (stdin) and names starting with ':'
 * (a database's special names) are not paths. A URL with an authority
 * (SCHEME://...) is kept as it is. */
static char *rebase_url(cfg_ctx *x, const char *url)
{
	size_t lead = strcspn(url, ":") + 1;
	const char *p = url + lead;
	if (p[0] == '/' && p[1] == '/')
		return strdup(url);
	inbox__buf b = INBOX__BUF_INIT;
	size_t n = strcspn(p, "?");
	int bad = inbox__buf_append(&b, url, lead);
	if ((n == 1 && p[0] == '-') || p[0] == ':')
		bad |= inbox__buf_append(&b, p, n);
	else
		bad |= cfg_rebase(x, &b, p, n);
	p += n;
	while (*p && !bad) {
		/* p at '?' or '&' */
		bad |= inbox__buf_putc(&b, *p++);
		size_t m = strcspn(p, "&");
		if (has_prefix(p, "checkpoint=")) {
			bad |= inbox__buf_puts(&b, "checkpoint=");
			bad |= cfg_rebase(x, &b, p + 11, m - 11);
		} else {
			bad |= inbox__buf_append(&b, p, m);
		}
		p += m;
	}
	if (bad) {
		inbox__buf_free(&b);
		return NULL;
	}
	return b.data;
}

/* A URL of a scheme the registry (`known`) has, with something after the
 * colon other than a bare query. */
static int usable_url(const char *url, int (*known)(const char *))
{
	const char *colon = strchr(url, ':');
	return colon && colon[1] && colon[1] != '?' && known(url);
}

/* Any scheme a registered store takes: the built-in ones, and a third
 * party's registered before the config is read. */
int cfg_store_url(cfg_ctx *x, yaml_node_t *n, const char *what, char **out,
                  cli_pos *pos)
{
	char *url = NULL, red[512], list[256];
	if (cfg_str_value(x, n, what, &url))
		return -1;
	*pos = cfg_pos(n);
	if (!usable_url(url, inbox_store_known_url)) {
		cfg_fail(x, n,
		         "%s: unsupported store URL \"%s\" (the schemes of the "
		         "stores registered: %s)",
		         what, cli_redact(url, red, sizeof(red)),
		         scheme_list(inbox_store_scheme, list, sizeof(list)));
		free(url);
		return -1;
	}
	char *fixed = rebase_url(x, url);
	free(url);
	free(*out);
	*out = fixed;
	return fixed ? 0 : cfg_fail(x, n, "out of memory");
}

/* A scheme no source registered (one not compiled in) is refused here;
 * whether the URL is well formed, when it is opened (still before
 * consuming). */
int cfg_source_url(cfg_ctx *x, yaml_node_t *n, char **out, cli_pos *pos)
{
	char *url = NULL, red[512], list[256];
	if (cfg_str_value(x, n, "source", &url))
		return -1;
	*pos = cfg_pos(n);
	if (!usable_url(url, inbox_source_known_url)) {
		cfg_fail(
		    x, n,
		    "source: unsupported source URL \"%s\" (the schemes of "
		    "the sources registered: %s)",
		    cli_redact(url, red, sizeof(red)),
		    scheme_list(inbox_source_scheme, list, sizeof(list)));
		free(url);
		return -1;
	}
	char *fixed = rebase_url(x, url);
	free(url);
	free(*out);
	*out = fixed;
	return fixed ? 0 : cfg_fail(x, n, "out of memory");
}
