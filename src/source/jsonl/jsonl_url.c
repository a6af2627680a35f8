/* JSONL source: parse "jsonl:PATH?k=v&..." and name the checkpoint. */
#include <stdlib.h>
#include <string.h>

#include "base/url.h"
#include "source/jsonl/jsonl.h"

static int parse_bool(const char *v, int *out)
{
	static const char *const yes[] = {"1", "true", "yes", "on"};
	static const char *const no[] = {"0", "false", "no", "off"};
	for (size_t i = 0; i < 4; i++) {
		if (strcmp(v, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcmp(v, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

/* One query parameter, taken literally (an inbox__url_param_fn). */
static int apply_param(const char *k, const char *v, void *payload)
{
	jl_source *s = payload;
	inbox_source *b = &s->base;
	if (strcmp(k, "follow") == 0) {
		if (!v) { /* "?follow" alone means follow=1 */
			s->follow = 1;
			return INBOX_OK;
		}
		if (parse_bool(v, &s->follow) == 0)
			return INBOX_OK;
		inbox__source_seterr(b,
		                     "jsonl: bad value for follow: '%s' "
		                     "(use 1 or 0)",
		                     v);
		return INBOX_ERR_URL;
	}
	if (strcmp(k, "checkpoint") == 0) {
		if (!v || !*v) {
			inbox__source_seterr(b, "jsonl: empty checkpoint path");
			return INBOX_ERR_URL;
		}
		return inbox__url_set_str(&s->ckpt, v);
	}
	if (strcmp(k, "checkpoint_sync") == 0)
		return inbox__url_duration_param(&s->ck_sync_ms, b, "jsonl", k,
		                                 v ? v : "", 1, 0, 86400000);
	if (strcmp(k, "from") == 0) {
		if (!v)
			v = "";
		if (strcmp(v, "beginning") == 0 ||
		    strcmp(v, "checkpoint") == 0) {
			s->from_beginning = v[0] == 'b';
			return INBOX_OK;
		}
		inbox__source_seterr(b,
		                     "jsonl: bad value for from: '%s' "
		                     "(use beginning or checkpoint)",
		                     v);
		return INBOX_ERR_URL;
	}
	inbox__source_seterr(b, "jsonl: unknown parameter '%s'", k);
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
		/* (not quoting the URL: its query may hold a secret) */
		inbox__source_seterr(b, "jsonl: missing path (jsonl:PATH or "
		                        "jsonl:-)");
		return INBOX_ERR_URL;
	}
	s->path = strndup(p, plen);
	if (!s->path)
		return INBOX_ERR_NOMEM;
	s->is_stdin = strcmp(s->path, "-") == 0;
	s->label = strdup(s->is_stdin ? "stdin" : s->path);
	if (!s->label)
		return INBOX_ERR_NOMEM;

	if (q) {
		int rc = inbox__url_params(b, "jsonl", q + 1, strlen(q + 1),
		                           INBOX__URL_RAW, apply_param, s);
		if (rc < 0)
			return rc;
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

void inbox__jl_url_clear(jl_source *s)
{
	free(s->path);
	free(s->label);
	free(s->ckpt);
	free(s->ckpt_tmp);
	s->path = s->label = s->ckpt = s->ckpt_tmp = NULL;
}
