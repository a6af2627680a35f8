/*
 * Secrets out of the file: every value of the config may name an
 * environment variable, ${NAME}, or a file whose contents it takes,
 * ${file:PATH} (relative to the config file; read at load, trailing
 * newlines trimmed). $${ is a literal ${. An unset variable, an unreadable
 * or empty file is a config error at the value's FILE:LINE:COL naming the
 * variable or the file: never sent on literally, and never printing what
 * a file holds.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/config/reader.h"

/* A secret file: at most this much. */
#define SECRET_FILE_MAX (64 * 1024)

static int name_ok(const char *s, size_t n)
{
	if (n == 0 || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') ||
	                (s[0] >= 'a' && s[0] <= 'z')))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

/* Keep `len` bytes at v as a secret for cfg_fail to hide. */
static int keep_secret(cfg_ctx *x, const char *v, size_t len)
{
	if (len < 4)
		return 0;
	char **grown = realloc(x->secrets, (x->nsecrets + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	x->secrets = grown;
	if (!(x->secrets[x->nsecrets] = strndup(v, len)))
		return -1;
	x->nsecrets++;
	return 0;
}

void cfg_expand_free(cfg_ctx *x)
{
	for (size_t i = 0; i < x->nsecrets; i++) {
		memset(x->secrets[i], 0, strlen(x->secrets[i]));
		free(x->secrets[i]);
	}
	free(x->secrets);
	x->secrets = NULL;
	x->nsecrets = 0;
}

/* ${file:PATH}: append the file's contents, trailing newlines trimmed. */
static int from_file(cfg_ctx *x, yaml_node_t *n, inbox__buf *out,
                     const char *path, size_t len)
{
	inbox__buf p = INBOX__BUF_INIT;
	if (len == 0)
		return cfg_fail(x, n, "${file:}: a file name is required");
	if (cfg_rebase(x, &p, path, len) < 0 ||
	    inbox__buf_append(&p, "", 0) < 0) {
		inbox__buf_free(&p);
		return cfg_fail(x, n, "out of memory");
	}
	size_t got = 0;
	char *text = cfg_read_file(p.data, &got);
	int rc = 0;
	if (!text)
		rc = cfg_fail(x, n, "${file:%.*s}: cannot read %s: %s",
		              (int)len, path, p.data, strerror(errno));
	else if (got > SECRET_FILE_MAX)
		rc = cfg_fail(x, n, "${file:%.*s}: more than %d bytes",
		              (int)len, path, SECRET_FILE_MAX);
	else if (memchr(text, '\0', got))
		rc = cfg_fail(x, n, "${file:%.*s}: a NUL byte in the file",
		              (int)len, path);
	else {
		while (got > 0 &&
		       (text[got - 1] == '\n' || text[got - 1] == '\r'))
			got--;
		if (got == 0)
			rc = cfg_fail(x, n, "${file:%.*s}: the file is empty",
			              (int)len, path);
		else if (keep_secret(x, text, got) < 0 ||
		         inbox__buf_append(out, text, got) < 0)
			rc = cfg_fail(x, n, "out of memory");
	}
	if (text) {
		memset(text, 0, got); /* a secret: not left in freed memory */
		free(text);
	}
	inbox__buf_free(&p);
	return rc;
}

/* The value of scalar n with its references replaced, into out. */
static int expand_value(cfg_ctx *x, yaml_node_t *n, inbox__buf *out)
{
	const char *s = (const char *)n->data.scalar.value;
	size_t len = n->data.scalar.length;
	for (size_t i = 0; i < len;) {
		if (s[i] == '$' && i + 2 < len && s[i + 1] == '$' &&
		    s[i + 2] == '{') {
			if (inbox__buf_append(out, "${", 2) < 0)
				return cfg_fail(x, n, "out of memory");
			i += 3;
			continue;
		}
		if (!(s[i] == '$' && i + 1 < len && s[i + 1] == '{')) {
			if (inbox__buf_putc(out, s[i]) < 0)
				return cfg_fail(x, n, "out of memory");
			i++;
			continue;
		}
		const char *ref = s + i + 2;
		const char *end = memchr(ref, '}', len - i - 2);
		if (!end)
			return cfg_fail(x, n,
			                "\"${\" without its \"}\" (${NAME}: an "
			                "environment variable, ${file:PATH}: a "
			                "file's contents, $${: a literal ${)");
		size_t rlen = (size_t)(end - ref);
		if (rlen >= 5 && !strncmp(ref, "file:", 5)) {
			if (from_file(x, n, out, ref + 5, rlen - 5))
				return -1;
		} else if (!name_ok(ref, rlen)) {
			return cfg_fail(x, n,
			                "\"${%.*s}\": not a variable name "
			                "(letters, digits and _; ${file:PATH} "
			                "for a file's contents, $${ for a "
			                "literal ${)",
			                (int)(rlen > 64 ? 64 : rlen), ref);
		} else {
			char name[256];
			if (rlen >= sizeof(name))
				return cfg_fail(x, n, "${...}: name too long");
			memcpy(name, ref, rlen);
			name[rlen] = '\0';
			const char *v = getenv(name);
			if (!v)
				return cfg_fail(
				    x, n,
				    "${%s}: the environment variable "
				    "is not set (write $${ for a "
				    "literal ${)",
				    name);
			if (keep_secret(x, v, strlen(v)) < 0 ||
			    inbox__buf_puts(out, v) < 0)
				return cfg_fail(x, n, "out of memory");
		}
		i += 2 + rlen + 1;
	}
	return 0;
}

int cfg_expand(cfg_ctx *x)
{
	yaml_node_t *first = x->doc.nodes.start;
	size_t count = (size_t)(x->doc.nodes.top - first);
	/* Keys are names, not values: never expanded. */
	unsigned char *is_key = calloc(count ? count : 1, 1);
	if (!is_key)
		return cfg_fail(x, NULL, "out of memory");
	for (yaml_node_t *n = first; n < x->doc.nodes.top; n++)
		if (n->type == YAML_MAPPING_NODE)
			for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
			     p < n->data.mapping.pairs.top; p++)
				if (p->key >= 1 && (size_t)p->key <= count)
					is_key[p->key - 1] = 1;
	int rc = 0;
	for (size_t i = 0; i < count && rc == 0; i++) {
		yaml_node_t *n = first + i;
		if (is_key[i] || n->type != YAML_SCALAR_NODE ||
		    !memchr(n->data.scalar.value, '$', n->data.scalar.length))
			continue;
		inbox__buf b = INBOX__BUF_INIT;
		if (expand_value(x, n, &b) < 0)
			rc = -1;
		else if (inbox__buf_append(&b, "", 0) < 0)
			rc = cfg_fail(x, n, "out of memory");
		if (rc < 0) {
			if (b.data)
				memset(b.data, 0, b.len);
			inbox__buf_free(&b);
			break;
		}
		/* libyaml frees the value with free() (yaml_free). */
		memset(n->data.scalar.value, 0, n->data.scalar.length);
		free(n->data.scalar.value);
		n->data.scalar.value = (yaml_char_t *)b.data;
		n->data.scalar.length = b.len;
	}
	free(is_key);
	return rc;
}
