/* NATS source: headers as JSON text, error texts without secrets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "source/nats/nats_source.h"

/* Header names and values are NUL-terminated here. */
static int put_string(inbox__buf *out, const char *s)
{
	return inbox__src_json_text(out, s, strlen(s), 0);
}

static int put_values(inbox__buf *out, natsMsg *m, const char *key)
{
	const char **vals = NULL;
	int nv = 0;
	if (natsMsgHeader_Values(m, key, &vals, &nv) != NATS_OK || nv <= 0) {
		free((void *)vals);
		return inbox__buf_puts(out, "null");
	}
	int rc = 0;
	if (nv == 1) {
		rc = put_string(out, vals[0]);
	} else {
		rc = inbox__buf_putc(out, '[');
		for (int i = 0; i < nv && rc == 0; i++) {
			if (i > 0)
				rc = inbox__buf_putc(out, ',');
			if (rc == 0)
				rc = put_string(out, vals[i]);
		}
		if (rc == 0)
			rc = inbox__buf_putc(out, ']');
	}
	free((void *)vals);
	return rc;
}

int inbox__nats_headers_json(natsMsg *m, inbox__buf *out, int *has)
{
	const char **keys = NULL;
	int nk = 0;
	*has = 0;
	if (natsMsgHeader_Keys(m, &keys, &nk) != NATS_OK || nk <= 0) {
		free((void *)keys);
		return 0;
	}
	int rc = inbox__buf_putc(out, '{');
	for (int i = 0; i < nk && rc == 0; i++) {
		if (i > 0)
			rc = inbox__buf_putc(out, ',');
		if (rc == 0)
			rc = put_string(out, keys[i]);
		if (rc == 0)
			rc = inbox__buf_putc(out, ':');
		if (rc == 0)
			rc = put_values(out, m, keys[i]);
	}
	if (rc == 0)
		rc = inbox__buf_append(out, "}", 2); /* with the NUL */
	free((void *)keys);
	if (rc == 0)
		*has = 1;
	return rc;
}

/* Replace every occurrence of secret in buf (of size len) by "***". */
static void scrub(char *buf, size_t len, const char *secret)
{
	size_t sl = secret ? strlen(secret) : 0;
	if (sl == 0 || len == 0 || !strstr(buf, secret))
		return;
	char *src = strdup(buf);
	if (!src) {
		snprintf(buf, len, "(error text withheld)");
		return;
	}
	size_t j = 0;
	for (const char *p = src; *p && j + 1 < len;) {
		if (strncmp(p, secret, sl) == 0) {
			for (const char *r = "***"; *r && j + 1 < len; r++)
				buf[j++] = *r;
			p += sl;
		} else {
			buf[j++] = *p++;
		}
	}
	buf[j] = '\0';
	free(src);
}

void inbox__nats_errtext(const nats_source *ns, natsStatus s, char *buf,
                         size_t len)
{
	natsStatus last = NATS_OK;
	const char *t = nats_GetLastError(&last);
	if (!t || !*t)
		t = natsStatus_GetText(s);
	snprintf(buf, len, "%s", t);
	scrub(buf, len, ns->password);
	scrub(buf, len, ns->token);
}
