/* Texts no output may show, and scrubbing them out (see secret.h). */
#include "base/secret.h"

#include <stdlib.h>
#include <string.h>

#include "base/url.h"

struct inbox__secrets {
	size_t n, cap;
	char **text; /* longest first */
	size_t *len;
};

#define SHORT_SECRET 6 /* shorter ones are scrubbed as whole words */
#define MIN_TAIL     4 /* the shortest cut-off tail taken for a secret */

static const char hexup[] = "0123456789ABCDEF";
static const char hexlow[] = "0123456789abcdef";

/* One text, unless it is there already. */
static int add_one(inbox__secrets *s, const char *p, size_t n)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < s->n; i++)
		if (s->len[i] == n && memcmp(s->text[i], p, n) == 0)
			return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		char **t = realloc(s->text, cap * sizeof(*t));
		if (!t)
			return -1;
		s->text = t;
		size_t *l = realloc(s->len, cap * sizeof(*l));
		if (!l)
			return -1;
		s->len = l;
		s->cap = cap;
	}
	char *copy = malloc(n + 1);
	if (!copy)
		return -1;
	memcpy(copy, p, n);
	copy[n] = '\0';
	size_t at = s->n;
	while (at > 0 && s->len[at - 1] < n) {
		s->text[at] = s->text[at - 1];
		s->len[at] = s->len[at - 1];
		at--;
	}
	s->text[at] = copy;
	s->len[at] = n;
	s->n++;
	return 0;
}

static int unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

/* [p, p+n) percent-encoded with the digits hex. */
static int add_encoded(inbox__secrets *s, const char *p, size_t n,
                       const char *hex)
{
	char *e = malloc(3 * n + 1);
	size_t j = 0;
	if (!e)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (unreserved(c)) {
			e[j++] = (char)c;
		} else {
			e[j++] = '%';
			e[j++] = hex[c >> 4];
			e[j++] = hex[c & 15];
		}
	}
	int rc = add_one(s, e, j);
	free(e);
	return rc;
}

/* The inside of a libpq '...' value, backslash escapes undone. */
static int add_unquoted(inbox__secrets *s, const char *p, size_t n)
{
	char *u = malloc(n);
	size_t j = 0;
	if (!u)
		return -1;
	for (size_t i = 1; i + 1 < n; i++) {
		if (p[i] == '\\' && i + 2 < n)
			i++;
		u[j++] = p[i];
	}
	int rc = add_one(s, u, j);
	free(u);
	return rc;
}

int inbox__secrets_add(inbox__secrets **set, const char *p, size_t n)
{
	if (n == 0)
		return 0;
	if (!*set && !(*set = calloc(1, sizeof(**set))))
		return -1;
	inbox__secrets *s = *set;
	char *dec = NULL;
	int rc = add_one(s, p, n);
	if (rc == 0 && inbox__url_decode(&dec, p, n) == INBOX_OK) {
		rc = add_one(s, dec, strlen(dec));
		if (rc == 0)
			rc = add_encoded(s, dec, strlen(dec), hexup);
		if (rc == 0)
			rc = add_encoded(s, dec, strlen(dec), hexlow);
	}
	free(dec);
	if (rc == 0 && n >= 2 && p[0] == '\'' && p[n - 1] == '\'')
		rc = add_unquoted(s, p, n);
	return rc;
}

typedef struct url_walk {
	inbox__secrets **set;
	const char *url;
} url_walk;

static int add_span(size_t from, size_t to, void *payload)
{
	url_walk *w = payload;
	return inbox__secrets_add(w->set, w->url + from, to - from) < 0 ? -1
	                                                                : 0;
}

int inbox__secrets_add_url(inbox__secrets **set, const char *url)
{
	url_walk w = {set, url};
	return url ? inbox__url_secrets(url, add_span, &w) : 0;
}

int inbox__secrets_merge(inbox__secrets **set, const inbox__secrets *from)
{
	for (size_t i = 0; from && i < from->n; i++)
		if (inbox__secrets_add(set, from->text[i], from->len[i]) < 0)
			return -1;
	return 0;
}

static int alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

/* An occurrence of text (len n) at msg + pos that scrubbing takes. */
static int taken(const char *msg, size_t pos, const char *text, size_t n)
{
	if (memcmp(msg + pos, text, n) != 0)
		return 0;
	return n >= SHORT_SECRET ||
	       !((pos > 0 && alnum(msg[pos - 1])) || alnum(msg[pos + n]));
}

/* Replace [pos, pos+n) of msg (length *len, buffer cap) by "***". */
static void replace(char *msg, size_t *len, size_t cap, size_t pos, size_t n)
{
	size_t tail = *len - pos - n;
	if (pos + 3 >= cap) { /* no room for the mark: cut */
		msg[pos] = '\0';
		*len = pos;
		return;
	}
	if (pos + 3 + tail >= cap)
		tail = cap - pos - 4;
	memmove(msg + pos + 3, msg + pos + n, tail);
	memcpy(msg + pos, "***", 3);
	msg[pos + 3 + tail] = '\0';
	*len = pos + 3 + tail;
}

static void scrub_tail(const inbox__secrets *s, char *msg, size_t *len,
                       size_t cap)
{
	for (size_t i = 0; i < s->n; i++) {
		size_t max = s->len[i] - 1 < *len ? s->len[i] - 1 : *len;
		for (size_t k = max; k >= MIN_TAIL; k--)
			if (memcmp(msg + *len - k, s->text[i], k) == 0) {
				replace(msg, len, cap, *len - k, k);
				break;
			}
	}
}

void inbox__secrets_scrub(const inbox__secrets *set, char *msg, size_t cap,
                          int truncated)
{
	if (!set || !msg || cap == 0)
		return;
	size_t len = strlen(msg);
	for (size_t i = 0; i < set->n; i++) {
		const char *t = set->text[i];
		size_t n = set->len[i], pos = 0;
		while (pos + n <= len) {
			if (taken(msg, pos, t, n)) {
				replace(msg, &len, cap, pos, n);
				pos += 3;
			} else {
				pos++;
			}
		}
	}
	if (truncated)
		scrub_tail(set, msg, &len, cap);
}

int inbox__secrets_found(const inbox__secrets *set, const char *msg)
{
	size_t len = msg ? strlen(msg) : 0;
	for (size_t i = 0; set && i < set->n; i++)
		for (size_t pos = 0; pos + set->len[i] <= len; pos++)
			if (taken(msg, pos, set->text[i], set->len[i]))
				return 1;
	return 0;
}

void inbox__secrets_free(inbox__secrets *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++) {
		memset(set->text[i], 0, set->len[i]);
		free(set->text[i]);
	}
	free(set->text);
	free(set->len);
	free(set);
}
