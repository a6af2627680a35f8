/*
 * JSON utilities: parsing with clear reasons, RFC 6901 pointers, RFC 8785
 * (JCS) canonical form, value text, SHA-256.
 *
 * Canonical form: members sorted by their names as UTF-16 code units, no
 * whitespace, minimal string escapes, numbers as ECMAScript
 * Number.prototype.toString of the IEEE-754 double (integers are converted
 * to double first, as I-JSON requires).
 */
#include "base/json.h"

#include <inbox/inbox.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <pthread.h>

/* ------------------------------------------------------------------ */
/* UTF-8                                                                */
/* ------------------------------------------------------------------ */

/* Length of the well-formed sequence at s (at most n bytes), 0 if none.
 * Follows the Unicode table of well-formed byte sequences (no overlongs,
 * no surrogates, nothing above U+10FFFF). */
size_t inbox__utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	if (c < 0xC2)
		return 0;
	if (c < 0xE0) {
		if (n < 2 || (s[1] & 0xC0) != 0x80)
			return 0;
		return 2;
	}
	if (c < 0xF0) {
		if (n < 3)
			return 0;
		unsigned char lo = 0x80, hi = 0xBF;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
		if (s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80)
			return 0;
		return 3;
	}
	if (c < 0xF5) {
		if (n < 4)
			return 0;
		unsigned char lo = 0x80, hi = 0xBF;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
		if (s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80 ||
		    (s[3] & 0xC0) != 0x80)
			return 0;
		return 4;
	}
	return 0;
}

/* Offset of the first invalid byte, or len if all of it is valid. */
static size_t utf8_invalid_at(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	while (i < len) {
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		size_t k = inbox__utf8_seq_len(p + i, len - i);
		if (k == 0)
			return i;
		i += k;
	}
	return len;
}

/* Make a message safe to store and print: control characters become '?',
 * and an incomplete sequence at the end (cut by a fixed-size buffer)
 * is dropped. */
static void clean_text(char *s)
{
	size_t n = strlen(s), i = 0;
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7F) {
			s[i++] = '?';
			continue;
		}
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t k =
		    inbox__utf8_seq_len((const unsigned char *)s + i, n - i);
		if (k == 0) {
			s[i] = '\0';
			return;
		}
		i += k;
	}
}

int inbox__utf8_valid(const char *s, size_t len)
{
	if (!s)
		return len == 0;
	return utf8_invalid_at(s, len) == len;
}

/* ------------------------------------------------------------------ */
/* Parsing                                                              */
/* ------------------------------------------------------------------ */

/* jansson reports some allocation failures of its parser as syntax
 * errors ("invalid token" when a string cannot be copied out) or not at
 * all (a byte its token buffer could not take is dropped), so a message
 * could be dead-lettered, or parsed wrong, because memory ran short. The
 * parser's allocations go through this chained allocator (installed once,
 * in front of whatever allocator was installed before), which notes a
 * failure on the calling thread: the parse is then reported as NOMEM. */
static json_malloc_t json_prev_malloc;
static _Thread_local int json_oom;
static pthread_once_t json_alloc_once = PTHREAD_ONCE_INIT;

static void *json_track_malloc(size_t n)
{
	void *p = json_prev_malloc(n);
	if (!p)
		json_oom = 1;
	return p;
}

static void json_track_install(void)
{
	json_free_t prev_free;
	json_get_alloc_funcs(&json_prev_malloc, &prev_free);
	json_set_alloc_funcs(json_track_malloc, prev_free);
}

void inbox__json_alloc_init(void)
{
	pthread_once(&json_alloc_once, json_track_install);
}

int inbox__json_parse(const char *buf, size_t len, json_t **out, char *err,
                      size_t errlen)
{
	char dummy[1];
	if (!err || errlen == 0) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	*out = NULL;
	if (!buf || len == 0) {
		snprintf(err, errlen, "empty payload");
		return INBOX_ERR_INVALID;
	}
	size_t bad = utf8_invalid_at(buf, len);
	if (bad != len) {
		snprintf(err, errlen, "invalid UTF-8 at byte %zu", bad);
		return INBOX_ERR_INVALID;
	}
	/* A raw NUL is never valid JSON text (inside strings it must be
	 * escaped), but jansson silently drops one that follows a number:
	 * "[1\0,2]" would load as [1,2]. */
	const char *nul = memchr(buf, '\0', len);
	if (nul) {
		snprintf(err, errlen, "malformed JSON: NUL byte at byte %zu",
		         (size_t)(nul - buf));
		return INBOX_ERR_INVALID;
	}
	inbox__json_alloc_init();
	size_t flags =
	    JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL;
	json_error_t e;
	json_oom = 0;
	json_t *v = json_loadb(buf, len, flags, &e);
	if (!v && !json_oom &&
	    json_error_code(&e) == json_error_numeric_overflow) {
		/* An integer beyond int64: I-JSON numbers are doubles anyway.
		 */
		v = json_loadb(buf, len, flags | JSON_DECODE_INT_AS_REAL, &e);
	}
	/* An empty text: jansson failed without saying why (it does so
	 * only when an allocation failed). */
	if (json_oom ||
	    (!v && (e.text[0] == '\0' ||
	            json_error_code(&e) == json_error_out_of_memory))) {
		json_oom = 0;
		json_decref(v);
		snprintf(err, errlen, "out of memory");
		return INBOX_ERR_NOMEM;
	}
	if (!v) {
		/* jansson quotes the input near the error, cut to its buffer
		 * size, possibly inside a character. */
		snprintf(err, errlen, "malformed JSON: %s at line %d column %d",
		         e.text, e.line, e.column);
		clean_text(err);
		return INBOX_ERR_INVALID;
	}
	*out = v;
	return 0;
}

/* ------------------------------------------------------------------ */
/* RFC 6901 pointers                                                    */
/* ------------------------------------------------------------------ */

int inbox__pointer_valid(const char *ptr)
{
	if (!ptr)
		return 0;
	if (ptr[0] == '\0')
		return 1;
	if (ptr[0] != '/')
		return 0;
	for (const char *p = ptr; *p; p++) {
		if (*p == '~' && p[1] != '0' && p[1] != '1')
			return 0;
	}
	return 1;
}

/* Array index token: "0" or [1-9][0-9]*, below size. */
static int parse_index(const char *tok, size_t len, size_t size, size_t *idx)
{
	if (len == 0 || len > 19)
		return -1;
	if (tok[0] == '0' && len > 1)
		return -1;
	size_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (tok[i] < '0' || tok[i] > '9')
			return -1;
		v = v * 10 + (size_t)(tok[i] - '0');
	}
	if (v >= size)
		return -1;
	*idx = v;
	return 0;
}

/* The member of obj named by the escaped token [tok, tok+len) ("~1" for
 * '/', "~0" for '~'): compared as it is decoded, so a lookup never
 * allocates (and never fails for want of memory). */
static json_t *member_escaped(json_t *obj, const char *tok, size_t len)
{
	const char *k;
	size_t klen;
	json_t *v;
	json_object_keylen_foreach(obj, k, klen, v)
	{
		size_t i = 0, j = 0;
		while (i < len && j < klen) {
			char c = tok[i];
			if (c == '~') {
				c = tok[i + 1] == '1' ? '/' : '~';
				i++;
			}
			if (c != k[j])
				break;
			i++;
			j++;
		}
		if (i == len && j == klen)
			return v;
	}
	return NULL;
}

json_t *inbox__pointer_get(json_t *root, const char *ptr)
{
	if (!root || !inbox__pointer_valid(ptr))
		return NULL;
	json_t *cur = root;
	const char *p = ptr;
	while (cur && *p == '/') {
		const char *tok = p + 1;
		size_t len = strcspn(tok, "/");
		p = tok + len;
		if (json_is_object(cur)) {
			if (memchr(tok, '~', len))
				cur = member_escaped(cur, tok, len);
			else
				cur = json_object_getn(cur, tok, len);
		} else if (json_is_array(cur)) {
			size_t idx;
			if (parse_index(tok, len, json_array_size(cur), &idx) <
			    0)
				cur = NULL; /* also "-": past the end */
			else
				cur = json_array_get(cur, idx);
		} else {
			cur = NULL;
		}
	}
	return cur;
}

/* ------------------------------------------------------------------ */
/* Numbers: ECMAScript Number.prototype.toString                       */
/* ------------------------------------------------------------------ */

/* Lay out k significant digits (no leading or trailing zeros) with the
 * ECMAScript exponent n, value = 0.d1d2...dk * 10^n (ES2019 7.1.12.1). */
static int es_layout(inbox__buf *out, int neg, const char *d, int k, int n)
{
	char s[64];
	size_t o = 0;
	if (neg)
		s[o++] = '-';
	if (k <= n && n <= 21) {
		memcpy(s + o, d, (size_t)k);
		o += (size_t)k;
		for (int i = 0; i < n - k; i++)
			s[o++] = '0';
	} else if (0 < n && n <= 21) {
		memcpy(s + o, d, (size_t)n);
		o += (size_t)n;
		s[o++] = '.';
		memcpy(s + o, d + n, (size_t)(k - n));
		o += (size_t)(k - n);
	} else if (-6 < n && n <= 0) {
		s[o++] = '0';
		s[o++] = '.';
		for (int i = 0; i < -n; i++)
			s[o++] = '0';
		memcpy(s + o, d, (size_t)k);
		o += (size_t)k;
	} else {
		int e = n - 1;
		s[o++] = d[0];
		if (k > 1) {
			s[o++] = '.';
			memcpy(s + o, d + 1, (size_t)(k - 1));
			o += (size_t)(k - 1);
		}
		o += (size_t)snprintf(s + o, sizeof(s) - o, "e%c%d",
		                      e < 0 ? '-' : '+', e < 0 ? -e : e);
	}
	return inbox__buf_append(out, s, o);
}

/* Does the decimal digits * 10^exp10 read back as exactly x? */
static int round_trips(uint64_t digits, int exp10, double x)
{
	char s[48];
	snprintf(s, sizeof(s), "%llue%d", (unsigned long long)digits, exp10);
	return strtod(s, NULL) == x;
}

/* The nearest p-digit decimal to x (printf's correctly rounded %.*e), or
 * its neighbour on the other side of x — near a power of two the
 * rounding interval is lopsided — if one reads back as x: 1 and its
 * digits (x = digits * 10^exp10), else 0. */
static int digits_at(double x, int p, uint64_t *digits, int *exp10)
{
	char s[40];
	snprintf(s, sizeof(s), "%.*e", p - 1, x);
	uint64_t m = 0;
	const char *c = s;
	for (; *c && *c != 'e'; c++)
		if (*c >= '0' && *c <= '9')
			m = m * 10 + (uint64_t)(*c - '0');
	int e = atoi(c + 1) - (p - 1); /* x ~ m * 10^e */
	double back = strtod(s, NULL);
	uint64_t alt = back < x ? m + 1 : m - 1;
	if (back != x && !(alt > 0 && round_trips(alt, e, x)))
		return 0;
	*digits = back == x ? m : alt;
	*exp10 = e;
	return 1;
}

/* Shortest digits that round-trip to x (> 0, finite): the smallest
 * precision p for which some p-digit decimal reads back as x, and among
 * those the nearest to x. Whether one does can only grow with p (a
 * p-digit decimal is also a (p+1)-digit one), so p is found by bisection:
 * 5 or 6 conversions instead of up to 17 (a megabyte of 17-digit doubles
 * took a second). 17 digits always round-trip. */
static void shortest_digits(double x, uint64_t *digits, int *exp10)
{
	int lo = 1, hi = 17, found = 0;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		uint64_t d;
		int e;
		if (digits_at(x, mid, &d, &e)) {
			hi = mid;
			*digits = d;
			*exp10 = e;
			found = 1;
		} else {
			lo = mid + 1;
		}
	}
	if (!found)
		(void)digits_at(x, 17, digits, exp10);
}

/* An integer below 2^53 in magnitude: its decimal digits, which is what
 * the shortest round trip gives (no exponent below 1e21), without the
 * printf/strtod search. Most numbers in messages are such integers. */
static int small_integer_append(inbox__buf *out, double x)
{
	char d[24], *p = d + sizeof(d);
	uint64_t m = (uint64_t)(x < 0 ? -x : x);
	do {
		*--p = (char)('0' + m % 10);
		m /= 10;
	} while (m);
	if (x < 0)
		*--p = '-';
	return inbox__buf_append(out, p, (size_t)(d + sizeof(d) - p));
}

static int number_append(inbox__buf *out, double x)
{
	if (!isfinite(x))
		return -1;
	if (x == 0) /* also -0 */
		return inbox__buf_putc(out, '0');
	if (x > -9007199254740992.0 && x < 9007199254740992.0 &&
	    x == (double)(int64_t)x)
		return small_integer_append(out, x);
	int neg = x < 0;
	uint64_t m;
	int e;
	shortest_digits(neg ? -x : x, &m, &e);
	while (m % 10 == 0) {
		m /= 10;
		e++;
	}
	char d[24];
	int k = snprintf(d, sizeof(d), "%llu", (unsigned long long)m);
	return es_layout(out, neg, d, k, e + k);
}

/* ------------------------------------------------------------------ */
/* Canonical form                                                       */
/* ------------------------------------------------------------------ */

int inbox__json_string_append(inbox__buf *out, const char *s, size_t len)
{
	if (inbox__buf_reserve(out, len + 2) < 0 ||
	    inbox__buf_putc(out, '"') < 0)
		return -1;
	size_t run = 0; /* start of the pending literal run */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];
		const char *rep = NULL;
		switch (c) {
		case '"':
			rep = "\\\"";
			break;
		case '\\':
			rep = "\\\\";
			break;
		case '\b':
			rep = "\\b";
			break;
		case '\f':
			rep = "\\f";
			break;
		case '\n':
			rep = "\\n";
			break;
		case '\r':
			rep = "\\r";
			break;
		case '\t':
			rep = "\\t";
			break;
		default:
			if (c < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", c);
				rep = esc;
			}
		}
		if (!rep)
			continue;
		if (inbox__buf_append(out, s + run, i - run) < 0 ||
		    inbox__buf_puts(out, rep) < 0)
			return -1;
		run = i + 1;
	}
	if (inbox__buf_append(out, s + run, len - run) < 0)
		return -1;
	return inbox__buf_putc(out, '"');
}

typedef struct member {
	const char *key;
	size_t len;
	json_t *value;
} member;

/* Next code point of valid UTF-8 at *p (advanced). */
static uint32_t next_cp(const unsigned char **p)
{
	const unsigned char *s = *p;
	uint32_t c = s[0];
	if (c < 0x80) {
		*p = s + 1;
		return c;
	}
	if (c < 0xE0) {
		*p = s + 2;
		return ((c & 0x1F) << 6) | (s[1] & 0x3F);
	}
	if (c < 0xF0) {
		*p = s + 3;
		return ((c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) |
		       (s[2] & 0x3F);
	}
	*p = s + 4;
	return ((c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
	       ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

/* The first UTF-16 code unit of a code point: itself in the BMP, the lead
 * surrogate (D800..DBFF) above it. */
static uint32_t utf16_first_unit(uint32_t cp)
{
	if (cp < 0x10000)
		return cp;
	return 0xD800 + ((cp - 0x10000) >> 10);
}

/* Compare two valid UTF-8 strings as sequences of UTF-16 code units. UTF-8
 * byte order is code point order; the two differ only between U+E000..
 * U+FFFF and supplementary characters (surrogates D800..DFFF sort before
 * E000). */
static int utf16_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	const unsigned char *p = (const unsigned char *)a, *pe = p + alen;
	const unsigned char *q = (const unsigned char *)b, *qe = q + blen;
	while (p < pe && q < qe) {
		if (*p == *q && *p < 0x80) {
			p++;
			q++;
			continue;
		}
		uint32_t x = next_cp(&p), y = next_cp(&q);
		if (x == y)
			continue;
		uint32_t ux = utf16_first_unit(x), uy = utf16_first_unit(y);
		if (ux != uy)
			return ux < uy ? -1 : 1;
		/* Same lead surrogate: the trail surrogates are in code
		 * point order. */
		return x < y ? -1 : 1;
	}
	if (p < pe)
		return 1;
	if (q < qe)
		return -1;
	return 0;
}

static int member_cmp(const void *a, const void *b)
{
	const member *x = a, *y = b;
	return utf16_cmp(x->key, x->len, y->key, y->len);
}

static int canon(inbox__buf *out, const json_t *v);

static int object_append(inbox__buf *out, const json_t *obj)
{
	json_t *o = (json_t *)obj; /* the iteration API is not const */
	size_t n = json_object_size(o);
	if (n == 0)
		return inbox__buf_puts(out, "{}");
	member *ms = malloc(n * sizeof(*ms));
	if (!ms)
		return -1;
	size_t i = 0;
	for (void *it = json_object_iter(o); it && i < n;
	     it = json_object_iter_next(o, it), i++) {
		ms[i].key = json_object_iter_key(it);
		ms[i].len = json_object_iter_key_len(it);
		ms[i].value = json_object_iter_value(it);
	}
	n = i;
	qsort(ms, n, sizeof(*ms), member_cmp);
	int rc = inbox__buf_putc(out, '{');
	for (i = 0; rc == 0 && i < n; i++) {
		if (i && inbox__buf_putc(out, ',') < 0)
			rc = -1;
		else if (inbox__json_string_append(out, ms[i].key, ms[i].len) <
		             0 ||
		         inbox__buf_putc(out, ':') < 0 ||
		         canon(out, ms[i].value) < 0)
			rc = -1;
	}
	free(ms);
	if (rc == 0)
		rc = inbox__buf_putc(out, '}');
	return rc;
}

static int canon(inbox__buf *out, const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return object_append(out, v);
	case JSON_ARRAY: {
		if (inbox__buf_putc(out, '[') < 0)
			return -1;
		size_t n = json_array_size(v);
		for (size_t i = 0; i < n; i++) {
			if (i && inbox__buf_putc(out, ',') < 0)
				return -1;
			if (canon(out, json_array_get(v, i)) < 0)
				return -1;
		}
		return inbox__buf_putc(out, ']');
	}
	case JSON_STRING:
		return inbox__json_string_append(out, json_string_value(v),
		                                 json_string_length(v));
	case JSON_INTEGER:
		return number_append(out, (double)json_integer_value(v));
	case JSON_REAL:
		return number_append(out, json_real_value(v));
	case JSON_TRUE:
		return inbox__buf_puts(out, "true");
	case JSON_FALSE:
		return inbox__buf_puts(out, "false");
	case JSON_NULL:
		return inbox__buf_puts(out, "null");
	}
	return -1;
}

int inbox__canon_append(inbox__buf *out, const json_t *v)
{
	if (!v)
		return -1;
	size_t mark = out->len;
	int rc = canon(out, v);
	if (rc < 0 && out->data) { /* leave out as it was */
		out->len = mark;
		out->data[mark] = '\0';
	}
	return rc;
}

/* ------------------------------------------------------------------ */
/* Value text                                                           */
/* ------------------------------------------------------------------ */

int inbox__value_text(inbox__buf *out, const json_t *v)
{
	if (!v || json_is_null(v))
		return 1;
	/* Allocate even for "" so out->data is a valid C string. */
	if (inbox__buf_reserve(out, 0) < 0)
		return -1;
	switch (json_typeof(v)) {
	case JSON_STRING:
		return inbox__buf_append(out, json_string_value(v),
		                         json_string_length(v));
	case JSON_INTEGER:
		return inbox__buf_printf(out, "%" JSON_INTEGER_FORMAT,
		                         json_integer_value(v));
	case JSON_REAL:
		return number_append(out, json_real_value(v));
	default:
		return inbox__canon_append(out, v);
	}
}

/* ------------------------------------------------------------------ */
/* SHA-256                                                              */
/* ------------------------------------------------------------------ */

/* OpenSSL 3 looks the algorithm up (a locked provider query) on every
 * EVP_Digest(EVP_sha256()) call: a third of the cost of hashing a
 * message. Fetch it once; the implicit EVP_sha256() stays the fallback. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static int sha256(const void *data, size_t len, unsigned char *md,
                  unsigned int *mdlen)
{
	pthread_once(&sha256_once, sha256_fetch);
	return EVP_Digest(data, len, md, mdlen,
	                  sha256_md ? sha256_md : EVP_sha256(), NULL);
}

static void to_hex(const unsigned char *md, unsigned int mdlen, int ok,
                   char hex[65])
{
	static const char digits[] = "0123456789abcdef";
	if (!ok || mdlen != 32) {
		/* Only on allocation failure inside OpenSSL: an empty string
		 * never equals a real fingerprint. */
		hex[0] = '\0';
		return;
	}
	for (unsigned i = 0; i < 32; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 0x0F];
	}
	hex[64] = '\0';
}

void inbox__sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int ok = sha256(data ? data : "", len, md, &mdlen);
	to_hex(md, mdlen, ok, hex);
}

void inbox__sha256_parts_hex(const void *const *parts, const size_t *lens,
                             int n, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	pthread_once(&sha256_once, sha256_fetch);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int ok = ctx && EVP_DigestInit_ex(
	                    ctx, sha256_md ? sha256_md : EVP_sha256(), NULL);
	for (int i = 0; ok && i < n; i++)
		ok = EVP_DigestUpdate(ctx, parts[i] ? parts[i] : "", lens[i]);
	ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	to_hex(md, mdlen, ok, hex);
}
