/*
 * Internal JSON utilities: parsing with clear reasons, RFC 6901 pointers,
 * RFC 8785 canonical JSON, SHA-256 fingerprints, key templates.
 * Shared between the core, the stores' callers and the daemon.
 */
#ifndef INBOX_BASE_JSON_H
#define INBOX_BASE_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "base/buf.h"

/* 1 if [s, s+len) is well-formed UTF-8 (no overlongs, no surrogates, no
 * code points above U+10FFFF), else 0. */
int inbox__utf8_valid(const char *s, size_t len);

/* Length of the well-formed UTF-8 sequence at s (at most n bytes left,
 * n >= 1), or 0 if there is none there. */
size_t inbox__utf8_seq_len(const unsigned char *s, size_t n);

/* Parse a JSON document. Rejects invalid UTF-8 ("invalid UTF-8 at byte N"),
 * malformed JSON ("malformed JSON: <jansson text> at line L column C"),
 * and duplicate object names (I-JSON). Integers too large for int64 are
 * parsed as reals. Returns 0 and *out (a new reference), INBOX_ERR_INVALID
 * and the reason in err, or INBOX_ERR_NOMEM (an allocation failed, in
 * jansson too: never reported as malformed input). */
int inbox__json_parse(const char *buf, size_t len, json_t **out, char *err,
                      size_t errlen);
/* Put the allocation-failure tracker in front of jansson's allocator
 * (once per process; inbox__json_parse calls it). */
void inbox__json_alloc_init(void);

/* RFC 6901. 1 if `ptr` is a syntactically valid pointer ("" or "/..."). */
int inbox__pointer_valid(const char *ptr);
/* Resolve; returns the borrowed value or NULL if absent or ptr invalid.
 * Never allocates. */
json_t *inbox__pointer_get(json_t *root, const char *ptr);

/* Append [s, s+len) (valid UTF-8) as a JSON string, escaped as RFC 8785
 * does: ", \\ and the controls only. 0 or -1 on NOMEM. */
int inbox__json_string_append(inbox__buf *out, const char *s, size_t len);

/* Append the RFC 8785 canonical form of v to out. 0 or -1 (NOMEM, or a
 * non-finite number). */
int inbox__canon_append(inbox__buf *out, const json_t *v);

/* Append v as text: a string's raw content, numbers in their shortest
 * round-trip (ECMAScript) form, integers exactly, true/false, objects and
 * arrays canonical. JSON null appends nothing and returns 1; otherwise 0;
 * -1 on NOMEM. */
int inbox__value_text(inbox__buf *out, const json_t *v);

/* Lower-case hex SHA-256 of data ("" in hex if OpenSSL fails). */
void inbox__sha256_hex(const void *data, size_t len, char hex[65]);
/* The same of the n parts one after the other. */
void inbox__sha256_parts_hex(const void *const *parts, const size_t *lens,
                             int n, char hex[65]);

/* Key templates: literal text with {id} and {/json/pointer} placeholders,
 * "{{" and "}}" for literal braces. */
typedef struct inbox__keytmpl inbox__keytmpl;
/* NULL or "" template means "{id}". 0, INBOX_ERR_INVALID with err set, or
 * INBOX_ERR_NOMEM. */
int inbox__keytmpl_compile(inbox__keytmpl **out, const char *tmpl, char *err,
                           size_t errlen);
/* Render into out (reset first). msg_id may be NULL: "{id}" then fails.
 * Fails with "missing key field /data/orderId" when a pointer resolves to
 * nothing or null, "key field /x is not a string or number" for objects,
 * arrays and booleans, "empty key" if the result is empty. 0,
 * INBOX_ERR_INVALID (err set: the message is at fault) or INBOX_ERR_NOMEM.
 */
int inbox__keytmpl_render(const inbox__keytmpl *t, json_t *root,
                          const char *msg_id, inbox__buf *out, char *err,
                          size_t errlen);
/* 1 if the template uses {id}. */
int inbox__keytmpl_uses_id(const inbox__keytmpl *t);
void inbox__keytmpl_free(inbox__keytmpl *t);

#endif
