/* Kafka source: message headers as the delivery id and as JSON text. */
#include <stdio.h>
#include <string.h>

#include "base/json.h"
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
	/* A usable id is non-empty UTF-8 text without NUL bytes; any other
	 * is refused, never cut or replaced by the payload's. */
	char what[320];
	long at;
	snprintf(what, sizeof(what), "Kafka header \"%.256s\"", name);
	int ok = inbox__src_check_id(out, what, val, size, &at);
	if (ok == 0)
		return 0;
	if (ok < 0)
		return at < 0 ? -1 : 1;
	if (inbox__buf_append(out, val, size) < 0 ||
	    inbox__buf_putc(out, '\0') < 0)
		return -1;
	return 1;
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
		/* Duplicates would make an invalid I-JSON object: keep the
		 * last value only. A name that is not UTF-8 is kept as "hex:"
		 * + its bytes (inbox__src_json_text), never dropped. */
		if (repeated_later(hdrs, i, name))
			continue;
		if ((!first && inbox__buf_putc(out, ',') < 0) ||
		    inbox__src_json_text(out, name, nlen, 0) < 0 ||
		    inbox__buf_putc(out, ':') < 0)
			return -1;
		first = 0;
		if ((val ? inbox__src_json_text(out, val, size, 0)
		         : inbox__buf_puts(out, "null")) < 0)
			return -1;
	}
	if (inbox__buf_putc(out, '}') < 0 || inbox__buf_putc(out, '\0') < 0)
		return -1;
	return 0;
}
