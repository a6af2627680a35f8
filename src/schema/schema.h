/*
 * JSON Schema (draft 7) validation, internal interface.
 *
 * A schema is compiled once (inbox__schema_compile) into a graph of nodes:
 * every keyword's value is checked and converted (numbers, regexes,
 * property tables, resolved $refs), so validating a message only walks the
 * graph and the parsed payload, without allocating. Anything the compiler
 * does not understand is refused (see docs/schema.md): an unsupported
 * keyword, an unknown format, a reference outside the document.
 *
 * The public face is inbox_schema_* in inbox.h; the consumer calls
 * inbox__schema_check() on the parsed payload before any effect.
 */
#ifndef INBOX_SCHEMA_SCHEMA_H
#define INBOX_SCHEMA_SCHEMA_H

#include <inbox/inbox.h>
#include <jansson.h>
#include <stddef.h>

/* Compile `doc` (a reference is taken: the schema keeps the document for
 * enum/const values). INBOX_OK, or INBOX_ERR_INVALID / INBOX_ERR_NOMEM
 * with the reason in err. */
int inbox__schema_compile(inbox_schema **out, json_t *doc, char *err,
                          size_t errlen);

/* Validate `inst`. 0 when valid; -1 with the first violation in reason:
 * "schema violation at /data/totalCents: minimum: -5 is less than 0". */
int inbox__schema_check(inbox_schema *s, const json_t *inst, char *reason,
                        size_t rlen);

/* Validate `inst`, calling fn for every violation (or only the first when
 * all == 0) until fn returns non-zero. Returns the number of violations
 * reported. The strings passed to fn live during the call only. */
size_t inbox__schema_each(inbox_schema *s, const json_t *inst, int all,
                          inbox_schema_error_fn fn, void *payload);

#endif
