/* Kafka source: message headers as the delivery id and as JSON text. */
#include <string.h>

#include "core/json.h"
#include "source/kafka/kafka.h"

int inbox__kafka_header_id(inbox__buf *out, rd_kafka_headers_t *hdrs,
                           const char *name)
{
	const void *val = NULL;
	size_t size = 0;
	if (!hdrs || !name ||
	    rd_kafka_header_get_last(hdrs, name, &val, &size) !=
	        RD_KAFKA_RESP_ERR_NO_ERROR)
		return 0;
	/* A usable id is non-empty UTF-8 text without NUL bytes. */
	if (!val || size == 0 || memchr(val, '\0', size) ||
	    !inbox__utf8_valid(val, size))
		return 0;
	if (inbox__buf_append(out, val, size) < 0 ||
	    inbox__buf_putc(out, '\0') < 0)
		return -1;
	return 1;
}

/* Append s as a JSON string (s is valid UTF-8). */
static int put_json_string(inbox__buf *out, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	if (inbox__buf_reserve(out, n + 2) < 0 || inbox__buf_putc(out, '"'))
		return -1;
	size_t run = 0; /* start of the bytes copied verbatim */
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		if (inbox__buf_append(out, s + run, i - run) < 0)
			return -1;
		run = i + 1;
		char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
		switch (c) {
		case '"':
		case '\\':
			esc[1] = (char)c;
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\t':
			esc[1] = 't';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
		}
		if (inbox__buf_puts(out, esc) < 0)
			return -1;
	}
	if (inbox__buf_append(out, s + run, n - run) < 0)
		return -1;
	return inbox__buf_putc(out, '"');
}

static int put_hex_string(inbox__buf *out, const unsigned char *v, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	if (inbox__buf_reserve(out, 2 * n + 6) < 0 ||
	    inbox__buf_puts(out, "\"hex:") < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char h[2] = {hex[v[i] >> 4], hex[v[i] & 15]};
		if (inbox__buf_append(out, h, 2) < 0)
			return -1;
	}
	return inbox__buf_putc(out, '"');
}

/* 1 if a later header (index > idx) has the same name. */
static int repeated_later(rd_kafka_headers_t *hdrs, size_t idx,
                          const char *name)
{
	const char *n2;
	const void *v;
	size_t sz;
	for (size_t j = idx + 1;
	     rd_kafka_header_get_all(hdrs, j, &n2, &v, &sz) ==
	     RD_KAFKA_RESP_ERR_NO_ERROR;
	     j++)
		if (strcmp(n2, name) == 0)
			return 1;
	return 0;
}

int inbox__kafka_headers_json(inbox__buf *out, rd_kafka_headers_t *hdrs)
{
	const char *name;
	const void *val;
	size_t size;
	int first = 1;
	if (inbox__buf_putc(out, '{') < 0)
		return -1;
	for (size_t i = 0;
	     rd_kafka_header_get_all(hdrs, i, &name, &val, &size) ==
	     RD_KAFKA_RESP_ERR_NO_ERROR;
	     i++) {
		size_t nlen = strlen(name);
		/* Names must be valid JSON text; duplicates would make an
		 * invalid I-JSON object: keep the last value only. */
		if (!inbox__utf8_valid(name, nlen) ||
		    repeated_later(hdrs, i, name))
			continue;
		if ((!first && inbox__buf_putc(out, ',') < 0) ||
		    put_json_string(out, name, nlen) < 0 ||
		    inbox__buf_putc(out, ':') < 0)
			return -1;
		first = 0;
		int rc;
		if (!val)
			rc = inbox__buf_puts(out, "null");
		else if (inbox__utf8_valid(val, size) &&
		         !memchr(val, '\0', size))
			rc = put_json_string(out, val, size);
		else
			rc = put_hex_string(out, val, size);
		if (rc < 0)
			return -1;
	}
	if (inbox__buf_putc(out, '}') < 0 || inbox__buf_putc(out, '\0') < 0)
		return -1;
	return 0;
}
