/* JSON values as JSON Schema sees them: numbers compared by value (1 ==
 * 1.0), equality regardless of member order, short renderings for
 * messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/node.h"

int sch__num_of(const json_t *v, sch_num *n)
{
	if (json_is_integer(v)) {
		n->is_int = 1;
		n->i = json_integer_value(v);
		n->d = (double)n->i;
		return 1;
	}
	if (json_is_real(v)) {
		n->is_int = 0;
		n->i = 0;
		n->d = json_real_value(v);
		return 1;
	}
	return 0;
}

int sch__num_cmp(const sch_num *a, const sch_num *b)
{
	if (a->is_int && b->is_int)
		return a->i < b->i ? -1 : a->i > b->i;
	/* long double holds every int64 exactly on the platforms we build
	 * for (x86-64: 64-bit mantissa; aarch64: binary128). */
	long double x = a->is_int ? (long double)a->i : (long double)a->d;
	long double y = b->is_int ? (long double)b->i : (long double)b->d;
	return x < y ? -1 : x > y;
}

/* 2^52: every double at least this large is an integer. */
#define INTEGRAL_ABOVE 4503599627370496.0

double sch__round(double d)
{
	if (!isfinite(d) || d >= INTEGRAL_ABOVE || d <= -INTEGRAL_ABOVE)
		return d;
	return (double)(int64_t)(d >= 0 ? d + 0.5 : d - 0.5);
}

int sch__num_is_integer(const sch_num *n)
{
	if (n->is_int)
		return 1;
	if (!isfinite(n->d))
		return 0;
	if (n->d >= INTEGRAL_ABOVE || n->d <= -INTEGRAL_ABOVE)
		return 1;
	return n->d == (double)(int64_t)n->d;
}

/* A string of n bytes costs a step per 64 compared or hashed. */
static void charge(uint64_t *steps, size_t n)
{
	if (steps)
		*steps += 1 + n / 64;
}

int sch__json_equal(const json_t *a, const json_t *b, uint64_t *steps)
{
	sch_num x, y;
	charge(steps, 0);
	if (sch__num_of(a, &x))
		return sch__num_of(b, &y) && sch__num_cmp(&x, &y) == 0;
	if (json_typeof(a) != json_typeof(b))
		return 0;
	switch (json_typeof(a)) {
	case JSON_STRING:
		if (json_string_length(a) != json_string_length(b))
			return 0;
		charge(steps, json_string_length(a));
		return memcmp(json_string_value(a), json_string_value(b),
		              json_string_length(a)) == 0;
	case JSON_ARRAY: {
		size_t n = json_array_size(a);
		if (n != json_array_size(b))
			return 0;
		for (size_t i = 0; i < n; i++)
			if (!sch__json_equal(json_array_get(a, i),
			                     json_array_get(b, i), steps))
				return 0;
		return 1;
	}
	case JSON_OBJECT: {
		if (json_object_size(a) != json_object_size(b))
			return 0;
		const char *k;
		size_t klen;
		json_t *v;
		json_object_keylen_foreach((json_t *)a, k, klen, v)
		{
			charge(steps, klen);
			json_t *w = json_object_getn(b, k, klen);
			if (!w || !sch__json_equal(v, w, steps))
				return 0;
		}
		return 1;
	}
	default:
		return 1; /* true, false, null */
	}
}

static uint64_t mix(uint64_t h, uint64_t x)
{
	h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t sch__json_hash(const json_t *v, uint64_t *steps)
{
	sch_num n;
	charge(steps, 0);
	if (sch__num_of(v, &n)) {
		/* Equal numbers hash alike: integral values as integers. */
		if (!n.is_int && sch__num_is_integer(&n) && n.d >= -9.2e18 &&
		    n.d <= 9.2e18) {
			n.is_int = 1;
			n.i = (json_int_t)n.d;
		}
		if (n.is_int)
			return mix(1, (uint64_t)n.i);
		double d = n.d;
		uint64_t bits;
		memcpy(&bits, &d, sizeof(bits));
		return mix(2, bits);
	}
	switch (json_typeof(v)) {
	case JSON_STRING:
		charge(steps, json_string_length(v));
		return mix(
		    3, hash_bytes(json_string_value(v), json_string_length(v)));
	case JSON_ARRAY: {
		uint64_t h = 4;
		for (size_t i = 0; i < json_array_size(v); i++)
			h = mix(h, sch__json_hash(json_array_get(v, i), steps));
		return h;
	}
	case JSON_OBJECT: {
		uint64_t sum = 0; /* member order does not matter */
		const char *k;
		size_t klen;
		json_t *m;
		json_object_keylen_foreach((json_t *)v, k, klen, m)
		{
			charge(steps, klen);
			sum +=
			    mix(hash_bytes(k, klen), sch__json_hash(m, steps));
		}
		return mix(5, sum);
	}
	case JSON_TRUE:
		return 6;
	case JSON_FALSE:
		return 7;
	default:
		return 8;
	}
}

/* ---- rendering for messages ----------------------------------------- */

typedef struct out {
	char *p;
	size_t left; /* bytes available, NUL excluded */
	size_t budget;
	int cut;
} out;

static void put(out *o, const char *s, size_t n)
{
	if (o->cut)
		return;
	if (n > o->budget || n > o->left) {
		size_t m = o->budget < o->left ? o->budget : o->left;
		/* do not cut inside a UTF-8 sequence */
		while (m > 0 && m < n && ((unsigned char)s[m] & 0xC0) == 0x80)
			m--;
		memcpy(o->p, s, m);
		o->p += m;
		o->left -= m;
		o->cut = 1;
		const char *dots = "...";
		size_t d = strlen(dots) < o->left ? strlen(dots) : o->left;
		memcpy(o->p, dots, d);
		o->p += d;
		o->left -= d;
		return;
	}
	memcpy(o->p, s, n);
	o->p += n;
	o->left -= n;
	o->budget -= n;
}

static void puts_(out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void put_num(out *o, const sch_num *n)
{
	char b[40];
	sch__render_num(b, sizeof(b), n);
	puts_(o, b);
}

static void put_str(out *o, const char *s, size_t len)
{
	put(o, "\"", 1);
	size_t run = 0;
	for (size_t i = 0; i < len && !o->cut; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put(o, s + run, i - run);
		char e[8];
		if (c == '"' || c == '\\')
			snprintf(e, sizeof(e), "\\%c", c);
		else if (c == '\n')
			snprintf(e, sizeof(e), "\\n");
		else if (c == '\t')
			snprintf(e, sizeof(e), "\\t");
		else
			snprintf(e, sizeof(e), "\\u%04x", c);
		puts_(o, e);
		run = i + 1;
	}
	put(o, s + run, len - run);
	put(o, "\"", 1);
}

static void put_value(out *o, const json_t *v)
{
	sch_num n;
	if (o->cut)
		return;
	if (sch__num_of(v, &n)) {
		put_num(o, &n);
		return;
	}
	switch (json_typeof(v)) {
	case JSON_STRING:
		put_str(o, json_string_value(v), json_string_length(v));
		return;
	case JSON_ARRAY:
		put(o, "[", 1);
		for (size_t i = 0; i < json_array_size(v) && !o->cut; i++) {
			if (i)
				put(o, ", ", 2);
			put_value(o, json_array_get(v, i));
		}
		put(o, "]", 1);
		return;
	case JSON_OBJECT: {
		const char *k;
		size_t klen;
		json_t *m;
		int first = 1;
		put(o, "{", 1);
		json_object_keylen_foreach((json_t *)v, k, klen, m)
		{
			if (o->cut)
				break;
			if (!first)
				put(o, ", ", 2);
			first = 0;
			put_str(o, k, klen);
			put(o, ": ", 2);
			put_value(o, m);
		}
		put(o, "}", 1);
		return;
	}
	case JSON_TRUE:
		puts_(o, "true");
		return;
	case JSON_FALSE:
		puts_(o, "false");
		return;
	default:
		puts_(o, "null");
		return;
	}
}

void sch__render(char *buf, size_t buflen, const json_t *v, size_t budget)
{
	if (!buflen)
		return;
	out o = {buf, buflen - 1, budget, 0};
	put_value(&o, v);
	*o.p = '\0';
}

void sch__render_str(char *buf, size_t buflen, const char *s, size_t len,
                     size_t budget)
{
	if (!buflen)
		return;
	out o = {buf, buflen - 1, budget, 0};
	put_str(&o, s, len);
	*o.p = '\0';
}

void sch__render_num(char *buf, size_t buflen, const sch_num *n)
{
	if (n->is_int) {
		snprintf(buf, buflen, "%" JSON_INTEGER_FORMAT, n->i);
		return;
	}
	/* the shortest text that reads back as the same double */
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, buflen, "%.*g", prec, n->d);
		if (strtod(buf, NULL) == n->d)
			return;
	}
}

size_t sch__utf8_count(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			n++;
	return n;
}

int sch__ptr_append(inbox__buf *b, const char *tok, size_t len)
{
	if (inbox__buf_putc(b, '/') < 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		int rc;
		if (tok[i] == '~')
			rc = inbox__buf_puts(b, "~0");
		else if (tok[i] == '/')
			rc = inbox__buf_puts(b, "~1");
		else
			rc = inbox__buf_putc(b, tok[i]);
		if (rc < 0)
			return -1;
	}
	return 0;
}
