/*
 * URL syntax shared by the source backends and by inbox_redact_url:
 *
 *   SCHEME://[USERINFO@]HOSTS[/PATH][?QUERY][#FRAGMENT]
 *
 * The user info ends at the '@' before the first '/' after "//". The
 * client libraries do not agree on which '@' that is when there are
 * several (libpq and rabbitmq-c take the first, cnats the last one in the
 * whole URL), nor on whether a '/', '?' or '#' can sit in a password, so
 * a URL where it matters is refused (inbox__url_check) and only the
 * unambiguous form is ever parsed. Each source keeps its own rules (which
 * parts it needs, what its path means, its parameters) and error
 * messages; these are the pieces they share. Internal: no ABI promise.
 *
 * What is secret in a URL is defined once, below (inbox__url_secrets),
 * and applied to every output: inbox_redact_url hides it, and the
 * sources' and stores' error texts, the client libraries' included, are
 * scrubbed of it (base/secret.h).
 */
#ifndef INBOX_BASE_URL_H
#define INBOX_BASE_URL_H

#include <stddef.h>
#include <stdint.h>

#include <inbox/sys/source.h>

/* The value of hex digit c (either case), or -1. */
int inbox__hexval(unsigned char c);

/* Percent-decode [p, p+n) into *out (malloc'ed, NUL-terminated). Strict:
 * a '%' must be followed by two hex digits and must not encode NUL.
 * INBOX_OK, INBOX_ERR_URL (a bad escape) or INBOX_ERR_NOMEM; *out is NULL
 * on failure. */
int inbox__url_decode(char **out, const char *p, size_t n);

/* The '@' that ends the user info of the authority starting at auth (just
 * past "//"): the last '@' before the first '/' (the only one in a URL
 * that inbox__url_check accepts). NULL when there is none. */
const char *inbox__url_userinfo_end(const char *auth);

/* ---- What is secret ----------------------------------------------------
 *
 * In SCHEME://... (any scheme):
 *   - the password of the user info: after its first ':', up to the '@'
 *     ending it. With no ':', the whole user info, except for postgresql,
 *     postgres and amqp, where a bare user info is a user name (nats://
 *     TOKEN@, redis://PASSWORD@ - which the Redis source refuses -, and
 *     every other scheme: a credential). jsonl: has no user info
 *     ("jsonl://x" is the path "//x").
 *     For this the user info runs up to the LAST '@' of the URL, whatever
 *     comes between: what any client library could take as the password
 *     (libpq: up to the first '@', cnats: up to the last) is inside;
 *     and when it holds a '/', '?', '#', '@', '[' or ']' (a URL that
 *     inbox__url_check refuses), all of it is secret, user name and all.
 *   - the value of every parameter whose percent-decoded name contains,
 *     in any case, one of pass, pwd, secret, token, key, cred, auth, jaas,
 *     config, signature: in the query of a URL (from its first '?'),
 *     "NAME=VALUE" between '&'s ('#' and '?' included in either),
 *     and in libpq "keyword=value" strings (up to a space, or a quoted
 *     '...'). So rdkafka.sasl.password,
 *     rdkafka.ssl.key.password, rdkafka.sasl.oauthbearer.client.secret,
 *     libpq's password and sslpassword, and whatever a new property is
 *     called, as long as its name says what it is. Except the names
 *     of files, whose path is no secret and is worth seeing in an
 *     error: libpq's sslkey, our tls_key, and every name ending in
 *     ".location" (rdkafka.ssl.key.location; ssl.key.pem and
 *     ssl.key.password stay secret).
 * A string that does not start with SCHEME ':' is read as a libpq
 * keyword/value string.
 */

/* 1 if a parameter or property called name (decoded) holds a secret by
 * the rule above. */
int inbox__secret_name(const char *name);

/* The same for a name [p, p+n) as written in a URL (percent-decoded, or
 * as it is when it does not decode). */
int inbox__url_secret_name(const char *p, size_t n);

/* Called for each secret span [from, to) of url (from < to), in no
 * particular order; spans may overlap. Nonzero stops the walk. */
typedef int (*inbox__url_span_fn)(size_t from, size_t to, void *payload);

/* Walk the secret spans of url by the rule above. 0, or fn's nonzero. */
int inbox__url_secrets(const char *url, inbox__url_span_fn fn, void *payload);

/* A SCHEME://... URL that the client libraries would split differently:
 * more than one raw '@' after "//", or a raw '/', '?', '#', '[' or ']'
 * before the '@' (libpq would end the user info at the first '@', cnats
 * at the last, rabbitmq-c at the first of ":@/?#[]"; a '/' makes libpq
 * read "user:pass/x@host" as a host and a port). 0 when it is unambiguous
 * (or has no authority: "sqlite:///path"), else -1 with *why a fixed text
 * that quotes nothing of the URL. */
int inbox__url_check(const char *url, const char **why);

/* inbox__url_check, reporting a refusal in src's errmsg as "WHO: why".
 * INBOX_OK or INBOX_ERR_URL. */
int inbox__url_refuse_ambiguous(inbox_source *src, const char *who,
                                const char *url);

/* A split URL: spans into the string given to inbox__url_split. A part
 * that is absent has a NULL pointer (and length 0); a present one may be
 * empty. */
typedef struct inbox__url {
	const char *userinfo; /* before the '@' (see inbox__url_userinfo_end) */
	size_t userinfo_len;
	const char *hosts; /* after it, up to '/', '?' (or '#'); never NULL */
	size_t hosts_len;
	const char *path; /* after the '/' that ends the hosts, up to '?' (or
	                     '#'); NULL when the hosts end otherwise */
	size_t path_len;
	const char *query; /* after '?', up to '#' (with FRAGMENT) or the end */
	size_t query_len;
	const char *fragment; /* after '#'; only with INBOX__URL_FRAGMENT */
	size_t fragment_len;
} inbox__url;

/* inbox__url_split flag: '#' starts a fragment. Without it '#' is an
 * ordinary character of whichever part it is in. */
#define INBOX__URL_FRAGMENT 1u

/* Split url, which must start with scheme and "://" (case-sensitive),
 * into *out. INBOX_OK, or INBOX_ERR_URL for another scheme. Nothing is
 * decoded or checked beyond that. */
int inbox__url_split(inbox__url *out, const char *url, const char *scheme,
                     unsigned flags);

/* HOST[:PORT] or [IPV6][:PORT] in [p, p+n): the host (brackets removed)
 * into *host and *hlen, the port into *port if there is one (else *port
 * is left alone). 0, or -1 for an empty host, an unclosed '[', anything
 * but ":PORT" after ']', or a port that is not 1..65535. */
int inbox__url_hostport(const char **host, size_t *hlen, int *port,
                        const char *p, size_t n);

/* 1 when [p, p+n) is non-empty printable ASCII without spaces, else 0:
 * what a host or a host list may hold. */
int inbox__url_printable(const char *p, size_t n);

/* A decimal integer in [min, max] from [p, p+n) into *out: digits only,
 * with a leading '-' only where min < 0 (no spaces, no '+'). 0 or -1. */
int inbox__url_int(long long *out, const char *p, size_t n, long long min,
                   long long max);

/* A duration into milliseconds: an integer and a unit, ms, s, m or h
 * ("500ms", "30s", "2m"), small enough that it fits in int64
 * nanoseconds. A bare integer means milliseconds, or with unit_required
 * is refused unless it is 0. 0 or -1. */
int inbox__url_duration_ms(int64_t *out, const char *v, int unit_required);

/* Replace *dst by a copy of v. INBOX_OK or INBOX_ERR_NOMEM (*dst kept). */
int inbox__url_set_str(char **dst, const char *v);

/* The helpers below report a refusal in src's errmsg as "WHO: ...", who
 * being the source's scheme ("amqp"). None echoes a decoded value. */

/* inbox__url_decode into *dst, freeing what it held. A bad escape gives
 * INBOX_ERR_URL with "WHO: bad %-escape in the WHAT" (*dst kept). */
int inbox__url_decode_part(char **dst, inbox_source *src, const char *who,
                           const char *what, const char *p, size_t n);

/* USER[:PASSWORD] of [p, p+n) (a user info), split at the first ':':
 * USER decoded into *user and, when there is a ':', PASSWORD into *pass
 * (each replacing what it held). A bad escape gives INBOX_ERR_URL with
 * "WHO: bad %-escape in the user info". */
int inbox__url_userinfo(char **user, char **pass, inbox_source *src,
                        const char *who, const char *p, size_t n);

/* inbox__url_int of the string v; out of range or not a number gives
 * INBOX_ERR_URL with "WHO: NAME must be MIN..MAX". */
int inbox__url_int_param(long long *out, inbox_source *src, const char *who,
                         const char *name, const char *v, long long min,
                         long long max);

/* A time-valued parameter, in milliseconds: a duration with a unit, as
 * the config takes them ("500ms", "30s", "5m", "1h"), or a bare integer
 * in `bare_ms` milliseconds (1 for a parameter that was in milliseconds,
 * 1000 for one in seconds: a bare number keeps its old meaning). Outside
 * [min_ms, max_ms] or unreadable: INBOX_ERR_URL with "WHO: bad value for
 * NAME: 'V' (a duration in min..max: ...)". */
int inbox__url_duration_param(int64_t *out, inbox_source *src, const char *who,
                              const char *name, const char *v, int64_t bare_ms,
                              int64_t min_ms, int64_t max_ms);

/* inbox__url_params flags. */
#define INBOX__URL_NEED_EQ 2u /* a parameter without '=' is an error */
#define INBOX__URL_RAW     4u /* keys and values as written: no decoding */

/* One parameter: key and value NUL-terminated, valid until it returns;
 * value NULL when the parameter has no '='. Returns INBOX_OK or an error
 * (its message set on the source). */
typedef int (*inbox__url_param_fn)(const char *key, const char *value,
                                   void *payload);

/* Call fn for each non-empty '&'-separated KEY[=VALUE] of [q, q+n), in
 * order, both percent-decoded unless INBOX__URL_RAW; stop at the first
 * error. INBOX_OK, fn's error, INBOX_ERR_NOMEM, or INBOX_ERR_URL with
 * errmsg for a missing '=' (INBOX__URL_NEED_EQ) or a bad escape. */
int inbox__url_params(inbox_source *src, const char *who, const char *q,
                      size_t n, unsigned flags, inbox__url_param_fn fn,
                      void *payload);

#endif
