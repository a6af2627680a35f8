/*
 * The texts no output may show: the secrets of a source's or a store's
 * URL (what is secret is defined once, in base/url.h) and whatever else a
 * backend knows to be one. Scrubbed from every error message before it
 * reaches a handle's errmsg (inbox__source_seterr, inbox__store_seterr),
 * the client libraries' own texts included, and by the CLI from what it
 * prints. Internal: no ABI promise.
 *
 * A set is built while a handle is opened and only read afterwards, so
 * any number of threads may scrub with it at once.
 */
#ifndef INBOX_BASE_SECRET_H
#define INBOX_BASE_SECRET_H

#include <stddef.h>

typedef struct inbox__secrets inbox__secrets;

/* Add [p, p+n) to *set (created when *set is NULL) in every spelling an
 * error text could quote it in: as given; percent-decoded; percent-encoded
 * with upper- and lower-case hex digits; and, for a libpq '...' value, the
 * text between the quotes unescaped. Nothing for n == 0. 0, or -1 on
 * NOMEM (what was added stays). */
int inbox__secrets_add(inbox__secrets **set, const char *p, size_t n);

/* Add each secret span of url (inbox__url_secrets). 0 or -1 (NOMEM). */
int inbox__secrets_add_url(inbox__secrets **set, const char *url);

/* Add every text of from (may be NULL) to *set. 0 or -1 (NOMEM). */
int inbox__secrets_merge(inbox__secrets **set, const inbox__secrets *from);

/* Replace in msg (NUL-terminated, in a buffer of cap bytes) each
 * occurrence of a secret by "***": a secret of 6 bytes or more wherever
 * it occurs, a shorter one only where no letter or digit touches it (so
 * "able" is not taken out of "durable"). With truncated (msg was cut to
 * fit), a tail of msg of 4 bytes or more that starts a secret is replaced
 * too. Longer secrets first. set NULL: nothing. */
void inbox__secrets_scrub(const inbox__secrets *set, char *msg, size_t cap,
                          int truncated);

/* 1 if msg holds a secret of set as inbox__secrets_scrub would find it. */
int inbox__secrets_found(const inbox__secrets *set, const char *msg);

void inbox__secrets_free(inbox__secrets *set);

#endif
