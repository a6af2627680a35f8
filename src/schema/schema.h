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
#include <stdint.h>

/* Compile `doc` (a reference is taken: the schema keeps the document for
 * enum/const values). INBOX_OK, or INBOX_ERR_INVALID / INBOX_ERR_NOMEM
 * with the reason in err. */
int inbox__schema_compile(inbox_schema **out, json_t *doc, char *err,
                          size_t errlen);

/* The work of one validation is bounded by the size of the message (its
 * JSON text, in bytes): SCH_STEPS_BASE + SCH_STEPS_PER_BYTE x size steps.
 * A step is about one schema node applied to one value (tens of
 * nanoseconds); members, compared or hashed values, scanned strings and
 * regex backtracking are charged too. 1 MiB: 9.4 million steps. */
#define SCH_STEPS_BASE     1000000u
#define SCH_STEPS_PER_BYTE 8u
uint64_t inbox__schema_budget(size_t size);

/* The keyword with which a validation that had to stop is reported (the
 * step budget, the nesting depth, a regex too costly to match): the
 * message then is the whole reason, "schema validation exceeded ...". */
#define SCH_LIMIT_KEYWORD "limit"

/* Validate `inst`, parsed from `size` bytes (the budget). 0 when valid; -1
 * with the first violation in reason:
 *   schema violation at /data/totalCents: minimum: -5 is less than 0
 * or why the validation stopped:
 *   schema validation exceeded 17777216 steps (the budget of a message
 *   of 1048576 bytes): too costly to validate against this schema */
int inbox__schema_check(inbox_schema *s, const json_t *inst, size_t size,
                        char *reason, size_t rlen);

/* Validate `inst`, calling fn for every violation (or only the first when
 * all == 0) until fn returns non-zero. Returns the number of violations
 * reported (a stop counts as one, keyword SCH_LIMIT_KEYWORD). The strings
 * passed to fn live during the call only. */
size_t inbox__schema_each(inbox_schema *s, const json_t *inst, size_t size,
                          int all, inbox_schema_error_fn fn, void *payload);

/* Steps the last validation with s took (tests, benchmarks). */
uint64_t inbox__schema_last_steps(const inbox_schema *s);

#endif
