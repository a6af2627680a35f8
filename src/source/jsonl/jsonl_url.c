/* JSONL source: parse "jsonl:PATH?k=v&..." and name the checkpoint. */
#include <stdlib.h>
#include <string.h>

#include "source/jsonl/jsonl.h"

static char *dup_n(const char *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

static int parse_bool(const char *v, size_t n, int *out)
{
	static const char *const yes[] = {"1", "true", "yes", "on"};
	static const char *const no[] = {"0", "false", "no", "off"};
	for (size_t i = 0; i < 4; i++) {
		if (strlen(yes[i]) == n && strncmp(v, yes[i], n) == 0) {
			*out = 1;
			return 0;
		}
		if (strlen(no[i]) == n && strncmp(v, no[i], n) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

/* One "key=value" of the query. */
static int parse_param(jl_source *s, const char *p, size_t n)
{
	const char *eq = memchr(p, '=', n);
	size_t klen = eq ? (size_t)(eq - p) : n;
	const char *v = eq ? eq + 1 : p + n;
	size_t vlen = eq ? n - klen - 1 : 0;
	inbox_source *b = &s->base;

	if (klen == 6 && strncmp(p, "follow", 6) == 0) {
		if (!eq) { /* "?follow" alone means follow=1 */
			s->follow = 1;
			return INBOX_OK;
		}
		if (parse_bool(v, vlen, &s->follow) == 0)
			return INBOX_OK;
		inbox__source_seterr(b,
		                     "jsonl: bad value for follow: '%.*s' "
		                     "(use 1 or 0)",
		                     (int)vlen, v);
		return INBOX_ERR_URL;
	}
	if (klen == 10 && strncmp(p, "checkpoint", 10) == 0) {
		if (vlen == 0) {
			inbox__source_seterr(b, "jsonl: empty checkpoint path");
			return INBOX_ERR_URL;
		}
		free(s->ckpt);
		s->ckpt = dup_n(v, vlen);
		return s->ckpt ? INBOX_OK : INBOX_ERR_NOMEM;
	}
	if (klen == 4 && strncmp(p, "from", 4) == 0) {
		if (vlen == 9 && strncmp(v, "beginning", 9) == 0) {
			s->from_beginning = 1;
			return INBOX_OK;
		}
		if (vlen == 10 && strncmp(v, "checkpoint", 10) == 0) {
			s->from_beginning = 0;
			return INBOX_OK;
		}
		inbox__source_seterr(b,
		                     "jsonl: bad value for from: '%.*s' "
		                     "(use beginning or checkpoint)",
		                     (int)vlen, v);
		return INBOX_ERR_URL;
	}
	inbox__source_seterr(b, "jsonl: unknown parameter '%.*s'", (int)klen,
	                     p);
	return INBOX_ERR_URL;
}

/* PATH + "." + sanitized consumer + ".checkpoint" */
static char *default_ckpt(const char *path, const char *consumer)
{
	size_t pl = strlen(path), cl = strlen(consumer);
	char *s = malloc(pl + 1 + cl + sizeof(".checkpoint"));
	if (!s)
		return NULL;
	memcpy(s, path, pl);
	s[pl] = '.';
	for (size_t i = 0; i < cl; i++) {
		char c = consumer[i];
		int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		         (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		         c == '-';
		s[pl + 1 + i] = ok ? c : '_';
	}
	memcpy(s + pl + 1 + cl, ".checkpoint", sizeof(".checkpoint"));
	return s;
}

int inbox__jl_parse_url(jl_source *s, const char *url, const char *consumer)
{
	inbox_source *b = &s->base;
	if (strncmp(url, "jsonl:", 6) != 0) {
		inbox__source_seterr(b, "jsonl: URL must start with jsonl:");
		return INBOX_ERR_URL;
	}
	const char *p = url + 6;
	const char *q = strchr(p, '?');
	size_t plen = q ? (size_t)(q - p) : strlen(p);
	if (plen == 0) {
		inbox__source_seterr(b,
		                     "jsonl: missing path in '%s' "
		                     "(jsonl:PATH or jsonl:-)",
		                     url);
		return INBOX_ERR_URL;
	}
	s->path = dup_n(p, plen);
	if (!s->path)
		return INBOX_ERR_NOMEM;
	s->is_stdin = strcmp(s->path, "-") == 0;
	s->label = strdup(s->is_stdin ? "stdin" : s->path);
	if (!s->label)
		return INBOX_ERR_NOMEM;

	if (q) {
		const char *it = q + 1;
		while (*it) {
			const char *amp = strchr(it, '&');
			size_t n = amp ? (size_t)(amp - it) : strlen(it);
			if (n > 0) {
				int rc = parse_param(s, it, n);
				if (rc < 0)
					return rc;
			}
			it += n + (amp ? 1 : 0);
		}
	}

	if (s->is_stdin) {
		if (s->ckpt) {
			inbox__source_seterr(b, "jsonl: stdin has no "
			                        "checkpoint; remove "
			                        "checkpoint=");
			return INBOX_ERR_URL;
		}
		return INBOX_OK;
	}
	if (!s->ckpt)
		s->ckpt = default_ckpt(s->path, consumer);
	if (!s->ckpt)
		return INBOX_ERR_NOMEM;
	size_t cl = strlen(s->ckpt);
	s->ckpt_tmp = malloc(cl + sizeof(".tmp"));
	if (!s->ckpt_tmp)
		return INBOX_ERR_NOMEM;
	memcpy(s->ckpt_tmp, s->ckpt, cl);
	memcpy(s->ckpt_tmp + cl, ".tmp", sizeof(".tmp"));
	return INBOX_OK;
}
