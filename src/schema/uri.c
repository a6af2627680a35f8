/*
 * RFC 3986 section 5: resolving a $ref or $id against the base URI of the
 * schema it appears in. Only what $ref resolution inside one document
 * needs: no normalization beyond dot segments.
 */
#include <stdlib.h>
#include <string.h>

#include "schema/node.h"

typedef struct uri_parts {
	const char *scheme, *auth, *path, *query, *frag;
	size_t scheme_len, auth_len, path_len, query_len, frag_len;
	int has_scheme, has_auth, has_query, has_frag;
} uri_parts;

static void split(const char *s, uri_parts *u)
{
	memset(u, 0, sizeof(*u));
	const char *p = s;
	const char *q = s;
	while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
	       (q > s && ((*q >= '0' && *q <= '9') || *q == '+' || *q == '-' ||
	                  *q == '.')))
		q++;
	if (q > s && *q == ':') {
		u->has_scheme = 1;
		u->scheme = s;
		u->scheme_len = (size_t)(q - s);
		p = q + 1;
	}
	if (p[0] == '/' && p[1] == '/') {
		u->has_auth = 1;
		u->auth = p + 2;
		u->auth_len = strcspn(u->auth, "/?#");
		p = u->auth + u->auth_len;
	}
	u->path = p;
	u->path_len = strcspn(p, "?#");
	p += u->path_len;
	if (*p == '?') {
		u->has_query = 1;
		u->query = p + 1;
		u->query_len = strcspn(u->query, "#");
		p = u->query + u->query_len;
	}
	if (*p == '#') {
		u->has_frag = 1;
		u->frag = p + 1;
		u->frag_len = strlen(u->frag);
	}
}

/* RFC 3986 5.2.4, on a NUL-terminated copy in place. */
static void remove_dot_segments(char *path)
{
	char *in = path, *out = path;
	while (*in) {
		if (!strncmp(in, "../", 3)) {
			in += 3;
		} else if (!strncmp(in, "./", 2)) {
			in += 2;
		} else if (!strncmp(in, "/./", 3)) {
			in += 2;
		} else if (!strcmp(in, "/.")) {
			in[1] = '\0';
		} else if (!strncmp(in, "/../", 4) || !strcmp(in, "/..")) {
			if (in[3] == '/')
				in += 3;
			else {
				in += 2;
				*in = '/';
			}
			while (out > path && *--out != '/')
				;
		} else if (!strcmp(in, ".") || !strcmp(in, "..")) {
			in += strlen(in);
		} else {
			/* move the first segment, with its leading '/' */
			do
				*out++ = *in++;
			while (*in && *in != '/');
		}
	}
	*out = '\0';
}

static int put(inbox__buf *b, const char *s, size_t n)
{
	return inbox__buf_append(b, s, n);
}

char *sch__uri_resolve(const char *base, const char *ref)
{
	uri_parts b, r;
	split(base ? base : "", &b);
	split(ref, &r);
	inbox__buf out = INBOX__BUF_INIT, path = INBOX__BUF_INIT;
	const uri_parts *auth_from, *query_from;
	int bad = 0;
	if (r.has_scheme || r.has_auth) {
		auth_from = &r;
		query_from = &r;
		bad |= put(&path, r.path, r.path_len);
	} else if (r.path_len == 0) {
		auth_from = &b;
		query_from = r.has_query ? &r : &b;
		bad |= put(&path, b.path, b.path_len);
	} else {
		auth_from = &b;
		query_from = &r;
		if (r.path[0] == '/') {
			bad |= put(&path, r.path, r.path_len);
		} else if (b.has_auth && b.path_len == 0) {
			bad |= put(&path, "/", 1);
			bad |= put(&path, r.path, r.path_len);
		} else {
			size_t keep = b.path_len;
			while (keep > 0 && b.path[keep - 1] != '/')
				keep--;
			bad |= put(&path, b.path, keep);
			bad |= put(&path, r.path, r.path_len);
		}
	}
	bad |= put(&path, "", 0); /* ensure data != NULL */
	if (!bad)
		remove_dot_segments(path.data);
	const uri_parts *scheme_from = r.has_scheme ? &r : &b;
	if (scheme_from->has_scheme) {
		bad |= put(&out, scheme_from->scheme, scheme_from->scheme_len);
		bad |= put(&out, ":", 1);
	}
	if (auth_from->has_auth) {
		bad |= put(&out, "//", 2);
		bad |= put(&out, auth_from->auth, auth_from->auth_len);
	}
	if (!bad)
		bad |= put(&out, path.data, strlen(path.data));
	if (query_from->has_query) {
		bad |= put(&out, "?", 1);
		bad |= put(&out, query_from->query, query_from->query_len);
	}
	if (r.has_frag) {
		bad |= put(&out, "#", 1);
		bad |= put(&out, r.frag, r.frag_len);
	}
	bad |= put(&out, "", 0);
	inbox__buf_free(&path);
	if (bad) {
		inbox__buf_free(&out);
		return NULL;
	}
	return out.data;
}
